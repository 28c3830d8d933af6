// dispose() gives memory back: 50 load/generate/dispose cycles end near where they started.
import test from 'ava'

import { Engine, Model } from '../index.js'
import { chatml, modelPath } from './models.js'

const mib = (bytes: number) => bytes / 2 ** 20

async function cycle(): Promise<void> {
  const model = await Model.load(modelPath('Q8_0'))
  const prompt = model.tokenizer.encode(chatml('Count to five.'), { special: true })
  await new Engine(model).generateBatch(prompt, { numSamples: 2, maxTokens: 4, temperature: 0 })
  model.dispose()
}

test('RSS returns near its starting point over 50 load/generate/dispose cycles', async (t) => {
  await cycle() // warm-up: thread pools, allocator arenas, code pages
  const start = process.memoryUsage.rss()
  let peak = start
  for (let i = 0; i < 50; i++) {
    await cycle()
    peak = Math.max(peak, process.memoryUsage.rss())
  }
  const end = process.memoryUsage.rss()
  t.log(`RSS after warm-up ${mib(start).toFixed(1)} MiB, peak ${mib(peak).toFixed(1)} MiB, after 50 cycles ${mib(end).toFixed(1)} MiB`)
  // one Q8_0 model is ~145 MiB; a leak of even a tenth of it per cycle would add 700+ MiB
  t.true(end - start < 48 * 2 ** 20, `RSS grew by ${mib(end - start).toFixed(1)} MiB`)
})
