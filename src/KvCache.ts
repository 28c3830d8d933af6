import { checkInteger } from './checkInteger.js'
import type { Grammar } from './Grammar.js'
import type { NativeKvCache } from './native.js'
import { callNative } from './native.js'

/**
 * A KV store for one model: K and V each `(nLayers, batchSize, capacity, nKvHeads, headDim)`,
 * with a length per row. Rows advance independently; capacity grows in 1024-position steps.
 * Create with `model.createCache()`, free with `dispose()`. The getters answer at once even while
 * a forward pass runs on the cache, with what the last completed pass or change left.
 */
export class KvCache {
  /** @internal */
  readonly native: NativeKvCache
  /** What each row's passes are constrained by, as last told to the addon. */
  readonly #constraints: (Grammar | null)[] = []

  /** @internal */
  constructor(native: NativeKvCache) {
    this.native = native
  }

  /** Positions held by each row (int32, like flash-attention's `cache_seqlens`). */
  get seqlens(): Int32Array {
    return callNative(() => this.native.seqlens())
  }

  get batchSize(): number {
    return callNative(() => this.native.batchSize)
  }

  /** Positions allocated per row (T). */
  get capacity(): number {
    return callNative(() => this.native.capacity)
  }

  /** Bytes held by K and V: 2·L·B·T·H_kv·D·(2 for f16, 4 for f32). */
  get sizeBytes(): number {
    return callNative(() => this.native.sizeBytes)
  }

  /** The element type K and V are held in on the CPU (`CacheOptions.kvType`). */
  get kvType(): 'f16' | 'f32' {
    return callNative(() => this.native.kvType) as 'f16' | 'f32'
  }

  /** Copies row `src` into row `dst`: prefill once, then sample many continuations. */
  copyRow(src: number, dst: number): void {
    this.#checkRow('src', src)
    this.#checkRow('dst', dst)
    callNative(() => this.native.copyRow(src, dst))
  }

  /** Empties every row; the memory stays allocated for reuse. */
  reset(): void {
    callNative(() => this.native.reset())
  }

  resetRow(row: number): void {
    this.#checkRow('row', row)
    callNative(() => this.native.resetRow(row))
  }

  /** Drops positions `length..` of a row, e.g. to rewind to a shared prefix. */
  truncateRow(row: number, length: number): void {
    this.#checkRow('row', row)
    const held = this.seqlens[row]
    checkInteger('length', length, 0, held, ` (row ${row} holds ${held} positions; a row is only cut back)`)
    callNative(() => this.native.truncateRow(row, length))
  }

  /**
   * @internal Makes each row's constraint for the passes to come `constraints[row]` (none past
   * the array's end), telling the addon only what changed.
   */
  constrain(constraints: ReadonlyArray<Grammar | null | undefined>): void {
    for (let row = 0; row < this.#constraints.length || row < constraints.length; row++) {
      const next = constraints[row] ?? null
      if ((this.#constraints[row] ?? null) === next) continue
      callNative(() => this.native.setConstraint(row, next?.native ?? null))
      this.#constraints[row] = next
    }
  }

  #checkRow(name: string, row: number): void {
    const rows = this.batchSize
    checkInteger(name, row, 0, rows - 1, ` (a row of this ${rows}-row cache)`)
  }

  get disposed(): boolean {
    return this.native.disposed
  }

  /** Frees the buffers now, or as soon as a forward pass in flight ends; never waits for one. */
  dispose(): void {
    this.native.dispose()
  }

  [Symbol.dispose](): void {
    this.dispose()
  }
}
