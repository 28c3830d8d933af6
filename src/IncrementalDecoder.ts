import type { TokenBytes } from './TokenBytes.js'

/**
 * Turns a stream of token ids into text, emitting only whole UTF-8 characters: a character
 * split across tokens (emoji, CJK, accented letters in byte-level BPE) is held back until its
 * last byte arrives.
 */
export class IncrementalDecoder {
  readonly #tokens: TokenBytes
  readonly #utf8 = new TextDecoder('utf-8', { fatal: false })

  /** @internal made by `Tokenizer.createDecoder()` */
  constructor(tokens: TokenBytes) {
    this.#tokens = tokens
  }

  /** The text completed by these tokens; may be empty while a character is incomplete. */
  push(tokens: number | ArrayLike<number>): string {
    const bytes = typeof tokens === 'number' ? this.#tokens.of(tokens) : this.#tokens.concat(tokens)
    return this.#utf8.decode(bytes, { stream: true })
  }

  /** Whatever is still buffered, with incomplete characters replaced by U+FFFD. */
  flush(): string {
    return this.#utf8.decode()
  }
}
