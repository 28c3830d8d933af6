// Where a batch-1 decode step's time outside the engine goes: a bare loop of model.forward (the hop
// to the worker thread and back, the promise) against Engine.generate as the benchmark times it
// (that plus sampling, detokenizing and row state), each as ms per step outside forwardSeconds.
//   node --import=tsx benches/forwardHop.ts [model.gguf]
import { Engine, Model } from '../index.js'
import { timedGenerate } from './kvengine/timedGenerate.js'

const STEPS = 128
const model = await Model.load(process.argv[2] ?? 'models/SmolLM2-135M-Instruct.Q4_0.gguf', { threads: 2 })
const vocab = model.info.vocabSize
const prompt = Array.from({ length: 512 }, (_, i) => (i * 7919 + 13) % vocab)
const report = (label: string, wallSeconds: number, share: number) =>
  console.log(`${label}: ${((wallSeconds / STEPS) * 1e3).toFixed(2)} ms/step, outside forward ${((wallSeconds * share) / STEPS * 1e3).toFixed(3)} ms (${(share * 100).toFixed(1)}%)`)

for (let round = 0; round < 2; round++) {
  const cache = model.createCache(1, 1024)
  const into = new Float32Array(vocab)
  await model.forward(cache, [prompt], { logitsInto: into })
  const forwardBefore = model.stats().forwardSeconds
  const started = performance.now()
  for (let s = 0; s < STEPS; s++) await model.forward(cache, [[(s * 31) % vocab]], { logitsInto: into })
  const wall = (performance.now() - started) / 1000
  report('bare forward loop', wall, 1 - (model.stats().forwardSeconds - forwardBefore) / wall)
  cache.dispose()
  // STEPS + 1 tokens: the first step ends the prefill, the STEPS after it are timed.
  const t = await timedGenerate(new Engine(model), prompt, { maxTokens: STEPS + 1, temperature: 0, stopTokens: [] })
  report('engine.generate  ', (t.lastStepMs - t.firstStepMs) / 1000, t.tsShare ?? NaN)
}
model.dispose()
