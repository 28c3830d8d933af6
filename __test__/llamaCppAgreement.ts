// Agreement with llama.cpp's greedy tokens, for the golden suites (golden.spec.ts, gemma.spec.ts):
// free-running runs with where they split, and per-step choices when fed llama.cpp's tokens.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'

import { Engine, type Model } from '../index.js'
import { root } from './models.js'

export interface Fixture {
  generator: string
  tokens: number
  prompts: { name: string; kind?: string; promptTokens: number[]; greedyTokens: number[]; top2: [number, number][][] }[]
}

/** A difference in probability between two candidates this small is a close call. */
export const CLOSE_CALL = 0.15

/** p(a) − p(b) under the softmax of one row of logits. */
export function probabilityGap(row: Float32Array, a: number, b: number): number {
  let max = -Infinity
  for (const v of row) max = Math.max(max, v)
  let total = 0
  for (const v of row) total += Math.exp(v - max)
  return (Math.exp(row[a] - max) - Math.exp(row[b] - max)) / total
}

export const fixture = (name: string): Fixture => JSON.parse(readFileSync(join(root, '__test__', 'fixtures', name), 'utf8')) as Fixture

/** A second llama.cpp build's greedy tokens for a fixture's prompts (scripts/make-raw-greedy.ts). */
export interface RawFixture {
  generator: string
  tokens: number
  prompts: { name: string; greedyTokens: number[] }[]
}

/** On how many prompts `runs` (by prompt name) repeats every token of `reference`'s run. */
function identicalRuns(reference: Map<string, number[]>, runs: Map<string, number[]>): number {
  return [...reference].filter(([name, tokens]) => tokens.every((token, i) => runs.get(name)?.[i] === token)).length
}

/** Logs how often the two llama.cpp builds agree with each other and with us: on a quantized model
 * the builds' own rounding differs, which bounds how often any third engine can match either. */
export function crossReference(fx: Fixture, rawName: string, results: Agreement[]): { builds: number; oursRaw: number; raw: RawFixture } {
  const raw = JSON.parse(readFileSync(join(root, '__test__', 'fixtures', rawName), 'utf8')) as RawFixture
  const rawRuns = new Map(raw.prompts.map((p) => [p.name, p.greedyTokens]))
  const nodeRuns = new Map(fx.prompts.map((p) => [p.name, p.greedyTokens]))
  const ours = new Map(results.map((r) => [r.name, r.tokens]))
  return { builds: identicalRuns(nodeRuns, rawRuns), oursRaw: identicalRuns(rawRuns, ours), raw }
}

export interface Agreement {
  name: string
  /** Leading tokens identical to llama.cpp's. */
  agreed: number
  /** At the first difference: our logit for our token minus our logit for llama.cpp's token. */
  gap?: number
  /** Our token at the first difference. */
  ours?: number
  /** Our free-running tokens. */
  tokens: number[]
}

export async function compare(model: Model, fx: Fixture): Promise<Agreement[]> {
  const engine = new Engine(model)
  const out: Agreement[] = []
  for (const p of fx.prompts) {
    // no stop tokens: llama.cpp's reference ran the full 64 tokens, past any end of turn
    const [row] = await engine.generateBatch(p.promptTokens, { temperature: 0, maxTokens: fx.tokens, stopTokens: [] })
    let agreed = 0
    while (agreed < fx.tokens && row.tokens[agreed] === p.greedyTokens[agreed]) agreed++
    if (agreed === fx.tokens) {
      out.push({ name: p.name, agreed, tokens: row.tokens })
      continue
    }
    const cache = model.createCache(1, p.promptTokens.length + agreed + 1)
    const { logits } = await model.forward(cache, [p.promptTokens.concat(p.greedyTokens.slice(0, agreed))])
    cache.dispose()
    out.push({ name: p.name, agreed, gap: logits[row.tokens[agreed]] - logits[p.greedyTokens[agreed]], ours: row.tokens[agreed], tokens: row.tokens })
  }
  return out
}

export interface TeacherForced {
  /** Steps whose top token is llama.cpp's. */
  agree: number
  steps: number
  /** Steps where we chose otherwise and neither engine was torn between the two tokens. */
  clear: string[]
}

/** The logits after the prompt and after each of llama.cpp's greedy tokens but the last, row by
 * row: in one pass (the prefill road), or one token per pass after the prompt (the decode road). */
async function forcedLogits(model: Model, fx: Fixture, p: Fixture['prompts'][number], stepwise: boolean): Promise<Float32Array> {
  const cache = model.createCache(1, p.promptTokens.length + fx.tokens)
  const forced = p.greedyTokens.slice(0, -1)
  try {
    if (!stepwise) return (await model.forward(cache, [p.promptTokens.concat(forced)], { allLogits: true })).logits
    const vocab = model.info.vocabSize
    const rows = new Float32Array(fx.tokens * vocab)
    rows.set((await model.forward(cache, [p.promptTokens])).logits)
    for (const [s, token] of forced.entries()) rows.set((await model.forward(cache, [[token]])).logits, (s + 1) * vocab)
    return rows
  } finally {
    cache.dispose()
  }
}

/** Fed llama.cpp's own greedy tokens, does each step's top token match its choice? */
export async function teacherForced(model: Model, fx: Fixture, stepwise = false): Promise<TeacherForced> {
  let agree = 0
  let steps = 0
  const clear: string[] = []
  const vocab = model.info.vocabSize
  for (const p of fx.prompts) {
    const logits = await forcedLogits(model, fx, p, stepwise)
    // One pass returns a row for every prompt token too; the forced steps are the last ones.
    const first = logits.length / vocab - fx.tokens
    for (let s = 0; s < fx.tokens; s++) {
      const row = logits.subarray((first + s) * vocab, (first + s + 1) * vocab)
      let best = 0
      for (let i = 1; i < vocab; i++) if (row[i] > row[best]) best = i
      steps++
      if (best === p.greedyTokens[s]) {
        agree++
        continue
      }
      const [[, p1], [, p2]] = p.top2[s]
      const ours = probabilityGap(row, best, p.greedyTokens[s])
      if (p1 - p2 >= CLOSE_CALL && ours >= CLOSE_CALL) {
        clear.push(`${p.name} step ${s}: we chose ${best} (by ${ours.toFixed(3)} in our probabilities), llama.cpp ${p.greedyTokens[s]} with p=${p1} vs runner-up ${p2}`)
      }
    }
  }
  return { agree, steps, clear }
}

