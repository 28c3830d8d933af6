// Bad input gets a KvEngineError with a code and a message that says what to do, and the
// process (and the model) carries on.
import { copyFileSync, mkdtempSync, openSync, readFileSync, readSync, closeSync, writeFileSync, mkdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import test, { type ExecutionContext } from 'ava'

import { Engine, KvEngineError, Model, type KvCache, type KvEngineErrorCode } from '../index.js'
import { native, toKvEngineError } from '../src/native.js'
import { chatml, modelPath } from './models.js'

const model = await Model.load(modelPath('Q8_0'))
const engine = new Engine(model)
const prompt = model.tokenizer.encode(chatml('Hello'), { special: true })
const scratch = mkdtempSync(join(tmpdir(), 'kvengine-errors-'))

async function rejects(t: ExecutionContext, p: Promise<unknown> | (() => unknown), code: KvEngineErrorCode, match: RegExp) {
  const err = await t.throwsAsync(async () => (typeof p === 'function' ? p() : p), { instanceOf: KvEngineError })
  t.is(err?.code, code, err?.message)
  t.regex(err?.message ?? '', match)
}

const drain = async (it: AsyncIterable<unknown>) => {
  for await (const _ of it);
}

test.serial('CUDA from a CPU-only build, and unknown devices', async (t) => {
  await rejects(t, Model.load(modelPath('Q8_0'), { device: 'tpu' as 'cuda' }), 'INVALID_ARGUMENT', /device must be 'cpu' or 'cuda'/)
  await rejects(t, Model.load(modelPath('Q8_0'), { dtype: 'f16' }), 'INVALID_ARGUMENT', /dtype applies to device 'cuda'/)
  await rejects(t, Model.load(modelPath('Q8_0'), { activations: 'int4' as 'q8' }), 'INVALID_ARGUMENT', /activations must be 'f32' or 'q8', got "int4"/)
  await rejects(t, Model.load(modelPath('Q8_0'), { device: 'cuda', activations: 'q8' }), 'INVALID_ARGUMENT', /activations apply to device 'cpu' only/)
  await rejects(t, Model.load(modelPath('Q8_0'), { quantize: 'q4_k' as 'q4_0' }), 'INVALID_ARGUMENT', /quantize must be 'q8_0' or 'q4_0', got "q4_k"/)
  await rejects(t, Model.load(modelPath('Q8_0'), { device: 'cuda', quantize: 'q8_0' }), 'INVALID_ARGUMENT', /quantize applies to device 'cpu' only/)
  t.is(model.info.device, 'cpu')
  if (native.hasCuda()) return t.log('this addon is the CUDA build; scripts/gpu-check.sh covers device "cuda"')
  await rejects(t, Model.load(modelPath('Q8_0'), { device: 'cuda' }), 'UNSUPPORTED', /no CUDA support.*npm run build:cuda/)
})

test.serial('missing model path', async (t) => {
  await rejects(t, Model.load(join(scratch, 'nope.gguf')), 'NOT_FOUND', /nope\.gguf/)
})

test.serial("the binding's errors carry their kind in code, not in the message", async (t) => {
  // Async (a load task) and sync (a method) paths, straight from the addon, before src/native.ts.
  const missing = await t.throwsAsync(native.loadModel(join(scratch, 'nope.gguf')))
  t.is((missing as Error & { code?: string }).code, 'NOT_FOUND')
  t.regex(missing?.message ?? '', /^[^[].*nope\.gguf/)
  const loaded = await native.loadModel(modelPath('Q8_0'))
  const zeroRows = t.throws(() => loaded.createCache(0, 8))
  t.is((zeroRows as Error & { code?: string }).code, 'INVALID_ARGUMENT')
  t.regex(zeroRows?.message ?? '', /^batch size must be in 1\.\.=4096, got 0/)
  // napi-rs's own argument conversions carry its status, which src/native.ts reads as a wrong argument.
  const wrongType = t.throws(() => loaded.createCache('two' as unknown as number, 8))
  t.is((wrongType as Error & { code?: string }).code, 'NumberExpected')
  t.is((toKvEngineError(wrongType) as KvEngineError).code, 'INVALID_ARGUMENT')
  t.is((toKvEngineError(zeroRows) as KvEngineError).code, 'INVALID_ARGUMENT')
  loaded.dispose()
})

test.serial('truncated GGUF, at several points', async (t) => {
  const source = modelPath('Q4_1')
  for (const bytes of [3, 64, 4096, 300_000, 20_000_000]) {
    const path = join(scratch, `truncated-${bytes}.gguf`)
    const buf = Buffer.alloc(bytes)
    const fd = openSync(source, 'r')
    readSync(fd, buf, 0, bytes, 0)
    closeSync(fd)
    writeFileSync(path, buf)
    await rejects(t, Model.load(path), 'CORRUPT_FILE', /GGUF|tensor|bytes|remaining/i)
  }
})

test.serial('a file that is not GGUF at all', async (t) => {
  const path = join(scratch, 'text.gguf')
  writeFileSync(path, 'definitely not a model\n'.repeat(100))
  await rejects(t, Model.load(path), 'CORRUPT_FILE', /not a valid GGUF/)
})

test.serial('unsupported architecture', async (t) => {
  const path = join(scratch, 'mamba.gguf')
  copyFileSync(modelPath('Q4_1'), path)
  const buf = readFileSync(path)
  // general.architecture's value is the string right after the key and its type/length fields
  const key = buf.indexOf('general.architecture')
  const value = buf.indexOf('llama', key)
  buf.write('mamba', value)
  writeFileSync(path, buf)
  await rejects(t, Model.load(path), 'UNSUPPORTED', /architecture 'mamba'.*Llama/)
})

test.serial('corrupt safetensors directory', async (t) => {
  const dir = join(scratch, 'hf')
  mkdirSync(dir)
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ model_type: 'llama', vocab_size: 10, hidden_size: 8, intermediate_size: 8, num_hidden_layers: 1, num_attention_heads: 2 }))
  writeFileSync(join(dir, 'model.safetensors'), Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 1, 2, 3]))
  await rejects(t, Model.load(dir), 'CORRUPT_FILE', /safetensors/)
  writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify({ weight_map: { x: '../escape.safetensors' } }))
  await rejects(t, Model.load(dir), 'CORRUPT_FILE', /same directory/)
})

test.serial('empty prompt, ids out of range, fractional ids', async (t) => {
  await rejects(t, () => drain(engine.generate([])), 'INVALID_ARGUMENT', /empty/)
  await rejects(t, () => drain(engine.generate([1, 2, 49152])), 'INVALID_ARGUMENT', /\[0, 49152\)/)
  await rejects(t, () => drain(engine.generate([1, -1])), 'INVALID_ARGUMENT', /not a token id/)
  await rejects(t, () => drain(engine.generate([1, 2.5])), 'INVALID_ARGUMENT', /not a token id/)
})

test.serial('a prompt longer than the context', async (t) => {
  const long = Array.from({ length: model.info.contextLength + 5 }, () => prompt[1])
  await rejects(t, () => drain(engine.generate(long)), 'CONTEXT_OVERFLOW', /context is 8192/)
})

test.serial('nonsense sampling options', async (t) => {
  const bad: [object, RegExp][] = [
    [{ temperature: -1 }, /temperature/],
    [{ temperature: Number.NaN }, /temperature/],
    [{ topK: -3 }, /topK/],
    [{ topK: 2.5 }, /topK/],
    [{ topP: 0 }, /topP/],
    [{ topP: 1.5 }, /topP/],
    [{ minP: 2 }, /minP/],
    [{ maxTokens: 0 }, /maxTokens/],
    [{ numSamples: 0 }, /numSamples/],
  ]
  for (const [options, match] of bad) {
    await rejects(t, () => drain(engine.generate(prompt, options)), 'INVALID_ARGUMENT', match)
  }
})

test.serial('an aborted signal ends generation promptly, and the model stays usable', async (t) => {
  const controller = new AbortController()
  let steps = 0
  const err = await t.throwsAsync(
    async () => {
      for await (const _ of engine.generate(prompt, { maxTokens: 500, temperature: 0.8, seed: 1, signal: controller.signal })) {
        if (++steps === 5) controller.abort()
      }
    },
    { instanceOf: KvEngineError },
  )
  t.is(err?.code, 'ABORTED')
  t.true(steps <= 6, `stopped after ${steps} steps`)
  const [row] = await engine.generateBatch(prompt, { maxTokens: 8, temperature: 0 })
  t.is(row.tokens.length > 0, true)
})

test.serial('an abort during a long prefill cancels it between layers and leaves the cache untouched', async (t) => {
  const cache = model.createCache(1, 4096)
  const controller = new AbortController()
  const long = Array.from({ length: 4000 }, () => prompt[3])
  const started = performance.now()
  setTimeout(() => controller.abort(), 30)
  await rejects(t, model.forward(cache, [long], { signal: controller.signal }), 'ABORTED', /cancelled/)
  const elapsed = performance.now() - started
  t.deepEqual(Array.from(cache.seqlens), [0])
  t.log(`abort took effect ${elapsed.toFixed(0)} ms after the call`)
  cache.dispose()
})

test.serial('a candidates count that is not an integer in 1..4096, or logits that are not a boolean, are refused before the pass runs', async (t) => {
  const cache = model.createCache(1, 64)
  for (const bad of [0, -1, 2.5, 4097, Number.NaN]) {
    await rejects(t, model.forward(cache, [prompt], { candidates: bad }), 'INVALID_ARGUMENT', /candidates must be an integer in 1\.\.4096/)
  }
  await rejects(t, model.forward(cache, [prompt], { logits: false, logitsInto: new Float32Array(1 << 16) }), 'INVALID_ARGUMENT', /logitsInto needs logits/)
  await rejects(t, model.forward(cache, [prompt], { logits: 'no' as unknown as boolean }), 'INVALID_ARGUMENT', /logits must be a boolean/)
  t.deepEqual(Array.from(cache.seqlens), [0], 'nothing ran')
  cache.dispose()
})

test.serial('a logitsInto array too small, or not a Float32Array, is refused before the pass runs', async (t) => {
  const vocab = model.info.vocabSize
  const cache = model.createCache(2, 64)
  await rejects(t, model.forward(cache, [prompt, prompt], { logitsInto: new Float32Array(vocab) }), 'INVALID_ARGUMENT', /logitsInto holds .* size it rows × vocabSize/)
  await rejects(t, model.forward(cache, [prompt], { logitsInto: [] as unknown as Float32Array }), 'INVALID_ARGUMENT', /Float32Array/)
  t.deepEqual(Array.from(cache.seqlens), [0, 0])
  // The same pass into a reused array gives the fresh array's values, as a view of it.
  const into = new Float32Array(2 * vocab)
  const reused = await model.forward(cache, [prompt, []], { logitsInto: into })
  const alone = model.createCache(1, 64)
  const fresh = await model.forward(alone, [prompt])
  t.is(reused.logits.buffer, into.buffer)
  t.deepEqual(Array.from(reused.logits), Array.from(fresh.logits))
  cache.dispose()
  alone.dispose()
})

test.serial('use after dispose', async (t) => {
  const m = await Model.load(modelPath('Q8_0'))
  const cache = m.createCache(1, 16)
  m.dispose()
  t.true(m.disposed)
  await rejects(t, () => drain(new Engine(m).generate([1, 2, 3])), 'DISPOSED', /disposed/)
  await rejects(t, m.forward(cache, [[1]]), 'DISPOSED', /disposed/)
  t.throws(() => m.tokenizer.encode('x'), { instanceOf: KvEngineError })
  cache.dispose()
  t.throws(() => cache.seqlens, { instanceOf: KvEngineError, message: /disposed/ })
})

test.serial('wrong argument types from untyped JavaScript', async (t) => {
  await rejects(t, Model.load(42 as unknown as string), 'INVALID_ARGUMENT', /path/)
  t.throws(() => model.tokenizer.encode(5 as unknown as string), { instanceOf: KvEngineError })
  await rejects(t, () => drain(engine.generate(prompt, { stop: 'x' as unknown as string[] })), 'INVALID_ARGUMENT', /stop/)
  t.throws(() => model.createCache(0), { instanceOf: KvEngineError })
})

test.serial('cache methods refuse rows and lengths that are not integers in range, before the binding could round or wrap them', async (t) => {
  const cache = model.createCache(2, 64)
  await model.forward(cache, [prompt, []])
  const held = [prompt.length, 0]
  const bad: [() => void, RegExp][] = [
    // 1.5 became row 1 in the binding: the empty row was copied over row 0.
    [() => cache.copyRow(1.5, 0), /src must be an integer in 0\.\.1 \(a row of this 2-row cache\), got 1\.5/],
    [() => cache.copyRow(0, 2), /dst must be an integer in 0\.\.1/],
    [() => cache.copyRow(-1, 0), /src must be an integer in 0\.\.1/],
    [() => cache.copyRow('1' as unknown as number, 0), /src must be an integer in 0\.\.1 .*got "1"/],
    [() => cache.copyRow(0, Number.NaN), /dst must be an integer/],
    // 2^32 + 1 became 1 in the binding.
    [() => cache.truncateRow(0, 2 ** 32 + 1), new RegExp(`length must be an integer in 0\\.\\.${prompt.length} \\(row 0 holds ${prompt.length} positions`)],
    [() => cache.truncateRow(0, prompt.length + 1), /length must be an integer in 0\.\./],
    [() => cache.truncateRow(0, 2.5), /length must be an integer/],
    [() => cache.truncateRow(2, 0), /row must be an integer in 0\.\.1/],
    [() => cache.truncateRow(1, 1), /length must be an integer in 0\.\.0/],
    [() => cache.resetRow(0.5), /row must be an integer in 0\.\.1/],
    [() => cache.resetRow(2 ** 32), /row must be an integer in 0\.\.1/],
  ]
  for (const [call, match] of bad) {
    const err = t.throws(call, { instanceOf: KvEngineError })
    t.is(err?.code, 'INVALID_ARGUMENT')
    t.regex(err?.message ?? '', match)
  }
  t.deepEqual(Array.from(cache.seqlens), held, 'no refused call changed a row')
  cache.truncateRow(0, 2)
  t.deepEqual(Array.from(cache.seqlens), [2, 0], 'a length in range is taken')
  cache.dispose()
})

test.serial('createCache refuses a shape or options it cannot honour exactly', (t) => {
  const bad: [() => unknown, RegExp][] = [
    [() => model.createCache(1.5), /batchSize must be an integer in 1\.\.4096, got 1\.5/],
    [() => model.createCache(4097), /batchSize must be an integer in 1\.\.4096/],
    [() => model.createCache(1, 2 ** 32 + 1), /capacity must be an integer in 1\.\.8192 \(the model's context\)/],
    [() => model.createCache(1, 0), /capacity must be an integer in 1\.\.8192/],
    [() => model.createCache(1, 16.5), /capacity must be an integer/],
    [() => model.createCache(1, 16, { kvtype: 'f32' } as object), /unknown createCache\(\) option 'kvtype'; the options are kvType/],
    [() => model.createCache(1, 16, null as unknown as object), /createCache\(\) options must be an object, got null/],
    [() => model.cacheBytes(1, 2 ** 32 + 1), /capacity must be an integer in 1\.\.8192/],
  ]
  for (const [call, match] of bad) {
    const err = t.throws(call, { instanceOf: KvEngineError })
    t.is(err?.code, 'INVALID_ARGUMENT')
    t.regex(err?.message ?? '', match)
  }
})

test.serial('a generation that cannot fit fails in milliseconds, before anything is reserved', async (t) => {
  // 64 rows × the whole context reserved 12 GB and touched it for 20 s before failing.
  let started = performance.now()
  await rejects(t, () => drain(engine.generate(prompt, { numSamples: 64, maxTokens: 1e9 })), 'CONTEXT_OVERFLOW', new RegExp(`the prompt has ${prompt.length} tokens and maxTokens is 1000000000: .* more than the model's context of 8192; lower maxTokens to at most ${8192 - prompt.length}`))
  let ms = performance.now() - started
  t.log(`numSamples 64, maxTokens 1e9: refused in ${ms.toFixed(2)} ms`)
  t.true(ms < 100, `took ${ms.toFixed(0)} ms`)
  // maxMemory bounds what the cache can grow to: exactly rows × (prompt + maxTokens) positions.
  const fits = model.cacheBytes(2, prompt.length + 8)
  const rows = await engine.generateBatch(prompt, { numSamples: 2, maxTokens: 8, temperature: 0, maxMemory: fits })
  t.is(rows.length, 2)
  await rejects(t, engine.generateBatch(prompt, { numSamples: 2, maxTokens: 8, maxMemory: fits - 1 }), 'INVALID_ARGUMENT', new RegExp(`can grow to .* \\(2 rows × ${prompt.length + 8} positions × ${fits / 2 / (prompt.length + 8)} bytes\\), more than maxMemory .*; lower numSamples or maxTokens, or raise maxMemory`))
  await rejects(t, engine.generateBatch(prompt, { maxMemory: 0 }), 'INVALID_ARGUMENT', /maxMemory must be a number of bytes > 0/)
  // Without maxMemory, what a fresh cache reserves is checked against the memory available.
  const prompts = [prompt, prompt, prompt, prompt]
  const needs = model.cacheBytes(4096, prompt.length + 8000)
  if (needs <= process.availableMemory()) return t.log(`this machine has ${needs} bytes available; the default check cannot be shown`)
  started = performance.now()
  await rejects(t, engine.generateBatch(prompts, { numSamples: 1024, maxTokens: 8000 }), 'INVALID_ARGUMENT', /KV cache needs .* GiB \(4096 rows × .* positions × .* bytes\), more than the .* of memory the system has available; lower numSamples or maxTokens/)
  ms = performance.now() - started
  t.log(`4096 rows × ${prompt.length + 8000} positions (${(needs / 2 ** 30).toFixed(0)} GiB): refused in ${ms.toFixed(2)} ms`)
  t.true(ms < 100, `took ${ms.toFixed(0)} ms`)
})

test.serial('bad prompts, token lists, signals and option keys get INVALID_ARGUMENT at once, before anything is allocated', async (t) => {
  const cache = model.createCache(1, 64)
  const huge = { length: 1e9 } as ArrayLike<number>
  // A billion holes: as long as `huge` claims to be, but a real array.
  const sparse: number[] = []
  sparse.length = 1e9
  const started = performance.now()
  await rejects(t, () => drain(engine.generate('Hello' as unknown as number[])), 'INVALID_ARGUMENT', /prompt must be token ids, not a string: encode text with model\.tokenizer\.encode\(\)/)
  await rejects(t, () => drain(engine.generate(42 as unknown as number[])), 'INVALID_ARGUMENT', /prompt must be an array of token ids, got number/)
  await rejects(t, () => drain(engine.generate(huge)), 'INVALID_ARGUMENT', /prompt must be an array of token ids, got object/)
  await rejects(t, () => drain(engine.generate([prompt, 'x' as unknown as number[]])), 'INVALID_ARGUMENT', /prompt\[1\] must be token ids, not a string/)
  await rejects(t, () => drain(engine.generate(sparse)), 'INVALID_ARGUMENT', /the number of prompts must be an integer in 1\.\.4096, got 1000000000/)
  await rejects(t, () => drain(engine.generate([sparse])), 'CONTEXT_OVERFLOW', /prompt\[0\] has 1000000000 tokens but the model's context is 8192/)
  await rejects(t, model.forward(cache, [huge]), 'INVALID_ARGUMENT', /tokens\[0\] must be an array of token ids/)
  await rejects(t, model.forward(cache, [sparse]), 'CONTEXT_OVERFLOW', /tokens\[0\] has 1000000000 tokens/)
  await rejects(t, model.forward(cache, ['abc' as unknown as number[]]), 'INVALID_ARGUMENT', /tokens\[0\] must be token ids, not a string/)
  await rejects(t, model.forward(cache, [[1.5]]), 'INVALID_ARGUMENT', /tokens\[0\]\[0\] = 1\.5 is not a token id/)
  await rejects(t, model.forward(cache, [[1], [2]]), 'INVALID_ARGUMENT', /one token list per cache row \(1\), got 2 lists/)
  await rejects(t, model.forward(cache, sparse), 'INVALID_ARGUMENT', /one token list per cache row \(1\), got 1000000000 lists/)
  await rejects(t, () => drain(engine.generate(prompt, { stopTokens: [2.5] })), 'INVALID_ARGUMENT', /stopTokens\[0\] = 2\.5 is not a token id/)
  t.throws(() => model.tokenizer.decode([-1]), { instanceOf: KvEngineError, message: /decode\(\) tokens\[0\] = -1 is not a token id/ })
  t.throws(() => model.tokenizer.decode(huge), { instanceOf: KvEngineError, message: /must be an array of token ids/ })
  t.throws(() => model.tokenizer.decode('abc' as unknown as number[]), { instanceOf: KvEngineError, message: /not a string/ })
  const ms = performance.now() - started
  t.log(`16 refusals, 1e9-long lists among them, in ${ms.toFixed(1)} ms`)
  t.true(ms < 500, `took ${ms.toFixed(0)} ms`)
  t.is(model.tokenizer.decode(new Uint32Array(prompt)), model.tokenizer.decode(prompt), 'typed arrays are token lists too')

  for (const signal of ['abort', { aborted: true }, null]) {
    await rejects(t, () => drain(engine.generate(prompt, { signal: signal as AbortSignal })), 'INVALID_ARGUMENT', /signal must be an AbortSignal/)
    await rejects(t, model.forward(cache, [prompt], { signal: signal as AbortSignal }), 'INVALID_ARGUMENT', /signal must be an AbortSignal/)
  }
  await rejects(t, () => drain(engine.generate(prompt, { maxToken: 5 } as object)), 'INVALID_ARGUMENT', /unknown generate\(\) option 'maxToken'; the options are .*maxTokens/)
  await rejects(t, () => drain(engine.generate(prompt, null as unknown as object)), 'INVALID_ARGUMENT', /generate\(\) options must be an object, got null/)
  await rejects(t, model.forward(cache, [prompt], { allLogit: true } as object), 'INVALID_ARGUMENT', /unknown forward\(\) option 'allLogit'/)
  await rejects(t, Model.load(modelPath('Q8_0'), { thread: 2 } as object), 'INVALID_ARGUMENT', /unknown Model\.load\(\) option 'thread'/)
  await rejects(t, () => drain(engine.generate(prompt, { cache: {} as KvCache })), 'INVALID_ARGUMENT', /cache must be a KvCache from model\.createCache\(\)/)
  t.deepEqual(Array.from(cache.seqlens), [0], 'no refused call ran a pass')
  cache.dispose()
})
