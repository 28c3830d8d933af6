import { calculator } from '../calculator/calculator.js'
import type { ForwardResult, Model } from '../Model.js'
import { nanochatDefaults } from '../nanochatDefaults.js'
import { Rng } from '../Rng.js'
import { RowState } from '../RowState.js'
import { Sampler } from '../Sampler.js'
import { ToolRegistry } from '../ToolRegistry.js'
import { ToolRunner } from '../ToolRunner.js'
import type { Job } from './Job.js'
import type { Metrics } from './Metrics.js'
import type { Admission, Scheduler } from './Scheduler.js'

/** A job that holds rows: one RowState per choice, and what each row is fed next. */
interface Active {
  job: Job
  rows: number[]
  states: RowState[]
  /** Per choice: the prompt's uncached suffix (first row only), then the last sampled token. */
  feed: number[][]
  reused: number
  /** Rows after the first are copies of it, made once the prompt has been prefilled. */
  replicated: boolean
  lastTokenAt: number | null
}

const NOTHING: number[] = []

/**
 * Continuous batching: one loop, one batched forward per step for every active job. A job
 * admitted between steps joins the next one with its whole prompt suffix on its first row while
 * the others get one token each (the forward is ragged); a finished or cancelled job frees its
 * rows before the next step. The forward runs off the JS thread, so HTTP keeps being served.
 */
export class BatchLoop {
  readonly #model: Model
  readonly #scheduler: Scheduler
  readonly #metrics: Metrics
  readonly #stopTokens: Set<number>
  /** nanochat's calculator for a model with nanochat's vocabulary (as the Engine defaults); null otherwise. */
  readonly #tools: ToolRunner | null
  /** Every step's logits land here: nothing per step for the garbage collector. */
  readonly #logits: Float32Array
  #active: Active[] = []
  #wake: (() => void) | null = null
  #closed = false
  readonly #finished: Promise<void>

  constructor(model: Model, scheduler: Scheduler, metrics: Metrics) {
    this.#model = model
    this.#scheduler = scheduler
    this.#metrics = metrics
    this.#logits = new Float32Array(scheduler.cache.batchSize * model.info.vocabSize)
    const nanochat = nanochatDefaults(model.tokenizer)
    this.#stopTokens = new Set([...model.info.eogTokens, ...(nanochat?.stopTokens ?? [])])
    const registry = new ToolRegistry().register('calculator', calculator)
    this.#tools = nanochat ? new ToolRunner(nanochat.tools, registry, model.tokenizer, model.info.vocabSize) : null
    this.#finished = this.#run()
  }

  /** Queues a job (throws the scheduler's 429 or 400 at once); the loop picks it up before its next step. */
  submit(job: Job): void {
    this.#scheduler.submit(job)
    this.#wake?.()
  }

  /** The client went away: a waiting job leaves the queue now, a running one frees its rows at the next step. */
  cancel(job: Job): void {
    job.cancelled = true
    this.#metrics.cancelledRequests++
    this.#scheduler.withdraw(job)
  }

  /** Stops after the step in flight; jobs still running are failed with `reason`. */
  async close(reason: unknown): Promise<void> {
    this.#closed = true
    this.#wake?.()
    await this.#finished
    for (const a of this.#active.slice()) this.#end(a, reason)
  }

  async #run(): Promise<void> {
    while (!this.#closed) {
      for (const a of this.#active.slice()) if (a.job.cancelled) this.#end(a)
      for (const admission of this.#scheduler.admit()) this.#start(admission)
      if (this.#active.length === 0) {
        await new Promise<void>((resolve) => (this.#wake = resolve))
        this.#wake = null
        continue
      }
      try {
        await this.#step()
      } catch (err) {
        // A bug, not bad input: fail the jobs in hand rather than stop serving everyone after them.
        for (const a of this.#active.slice()) this.#end(a, err)
      }
    }
  }

  #start({ job, rows, reused }: Admission): void {
    const tokenizer = this.#model.tokenizer
    const states = rows.map((_, i) => new RowState(new Sampler(job.sampling, Rng.forRow(job.sampling.seed, i)), tokenizer.createDecoder(), job.stop, this.#tools))
    const feed = rows.map((_, i) => (i === 0 ? job.prompt.slice(reused) : NOTHING))
    this.#active.push({ job, rows, states, feed, reused, replicated: rows.length === 1, lastTokenAt: null })
    this.#metrics.promptTokens += job.prompt.length
    this.#metrics.cachedPromptTokens += reused
  }

  async #step(): Promise<void> {
    const cache = this.#scheduler.cache
    const inputs: number[][] = Array.from({ length: cache.batchSize }, () => NOTHING)
    for (const a of this.#active) a.states.forEach((s, i) => s.completed || (inputs[a.rows[i]] = a.feed[i]))
    // On error the cache is left as it was, so the token lists (recorded only after) still match it.
    const vocab = this.#model.info.vocabSize
    // Enough native-picked candidates for every greedy or top-k job; the others scan the logits,
    // which are handed over only when some job needs them.
    const wants = this.#active.map((a) => a.states[0].sampler.candidatesWanted(vocab))
    const candidates = Math.max(0, ...wants)
    const logits = wants.some((w) => w === 0) ? { logitsInto: this.#logits } : { logits: false }
    const result = await this.#model.forward(cache, inputs, { ...logits, ...(candidates > 0 && { candidates }) })
    this.#metrics.decodeSteps++
    inputs.forEach((tokens, row) => tokens.length > 0 && this.#scheduler.record(row, tokens))
    // Which logits row (and candidates row) each cache row's is.
    const logitRow = new Int32Array(cache.batchSize).fill(-1)
    result.rows.forEach((row, i) => (logitRow[row] = i))
    const now = performance.now()
    for (const a of this.#active.slice()) {
      if (a.job.cancelled) {
        this.#end(a)
        continue
      }
      if (!a.replicated) {
        for (const row of a.rows.slice(1)) {
          this.#scheduler.replicate(a.rows[0], row)
          logitRow[row] = logitRow[a.rows[0]]
        }
        a.replicated = true
      }
      try {
        this.#sample(a, result, logitRow, now)
      } catch (err) {
        this.#end(a, err) // a tool that threw: this job ends, the batch goes on
      }
    }
  }

  /**
   * One token for each unfinished choice of `a`: a tool answer's forced token if one is queued
   * (streamed as text like any other), else a sample. Ends the job when its last choice finishes.
   */
  #sample(a: Active, { logits, candidates }: ForwardResult, logitRow: Int32Array, now: number): void {
    const { job } = a
    const vocab = this.#model.info.vocabSize
    for (const [i, state] of a.states.entries()) {
      if (state.completed) continue
      const forced = state.takeForced()
      const row = logitRow[a.rows[i]]
      const token = forced >= 0 ? forced : state.sampler.sample(logits, row * vocab, vocab, candidates, row)
      const before = state.tokens.length
      let text = state.accept(token, forced >= 0 ? 0 : 1, this.#stopTokens.has(token))
      if (!state.completed && state.tokens.length >= job.maxTokens) text += state.finish('length')
      this.#metrics.generatedTokens += state.tokens.length - before
      if (text) job.sink.text(i, text)
      if (state.finishReason) job.sink.finish(i, state.finishReason)
      else a.feed[i] = [token]
    }
    if (a.lastTokenAt === null) this.#metrics.timeToFirstToken.observe((now - job.submittedAt) / 1000)
    else this.#metrics.timePerToken.observe((now - a.lastTokenAt) / 1000)
    a.lastTokenAt = now
    if (a.states.every((s) => s.completed)) this.#end(a)
  }

  /** Frees the job's rows (their K/V stays as a prefix candidate) and tells its sink how it ended. */
  #end(a: Active, err?: unknown): void {
    this.#active.splice(this.#active.indexOf(a), 1)
    this.#scheduler.release(a.rows)
    if (err !== undefined) return a.job.sink.fail(err)
    if (a.job.cancelled) return
    const completionTokens = a.states.reduce((sum, s) => sum + s.tokens.length, 0)
    a.job.sink.done({ promptTokens: a.job.prompt.length, cachedTokens: a.reused, completionTokens })
  }
}
