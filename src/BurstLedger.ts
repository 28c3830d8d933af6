import type { GenerateStep } from './GenerateStep.js'
import type { RowCache } from './RowCache.js'
import type { RowState } from './RowState.js'

/** Adds one to each row that has a token in `step`. */
function countTokens(step: GenerateStep, counts: Int32Array): void {
  step.tokenColumn.forEach((token, r) => token >= 0 && counts[r]++)
}

/**
 * The greedy-burst protocol, owned in one place. A call into the model may run several passes
 * (a burst), each feeding every live row the model's own top token, or feed each row drafted
 * tokens after its last (speculative decoding: a pass per token); the rows then take their
 * tokens one pass at a time, and a row that takes another one (a forced token, a stop string, a
 * finish, a sample other than its draft) was fed passes past it. The invariant, restored by
 * every rewind: a row's cache holds its prompt and every counted token but the last, which the
 * next call feeds, and no more.
 *
 * Row lengths are tracked here, not read from the cache, which a call in flight is writing.
 */
export class BurstLedger {
  /** Positions the prefill left in each row. */
  readonly #prefilled: Int32Array
  /** Positions each row's cache holds as of the last call that landed. */
  readonly #held: Int32Array
  /** Tokens each row has taken into its state. */
  readonly #taken: Int32Array
  /** Tokens each row has had handed to the caller. */
  readonly #seen: Int32Array

  constructor(rowCount: number) {
    this.#prefilled = new Int32Array(rowCount)
    this.#held = new Int32Array(rowCount)
    this.#taken = new Int32Array(rowCount)
    this.#seen = new Int32Array(rowCount)
  }

  /** After the prefill and the copies into sample rows, each row holds `seqlens`. */
  prefilledTo(seqlens: Int32Array): void {
    this.#prefilled.set(seqlens)
    this.#held.set(seqlens)
  }

  /** The positions of row `row` before its first generated token. */
  prefilled(row: number): number {
    return this.#prefilled[row]
  }

  /** Counts the tokens the rows took in `steps` and cuts back the rows fed past them. */
  take(steps: GenerateStep[], cache: RowCache): void {
    for (const step of steps) countTokens(step, this.#taken)
    this.#rewind(cache, this.#taken)
  }

  /** Counts a step as handed to the caller. */
  handOut(step: GenerateStep): void {
    countTokens(step, this.#seen)
  }

  /** A call landed: each row in `fed` holds `passes` more positions. */
  landed(fed: number[], passes: number): void {
    for (const r of fed) this.#held[r] += passes
  }

  /** The caller stopped: a cache it keeps is cut back to what it saw fed. */
  rewindToSeen(cache: RowCache): void {
    this.#rewind(cache, this.#seen)
  }

  /**
   * Passes for the next call of a greedy generation: `multiStep` while no live row is in a tool
   * call or has forced tokens queued (a forced token would differ from the one the model feeds
   * itself), and no more than any row has tokens and context left for.
   */
  passesFor(rows: RowState[], maxTokens: number, contextLength: number, multiStep: number): number {
    let passes = multiStep
    for (const [r, state] of rows.entries()) {
      if (state.completed) continue
      // Inside a tool call the row runs one pass per call, so the answer forced when it closes
      // never lands inside a burst.
      if (state.hasForced || state.inToolCall) return 1
      // `held` lacks the token this call feeds first; each pass makes one more token.
      passes = Math.min(passes, maxTokens - state.tokens.length, contextLength - this.#held[r] - 1)
    }
    return Math.max(passes, 1)
  }

  /**
   * Whether a live row took, in `step`, a token other than the one the model was fed after it
   * (`fedNext(row)`: its own top token in a burst, or its draft): the passes after it fed the
   * wrong token.
   */
  static diverged(rows: RowState[], step: GenerateStep, fedNext: (row: number) => number): boolean {
    return rows.some((s, r) => !s.completed && step.tokenColumn[r] !== fedNext(r))
  }

  /** Cuts each row back to the tokens fed before its last counted one, where it holds more. */
  #rewind(cache: RowCache, counted: Int32Array): void {
    for (let r = 0; r < this.#held.length; r++) {
      const keep = this.#prefilled[r] + Math.max(counted[r] - 1, 0)
      if (this.#held[r] > keep) cache.truncateRow(r, (this.#held[r] = keep))
    }
  }
}
