import { checkInteger } from './checkInteger.js'
import { checkOptionKeys } from './checkOptionKeys.js'
import { KvEngineError } from './KvEngineError.js'
import type { RowState } from './RowState.js'
import type { SpeculativeOptions } from './SpeculativeOptions.js'

const KEYS: Record<keyof SpeculativeOptions, true> = { method: true, numSpeculativeTokens: true, promptLookupMax: true, promptLookupMin: true }

/** Plain calls skipped after a poor draft, at most: a draft is retried within 32 calls. */
const MAX_BACKOFF = 32

/**
 * The n-gram drafter behind `speculative: { method: 'ngram' }` (see SpeculativeOptions), one per
 * generation. Drafting backs off where drafts fail: in free text a suffix often recurs by
 * chance, and a drafted call that keeps few of its tokens costs more than the greedy burst it
 * replaced, so after each poor draft the next few calls (twice as many each time) go plain.
 */
export class PromptLookup {
  readonly maxDraft: number
  readonly #longest: number
  readonly #shortest: number
  #backoff = 0
  #skip = 0

  private constructor(maxDraft: number, longest: number, shortest: number) {
    this.maxDraft = maxDraft
    this.#longest = longest
    this.#shortest = shortest
  }

  /** The drafter `options` ask for, checked; null without options. */
  static from(options: SpeculativeOptions | undefined): PromptLookup | null {
    if (options === undefined) return null
    checkOptionKeys<SpeculativeOptions>(options, KEYS, 'speculative')
    if (options.method !== 'ngram') {
      throw new KvEngineError('INVALID_ARGUMENT', `speculative.method must be 'ngram' (prompt lookup; draft models are not supported yet), got ${JSON.stringify(options.method)}`)
    }
    const { numSpeculativeTokens = 8, promptLookupMax = 4 } = options
    checkInteger('speculative.numSpeculativeTokens', numSpeculativeTokens, 1, 32)
    checkInteger('speculative.promptLookupMax', promptLookupMax, 1, 16)
    const { promptLookupMin = Math.min(2, promptLookupMax) } = options
    checkInteger('speculative.promptLookupMin', promptLookupMin, 1, promptLookupMax, ' (at most promptLookupMax)')
    return new PromptLookup(numSpeculativeTokens, promptLookupMax, promptLookupMin)
  }

  /** Whether to look for a draft for the next call (each plain call counts down a backoff). */
  wants(): boolean {
    if (this.#skip === 0) return true
    this.#skip--
    return false
  }

  /**
   * A drafted call kept `kept` of its tokens. Two or more pay for it (on SmolLM2-135M, a call
   * of nine tokens costs about what three plain decode steps do): the backoff resets; fewer
   * double it.
   */
  judge(kept: number): void {
    this.#backoff = kept >= 2 ? 0 : Math.min(Math.max(2 * this.#backoff, 1), MAX_BACKOFF)
    this.#skip = this.#backoff
  }

  /**
   * The tokens a drafted call feeds each live row after its last (row r continues prompt
   * ⌊r / numSamples⌋), all cut to one length so every row runs the same passes, at most `room`;
   * null, for a plain call, where a live row has no draft or no room is left. A row in a tool
   * call gets no room (BurstLedger.passesFor): its forced answer would differ from any draft.
   */
  draftRows(rows: RowState[], prompts: Uint32Array[], numSamples: number, room: number): number[][] | null {
    let shortest = room
    const drafts = rows.map((s, r) => {
      if (s.completed || shortest <= 0) return []
      const draft = this.draft(prompts[Math.floor(r / numSamples)], s.tokens, shortest)
      shortest = Math.min(shortest, draft.length)
      return draft
    })
    return shortest <= 0 ? null : drafts.map((d) => d.slice(0, shortest))
  }

  /**
   * Up to `limit` tokens that followed the latest earlier occurrence of the longest suffix of
   * `prompt` + `output` that occurred before; none when no suffix of the lengths allowed did.
   */
  draft(prompt: ArrayLike<number>, output: readonly number[], limit: number): number[] {
    const length = prompt.length + output.length
    const at = (i: number) => (i < prompt.length ? prompt[i] : output[i - prompt.length])
    for (let n = Math.min(this.#longest, length - 1); n >= this.#shortest; n--) {
      const suffix = length - n
      // The latest start whose n tokens match the suffix, leaving at least one token after it.
      for (let start = suffix - 1; start >= 0; start--) {
        let k = 0
        while (k < n && at(start + k) === at(suffix + k)) k++
        if (k < n) continue
        const end = Math.min(start + n + limit, length)
        return Array.from({ length: end - start - n }, (_, i) => at(start + n + i))
      }
    }
    return []
  }
}
