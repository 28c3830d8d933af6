import { KvEngineError } from './KvEngineError.js'

/** Checks that every id is an integer token of the vocabulary and packs them for the binding.
 * Done here because Uint32Array would silently wrap -1 or truncate 2.5. */
export function toTokenIds(tokens: ArrayLike<number>, vocabSize: number, what = 'tokens'): Uint32Array {
  if (tokens == null || typeof tokens.length !== 'number') {
    throw new KvEngineError('INVALID_ARGUMENT', `${what} must be an array of token ids`)
  }
  const ids = new Uint32Array(tokens.length)
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]
    if (!Number.isInteger(t) || t < 0 || t >= vocabSize) {
      throw new KvEngineError(
        'INVALID_ARGUMENT',
        `${what}[${i}] = ${String(t)} is not a token id: ids are integers in [0, ${vocabSize})`,
      )
    }
    ids[i] = t
  }
  return ids
}
