// Issue 4's targets, judged on the ratios measured in this run. A target whose figure was not
// measured (a model left out, a failed runner) is reported as not judged, never as passed.
import { bestAggregate, bestDecode, bestPrefill } from './best.js'
import { runsOf, type ModelResult } from './report.js'

export interface Verdict {
  target: string
  model: string
  measured: string
  pass: boolean | undefined
}

const ratioOf = (a: number | undefined, b: number | undefined) => (a !== undefined && b !== undefined ? a / b : undefined)
const verdict = (target: string, model: string, value: number | undefined, ok: (v: number) => boolean, show: (v: number) => string): Verdict => ({
  target,
  model,
  measured: value === undefined ? 'not measured' : show(value),
  pass: value === undefined ? undefined : ok(value),
})
const times = (v: number) => `${v.toFixed(2)}×`

function speedTargets(m: ModelResult): Verdict[] {
  const k = runsOf(m, 'kvengine')
  const l = runsOf(m, 'llama.cpp')
  const p = m.plan
  const out: Verdict[] = []
  if (!m.id.endsWith('f32')) {
    const d = ratioOf(bestDecode(k, p.decodeMainContext)?.figure.tokPerSec, bestDecode(l, p.decodeMainContext)?.figure.tokPerSec)
    out.push(verdict('1. decode tok/s b1 ≥ 1.0× llama.cpp', m.label, d, (v) => v >= 1, times))
  }
  const pre = ratioOf(bestPrefill(k, p.targets.prefillTokens)?.figure.tokPerSec, bestPrefill(l, p.targets.prefillTokens)?.figure.tokPerSec)
  out.push(verdict(`2. prefill tok/s @${p.targets.prefillTokens} ≥ 1.0× llama.cpp`, m.label, pre, (v) => v >= 1, times))
  const n = p.targets.samples
  const wall = ratioOf(bestAggregate(k, n)?.figure.wallMs, bestAggregate(l, n)?.figure.wallMs)
  out.push(verdict(`3. ${n}×${p.sampleTokens} samples wall ≤ 0.25× llama.cpp's best`, m.label, wall, (v) => v <= 0.25, times))
  return out
}

function kvengineTargets(m: ModelResult): Verdict[] {
  const out: Verdict[] = []
  for (const r of runsOf(m, 'kvengine')) {
    const row = r.kv?.rows.find((x) => x.generated === m.plan.targets.kvGenerated)
    if (row) {
      const same = row.tokensIdentical === row.tokensCompared
      out.push({ target: `4. KV cache ≥ 20× recomputation @${row.generated}, identical tokens`, model: `${m.label} ${r.threads}t`, measured: `${row.speedup.toFixed(1)}×, tokens ${same ? 'identical' : `${row.tokensIdentical}/${row.tokensCompared} identical`}`, pass: row.speedup >= 20 && same })
    }
    const b1 = r.decode.find((d) => d.context === m.plan.decodeMainContext)?.tsShare
    const b8 = r.aggregate.find((a) => a.samples === m.plan.targets.samples)?.tsShare
    const share = (v: number) => `${(v * 100).toFixed(1)}%`
    out.push(verdict('5. TypeScript share of a decode step ≤ 5%, batch 1', `${m.label} ${r.threads}t`, b1, (v) => v <= 0.05, share))
    out.push(verdict(`5. TypeScript share of a decode step ≤ 5%, batch ${m.plan.targets.samples}`, `${m.label} ${r.threads}t`, b8, (v) => v <= 0.05, share))
    if (r.rss) out.push(verdict(`5. RSS flat (±2%) over ${r.rss.samples.at(-1)![0]} tokens after warm-up`, `${m.label} ${r.threads}t`, r.rss.changePct, (v) => Math.abs(v) <= 2, (v) => `${v.toFixed(2)}%`))
  }
  return out
}

export const targetVerdicts = (models: ModelResult[]) => models.flatMap((m) => [...speedTargets(m), ...kvengineTargets(m)])
