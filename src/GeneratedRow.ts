import type { FinishReason } from './FinishReason.js'
import type { TokenLogprobs } from './TokenLogprobs.js'

export interface GeneratedRow {
  /** Generated tokens, without the ending end-of-turn token. */
  tokens: number[]
  /** Per token: 1 sampled, 0 forced. */
  masks: number[]
  text: string
  finishReason: FinishReason
  /** With `GenerateOptions.logprobs`: per token, its log-probabilities (null where forced). */
  logprobs?: (TokenLogprobs | null)[]
}
