// The Engine driven by a scripted model (scriptedModel.ts), as nanochat's test_engine.py drives
// its Engine with a mock: every token is known in advance, so each test states the exact tokens,
// the forward calls that fed them and what the cache holds, around greedy bursts above all.
import test, { type ExecutionContext } from 'ava'

import { Engine, type GenerateOptions, type GenerateStep, KvEngineError } from '../index.js'
import { id, ids, type Script, ScriptedCache, ScriptedModel, successors, VOCAB } from './scriptedModel.js'

const PS = id('<|python_start|>')
const PE = id('<|python_end|>')
const STOP = id('<|assistant_end|>')
const DIGITS = successors(Object.fromEntries([...'0123456789'].map((d, i) => [d, String((i + 1) % 10)])), 'c')

/** Each step of a generation, with what each row of its cache (the caller's, or else the Engine's own) held as the step was handed out. */
async function stepsOf(engine: Engine<ScriptedModel>, prompt: number[] | number[][], options: GenerateOptions<ScriptedCache>) {
  const steps: GenerateStep[] = []
  const held: number[][][] = []
  for await (const step of engine.generate(prompt, options)) {
    steps.push(step)
    held.push((options.cache ?? (engine.model.caches.at(-1) as ScriptedCache)).rows.map((row) => [...row]))
  }
  return { steps, held, column: (r: number) => steps.map((s) => s.tokenColumn[r]) }
}

const isPrefix = (part: number[], whole: number[]) => part.length <= whole.length && part.every((t, i) => t === whole[i])

test('a row that stops inside a burst ends there: the passes after it are neither emitted nor kept, and the row beside it runs on', async (t) => {
  const words = successors({ a: 'ST', ST: 'OP', OP: ' the', ' the': ' end', ' end': '+', '+': 'b', b: '<|assistant_end|>', '<|assistant_end|>': '9', 9: '0' }, 'c')
  const model = new ScriptedModel((h) => (h[1] === id('a') ? words : DIGITS)(h))
  const prompts = [ids('<|bos|>', 'a'), ids('<|bos|>', '0')]
  const { steps, held, column } = await stepsOf(new Engine(model), prompts, { temperature: 0, maxTokens: 12 })
  // The stop token is the second pass of the second 4-pass burst; the model went on to feed itself 9 and 0.
  t.deepEqual(column(0), [...ids('ST', 'OP', ' the', ' end', '+', 'b'), STOP, -1, -1, -1, -1, -1])
  t.deepEqual(column(1), ids(...'123456789012'))
  t.deepEqual(steps.map((s) => s.finished[0]), [null, null, null, null, null, null, 'stop', null, null, null, null, null])
  t.is(steps.map((s) => s.text[0]).join(''), 'STOP the end+b')
  t.is(steps.at(-1)?.finished[1], 'length')
  t.deepEqual(model.calls, [
    { tokens: prompts, greedySteps: 1 },
    { tokens: [ids('ST'), ids('1')], greedySteps: 4 },
    { tokens: [ids('+'), ids('5')], greedySteps: 4 },
    // Row 0 is fed nothing; three passes are all maxTokens leaves row 1.
    { tokens: [[], ids('9')], greedySteps: 3 },
  ])
  const [cache] = model.caches
  const kept = [ids('<|bos|>', 'a', 'ST', 'OP', ' the', ' end', '+', 'b'), ids('<|bos|>', ...'012345678901')]
  t.deepEqual(cache.rows, kept, 'row 0 was cut back past the stop token and the 9 fed after it; row 1 holds all but its last token')
  for (const [i, rows] of held.entries()) t.true(rows.every((row, r) => isPrefix(row, kept[r])), `step ${i}: ${JSON.stringify(rows)}`)
  t.true(cache.disposed, "the Engine's own cache is disposed at the end")
})

test('multiStep 8: a call opened and closed inside a burst cuts it at the first forced token, whose passes the cache never keeps', async (t) => {
  const model = new ScriptedModel(
    successors({ a: 'b', b: '<|python_start|>', '<|python_start|>': '2', 2: '+', '+': '3', 3: '<|python_end|>', '<|python_end|>': 'ST', ST: 'OP', '<|output_end|>': ' the', ' the': ' end', ' end': '<|assistant_end|>' }, 'c'),
  )
  const prompt = ids('<|bos|>', 'a')
  const { steps, held, column } = await stepsOf(new Engine(model), prompt, { temperature: 0, multiStep: 8 })
  const answer = ids('<|output_start|>', '5', '<|output_end|>')
  t.deepEqual(column(0), [...ids('b', '<|python_start|>', '2', '+', '3', '<|python_end|>'), ...answer, ...ids(' the', ' end'), STOP])
  t.deepEqual(steps.map((s) => s.tokenMasks[0]), [1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1])
  t.is(steps.map((s) => s.text[0]).join(''), 'b<|python_start|>2+3<|python_end|><|output_start|>5<|output_end|> the end')
  // The first burst fed b and seven of its own tokens, ST and OP after <|python_end|>; its steps
  // end at the forced <|output_start|>, and the answer's other tokens go in one pass per call.
  t.deepEqual(model.calls, [
    { tokens: [prompt], greedySteps: 1 },
    { tokens: [ids('b')], greedySteps: 8 },
    { tokens: [ids('<|output_start|>')], greedySteps: 1 },
    { tokens: [ids('5')], greedySteps: 1 },
    { tokens: [ids('<|output_end|>')], greedySteps: 8 },
  ])
  const kept = [...prompt, ...column(0).slice(0, -1)]
  t.deepEqual(model.caches[0].rows, [kept])
  for (const [i, rows] of held.entries()) t.true(isPrefix(rows[0], kept), `step ${i}: ST or OP held: ${JSON.stringify(rows[0])}`)
})

test('a call opened on the last pass of a burst runs one pass per call until its answer has been forced, then bursts resume', async (t) => {
  const model = new ScriptedModel(
    successors({ a: 'b', b: 'ST', ST: 'OP', OP: ' the', ' the': '<|python_start|>', '<|python_start|>': '2', 2: '+', '+': '3', 3: '<|python_end|>', '<|output_end|>': ' end', ' end': '<|assistant_end|>' }, 'c'),
  )
  const [row] = await new Engine(model).generateBatch(ids('<|bos|>', 'a'), { temperature: 0 })
  t.deepEqual(row.tokens, ids('b', 'ST', 'OP', ' the', '<|python_start|>', '2', '+', '3', '<|python_end|>', '<|output_start|>', '5', '<|output_end|>', ' end'))
  t.deepEqual(row.masks, [1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1])
  t.is(row.finishReason, 'stop')
  // In the call (<|python_start|> to <|python_end|>), then with the answer queued: one pass each.
  t.deepEqual(model.calls.map((c) => c.greedySteps), [1, 4, 1, 1, 1, 1, 1, 1, 1, 4])
  t.deepEqual(model.calls.slice(2, 9).map((c) => c.tokens[0][0]), ids('<|python_start|>', '2', '+', '3', '<|python_end|>', '<|output_start|>', '5'))
})

test('a stop string spanning two tokens of one burst ends the row with the text cut before it, as one pass per call does', async (t) => {
  const script = successors({ a: 'b', b: 'ST', ST: ' the', ' the': ' end', ' end': 'OP' }, 'c')
  const prompt = ids('<|bos|>', 'a')
  const free = await new Engine(new ScriptedModel(script)).generateBatch(prompt, { temperature: 0, maxTokens: 5 })
  t.is(free[0].text, 'bST the endOP')
  const model = new ScriptedModel(script)
  const { steps } = await stepsOf(new Engine(model), prompt, { temperature: 0, stop: ['e e'] })
  // 'e e' straddles ' the' and ' end', the second and third passes of the burst.
  t.deepEqual(steps.map((s) => s.text[0]), ['b', 'ST', ' th', ''])
  t.deepEqual(steps.map((s) => s.finished[0]), [null, null, null, 'stop'])
  t.deepEqual(steps.map((s) => s.tokenColumn[0]), ids('b', 'ST', ' the', ' end'))
  t.deepEqual(model.calls, [
    { tokens: [prompt], greedySteps: 1 },
    { tokens: [ids('b')], greedySteps: 4 },
  ])
  t.deepEqual(model.caches[0].rows, [ids('<|bos|>', 'a', 'b', 'ST', ' the')], 'the fourth pass fed " end", and was cut')
  const single = new ScriptedModel(script)
  const one = await new Engine(single).generateBatch(prompt, { temperature: 0, stop: ['e e'], multiStep: 1 })
  t.deepEqual(one, [{ tokens: ids('b', 'ST', ' the', ' end'), masks: [1, 1, 1, 1], text: 'bST th', finishReason: 'stop' }])
  t.deepEqual(single.caches[0].rows, model.caches[0].rows)
})

const tick = () => new Promise((resolve) => setImmediate(resolve))
/** `n` digit tokens counting up from `from`, as the DIGITS script writes them. */
const digits = (from: number, n: number) => ids(...Array.from({ length: n }, (_, i) => String((from + i) % 10)))

/** Ends the caller's loop at a step: aborts, or resolves to 'break'. */
type Stop = (abort: () => void) => Promise<unknown>

/**
 * Stops the caller's loop when it has seen `at` steps (1 from the prefill, then 2 to 5 from the
 * first burst), while the second burst, asked for before the first's steps were handed out, is in
 * flight: `stop` aborts (letting that pass fail, still running, or land first), or breaks.
 */
async function stoppedAt(t: ExecutionContext, at: number, stop: Stop) {
  const unhandled: unknown[] = []
  const onUnhandled = (reason: unknown) => unhandled.push(reason)
  process.on('unhandledRejection', onUnhandled)
  t.teardown(() => process.off('unhandledRejection', onUnhandled))
  const model = new ScriptedModel(DIGITS)
  const engine = new Engine(model)
  const cache = model.createCache(1, 32)
  const controller = new AbortController()
  const seen: number[] = []
  let broke = false
  let error: unknown
  try {
    for await (const step of engine.generate(ids('<|bos|>', '0'), { temperature: 0, maxTokens: 20, cache, signal: controller.signal })) {
      seen.push(step.tokenColumn[0])
      if (seen.length === at && (await stop(() => controller.abort())) === 'break') {
        broke = true
        break
      }
    }
  } catch (err) {
    error = err
  }
  t.true(broke ? error === undefined : error instanceof KvEngineError && error.code === 'ABORTED', String(error))
  t.deepEqual(seen, digits(1, at))
  t.deepEqual(model.calls.slice(1), [
    { tokens: [ids('1')], greedySteps: 4 },
    { tokens: [ids('5')], greedySteps: 4 },
  ])
  t.deepEqual(cache.rows, [[id('<|bos|>'), ...digits(0, at)]], 'the prompt and what was seen, but the last token seen, which the caller feeds next')
  const [next] = await engine.generateBatch([seen[at - 1]], { temperature: 0, maxTokens: 5, cache })
  t.deepEqual(next.tokens, digits(at + 1, 5), 'continuing with the last token seen runs on as if never stopped')
  t.deepEqual(cache.rows, [[id('<|bos|>'), ...digits(0, at + 5)]])
  t.false(cache.disposed)
  await tick()
  t.deepEqual(unhandled, [], 'a pass that failed while nobody awaited it was still handled')
}

const abortNow: Stop = async (abort) => abort()
const landThenAbort: Stop = async (abort) => {
  await tick()
  abort()
}
const abortThenFail: Stop = async (abort) => {
  abort()
  await tick()
}
const landThenBreak: Stop = async () => (await tick(), 'break')

// Serial: an unhandled rejection is seen process-wide, and must be laid at the right test's door.
for (const [when, stop] of [
  ['while the next pass runs', abortNow],
  ['after the next pass landed', landThenAbort],
  ['and the next pass fails before the generation resumes', abortThenFail],
] as const) {
  test.serial(`abort mid-burst, ${when}: ABORTED, and the caller's cache holds what it saw fed, ready for the next generation`, (t) => stoppedAt(t, 3, stop))
}

test.serial("break at a burst's last step, after the next pass landed: that pass is rewound from the caller's cache", (t) => stoppedAt(t, 5, landThenBreak))

// Aborted at the last step of a call's steps, the Engine awaits the pass in flight, then throws
// at the top of its loop with no pass in flight; its `finally` still cuts a kept cache back to
// what the caller saw (5 to 8, fed by that pass, are taken out, as after the `break` above).
test.serial("abort at a burst's last step, after the next pass landed: the caller's cache holds what it saw fed", (t) => stoppedAt(t, 5, landThenAbort))

test("a caller's cache: refused without RowCache's methods, BUSY while a generation runs in it", async (t) => {
  const model = new ScriptedModel(DIGITS)
  const engine = new Engine(model)
  const error = await t.throwsAsync(engine.generateBatch(ids('0'), { cache: {} as ScriptedCache }))
  t.true(error instanceof KvEngineError && error.code === 'INVALID_ARGUMENT')
  t.is(error?.message, 'cache must be a RowCache from model.createCache()')
  const cache = model.createCache(1, 16)
  const [first, second] = await Promise.allSettled([engine.generateBatch(ids('0'), { temperature: 0, maxTokens: 3, cache }), engine.generateBatch(ids('0'), { cache })])
  t.deepEqual(first.status === 'fulfilled' && first.value[0].tokens, ids('1', '2', '3'))
  t.true(second.status === 'rejected' && second.reason instanceof KvEngineError && second.reason.code === 'BUSY')
  t.deepEqual(cache.rows, [ids('0', '1', '2')])
})

/**
 * A greedy script that wanders the vocabulary by a hash of the last two tokens, and writes
 * '<digit>+<digit>' into each call it opens: rows stop at different points (tokens, strings,
 * maxTokens) and take forced answers, inside bursts and across their ends.
 */
const wander: Script = (h) => {
  const last = h[h.length - 1]
  const since = h.length - 1 - h.lastIndexOf(PS)
  if (h.lastIndexOf(PS) > h.lastIndexOf(PE) && since < 4) return [id(String(last % 10)), id('+'), id(String(h.length % 10)), PE][since]
  return (last * 7 + (h[h.length - 2] ?? 0) * 3 + h.length) % VOCAB.length
}

test('multiStep 1, 2, 4 (the default), 7 and 64 give the same rows and leave the same cache; bursts take fewer calls', async (t) => {
  const prompts = [ids('<|bos|>', 'a'), ids('<|bos|>', 'c'), ids('<|bos|>', 'ST', 'OP', '4'), ids('<|bos|>', '7'), ids('<|bos|>', 'b')]
  const options: GenerateOptions<ScriptedCache> = { temperature: 0, numSamples: 2, maxTokens: 16, stop: ['d1'] }
  const runs = []
  for (const multiStep of [1, 2, undefined, 7, 64]) {
    const model = new ScriptedModel(wander)
    const cache = model.createCache(prompts.length * 2, 32)
    const rows = await new Engine(model).generateBatch(prompts, { ...options, multiStep, cache })
    runs.push({ rows, cached: cache.rows, calls: model.calls.length })
  }
  const [single, ...bursts] = runs
  for (const [i, run] of bursts.entries()) {
    t.deepEqual(run.rows, single.rows, `run ${i + 1}`)
    t.deepEqual(run.cached, single.cached, `run ${i + 1}: the cache`)
  }
  t.deepEqual(runs.map((r) => r.calls), [16, 14, 13, 10, 8])
  // The script exercises what bursts are cut at: forced answers, and each way of stopping.
  const summary = single.rows.filter((_, r) => r % 2 === 0).map((r) => [r.tokens.length, r.masks.filter((m) => m === 0).length, r.finishReason])
  t.deepEqual(summary, [
    [14, 4, 'stop'], // a stop token after an answer
    [16, 3, 'length'], // maxTokens inside an answer
    [16, 0, 'length'], // maxTokens inside a call
    [6, 0, 'stop'], // the stop string ' end' + '1' straddle
    [8, 0, 'stop'], // a stop token
  ])
  t.is(single.rows[6].text, 'aab0 en')
})

test('numSamples 4, top-k 5 with a seed: one prefill, rows that sample on their own, the same again with the seed, and 2 samples are the first 2', async (t) => {
  const prompt = ids('<|bos|>', 'a')
  const options: GenerateOptions<ScriptedCache> = { numSamples: 4, topK: 5, temperature: 1, seed: 7, maxTokens: 16 }
  const model = new ScriptedModel(wander)
  const cache = model.createCache(4, 32)
  const rows = await new Engine(model).generateBatch(prompt, { ...options, cache })
  t.deepEqual(model.calls[0].tokens, [prompt, [], [], []], 'the prompt is fed once; its samples are copies of its row')
  t.true(model.calls.every((c) => c.greedySteps === 1), 'no bursts when sampling')
  t.is(new Set(rows.map((r) => JSON.stringify(r.tokens))).size, 4, 'each row samples on its own')
  for (const [r, row] of rows.entries()) {
    const held = prompt.length + row.tokens.length - (row.finishReason === 'length' ? 1 : 0)
    t.deepEqual(cache.rows[r], [...prompt, ...row.tokens].slice(0, held), `row ${r} holds its own tokens`)
  }
  const check = new ScriptedModel(wander)
  for (const [r, row] of rows.entries()) {
    for (const [i, token] of row.tokens.entries()) {
      if (row.masks[i] === 0) continue
      const { candidates } = await check.forward(check.createCache(1, 32), [[...prompt, ...row.tokens.slice(0, i)]], { candidates: 5, logits: false })
      t.true(candidates?.ids.includes(token), `row ${r}, token ${i}: ${token} is among the 5 highest`)
    }
  }
  t.deepEqual(await new Engine(new ScriptedModel(wander)).generateBatch(prompt, options), rows, 'the same seed gives the same rows')
  const two = await new Engine(new ScriptedModel(wander)).generateBatch(prompt, { ...options, numSamples: 2 })
  t.deepEqual(two, rows.slice(0, 2), "a row's draws depend on the seed and its index alone")
})
