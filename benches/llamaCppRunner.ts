// llama.cpp (node-llama-cpp, CPU build) on one model at one thread count, in its own process:
// the same figures as benches/kvengineRunner.ts on the same token ids; one RESULT JSON line.
//
//   node --import=tsx benches/llamaCppRunner.ts <spec.json>      (written by benches/compare.ts)
import { readFileSync } from 'node:fs'

import { getLlama, LlamaLogLevel, type Token } from 'node-llama-cpp'

import { aggregateFigures, decodeFigures, prefillFigures } from './llamacpp/figures.js'
import { llamaKvBytes } from './llamacpp/kvBytes.js'
import type { RunSpec } from './lib/plan.js'
import { emitResult, log, procStatusBytes } from './lib/proc.js'
import type { EngineResult } from './lib/results.js'

const spec = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as RunSpec
const { plan, threads } = spec
const prompt = spec.prompt as Token[]
// maxThreads 0: the context's thread count is then always the one used, never a hint.
const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error, maxThreads: 0 })
const loadStart = performance.now()
const model = await llama.loadModel({ modelPath: spec.model, gpuLayers: 0 })
const loadMs = performance.now() - loadStart
const rssAfterLoad = procStatusBytes('VmRSS')
log('llama.cpp', `loaded ${spec.model} with ${threads} thread(s) in ${loadMs.toFixed(0)} ms`)

const longest = Math.max(...plan.prefillLengths, ...plan.decodeContexts)
const context = await model.createContext({ contextSize: longest + plan.decodeTokens + 8, sequences: 1, threads: { ideal: threads, min: threads }, batchSize: 512 })
const prefill = await prefillFigures(context, prompt, plan)
const decode = await decodeFigures(context, prompt, plan)
await context.dispose()
const aggregate = await aggregateFigures(model, threads, prompt, plan)
const kv = await llamaKvBytes(model, spec.model, plan.decodeMainContext + plan.decodeTokens + 1)

const result: EngineResult = {
  engine: 'llama.cpp',
  model: spec.model,
  threads,
  loadMs,
  rssAfterLoad,
  peakRss: procStatusBytes('VmHWM'),
  kvBytes: kv.bytes,
  kvNote: kv.note,
  prefill,
  decode,
  aggregate,
}
emitResult(result)
await model.dispose()
await llama.dispose()
