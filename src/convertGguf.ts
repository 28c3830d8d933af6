import { KvEngineError } from './KvEngineError.js'
import { awaitNative, native } from './native.js'

export type GgufTarget = 'f32' | 'f16' | 'q8_0' | 'q4_0' | 'q4_k'

/**
 * Re-encodes a GGUF file's weights (norms stay f32). Rows that do not divide into the target's
 * blocks fall back to a finer format, as llama.cpp's quantizer does. Writes atomically.
 */
export async function convertGguf(input: string, output: string, target: GgufTarget, onProgress?: (fraction: number) => void): Promise<void> {
  if (typeof input !== 'string' || typeof output !== 'string' || input === output) {
    throw new KvEngineError('INVALID_ARGUMENT', 'convertGguf() needs distinct input and output paths')
  }
  await awaitNative(() => native.convertGguf(input, output, target, onProgress))
}
