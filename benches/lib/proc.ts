// Process-level figures read from /proc (Linux), and the one-line JSON protocol the runners use.
import { readFileSync } from 'node:fs'

/** A field of /proc/self/status in bytes, e.g. VmRSS (now) or VmHWM (peak). */
export function procStatusBytes(field: 'VmRSS' | 'VmHWM'): number {
  const match = readFileSync('/proc/self/status', 'utf8').match(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm'))
  return match ? Number(match[1]) * 1024 : NaN
}

/** Progress goes to stderr (the orchestrator shows it); the result is the last stdout line. */
export function log(engine: string, message: string): void {
  process.stderr.write(`  [${engine}] ${message}\n`)
}

export const RESULT_PREFIX = 'RESULT '

export function emitResult(result: unknown): void {
  process.stdout.write(`${RESULT_PREFIX}${JSON.stringify(result)}\n`)
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2
}

export const seconds = (fromMs: number) => (performance.now() - fromMs) / 1000
