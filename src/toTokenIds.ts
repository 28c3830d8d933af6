import { KvEngineError } from './KvEngineError.js'

/**
 * Checks that `tokens` is an array (or typed array) of integer ids of the vocabulary and packs
 * them for the binding: Uint32Array would silently wrap -1 or truncate 2.5. Nothing is allocated
 * until the list is known good, so `{ length: 1e9 }`, or a sparse `new Array(1e9)`, is refused
 * at once; `maxLength` (a row cannot hold more than the model's context) is checked first of all.
 */
export function toTokenIds(tokens: ArrayLike<number>, vocabSize: number, what: string, maxLength = Infinity): Uint32Array {
  if (typeof tokens === 'string') {
    throw new KvEngineError('INVALID_ARGUMENT', `${what} must be token ids, not a string: encode text with model.tokenizer.encode() first`)
  }
  if (!Array.isArray(tokens) && !isTypedArray(tokens)) {
    throw new KvEngineError('INVALID_ARGUMENT', `${what} must be an array of token ids, got ${tokens === null ? 'null' : typeof tokens}`)
  }
  if (tokens.length > maxLength) {
    throw new KvEngineError('CONTEXT_OVERFLOW', `${what} has ${tokens.length} tokens but the model's context is ${maxLength}; shorten it`)
  }
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]
    if (!Number.isInteger(t) || t < 0 || t >= vocabSize) {
      throw new KvEngineError('INVALID_ARGUMENT', `${what}[${i}] = ${String(t)} is not a token id: ids are integers in [0, ${vocabSize})`)
    }
  }
  return tokens instanceof Uint32Array ? tokens.slice() : Uint32Array.from(tokens)
}

function isTypedArray(value: unknown): value is ArrayLike<number> {
  return ArrayBuffer.isView(value) && !(value instanceof DataView)
}
