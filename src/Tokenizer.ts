import { IncrementalDecoder } from './IncrementalDecoder.js'
import { KvEngineError } from './KvEngineError.js'
import { TokenBytes } from './TokenBytes.js'
import type { NativeModel } from './native.js'
import { callNative } from './native.js'
import { toTokenIds } from './toTokenIds.js'

export interface EncodeOptions {
  /** Parse special-token text such as `<|im_start|>` as special tokens. Off by default, so text a
   * user typed can never forge a turn; rendered chat templates turn it on. */
  special?: boolean
  /** Prepend the BOS token. Defaults to what the model's tokenizer metadata asks for. */
  addBos?: boolean
}

/** The model's own tokenizer (from the GGUF metadata or tokenizer.json). */
export class Tokenizer {
  readonly #native: NativeModel
  readonly #defaultAddBos: boolean
  readonly #vocabSize: number
  #tokenBytes: TokenBytes | undefined

  /** @internal created by Model.load */
  constructor(native: NativeModel, defaultAddBos: boolean, vocabSize: number) {
    this.#native = native
    this.#defaultAddBos = defaultAddBos
    this.#vocabSize = vocabSize
  }

  encode(text: string, options: EncodeOptions = {}): number[] {
    if (typeof text !== 'string') {
      throw new KvEngineError('INVALID_ARGUMENT', `encode() takes a string, got ${typeof text}`)
    }
    const ids = callNative(() => this.#native.encode(text, options.special ?? false, options.addBos ?? this.#defaultAddBos))
    return Array.from(ids)
  }

  /** Whole-sequence decode; invalid UTF-8 at the edges becomes U+FFFD. */
  decode(tokens: ArrayLike<number>): string {
    const ids = toTokenIds(tokens, this.#vocabSize, 'decode() tokens')
    return callNative(() => this.#native.decode(ids))
  }

  /** A decoder for streaming: feed tokens one at a time, get back only complete characters. */
  createDecoder(): IncrementalDecoder {
    return new IncrementalDecoder(this.#table())
  }

  /** Token `id`'s exact bytes (part of a character, for some): a copy. */
  tokenBytes(id: number): Uint8Array {
    return this.#table().of(id).slice()
  }

  #table(): TokenBytes {
    this.#tokenBytes ??= callNative(() => {
      const { bytes, offsets } = this.#native.tokenBytes()
      return new TokenBytes(bytes, offsets)
    })
    return this.#tokenBytes
  }
}
