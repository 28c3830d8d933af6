// kvengine against llama.cpp (node-llama-cpp 3.21.1, CPU) on the same GGUF files and token ids:
// each engine, model and thread count in its own process; a table per model with both engines
// and their ratio; issue 4's targets judged on those ratios; raw figures in benches/out/results.json
// (scripts/plot-bench.py draws them).
//
//   node --import=tsx benches/compare.ts [--quick] [--models=smollm2-q8_0,1b-q4_0]
//        [--kvengine-threads=2] [--llama-threads=1,2]
//   (or BENCH_QUICK=1, BENCH_MODELS=..., BENCH_KVENGINE_THREADS=..., BENCH_LLAMA_THREADS=...;
//   BENCH_LARGE_FULL=1 gives the 1B models every sample count, not just 1 and 8;
//   BENCH_ACTIVATIONS=q8 or f32 loads kvengine with those activations instead of its default for
//   this CPU, see ModelLoadOptions.activations)
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

import { measureBandwidth, type Bandwidth } from './lib/bandwidth.js'
import { runEngine, tokenizePrompt } from './lib/child.js'
import { readGgufHeader } from './lib/ggufRead.js'
import { machineInfo } from './lib/machine.js'
import { selectModels, type BenchModel } from './lib/models.js'
import { OUT_DIR } from './lib/paths.js'
import { FULL, planFor, promptTokensNeeded, QUICK, type Plan } from './lib/plan.js'
import { modelTable, type ModelResult } from './lib/report.js'
import { summary } from './lib/summary.js'

function option(name: string, env: string): string | undefined {
  return process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? process.env[env]
}
const threadList = (s: string) => s.split(',').map(Number).filter((n) => Number.isInteger(n) && n > 0)

const quick = process.argv.includes('--quick') || process.env.BENCH_QUICK === '1'
const models = selectModels(option('models', 'BENCH_MODELS'))
const kvThreads = threadList(option('kvengine-threads', 'BENCH_KVENGINE_THREADS') ?? '2')
const llamaThreads = threadList(option('llama-threads', 'BENCH_LLAMA_THREADS') ?? '1,2')
const base = quick ? QUICK : FULL
const fullLarge = process.env.BENCH_LARGE_FULL === '1'
const activations = option('activations', 'BENCH_ACTIVATIONS') as 'f32' | 'q8' | undefined
if (activations !== undefined && activations !== 'f32' && activations !== 'q8') throw new Error(`BENCH_ACTIVATIONS must be f32 or q8, got ${String(activations)}`)
const stamp = () => new Date().toISOString().slice(11, 19)
/** The model the KV-cache and RSS studies run on (each takes many minutes). */
const STUDY_MODEL = 'smollm2-q8_0'
const progress = (s: string) => console.error(`[bench ${stamp()}] ${s}`)

async function benchModel(m: BenchModel, prompt: number[]): Promise<ModelResult> {
  const plan: Plan = planFor(base, m.large, fullLarge, m.id === STUDY_MODEL)
  const header = readGgufHeader(m.path)
  const result: ModelResult = { id: m.id, label: m.label, path: m.path, large: m.large, weightBytes: header.fileBytes - header.dataStart, plan, runs: [], errors: [] }
  const jobs = [...kvThreads.map((t) => ['kvengine', t] as const), ...llamaThreads.map((t) => ['llama.cpp', t] as const)]
  for (const [engine, threads] of jobs) {
    progress(`${m.label}: ${engine} at ${threads} thread(s)`)
    const started = performance.now()
    try {
      result.runs.push(await runEngine(engine, `${m.id}-${engine}-${threads}t`, { model: m.path, threads, plan, prompt, activations }))
      progress(`${m.label}: ${engine} at ${threads} thread(s) done in ${((performance.now() - started) / 1000).toFixed(0)} s`)
    } catch (err) {
      result.errors.push((err as Error).message)
      progress(`FAILED: ${(err as Error).message}`)
    }
  }
  return result
}

function save(results: object): void {
  writeFileSync(join(OUT_DIR, 'results.json'), `${JSON.stringify(results, null, 1)}\n`)
}

mkdirSync(OUT_DIR, { recursive: true })
const missing = models.filter((m) => !existsSync(m.path))
if (missing.length) throw new Error(`missing model files (run scripts/bench-prep.ts): ${missing.map((m) => m.path).join(', ')}`)
progress(`${quick ? 'QUICK smoke run (small counts: not the issue figures)' : 'full run'}: ${models.map((m) => m.id).join(', ')}; kvengine at ${kvThreads.join(',')} thread(s) with ${activations ?? 'its default'} activations, llama.cpp at ${llamaThreads.join(',')}`)
progress('measuring memory read bandwidth')
const bandwidth: Bandwidth | null = measureBandwidth([...new Set([1, ...kvThreads, ...llamaThreads])], quick ? 512 : 2048, quick ? 3 : 5)
if (bandwidth) progress(`bandwidth: ${Object.entries(bandwidth.gbps).map(([t, g]) => `${t}t ${g.toFixed(2)} GB/s`).join(', ')}`)
const prompt = await tokenizePrompt(models.find((m) => !m.large)?.path ?? models[0]!.path, promptTokensNeeded(base))
const results = { startedAt: new Date().toISOString(), finishedAt: '', quick, machine: machineInfo(), bandwidth, activations: activations ?? 'default', kvThreads, llamaThreads, models: [] as ModelResult[] }
const mc = results.machine
console.log(`# kvengine ${mc.kvengineCommit}${mc.workingTreeDirty ? ' (with uncommitted changes in crate/ or src/)' : ''} vs node-llama-cpp ${mc.nodeLlamaCpp}${quick ? ' — QUICK smoke run' : ''}`)
console.log(`machine: ${mc.cpu}, ${mc.cores} cores, ${mc.memoryGiB} GiB, Linux ${mc.kernel}, Node ${mc.node}`)
console.log(`memory read bandwidth (benches/bandwidth.c, best of passes over ${bandwidth?.mib ?? '–'} MiB): ${bandwidth ? Object.entries(bandwidth.gbps).map(([t, g]) => `${t}t ${g.toFixed(2)} GB/s`).join(', ') : 'not measured (no C compiler)'}`)
console.log(`kvengine at ${kvThreads.join(',')} thread(s); llama.cpp at ${llamaThreads.join(',')} thread(s), each figure at its best; ratios are kvengine ÷ llama.cpp`)
for (const m of models) {
  const r = await benchModel(m, prompt)
  results.models.push(r)
  save(results)
  console.log(`\n## ${m.label}  (${(r.weightBytes / 2 ** 20).toFixed(0)} MiB of weights)\n${modelTable(r, bandwidth)}\n`)
}
results.finishedAt = new Date().toISOString()
save(results)
console.log(`\n${summary(results.models, bandwidth, quick)}`)
console.log(`\nraw figures: ${join(OUT_DIR, 'results.json')}; plots: python3 scripts/plot-bench.py`)
