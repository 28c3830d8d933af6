// kvengine against llama.cpp (node-llama-cpp 3.21.1) on the same GGUF file, in one process run:
// decode tokens/s at batch 1 and prefill tokens/s at 512 tokens. llama.cpp is measured at each
// thread count and reported at its best.
//
//   node --import=tsx benches/compare.ts [model.gguf ...]
import { basename } from 'node:path'

import { getLlama, LlamaLogLevel, type Token } from 'node-llama-cpp'

import { Model } from '../index.js'

const DECODE_TOKENS = 128
const PREFILL_TOKENS = 512
const THREADS = [1, 2]

interface Figures {
  decode: number
  prefill: number
}

async function ours(path: string): Promise<Figures> {
  const model = await Model.load(path)
  const filler = model.tokenizer.encode(' the quick brown fox'.repeat(200)).slice(0, PREFILL_TOKENS)
  const warm = model.createCache(1, PREFILL_TOKENS)
  await model.forward(warm, [filler.slice(0, 64)])
  warm.dispose()
  const cache = model.createCache(1, PREFILL_TOKENS + DECODE_TOKENS)
  let started = performance.now()
  await model.forward(cache, [filler])
  const prefill = PREFILL_TOKENS / ((performance.now() - started) / 1000)
  started = performance.now()
  for (let i = 0; i < DECODE_TOKENS; i++) await model.forward(cache, [[filler[i]]])
  const decode = DECODE_TOKENS / ((performance.now() - started) / 1000)
  cache.dispose()
  model.dispose()
  return { decode, prefill }
}

async function llamaCpp(path: string, threads: number): Promise<Figures> {
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.disabled })
  const model = await llama.loadModel({ modelPath: path, gpuLayers: 0 })
  const filler = model.tokenize(' the quick brown fox'.repeat(200)).slice(0, PREFILL_TOKENS) as Token[]
  const context = await model.createContext({ contextSize: 1024, sequences: 1, threads: { ideal: threads, min: threads }, batchSize: 512 })
  const seq = context.getSequence()
  let started = performance.now()
  await seq.evaluateWithoutGeneratingNewTokens(filler)
  const prefill = PREFILL_TOKENS / ((performance.now() - started) / 1000)
  await seq.clearHistory()
  await seq.evaluateWithoutGeneratingNewTokens(filler.slice(0, 16))
  started = performance.now()
  let n = 0
  for await (const _ of seq.evaluate([filler[16]], { temperature: 0, yieldEogToken: true })) {
    if (++n === DECODE_TOKENS) break
  }
  const decode = DECODE_TOKENS / ((performance.now() - started) / 1000)
  await context.dispose()
  await model.dispose()
  return { decode, prefill }
}

const paths = process.argv.slice(2)
if (paths.length === 0) paths.push('models/SmolLM2-135M-Instruct.Q8_0.gguf')
for (const path of paths) {
  const k = await ours(path)
  const runs = []
  for (const t of THREADS) runs.push({ t, ...(await llamaCpp(path, t)) })
  const bestDecode = runs.reduce((a, b) => (b.decode > a.decode ? b : a))
  const bestPrefill = runs.reduce((a, b) => (b.prefill > a.prefill ? b : a))
  console.log(`\n${basename(path)}`)
  for (const r of runs) console.log(`  llama.cpp ${r.t} thread(s): decode ${r.decode.toFixed(1)} tok/s, prefill@${PREFILL_TOKENS} ${r.prefill.toFixed(1)} tok/s`)
  console.log(`  kvengine           : decode ${k.decode.toFixed(1)} tok/s, prefill@${PREFILL_TOKENS} ${k.prefill.toFixed(1)} tok/s`)
  console.log(`  ratio vs llama.cpp at its best: decode ${(k.decode / bestDecode.decode).toFixed(2)}x (${bestDecode.t}t), prefill ${(k.prefill / bestPrefill.prefill).toFixed(2)}x (${bestPrefill.t}t)`)
}
