import test from 'ava'

import { KvEngineError, Rng, Sampler } from '../index.js'
import { validateSamplingOptions } from '../src/validateSamplingOptions.js'

const sampler = (o: object, seed = 1) => new Sampler(validateSamplingOptions(o), new Rng(seed))

/** The textbook distribution, by full sort: temperature, top-k, top-p, min-p, renormalise. */
function reference(logits: number[], o: { temperature: number; topK?: number; topP?: number; minP?: number }): number[] {
  const order = logits.map((l, i) => [l / o.temperature, i]).sort((a, b) => b[0] - a[0])
  const top = o.topK ? order.slice(0, o.topK) : order
  const max = top[0][0]
  const weights = top.map(([z]) => Math.exp(z - max))
  const z = weights.reduce((a, b) => a + b, 0)
  const keep: number[] = []
  let cum = 0
  for (const [j, w] of weights.entries()) {
    if (o.minP && w < o.minP) break
    keep.push(j)
    cum += w / z
    if (cum >= (o.topP ?? 1)) break
  }
  const probs = new Array<number>(logits.length).fill(0)
  const kz = keep.reduce((a, j) => a + weights[j], 0)
  for (const j of keep) probs[top[j][1]] = weights[j] / kz
  return probs
}

function randomLogits(n: number, seed: number): Float32Array {
  const rng = new Rng(seed)
  return Float32Array.from({ length: n }, () => (rng.nextFloat() - 0.5) * 8)
}

test('temperature 0 is argmax and ignores the seed', (t) => {
  const logits = randomLogits(1000, 3)
  const expected = logits.indexOf(Math.max(...logits))
  for (const seed of [1, 2, 3]) t.is(sampler({ temperature: 0 }, seed).sample(logits), expected)
})

for (const o of [
  { temperature: 1 },
  { temperature: 0.7 },
  { temperature: 1, topK: 5 },
  { temperature: 1.3, topP: 0.6 },
  { temperature: 1, minP: 0.2 },
  { temperature: 0.9, topK: 12, topP: 0.8, minP: 0.05 },
]) {
  test(`empirical frequencies match the reference distribution: ${JSON.stringify(o)}`, (t) => {
    const logits = randomLogits(50, 11)
    const expected = reference(Array.from(logits), o)
    const s = sampler(o, 99)
    const counts = new Array<number>(50).fill(0)
    const draws = 40_000
    for (let i = 0; i < draws; i++) counts[s.sample(logits)]++
    let worst = 0
    for (let i = 0; i < 50; i++) {
      if (expected[i] === 0) t.is(counts[i], 0, `token ${i} is filtered out but was drawn`)
      worst = Math.max(worst, Math.abs(counts[i] / draws - expected[i]))
    }
    t.true(worst < 0.012, `max |empirical - expected| = ${worst}`)
  })
}

test('top-p without top-k grows its candidate set past the first batch when needed', (t) => {
  const flat = new Float32Array(5000).fill(0) // uniform: the nucleus of 0.9 needs 4500 tokens
  const s = sampler({ temperature: 1, topP: 0.9 }, 5)
  const seen = new Set<number>()
  for (let i = 0; i < 20_000; i++) seen.add(s.sample(flat))
  t.true(seen.size > 4000, `${seen.size} distinct tokens`)
})

test('the same seed reproduces, different seeds and rows differ', (t) => {
  const logits = randomLogits(49152, 4)
  const draw = (rng: Rng) => {
    const s = new Sampler(validateSamplingOptions({ temperature: 1 }), rng)
    return Array.from({ length: 20 }, () => s.sample(logits))
  }
  t.deepEqual(draw(new Rng(42)), draw(new Rng(42)))
  t.notDeepEqual(draw(new Rng(42)), draw(new Rng(43)))
  t.notDeepEqual(draw(Rng.forRow(42, 0)), draw(Rng.forRow(42, 1)))
  t.deepEqual(draw(Rng.forRow(42, 3)), draw(Rng.forRow(42, 3)))
})

test('sampling a row of a batch reads it in place, equal to sampling a copy', (t) => {
  const batch = randomLogits(3 * 700, 8)
  const row = batch.slice(1400, 2100)
  const a = sampler({ temperature: 0.8, topK: 40 }, 6)
  const b = sampler({ temperature: 0.8, topK: 40 }, 6)
  for (let i = 0; i < 200; i++) t.is(a.sample(batch, 1400, 700), b.sample(row))
})

test('bad options are rejected with a message that says what is allowed', (t) => {
  const cases: [object, RegExp][] = [
    [{ temperature: -0.5 }, /temperature must be a finite number >= 0/],
    [{ temperature: Infinity }, /temperature/],
    [{ topK: -3 }, /topK must be a non-negative integer.*-3/],
    [{ topK: 1.5 }, /topK/],
    [{ topK: '5' }, /topK/],
    [{ topP: 0 }, /topP must be in \(0, 1\]/],
    [{ topP: 1.01 }, /topP/],
    [{ topP: Number.NaN }, /topP/],
    [{ minP: -0.1 }, /minP must be in \[0, 1\]/],
    [{ seed: 1.5 }, /seed/],
    [{ seed: -1 }, /seed/],
  ]
  for (const [o, message] of cases) {
    const err = t.throws(() => validateSamplingOptions(o), { instanceOf: KvEngineError, message })
    t.is(err?.code, 'INVALID_ARGUMENT')
  }
})
