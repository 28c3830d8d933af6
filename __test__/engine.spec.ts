import test from 'ava'

import { spawn } from 'node:child_process'
import { once } from 'node:events'

import { Candidates, Engine, type GenerateOptions, type KvEngineError, Model, type ModelLoadOptions } from '../index.js'
import { chatml, modelPath } from './models.js'

const model = await Model.load(modelPath('Q8_0'))
const engine = new Engine(model)
const encode = (text: string) => model.tokenizer.encode(text, { special: true })

test.serial('numSamples: 8 prefills the prompt exactly once, then decodes all rows in one pass per step', async (t) => {
  const prompt = encode(chatml('Name a colour.'))
  const before = model.stats()
  let fed = 0
  let steps = 0
  for await (const step of engine.generate(prompt, { numSamples: 8, maxTokens: 12, temperature: 1, seed: 7 })) {
    steps++
    // every row that did not finish at this step is fed its token at the next forward pass
    fed += step.tokenColumn.filter((tok, r) => tok >= 0 && step.finished[r] === null).length
  }
  const after = model.stats()
  t.is(after.forwardCalls - before.forwardCalls, steps, 'one prefill plus one batched forward per later step')
  t.is(after.tokensProcessed - before.tokensProcessed, prompt.length + fed, 'the prompt went through the model once, not 8 times')
})

test.serial('forward picks each row\'s highest logits as candidates, as a full sort of its logits orders them', async (t) => {
  const cache = model.createCache(2, 64)
  const prompts = [encode(chatml('Name a colour.')), encode('The capital of France is')]
  const { logits, rows, candidates } = await model.forward(cache, prompts, { candidates: 50 })
  cache.dispose()
  const vocab = model.info.vocabSize
  t.truthy(candidates)
  if (!candidates) return
  t.is(candidates.perRow, 50)
  for (let i = 0; i < rows.length; i++) {
    const row = logits.subarray(i * vocab, (i + 1) * vocab)
    const want = Array.from({ length: vocab }, (_, id) => id).sort((a, b) => row[b] - row[a] || a - b).slice(0, 50)
    t.deepEqual(Array.from(candidates.ids.subarray(i * 50, (i + 1) * 50)), want, `row ${i}`)
    t.deepEqual(Array.from(candidates.logits.subarray(i * 50, (i + 1) * 50)), want.map((id) => row[id]))
  }
  const bare = model.createCache(2, 64)
  const only = await model.forward(bare, prompts, { candidates: 50, logits: false })
  bare.dispose()
  t.is(only.logits.length, 0, 'logits: false hands none over')
  t.deepEqual(only.candidates?.ids, candidates.ids, 'and picks the same candidates')
  const small = model.createCache(1, 8)
  const plain = await model.forward(small, [encode('Hi')])
  small.dispose()
  t.is(plain.candidates, undefined, 'none unless asked for')
})

test.serial('candidatesInto is filled in place with the candidates a fresh pass picks, and refused when it does not fit', async (t) => {
  const prompts = [encode(chatml('Name a colour.')), encode('The capital of France is')]
  const fresh = model.createCache(2, 64)
  const want = await model.forward(fresh, prompts, { candidates: 5, logits: false })
  fresh.dispose()
  const into = new Candidates(new Uint32Array(16).fill(7), new Float32Array(16).fill(-1), 5)
  const reused = model.createCache(2, 64)
  const got = await model.forward(reused, prompts, { candidates: 5, logits: false, candidatesInto: into })
  t.is(got.candidates, into, 'the very object given is handed back')
  t.deepEqual(Array.from(into.ids.subarray(0, 10)), Array.from(want.candidates?.ids ?? []))
  t.deepEqual(Array.from(into.logits.subarray(0, 10)), Array.from(want.candidates?.logits ?? []))
  t.deepEqual(Array.from(into.ids.subarray(10)), [7, 7, 7, 7, 7, 7], 'nothing past the rows picked is written')
  const seqlens = Array.from(reused.seqlens)
  const tooSmall = new Candidates(new Uint32Array(9), new Float32Array(9), 5)
  for (const [bad, why] of [
    [tooSmall, 'room for 2 rows'],
    [new Candidates(new Uint32Array(20), new Float32Array(20), 4), 'perRow 5'],
    [{ ids: new Uint32Array(10), logits: new Float32Array(10), perRow: 5 }, 'a Candidates'],
  ] as const) {
    const error = await t.throwsAsync(model.forward(reused, [[11], [12]], { candidates: 5, candidatesInto: bad as Candidates }))
    t.is((error as KvEngineError).code, 'INVALID_ARGUMENT')
    t.true(error?.message.includes(why), error?.message)
  }
  await t.throwsAsync(model.forward(reused, [[11], [12]], { candidatesInto: into }), { message: /candidatesInto needs candidates/ })
  for (const [options, why] of [
    [{ candidates: 1, logits: false, greedySteps: 0 }, /greedySteps must be an integer in 1\.\.64, got 0/],
    [{ candidates: 1, logits: false, greedySteps: 2.5 }, /greedySteps must be an integer/],
    [{ candidates: 1, greedySteps: 2 }, /logits: false/],
    [{ candidates: 5, logits: false, greedySteps: 2, candidatesInto: into }, /room for 4 rows/],
  ] as const) {
    await t.throwsAsync(model.forward(reused, [[11], [12]], options), { message: why })
  }
  t.deepEqual(Array.from(reused.seqlens), seqlens, 'a refused pass leaves the cache as it was')
  reused.dispose()
})

test('a model with nothing pending lets Node exit, and a pass asked for and never awaited still settles before it does', async (t) => {
  const script = `
    import { Model } from ${JSON.stringify(new URL('../index.ts', import.meta.url).href)}
    const model = await Model.load(${JSON.stringify(modelPath('Q8_0'))})
    await model.forward(model.createCache(1, 16), [[1, 2, 3]])
    model.forward(model.createCache(1, 16), [[4, 5, 6]]).then(({ logits }) => console.log('settled', logits.length))
  `
  const child = spawn(process.execPath, ['--import=tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  child.stdout.on('data', (d: Buffer) => (out += d))
  const killer = setTimeout(() => child.kill('SIGKILL'), 60_000)
  const [code, signal] = (await once(child, 'exit')) as [number | null, string | null]
  clearTimeout(killer)
  t.is(signal, null, 'exited by itself, not killed after 60 s')
  t.is(code, 0)
  t.is(out.trim(), `settled ${model.info.vocabSize}`)
})

test.serial('passes asked for without awaiting run in the order asked on each cache, side by side on two, as awaited ones do', async (t) => {
  const prompt = encode('The capital of France is')
  const steps = [[11], [22], [33]]
  const alone = model.createCache(1, 64)
  const want = [await model.forward(alone, [prompt])]
  for (const tokens of steps) want.push(await model.forward(alone, [tokens]))
  alone.dispose()
  const caches = [model.createCache(1, 64), model.createCache(1, 64)]
  // Every pass of both caches is asked for before any has run.
  const pending = caches.map((cache) => [model.forward(cache, [prompt]), ...steps.map((tokens) => model.forward(cache, [tokens]))])
  const got = await Promise.all(pending.map((passes) => Promise.all(passes)))
  for (const [c, cache] of caches.entries()) {
    t.deepEqual(Array.from(cache.seqlens), [prompt.length + steps.length], `cache ${c} holds every token once`)
    for (const [i, pass] of got[c].entries()) t.deepEqual(pass.logits, want[i].logits, `cache ${c}, pass ${i}`)
    cache.dispose()
  }
})

test.serial('info.activations says what the weights multiply: the default for this CPU, or what was asked', async (t) => {
  t.true(model.info.activations === 'q8' || model.info.activations === 'f32', String(model.info.activations))
  for (const activations of ['f32', 'q8'] as const) {
    const asked = await Model.load(modelPath('Q8_0'), { activations })
    t.is(asked.info.activations, activations)
    asked.dispose()
  }
})

test.serial("quantize 'q8_0' rounds an F32 file's projections into Q8_0 blocks at load: the logits of the Q8_0 file our converter makes from the same source, and it still says Paris", async (t) => {
  const prompt = model.tokenizer.encode('The capital of France is')
  const lastLogits = async (path: string, options: ModelLoadOptions) => {
    const m = await Model.load(path, options)
    const cache = m.createCache(1, prompt.length)
    const { logits } = await m.forward(cache, [prompt])
    const copy = logits.slice()
    cache.dispose()
    m.dispose()
    return copy
  }
  const f32 = await lastLogits(modelPath('F32'), { activations: 'f32' })
  const quantized = await lastLogits(modelPath('F32'), { activations: 'f32', quantize: 'q8_0' })
  const q8File = await lastLogits(modelPath('Q8_0'), { activations: 'f32' })
  const maxDiff = (a: Float32Array, b: Float32Array) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0)
  // The F32 and Q8_0 files are both made from the fetched Q4_1 file (prepare-test-models): the
  // converter and the load-time quantizer round the same weights into the same blocks.
  t.log(`max |logits diff|: F32 vs Q8_0 file ${maxDiff(f32, q8File)}`)
  t.true(maxDiff(f32, q8File) > 0.01, 'the F32 file is not the Q8_0 file')
  t.deepEqual(quantized, q8File)
  const m = await Model.load(modelPath('F32'), { quantize: 'q8_0' })
  t.teardown(() => m.dispose())
  const [row] = await new Engine(m).generateBatch(prompt, { temperature: 0, maxTokens: 8 })
  t.regex(row.text, /Paris/)
})

test.serial('rows of different prompt lengths generated together equal each generated alone (greedy)', async (t) => {
  const prompts = [
    encode(chatml('Hi')),
    encode(chatml('Explain what a hash map is, and when it beats a sorted array.')),
    model.tokenizer.encode('Once upon a time'),
  ]
  const together = await engine.generateBatch(prompts, { temperature: 0, maxTokens: 32 })
  for (const [i, p] of prompts.entries()) {
    const [alone] = await engine.generateBatch(p, { temperature: 0, maxTokens: 32 })
    t.deepEqual(together[i].tokens, alone.tokens, `prompt ${i}`)
    t.is(together[i].text, alone.text)
  }
})

test.serial('each row stops on its own end-of-turn token; maxTokens bounds the rest', async (t) => {
  const rows = await engine.generateBatch(encode(chatml('Say hello.')), { numSamples: 4, maxTokens: 40, temperature: 0.8, seed: 3 })
  t.is(rows.length, 4)
  for (const row of rows) {
    t.true(row.tokens.length <= 40)
    t.false(row.tokens.some((tok) => model.info.eogTokens.includes(tok)), 'the end-of-turn token is not part of the output')
    if (row.finishReason === 'length') t.is(row.tokens.length, 40)
  }
  t.true(rows.some((r) => r.finishReason === 'stop'), 'a short answer ends on <|im_end|>')
})

test.serial('the same seed reproduces, different seeds differ, temperature 0 ignores the seed', async (t) => {
  const prompt = encode(chatml('Write a one-line story about a fox.'))
  const run = (o: object) => engine.generateBatch(prompt, { numSamples: 2, maxTokens: 24, ...o })
  t.deepEqual(await run({ temperature: 1, seed: 11 }), await run({ temperature: 1, seed: 11 }))
  const [a, b] = [await run({ temperature: 1, seed: 11 }), await run({ temperature: 1, seed: 12 })]
  t.notDeepEqual(a.map((r) => r.tokens), b.map((r) => r.tokens))
  const g1 = await run({ temperature: 0, seed: 1 })
  const g2 = await run({ temperature: 0, seed: 2 })
  t.deepEqual(g1, g2)
  t.deepEqual(g1[0].tokens, g1[1].tokens, 'greedy samples are identical')
})

test.serial('first tokens differ across samples at temperature > 0 (each row samples on its own)', async (t) => {
  const firsts = new Set<number>()
  for await (const step of engine.generate(encode(chatml('Pick a random word.')), { numSamples: 16, maxTokens: 1, temperature: 1.5, seed: 5 })) {
    step.tokenColumn.forEach((tok) => firsts.add(tok))
  }
  t.true(firsts.size > 1, `16 samples gave ${firsts.size} distinct first tokens`)
})

test.serial('stop strings end a row before the stop text, also when it spans tokens', async (t) => {
  const [free] = await engine.generateBatch(model.tokenizer.encode('1, 2, 3, 4, 5, 6, 7'), { temperature: 0, maxTokens: 20 })
  t.true(free.text.includes(', 9'), `greedy text: ${JSON.stringify(free.text)}`)
  const [stopped] = await engine.generateBatch(model.tokenizer.encode('1, 2, 3, 4, 5, 6, 7'), { temperature: 0, maxTokens: 20, stop: [', 9'] })
  t.is(stopped.finishReason, 'stop')
  t.is(stopped.text, free.text.slice(0, free.text.indexOf(', 9')))
})

test.serial('streamed text concatenates to the decoded tokens', async (t) => {
  let text = ''
  const tokens: number[] = []
  for await (const step of engine.generate(encode(chatml('Écris une phrase en français avec des accents, et un emoji.')), { temperature: 0, maxTokens: 48 })) {
    text += step.text[0]
    if (step.finished[0] !== 'stop') tokens.push(step.tokenColumn[0])
  }
  t.is(text, model.tokenizer.decode(tokens))
})

test.serial('continuing a cached conversation equals re-prefilling it', async (t) => {
  const turn1 = encode(chatml('What is 2 + 2?'))
  const cache = model.createCache(1, 256)
  const first = await engine.generateBatch(turn1, { temperature: 0, maxTokens: 16, cache })
  const history = turn1.concat(first[0].tokens).slice(0, cache.seqlens[0])
  const turn2 = encode('<|im_end|>\n<|im_start|>user\nAnd 3 + 3?<|im_end|>\n<|im_start|>assistant\n')
  const pending = turn1.concat(first[0].tokens).slice(history.length)
  const continued = await engine.generateBatch(pending.concat(turn2), { temperature: 0, maxTokens: 16, cache })
  const fresh = await engine.generateBatch(turn1.concat(first[0].tokens, turn2), { temperature: 0, maxTokens: 16 })
  t.deepEqual(continued[0].tokens, fresh[0].tokens)
  cache.dispose()
})

test.serial('a caller that stops early keeps a cache holding the prompt and the tokens fed before its last step', async (t) => {
  // The next pass starts before each step is handed out; stopping takes its tokens back out.
  const prompt = encode(chatml('Count from one to twenty.'))
  const cache = model.createCache(2, 128)
  const seen: number[][] = [[], []]
  for await (const step of engine.generate(prompt, { numSamples: 2, temperature: 0, maxTokens: 30, stopTokens: [], cache })) {
    step.tokenColumn.forEach((tok, r) => seen[r].push(tok))
    if (seen[0].length === 5) break
  }
  t.deepEqual(Array.from(cache.seqlens), [prompt.length + 4, prompt.length + 4])
  // Continuing from it with the fifth token gives what an uninterrupted run gives next.
  const { candidates } = await model.forward(cache, [[seen[0][4]], []], { candidates: 1, logits: false })
  const whole = await engine.generateBatch(prompt, { temperature: 0, maxTokens: 6, stopTokens: [] })
  t.is(candidates?.ids[0], whole[0].tokens[5])
  cache.dispose()
})

test.serial('multiStep: greedy bursts give the rows and the kept cache that one pass per call gives, and waste no pass when no row stops inside one', async (t) => {
  const cases: [number[] | number[][], GenerateOptions][] = [
    [encode(chatml('Count from one to ten.')), { maxTokens: 37, stopTokens: [] }],
    [encode('1, 2, 3, 4, 5, 6, 7'), { maxTokens: 20, stop: [', 9'] }],
    [[encode(chatml('Name a colour.')), encode(chatml('Say hi.'))], { maxTokens: 45, numSamples: 2 }],
  ]
  for (const [prompt, options] of cases) {
    const rows = Array.isArray(prompt[0]) ? prompt.length * (options.numSamples ?? 1) : 1
    const runs = []
    for (const multiStep of [1, 3, 8]) {
      const cache = model.createCache(rows, 256)
      const before = model.stats()
      const result = await engine.generateBatch(prompt, { ...options, temperature: 0, multiStep, cache })
      runs.push({ result, seqlens: Array.from(cache.seqlens), passes: model.stats().forwardCalls - before.forwardCalls })
      cache.dispose()
    }
    t.deepEqual(runs[1].result, runs[0].result)
    t.deepEqual(runs[2].result, runs[0].result)
    t.deepEqual(runs[1].seqlens, runs[0].seqlens, 'a row that stopped inside a burst was rewound')
    t.deepEqual(runs[2].seqlens, runs[0].seqlens)
  }
  // 37 tokens, no stop: 1 prefill and 36 decode passes, in 12 calls of 3 or 5 calls of 8 (the last cut to what is left).
  const before = model.stats()
  await engine.generateBatch(cases[0][0], { ...cases[0][1], temperature: 0, multiStep: 8 })
  t.is(model.stats().forwardCalls - before.forwardCalls, 37)
  const error = await t.throwsAsync(engine.generateBatch(cases[0][0], { multiStep: 0 }))
  t.regex(error?.message ?? '', /multiStep must be an integer in 1\.\.64, got 0/)
})

test.serial('a cache made beforehand and reused gives each call what a fresh one gives, samples included', async (t) => {
  const prompt = encode(chatml('Write a one-line story about a fox.'))
  const options = { numSamples: 3, maxTokens: 12, temperature: 1, seed: 7 }
  const fresh = await engine.generateBatch(prompt, options)
  const cache = model.createCache(3, 64)
  t.deepEqual(await engine.generateBatch(prompt, { ...options, cache }), fresh)
  cache.reset()
  t.deepEqual(await engine.generateBatch(prompt, { ...options, cache }), fresh, 'the same after a reset')
  const held = Array.from(cache.seqlens)
  const error = await t.throwsAsync(engine.generateBatch(prompt, { numSamples: 2, cache }))
  t.regex(error?.message ?? '', /one row per prompt and sample: 1 × 2 = 2, but it has 3/)
  t.deepEqual(Array.from(cache.seqlens), held, 'the refused call touched nothing')
  cache.dispose()
})

test.serial('applyChatTemplate renders the model\'s own template (ChatML for SmolLM2)', (t) => {
  const text = model.applyChatTemplate([{ role: 'user', content: 'Hi' }], { addGenerationPrompt: true })
  t.is(text, chatml('Hi'))
})

test.serial('the KV store reports 2·L·B·T·H_kv·D bytes × 2 (f16, the default) or 4 (f32), starts at the capacity asked and grows in 1024 steps', async (t) => {
  const { nLayers, nKvHeads, headDim } = model.info
  const exact = model.createCache(3, 100, { kvType: 'f32' })
  t.is(exact.kvType, 'f32')
  t.is(exact.sizeBytes, 2 * nLayers * 3 * 100 * nKvHeads * headDim * 4)
  t.is(model.cacheBytes(3, 100, { kvType: 'f32' }), exact.sizeBytes, 'cacheBytes says what createCache will hold')
  exact.dispose()
  t.throws(() => model.createCache(1, 8, { kvType: 'q8' as 'f16' }), { message: /kvType must be 'f16' or 'f32'/ })
  const cache = model.createCache(3, 100)
  t.is(model.cacheBytes(3, 100), cache.sizeBytes)
  t.is(cache.kvType, 'f16')
  t.is(cache.capacity, 100)
  t.is(cache.sizeBytes, 2 * nLayers * 3 * 100 * nKvHeads * headDim * 2)
  const run = (token: number, n: number) => Array.from({ length: n }, () => token)
  const [a, b] = [model.tokenizer.encode(' a')[0], model.tokenizer.encode(' b')[0]]
  await model.forward(cache, [run(a, 600), [], run(b, 520)])
  await model.forward(cache, [run(a, 500), [b], []])
  t.deepEqual(Array.from(cache.seqlens), [1100, 1, 520])
  t.is(cache.capacity, 2048)
  t.is(cache.sizeBytes, 2 * nLayers * 3 * 2048 * nKvHeads * headDim * 2)
  cache.dispose()
})

test.serial('a cache given to one generation refuses a second (BUSY) until the first ends, however it ends', async (t) => {
  const prompt = encode(chatml('Count from one to ten.'))
  const options = { temperature: 0, maxTokens: 12, stopTokens: [] }
  const alone = await engine.generateBatch(prompt, options)
  const cache = model.createCache(1, 128)
  const busy = async (p: Promise<unknown>) => {
    const err = await t.throwsAsync(p)
    t.is((err as KvEngineError | undefined)?.code, 'BUSY')
    t.regex(err?.message ?? '', /this cache is being used by another generation; wait for that one to finish \(or abort it\), or give this one a cache of its own/)
  }
  // Two at once: the first runs as it would alone; the second, from another Engine too, is refused.
  const [first, second, third] = await Promise.allSettled([
    engine.generateBatch(prompt, { ...options, cache }),
    engine.generateBatch(prompt, { ...options, cache }),
    new Engine(model).generateBatch(prompt, { ...options, cache }),
  ])
  t.deepEqual(first.status === 'fulfilled' && first.value, alone)
  await busy(second.status === 'rejected' ? Promise.reject(second.reason) : Promise.resolve())
  await busy(third.status === 'rejected' ? Promise.reject(third.reason) : Promise.resolve())
  t.deepEqual(Array.from(cache.seqlens), [prompt.length + 11], 'the refused calls fed nothing')
  // Finished: usable again. Then one left mid-way by break, one aborted, one that failed.
  cache.reset()
  for await (const _ of engine.generate(prompt, { ...options, cache })) {
    await busy(engine.generateBatch(prompt, { ...options, cache }))
    break
  }
  const controller = new AbortController()
  cache.reset()
  const aborted = await t.throwsAsync(async () => {
    for await (const _ of engine.generate(prompt, { ...options, cache, signal: controller.signal })) controller.abort()
  })
  t.is((aborted as KvEngineError | undefined)?.code, 'ABORTED')
  // A tool that throws ends its generation with that error, after the cache was taken: calls
  // open at the first token and close at the third, so the second is the call's text.
  const [a, inside, b] = alone[0].tokens
  t.true(a !== b && inside !== a && inside !== b)
  const throwing = new Engine(model)
  throwing.tools.register('explode', () => {
    throw new Error('the tool failed')
  })
  cache.reset()
  const tools = [{ tool: 'explode', delimiters: { callStart: a, callEnd: b, outputStart: a, outputEnd: b } }]
  const failed = await t.throwsAsync(throwing.generateBatch(prompt, { ...options, cache, tools }))
  t.is(failed?.message, 'the tool failed')
  cache.reset()
  t.deepEqual(await engine.generateBatch(prompt, { ...options, cache }), alone, 'free again after each')
  // Raw passes are not generations: they queue on the cache as before.
  await model.forward(cache, [[prompt[0]]])
  cache.dispose()
})
