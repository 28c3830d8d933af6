import { KvEngineError } from './KvEngineError.js'
import type { Tokenizer } from './Tokenizer.js'

/** The id of the single token whose text is `text`, or undefined when the vocabulary has none
 * (including a vocabulary that cannot spell the text at all, as a character-level one cannot
 * spell `<|python_start|>`). */
export function lookupToken(tokenizer: Pick<Tokenizer, 'encode' | 'decode'>, text: string): number | undefined {
  let ids: number[]
  try {
    ids = tokenizer.encode(text, { special: true, addBos: false })
  } catch (e) {
    if (e instanceof KvEngineError && e.code === 'INVALID_ARGUMENT') return undefined
    throw e
  }
  return ids.length === 1 && tokenizer.decode(ids) === text ? ids[0] : undefined
}
