import { show } from './checkInteger.js'
import { KvEngineError } from './KvEngineError.js'
import type { SamplingOptions } from './SamplingOptions.js'

/**
 * Checks sampling options and fills in the defaults. The seed stays optional: only the caller
 * knows whether to draw a random one. Every rejection says what is allowed, since options often
 * come straight from a user's config or CLI flags.
 */
export function validateSamplingOptions(o: SamplingOptions): Required<Omit<SamplingOptions, 'seed'>> & Pick<SamplingOptions, 'seed'> {
  const { temperature = 1, topK = 0, topP = 1, minP = 0, seed } = o
  // typeof checks first: options may come from untyped JavaScript or parsed JSON
  if (typeof temperature !== 'number' || !Number.isFinite(temperature) || temperature < 0) {
    fail(`temperature must be a finite number >= 0 (0 means greedy), got ${show(temperature)}`)
  }
  if (typeof topK !== 'number' || !Number.isSafeInteger(topK) || topK < 0) {
    fail(`topK must be a non-negative integer (0 disables it), got ${show(topK)}`)
  }
  if (typeof topP !== 'number' || !(topP > 0 && topP <= 1)) {
    fail(`topP must be a number in (0, 1] (1 disables it), got ${show(topP)}`)
  }
  if (typeof minP !== 'number' || !(minP >= 0 && minP <= 1)) {
    fail(`minP must be a number in [0, 1] (0 disables it), got ${show(minP)}`)
  }
  if (seed !== undefined && (typeof seed !== 'number' || !Number.isInteger(seed) || seed < 0 || seed > 2 ** 53)) {
    fail(`seed must be an integer in [0, 2^53], got ${show(seed)}`)
  }
  return { temperature, topK, topP, minP, seed }
}

function fail(message: string): never {
  throw new KvEngineError('INVALID_ARGUMENT', message)
}
