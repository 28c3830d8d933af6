import type { KvCache } from '../KvCache.js'
import { ApiError } from './ApiError.js'
import type { Job } from './Job.js'

/** A job given cache rows: `rows[0]` already holds the first `reused` prompt tokens. */
export interface Admission {
  job: Job
  rows: number[]
  reused: number
}

/**
 * Admission and row allocation over one shared KvCache, in the manner of nano-vllm's scheduler:
 * jobs wait in a bounded FIFO until enough rows are free. A freed row keeps its K/V and the
 * token list behind it, so a later prompt that starts the same way (same system prompt, or the
 * same conversation one turn later) resumes from it instead of prefilling it again.
 */
export class Scheduler {
  readonly cache: KvCache
  readonly maxQueue: number
  /** The tokens whose K/V each row holds, free rows included: the prefix candidates. */
  readonly #held: number[][]
  /** Free rows, least recently released first (a Set keeps insertion order). */
  readonly #free = new Set<number>()
  readonly #queue: Job[] = []

  constructor(cache: KvCache, maxQueue: number) {
    this.cache = cache
    this.maxQueue = maxQueue
    this.#held = Array.from({ length: cache.batchSize }, () => [])
    for (let r = 0; r < cache.batchSize; r++) this.#free.add(r)
  }

  get runningRows(): number {
    return this.cache.batchSize - this.#free.size
  }

  get queuedRows(): number {
    return this.#queue.reduce((sum, job) => sum + job.n, 0)
  }

  /** Queues a job; a full queue answers 429 at once rather than letting latency grow without bound. */
  submit(job: Job): void {
    if (job.n > this.cache.batchSize) {
      throw ApiError.invalid('n', `n must be at most ${this.cache.batchSize}, the rows this server decodes at once`)
    }
    if (this.#queue.length >= this.maxQueue) {
      throw new ApiError(429, `the server is busy: ${this.#queue.length} requests are already waiting; retry later`, { code: 'queue_full' })
    }
    this.#queue.push(job)
  }

  /** Drops a job that is still waiting; false if it has rows already. */
  withdraw(job: Job): boolean {
    const at = this.#queue.indexOf(job)
    if (at !== -1) this.#queue.splice(at, 1)
    return at !== -1
  }

  /** Empties the queue, for a server shutting down: returns the jobs that were waiting. */
  takeQueued(): Job[] {
    return this.#queue.splice(0)
  }

  /** Gives rows to waiting jobs in arrival order, stopping at the first that does not fit. */
  admit(): Admission[] {
    const admitted: Admission[] = []
    while (this.#queue.length > 0 && this.#queue[0].n <= this.#free.size) {
      admitted.push(this.#place(this.#queue.shift() as Job))
    }
    return admitted
  }

  /** Notes that `tokens` were appended to `row` by a forward pass. */
  record(row: number, tokens: ArrayLike<number>): void {
    const held = this.#held[row]
    for (let i = 0; i < tokens.length; i++) held.push(tokens[i])
  }

  /** Copies a prefilled row into another of the same job: prefill once, sample many. */
  replicate(src: number, dst: number): void {
    this.cache.copyRow(src, dst)
    this.#held[dst] = this.#held[src].slice()
  }

  /** Returns rows to the pool; their K/V stays as a prefix candidate until the row is reused. */
  release(rows: number[]): void {
    for (const r of rows) this.#free.add(r)
  }

  /**
   * The longest cached prefix of the prompt wins, short of its last token (a forward needs at
   * least one new token to give logits). A free row holding it is taken as is; a busy one is
   * copied (only its filled positions move) into the least recently released free row.
   */
  #place(job: Job): Admission {
    const limit = job.prompt.length - 1
    let source = -1
    let reused = 0
    for (let r = 0; r < this.#held.length; r++) {
      const n = commonPrefix(this.#held[r], job.prompt, limit)
      if (n > reused || (n === reused && n > 0 && this.#free.has(r) && !this.#free.has(source))) {
        source = r
        reused = n
      }
    }
    const first = reused > 0 && this.#free.has(source) ? source : this.#oldestFree()
    this.#free.delete(first)
    if (reused > 0 && source !== first) this.replicate(source, first)
    this.#rewind(first, reused)
    const rows = [first]
    while (rows.length < job.n) {
      const r = this.#oldestFree()
      this.#free.delete(r)
      this.#rewind(r, 0)
      rows.push(r)
    }
    return { job, rows, reused }
  }

  #oldestFree(): number {
    return this.#free.values().next().value as number
  }

  #rewind(row: number, length: number): void {
    this.cache.truncateRow(row, length)
    this.#held[row].length = length
  }
}

function commonPrefix(a: number[], b: number[], limit: number): number {
  const end = Math.min(a.length, b.length, limit)
  let n = 0
  while (n < end && a[n] === b[n]) n++
  return n
}
