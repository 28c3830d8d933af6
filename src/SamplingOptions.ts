/**
 * How the next token is picked from the logits. Filters apply in vLLM/Hugging Face order:
 * temperature, then top-k, then top-p, then min-p.
 */
export interface SamplingOptions {
  /** Divides the logits before the softmax. 0 means greedy: argmax, and the seed is ignored. Default 1. */
  temperature?: number
  /** Keep only the k most likely tokens. 0 turns it off. Default 0. */
  topK?: number
  /**
   * Keep the smallest set of most likely tokens whose probability (after top-k) reaches p, in
   * (0, 1]. 1 turns it off. Default 1.
   */
  topP?: number
  /** Drop tokens less likely than minP × the most likely token's probability, in [0, 1]. 0 turns it off. Default 0. */
  minP?: number
  /**
   * An integer in [0, 2^53]: the same seed and inputs give the same tokens. Default: a random
   * seed per generation.
   */
  seed?: number
}
