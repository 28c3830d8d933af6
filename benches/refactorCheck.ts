// Behaviour and speed unchanged by a refactor: the same greedy generations on SmolLM2-135M Q8_0
// through the Engine (its default multi-step bursts; one row of 128 tokens and 8 samples of 64),
// the tokens hashed, and batch-1 decode tok/s over four repeats. Run it from two checkouts, each
// with its addon built, and compare the lines:
//
//   node --import=tsx benches/refactorCheck.ts [checkout root, default: this one]
import { createHash } from 'node:crypto'
import { join } from 'node:path'

import { ROOT as here } from './lib/paths.js'

const root = process.argv[2] ?? here
const { Model, Engine } = (await import(join(root, 'index.ts'))) as typeof import('../index.js')
const model = await Model.load(join(here, 'models', 'SmolLM2-135M-Instruct.Q8_0.gguf'))
const engine = new Engine(model)
const prompts = ['The history of the printing press', 'def fibonacci(n):', 'Once upon a time, in a small village', 'The three laws of thermodynamics are']
const hash = createHash('sha256')
const rates: number[] = []
for (let rep = 0; rep < 5; rep++) {
  for (const [i, text] of prompts.entries()) {
    const ids = model.tokenizer.encode(text)
    const started = performance.now()
    const [row] = await engine.generateBatch(ids, { temperature: 0, maxTokens: 128, stopTokens: [] })
    const seconds = (performance.now() - started) / 1000
    // The first repeat warms up; its tokens are the ones compared.
    if (rep === 0) hash.update(JSON.stringify(row.tokens))
    else rates.push(row.tokens.length / seconds)
    const samples = await engine.generateBatch(ids, { temperature: 0, numSamples: 8, maxTokens: 64, stopTokens: [] })
    if (rep === 0 && i === 0) hash.update(JSON.stringify(samples.map((r) => r.tokens)))
  }
}
rates.sort((a, b) => a - b)
const rate = (x: number) => Number(x.toFixed(1))
console.log(JSON.stringify({ root, tokensSha256: hash.digest('hex').slice(0, 16), decodeTokPerS: { median: rate(rates[rates.length >> 1]), min: rate(rates[0]), max: rate(rates[rates.length - 1]) } }))
model.dispose()
