import { DraftBackoff } from './DraftBackoff.js'
import type { Drafter } from './Drafter.js'
import type { RowState } from './RowState.js'

/** The n-gram drafter behind `speculative: { method: 'ngram' }` (see NgramSpeculation). */
export class PromptLookup implements Drafter {
  readonly maxDraft: number
  readonly backoff = new DraftBackoff()
  readonly #longest: number
  readonly #shortest: number

  constructor(maxDraft: number, longest: number, shortest: number) {
    this.maxDraft = maxDraft
    this.#longest = longest
    this.#shortest = shortest
  }

  async draftRows(rows: RowState[], prompts: Uint32Array[], numSamples: number, room: number): Promise<number[][] | null> {
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

  dispose(): void {}
}
