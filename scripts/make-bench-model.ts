#!/usr/bin/env -S node --import=tsx
// Makes the benchmark's ~1B-parameter model: Llama architecture, SmolLM2's tokenizer and chat
// template (copied from its GGUF), random weights written directly as Q8_0 or Q4_0. Random
// weights are fine for speed: the work per token depends only on the shapes. Cached; idempotent.
//
//   node --import=tsx scripts/make-bench-model.ts <q8_0|q4_0> [source.gguf] [out.gguf]
import { randomFillSync } from 'node:crypto'
import { existsSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

import { metadataValue, readGgufHeader, type GgufHeader } from '../benches/lib/ggufRead.js'
import { BLOCK, GGML_F32, GGML_Q4_0, GGML_Q8_0, stringEntry, u32Entry, writeGgufStreaming, type OutEntry, type OutTensor } from '../benches/lib/ggufWrite.js'

/** The shape: Llama-3.2-1B-like, with SmolLM2's vocabulary (tied embeddings, as SmolLM2). */
export const SHAPE = { hidden: 2048, layers: 16, heads: 32, kvHeads: 8, headDim: 64, ffn: 8192, vocab: 49152 }
/** Weights get std ≈ 0.02, the usual init scale, so activations stay finite through 16 layers. */
const WEIGHT_STD = 0.02
const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const TYPES = { q8_0: GGML_Q8_0, q4_0: GGML_Q4_0 } as const
/** llama.cpp's LLAMA_FTYPE_MOSTLY_* for general.file_type. */
const FILE_TYPE = { q8_0: 7, q4_0: 2 } as const

export function benchModelPath(target: keyof typeof TYPES): string {
  return join(root, 'models', `bench-llama-1B-random.${target.toUpperCase()}.gguf`)
}

/** An f16 bit pattern for a small positive number (normal range only, which is all we need). */
function f16Bits(x: number): number {
  const f = new Float32Array([x])
  const bits = new Uint32Array(f.buffer)[0]!
  const exp = ((bits >>> 23) & 0xff) - 127 + 15
  return (exp << 10) | ((bits >>> 13) & 0x3ff)
}

/** Fills quant blocks with random quants and a constant scale giving std ≈ WEIGHT_STD. */
function randomBlocks(type: number): OutTensor['fill'] {
  // Uniform int8 in [-128, 127] has std 73.9; Q4_0's (nibble − 8) in [-8, 7] has std 4.61.
  const scale = f16Bits(WEIGHT_STD / (type === GGML_Q8_0 ? 73.9 : 4.61))
  const block = BLOCK[type]!.bytes
  return (buf) => {
    randomFillSync(buf)
    for (let at = 0; at < buf.length; at += block) buf.writeUInt16LE(scale, at)
  }
}

const ones: OutTensor['fill'] = (buf) => {
  for (let at = 0; at < buf.length; at += 4) buf.writeFloatLE(1, at)
}

function tensors(weightType: number, embdType: number): OutTensor[] {
  const { hidden: h, layers, kvHeads, headDim, ffn, vocab } = SHAPE
  const w = (name: string, dims: number[], type = weightType): OutTensor => ({ name, dims, type, fill: randomBlocks(type) })
  const norm = (name: string): OutTensor => ({ name, dims: [h], type: GGML_F32, fill: ones })
  const out = [w('token_embd.weight', [h, vocab], embdType)]
  for (let l = 0; l < layers; l++) {
    const p = `blk.${l}.`
    out.push(norm(`${p}attn_norm.weight`), w(`${p}attn_q.weight`, [h, h]), w(`${p}attn_k.weight`, [h, kvHeads * headDim]))
    out.push(w(`${p}attn_v.weight`, [h, kvHeads * headDim]), w(`${p}attn_output.weight`, [h, h]), norm(`${p}ffn_norm.weight`))
    out.push(w(`${p}ffn_gate.weight`, [h, ffn]), w(`${p}ffn_up.weight`, [h, ffn]), w(`${p}ffn_down.weight`, [ffn, h]))
  }
  out.push(norm('output_norm.weight'))
  return out
}

/** SmolLM2's metadata with the shape keys replaced; identity keys that would mislead are dropped. */
function metadata(source: GgufHeader, target: keyof typeof TYPES): OutEntry[] {
  const { hidden, layers, heads, kvHeads, headDim, ffn } = SHAPE
  const replaced: OutEntry[] = [
    stringEntry('general.name', 'kvengine bench Llama 1B (random weights)'),
    u32Entry('llama.block_count', layers),
    u32Entry('llama.embedding_length', hidden),
    u32Entry('llama.feed_forward_length', ffn),
    u32Entry('llama.attention.head_count', heads),
    u32Entry('llama.attention.head_count_kv', kvHeads),
    u32Entry('llama.rope.dimension_count', headDim),
    u32Entry('general.file_type', FILE_TYPE[target]),
  ]
  const dropped = new Set(['general.finetune', 'general.basename', 'general.size_label', 'general.organization'])
  const kept = source.entries.filter((e) => !dropped.has(e.key) && !replaced.some((r) => r.key === e.key))
  return [...kept, ...replaced]
}

/** token_embd keeps the type our converter gave SmolLM2 for the same target, if we can write it. */
function embeddingType(target: keyof typeof TYPES): number {
  const converted = join(root, 'models', `SmolLM2-135M-Instruct.${target.toUpperCase()}.gguf`)
  if (!existsSync(converted)) return GGML_Q8_0
  const type = readGgufHeader(converted).tensors.find((t) => t.name === 'token_embd.weight')?.type
  return type !== undefined && type in BLOCK ? type : GGML_Q8_0
}

export function makeBenchModel(target: keyof typeof TYPES, source: string, out = benchModelPath(target)): string {
  if (existsSync(out)) return out
  const header = readGgufHeader(source)
  if (metadataValue(header, 'general.architecture') !== 'llama') throw new Error(`${source} is not a llama GGUF`)
  let shown = -1
  const list = tensors(TYPES[target], embeddingType(target))
  writeGgufStreaming(out, metadata(header, target), list, (f) => {
    const pct = Math.floor(f * 10) * 10
    if (pct !== shown) process.stderr.write(`make-bench-model ${target}: ${(shown = pct)}%\n`)
  })
  console.error(`make-bench-model: wrote ${out}`)
  return out
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [target, source = join(root, 'models', 'SmolLM2-135M-Instruct.Q8_0.gguf'), out] = process.argv.slice(2)
  if (target !== 'q8_0' && target !== 'q4_0') throw new Error('usage: make-bench-model.ts <q8_0|q4_0> [source.gguf] [out.gguf]')
  console.log(makeBenchModel(target, source, out))
}
