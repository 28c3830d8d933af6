// Measures memory read bandwidth with benches/bandwidth.c, compiled here at bench time (cc is
// all it needs). Returns null, with a warning, where no C compiler is available.
import { execFileSync } from 'node:child_process'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'

import { OUT_DIR, ROOT } from './paths.js'

export interface Bandwidth {
  /** Best pass, GB/s (1e9 bytes/s), by thread count. */
  gbps: Record<number, number>
  /** The best over the thread counts: the ceiling a decode step can reach. */
  best: number
  mib: number
}

export function measureBandwidth(threads: number[], mib = 2048, passes = 5): Bandwidth | null {
  mkdirSync(OUT_DIR, { recursive: true })
  const exe = join(OUT_DIR, 'bandwidth')
  try {
    execFileSync('cc', ['-O3', '-march=native', '-pthread', '-o', exe, join(ROOT, 'benches', 'bandwidth.c')], { stdio: 'inherit' })
  } catch (err) {
    console.error(`bandwidth: cannot compile benches/bandwidth.c (${(err as Error).message}); shares of the bandwidth limit are left out`)
    return null
  }
  const gbps: Record<number, number> = {}
  for (const t of threads) {
    const line = execFileSync(exe, [String(mib), String(t), String(passes)], { encoding: 'utf8' })
    gbps[t] = (JSON.parse(line) as { bestGBps: number }).bestGBps
  }
  return { gbps, best: Math.max(...Object.values(gbps)), mib }
}
