import type { KvCache } from './KvCache.js'
import type { SamplingOptions } from './SamplingOptions.js'
import type { ToolUse } from './ToolUse.js'

export interface GenerateOptions extends SamplingOptions {
  /** Completions per prompt. The prompt is prefilled once and its cache row copied. Default 1. */
  numSamples?: number
  /** Tokens to generate per row at most. Default: whatever the context has left. */
  maxTokens?: number
  /** Strings that end a row; the text returned stops before them. */
  stop?: string[]
  /**
   * Token ids that end a row. Default: the model's end-of-turn tokens (`model.info.eogTokens`),
   * plus `<|assistant_end|>` and `<|bos|>` for a model with nanochat's vocabulary.
   */
  stopTokens?: number[]
  /**
   * Tools the model may call, each answering calls written between its delimiter tokens; the
   * answer is forced into the row (mask 0) and counts toward `maxTokens`. Default: nanochat's
   * calculator between `<|python_start|>`/`<|python_end|>` for a model with nanochat's
   * vocabulary, none otherwise. `false` turns them off.
   */
  tools?: ToolUse[] | false
  /** Aborting ends generation promptly with a KvEngineError('ABORTED'); the model stays usable. */
  signal?: AbortSignal
  /**
   * Generate into this cache instead of a fresh one: made once (`model.createCache(rows, positions)`,
   * the cost of a llama.cpp context) and used for many generations, or to continue rows it
   * already holds (multi-turn chat without re-prefilling history). It needs one row per prompt
   * and sample: prompt i's first sample continues row `i × numSamples`, and the other samples'
   * rows are overwritten with copies of it after the prefill (`cache.reset()` empties them
   * all). The cache is left holding everything fed through the model, and is not disposed.
   */
  cache?: KvCache
  /**
   * Greedy decode steps run natively per call into the engine (vLLM's multi-step scheduling):
   * when every live row decodes greedily with no forced tokens queued, the model feeds each row
   * its own top token for up to this many passes before TypeScript sees them. Tokens and text
   * are the same as with 1; steps then arrive in bursts, and a row that stops inside a burst
   * costs the passes after it (they are rewound from the cache). Default 4; 1 returns after
   * every token.
   */
  multiStep?: number
}
