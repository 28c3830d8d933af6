// The decode loop driven directly, with sinks that record what reaches them: chunked prefill
// against one whole pass, paused (blocked) sinks, and draining for a graceful shutdown.
import test from 'ava'

import { Model } from '../index.js'
import { ApiError } from '../src/server/ApiError.js'
import { BatchLoop } from '../src/server/BatchLoop.js'
import type { Job, JobSink, Usage } from '../src/server/Job.js'
import { Metrics } from '../src/server/Metrics.js'
import { Scheduler } from '../src/server/Scheduler.js'
import { modelPath } from './models.js'

const model = await Model.load(modelPath('Q8_0'))
test.after.always(() => model.dispose())

/** A JobSink that keeps everything it is told, in one log shared by the sinks of a scenario. */
class RecordingSink implements JobSink {
  readonly texts: string[]
  /** Text calls so far: one per token that completed characters. */
  calls = 0
  usage: Usage | null = null
  error: unknown = undefined
  blocked = false
  onUnblocked: (() => void) | null = null
  readonly ended: Promise<void>
  readonly firstText: Promise<void>
  #end!: () => void
  #first!: () => void

  constructor(
    n: number,
    readonly name = '',
    readonly log: string[] = [],
    /** Sets `blocked` from inside the loop's own text call, after this many. */
    readonly blockAfter = Infinity,
  ) {
    this.texts = Array.from({ length: n }, () => '')
    this.ended = new Promise((resolve) => (this.#end = resolve))
    this.firstText = new Promise((resolve) => (this.#first = resolve))
  }

  text(index: number, text: string): void {
    this.texts[index] += text
    this.log.push(this.name)
    this.#first()
    if (++this.calls === this.blockAfter) this.blocked = true
  }

  finish(): void {}

  logprobs(): void {}

  done(usage: Usage): void {
    this.usage = usage
    this.#end()
  }

  fail(err: unknown): void {
    this.error = err
    this.#end()
  }

  unblock(): void {
    this.blocked = false
    this.onUnblocked?.()
  }
}

function job(prompt: number[], sink: JobSink, { n = 1, maxTokens = 16 } = {}): Job {
  const sampling = { temperature: 0, topK: 0, topP: 1, minP: 0, seed: 0 }
  return { prompt, n, maxTokens, sampling, stop: [], grammar: null, logprobs: null, sink, submittedAt: performance.now(), cancelled: false }
}

function startLoop(rows: number, prefillChunk?: number) {
  const scheduler = new Scheduler(model.createCache(rows, 256), 8)
  const metrics = new Metrics()
  const loop = new BatchLoop(model, scheduler, metrics, { prefillChunk })
  return {
    loop,
    metrics,
    async stop() {
      await loop.close(new Error('test over'))
      scheduler.cache.dispose()
    },
  }
}

const chat = (content: string) => model.tokenizer.encode(model.applyChatTemplate([{ role: 'user', content }]), { special: true })
const counting = model.tokenizer.encode('1, 2, 3, 4, 5,')
const LONG = chat(
  'Here are my notes from the trip. We left early on Monday and drove north along the coast, stopping at ' +
    'three small harbours, a lighthouse that is now a museum, and a bakery that sold nothing but rye bread. ' +
    'On Tuesday it rained, so we read in the cabin and played cards until the evening, when the sky cleared ' +
    'and we walked to the cliffs to watch the seals. Wednesday was the long hike over the ridge. Summarise the trip.',
)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * A stream counting when LONG arrives (n = 2), then a follow-up that continues LONG's answer and
 * can reuse its row. Returns what every sink got, and how many of the counter's tokens arrived
 * while LONG was being prefilled.
 */
async function scenario(prefillChunk: number) {
  const { loop, stop } = startLoop(4, prefillChunk)
  const log: string[] = []
  const counter = new RecordingSink(1, 'counter', log)
  loop.submit(job(counting, counter, { maxTokens: 60 }))
  await counter.firstText
  const long = new RecordingSink(2, 'long', log)
  const submittedAt = log.length
  loop.submit(job(LONG, long, { n: 2, maxTokens: 24 }))
  await Promise.all([counter.ended, long.ended])
  const beside = log.slice(submittedAt, log.indexOf('long')).length
  const follow = new RecordingSink(1)
  const followPrompt = [...LONG, ...model.tokenizer.encode(long.texts[0]), ...chat('And in one word?')]
  loop.submit(job(followPrompt, follow))
  await follow.ended
  await stop()
  return { counter, long, follow, beside }
}

test.serial('chunked prefill answers greedy requests exactly as one whole pass, while the streams beside it keep decoding', async (t) => {
  t.true(LONG.length > 100, `${LONG.length} prompt tokens`)
  const whole = await scenario(4096)
  const chunked = await scenario(7)
  t.is(chunked.counter.texts[0], whole.counter.texts[0])
  t.deepEqual(chunked.long.texts, whole.long.texts)
  t.is(chunked.long.texts[0], chunked.long.texts[1], 'n = 2 greedy: both choices start from the one prefill')
  t.deepEqual(chunked.long.usage, whole.long.usage)
  t.is(chunked.follow.texts[0], whole.follow.texts[0])
  t.true((chunked.follow.usage?.cachedTokens ?? 0) >= LONG.length, 'the row prefilled in chunks is reused as a prefix')
  t.deepEqual(chunked.follow.usage, whole.follow.usage)
  t.true(whole.beside <= 1, `unchunked, the counter waited for the whole prefill (${whole.beside} tokens beside it)`)
  t.true(chunked.beside >= Math.floor(LONG.length / 7) - 2, `chunks of 7: ${chunked.beside} counter tokens during a ${LONG.length}-token prefill`)
})

test.serial('a blocked sink pauses its rows: nothing sampled, no step spent, and the output is unchanged when it resumes', async (t) => {
  const { loop, metrics, stop } = startLoop(4, 7)
  const alone = new RecordingSink(1)
  loop.submit(job(counting, alone, { maxTokens: 30 }))
  await alone.ended

  const prefilling = new RecordingSink(1)
  prefilling.blocked = true
  const decoding = new RecordingSink(1, '', [], 5)
  const reader = new RecordingSink(1)
  loop.submit(job(LONG, prefilling, { maxTokens: 12 }))
  loop.submit(job(counting, decoding, { maxTokens: 30 }))
  loop.submit(job(chat('Name three rivers.'), reader, { maxTokens: 40 }))
  await reader.ended
  t.is(prefilling.calls, 0, 'a job blocked from the start is never sampled')
  t.is(decoding.calls, 5, 'a job blocked mid-stream gets no token after it blocked')
  const idle = metrics.decodeSteps
  await sleep(60)
  t.is(metrics.decodeSteps, idle, 'with every job paused the loop waits instead of stepping')

  decoding.unblock()
  await decoding.ended
  t.is(decoding.texts[0], alone.texts[0])
  const before = metrics.decodeSteps
  prefilling.unblock()
  await prefilling.firstText
  t.is(metrics.decodeSteps, before + 1, 'its prompt was prefilled while blocked, all but the last token')
  await prefilling.ended
  const again = new RecordingSink(1)
  loop.submit(job(LONG, again, { maxTokens: 12 }))
  await again.ended
  t.is(prefilling.texts[0], again.texts[0])
  await stop()
})

test.serial('drain refuses new jobs, fails queued ones with 503 at once, and lets running ones finish', async (t) => {
  const { loop, stop } = startLoop(1)
  const running = new RecordingSink(1)
  const queued = new RecordingSink(1)
  loop.submit(job(counting, running, { maxTokens: 40 }))
  loop.submit(job(counting, queued))
  await running.firstText
  t.false(loop.draining)
  const drained = loop.drain(60_000, new Error('deadline'))
  t.true(loop.draining)
  t.is((queued.error as ApiError).status, 503)
  const late = t.throws(() => loop.submit(job(counting, new RecordingSink(1))), { instanceOf: ApiError })
  t.is(late?.status, 503)
  await drained
  t.is(running.error, undefined)
  t.is(running.usage?.completionTokens, 40)
  await stop()
})

test.serial('at the drain deadline the jobs still running are failed with the reason given', async (t) => {
  const { loop, stop } = startLoop(1)
  const running = new RecordingSink(1)
  loop.submit(job(counting, running, { maxTokens: 4000 }))
  await running.firstText
  const reason = new ApiError(503, 'the server is shutting down')
  await loop.drain(100, reason)
  t.is(running.error, reason)
  t.is(running.usage, null)
  await stop()
})

test('prefillChunk must be a positive integer', (t) => {
  const scheduler = new Scheduler(model.createCache(1, 16), 1)
  for (const prefillChunk of [0, 1.5, -3]) {
    t.throws(() => new BatchLoop(model, scheduler, new Metrics(), { prefillChunk }), { message: /prefillChunk must be a positive integer/ })
  }
  scheduler.cache.dispose()
})
