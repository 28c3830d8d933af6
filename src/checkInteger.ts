import { KvEngineError } from './KvEngineError.js'

/**
 * Throws INVALID_ARGUMENT unless `value` is an integer in `min..max`. Checked here because the
 * binding would turn 1.5 into 1 and 2^32 + 1 into 1 without a word. `why` follows the range in
 * the message, for bounds that depend on state (a cache's rows, a row's length).
 */
export function checkInteger(name: string, value: unknown, min: number, max: number, why = ''): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
    throw new KvEngineError('INVALID_ARGUMENT', `${name} must be an integer in ${min}..${max}${why}, got ${show(value)}`)
  }
}

/** A value as a message shows it: strings quoted, so that topK: '5' does not read as if 5 had been rejected. */
export function show(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : String(value)
}
