// The per-model table: every figure for both engines and their ratio (kvengine ÷ llama.cpp, so
// above 1 is kvengine ahead for speeds and behind for times and bytes).
import type { Bandwidth } from './bandwidth.js'
import { bestAggregate, bestDecode, bestPrefill, maxOf, type Best } from './best.js'
import type { Plan } from './plan.js'
import type { EngineResult } from './results.js'
import { fixed, mib, pct, table } from './table.js'

export interface ModelResult {
  id: string
  label: string
  path: string
  large: boolean
  /** Tensor data bytes in the file: what a batch-1 decode step reads (a proxy: every weight once). */
  weightBytes: number
  plan: Plan
  runs: EngineResult[]
  errors: string[]
}

export const runsOf = (m: ModelResult, engine: EngineResult['engine']) => m.runs.filter((r) => r.engine === engine)

/** tokens/s a decode step could reach if it only had to read the weights once, at the measured bandwidth. */
export const bandwidthLimit = (m: ModelResult, bw: Bandwidth | null) => (bw ? (bw.best * 1e9) / m.weightBytes : undefined)

type Row = string[]

function pair<T>(label: string, k: Best<T> | undefined, l: Best<T> | undefined, value: (f: T) => number, digits = 1): Row {
  const kv = k ? value(k.figure) : undefined
  const ll = l ? value(l.figure) : undefined
  const cell = (v: number | undefined, b: Best<T> | undefined) => (b ? `${fixed(v, digits)} (${b.threads}t)` : '–')
  return [label, cell(kv, k), cell(ll, l), kv !== undefined && ll !== undefined ? `${(kv / ll).toFixed(2)}×` : '–']
}

function speedRows(m: ModelResult, k: EngineResult[], l: EngineResult[], bw: Bandwidth | null): Row[] {
  const rows: Row[] = []
  for (const n of m.plan.prefillLengths) {
    rows.push(pair(`prefill tok/s @${n}`, bestPrefill(k, n), bestPrefill(l, n), (f) => f.tokPerSec))
    rows.push(pair(`TTFT ms @${n}`, bestPrefill(k, n), bestPrefill(l, n), (f) => f.ttftMs))
  }
  for (const c of m.plan.decodeContexts) rows.push(pair(`decode tok/s b1 after ${c}${c === m.plan.decodeMainContext ? ' (headline)' : ''}`, bestDecode(k, c), bestDecode(l, c), (f) => f.tokPerSec))
  const main = m.plan.decodeMainContext
  rows.push(pair(`ms per output token after ${main}`, bestDecode(k, main), bestDecode(l, main), (f) => f.msPerToken, 2))
  const limit = bandwidthLimit(m, bw)
  if (limit) rows.push(pair(`decode as share of bandwidth limit (${limit.toFixed(1)} tok/s)`, bestDecode(k, main), bestDecode(l, main), (f) => f.tokPerSec / limit, 2))
  for (const n of m.plan.samples) {
    rows.push(pair(`aggregate tok/s, ${n}×${m.plan.sampleTokens} from ${m.plan.samplePrompt}`, bestAggregate(k, n), bestAggregate(l, n), (f) => f.tokPerSec))
    rows.push(pair(`wall ms, ${n} samples`, bestAggregate(k, n), bestAggregate(l, n), (f) => f.wallMs, 0))
  }
  return rows
}

function memoryRows(k: EngineResult[], l: EngineResult[]): Row[] {
  const ratio = (a?: number, b?: number) => (a !== undefined && b !== undefined ? `${(a / b).toFixed(2)}×` : '–')
  const peakK = maxOf(k, (r) => r.peakRss)
  const peakL = maxOf(l, (r) => r.peakRss)
  const kvK = maxOf(k, (r) => r.kvBytes)
  const kvL = maxOf(l, (r) => r.kvBytes)
  return [
    ['peak RSS MiB (VmHWM of the runner)', mib(peakK), mib(peakL), ratio(peakK, peakL)],
    ['KV cache MiB, headline decode run', mib(kvK), mib(kvL), ratio(kvK, kvL)],
  ]
}

export function modelTable(m: ModelResult, bw: Bandwidth | null): string {
  const k = runsOf(m, 'kvengine')
  const l = runsOf(m, 'llama.cpp')
  const rows = [...speedRows(m, k, l, bw), ...memoryRows(k, l)]
  const b1 = bestDecode(k, m.plan.decodeMainContext)?.figure.tsShare
  const b8 = bestAggregate(k, m.plan.targets.samples)?.figure.tsShare
  rows.push(['TypeScript share of a decode step, batch 1', pct(b1), '', ''])
  rows.push([`TypeScript share of a decode step, batch ${m.plan.targets.samples}`, pct(b8), '', ''])
  const out = [table(['figure', 'kvengine', 'llama.cpp', 'kv ÷ llama'], rows)]
  if (bw) out.push(`  bandwidth limit = ${bw.best.toFixed(2)} GB/s (best measured) ÷ ${(m.weightBytes / 1e6).toFixed(0)} MB of tensor data in the file (a proxy: every weight read once per token; KV reads left out)`)
  out.push(`  kvengine KV: ${k[0]?.kvNote ?? '–'}; llama.cpp KV: ${l[0]?.kvNote ?? '–'}`)
  for (const e of m.errors) out.push(`  FAILED: ${e}`)
  for (const r of l) for (const a of r.aggregate) out.push(`  llama.cpp ${r.threads}t, ${a.samples} samples: ${Object.entries(a.tried ?? {}).map(([how, ms]) => `${how}: ${ms.toFixed(0)} ms`).join('; ')}`)
  for (const r of [...k, ...l]) {
    const made = r.aggregate.filter((a) => a.setupMs !== undefined).map((a) => `${a.samples} samples ${a.setupMs!.toFixed(0)} ms`)
    if (made.length > 0) out.push(`  ${r.engine} ${r.threads}t, KV store made before the timer (${r.engine === 'kvengine' ? 'model.createCache' : 'model.createContext'}): ${made.join(', ')}`)
  }
  out.push(...studyLines(k))
  return out.join('\n')
}

function studyLines(k: EngineResult[]): string[] {
  const out: string[] = []
  for (const r of k) {
    if (r.kv) {
      out.push(`  KV cache vs recomputation (${r.threads}t, greedy, after a ${r.kv.prompt}-token prompt):`)
      for (const row of r.kv.rows) {
        out.push(`    ${row.generated} tokens: cached ${row.cachedMs.toFixed(0)} ms, recomputed ${row.recomputeMs.toFixed(0)} ms${row.estimated ? ' (ESTIMATED from sampled steps)' : ''} → ${row.speedup.toFixed(1)}×; tokens identical ${row.tokensIdentical}/${row.tokensCompared}`)
      }
      out.push(`    (${r.kv.note})`)
    }
    if (r.rss) {
      const s = r.rss.samples
      out.push(`  RSS over ${s.at(-1)![0]} tokens after ${r.rss.warmupTokens} warm-up (${r.threads}t): ${mib(s[0]![1])} → ${mib(s.at(-1)![1])} MiB (${r.rss.changePct.toFixed(2)}%); samples ${s.map(([t, b]) => `${t}:${mib(b)}`).join(' ')}`)
    }
  }
  return out
}
