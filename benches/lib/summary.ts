// The closing summary: the headline figures of every model in one table, then the targets.
import type { Bandwidth } from './bandwidth.js'
import { bestAggregate, bestDecode, bestPrefill } from './best.js'
import { bandwidthLimit, runsOf, type ModelResult } from './report.js'
import { fixed, table } from './table.js'
import { targetVerdicts } from './targets.js'

function headline(m: ModelResult, bw: Bandwidth | null): string[] {
  const k = runsOf(m, 'kvengine')
  const l = runsOf(m, 'llama.cpp')
  const p = m.plan
  const pair = (a: number | undefined, b: number | undefined, digits = 1) => `${fixed(a, digits)} / ${fixed(b, digits)} = ${a !== undefined && b !== undefined ? (a / b).toFixed(2) : '–'}×`
  const dk = bestDecode(k, p.decodeMainContext)?.figure.tokPerSec
  const dl = bestDecode(l, p.decodeMainContext)?.figure.tokPerSec
  const limit = bandwidthLimit(m, bw)
  const share = (x: number | undefined) => (x !== undefined && limit ? `${((x / limit) * 100).toFixed(0)}%` : '–')
  return [
    m.label,
    pair(dk, dl),
    `${share(dk)} / ${share(dl)}`,
    pair(bestPrefill(k, p.targets.prefillTokens)?.figure.tokPerSec, bestPrefill(l, p.targets.prefillTokens)?.figure.tokPerSec),
    pair(bestAggregate(k, p.targets.samples)?.figure.wallMs, bestAggregate(l, p.targets.samples)?.figure.wallMs, 0),
  ]
}

export function summary(models: ModelResult[], bw: Bandwidth | null, quick: boolean): string {
  const p = models[0]?.plan
  if (!p) return 'no models measured'
  const head = ['model', `decode tok/s b1 after ${p.decodeMainContext}: kv / llama`, 'of bandwidth limit: kv / llama', `prefill tok/s @${p.targets.prefillTokens}: kv / llama`, `${p.targets.samples}×${p.sampleTokens} samples wall ms: kv / llama`]
  const mark = (pass: boolean | undefined) => (pass === undefined ? 'not judged' : pass ? 'PASS' : 'FAIL')
  const verdicts = targetVerdicts(models).map((v) => [v.target, v.model, v.measured, mark(v.pass)])
  return [
    '## Summary (each engine at its best thread count)',
    '',
    table(head, models.map((m) => headline(m, bw))),
    '',
    `## Targets (issue 4)${quick ? " — QUICK run: sizes are not the issue's, so these verdicts mean nothing" : ''}`,
    '',
    table(['target', 'model', 'measured', 'verdict'], verdicts, 3),
  ].join('\n')
}
