import { KvEngineError } from './KvEngineError.js'

/**
 * Every token's exact bytes, fetched from native code once per model. A streaming decoder reads
 * them here: asking native code per token cost a call and a fresh Buffer on every decode step
 * of every row, tens of microseconds each on a step of a few milliseconds.
 */
export class TokenBytes {
  readonly #bytes: Uint8Array
  readonly #offsets: Uint32Array

  /** @internal `offsets` has one entry more than there are tokens. */
  constructor(bytes: Uint8Array, offsets: Uint32Array) {
    this.#bytes = bytes
    this.#offsets = offsets
  }

  get size(): number {
    return this.#offsets.length - 1
  }

  /** Token `id`'s bytes, a view: not to be written to. */
  of(id: number): Uint8Array {
    if (!Number.isInteger(id) || id < 0 || id >= this.size) {
      throw new KvEngineError('INVALID_ARGUMENT', `token id ${String(id)} is out of range: the vocabulary has ${this.size} tokens`)
    }
    return this.#bytes.subarray(this.#offsets[id], this.#offsets[id + 1])
  }

  /** The ids' bytes end to end. */
  concat(ids: ArrayLike<number>): Uint8Array {
    const parts = Array.from(ids, (id) => this.of(id))
    const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
    let at = 0
    for (const p of parts) {
      out.set(p, at)
      at += p.length
    }
    return out
  }
}
