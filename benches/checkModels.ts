// Checks that each benchmark model loads in both engines and gives finite logits for a short
// prompt (the 1B models have random weights, so this is the check that they are well formed).
//
//   node --import=tsx benches/checkModels.ts [--models=id,id]
import { getLlama, LlamaLogLevel, type Token } from 'node-llama-cpp'

import { Model } from '../index.js'
import { selectModels } from './lib/models.js'

const list = process.argv.find((a) => a.startsWith('--models='))?.slice('--models='.length) ?? process.env.BENCH_MODELS
const PROMPT = 'The quick brown fox jumps over the lazy dog.'

async function kvengineLogits(path: string): Promise<{ tokens: number[]; finite: boolean; argmax: number }> {
  const model = await Model.load(path, { threads: 2 })
  const tokens = model.tokenizer.encode(PROMPT)
  const cache = model.createCache(1, tokens.length)
  const { logits } = await model.forward(cache, [tokens])
  const finite = logits.every(Number.isFinite)
  const argmax = logits.reduce((best, v, i) => (v > logits[best]! ? i : best), 0)
  cache.dispose()
  model.dispose()
  return { tokens, finite, argmax }
}

/** llama.cpp exposes next-token probabilities, not logits: they are finite and sum to 1 iff the logits were finite. */
async function llamaProbabilities(path: string, tokens: number[]): Promise<{ finite: boolean; sum: number; top: number }> {
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error })
  const model = await llama.loadModel({ modelPath: path, gpuLayers: 0 })
  const context = await model.createContext({ contextSize: 256, threads: 2 })
  const input = tokens.map((t, i) => (i === tokens.length - 1 ? ([t, { generateNext: { probabilities: true, token: true } }] as const) : t)) as Parameters<typeof seq.controlledEvaluate>[0]
  const seq = context.getSequence()
  const out = await seq.controlledEvaluate(input)
  const probs = [...(out.at(-1)?.next.probabilities ?? new Map<Token, number>()).values()]
  const top = out.at(-1)?.next.token ?? -1
  await context.dispose()
  await model.dispose()
  await llama.dispose()
  return { finite: probs.length > 0 && probs.every(Number.isFinite), sum: probs.reduce((a, b) => a + b, 0), top }
}

let failed = false
for (const m of selectModels(list)) {
  const k = await kvengineLogits(m.path)
  const l = await llamaProbabilities(m.path, k.tokens)
  const ok = k.finite && l.finite && Math.abs(l.sum - 1) < 1e-3
  failed ||= !ok
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${m.id}: kvengine logits finite ${k.finite} (argmax ${k.argmax}); llama.cpp probabilities finite ${l.finite}, sum ${l.sum.toFixed(4)} (top ${l.top})`)
}
process.exit(failed ? 1 : 0)
