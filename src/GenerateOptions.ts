import type { KvCache } from './KvCache.js'
import type { RowCache } from './RowCache.js'
import type { SamplingOptions } from './SamplingOptions.js'
import type { SpeculativeOptions } from './SpeculativeOptions.js'
import type { ToolUse } from './ToolUse.js'

/** @typeParam C - The cache the Engine's model runs in: `KvCache` for a `Model`. */
export interface GenerateOptions<C extends RowCache = KvCache> extends SamplingOptions {
  /** Completions per prompt. The prompt is prefilled once and its cache row copied. Default 1. */
  numSamples?: number
  /**
   * Tokens to generate per row at most. The prompt and this many tokens must fit in the model's
   * context (`model.info.contextLength`), or the call fails at once with CONTEXT_OVERFLOW.
   * Default: whatever the context has left.
   */
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
   * One generation at a time: while one runs in it (until it finishes, fails, is aborted or its
   * iterator is closed), another given the same cache throws a KvEngineError('BUSY'). What the
   * rows already hold counts toward the model's context along with the prompt and `maxTokens`.
   */
  cache?: C
  /**
   * Greedy decode steps run natively per call into the engine (vLLM's multi-step scheduling):
   * when every live row decodes greedily with no forced tokens queued, the model feeds each row
   * its own top token for up to this many passes before TypeScript sees them. Tokens and text
   * are the same as with 1; steps then arrive in bursts, and a row that stops inside a burst
   * costs the passes after it (they are rewound from the cache). Default 4; 1 returns after
   * every token.
   */
  multiStep?: number
  /**
   * Bytes of K/V this generation's cache may come to hold at most: rows × the positions they can
   * reach (prompt plus `maxTokens`, at most the context) × bytes per position
   * (`model.cacheBytes(1, 1)`). A generation that could need more fails at once with
   * INVALID_ARGUMENT, before anything is reserved. Without it, a fresh cache's up-front
   * reservation is checked against the memory the system has available (CPU models);
   * `Infinity` turns both checks off.
   */
  maxMemory?: number
  /**
   * A JSON Schema every row's output must match (an object, or its JSON text): each step's
   * logits are masked to the tokens the schema allows next, whatever the sampler, and a row
   * ends once the value is complete. Written compactly unless the schema sets llguidance's
   * `x-guidance` options. One of `jsonSchema`, `grammar` and `regex`; not with `tools`, and
   * greedy rows then decode one pass per call (`multiStep` has no effect).
   */
  jsonSchema?: object | string
  /** As `jsonSchema`, for a Lark grammar in llguidance's dialect (its `start` rule is the output). */
  grammar?: string
  /** As `jsonSchema`, for a regular expression the whole output matches. */
  regex?: string
  /**
   * Report each sampled token's log-probability (`GenerateStep.logprobs`), with this many of the
   * step's most likely tokens (0 to 20): log-softmax of the logits it was drawn from, before
   * temperature, top-k or top-p. The rows then read whole logits rather than native candidates,
   * and greedy rows run one pass per call.
   */
  logprobs?: number
  /**
   * Speculative decoding (see SpeculativeOptions): the same tokens, faster where the output
   * repeats its prompt (rewriting, extracting, editing code). Not with `jsonSchema`, `grammar`,
   * `regex` or `logprobs`. Off by default.
   */
  speculative?: SpeculativeOptions
}
