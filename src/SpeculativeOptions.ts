/**
 * Speculative decoding, in the shape of vLLM's `speculative_config`. `ngram` ("prompt lookup")
 * drafts with no second model: where the last few tokens of a row occurred before in its prompt
 * or output, the tokens that followed them then are proposed, and all of them are checked in one
 * forward pass. Each drafted position is sampled exactly as without drafting (same sampler, same
 * random draws), and the row keeps the drafts up to the first one its sample differs from, so
 * the output is the same token for token, greedy or not; only its speed changes.
 */
export interface SpeculativeOptions {
  method: 'ngram'
  /** Tokens drafted per pass, at most (1..32). Default 8. */
  numSpeculativeTokens?: number
  /** The longest suffix looked up (1..16). Default 4. */
  promptLookupMax?: number
  /** The shortest suffix looked up (1..`promptLookupMax`). Default 2: single tokens recur too often by chance. */
  promptLookupMin?: number
}
