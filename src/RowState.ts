import type { Candidates } from './Candidates.js'
import type { FinishReason } from './FinishReason.js'
import type { Grammar } from './Grammar.js'
import { computeLogprobs } from './computeLogprobs.js'
import type { TokenLogprobs } from './TokenLogprobs.js'
import type { IncrementalDecoder } from './IncrementalDecoder.js'
import type { Sampler } from './Sampler.js'
import { StopMatcher } from './StopMatcher.js'
import type { ToolRunner } from './ToolRunner.js'

/**
 * Everything one row of a generation tracks, as nanochat keeps one small object per row: its
 * tokens and masks, its text, whether it has finished, and the tool-call state machine (the open
 * call and its tokens, and the queue of tokens a tool's answer forces).
 */
export class RowState {
  readonly tokens: number[] = []
  readonly masks: number[] = []
  /** With `logprobs`: per token in `tokens`, its log-probabilities (null for a forced token). */
  readonly logprobs: (TokenLogprobs | null)[] = []
  text = ''
  finishReason: FinishReason | null = null
  readonly sampler: Sampler
  /** The grammar the row's output must match (its logits arrive masked to it), or null. */
  readonly constraint: Grammar | null
  readonly #decoder: IncrementalDecoder
  readonly #stops: StopMatcher
  readonly #tools: ToolRunner | null
  // A queue read from #forcedHead, so taking a token never shifts the array.
  readonly #forced: number[] = []
  #forcedHead = 0
  /** The token that opened the call being written, or -1 outside a call (nanochat's in_python_block). */
  #callStart = -1
  readonly #callTokens: number[] = []

  constructor(sampler: Sampler, decoder: IncrementalDecoder, stop: string[], tools: ToolRunner | null = null, constraint: Grammar | null = null) {
    this.sampler = sampler
    this.constraint = constraint
    this.#decoder = decoder
    this.#stops = new StopMatcher(stop)
    this.#tools = tools
  }

  get completed(): boolean {
    return this.finishReason !== null
  }

  /** Whether the row is inside a tool call, between its start and end tokens. */
  get inToolCall(): boolean {
    return this.#callStart >= 0
  }

  /** Whether a tool's answer has tokens queued for this row. */
  get hasForced(): boolean {
    return this.#forcedHead < this.#forced.length
  }

  /**
   * The next token a tool's answer forces on this row, taken off the queue, or -1 when the row
   * samples. A forced token takes precedence over the sample and is recorded with mask 0.
   */
  takeForced(): number {
    if (this.#forcedHead === this.#forced.length) return -1
    const token = this.#forced[this.#forcedHead++]
    if (this.#forcedHead === this.#forced.length) this.#forced.length = this.#forcedHead = 0
    return token
  }

  /**
   * The row's decode step, the one place a row takes a token (the Engine and the server's batch
   * loop both call it): the token a tool's answer forces, else a sample from row `row` of a
   * pass's `logits` (`vocab` wide) or `candidates`; accepted, and the row finished at a stop
   * token or once it holds `lengthLimit` tokens. Returns the token, its mask (0 forced, 1
   * sampled) and the text it completes. A constrained row's grammar moves past the token, and
   * the row ends where the grammar is complete and nothing may follow. With `logprobs` (a count of
   * top tokens) and whole logits, a sampled token also gets its log-probabilities.
   */
  takeToken(
    pass: { logits: Float32Array; candidates?: Candidates },
    row: number,
    vocab: number,
    stopTokens: ReadonlySet<number>,
    lengthLimit: number,
    logprobs: number | null = null,
  ): { token: number; mask: number; text: string; logprobs: TokenLogprobs | null } {
    // A forced token overrides the row's sample, so the sample is not even drawn.
    const forced = this.takeForced()
    const token = forced >= 0 ? forced : this.sampler.sample(pass.logits, row * vocab, vocab, pass.candidates, row)
    const mask = forced >= 0 ? 0 : 1
    // A grammar's end token ends the row even where the caller's stop tokens leave it out: it
    // is the grammar's end, not text.
    const ends = stopTokens.has(token) || this.constraint?.isEnd(token) === true
    const reported = logprobs !== null && mask === 1 ? computeLogprobs(pass.logits, row * vocab, vocab, token, logprobs) : null
    // Aligned with `tokens`, which an ending token does not join.
    if (logprobs !== null && !ends) this.logprobs.push(reported)
    this.constraint?.consume(token)
    let text = this.accept(token, mask, ends)
    if (!this.completed && this.constraint?.stopped) text += this.finish('stop')
    if (!this.completed && this.tokens.length >= lengthLimit) text += this.finish('length')
    return { token, mask, text, logprobs: reported }
  }

  /** Records a token (mask 1 sampled, 0 forced): returns the text it completes (stop strings withheld). */
  accept(token: number, mask: number, isStopToken: boolean): string {
    if (isStopToken) {
      return this.finish('stop')
    }
    this.tokens.push(token)
    this.masks.push(mask)
    const { text, stopped } = this.#stops.push(this.#decoder.push(token))
    this.text += text
    if (stopped) this.finishReason = 'stop'
    else if (this.#tools) this.#track(token, this.#tools)
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

  /**
   * nanochat's tool logic, for forced and sampled tokens alike: a call-start token (re)opens a
   * call, its end token runs the tool on a non-empty call and queues the answer, and any other
   * token inside a call is part of it.
   */
  #track(token: number, tools: ToolRunner): void {
    if (tools.isCallStart(token)) {
      this.#callStart = token
      this.#callTokens.length = 0
    } else if (this.#callStart >= 0 && token === tools.callEndOf(this.#callStart)) {
      const answer = this.#callTokens.length > 0 ? tools.run(this.#callStart, this.#callTokens) : null
      if (answer) this.#forced.push(...answer)
      this.#callStart = -1
      this.#callTokens.length = 0
    } else if (this.#callStart >= 0) {
      this.#callTokens.push(token)
    }
  }
}
