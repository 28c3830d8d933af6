// Nothing on the JS thread waits for a forward pass: a cache's getters, and the model's, answer at
// once while a long prefill runs on that cache, with what the last completed pass left; a server's
// /health and /metrics read them on every request.
import test from 'ava'

import { Model, type KvCache } from '../index.js'
import { modelPath } from './models.js'

const model = await Model.load(modelPath('F32'))
const long = model.tokenizer.encode('The quick brown fox jumps over the lazy dog. '.repeat(200)).slice(0, 1500)
const short = model.tokenizer.encode('Hello there')
const LIMIT_MS = 50

function read(cache: KvCache) {
  return {
    seqlens: Array.from(cache.seqlens),
    capacity: cache.capacity,
    sizeBytes: cache.sizeBytes,
    batchSize: cache.batchSize,
    kvType: cache.kvType,
    disposed: cache.disposed,
  }
}

/** The model's getters, timed with the cache's; a pass counts itself when it starts, so their values are not compared. */
function readModel(): void {
  if (model.disposed || model.stats().forwardCalls < 1 || model.info.vocabSize < 1) throw new Error('the model is unusable')
}

/** Reads every getter until `pass` settles; the slowest read, the reads, and what they all saw. */
async function readWhile(cache: KvCache, pass: Promise<unknown>) {
  let settled = false
  void pass.then(
    () => (settled = true),
    () => (settled = true),
  )
  let worst = 0
  const seen = new Set<string>()
  let reads = 0
  while (!settled) {
    const started = performance.now()
    const values = read(cache)
    readModel()
    worst = Math.max(worst, performance.now() - started)
    seen.add(JSON.stringify(values))
    reads++
    await new Promise((resolve) => setTimeout(resolve, 2))
  }
  return { worst, reads, seen: [...seen].map((s) => JSON.parse(s) as ReturnType<typeof read>) }
}

test.serial('every getter answers within 50 ms while a 1,500-token prefill runs, and shows the lengths committed before it, then after it', async (t) => {
  const cache = model.createCache(2, 1024)
  await model.forward(cache, [[], short])
  const before = read(cache)
  t.deepEqual(before.seqlens, [0, short.length])
  const started = performance.now()
  const pass = model.forward(cache, [long, []])
  const { worst, reads, seen } = await readWhile(cache, pass)
  await pass
  const passMs = performance.now() - started
  t.log(`${reads} reads of every getter during a ${passMs.toFixed(0)} ms prefill; slowest ${worst.toFixed(3)} ms`)
  t.true(passMs > 10 * LIMIT_MS, `the pass took ${passMs.toFixed(0)} ms: too short to show anything`)
  t.true(reads >= 10, `only ${reads} reads during the pass`)
  t.true(worst < LIMIT_MS, `a read took ${worst.toFixed(1)} ms`)
  const after = read(cache)
  t.deepEqual(after.seqlens, [long.length, short.length])
  t.is(after.capacity, 2048)
  t.is(after.sizeBytes, model.cacheBytes(2, 2048))
  // During the pass each getter shows what the last completed change published: the state
  // before the pass until the pass commits (on the worker, a moment before its promise settles
  // here), then the state after it; never half-written lengths. The pass grows the cache inside
  // its one commit, but each getter reads the publication on its own, so one read() may straddle
  // the commit (a CI run saw the lengths from before beside capacity 2048).
  t.deepEqual(seen[0], before)
  for (const state of seen) {
    t.true([before.seqlens, after.seqlens].some((lens) => JSON.stringify(lens) === JSON.stringify(state.seqlens)), `lengths ${JSON.stringify(state.seqlens)} seen during the pass`)
    t.true(state.capacity === 1024 || state.capacity === 2048, `capacity ${state.capacity} seen during the pass`)
    t.true([1024, 2048].some((capacity) => state.sizeBytes === model.cacheBytes(2, capacity)), `size ${state.sizeBytes} seen during the pass`)
  }
  cache.dispose()
})

test.serial('dispose() during a pass returns at once; the pass still settles, and the cache then refuses work', async (t) => {
  const cache = model.createCache(1, 1024)
  const pass = model.forward(cache, [long.slice(0, 600)])
  await new Promise((resolve) => setTimeout(resolve, 50))
  const started = performance.now()
  cache.dispose()
  const disposeMs = performance.now() - started
  t.true(cache.disposed)
  t.log(`dispose() returned in ${disposeMs.toFixed(3)} ms with a pass in flight`)
  t.true(disposeMs < LIMIT_MS, `dispose() took ${disposeMs.toFixed(1)} ms`)
  const { logits } = await pass
  t.is(logits.length, model.info.vocabSize, 'the pass that was running finished')
  t.throws(() => cache.seqlens, { message: /disposed/ })
  const err = await t.throwsAsync(model.forward(cache, [short]))
  t.regex(err?.message ?? '', /disposed/)
})
