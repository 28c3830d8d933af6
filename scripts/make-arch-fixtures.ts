// Golden fixtures for the architectures beside Llama, from raw llama.cpp (scripts/build-llama-cpp.sh):
// each random-weight model of scripts/archModels.ts in F32 and quantized by llama.cpp's own
// llama-quantize to Q4_K_M, fed one prompt of seeded ids (64 tokens; for Llama 3's scaled RoPE
// 64 past the original context), then 32 greedy steps. Per logits row of the last 64 prompt
// positions and of the greedy run it keeps llama.cpp's top 8 (id, logit) and the
// log-sum-exp, enough to check our logits and probabilities without committing whole rows. The Q4_K_M file stays in models/
// with its SHA-256 in the fixture: the test needs llama.cpp's own quantization of it.
//
//   node --import=tsx scripts/make-arch-fixtures.ts [qwen2 qwen3 ...]
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'

import { hashFile } from '../src/hashFile.js'
import { ARCH_SHAPES, archModelPath, makeArchModel, tokenizerOf, xorshift32 } from './archModels.js'
import { writeFixtureJson } from './fixtureJson.js'
import { rawLlamaCpp } from './rawLlamaCpp.js'

const PROMPT_TOKENS = 64
const GREEDY = 32
const TOP = 8
/** llama-quantize's file types per model: Q4_K_M for all; one model also takes the other common
 * block formats (Q5_K and Q6_K in Q5_K_M, Q5_1). */
const QUANTS: Record<string, string[]> = { qwen3: ['Q4_K_M', 'Q5_K_M', 'Q5_1'] }
const log = (msg: string) => process.stderr.write(`[make-arch-fixtures] ${msg}\n`)

/** Seeded prompt ids below the vocabulary size, from the weights' generator. */
function promptIds(seed: number, n: number, vocab: number): number[] {
  const next = xorshift32(seed)
  return Array.from({ length: n }, () => next() % vocab)
}

function rowSummary(row: Float32Array): { top: [number, number][]; lse: number } {
  const order = Array.from(row.keys()).sort((a, b) => row[b] - row[a]).slice(0, TOP)
  let lse = 0
  const max = row[order[0]]
  for (const v of row) lse += Math.exp(v - max)
  return { top: order.map((i) => [i, Number(row[i].toPrecision(7))]), lse: Number((max + Math.log(lse)).toPrecision(7)) }
}

const sha256 = async (path: string) => (await hashFile(path)).digest('hex')

const llamaCpp = rawLlamaCpp()
// The fetched file, pinned by hash: our re-encodings are not inputs to a fixture.
const tokenizerSource = join('models', 'SmolLM2-135M-Instruct.Q4_1.gguf')
const names = process.argv.slice(2).length ? process.argv.slice(2) : Object.keys(ARCH_SHAPES)
for (const name of names) {
  const f32 = makeArchModel(name, tokenizerSource)
  const quantized = (QUANTS[name] ?? ['Q4_K_M']).map((type) => {
    const path = archModelPath(name, type)
    if (!existsSync(path)) execFileSync(join(llamaCpp.bin, 'llama-quantize'), [f32, path, type], { stdio: ['ignore', 'ignore', 'inherit'] })
    return [type, path] as const
  })
  const shape = ARCH_SHAPES[name]!
  const prompt = promptIds(name.length * 7919 + 17, (shape.llama3Rope?.originalContext ?? 0) + PROMPT_TOKENS, tokenizerOf(shape, tokenizerSource).vocab)
  const files = []
  for (const [type, path] of [['F32', f32] as const, ...quantized]) {
    const { greedy, rows } = llamaCpp.logits(path, prompt, { kv: 'f32', generate: GREEDY, tail: PROMPT_TOKENS })
    files.push({ type, sha256: await sha256(path), greedy, rows: rows.map(rowSummary) })
    log(`${name} ${type}: ${rows.length} rows, greedy ${greedy.slice(0, 8).join(',')}...`)
  }
  writeFixtureJson(join('__test__', 'fixtures', `llamacpp-arch-${name}.json`), {
    generator: `${llamaCpp.generator} (llama-quantize Q4_K_M; F32 KV cache)`,
    shape,
    prompt,
    rowsFrom: prompt.length - PROMPT_TOKENS,
    files,
  }, log)
}
