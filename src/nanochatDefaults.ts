import { lookupToken } from './lookupToken.js'
import type { Tokenizer } from './Tokenizer.js'
import type { ToolUse } from './ToolUse.js'

/** What a generation defaults to for a model with nanochat's vocabulary. */
interface NanochatDefaults {
  /** The calculator between nanochat's python and output delimiters. */
  tools: ToolUse[]
  /** nanochat's Engine ends a row on `<|assistant_end|>` and on `<|bos|>`. */
  stopTokens: number[]
}

const NAMES = ['<|bos|>', '<|assistant_end|>', '<|python_start|>', '<|python_end|>', '<|output_start|>', '<|output_end|>'] as const

/** nanochat's defaults when the vocabulary has all of its special tokens; null otherwise. */
export function nanochatDefaults(tokenizer: Pick<Tokenizer, 'encode' | 'decode'>): NanochatDefaults | null {
  const ids = NAMES.map((name) => lookupToken(tokenizer, name))
  if (ids.some((id) => id === undefined)) return null
  const [bos, assistantEnd, callStart, callEnd, outputStart, outputEnd] = ids as number[]
  return {
    tools: [{ tool: 'calculator', delimiters: { callStart, callEnd, outputStart, outputEnd } }],
    stopTokens: [assistantEnd, bos],
  }
}
