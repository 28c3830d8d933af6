/**
 * What an `Engine` does with a KV cache: read each row's length and the cache's shape, copy a
 * prefilled row into its samples, and cut rows back. `KvCache` is one; the cache of a model
 * scripted for tests (see `ForwardModel`) can be another.
 */
export interface RowCache {
  /** Positions held by each row. */
  readonly seqlens: Int32Array
  readonly batchSize: number
  /** Positions allocated per row. */
  readonly capacity: number
  /** What K and V are held in, which the bytes per position depend on (`ForwardModel.cacheBytes`). */
  readonly kvType: 'f16' | 'f32'
  copyRow(src: number, dst: number): void
  /** Drops positions `length..` of a row. */
  truncateRow(row: number, length: number): void
  dispose(): void
}
