import { KvEngineError } from './KvEngineError.js'
import type { SamplingOptions } from './SamplingOptions.js'

export interface ResolvedSamplingOptions {
  temperature: number
  topK: number
  topP: number
  minP: number
  seed: number | undefined
}

function fail(message: string): never {
  throw new KvEngineError('INVALID_ARGUMENT', message)
}

/** Checks sampling options and fills in defaults; every rejection says what is allowed. */
export function validateSamplingOptions(o: SamplingOptions): ResolvedSamplingOptions {
  const { temperature = 1, topK = 0, topP = 1, minP = 0, seed } = o
  if (typeof temperature !== 'number' || !Number.isFinite(temperature) || temperature < 0) {
    fail(`temperature must be a finite number >= 0 (0 means greedy), got ${String(temperature)}`)
  }
  if (typeof topK !== 'number' || !Number.isInteger(topK) || topK < 0) {
    fail(`topK must be a non-negative integer (0 disables it), got ${String(topK)}`)
  }
  if (typeof topP !== 'number' || !(topP > 0 && topP <= 1)) {
    fail(`topP must be in (0, 1] (1 disables it), got ${String(topP)}`)
  }
  if (typeof minP !== 'number' || !(minP >= 0 && minP <= 1)) {
    fail(`minP must be in [0, 1] (0 disables it), got ${String(minP)}`)
  }
  if (seed !== undefined && (typeof seed !== 'number' || !Number.isSafeInteger(seed) || seed < 0)) {
    fail(`seed must be a non-negative safe integer, got ${String(seed)}`)
  }
  return { temperature, topK, topP, minP, seed }
}
