import type { FinishReason } from './FinishReason.js'
import type { TokenLogprobs } from './TokenLogprobs.js'

/** One step of generation: one entry per row (rows are prompt-major: prompt p, sample s is row
 * p * numSamples + s), as nanochat's Engine yields its token column. */
export interface GenerateStep {
  /** The token each row produced this step; -1 for rows that had already finished. */
  tokenColumn: number[]
  /** 1 where the token was sampled, 0 where it was forced or the row had finished. */
  tokenMasks: number[]
  /** Text each row completed this step: whole characters only, stop strings held back. */
  text: string[]
  /** Why a row ended, on the step it ended; null otherwise. */
  finished: (FinishReason | null)[]
  /** With `GenerateOptions.logprobs`: each row's sampled token's log-probability and the step's
   * most likely tokens; null where the token was forced or the row had finished. */
  logprobs?: (TokenLogprobs | null)[]
}
