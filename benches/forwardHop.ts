// Where a batch-1 decode step's time outside the engine goes: a bare loop of model.forward (the hop
// to the worker thread and back, the promise) against Engine.generate (that plus sampling, detokenizing
// and row state), each as ms per step outside forwardSeconds. Two rounds.
//   node --import=tsx benches/forwardHop.ts [model.gguf]
import { Engine, Model } from '../index.js'
const model = await Model.load(process.argv[2] ?? 'models/SmolLM2-135M-Instruct.Q4_0.gguf', { threads: 2 })
const vocab = model.info.vocabSize
const prompt = Array.from({ length: 512 }, (_, i) => (i * 7919 + 13) % vocab)
for (let round = 0; round < 2; round++) {
  const cache = model.createCache(1, 1024)
  const into = new Float32Array(vocab)
  await model.forward(cache, [prompt], { logitsInto: into })
  const steps = 128
  const f0 = model.stats().forwardSeconds
  const t0 = performance.now()
  for (let s = 0; s < steps; s++) await model.forward(cache, [[(s * 31) % vocab]], { logitsInto: into })
  const wall = (performance.now() - t0) / 1000
  const fwd = model.stats().forwardSeconds - f0
  console.log(`bare forward loop: ${(wall / steps * 1e3).toFixed(2)} ms/step, outside forward ${((wall - fwd) / steps * 1e3).toFixed(3)} ms (${((1 - fwd / wall) * 100).toFixed(1)}%)`)
  cache.dispose()
  const engine = new Engine(model)
  let n = 0, f1 = 0, t1 = 0
  for await (const _ of engine.generate(prompt, { maxTokens: steps + 1, temperature: 0, stopTokens: [] })) {
    if (++n === 1) { f1 = model.stats().forwardSeconds; t1 = performance.now() }
  }
  const w2 = (performance.now() - t1) / 1000, fw2 = model.stats().forwardSeconds - f1
  console.log(`engine.generate:   ${(w2 / (n - 1) * 1e3).toFixed(2)} ms/step, outside forward ${((w2 - fw2) / (n - 1) * 1e3).toFixed(3)} ms (${((1 - fw2 / w2) * 100).toFixed(1)}%)`)
}
model.dispose()
