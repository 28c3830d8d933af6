/** Plain calls skipped after a poor draft, at most: drafting is retried within 32 calls. */
const MAX_BACKOFF = 32

/**
 * When a drafter drafts. A drafted call that keeps few of its tokens costs more than the plain
 * call (a greedy burst) it replaced, and drafts fail in runs (free text, where a suffix recurs by
 * chance; a draft model off its depth), so after each poor draft the next few calls, twice as
 * many each time, go plain; a good draft resets that.
 */
export class DraftBackoff {
  #backoff = 0
  #skip = 0

  /** Whether to draft for the next call (each plain call counts down the backoff). */
  wants(): boolean {
    if (this.#skip === 0) return true
    this.#skip--
    return false
  }

  /**
   * A drafted call kept `kept` of its tokens. Two or more pay for it (on SmolLM2-135M, a call of
   * nine tokens costs about what three plain decode steps do); fewer double the backoff.
   */
  judge(kept: number): void {
    this.#backoff = kept >= 2 ? 0 : Math.min(Math.max(2 * this.#backoff, 1), MAX_BACKOFF)
    this.#skip = this.#backoff
  }
}
