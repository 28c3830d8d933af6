import type { NativeModel } from './native.js'
import { callNative } from './native.js'

/**
 * Turns a stream of token ids into text, emitting only whole UTF-8 characters: a character
 * split across tokens (emoji, CJK, accented letters in byte-level BPE) is held back until its
 * last byte arrives.
 */
export class IncrementalDecoder {
  readonly #native: NativeModel
  readonly #utf8 = new TextDecoder('utf-8', { fatal: false })

  constructor(native: NativeModel) {
    this.#native = native
  }

  /** The text completed by these tokens; may be empty while a character is incomplete. */
  push(tokens: number | ArrayLike<number>): string {
    const ids = typeof tokens === 'number' ? Uint32Array.of(tokens) : Uint32Array.from(tokens)
    const bytes = callNative(() => this.#native.decodeBytes(ids))
    return this.#utf8.decode(bytes, { stream: true })
  }

  /** Whatever is still buffered, with incomplete characters replaced by U+FFFD. */
  flush(): string {
    return this.#utf8.decode()
  }
}
