import type { Rng } from './Rng.js'
import type { ResolvedSamplingOptions } from './validateSamplingOptions.js'

/** Candidate counts tried, in turn, when top-p has no top-k to bound it. */
const NUCLEUS_STEPS = [64, 512, 4096]

/**
 * Picks the next token of one row from its logits: greedy at temperature 0, otherwise
 * temperature, then top-k, top-p and min-p (vLLM's order), then a draw from the seeded Rng.
 * Never sorts the whole vocabulary: top-k and top-p work on a bounded heap of candidates, and
 * plain temperature sampling is one cumulative pass. Scratch space is allocated once.
 */
export class Sampler {
  readonly #o: ResolvedSamplingOptions
  readonly #rng: Rng
  #ids = new Int32Array(0)
  #vals = new Float64Array(0)

  constructor(options: ResolvedSamplingOptions, rng: Rng) {
    this.#o = options
    this.#rng = rng
  }

  /** The row's logits are `logits[offset, offset + vocabSize)`; nothing is copied. */
  sample(logits: Float32Array, offset = 0, vocabSize = logits.length - offset): number {
    const end = offset + vocabSize
    let best = offset
    for (let i = offset + 1; i < end; i++) if (logits[i] > logits[best]) best = i
    if (this.#o.temperature === 0) return best - offset
    const { topK, topP } = this.#o
    if (topK > 0 && topK < vocabSize) return this.#sampleCandidates(logits, offset, vocabSize, topK, logits[best], true)
    if (topP < 1) return this.#sampleNucleus(logits, offset, vocabSize, logits[best])
    return this.#sampleFull(logits, offset, vocabSize, logits[best])
  }

  /** No top-k/top-p: one pass for the normaliser, one cumulative pass for the draw. Min-p is a
   * threshold on the scaled logit, so it needs no sorting either. */
  #sampleFull(logits: Float32Array, offset: number, vocab: number, max: number): number {
    const invT = 1 / this.#o.temperature
    const floor = this.#o.minP > 0 ? Math.log(this.#o.minP) : -Infinity
    let total = 0
    for (let i = 0; i < vocab; i++) {
      const z = (logits[offset + i] - max) * invT
      if (z >= floor) total += Math.exp(z)
    }
    let u = this.#rng.nextFloat() * total
    let last = 0
    for (let i = 0; i < vocab; i++) {
      const z = (logits[offset + i] - max) * invT
      if (z < floor) continue
      last = i
      u -= Math.exp(z)
      if (u < 0) return i
    }
    return last
  }

  /** Top-p alone: grow the candidate set until it holds the nucleus. */
  #sampleNucleus(logits: Float32Array, offset: number, vocab: number, max: number): number {
    const invT = 1 / this.#o.temperature
    let total = 0
    for (let i = 0; i < vocab; i++) total += Math.exp((logits[offset + i] - max) * invT)
    for (const n of NUCLEUS_STEPS) {
      if (n >= vocab) break
      const count = this.#topCandidates(logits, offset, vocab, n)
      let mass = 0
      for (let j = 0; j < count; j++) mass += Math.exp((this.#vals[j] - max) * invT)
      if (mass / total >= this.#o.topP) return this.#draw(count, max, total)
    }
    return this.#sampleCandidates(logits, offset, vocab, vocab, max, false, total)
  }

  #sampleCandidates(logits: Float32Array, offset: number, vocab: number, n: number, max: number, renormalise: boolean, total = 0): number {
    const count = this.#topCandidates(logits, offset, vocab, n)
    let norm = total
    if (renormalise) {
      norm = 0
      const invT = 1 / this.#o.temperature
      for (let j = 0; j < count; j++) norm += Math.exp((this.#vals[j] - max) * invT)
    }
    return this.#draw(count, max, norm)
  }

  /** Candidates `[0, count)` are sorted by descending logit; `norm` is the normaliser that
   * top-p's cumulative mass is measured against. Applies top-p then min-p, then draws. */
  #draw(count: number, max: number, norm: number): number {
    const invT = 1 / this.#o.temperature
    const minRatio = this.#o.minP
    let kept = 0
    let mass = 0
    for (let j = 0; j < count; j++) {
      const w = Math.exp((this.#vals[j] - max) * invT)
      if (j > 0 && w < minRatio) break // w is p / p_max here, since the top candidate has w = 1
      kept = j + 1
      mass += w
      this.#vals[j] = w
      if (mass / norm >= this.#o.topP) break
    }
    let u = this.#rng.nextFloat() * mass
    for (let j = 0; j < kept; j++) {
      u -= this.#vals[j]
      if (u < 0) return this.#ids[j]
    }
    return this.#ids[kept - 1]
  }

  /** The n highest logits of the row into the scratch arrays, sorted descending; a min-heap
   * keeps the pass at O(V) comparisons plus O(n log n) swaps. Returns the count. */
  #topCandidates(logits: Float32Array, offset: number, vocab: number, n: number): number {
    if (this.#ids.length < n) {
      this.#ids = new Int32Array(n)
      this.#vals = new Float64Array(n)
    }
    const ids = this.#ids
    const vals = this.#vals
    let size = 0
    for (let i = 0; i < vocab; i++) {
      const v = logits[offset + i]
      if (size < n) {
        let c = size++
        while (c > 0) {
          const p = (c - 1) >> 1
          if (vals[p] <= v) break
          vals[c] = vals[p]
          ids[c] = ids[p]
          c = p
        }
        vals[c] = v
        ids[c] = i
      } else if (v > vals[0]) {
        siftDown(vals, ids, size, v, i)
      }
    }
    // heap-sort in place: repeatedly move the minimum to the end, giving descending order
    for (let end = size - 1; end > 0; end--) {
      const v = vals[end]
      const id = ids[end]
      vals[end] = vals[0]
      ids[end] = ids[0]
      siftDown(vals, ids, end, v, id)
    }
    return size
  }
}

/** Places (v, id) at the root of a min-heap of `size` entries and restores the heap. */
function siftDown(vals: Float64Array, ids: Int32Array, size: number, v: number, id: number): void {
  let c = 0
  for (;;) {
    let child = 2 * c + 1
    if (child >= size) break
    if (child + 1 < size && vals[child + 1] < vals[child]) child++
    if (vals[child] >= v) break
    vals[c] = vals[child]
    ids[c] = ids[child]
    c = child
  }
  vals[c] = v
  ids[c] = id
}
