import type { KvCache } from './KvCache.js'
import type { SamplingOptions } from './SamplingOptions.js'

export interface GenerateOptions extends SamplingOptions {
  /** Completions per prompt. The prompt is prefilled once and its cache row copied. Default 1. */
  numSamples?: number
  /** Tokens to generate per row at most. Default: whatever the context has left. */
  maxTokens?: number
  /** Strings that end a row; the text returned stops before them. */
  stop?: string[]
  /** Token ids that end a row. Default: the model's end-of-turn tokens (`model.info.eogTokens`). */
  stopTokens?: number[]
  /** Aborting ends generation promptly with a KvEngineError('ABORTED'); the model stays usable. */
  signal?: AbortSignal
  /**
   * Continue rows already held in this cache instead of starting fresh (multi-turn chat without
   * re-prefilling history). Needs one row per prompt and `numSamples: 1`; the cache is left
   * holding everything that was fed through the model, and is not disposed.
   */
  cache?: KvCache
}
