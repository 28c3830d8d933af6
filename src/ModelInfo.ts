/** What a loaded model is, as read from its files. */
export interface ModelInfo {
  architecture: string
  /** e.g. "gguf f32+q4_1+q8_0" or "safetensors". */
  format: string
  vocabSize: number
  hiddenSize: number
  nLayers: number
  nHeads: number
  nKvHeads: number
  headDim: number
  contextLength: number
  bosToken?: number
  eosToken?: number
  addBosToken: boolean
  /** Tokens that end a turn (EOS and the chat format's end-of-turn marker). */
  eogTokens: number[]
  hasChatTemplate: boolean
}
