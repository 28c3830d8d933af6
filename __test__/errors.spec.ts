// Bad input gets a KvEngineError with a code and a message that says what to do, and the
// process (and the model) carries on.
import { copyFileSync, mkdtempSync, openSync, readFileSync, readSync, closeSync, writeFileSync, mkdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import test, { type ExecutionContext } from 'ava'

import { Engine, KvEngineError, Model, type KvEngineErrorCode } from '../index.js'
import { native } from '../src/native.js'
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
  t.is(model.info.device, 'cpu')
  if (native.hasCuda()) return t.log('this addon is the CUDA build; scripts/gpu-check.sh covers device "cuda"')
  await rejects(t, Model.load(modelPath('Q8_0'), { device: 'cuda' }), 'UNSUPPORTED', /no CUDA support.*npm run build:cuda/)
})

test.serial('missing model path', async (t) => {
  await rejects(t, Model.load(join(scratch, 'nope.gguf')), 'NOT_FOUND', /nope\.gguf/)
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
  const long = new Array<number>(model.info.contextLength + 5).fill(prompt[1])
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
  const long = new Array<number>(4000).fill(prompt[3])
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
