import type { DraftModelSpeculation } from './DraftModelSpeculation.js'
import { DraftModel } from './DraftModel.js'
import type { Drafter } from './Drafter.js'
import type { ForwardModel } from './ForwardModel.js'
import { KvEngineError } from './KvEngineError.js'
import type { NgramSpeculation } from './NgramSpeculation.js'
import { PromptLookup } from './PromptLookup.js'
import type { SpeculativeOptions } from './SpeculativeOptions.js'
import { checkInteger } from './checkInteger.js'
import { checkOptionKeys } from './checkOptionKeys.js'

/** A checked `speculative`: the most a call drafts, and how to make the generation's drafter. */
export interface Speculation {
  maxDraft: number
  /** The drafter for `rowCount` rows, `capacity` positions each to begin with. */
  create(rowCount: number, capacity: number): Drafter
}

const NGRAM_KEYS: Record<keyof NgramSpeculation, true> = { method: true, numSpeculativeTokens: true, promptLookupMax: true, promptLookupMin: true }
const DRAFT_MODEL_KEYS: Record<keyof DraftModelSpeculation, true> = { method: true, model: true, numSpeculativeTokens: true }

/**
 * `GenerateOptions.speculative` checked against `target` (the model that verifies), as a factory
 * for the generation's drafter; null without it. `reach` is the most positions a row of the
 * generation can hold (the prompt and `maxTokens`): a draft model must have the context for them.
 */
export function speculationOf(options: SpeculativeOptions | undefined, target: ForwardModel, reach: number): Speculation | null {
  if (options === undefined) return null
  const method = typeof options === 'object' && options !== null ? options.method : undefined
  if (method === 'ngram') {
    checkOptionKeys<NgramSpeculation>(options, NGRAM_KEYS, "speculative (method 'ngram')")
    const { numSpeculativeTokens = 8, promptLookupMax = 4 } = options as NgramSpeculation
    checkInteger('speculative.numSpeculativeTokens', numSpeculativeTokens, 1, 32)
    checkInteger('speculative.promptLookupMax', promptLookupMax, 1, 16)
    const { promptLookupMin = Math.min(2, promptLookupMax) } = options as NgramSpeculation
    checkInteger('speculative.promptLookupMin', promptLookupMin, 1, promptLookupMax, ' (at most promptLookupMax)')
    return { maxDraft: numSpeculativeTokens, create: () => new PromptLookup(numSpeculativeTokens, promptLookupMax, promptLookupMin) }
  }
  if (method === 'draft_model') {
    checkOptionKeys<DraftModelSpeculation>(options, DRAFT_MODEL_KEYS, "speculative (method 'draft_model')")
    const { model, numSpeculativeTokens = 4 } = options as DraftModelSpeculation
    checkInteger('speculative.numSpeculativeTokens', numSpeculativeTokens, 1, 32)
    const isModel = typeof model === 'object' && model !== null && typeof model.forward === 'function' && typeof model.createCache === 'function'
    if (!isModel) throw new KvEngineError('INVALID_ARGUMENT', 'speculative.model must be a loaded model (Model.load) to draft with')
    if (model.info.vocabSize !== target.info.vocabSize) {
      throw new KvEngineError('INVALID_ARGUMENT', `speculative.model has a vocabulary of ${model.info.vocabSize} tokens and this model ${target.info.vocabSize}: a draft model must share the vocabulary`)
    }
    // Drafts never run past the rows' own reach (BurstLedger.passesFor bounds them), so the draft
    // cache holds no more positions than the target's.
    if (reach > model.info.contextLength) {
      throw new KvEngineError('INVALID_ARGUMENT', `the draft model's context is ${model.info.contextLength}, but this generation's rows reach ${reach} positions; lower maxTokens or use a draft model with a longer context`)
    }
    return {
      maxDraft: numSpeculativeTokens,
      create: (rowCount, capacity) => new DraftModel(model, numSpeculativeTokens, rowCount, Math.min(capacity + numSpeculativeTokens, model.info.contextLength)),
    }
  }
  checkOptionKeys<NgramSpeculation | DraftModelSpeculation>(options, { ...NGRAM_KEYS, ...DRAFT_MODEL_KEYS }, 'speculative')
  throw new KvEngineError('INVALID_ARGUMENT', `speculative.method must be 'ngram' (prompt lookup) or 'draft_model', got ${JSON.stringify(method)}`)
}
