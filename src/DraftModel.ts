import { Candidates } from './Candidates.js'
import { DraftBackoff } from './DraftBackoff.js'
import type { Drafter } from './Drafter.js'
import type { ForwardModel } from './ForwardModel.js'
import type { RowCache } from './RowCache.js'
import type { RowState } from './RowState.js'

/**
 * The drafter behind `speculative: { method: 'draft_model' }` (see DraftModelSpeculation): a
 * second model drafts each row's next tokens greedily, all rows in one call of `maxDraft`
 * passes, in a cache of its own. That cache follows the rows lazily: before each draft, a row is
 * cut back to what it shares with the row's tokens and fed the rest, so tokens the target
 * rejected, forced answers and plain calls in between all come right there.
 */
export class DraftModel implements Drafter {
  readonly maxDraft: number
  readonly backoff = new DraftBackoff()
  readonly #model: ForwardModel
  readonly #cache: RowCache
  /** Per row, the tokens its row of the draft cache holds. */
  readonly #held: number[][]
  readonly #picks: Candidates

  constructor(model: ForwardModel, maxDraft: number, rowCount: number, capacity: number) {
    this.maxDraft = maxDraft
    this.#model = model
    this.#cache = model.createCache(rowCount, capacity)
    this.#held = Array.from({ length: rowCount }, () => [])
    this.#picks = new Candidates(new Uint32Array(rowCount * maxDraft), new Float32Array(rowCount * maxDraft), 1)
  }

  async draftRows(rows: RowState[], prompts: Uint32Array[], numSamples: number, room: number): Promise<number[][] | null> {
    const passes = Math.min(room, this.maxDraft)
    if (passes < 1) return null
    const feeds = rows.map((s, r) => (s.completed ? [] : this.#catchUp(r, prompts[Math.floor(r / numSamples)], s.tokens)))
    const { rows: fedRows, candidates } = await this.#model.forward(this.#cache, feeds, { candidates: 1, logits: false, candidatesInto: this.#picks, greedySteps: passes })
    const { ids } = candidates as Candidates
    const order = new Int32Array(rows.length).fill(-1)
    fedRows.forEach((row, i) => (order[row] = i))
    // Pass p's top token for the i-th fed row is ids[p × fed + i].
    return rows.map((_, r) => {
      const i = order[r]
      if (i < 0) return []
      const draft = Array.from({ length: passes }, (_, p) => ids[p * fedRows.length + i])
      // The passes fed every drafted token but the last.
      this.#held[r].push(...draft.slice(0, -1))
      return draft
    })
  }

  /**
   * Cuts row `r` of the draft cache back to the longest prefix it shares with `prompt` +
   * `output` (short of the last token, which is fed again for the logits after it) and returns
   * the tokens to feed it from there.
   */
  #catchUp(r: number, prompt: Uint32Array, output: readonly number[]): number[] {
    const held = this.#held[r]
    const length = prompt.length + output.length
    const at = (i: number) => (i < prompt.length ? prompt[i] : output[i - prompt.length])
    let keep = 0
    const most = Math.min(held.length, length - 1)
    while (keep < most && held[keep] === at(keep)) keep++
    if (keep < held.length) {
      this.#cache.truncateRow(r, keep)
      held.length = keep
    }
    const feed = Array.from({ length: length - keep }, (_, i) => at(keep + i))
    held.push(...feed)
    return feed
  }

  dispose(): void {
    this.#cache.dispose()
  }
}
