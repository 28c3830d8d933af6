// What a JSON schema costs decode: SmolLM2-135M Q8_0 through the Engine, the same prompt decoded
// with and without a schema, alternating, at batch 1 (greedy) and batch 8 (eight samples at
// temperature 1). Speed is decode tokens per second after the first token (the prefill and the
// schema's compilation are outside it); the schema keeps the output going (an array of records
// with free-text fields), and each run's own token count is what its rate is over.
//
//   node --import=tsx benches/grammarSpeed.ts [rounds, default 5]
import { join } from 'node:path'

import { Engine, Model } from '../index.js'
import { ROOT } from './lib/paths.js'

const rounds = Number(process.argv[2] ?? 5)
const model = await Model.load(join(ROOT, 'models', 'SmolLM2-135M-Instruct.Q8_0.gguf'))
const engine = new Engine(model)
const schema = {
  type: 'array',
  items: {
    type: 'object',
    properties: { name: { type: 'string' }, city: { type: 'string' }, age: { type: 'integer', minimum: 0, maximum: 120 }, note: { type: 'string' } },
    required: ['name', 'city', 'age', 'note'],
    additionalProperties: false,
  },
  minItems: 20,
}
const text = '<|im_start|>user\nList twenty people as JSON records with a name, a city, an age and a long note about each.<|im_end|>\n<|im_start|>assistant\n'
const prompt = model.tokenizer.encode(text, { special: true })

/** Decode tokens per second of one generation, over every row's tokens after its first. */
async function rate(batch: number, constrained: boolean): Promise<{ perSecond: number; tokens: number }> {
  const options = { maxTokens: 128, stopTokens: [], ...(batch === 1 ? { temperature: 0 } : { temperature: 1, numSamples: batch, seed: 11 }), ...(constrained && { jsonSchema: schema }) }
  let first = 0
  let tokens = 0
  let last = 0
  for await (const step of engine.generate(prompt, options)) {
    last = performance.now()
    if (first === 0) first = last
    else tokens += step.tokenColumn.filter((t) => t >= 0).length
  }
  return { perSecond: tokens / ((last - first) / 1000), tokens }
}

await rate(1, true) // compiles the vocabulary's trie once, and warms both paths
await rate(1, false)
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]
for (const batch of [1, 8]) {
  const free: number[] = []
  const held: number[] = []
  const counts: number[] = []
  for (let round = 0; round < rounds; round++) {
    free.push((await rate(batch, false)).perSecond)
    const r = await rate(batch, true)
    held.push(r.perSecond)
    counts.push(r.tokens)
  }
  const [f, h] = [median(free), median(held)]
  console.log(
    JSON.stringify({ batch, rounds, unconstrainedTokPerS: Number(f.toFixed(1)), jsonSchemaTokPerS: Number(h.toFixed(1)), ratio: Number((h / f).toFixed(3)), constrainedTokens: counts, free: free.map((x) => Number(x.toFixed(1))), held: held.map((x) => Number(x.toFixed(1))) }),
  )
}
model.dispose()
