// Prints the tables of a finished (or partial) run again from benches/out/results.json, without
// measuring anything: for writing BENCHMARKS.md.
//
//   node --import=tsx benches/report.ts [results.json]
import { readFileSync } from 'node:fs'
import { join } from 'node:path'

import type { Bandwidth } from './lib/bandwidth.js'
import { OUT_DIR } from './lib/paths.js'
import { modelTable, type ModelResult } from './lib/report.js'
import { summary } from './lib/summary.js'

const path = process.argv[2] ?? join(OUT_DIR, 'results.json')
const results = JSON.parse(readFileSync(path, 'utf8')) as { quick: boolean; startedAt: string; finishedAt: string; machine: Record<string, unknown>; bandwidth: Bandwidth | null; models: ModelResult[] }
console.log(`run ${results.startedAt} → ${results.finishedAt || '(unfinished)'}${results.quick ? ' — QUICK smoke run' : ''}`)
console.log(`machine: ${JSON.stringify(results.machine)}`)
console.log(`bandwidth: ${JSON.stringify(results.bandwidth)}`)
for (const m of results.models) console.log(`\n## ${m.label}  (${(m.weightBytes / 2 ** 20).toFixed(0)} MiB of weights)\n${modelTable(m, results.bandwidth)}`)
console.log(`\n${summary(results.models, results.bandwidth, results.quick)}`)
