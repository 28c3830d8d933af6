// A model with no weights for driving the Engine, as nanochat's test_engine.py drives its Engine
// with a mock: the highest logit after a row's history is whatever a test's script says, and the
// cache holds the tokens themselves, so a test can check exactly what each row was fed.
import { Candidates, IncrementalDecoder, KvEngineError, type ForwardModel, type ForwardOptions, type ForwardResult, type RowCache } from '../index.js'
import { TokenBytes } from '../src/TokenBytes.js'
import { toTokenIds } from '../src/toTokenIds.js'

/**
 * nanochat's special tokens first (so the Engine turns on its calculator and stop tokens), then
 * digits and '+' for the calculator, and tokens of several characters for stop strings to straddle.
 */
export const VOCAB = ['<|bos|>', '<|assistant_end|>', '<|python_start|>', '<|python_end|>', '<|output_start|>', '<|output_end|>', ...'0123456789+', ' the', ' end', 'ST', 'OP', 'a', 'b', 'c']
const V = VOCAB.length
const SPECIAL = VOCAB.filter((t) => t.startsWith('<|'))

export function id(text: string): number {
  const i = VOCAB.indexOf(text)
  if (i < 0) throw new Error(`no token ${JSON.stringify(text)} in the scripted vocabulary`)
  return i
}

export const ids = (...texts: string[]): number[] => texts.map(id)

/** The token with the highest logit after `history` (a row's tokens, the one just fed last). */
export type Script = (history: readonly number[]) => number

/** A script that continues each token with its successor in `next` (texts), or with `fallback`. */
export function successors(next: Record<string, string>, fallback: string): Script {
  return (history) => id(next[VOCAB[history[history.length - 1]]] ?? fallback)
}

const bytes = VOCAB.map((t) => new TextEncoder().encode(t))
const offsets = Uint32Array.from({ length: V + 1 }, (_, i) => bytes.slice(0, i).reduce((n, b) => n + b.length, 0))
const tokenBytes = new TokenBytes(Uint8Array.from(bytes.flatMap((b) => [...b])), offsets)

/** Longest match first; special tokens' text only with `special`, as a real tokenizer parses it. */
export const scriptedTokenizer: ForwardModel['tokenizer'] = {
  encode(text, { special = false, addBos = false } = {}) {
    const out = addBos ? [id('<|bos|>')] : []
    for (let at = 0; at < text.length; ) {
      const matches = VOCAB.filter((t) => text.startsWith(t, at) && (special || !SPECIAL.includes(t)))
      if (matches.length === 0) throw new KvEngineError('INVALID_ARGUMENT', `the scripted vocabulary cannot spell ${JSON.stringify(text.slice(at))}`)
      const longest = matches.reduce((a, b) => (b.length > a.length ? b : a))
      out.push(id(longest))
      at += longest.length
    }
    return out
  },
  decode: (tokens) => Array.from(toTokenIds(tokens, V, 'decode() tokens'), (t) => VOCAB[t]).join(''),
  createDecoder: () => new IncrementalDecoder(tokenBytes),
}

/** A cache that holds each row's tokens, position by position. */
export class ScriptedCache implements RowCache {
  rows: number[][]
  readonly kvType = 'f32'
  disposed = false
  readonly #capacity: number

  constructor(batchSize: number, capacity: number) {
    this.rows = Array.from({ length: batchSize }, () => [])
    this.#capacity = capacity
  }

  get seqlens(): Int32Array {
    return Int32Array.from(this.rows, (r) => r.length)
  }

  get batchSize(): number {
    return this.rows.length
  }

  /** Grows as a KvCache does: room for its longest row. */
  get capacity(): number {
    return Math.max(this.#capacity, ...this.seqlens)
  }

  copyRow(src: number, dst: number): void {
    this.rows[this.#row(dst)] = [...this.rows[this.#row(src)]]
  }

  truncateRow(row: number, length: number): void {
    const held = this.rows[this.#row(row)].length
    if (!Number.isInteger(length) || length < 0 || length > held) throw new Error(`row ${row} holds ${held} positions; cannot cut it to ${length}`)
    this.rows[row].length = length
  }

  dispose(): void {
    this.disposed = true
  }

  #row(row: number): number {
    if (!Number.isInteger(row) || row < 0 || row >= this.rows.length) throw new Error(`no row ${row} in a ${this.rows.length}-row cache`)
    return row
  }
}

/** One `forward` call: the tokens given for each row, and the passes asked for. */
export interface ForwardCall {
  tokens: number[][]
  greedySteps: number
}

/**
 * Logits after `history`: the script's token at 3, the others spread over [0, 2) in an order
 * that moves with the history, with no ties, so top-k draws vary and candidates have one order.
 */
function logitsAfter(history: readonly number[], top: number, out: Float32Array): void {
  const shift = history.length * 5 + history[history.length - 1] * 3
  for (let t = 0; t < V; t++) out[t] = t === top ? 3 : (((t * 7 + shift) % V) / V) * 2
}

export class ScriptedModel implements ForwardModel<ScriptedCache> {
  readonly info: ForwardModel['info']
  readonly tokenizer = scriptedTokenizer
  readonly calls: ForwardCall[] = []
  /** Every cache made by `createCache` (the Engine's own included), kept for inspection after disposal. */
  readonly caches: ScriptedCache[] = []
  readonly #script: Script

  constructor(script: Script, contextLength = 64) {
    this.#script = script
    this.info = { vocabSize: V, contextLength, eogTokens: [], device: 'cpu' }
  }

  createCache(batchSize: number, capacity: number): ScriptedCache {
    const cache = new ScriptedCache(batchSize, capacity)
    this.caches.push(cache)
    return cache
  }

  cacheBytes(batchSize: number, capacity: number): number {
    return batchSize * capacity * 64
  }

  /**
   * As `Model.forward`, with the same rules for its options. The pass runs a macrotask after the
   * call, as the native one runs on its own thread: a signal aborted before then fails it, and
   * the cache is changed only by a pass that completes.
   */
  async forward(cache: ScriptedCache, tokens: ArrayLike<number>[], options: ForwardOptions = {}): Promise<ForwardResult> {
    if (!(cache instanceof ScriptedCache) || cache.disposed || tokens.length !== cache.batchSize) {
      throw new KvEngineError('INVALID_ARGUMENT', 'forward() needs a live ScriptedCache and one token list per row')
    }
    const fed = tokens.map((t, i) => Array.from(toTokenIds(t, V, `tokens[${i}]`)))
    const { allLogits = false, logits: wantLogits = true, greedySteps = 1, signal } = options
    if (greedySteps > 1 && (options.candidates === undefined || wantLogits || allLogits)) {
      throw new KvEngineError('INVALID_ARGUMENT', 'greedySteps > 1 decodes from candidates: give candidates, logits: false and no allLogits')
    }
    if (!wantLogits && options.logitsInto) throw new KvEngineError('INVALID_ARGUMENT', 'logitsInto needs logits')
    if (signal?.aborted) throw new KvEngineError('ABORTED', 'the signal was already aborted')
    this.calls.push({ tokens: fed, greedySteps })
    await new Promise((resolve) => setImmediate(resolve))
    if (signal?.aborted) throw new KvEngineError('ABORTED', 'the pass was aborted')
    return this.#run(cache, fed, options)
  }

  /** The passes of one call, on copies of the rows that replace the cache's once all have run. */
  #run(cache: ScriptedCache, fed: number[][], options: ForwardOptions): ForwardResult {
    const { allLogits = false, logits: wantLogits = true, greedySteps = 1 } = options
    const rows = fed.flatMap((t, r) => Array<number>(allLogits ? t.length : Math.min(t.length, 1)).fill(r))
    const picked = this.#candidatesFor(rows.length * greedySteps, options)
    const logits = wantLogits ? (options.logitsInto ?? new Float32Array(rows.length * V)) : new Float32Array(0)
    const histories = cache.rows.map((r) => [...r])
    const scratch = new Float32Array(V)
    let feed = fed
    for (let pass = 0, out = 0; pass < greedySteps; pass++) {
      const tops: number[][] = fed.map(() => [])
      for (const [r, tokens] of feed.entries()) {
        for (const [i, token] of tokens.entries()) {
          histories[r].push(token)
          if (!allLogits && i < tokens.length - 1) continue
          const top = this.#script(histories[r])
          if (!Number.isInteger(top) || top < 0 || top >= V) throw new Error(`the script gave ${top}, not a token id`)
          logitsAfter(histories[r], top, scratch)
          if (wantLogits) logits.set(scratch, out * V)
          if (picked) writeCandidates(scratch, picked, out)
          tops[r] = [top]
          out++
        }
      }
      // Each pass after the first feeds every row given tokens its top token of the pass before.
      feed = tops
    }
    cache.rows = histories
    return { logits: wantLogits ? logits.subarray(0, rows.length * V) : logits, rows: Uint32Array.from(rows), ...(picked && { candidates: picked }) }
  }

  #candidatesFor(rows: number, { candidates, candidatesInto: into }: ForwardOptions): Candidates | undefined {
    if (candidates === undefined) return undefined
    const perRow = Math.min(candidates, V)
    if (into === undefined) return new Candidates(new Uint32Array(rows * perRow), new Float32Array(rows * perRow), perRow)
    if (!(into instanceof Candidates) || into.perRow !== perRow || into.ids.length < rows * perRow) {
      throw new KvEngineError('INVALID_ARGUMENT', `candidatesInto must be a Candidates with perRow ${perRow} and room for ${rows} rows of them`)
    }
    return into
  }
}

/** Logits row `at` of `picked`: its highest `perRow` tokens, highest first, ties by lower id. */
function writeCandidates(logits: Float32Array, picked: Candidates, at: number): void {
  const order = Array.from({ length: V }, (_, t) => t).sort((a, b) => logits[b] - logits[a] || a - b)
  for (let j = 0; j < picked.perRow; j++) {
    picked.ids[at * picked.perRow + j] = order[j]
    picked.logits[at * picked.perRow + j] = logits[order[j]]
  }
}
