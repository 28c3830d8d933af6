// Prefill and batch-1 decode at 512 tokens (and, with --samples, the wall time of that many
// samples of 128 tokens from the 512-token prompt), the two engines alternating round after round
// on the same model: on a VM whose speed swings within minutes, each engine's best then comes
// from the same stretch of time, which one full run per engine (benches/compare.ts) cannot promise.
//
// With --activations=f32,q8 kvengine runs once per activation mode in each round (`q8`: 8-bit
// activations, as llama.cpp multiplies them; see ModelLoadOptions.activations).
//
//   node --import=tsx benches/alternate.ts [--models=1b-q4_0] [--rounds=3] [--samples=8] [--activations=f32,q8]   (2 threads each)
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'

import { runEngine, tokenizePrompt } from './lib/child.js'
import { MODELS, selectModels } from './lib/models.js'
import { OUT_DIR } from './lib/paths.js'
import { FULL, type Plan } from './lib/plan.js'

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
const models = selectModels(arg('models') ?? '1b-q4_0')
const rounds = Number(arg('rounds') ?? 3)
const samples = arg('samples') === undefined ? [] : [Number(arg('samples'))]
const modes = (arg('activations') ?? 'f32').split(',') as ('f32' | 'q8')[]
if (modes.some((m) => m !== 'f32' && m !== 'q8')) throw new Error(`--activations takes f32 and/or q8, got ${arg('activations')}`)
// kvengine in each mode, then llama.cpp; a mode's label is what the printout and JSON call it.
const runs = [...modes.map((mode) => ({ engine: 'kvengine' as const, mode, label: mode === 'f32' ? 'kvengine' : `kvengine-${mode}` })), { engine: 'llama.cpp' as const, mode: undefined, label: 'llama.cpp' }]
const plan: Plan = { ...FULL, prefillLengths: [512], prefillReps: 1, decodeContexts: [512], decodeTokens: 64, samples, kv: null, rss: null }
const prompt = await tokenizePrompt(MODELS[0]!.path, 512)
type Row = { round: number; model: string; engine: string; at: string; prefill512: number; decode512: number; samplesWallMs?: number }
const rows: Row[] = []
for (let round = 1; round <= rounds; round++) {
  for (const m of models) {
    for (const { engine: kind, mode, label: engine } of runs) {
      const r = await runEngine(kind, `alternate-${m.id}-${engine}`, { model: m.path, threads: 2, plan, prompt, activations: mode })
      const row: Row = { round, model: m.id, engine, at: new Date().toISOString().slice(11, 19), prefill512: r.prefill[0]!.tokPerSec, decode512: r.decode[0]!.tokPerSec }
      if (samples.length > 0) row.samplesWallMs = r.aggregate[0]!.wallMs
      rows.push(row)
      const wall = row.samplesWallMs === undefined ? '' : `, ${samples[0]} samples ${row.samplesWallMs.toFixed(0)} ms`
      console.log(`round ${round} ${m.id} ${engine.padEnd(12)} prefill@512 ${row.prefill512.toFixed(1)} tok/s, decode after 512 ${row.decode512.toFixed(1)} tok/s${wall}`)
    }
  }
}
for (const m of models) {
  const best = (engine: string, key: 'prefill512' | 'decode512') => Math.max(...rows.filter((r) => r.model === m.id && r.engine === engine).map((r) => r[key]))
  for (const { label } of runs.filter((r) => r.engine === 'kvengine')) {
    for (const key of ['prefill512', 'decode512'] as const) {
      const kv = best(label, key)
      const ll = best('llama.cpp', key)
      console.log(`${m.id} best ${key}: ${label} ${kv.toFixed(1)} / llama.cpp ${ll.toFixed(1)} = ${(kv / ll).toFixed(2)}×`)
    }
    if (samples.length > 0) {
      const fastest = (engine: string) => Math.min(...rows.filter((r) => r.model === m.id && r.engine === engine).map((r) => r.samplesWallMs!))
      const [kv, ll] = [fastest(label), fastest('llama.cpp')]
      console.log(`${m.id} fastest ${samples[0]} samples wall: ${label} ${kv.toFixed(0)} / llama.cpp ${ll.toFixed(0)} ms = ${(kv / ll).toFixed(3)}×`)
    }
  }
}
writeFileSync(join(OUT_DIR, 'alternate.json'), `${JSON.stringify(rows, null, 1)}\n`)
