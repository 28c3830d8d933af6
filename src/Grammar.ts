import { KvEngineError } from './KvEngineError.js'
import { callNative, type NativeConstraint } from './native.js'
import { checkInteger } from './checkInteger.js'

/**
 * One row's place in a compiled grammar (`model.compileGrammar()`). Handed to `forward()` as that
 * row's constraint, it masks the row's logits to the tokens the grammar allows next; `consume()`
 * moves it past the token the row took.
 */
export class Grammar {
  /** @internal */
  readonly native: NativeConstraint
  /** The model's end-of-generation tokens, which the grammar allows once it is complete. */
  readonly #ends: ReadonlySet<number>

  /** @internal */
  constructor(native: NativeConstraint, ends: ReadonlySet<number>) {
    this.native = native
    this.#ends = ends
  }

  /** Whether `token` is one that ends the output once the grammar is complete (an
   * end-of-generation token): a row ends there without it, whatever its stop tokens. */
  isEnd(token: number): boolean {
    return this.#ends.has(token)
  }

  /** Moves past `token`; an `INVALID_ARGUMENT` error when the grammar does not allow it. */
  consume(token: number): void {
    if (!Number.isInteger(token) || token < 0) throw new KvEngineError('INVALID_ARGUMENT', `token must be a token id, got ${String(token)}`)
    callNative(() => this.native.consume(token))
  }

  /** Takes back the last `tokens` consumed (a row rewound). */
  rollback(tokens: number): void {
    checkInteger('tokens', tokens, 0, 2 ** 31 - 1)
    callNative(() => this.native.rollback(tokens))
  }

  /** The grammar is complete and nothing may follow: the row is done. */
  get stopped(): boolean {
    return this.native.stopped
  }

  /** An independent copy at the same place (one per sample of a prompt). */
  fork(): Grammar {
    return new Grammar(callNative(() => this.native.fork()), this.#ends)
  }
}
