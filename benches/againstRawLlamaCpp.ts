// kvengine against raw llama.cpp (built natively by scripts/build-llama-cpp.sh from the source in
// llama-cpp-python's sdist), on the same files: llama-bench for prefill at 512 and batch-1 decode
// of 128 tokens after 512, llama-batched-bench -pps for 8 samples of 128 from one 512-token
// prompt. llama.cpp takes the better of flash attention on and off, kvengine runs its defaults;
// both at 2 threads. Writes benches/out/raw-llama-cpp.json and prints one table.
//
//   node --import=tsx benches/againstRawLlamaCpp.ts [--models=smollm2-q8_0,1b-q4_k_m] [--reps=3] [--rounds=1]
//   (or BENCH_RAW_MODELS=..., else BENCH_MODELS; the default is SmolLM2 and the 1B shape in Q8_0
//   and Q4_K_M; BENCH_QUICK=1 takes one repetition). With --rounds=N the two engines take turns
//   N times per file, so that a VM whose speed drifts over minutes slows both alike: each figure
//   is then the best over all rounds, and each round's own ratios are printed beside it.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

import { rawLlamaCpp } from '../scripts/rawLlamaCpp.js'
import { bestAggregate, bestDecode, bestPrefill } from './lib/best.js'
import { runEngine, tokenizePrompt } from './lib/child.js'
import { machineInfo } from './lib/machine.js'
import { selectModels } from './lib/models.js'
import { OUT_DIR } from './lib/paths.js'
import type { Plan } from './lib/plan.js'
import { fixed, table } from './lib/table.js'

const THREADS = 2
const PROMPT = 512
const GENERATE = 128
const SAMPLES = 8
const option = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
const reps = Number(option('reps') ?? (process.env.BENCH_QUICK === '1' ? 1 : 3))
const rounds = Number(option('rounds') ?? 1)
const models = selectModels(option('models') ?? process.env.BENCH_RAW_MODELS ?? process.env.BENCH_MODELS ?? 'smollm2-q8_0,smollm2-q4_k_m,1b-q8_0,1b-q4_k_m')
const progress = (s: string) => console.error(`[raw ${new Date().toISOString().slice(11, 19)}] ${s}`)

/** The same three figures for kvengine, through the benchmark's own runner. */
const PLAN: Plan = {
  prefillLengths: [PROMPT],
  prefillReps: reps,
  decodeContexts: [PROMPT],
  decodeMainContext: PROMPT,
  decodeTokens: GENERATE,
  samples: [SAMPLES],
  samplePrompt: PROMPT,
  sampleTokens: GENERATE,
  kv: null,
  rss: null,
  targets: { prefillTokens: PROMPT, samples: SAMPLES, kvGenerated: 0 },
}

interface Figures {
  prefillTokPerS: number
  decodeTokPerS: number
  samplesWallS: number
  /** llama.cpp: which flash-attention setting gave each figure. */
  settings?: Record<string, string>
}

function jsonLines(bin: string, args: string[]): Record<string, number>[] {
  const out = execFileSync(bin, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], maxBuffer: 1 << 24 })
  return out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, number>)
}

/** llama-bench's best average tokens/s over flash attention off and on, and which it was. */
function llamaBench(bin: string, model: string, test: string[]): [number, string] {
  const rows = jsonLines(join(bin, 'llama-bench'), ['-m', model, '-t', String(THREADS), '-fa', '0,1', '-r', String(reps), '-o', 'jsonl', ...test])
  const best = rows.reduce((a, b) => (b.avg_ts > a.avg_ts ? b : a))
  return [best.avg_ts, `fa ${best.flash_attn ? 'on' : 'off'}`]
}

function rawFigures(bin: string, model: string): Figures {
  const [prefillTokPerS, prefillFa] = llamaBench(bin, model, ['-p', String(PROMPT), '-n', '0'])
  const [decodeTokPerS, decodeFa] = llamaBench(bin, model, ['-p', '0', '-n', String(GENERATE), '-d', String(PROMPT)])
  const context = String(PROMPT + SAMPLES * GENERATE)
  const walls = (['off', 'on'] as const).map((fa) => {
    const args = ['-m', model, '-c', context, '-b', '2048', '-ub', '512', '-npp', String(PROMPT), '-ntg', String(GENERATE), '-npl', String(SAMPLES), '-pps', '-kvu', '-t', String(THREADS), '-fa', fa, '--output-format', 'jsonl']
    const times = Array.from({ length: reps }, () => jsonLines(join(bin, 'llama-batched-bench'), args)[0]?.t ?? Number.NaN)
    return [Math.min(...times), fa] as const
  })
  const [samplesWallS, samplesFa] = walls.reduce((a, b) => (b[0] < a[0] ? b : a))
  return { prefillTokPerS, decodeTokPerS, samplesWallS, settings: { prefill: prefillFa, decode: decodeFa, samples: `fa ${samplesFa}` } }
}

async function kvengineFigures(model: string, prompt: number[], tag: string): Promise<Figures> {
  const runs = [await runEngine('kvengine', `raw-${tag}`, { model, threads: THREADS, plan: PLAN, prompt })]
  return {
    prefillTokPerS: bestPrefill(runs, PROMPT)?.figure.tokPerSec ?? Number.NaN,
    decodeTokPerS: bestDecode(runs, PROMPT)?.figure.tokPerSec ?? Number.NaN,
    samplesWallS: (bestAggregate(runs, SAMPLES)?.figure.wallMs ?? Number.NaN) / 1000,
  }
}

const missing = models.filter((m) => !existsSync(m.path))
if (missing.length) throw new Error(`missing model files (run scripts/bench-prep.ts): ${missing.map((m) => m.path).join(', ')}`)
const llama = rawLlamaCpp()
const prompt = await tokenizePrompt(models[0]!.path, PROMPT)
interface Round {
  kvengine: Figures
  llamaCpp: Figures
}
const results = {
  startedAt: new Date().toISOString(),
  machine: machineInfo(),
  llamaCpp: llama.generator,
  threads: THREADS,
  reps,
  rounds,
  models: [] as { id: string; label: string; kvengine: Figures; llamaCpp: Figures; rounds: Round[] }[],
}
const perModel = new Map<string, Round[]>(models.map((m) => [m.id, []]))
for (let round = 1; round <= rounds; round++) {
  for (const m of models) {
    progress(`round ${round}/${rounds}, ${m.label}: llama-bench and llama-batched-bench`)
    const raw = rawFigures(llama.bin, m.path)
    progress(`round ${round}/${rounds}, ${m.label}: kvengine`)
    perModel.get(m.id)!.push({ kvengine: await kvengineFigures(m.path, prompt, m.id), llamaCpp: raw })
  }
}
/** The best of each figure over the rounds (the least wall time), with llama.cpp's setting from the round that gave it. */
function best(figures: Figures[]): Figures {
  const top = (better: (a: Figures, b: Figures) => boolean) => figures.reduce((a, b) => (better(b, a) ? b : a))
  const [prefill, decode, samples] = [
    top((a, b) => a.prefillTokPerS > b.prefillTokPerS),
    top((a, b) => a.decodeTokPerS > b.decodeTokPerS),
    top((a, b) => a.samplesWallS < b.samplesWallS),
  ]
  const settings = prefill.settings && { prefill: prefill.settings.prefill!, decode: decode.settings!.decode!, samples: samples.settings!.samples! }
  return { prefillTokPerS: prefill.prefillTokPerS, decodeTokPerS: decode.decodeTokPerS, samplesWallS: samples.samplesWallS, settings }
}
for (const m of models) {
  const done = perModel.get(m.id)!
  results.models.push({ id: m.id, label: m.label, kvengine: best(done.map((r) => r.kvengine)), llamaCpp: best(done.map((r) => r.llamaCpp)), rounds: done })
}
mkdirSync(OUT_DIR, { recursive: true })
writeFileSync(join(OUT_DIR, 'raw-llama-cpp.json'), `${JSON.stringify(results, null, 1)}\n`)
const ratio = (k: number, l: number) => `${(k / l).toFixed(2)}×`
const cell = (k: number, l: number, digits = 1) => [fixed(k, digits), fixed(l, digits), ratio(k, l)]
console.log(`# kvengine ${results.machine.kvengineCommit} against ${llama.generator}, ${THREADS} threads, best of ${reps} × ${rounds} round(s)`)
console.log(
  table(
    ['file', `prefill @${PROMPT}: kvengine`, 'llama.cpp', '×', `decode b1 after ${PROMPT}: kvengine`, 'llama.cpp', '×', `${SAMPLES}×${GENERATE} wall s: kvengine`, 'llama.cpp', '×'],
    results.models.map(({ label, kvengine: k, llamaCpp: l }) => [label, ...cell(k.prefillTokPerS, l.prefillTokPerS), ...cell(k.decodeTokPerS, l.decodeTokPerS), ...cell(k.samplesWallS, l.samplesWallS, 2)]),
  ),
)
if (rounds > 1) {
  console.log('\nEach round alone (kvengine ÷ llama.cpp):')
  console.log(
    table(
      ['file', 'round', 'prefill ×', 'decode ×', `${SAMPLES}×${GENERATE} wall ×`],
      results.models.flatMap(({ label, rounds: done }) =>
        done.map(({ kvengine: k, llamaCpp: l }, i) => [label, String(i + 1), ratio(k.prefillTokPerS, l.prefillTokPerS), ratio(k.decodeTokPerS, l.decodeTokPerS), ratio(k.samplesWallS, l.samplesWallS)]),
      ),
    ),
  )
}
