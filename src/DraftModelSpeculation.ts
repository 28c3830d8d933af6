import type { ForwardModel } from './ForwardModel.js'

/**
 * A smaller model of the same vocabulary drafts greedily (a quantized or truncated copy of the
 * target, say), in a cache of its own that follows the rows. Its drafts are its top tokens, so
 * accepting a drafted position exactly when the target's own sample equals it is the
 * rejection-sampling rule for a draft that puts all its probability on one token.
 */
export interface DraftModelSpeculation {
  method: 'draft_model'
  /** The draft model: its vocabulary size must equal the target's. It is not disposed. */
  model: ForwardModel
  /** Tokens drafted per pass, at most (1..32). Default 4. */
  numSpeculativeTokens?: number
}
