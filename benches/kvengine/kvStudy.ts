// The KV cache against recomputation: greedy tokens after a prompt, once with the cache (one
// prefill, then one token per forward) and once without (every step runs the whole sequence so
// far through a reset cache). Recomputation is quadratic, so past `exactUpTo` steps only every
// `sampleEvery`-th step is timed (on the cached run's tokens) and the rest is interpolated.
import type { Model } from '../../index.js'
import type { Plan } from '../lib/plan.js'
import { log } from '../lib/proc.js'
import type { KvStudy } from '../lib/results.js'

function argmax(logits: Float32Array): number {
  let best = 0
  for (let i = 1; i < logits.length; i++) if (logits[i]! > logits[best]!) best = i
  return best
}

/** Cumulative ms after each generated token, and the tokens, with the cache. */
async function cachedRun(model: Model, prompt: number[], count: number): Promise<{ tokens: number[]; cumMs: number[] }> {
  const cache = model.createCache(1, prompt.length + count)
  const tokens: number[] = []
  const cumMs: number[] = []
  const t0 = performance.now()
  let { logits } = await model.forward(cache, [prompt])
  for (;;) {
    tokens.push(argmax(logits))
    cumMs.push(performance.now() - t0)
    if (tokens.length === count) break
    ;({ logits } = await model.forward(cache, [[tokens.at(-1)!]]))
  }
  cache.dispose()
  return { tokens, cumMs }
}

/** One recomputation step: the whole sequence through an emptied cache, argmax of the last logits. */
async function recomputeStep(model: Model, cache: ReturnType<Model['createCache']>, sequence: number[]): Promise<{ token: number; ms: number }> {
  cache.reset()
  const t0 = performance.now()
  const { logits } = await model.forward(cache, [sequence])
  const token = argmax(logits)
  return { token, ms: performance.now() - t0 }
}

/** Sum of a per-step cost over steps 0..last, from exact costs and sampled points in between. */
function interpolatedSum(exactMs: number[], points: [number, number][], last: number): number {
  let total = exactMs.reduce((a, b) => a + b, 0)
  const known: [number, number][] = [[exactMs.length - 1, exactMs.at(-1)!], ...points]
  for (let i = exactMs.length; i <= last; i++) {
    const k = known.findIndex(([at]) => at >= i)
    const [i1, t1] = known[k === -1 ? known.length - 1 : k]!
    const [i0, t0] = known[Math.max(0, (k === -1 ? known.length - 1 : k) - 1)]!
    total += i1 === i0 ? t1 : t0 + ((t1 - t0) * (i - i0)) / (i1 - i0)
  }
  return total
}

export async function kvStudy(model: Model, promptAll: number[], cfg: NonNullable<Plan['kv']>): Promise<KvStudy> {
  const prompt = promptAll.slice(0, cfg.prompt)
  const maxGen = Math.max(...cfg.gens)
  const cached = await cachedRun(model, prompt, maxGen)
  log('kvengine', `kv study: cached run of ${maxGen} tokens took ${cached.cumMs.at(-1)!.toFixed(0)} ms`)
  const cache = model.createCache(1, prompt.length + maxGen)
  const exactMs: number[] = []
  const recomputed: number[] = []
  for (let i = 0; i < cfg.exactUpTo; i++) {
    const { token, ms } = await recomputeStep(model, cache, [...prompt, ...recomputed])
    exactMs.push(ms)
    recomputed.push(token)
    // Step cost grows with the sequence; from the first step's cost, say roughly how long this takes.
    if (i === 0) log('kvengine', `kv study: recomputing ${cfg.exactUpTo} steps, about ${((ms * cfg.exactUpTo * (prompt.length + cfg.exactUpTo / 2)) / prompt.length / 1000).toFixed(0)} s`)
    if ((i + 1) % 32 === 0) log('kvengine', `kv study: recomputed ${i + 1}/${cfg.exactUpTo} steps`)
  }
  // Beyond the exact steps: sampled steps, run on the cached tokens, compared token by token too.
  const points: [number, number][] = []
  const pointSame: boolean[] = []
  for (let i = cfg.exactUpTo + cfg.sampleEvery - 1; i < maxGen + cfg.sampleEvery - 1; i += cfg.sampleEvery) {
    const at = Math.min(i, maxGen - 1)
    const { token, ms } = await recomputeStep(model, cache, [...prompt, ...cached.tokens.slice(0, at)])
    points.push([at, ms])
    pointSame.push(token === cached.tokens[at])
  }
  cache.dispose()
  const same = (upTo: number) => recomputed.slice(0, upTo).filter((t, i) => t === cached.tokens[i]).length
  const rows = cfg.gens.map((generated) => {
    const estimated = generated > cfg.exactUpTo
    const recomputeMs = estimated ? interpolatedSum(exactMs, points, generated - 1) : exactMs.slice(0, generated).reduce((a, b) => a + b, 0)
    const cachedMs = cached.cumMs[generated - 1]!
    const inRange = points.map((_, k) => k).filter((k) => points[k]![0] < generated)
    const compared = Math.min(generated, cfg.exactUpTo) + inRange.length
    const identical = same(generated) + inRange.filter((k) => pointSame[k]).length
    return { generated, cachedMs, recomputeMs, speedup: recomputeMs / cachedMs, estimated, tokensCompared: compared, tokensIdentical: identical }
  })
  const note = `recomputation timed at every step up to ${cfg.exactUpTo}; beyond that every ${cfg.sampleEvery}th step is timed and the steps between are linearly interpolated (estimated)`
  return { prompt: cfg.prompt, rows, note }
}
