import { KvEngineError } from './KvEngineError.js'

/**
 * Throws INVALID_ARGUMENT unless `options` is an object whose every key is one of `known`: a
 * misspelt option (`maxToken`) silently ignored would run with the default instead. `known` is
 * typed as a record of the interface's keys, so an option added there must be added here too.
 */
export function checkOptionKeys<T>(options: unknown, known: Record<keyof T, true>, what: string): asserts options is T {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new KvEngineError('INVALID_ARGUMENT', `${what} options must be an object, got ${options === null ? 'null' : Array.isArray(options) ? 'an array' : typeof options}`)
  }
  for (const key in options) {
    if (!Object.hasOwn(known, key)) {
      throw new KvEngineError('INVALID_ARGUMENT', `unknown ${what} option '${key}'; the options are ${Object.keys(known).join(', ')}`)
    }
  }
}

/** Throws INVALID_ARGUMENT unless `signal` is absent or an AbortSignal (anything else could never abort). */
export function checkSignal(signal: unknown): asserts signal is AbortSignal | undefined {
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new KvEngineError('INVALID_ARGUMENT', `signal must be an AbortSignal (controller.signal of an AbortController), got ${signal === null ? 'null' : typeof signal}`)
  }
}
