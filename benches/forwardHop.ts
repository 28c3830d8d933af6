// Where a decode step's time outside the engine goes: a bare loop of model.forward (the hop to the
// worker thread and back, the promise; asking for what the Engine asks: candidates, no logits)
// against Engine.generate as the benchmark times it (that plus sampling, detokenizing and row
// state), each as ms per step outside forwardSeconds, with one pass per call (multiStep 1) and
// the default bursts (greedy only). Batch 1 decodes greedily, as the decode figure does; larger
// batches sample (temperature 1, top-k 50), as the samples figure does, so they never burst.
//   node --import=tsx benches/forwardHop.ts [model.gguf] [--batch=8]
import { timedGenerate } from './kvengine/timedGenerate.js'
import { importShippedPackage } from './lib/shippedPackage.js'

const { Engine, Model } = await importShippedPackage()

const STEPS = 128
const path = process.argv.slice(2).find((a) => !a.startsWith('--')) ?? 'models/SmolLM2-135M-Instruct.Q4_0.gguf'
const batch = Number(process.argv.find((a) => a.startsWith('--batch='))?.slice('--batch='.length) ?? 1)
const model = await Model.load(path, { threads: 2 })
const vocab = model.info.vocabSize
const prompt = Array.from({ length: 512 }, (_, i) => (i * 7919 + 13) % vocab)
const sampling = batch === 1 ? { temperature: 0 } : { temperature: 1, topK: 50, seed: 1 }
const report = (label: string, wallSeconds: number, share: number) =>
  console.log(`${label}: ${((wallSeconds / STEPS) * 1e3).toFixed(2)} ms/step, outside forward ${((wallSeconds * share) / STEPS * 1e3).toFixed(3)} ms (${(share * 100).toFixed(1)}%)`)

console.log(`${path}, batch ${batch}`)
for (let round = 0; round < 2; round++) {
  const cache = model.createCache(batch, 1024)
  const idle = Array.from({ length: batch - 1 }, () => [])
  await model.forward(cache, [prompt, ...idle])
  for (let r = 1; r < batch; r++) cache.copyRow(0, r)
  const forwardBefore = model.stats().forwardSeconds
  const started = performance.now()
  for (let s = 0; s < STEPS; s++) {
    const next = Array.from({ length: batch }, (_, r) => [(s * 31 + r) % vocab])
    await model.forward(cache, next, { candidates: batch === 1 ? 1 : 50, logits: false })
  }
  const wall = (performance.now() - started) / 1000
  report('bare forward loop          ', wall, 1 - (model.stats().forwardSeconds - forwardBefore) / wall)
  cache.dispose()
  // STEPS + 1 tokens: the first step ends the prefill, the STEPS after it are timed.
  for (const multiStep of [1, 4]) {
    const t = await timedGenerate(new Engine(model), prompt, { ...sampling, numSamples: batch, maxTokens: STEPS + 1, stopTokens: [], multiStep })
    report(`engine.generate, multiStep ${multiStep}`, (t.lastStepMs - t.firstStepMs) / 1000, t.tsShare ?? NaN)
  }
}
model.dispose()
