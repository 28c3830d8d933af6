/**
 * Prompt lookup: where the last few tokens of a row occurred before in its prompt or output, the
 * tokens that followed them then are the draft. No second model is needed.
 */
export interface NgramSpeculation {
  method: 'ngram'
  /** Tokens drafted per pass, at most (1..32). Default 8. */
  numSpeculativeTokens?: number
  /** The longest suffix looked up (1..16). Default 4. */
  promptLookupMax?: number
  /** The shortest suffix looked up (1..`promptLookupMax`). Default 2: single tokens recur too often by chance. */
  promptLookupMin?: number
}
