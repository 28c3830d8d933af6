import { Candidates } from './Candidates.js'
import { KvEngineError } from './KvEngineError.js'
import type { Rng } from './Rng.js'
import type { SamplingOptions } from './SamplingOptions.js'
import { validateSamplingOptions } from './validateSamplingOptions.js'

/**
 * Heap sizes top-p without top-k tries in turn before selecting over the whole vocabulary. Most
 * nuclei fit the first; past about a thousand, a heap costs more than a linear-time selection.
 */
const NUCLEUS_HEAP_SIZES = [64, 256, 1024]

// Scratch shared by every Sampler. sample() is synchronous and calls nothing outside this module
// but Rng, so two calls never interleave on one thread; sharing means a batch of many rows needs
// one vocabulary-sized buffer rather than one per row, and steady-state sampling allocates nothing.
let ids = new Int32Array(0)
let weights = new Float64Array(0)

/**
 * Picks the next token of one row from its logits: argmax at temperature 0; otherwise
 * temperature, top-k, top-p, min-p (vLLM/Hugging Face order), renormalise, one draw from the Rng.
 * Never sorts the vocabulary: top-k and top-p work on a bounded heap of candidates (top-p on a
 * linear-time selection when the nucleus is too big for one), and sampling with neither is one
 * cumulative pass.
 */
export class Sampler {
  readonly #invTemperature: number
  readonly #topK: number
  readonly #topP: number
  readonly #minP: number
  readonly #rng: Rng

  /**
   * Options are validated here too, so a Sampler can't exist in a state sample() can't honour.
   * The seed is not read: `rng` is the only source of randomness.
   */
  constructor(options: Omit<SamplingOptions, 'seed'>, rng: Rng) {
    const { temperature, topK, topP, minP } = validateSamplingOptions(options)
    this.#invTemperature = 1 / temperature
    this.#topK = topK
    this.#topP = topP
    this.#minP = minP
    this.#rng = rng
  }

  /**
   * How many of each row's highest tokens this sampler can work from alone over a vocabulary of
   * `vocabSize` (1 when greedy, k for top-k); 0 when it must see every logit. A forward pass
   * asked for that many `candidates` saves `sample` its scan of the vocabulary.
   */
  candidatesWanted(vocabSize: number): number {
    if (this.#invTemperature === Infinity) return 1
    return this.#topK > 0 && this.#topK < vocabSize && this.#topK <= Candidates.MAX ? this.#topK : 0
  }

  /**
   * The token id (0-based within the row) chosen from `logits[offset, offset + vocabSize)`.
   * A batch's logits can be passed whole with each row's offset: nothing is copied. With
   * `candidates` (from the same pass; this row's are row `candidateRow`) a greedy or top-k
   * sampler reads those instead of the logits, and draws the same token (where logits tie, the
   * order among the tied ones may differ from the scan's, and with it which one a draw lands on).
   */
  sample(logits: Float32Array, offset = 0, vocabSize = logits.length - offset, candidates?: Candidates, candidateRow = 0): number {
    const end = offset + vocabSize
    const first = candidates && Number.isInteger(vocabSize) && vocabSize > 0 ? this.#firstCandidate(candidates, candidateRow, vocabSize) : -1
    // Logits read in place must be there; a sampler served by candidates may be given none.
    if (first < 0 && (!Number.isInteger(offset) || !Number.isInteger(vocabSize) || offset < 0 || vocabSize < 1 || end > logits.length)) {
      const message = `row [${offset}, ${end}) must be non-empty and lie within the ${logits.length} logits`
      throw new KvEngineError('INVALID_ARGUMENT', message)
    }
    // Also catches temperatures so small that 1/t overflows: greedy is their limit, and the
    // scaled path would compute 0 * Infinity.
    if (this.#invTemperature === Infinity) return first >= 0 ? (candidates as Candidates).ids[first] : argmax(logits, offset, vocabSize)
    if (first >= 0) return this.#sampleTopKOf(candidates as Candidates, first)
    if (this.#topK > 0 && this.#topK < vocabSize) return this.#sampleTopK(logits, offset, vocabSize)
    if (this.#topP < 1) return this.#sampleNucleus(logits, offset, vocabSize)
    return this.#sampleDense(logits, offset, vocabSize)
  }

  /** Where row `row`'s candidates start, or -1 when they are too few for this sampler. */
  #firstCandidate(candidates: Candidates, row: number, vocabSize: number): number {
    const wanted = this.candidatesWanted(vocabSize)
    if (wanted === 0 || wanted > candidates.perRow) return -1
    const first = row * candidates.perRow
    if (!Number.isInteger(row) || row < 0 || first + candidates.perRow > candidates.ids.length) {
      throw new KvEngineError('INVALID_ARGUMENT', `candidate row ${row} is not among the ${candidates.ids.length / candidates.perRow} rows picked`)
    }
    return first
  }

  /**
   * No top-k/top-p: min-p is a threshold on the scaled logit, so one exp per token into running
   * sums, and a binary search for the draw, suffice.
   */
  #sampleDense(logits: Float32Array, offset: number, vocab: number): number {
    reserve(vocab)
    const max = logits[argmax(logits, offset, vocab) + offset]
    const invT = this.#invTemperature
    // exp(z) >= minP  <=>  z >= log(minP); log(0) = -Infinity keeps every token
    const floor = Math.log(this.#minP)
    let total = 0
    for (let i = 0; i < vocab; i++) {
      const z = (logits[offset + i] - max) * invT
      if (z >= floor) total += Math.exp(z)
      weights[i] = total
    }
    // the first running sum past the target; a token min-p dropped adds nothing, so is never it
    const target = this.#rng.nextFloat() * total
    let lo = 0
    let hi = vocab - 1
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (weights[mid] > target) hi = mid
      else lo = mid + 1
    }
    return lo
  }

  /** Top-k first, then top-p measured against the top-k mass (the top-k-renormalised distribution). */
  #sampleTopK(logits: Float32Array, offset: number, vocab: number): number {
    topCandidates(logits, offset, vocab, this.#topK)
    return this.#drawTopK()
  }

  /** `#sampleTopK` over candidates picked natively: the same top k, in the same order. */
  #sampleTopKOf(candidates: Candidates, first: number): number {
    const count = this.#topK
    reserve(count)
    for (let j = 0; j < count; j++) {
      ids[j] = candidates.ids[first + j]
      weights[j] = candidates.logits[first + j]
    }
    return this.#drawTopK()
  }

  /** The rest of top-k, once `weights[0, k)` hold the k highest logits in descending order. */
  #drawTopK(): number {
    const count = this.#topK
    const norm = toWeights(count, this.#invTemperature)
    const kept = this.#cutoff(count, norm)
    return this.#drawCandidate(kept < 0 ? count : kept)
  }

  /**
   * Top-p alone: the nucleus is usually a few dozen tokens, so try the best 64, then 256, 1024;
   * a flatter distribution falls through to a selection over the whole vocabulary.
   */
  #sampleNucleus(logits: Float32Array, offset: number, vocab: number): number {
    const max = logits[argmax(logits, offset, vocab) + offset]
    const invT = this.#invTemperature
    let total = 0
    for (let i = 0; i < vocab; i++) total += Math.exp((logits[offset + i] - max) * invT)
    const need = this.#topP * total
    for (const n of NUCLEUS_HEAP_SIZES) {
      if (n < need) continue // no weight exceeds 1, so the nucleus holds at least `need` tokens
      const count = Math.min(n, vocab)
      topCandidates(logits, offset, vocab, count)
      toWeights(count, invT)
      const kept = this.#cutoff(count, total)
      if (kept > 0) return this.#drawCandidate(kept)
      if (count === vocab) return this.#drawCandidate(count) // rounding kept the mass just under topP
    }
    reserve(vocab)
    for (let i = 0; i < vocab; i++) {
      ids[i] = i
      weights[i] = Math.exp((logits[offset + i] - max) * invT)
    }
    const kept = nucleusEnd(vocab, need)
    // the nucleus is unordered, but min-p needs no order: it is a threshold on p / p_max
    for (let j = 0; j < kept; j++) if (weights[j] < this.#minP) weights[j] = 0
    return this.#drawCandidate(kept)
  }

  /**
   * How many of the `count` candidates (weights sorted descending, the first being 1) survive
   * top-p against `norm` and min-p; -1 when neither cuts inside them, so more might be needed.
   */
  #cutoff(count: number, norm: number): number {
    const minP = this.#minP
    const need = this.#topP * norm
    let mass = 0
    for (let j = 0; j < count; j++) {
      const w = weights[j]
      if (w < minP) return j // w is p / p_max: the first candidate has weight 1, so j >= 1 here
      mass += w
      if (mass >= need) return j + 1
    }
    return -1
  }

  /** Draws among the first `kept` candidates in proportion to their weights. */
  #drawCandidate(kept: number): number {
    let mass = 0
    for (let j = 0; j < kept; j++) mass += weights[j]
    return ids[pick(kept, this.#rng.nextFloat() * mass)]
  }
}

function reserve(n: number): void {
  if (weights.length < n) {
    ids = new Int32Array(n)
    weights = new Float64Array(n)
  }
}

/** First maximum on ties, so greedy decoding is deterministic. */
function argmax(logits: Float32Array, offset: number, vocab: number): number {
  let best = offset
  let max = logits[offset]
  for (let i = offset + 1, end = offset + vocab; i < end; i++) {
    if (logits[i] > max) {
      max = logits[i]
      best = i
    }
  }
  return best - offset
}

/** The index in `weights[0, count)` where `u` (uniform in [0, total weight)) falls. */
function pick(count: number, u: number): number {
  for (let j = 0; j < count; j++) {
    const w = weights[j]
    if (u < w) return j
    u -= w
  }
  // rounding can leave u just past the last weight: take the last token that could be drawn
  let j = count - 1
  while (j > 0 && weights[j] === 0) j--
  return j
}

/**
 * Weighted quickselect: reorders `weights[0, n)` (with `ids`) so that the smallest set of heaviest
 * tokens whose mass reaches `need` comes first, unsorted, and returns its size. Expected O(n).
 */
function nucleusEnd(n: number, need: number): number {
  // invariant: [0, lo) is kept and outweighs [lo, hi), whose tokens outweigh [hi, n); the cut
  // lies in (lo, hi], and `before`, the mass of [0, lo), is short of `need`
  let lo = 0
  let hi = n
  let before = 0
  while (lo < hi) {
    const pivot = medianOf3(weights[lo], weights[(lo + hi) >> 1], weights[hi - 1])
    // three-way partition of [lo, hi): heavier than the pivot [lo, gt), equal [gt, lt), lighter [lt, hi)
    let gt = lo
    let lt = hi
    let heavy = 0
    for (let i = lo; i < lt; ) {
      const w = weights[i]
      if (w > pivot) {
        heavy += w
        swap(i++, gt++)
      } else if (w < pivot) {
        swap(i, --lt)
      } else {
        i++
      }
    }
    if (before + heavy >= need) {
      hi = gt
      continue
    }
    before += heavy
    for (let j = gt; j < lt; j++) {
      before += pivot
      if (before >= need) return j + 1
    }
    lo = lt
  }
  return lo // summation order left the mass a rounding error short: everything up to hi is kept
}

function medianOf3(a: number, b: number, c: number): number {
  return a < b ? (b < c ? b : a < c ? c : a) : a < c ? a : b < c ? c : b
}

function swap(i: number, j: number): void {
  const w = weights[i]
  weights[i] = weights[j]
  weights[j] = w
  const id = ids[i]
  ids[i] = ids[j]
  ids[j] = id
}

/** Turns the candidates' logits into exp((l - max) / T), the first (the max) becoming 1; returns their sum. */
function toWeights(count: number, invT: number): number {
  const max = weights[0]
  let sum = 0
  for (let j = 0; j < count; j++) {
    const w = Math.exp((weights[j] - max) * invT)
    weights[j] = w
    sum += w
  }
  return sum
}

/** Every how many tokens `topCandidates` samples a logit to guess its threshold. */
const STRIDE = 8
let aboveThreshold = new Int32Array(0)

/**
 * Puts the row's n highest logits into `weights[0, n)` sorted descending, their token ids into
 * `ids`. A threshold is guessed from every 8th logit; when at least n logits reach it, the n
 * highest are all among them, so one branch-light pass collects those few and only they go
 * through the min-heap (at batch 8 the heap's scan of every logit was most of a step's
 * TypeScript time). A guess that lets fewer through falls back to the heap over everything.
 */
function topCandidates(logits: Float32Array, offset: number, vocab: number, n: number): void {
  reserve(n)
  const sampled = Math.floor(vocab / STRIDE)
  // The sample's (n / STRIDE + 8)-th highest: a margin so that a typical row lets n through.
  const rank = Math.ceil(n / STRIDE) + 8
  if (rank * 4 > sampled) return heapTop(logits, offset, vocab, n, null, vocab)
  for (let j = 0; j < rank; j++) weights[j] = logits[offset + j * STRIDE]
  for (let c = (rank >> 1) - 1; c >= 0; c--) siftDown(c, rank, weights[c], ids[c])
  for (let j = rank; j < sampled; j++) {
    const v = logits[offset + j * STRIDE]
    if (v > weights[0]) siftDown(0, rank, v, j)
  }
  const threshold = weights[0]
  if (aboveThreshold.length < vocab) aboveThreshold = new Int32Array(vocab)
  let count = 0
  for (let i = 0; i < vocab; i++) {
    if (logits[offset + i] >= threshold) aboveThreshold[count++] = i
  }
  heapTop(logits, offset, vocab, n, count >= n ? aboveThreshold : null, count)
}

/**
 * The min-heap pass of `topCandidates` over tokens `among[0, count)` (every token when null),
 * then a heap sort: moving each minimum to the end leaves the n highest in descending order.
 */
function heapTop(logits: Float32Array, offset: number, vocab: number, n: number, among: Int32Array | null, count: number): void {
  for (let k = 0; k < n; k++) {
    ids[k] = among ? among[k] : k
    weights[k] = logits[offset + ids[k]]
  }
  for (let c = (n >> 1) - 1; c >= 0; c--) siftDown(c, n, weights[c], ids[c])
  // two loops rather than one through a lookup, to keep the scan of every token tight
  let least = weights[0]
  if (among) {
    for (let k = n; k < count; k++) {
      const v = logits[offset + among[k]]
      if (v > least) {
        siftDown(0, n, v, among[k])
        least = weights[0]
      }
    }
  } else {
    for (let id = n; id < vocab; id++) {
      const v = logits[offset + id]
      if (v > least) {
        siftDown(0, n, v, id)
        least = weights[0]
      }
    }
  }
  for (let end = n - 1; end > 0; end--) {
    const v = weights[end]
    const id = ids[end]
    weights[end] = weights[0]
    ids[end] = ids[0]
    siftDown(0, end, v, id)
  }
}

/** Places (v, id) at entry `c` of the min-heap `weights[0, size)`, sifting it down; the subtrees below `c` must be heaps. */
function siftDown(c: number, size: number, v: number, id: number): void {
  for (;;) {
    let child = 2 * c + 1
    if (child >= size) break
    if (child + 1 < size && weights[child + 1] < weights[child]) child++
    if (weights[child] >= v) break
    weights[c] = weights[child]
    ids[c] = ids[child]
    c = child
  }
  weights[c] = v
  ids[c] = id
}
