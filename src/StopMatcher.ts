/**
 * Finds stop strings in streamed text without ever emitting part of one: text that could still
 * turn out to be the start of a stop string is held back until it cannot.
 */
export class StopMatcher {
  readonly #stops: string[]
  #pending = ''

  constructor(stops: string[]) {
    this.#stops = stops.filter((s) => s.length > 0)
  }

  /** Adds text; returns what is safe to emit and whether a stop string was completed. */
  push(text: string): { text: string; stopped: boolean } {
    this.#pending += text
    let cut = -1
    for (const stop of this.#stops) {
      const at = this.#pending.indexOf(stop)
      if (at !== -1 && (cut === -1 || at < cut)) cut = at
    }
    if (cut !== -1) {
      const out = this.#pending.slice(0, cut)
      this.#pending = ''
      return { text: out, stopped: true }
    }
    const keep = this.#longestStopPrefixAtEnd()
    const out = this.#pending.slice(0, this.#pending.length - keep)
    this.#pending = this.#pending.slice(this.#pending.length - keep)
    return { text: out, stopped: false }
  }

  /** Text held back at the end of generation (it never became a stop string). */
  flush(): string {
    const out = this.#pending
    this.#pending = ''
    return out
  }

  #longestStopPrefixAtEnd(): number {
    let best = 0
    for (const stop of this.#stops) {
      for (let n = Math.min(stop.length - 1, this.#pending.length); n > best; n--) {
        if (this.#pending.endsWith(stop.slice(0, n))) {
          best = n
          break
        }
      }
    }
    return best
  }
}
