import { KvEngineError } from '../KvEngineError.js'
import type { Grammar } from '../Grammar.js'
import type { TokenLogprobs } from '../TokenLogprobs.js'
import type { ReportedToken } from './ReportedToken.js'
import type { ForwardResult, Model } from '../Model.js'
import { generationDefaults } from '../generationDefaults.js'
import { Rng } from '../Rng.js'
import { RowState } from '../RowState.js'
import { Sampler } from '../Sampler.js'
import { ToolRegistry } from '../ToolRegistry.js'
import { ToolRunner } from '../ToolRunner.js'
import { ApiError } from './ApiError.js'
import type { Job } from './Job.js'
import type { Metrics } from './Metrics.js'
import type { Admission, Scheduler } from './Scheduler.js'

export interface BatchLoopOptions {
  /**
   * Prompt tokens one step feeds at most, over all the jobs being prefilled, on top of each
   * decoding row's one token: a long prompt is prefilled over several steps instead of stalling
   * every stream for its whole prefill (vLLM's chunked prefill). Default 8: on a CPU a step
   * costs about its token count, and attention over a long prefix makes a prompt's later tokens
   * dearer, so beside 16 decoding rows 8 kept the streams' p99 gap under 3 decode steps to the
   * end of a 2,000-token prompt where 12 and 16 did not always (BENCHMARKS.md, "A long prompt
   * among 16 streams"). The price is steps: with others decoding, a long prompt's first token
   * comes later. Alone, a prompt prefilled in chunks of 8 was no slower than in one pass.
   * With no row decoding there is no stream to stall, so prompts then take up to
   * `PREFILL_ALONE` tokens a step.
   */
  prefillChunk?: number
}

/** The prefill budget of a step that decodes nothing: large steps, still short enough that a request arriving meanwhile waits one step, not a whole prompt. */
const PREFILL_ALONE = 512

const DEFAULT_PREFILL_CHUNK = 8

/** A job that holds rows: one RowState per choice, and what each row is fed next. */
interface Active {
  job: Job
  rows: number[]
  states: RowState[]
  /** Prompt tokens the first row holds: `reused` at admission, the whole prompt once prefilled. */
  prefilled: number
  /** Per choice: the token it sampled last, fed at its next step. */
  feed: number[][]
  reused: number
  lastTokenAt: number | null
  /** Sat out a step since its last token, for a client not reading: that wait is not a decode step's. */
  paused: boolean
}

const NOTHING: number[] = []

const shuttingDown = () => new ApiError(503, 'the server is shutting down', { code: 'shutting_down' })

/**
 * Continuous batching: one loop, one batched forward per step for every active job. Each step
 * gives every decoding row its one token, then prompt chunks to the jobs being prefilled (the
 * forward is ragged); a job is sampled once its whole prompt is in. A finished or cancelled job
 * frees its rows before the next step. The forward runs off the JS thread, so HTTP keeps being
 * served.
 */
export class BatchLoop {
  readonly #model: Model
  readonly #scheduler: Scheduler
  readonly #metrics: Metrics
  readonly #prefillChunk: number
  readonly #stopTokens: ReadonlySet<number>
  /** nanochat's calculator for a model with nanochat's vocabulary (as the Engine defaults); null otherwise. */
  readonly #tools: ToolRunner | null
  /** Every step's logits land here: nothing per step for the garbage collector. */
  readonly #logits: Float32Array
  #active: Active[] = []
  #wake: (() => void) | null = null
  #closed = false
  #draining = false
  readonly #finished: Promise<void>

  constructor(model: Model, scheduler: Scheduler, metrics: Metrics, options: BatchLoopOptions = {}) {
    const { prefillChunk = DEFAULT_PREFILL_CHUNK } = options
    if (!Number.isInteger(prefillChunk) || prefillChunk < 1) {
      throw new KvEngineError('INVALID_ARGUMENT', `prefillChunk must be a positive integer, got ${String(prefillChunk)}`)
    }
    this.#model = model
    this.#scheduler = scheduler
    this.#metrics = metrics
    this.#prefillChunk = prefillChunk
    this.#logits = new Float32Array(scheduler.cache.batchSize * model.info.vocabSize)
    const defaults = generationDefaults(model)
    this.#stopTokens = defaults.stopTokens
    this.#tools = defaults.tools.length > 0 ? new ToolRunner(defaults.tools, ToolRegistry.builtIn(), model.tokenizer, model.info.vocabSize) : null
    this.#finished = this.#run()
  }

  /** True once `drain` was called: new jobs are refused. */
  get draining(): boolean {
    return this.#draining
  }

  /** Queues a job (throws the scheduler's 429 or 400, or 503 when shutting down); the loop picks it up before its next step. */
  submit(job: Job): void {
    if (this.#draining || this.#closed) throw shuttingDown()
    this.#scheduler.submit(job)
    this.#wake?.()
  }

  /** The client went away: a waiting job leaves the queue now, a running one frees its rows at the next step. */
  cancel(job: Job): void {
    job.cancelled = true
    this.#metrics.cancelledRequests++
    this.#scheduler.withdraw(job)
    this.#wake?.() // the loop may be idle with only paused jobs, this one among them
  }

  /**
   * Graceful shutdown: new jobs are refused and queued ones failed with 503 at once; running
   * jobs go on for up to `deadlineMs` milliseconds, then those left are failed with `reason` and
   * the loop stops as `close` stops it.
   */
  async drain(deadlineMs: number, reason: unknown): Promise<void> {
    this.#draining = true
    const refusal = shuttingDown()
    for (const job of this.#scheduler.takeQueued()) job.sink.fail(refusal)
    this.#wake?.()
    let timer: NodeJS.Timeout | undefined
    const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, deadlineMs)))
    await Promise.race([this.#finished, deadline])
    clearTimeout(timer)
    await this.close(reason)
  }

  /** Stops after the step in flight; jobs still running are failed with `reason`. */
  async close(reason: unknown): Promise<void> {
    this.#closed = true
    this.#wake?.()
    await this.#finished
    for (const a of this.#active.slice()) this.#end(a, reason)
  }

  async #run(): Promise<void> {
    // A draining loop ends by itself once its last job has.
    while (!this.#closed && !(this.#draining && this.#active.length === 0)) {
      for (const a of this.#active.slice()) if (a.job.cancelled) this.#end(a)
      for (const admission of this.#scheduler.admit()) this.#start(admission)
      const inputs: number[][] = Array.from({ length: this.#scheduler.cache.batchSize }, () => NOTHING)
      const sampled = this.#plan(inputs)
      if (!inputs.some((tokens) => tokens.length > 0)) {
        await this.#idle()
        continue
      }
      try {
        await this.#step(inputs, sampled)
      } catch (err) {
        // A bug, not bad input: fail the jobs in hand rather than stop serving everyone after them.
        for (const a of this.#active.slice()) this.#end(a, err)
      }
    }
  }

  /** Waits for a submit, cancel, drain or close, or for a paused job's client to read again. */
  async #idle(): Promise<void> {
    await new Promise<void>((resolve) => (this.#wake = resolve))
    this.#wake = null
  }

  #start({ job, rows, reused }: Admission): void {
    const tokenizer = this.#model.tokenizer
    // A grammar's rows take no tools: a tool's answer is forced into the row, outside the grammar.
    const tools = job.grammar ? null : this.#tools
    const states = rows.map((_, i) => {
      const constraint = job.grammar && (i === 0 ? job.grammar : job.grammar.fork())
      return new RowState(new Sampler(job.sampling, Rng.forRow(job.sampling.seed, i)), tokenizer.createDecoder(), job.stop, tools, constraint)
    })
    job.sink.onUnblocked = () => this.#wake?.()
    this.#active.push({ job, rows, states, prefilled: reused, feed: rows.map(() => NOTHING), reused, lastTokenAt: null, paused: false })
    this.#metrics.promptTokens += job.prompt.length
    this.#metrics.cachedPromptTokens += reused
  }

  /**
   * Fills `inputs` for one step and returns the jobs it samples. Decoding rows get their token
   * (decode is never held back); then jobs being prefilled, in admission order, share the step's
   * prefill budget. A job whose client is not reading (`sink.blocked`) sits the step out with its
   * state kept; it may still prefill, short of its prompt's last token, whose logits would have
   * to be sampled.
   */
  #plan(inputs: number[][]): Active[] {
    const sampled: Active[] = []
    const decoding = this.#active.some((a) => a.prefilled === a.job.prompt.length && !a.job.sink.blocked)
    let budget = decoding ? this.#prefillChunk : Math.max(this.#prefillChunk, PREFILL_ALONE)
    for (const a of this.#active) {
      const { prompt, sink } = a.job
      if (a.prefilled === prompt.length) {
        if (sink.blocked) {
          a.paused = true
          continue
        }
        a.states.forEach((s, i) => s.completed || (inputs[a.rows[i]] = a.feed[i]))
        sampled.push(a)
        continue
      }
      const end = Math.min(a.prefilled + budget, prompt.length - (sink.blocked ? 1 : 0))
      if (end <= a.prefilled) continue
      inputs[a.rows[0]] = prompt.slice(a.prefilled, end)
      budget -= end - a.prefilled
      if (end === prompt.length) sampled.push(a)
    }
    return sampled
  }

  async #step(inputs: number[][], sampled: Active[]): Promise<void> {
    const cache = this.#scheduler.cache
    const vocab = this.#model.info.vocabSize
    // Enough native-picked candidates for every greedy or top-k job sampled; the others scan the
    // logits, which are handed over only when some job needs them.
    const wants = sampled.map((a) => (a.job.logprobs === null ? a.states[0].sampler.candidatesWanted(vocab) : 0))
    const candidates = Math.max(0, ...wants)
    const logits = wants.some((w) => w === 0) ? { logitsInto: this.#logits } : { logits: false }
    const result = await this.#model.forward(cache, inputs, { ...logits, ...(candidates > 0 && { candidates }), constraints: this.#constraints(cache.batchSize) })
    this.#metrics.decodeSteps++
    // On error the cache is left as it was, so the token lists and prefill offsets, advanced
    // only now, still match it.
    inputs.forEach((tokens, row) => tokens.length > 0 && this.#scheduler.record(row, tokens))
    // Which logits row (and candidates row) each cache row's is.
    const logitRow = new Int32Array(cache.batchSize).fill(-1)
    result.rows.forEach((row, i) => (logitRow[row] = i))
    for (const a of this.#active) {
      if (a.prefilled === a.job.prompt.length) continue
      a.prefilled += inputs[a.rows[0]].length
      if (a.prefilled < a.job.prompt.length) continue
      // Prefilled once, sampled many: the other choices start as copies of the first row.
      for (const row of a.rows.slice(1)) {
        this.#scheduler.replicate(a.rows[0], row)
        logitRow[row] = logitRow[a.rows[0]]
      }
    }
    const now = performance.now()
    for (const a of sampled) {
      if (a.job.cancelled) continue // the next step frees its rows
      try {
        this.#sample(a, result, logitRow, now)
      } catch (err) {
        this.#end(a, err) // a tool that threw: this job ends, the batch goes on
      }
    }
  }

  /** A token's log-probabilities with its text and bytes, as the response reports them. */
  #reported(token: number, logprobs: TokenLogprobs): ReportedToken {
    const { tokenizer } = this.#model
    const entry = (id: number, logprob: number) => ({ token: tokenizer.decode([id]), bytes: Array.from(tokenizer.tokenBytes(id)), logprob })
    return { ...entry(token, logprobs.logprob), top: logprobs.top.map((e) => entry(e.token, e.logprob)) }
  }

  /** Each cache row's grammar for this step (a prefilling job's first row is masked for the
   * token its last chunk yields); undefined while no job has one, so a plain step builds nothing. */
  #constraints(rows: number): (Grammar | null)[] | undefined {
    if (!this.#active.some((a) => a.job.grammar)) return undefined
    const constraints: (Grammar | null)[] = Array.from({ length: rows }, () => null)
    for (const a of this.#active) a.states.forEach((s, i) => (constraints[a.rows[i]] = s.constraint))
    return constraints
  }

  /**
   * One token for each unfinished choice of `a`: a tool answer's forced token if one is queued
   * (streamed as text like any other), else a sample. Ends the job when its last choice finishes.
   */
  #sample(a: Active, pass: ForwardResult, logitRow: Int32Array, now: number): void {
    const { job } = a
    const vocab = this.#model.info.vocabSize
    for (const [i, state] of a.states.entries()) {
      if (state.completed) continue
      const before = state.tokens.length
      const { token, text, logprobs } = state.takeToken(pass, logitRow[a.rows[i]], vocab, this.#stopTokens, job.maxTokens, job.logprobs)
      this.#metrics.generatedTokens += state.tokens.length - before
      if (logprobs) job.sink.logprobs(i, this.#reported(token, logprobs))
      if (text) job.sink.text(i, text)
      if (state.finishReason) job.sink.finish(i, state.finishReason)
      else a.feed[i] = [token]
    }
    if (a.lastTokenAt === null) this.#metrics.timeToFirstToken.observe((now - job.submittedAt) / 1000)
    else if (!a.paused) this.#metrics.timePerToken.observe((now - a.lastTokenAt) / 1000)
    a.lastTokenAt = now
    a.paused = false
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
