import type { DraftModelSpeculation } from './DraftModelSpeculation.js'
import type { NgramSpeculation } from './NgramSpeculation.js'

/**
 * Speculative decoding, in the shape of vLLM's `speculative_config`: `ngram` (prompt lookup) or
 * `draft_model`. Each pass drafts tokens after every row's last and checks them all in one
 * forward pass of the model. Each drafted position is sampled exactly as without drafting (same
 * sampler, same random draw), and a row keeps the drafts up to the first its sample differs
 * from, so the output is the same token for token, greedy or not; only its speed changes.
 */
export type SpeculativeOptions = NgramSpeculation | DraftModelSpeculation
