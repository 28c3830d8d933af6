import test, { type ExecutionContext } from 'ava'

import { Candidates } from '../src/Candidates.js'
import { KvEngineError } from '../src/KvEngineError.js'
import { Rng } from '../src/Rng.js'
import { Sampler } from '../src/Sampler.js'
import type { SamplingOptions } from '../src/SamplingOptions.js'
import { validateSamplingOptions } from '../src/validateSamplingOptions.js'

const sampler = (o: SamplingOptions, seed = 1) => new Sampler(o, new Rng(seed))

/** Logits spread uniformly over `width` nats, reproducible from `seed`; no ties in practice. */
function randomLogits(n: number, seed: number, width = 8): Float32Array {
  const rng = new Rng(seed)
  return Float32Array.from({ length: n }, () => (rng.nextFloat() - 0.5) * width)
}

/**
 * The textbook distribution, independent of the Sampler: softmax by full sort, then each filter
 * on renormalised probabilities in turn (top-k, top-p, min-p), then renormalise.
 */
function reference(logits: Float32Array, o: SamplingOptions): number[] {
  const { temperature = 1, topK = 0, topP = 1, minP = 0 } = o
  const max = Math.max(...logits)
  let probs = Array.from(logits, (l, id) => ({ id, p: Math.exp((l - max) / temperature) }))
  probs.sort((a, b) => b.p - a.p)
  const normalise = () => {
    const z = probs.reduce((s, x) => s + x.p, 0)
    probs = probs.map((x) => ({ id: x.id, p: x.p / z }))
  }
  normalise()
  if (topK > 0) probs = probs.slice(0, topK)
  normalise()
  let before = 0
  probs = probs.filter((x) => {
    const keep = before < topP
    before += x.p
    return keep
  })
  normalise()
  const pMax = probs[0].p
  probs = probs.filter((x) => x.p >= minP * pMax)
  normalise()
  const out = Array.from({ length: logits.length }, () => 0)
  for (const x of probs) out[x.id] = x.p
  return out
}

function drawCounts(s: Sampler, logits: Float32Array, draws: number): number[] {
  const counts = Array.from({ length: logits.length }, () => 0)
  for (let i = 0; i < draws; i++) counts[s.sample(logits)]++
  return counts
}

/**
 * Filtered-out tokens are never drawn; every frequency is within 0.015 of its probability; and a
 * chi-square over bins pooled to >= 50 expected draws stays under df + 6·sqrt(2·df), about six
 * standard deviations, so the check is sensitive without being flaky.
 */
function assertMatches(t: ExecutionContext, counts: number[], expected: number[], draws: number): void {
  const outside = counts.flatMap((c, id) => (expected[id] === 0 && c > 0 ? [id] : []))
  t.deepEqual(outside, [], 'tokens that the filters exclude were drawn')
  const worst = Math.max(...counts.map((c, id) => Math.abs(c / draws - expected[id])))
  t.true(worst < 0.015, `max |empirical - expected| = ${worst}`)
  const support = expected.flatMap((p, id) => (p > 0 ? [id] : [])).sort((a, b) => expected[b] - expected[a])
  let chi2 = 0
  let bins = 0
  let observed = 0
  let wanted = 0
  for (const [i, id] of support.entries()) {
    observed += counts[id]
    wanted += expected[id] * draws
    if (wanted >= 50 || i === support.length - 1) {
      chi2 += (observed - wanted) ** 2 / wanted
      bins++
      observed = wanted = 0
    }
  }
  const df = Math.max(bins - 1, 1)
  t.true(chi2 < df + 6 * Math.sqrt(2 * df), `chi-square ${chi2.toFixed(1)} over ${bins} bins`)
}

test('temperature 0 is argmax, first maximum on ties, whatever the seed and other filters', (t) => {
  const logits = randomLogits(1000, 3)
  logits[700] = 9
  logits[200] = 9
  for (const seed of [1, 2, 3]) {
    const s = sampler({ temperature: 0, topK: 5, topP: 0.5, minP: 0.5 }, seed)
    for (let i = 0; i < 5; i++) t.is(s.sample(logits), 200)
  }
  t.is(sampler({ temperature: 1e-320 }).sample(logits), 200, 'a temperature whose inverse overflows is greedy')
  t.is(sampler({ topK: 1 }).sample(logits), 200)
})

const combos: SamplingOptions[] = [
  {},
  { temperature: 0.7 },
  { temperature: 2 },
  { topK: 5 },
  { topK: 100 }, // more than the vocabulary: off
  { temperature: 1.3, topP: 0.6 },
  { topP: 0.95 },
  { minP: 0.2 },
  { temperature: 1.5, topP: 0.9, minP: 0.1 },
  { temperature: 0.9, topK: 12, topP: 0.8, minP: 0.05 },
  { topK: 20, minP: 0.3 },
]
for (const o of combos) {
  test(`frequencies match the reference distribution on 50 tokens: ${JSON.stringify(o)}`, (t) => {
    const logits = randomLogits(50, 11, 6)
    const draws = 20_000
    assertMatches(t, drawCounts(sampler(o, 99), logits, draws), reference(logits, o), draws)
  })
}

// `bigger` is what the nucleus must outgrow for the test to reach the path it names
for (const { vocab, width, o, draws, bigger, path } of [
  { vocab: 500, width: 8, o: { topP: 0.9 }, draws: 20_000, bigger: 64, path: 'from a first heap of 64 to the next' },
  { vocab: 5000, width: 0.5, o: { topP: 0.9 }, draws: 20_000, bigger: 1024, path: 'past every heap, to a selection' },
  { vocab: 5000, width: 0.5, o: { topP: 0.9, minP: 0.8 }, draws: 20_000, bigger: 1024, path: 'to a selection, then min-p' },
]) {
  test(`top-p on ${vocab} tokens goes ${path}: ${JSON.stringify(o)}`, (t) => {
    const logits = randomLogits(vocab, 21, width)
    const nucleus = reference(logits, { topP: o.topP }).filter((p) => p > 0).length
    t.log(`nucleus of ${nucleus} tokens`)
    t.true(nucleus > bigger)
    assertMatches(t, drawCounts(sampler(o, 5), logits, draws), reference(logits, o), draws)
  })
}

// Large vocabularies take top-k through a threshold guessed from a sample of the logits; these
// rows are built so that a bad guess would drop one of the k best or keep too few.
for (const { name, logits, topK = 10 } of [
  { name: 'random', logits: randomLogits(20_000, 31, 8) },
  { name: 'a sample whose best are the only high ones (falls back to every token)', topK: 50, logits: Float32Array.from({ length: 20_000 }, (_, i) => (i % 8 === 0 ? 4 + i / 20_000 : ((i * 7919) % 1000) / 1000)) },
  { name: 'ascending (every token beats the last)', logits: Float32Array.from({ length: 20_000 }, (_, i) => i * 1e-3) },
  { name: 'the best tokens all off the sampled positions', logits: Float32Array.from({ length: 20_000 }, (_, i) => (i % 8 === 3 ? 5 + i / 20_000 : (i % 97) / 97)) },
  { name: 'masked but for 30 tokens', logits: Float32Array.from({ length: 20_000 }, (_, i) => (i % 661 === 7 ? i / 2000 : -Infinity)) },
]) {
  test(`top-k over 20000 tokens matches the reference: ${name}`, (t) => {
    const o = { topK, temperature: 0.7 }
    assertMatches(t, drawCounts(sampler(o, 3), logits, 20_000), reference(logits, o), 20_000)
  })
}

test('the same seed reproduces a sequence of draws; other seeds and other rows differ', (t) => {
  const logits = randomLogits(49152, 4, 4)
  const draw = (rng: Rng, o: SamplingOptions) => {
    const s = new Sampler(o, rng)
    return Array.from({ length: 30 }, () => s.sample(logits))
  }
  for (const o of [{}, { topK: 40 }, { topP: 0.9 }, { minP: 0.05 }]) {
    const name = JSON.stringify(o)
    t.deepEqual(draw(new Rng(42), o), draw(new Rng(42), o), name)
    t.notDeepEqual(draw(new Rng(42), o), draw(new Rng(43), o), name)
    t.deepEqual(draw(Rng.forRow(42, 3), o), draw(Rng.forRow(42, 3), o), name)
    t.notDeepEqual(draw(Rng.forRow(42, 0), o), draw(Rng.forRow(42, 1), o), name)
  }
})

test('Rng streams: reproducible, distinct per seed and per row, bigint equals number', (t) => {
  const take = (rng: Rng) => Array.from({ length: 8 }, () => rng.nextUint32())
  t.deepEqual(take(new Rng(7)), take(new Rng(7)))
  t.deepEqual(take(new Rng(7)), take(new Rng(7n)))
  t.deepEqual(take(new Rng(2 ** 53)), take(new Rng(2n ** 53n)))
  t.notDeepEqual(take(new Rng(7)), take(new Rng(8)))
  t.deepEqual(take(Rng.forRow(7n, 2)), take(Rng.forRow(7, 2)))
  const rows = new Set(Array.from({ length: 64 }, (_, r) => take(Rng.forRow(7, r)).join()))
  t.is(rows.size, 64)
  t.notDeepEqual(take(Rng.forRow(7, 1)), take(Rng.forRow(8, 0)), 'seed and row are hashed together, not added')
  t.throws(() => new Rng(1.5), { instanceOf: KvEngineError })
  t.throws(() => Rng.forRow(1, -1), { instanceOf: KvEngineError })
})

test('Rng.nextFloat is uniform on [0, 1)', (t) => {
  const rng = new Rng(123)
  const bins = Array.from({ length: 20 }, () => 0)
  const n = 200_000
  let outside = 0
  for (let i = 0; i < n; i++) {
    const x = rng.nextFloat()
    if (x >= 0 && x < 1) bins[Math.floor(x * 20)]++
    else outside++
  }
  t.is(outside, 0)
  for (const b of bins) t.true(Math.abs(b / n - 0.05) < 0.003, `bin holds ${b / n}`)
})

test('a row of a batch is read in place and gives what a copy of it gives', (t) => {
  const vocab = 3000
  const batch = randomLogits(3 * vocab, 8)
  const row = batch.slice(2 * vocab)
  for (const o of [{ temperature: 0 }, {}, { temperature: 0.8, topK: 40 }, { topP: 0.9 }, { minP: 0.1 }]) {
    const a = sampler(o, 6)
    const b = sampler(o, 6)
    for (let i = 0; i < 100; i++) t.is(a.sample(batch, 2 * vocab, vocab), b.sample(row), JSON.stringify(o))
  }
  const a = sampler({}, 6)
  const b = sampler({}, 6)
  for (let i = 0; i < 50; i++) t.is(a.sample(batch, 2 * vocab), b.sample(row), 'vocabSize defaults to the rest of the array')
  t.throws(() => sampler({}).sample(batch, 2 * vocab, vocab + 1), { instanceOf: KvEngineError })
  t.throws(() => sampler({}).sample(batch, 3 * vocab), { instanceOf: KvEngineError })
})

/** Each row's `perRow` highest logits by a full sort (highest first, ties by lower id), as the engine picks them. */
function sortedCandidates(batch: Float32Array, vocab: number, perRow: number): Candidates {
  const rows = batch.length / vocab
  const ids = new Uint32Array(rows * perRow)
  const logits = new Float32Array(rows * perRow)
  for (let r = 0; r < rows; r++) {
    const order = Array.from({ length: vocab }, (_, i) => i).sort((a, b) => batch[r * vocab + b] - batch[r * vocab + a] || a - b)
    order.slice(0, perRow).forEach((id, j) => ((ids[r * perRow + j] = id), (logits[r * perRow + j] = batch[r * vocab + id])))
  }
  return new Candidates(ids, logits, perRow)
}

test('greedy and top-k draw the same tokens from picked candidates as from their own scan of the logits', (t) => {
  const vocab = 20_000
  const batch = randomLogits(3 * vocab, 41)
  const picked = sortedCandidates(batch, vocab, 64)
  for (const o of [{ temperature: 0 }, { topK: 1 }, { temperature: 0.7, topK: 50 }, { temperature: 1.2, topK: 64, topP: 0.9, minP: 0.02 }]) {
    const scanning = sampler(o, 12)
    const reading = sampler(o, 12)
    t.is(reading.candidatesWanted(vocab), o.temperature === 0 ? 1 : o.topK)
    for (let i = 0; i < 300; i++) {
      const row = i % 3
      t.is(reading.sample(batch, row * vocab, vocab, picked, row), scanning.sample(batch, row * vocab, vocab), JSON.stringify(o))
    }
  }
})

test('a sampler that needs more than the candidates picked scans the logits instead', (t) => {
  const vocab = 5000
  const batch = randomLogits(vocab, 43)
  const few = sortedCandidates(batch, vocab, 8)
  for (const o of [{ temperature: 0.9, topK: 20 }, { temperature: 0.9 }, { topP: 0.8 }]) {
    const scanning = sampler(o, 3)
    const given = sampler(o, 3)
    for (let i = 0; i < 200; i++) t.is(given.sample(batch, 0, vocab, few, 0), scanning.sample(batch, 0, vocab), JSON.stringify(o))
  }
  t.is(sampler({ temperature: 0 }).sample(new Float32Array(0), 0, vocab, few, 0), few.ids[0], 'candidates alone serve greedy, with no logits given')
  t.throws(() => sampler({ minP: 0.1 }).sample(new Float32Array(0), 0, vocab, few, 0), { instanceOf: KvEngineError, message: /must be non-empty and lie within the 0 logits/ })
  t.is(sampler({ topK: 5000 }).candidatesWanted(vocab), 0, 'top-k as wide as the vocabulary is off')
  t.is(sampler({ topK: Candidates.MAX + 1 }).candidatesWanted(1e6), 0, 'more than a pass picks')
  t.is(sampler({ minP: 0.1 }).candidatesWanted(vocab), 0)
  t.throws(() => sampler({ topK: 4 }).sample(batch, 0, vocab, few, 1), { instanceOf: KvEngineError, message: /candidate row 1 is not among the 1 rows picked/ })
})

test('defaults are filled in and the edges of each range are accepted', (t) => {
  t.deepEqual(validateSamplingOptions({}), { temperature: 1, topK: 0, topP: 1, minP: 0, seed: undefined })
  const edges = { temperature: 0, topK: 0, topP: 1, minP: 1, seed: 2 ** 53 }
  t.deepEqual(validateSamplingOptions(edges), edges)
  t.notThrows(() => validateSamplingOptions({ topP: 1e-9, minP: 0, seed: 0 }))
})

const bad: [object, RegExp][] = [
  [{ temperature: -0.5 }, /^temperature must be a finite number >= 0 \(0 means greedy\), got -0\.5$/],
  [{ temperature: Number.NaN }, /temperature.*NaN/],
  [{ temperature: Infinity }, /temperature.*Infinity/],
  [{ temperature: '1' }, /temperature.*"1"/],
  [{ topK: -3 }, /^topK must be a non-negative integer \(0 disables it\), got -3$/],
  [{ topK: 1.5 }, /topK.*1\.5/],
  [{ topK: '5' }, /topK.*"5"/],
  [{ topK: Infinity }, /topK/],
  [{ topP: 0 }, /^topP must be a number in \(0, 1\] \(1 disables it\), got 0$/],
  [{ topP: -0.2 }, /topP/],
  [{ topP: 1.01 }, /topP.*1\.01/],
  [{ topP: Number.NaN }, /topP.*NaN/],
  [{ minP: -0.1 }, /^minP must be a number in \[0, 1\] \(0 disables it\), got -0\.1$/],
  [{ minP: 1.5 }, /minP/],
  [{ minP: Number.NaN }, /minP/],
  [{ seed: 1.5 }, /^seed must be an integer in \[0, 2\^53\], got 1\.5$/],
  [{ seed: -1 }, /seed/],
  [{ seed: 2 ** 53 + 2 }, /seed/],
  [{ seed: Infinity }, /seed/],
  [{ seed: '7' }, /seed/],
]
for (const [o, message] of bad) {
  test(`rejects ${JSON.stringify(o, (_, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? String(v) : v))}`, (t) => {
    for (const attempt of [() => validateSamplingOptions(o), () => new Sampler(o, new Rng(1))]) {
      const err = t.throws(attempt, { instanceOf: KvEngineError, message })
      t.is(err?.code, 'INVALID_ARGUMENT')
    }
  })
}
