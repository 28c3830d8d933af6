// Each engine's best figure over the thread counts it ran at (llama.cpp at 1 and 2 threads is
// compared at its best, per figure), with the thread count that gave it.
import type { AggregateFigure, DecodeFigure, EngineResult, PrefillFigure } from './results.js'

export interface Best<T> {
  figure: T
  threads: number
}

function best<T>(runs: EngineResult[], pick: (r: EngineResult) => T | undefined, score: (f: T) => number): Best<T> | undefined {
  let out: Best<T> | undefined
  for (const r of runs) {
    const f = pick(r)
    if (f !== undefined && Number.isFinite(score(f)) && (out === undefined || score(f) > score(out.figure))) out = { figure: f, threads: r.threads }
  }
  return out
}

export const bestPrefill = (runs: EngineResult[], tokens: number) => best<PrefillFigure>(runs, (r) => r.prefill.find((p) => p.tokens === tokens), (f) => f.tokPerSec)
export const bestDecode = (runs: EngineResult[], context: number) => best<DecodeFigure>(runs, (r) => r.decode.find((d) => d.context === context), (f) => f.tokPerSec)
export const bestAggregate = (runs: EngineResult[], samples: number) => best<AggregateFigure>(runs, (r) => r.aggregate.find((a) => a.samples === samples), (f) => f.tokPerSec)

/** Memory figures do not improve with threads; the largest over the runs is reported (conservative). */
export const maxOf = (runs: EngineResult[], pick: (r: EngineResult) => number) => (runs.length ? Math.max(...runs.map(pick)) : undefined)
