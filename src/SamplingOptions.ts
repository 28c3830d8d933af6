export interface SamplingOptions {
  /** Softmax temperature. 0 is greedy (argmax, the seed is ignored). Default 1. */
  temperature?: number
  /** Keep only the k most likely tokens. 0 (default) disables it. */
  topK?: number
  /** Keep the smallest set of tokens whose probability reaches p, in (0, 1]. 1 (default) disables it. */
  topP?: number
  /** Drop tokens less likely than minP × the top token's probability, in [0, 1]. 0 (default) disables it. */
  minP?: number
  /** Seed for reproducible sampling: the same seed and inputs give the same tokens. */
  seed?: number
}
