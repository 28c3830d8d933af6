import type { FinishReason } from './FinishReason.js'
import type { IncrementalDecoder } from './IncrementalDecoder.js'
import type { Sampler } from './Sampler.js'
import { StopMatcher } from './StopMatcher.js'

/** Everything one row of a generation tracks, as nanochat keeps one small object per row. */
export class RowState {
  readonly tokens: number[] = []
  readonly masks: number[] = []
  text = ''
  finishReason: FinishReason | null = null
  readonly sampler: Sampler
  readonly #decoder: IncrementalDecoder
  readonly #stops: StopMatcher

  constructor(sampler: Sampler, decoder: IncrementalDecoder, stop: string[]) {
    this.sampler = sampler
    this.#decoder = decoder
    this.#stops = new StopMatcher(stop)
  }

  get completed(): boolean {
    return this.finishReason !== null
  }

  /** Records a token: returns the text it completes (stop strings withheld). */
  accept(token: number, mask: number, isStopToken: boolean): string {
    if (isStopToken) {
      return this.finish('stop')
    }
    this.tokens.push(token)
    this.masks.push(mask)
    const { text, stopped } = this.#stops.push(this.#decoder.push(token))
    this.text += text
    if (stopped) this.finishReason = 'stop'
    return text
  }

  /** Ends the row, releasing any text that was held back; returns that text. */
  finish(reason: FinishReason): string {
    if (this.completed) return ''
    this.finishReason = reason
    const tail = this.#stops.push(this.#decoder.flush())
    const rest = tail.stopped ? tail.text : tail.text + this.#stops.flush()
    this.text += rest
    return rest
  }
}
