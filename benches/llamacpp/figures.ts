// llama.cpp's prefill, decode and aggregate figures through node-llama-cpp, on the same token
// ids and counts as kvengine's.
import type { LlamaContext, LlamaModel, Token } from 'node-llama-cpp'

import type { Plan } from '../lib/plan.js'
import { log } from '../lib/proc.js'
import type { AggregateFigure, DecodeFigure, PrefillFigure } from '../lib/results.js'
import { generateOn } from './generate.js'

const GREEDY = { temperature: 0 }

export async function prefillFigures(context: LlamaContext, prompt: Token[], plan: Plan): Promise<PrefillFigure[]> {
  const seq = context.getSequence()
  const ttft = async (tokens: number) => {
    await seq.clearHistory()
    const t = await generateOn(seq, prompt.slice(0, tokens), 1, GREEDY)
    return t.firstMs - t.startMs
  }
  await ttft(plan.prefillLengths[0]!) // warm-up, untimed, as for kvengine
  const out: PrefillFigure[] = []
  for (const tokens of plan.prefillLengths) {
    let best = Infinity
    for (let rep = 0; rep < plan.prefillReps; rep++) best = Math.min(best, await ttft(tokens))
    out.push({ tokens, ttftMs: best, tokPerSec: tokens / (best / 1000) })
    log('llama.cpp', `prefill ${tokens}: TTFT ${best.toFixed(1)} ms, ${(tokens / (best / 1000)).toFixed(1)} tok/s`)
  }
  await seq.dispose()
  return out
}

export async function decodeFigures(context: LlamaContext, prompt: Token[], plan: Plan): Promise<DecodeFigure[]> {
  const seq = context.getSequence()
  const out: DecodeFigure[] = []
  for (const ctx of plan.decodeContexts) {
    await seq.clearHistory()
    const t = await generateOn(seq, prompt.slice(0, ctx), plan.decodeTokens + 1, GREEDY)
    const tokPerSec = plan.decodeTokens / ((t.lastMs - t.firstMs) / 1000)
    out.push({ context: ctx, tokens: plan.decodeTokens, tokPerSec, msPerToken: 1000 / tokPerSec })
    log('llama.cpp', `decode after ${ctx}: ${tokPerSec.toFixed(1)} tok/s`)
  }
  await seq.dispose()
  return out
}

/** A wall time, and what making the context took before it. */
interface SampleRun {
  wallMs: number
  setupMs: number
}

/** n samples, all sequences of one context evaluated concurrently (node-llama-cpp batches them into one decode). */
async function concurrent(model: LlamaModel, threads: number, prompt: Token[], n: number, plan: Plan): Promise<SampleRun> {
  const setupStart = performance.now()
  const context = await model.createContext({ contextSize: plan.samplePrompt + plan.sampleTokens + 8, sequences: n, threads: { ideal: threads, min: threads }, batchSize: 512 })
  const setupMs = performance.now() - setupStart
  const seqs = Array.from({ length: n }, () => context.getSequence())
  const start = performance.now()
  await Promise.all(seqs.map((seq, i) => generateOn(seq, prompt, plan.sampleTokens, { temperature: 1, topK: 50, seed: i + 1 })))
  const wallMs = performance.now() - start
  await context.dispose()
  return { wallMs, setupMs }
}

/** n samples one after another on one sequence, keeping the prompt's KV: after each sample its
 * tokens are erased and the last prompt token re-evaluated (the prefix reuse LlamaChat does). */
async function sequential(model: LlamaModel, threads: number, prompt: Token[], n: number, plan: Plan): Promise<SampleRun> {
  const setupStart = performance.now()
  const context = await model.createContext({ contextSize: plan.samplePrompt + plan.sampleTokens + 8, sequences: 1, threads: { ideal: threads, min: threads }, batchSize: 512 })
  const setupMs = performance.now() - setupStart
  const seq = context.getSequence()
  const start = performance.now()
  await generateOn(seq, prompt, plan.sampleTokens, { temperature: 1, topK: 50, seed: 1 })
  for (let i = 1; i < n; i++) {
    await seq.eraseContextTokenRanges([{ start: prompt.length - 1, end: seq.nextTokenIndex }])
    await generateOn(seq, prompt.slice(-1), plan.sampleTokens, { temperature: 1, topK: 50, seed: i + 1 })
  }
  const wallMs = performance.now() - start
  await context.dispose()
  return { wallMs, setupMs }
}

export async function aggregateFigures(model: LlamaModel, threads: number, promptAll: Token[], plan: Plan): Promise<AggregateFigure[]> {
  const prompt = promptAll.slice(0, plan.samplePrompt)
  const out: AggregateFigure[] = []
  for (const samples of plan.samples) {
    const runs = {
      'n sequences of one context, evaluated concurrently': await concurrent(model, threads, prompt, samples, plan),
      'one sequence, samples in turn, prompt KV kept': await sequential(model, threads, prompt, samples, plan),
    }
    const tried = Object.fromEntries(Object.entries(runs).map(([how, run]) => [how, run.wallMs]))
    const [method, { wallMs, setupMs }] = Object.entries(runs).reduce((a, b) => (b[1].wallMs < a[1].wallMs ? b : a))
    const tokPerSec = (samples * plan.sampleTokens) / (wallMs / 1000)
    out.push({ samples, tokensPerSample: plan.sampleTokens, wallMs, tokPerSec, method, tried, setupMs })
    log('llama.cpp', `${samples} samples: ${wallMs.toFixed(0)} ms (context made beforehand in ${setupMs.toFixed(0)} ms), ${tokPerSec.toFixed(1)} tok/s (${method})`)
  }
  return out
}
