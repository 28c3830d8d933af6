import type { Tokenizer } from './Tokenizer.js'

/** The id of the single token whose text is `text`, or undefined when the vocabulary has none. */
export function lookupToken(tokenizer: Tokenizer, text: string): number | undefined {
  const ids = tokenizer.encode(text, { special: true, addBos: false })
  return ids.length === 1 && tokenizer.decode(ids) === text ? ids[0] : undefined
}
