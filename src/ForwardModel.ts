import type { CacheOptions } from './CacheOptions.js'
import type { Grammar } from './Grammar.js'
import type { GrammarSpec } from './GrammarSpec.js'
import type { ForwardOptions, ForwardResult } from './Model.js'
import type { ModelInfo } from './ModelInfo.js'
import type { RowCache } from './RowCache.js'
import type { Tokenizer } from './Tokenizer.js'

/**
 * What an `Engine` needs of a model: `Model` is one, as it stands. Another, scripted with no
 * weights, lets a test decide every logit the Engine sees (as nanochat's test_engine.py mocks its
 * model). `C` is the cache its `forward` runs in.
 */
export interface ForwardModel<C extends RowCache = RowCache> {
  readonly info: Pick<ModelInfo, 'vocabSize' | 'contextLength' | 'eogTokens' | 'device'>
  /** Text for the rows' streams and stop strings, and for tool calls and their answers. */
  readonly tokenizer: Pick<Tokenizer, 'encode' | 'decode' | 'createDecoder'>
  /** As `Model.forward`: appends `tokens[row]` to each row of `cache`; on error or abort the cache is left as it was. */
  forward(cache: C, tokens: ArrayLike<number>[], options?: ForwardOptions): Promise<ForwardResult>
  createCache(batchSize: number, capacity: number): C
  /** Bytes of K and V `createCache(batchSize, capacity)` would hold. */
  cacheBytes(batchSize: number, capacity: number, options?: CacheOptions): number
  /** As `Model.compileGrammar`; a model without it cannot run `jsonSchema`, `grammar` or `regex`. */
  compileGrammar?(spec: GrammarSpec): Promise<Grammar>
}
