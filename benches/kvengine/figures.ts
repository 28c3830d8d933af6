// kvengine's prefill, decode and aggregate figures, each through the public Engine API (what a
// user of the library gets), with no stop tokens so every row generates exactly the count asked.
import type { Engine } from '../../index.js'
import type { Plan } from '../lib/plan.js'
import { log } from '../lib/proc.js'
import type { AggregateFigure, DecodeFigure, PrefillFigure } from '../lib/results.js'
import { timedGenerate } from './timedGenerate.js'

const GREEDY = { temperature: 0, stopTokens: [] as number[] }

export async function prefillFigures(engine: Engine, prompt: number[], plan: Plan): Promise<PrefillFigure[]> {
  // One untimed run first: the first forward pays for lazy setup (thread pool, allocations).
  await timedGenerate(engine, prompt.slice(0, plan.prefillLengths[0]), { ...GREEDY, maxTokens: 1 })
  const out: PrefillFigure[] = []
  for (const tokens of plan.prefillLengths) {
    let best = Infinity
    for (let rep = 0; rep < plan.prefillReps; rep++) {
      const t = await timedGenerate(engine, prompt.slice(0, tokens), { ...GREEDY, maxTokens: 1 })
      best = Math.min(best, t.firstStepMs - t.startMs)
    }
    out.push({ tokens, ttftMs: best, tokPerSec: tokens / (best / 1000) })
    log('kvengine', `prefill ${tokens}: TTFT ${best.toFixed(1)} ms, ${(tokens / (best / 1000)).toFixed(1)} tok/s`)
  }
  return out
}

/** Batch-1 decode after `context` prompt tokens; also returns the KV bytes of the headline run. */
export async function decodeFigures(engine: Engine, prompt: number[], plan: Plan): Promise<{ decode: DecodeFigure[]; kvBytes: number }> {
  const decode: DecodeFigure[] = []
  let kvBytes = NaN
  for (const context of plan.decodeContexts) {
    // The cache is ours so its size can be read after the run; sized as the Engine sizes its own.
    const cache = engine.model.createCache(1, context + plan.decodeTokens + 1)
    const t = await timedGenerate(engine, prompt.slice(0, context), { ...GREEDY, maxTokens: plan.decodeTokens + 1, cache })
    if (context === plan.decodeMainContext) kvBytes = cache.sizeBytes
    cache.dispose()
    const seconds = (t.lastStepMs - t.firstStepMs) / 1000
    const tokPerSec = plan.decodeTokens / seconds
    decode.push({ context, tokens: plan.decodeTokens, tokPerSec, msPerToken: 1000 / tokPerSec, tsShare: t.tsShare, tokensDigest: t.tokensDigest })
    log('kvengine', `decode after ${context}: ${tokPerSec.toFixed(1)} tok/s, TS share ${fmtShare(t.tsShare)}, tokens ${t.tokensDigest}`)
  }
  return { decode, kvBytes }
}

export async function aggregateFigures(engine: Engine, prompt: number[], plan: Plan): Promise<AggregateFigure[]> {
  const out: AggregateFigure[] = []
  for (const samples of plan.samples) {
    // The cache is made before the timer starts, as llama.cpp's context is (llamacpp/figures.ts).
    const setupStart = performance.now()
    const cache = engine.model.createCache(samples, plan.samplePrompt + plan.sampleTokens)
    const setupMs = performance.now() - setupStart
    const options = { numSamples: samples, maxTokens: plan.sampleTokens, temperature: 1, topK: 50, seed: 1, stopTokens: [], cache }
    const t = await timedGenerate(engine, prompt.slice(0, plan.samplePrompt), options)
    cache.dispose()
    if (t.steps !== plan.sampleTokens) throw new Error(`expected ${plan.sampleTokens} steps, got ${t.steps}`)
    const wallMs = t.lastStepMs - t.startMs
    const tokPerSec = (samples * plan.sampleTokens) / (wallMs / 1000)
    out.push({ samples, tokensPerSample: plan.sampleTokens, wallMs, tokPerSec, method: 'prefill once, copy the cache row, batched decode', tsShare: t.tsShare, setupMs, tokensDigest: t.tokensDigest })
    log('kvengine', `${samples} samples: ${wallMs.toFixed(0)} ms (cache made beforehand in ${setupMs.toFixed(0)} ms), ${tokPerSec.toFixed(1)} tok/s, TS share ${fmtShare(t.tsShare)}, tokens ${t.tokensDigest}`)
  }
  return out
}

export const fmtShare = (s: number | undefined) => (s === undefined ? 'n/a (addon has no forwardSeconds)' : `${(s * 100).toFixed(1)}%`)
