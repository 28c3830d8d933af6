// Random-weight F32 GGUFs of the architectures kvengine runs beside Llama, each with the real
// layer shape of a published model (hidden size, heads, KV heads, head size, FFN width, RoPE base,
// norm epsilon, biases, norms and fused matrices) but one or two layers, a real vocabulary copied
// from another GGUF so llama.cpp can load the file (SmolLM2's 49152-token BPE, or LLaMA's 32k
// SentencePiece for the Llama 2 family) and an untied output matrix. The weights come from a
// seeded generator and plain arithmetic only, so every machine writes the same bytes: the committed llama.cpp
// fixture (scripts/make-arch-fixtures.ts) and the test (__test__/architectures.spec.ts) see one
// file. Cached under models/; idempotent.
import { existsSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

import { readGgufHeader } from '../benches/lib/ggufRead.js'
import { f32Entry, GGML_F32, stringEntry, u32Entry, writeGgufStreaming, type OutEntry, type OutTensor } from '../benches/lib/ggufWrite.js'

export interface ArchShape {
  arch: 'llama' | 'qwen2' | 'qwen3' | 'phi3' | 'gpt2'
  /** The published model whose layer this is. */
  like: string
  layers: number
  hidden: number
  heads: number
  kvHeads: number
  headDim: number
  ffn: number
  ropeBase: number
  eps: number
  qkvBias: boolean
  qkNorm: boolean
  /** Phi-3 stores Q, K and V as one matrix `attn_qkv`, gate and up as one `ffn_up`. */
  fused: boolean
  /** Trained context, where it is not the default 4096. */
  context?: number
  /** Llama 3.1/3.2's RoPE frequency scaling, written as llama.cpp's converter does: a
   * `rope_freqs.weight` of one divisor per frequency. */
  llama3Rope?: { factor: number; lowFreqFactor: number; highFreqFactor: number; originalContext: number }
  /** LLaMA's 32k SentencePiece vocabulary (llama.cpp's vocab-only GGUF, scripts/fetch-vocabs.mjs)
   * instead of SmolLM2's byte-level BPE. */
  spmVocab?: boolean
}

export const ARCH_SHAPES: Record<string, ArchShape> = {
  qwen2: { arch: 'qwen2', like: 'Qwen2.5-0.5B', layers: 2, hidden: 896, heads: 14, kvHeads: 2, headDim: 64, ffn: 4864, ropeBase: 1e6, eps: 1e-6, qkvBias: true, qkNorm: false, fused: false },
  qwen3: { arch: 'qwen3', like: 'Qwen3-0.6B', layers: 2, hidden: 1024, heads: 16, kvHeads: 8, headDim: 128, ffn: 3072, ropeBase: 1e6, eps: 1e-6, qkvBias: false, qkNorm: true, fused: false },
  // Llama 3.2 1B's metadata and layer shape; prompts run past its original 8192 positions.
  llama32: { arch: 'llama', like: 'Llama-3.2-1B', layers: 2, hidden: 2048, heads: 32, kvHeads: 8, headDim: 64, ffn: 8192, ropeBase: 500000, eps: 1e-5, qkvBias: false, qkNorm: false, fused: false, context: 131072, llama3Rope: { factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalContext: 8192 } },
  // TinyLlama's layer shape with the Llama 2 SentencePiece vocabulary it shares with Llama 2 and
  // Mistral 7B v0.1, copied by our GGUF writer.
  tinyllama: { arch: 'llama', like: 'TinyLlama-1.1B', layers: 2, hidden: 2048, heads: 32, kvHeads: 4, headDim: 64, ffn: 5632, ropeBase: 1e4, eps: 1e-5, qkvBias: false, qkNorm: false, fused: false, context: 2048, spmVocab: true },
  // One layer: a Phi-3-mini layer is 113M parameters, 450 MB in F32.
  // GPT-2's block: learned positions, LayerNorm and a bias on every projection and norm, Q/K/V
  // fused as `attn_qkv`, a plain GELU MLP.
  gpt2: { arch: 'gpt2', like: 'GPT-2 (124M)', layers: 2, hidden: 768, heads: 12, kvHeads: 12, headDim: 64, ffn: 3072, ropeBase: 1e4, eps: 1e-5, qkvBias: true, qkNorm: false, fused: true, context: 1024 },
  phi3: { arch: 'phi3', like: 'Phi-3-mini-4k', layers: 1, hidden: 3072, heads: 32, kvHeads: 32, headDim: 96, ffn: 8192, ropeBase: 1e4, eps: 1e-5, qkvBias: false, qkNorm: false, fused: true },
}

const CONTEXT = 4096
const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const SPM_VOCAB = join(root, 'models', 'vocab', 'ggml-vocab-llama-spm.gguf')

export const archModelPath = (name: string, type = 'F32') => join(root, 'models', `random-${name}.${type}.gguf`)

/** A seeded stream of 32-bit integers (xorshift32): integer steps only, identical everywhere. */
export function xorshift32(seed: number): () => number {
  let x = seed >>> 0 || 1
  return () => {
    x ^= x << 13
    x >>>= 0
    x ^= x >>> 17
    x ^= x << 5
    x >>>= 0
    return x
  }
}

/** Uniform numbers in [-0.5, 0.5) from `xorshift32`. */
function uniforms(seed: number): () => number {
  const next = xorshift32(seed)
  return () => next() / 4294967296 - 0.5
}

/** Uniform weights with the given standard deviation around `mean`, each tensor its own seed. */
function uniformFill(seed: number, std: number, mean = 0): OutTensor['fill'] {
  const next = uniforms(seed)
  const width = std * Math.sqrt(12)
  return (buf) => {
    for (let at = 0; at < buf.length; at += 4) buf.writeFloatLE(mean + width * next(), at)
  }
}

/** Per frequency of RoPE, the divisor Llama 3's scaling applies: none for short wavelengths,
 * `factor` for long ones, a smooth blend between (Meta's reference formula). */
export function llama3RopeDivisors(s: ArchShape): number[] {
  const r = s.llama3Rope!
  const [lowWavelength, highWavelength] = [r.originalContext / r.lowFreqFactor, r.originalContext / r.highFreqFactor]
  return Array.from({ length: s.headDim / 2 }, (_, i) => {
    const wavelength = (2 * Math.PI) / s.ropeBase ** (-(2 * i) / s.headDim)
    if (wavelength < highWavelength) return 1
    if (wavelength > lowWavelength) return r.factor
    const smooth = (r.originalContext / wavelength - r.lowFreqFactor) / (r.highFreqFactor - r.lowFreqFactor)
    return 1 / ((1 - smooth) / r.factor + smooth)
  })
}

function tensors(s: ArchShape, vocab: number): OutTensor[] {
  let seed = 0x9e3779b9
  const t = (name: string, dims: number[], std: number, mean = 0): OutTensor => ({ name, dims, type: GGML_F32, fill: uniformFill((seed = (seed + 0x6d2b79f5) >>> 0), std, mean) })
  const q = s.heads * s.headDim
  const kv = s.kvHeads * s.headDim
  // An output matrix of its own (the published models tie it to the embedding): with tied random
  // weights each token's own row scores highest and greedy runs repeat one token. Rows of std
  // 0.1 spread the logits over a few units, so near-ties are rare and greedy runs test the
  // arithmetic rather than coin flips. Projections get 1/sqrt(fan-in).
  const out = [t('token_embd.weight', [s.hidden, vocab], 0.1), t('output.weight', [s.hidden, vocab], 0.1)]
  if (s.arch === 'gpt2') return out.concat(gpt2Tensors(s, t))
  for (let l = 0; l < s.layers; l++) {
    const p = `blk.${l}.`
    out.push(t(`${p}attn_norm.weight`, [s.hidden], 0.1, 1))
    if (s.fused) out.push(t(`${p}attn_qkv.weight`, [s.hidden, q + 2 * kv], 1 / Math.sqrt(s.hidden)))
    else {
      out.push(t(`${p}attn_q.weight`, [s.hidden, q], 1 / Math.sqrt(s.hidden)))
      out.push(t(`${p}attn_k.weight`, [s.hidden, kv], 1 / Math.sqrt(s.hidden)))
      out.push(t(`${p}attn_v.weight`, [s.hidden, kv], 1 / Math.sqrt(s.hidden)))
    }
    if (s.qkvBias) out.push(t(`${p}attn_q.bias`, [q], 0.1), t(`${p}attn_k.bias`, [kv], 0.1), t(`${p}attn_v.bias`, [kv], 0.1))
    if (s.qkNorm) out.push(t(`${p}attn_q_norm.weight`, [s.headDim], 0.1, 1), t(`${p}attn_k_norm.weight`, [s.headDim], 0.1, 1))
    out.push(t(`${p}attn_output.weight`, [q, s.hidden], 1 / Math.sqrt(q)))
    out.push(t(`${p}ffn_norm.weight`, [s.hidden], 0.1, 1))
    if (s.fused) out.push(t(`${p}ffn_up.weight`, [s.hidden, 2 * s.ffn], 1 / Math.sqrt(s.hidden)))
    else out.push(t(`${p}ffn_gate.weight`, [s.hidden, s.ffn], 1 / Math.sqrt(s.hidden)), t(`${p}ffn_up.weight`, [s.hidden, s.ffn], 1 / Math.sqrt(s.hidden)))
    out.push(t(`${p}ffn_down.weight`, [s.ffn, s.hidden], 1 / Math.sqrt(s.ffn)))
  }
  out.push(t('output_norm.weight', [s.hidden], 0.1, 1))
  if (s.llama3Rope) {
    const divisors = llama3RopeDivisors(s)
    out.push({ name: 'rope_freqs.weight', dims: [divisors.length], type: GGML_F32, fill: (buf) => divisors.forEach((d, i) => buf.writeFloatLE(d, 4 * i)) })
  }
  return out
}

/** GPT-2's tensors after the embedding and output matrices, as llama.cpp's converter names them. */
function gpt2Tensors(s: ArchShape, t: (name: string, dims: number[], std: number, mean?: number) => OutTensor): OutTensor[] {
  const h = s.hidden
  const norm = (name: string) => [t(`${name}.weight`, [h], 0.1, 1), t(`${name}.bias`, [h], 0.1)]
  const linear = (name: string, inp: number, out: number) => [t(`${name}.weight`, [inp, out], 1 / Math.sqrt(inp)), t(`${name}.bias`, [out], 0.1)]
  const out = [t('position_embd.weight', [h, s.context ?? CONTEXT], 0.1)]
  for (let l = 0; l < s.layers; l++) {
    const p = `blk.${l}.`
    out.push(...norm(`${p}attn_norm`), ...linear(`${p}attn_qkv`, h, 3 * h), ...linear(`${p}attn_output`, h, h))
    out.push(...norm(`${p}ffn_norm`), ...linear(`${p}ffn_up`, h, s.ffn), ...linear(`${p}ffn_down`, s.ffn, h))
  }
  return out.concat(norm('output_norm'))
}

function metadata(s: ArchShape, tokenizer: OutEntry[]): OutEntry[] {
  const a = s.arch
  return [
    stringEntry('general.architecture', a),
    // Not the published name: llama.cpp keys per-model tokenizer fixes on general.name ('phi3').
    stringEntry('general.name', 'kvengine random weights'),
    u32Entry('general.file_type', 0),
    u32Entry(`${a}.block_count`, s.layers),
    u32Entry(`${a}.context_length`, s.context ?? CONTEXT),
    u32Entry(`${a}.embedding_length`, s.hidden),
    u32Entry(`${a}.feed_forward_length`, s.ffn),
    u32Entry(`${a}.attention.head_count`, s.heads),
    u32Entry(`${a}.attention.head_count_kv`, s.kvHeads),
    u32Entry(`${a}.attention.key_length`, s.headDim),
    u32Entry(`${a}.attention.value_length`, s.headDim),
    f32Entry(`${a}.rope.freq_base`, s.ropeBase),
    f32Entry(`${a}.attention.${a === 'gpt2' ? 'layer_norm_epsilon' : 'layer_norm_rms_epsilon'}`, s.eps),
    // As Llama GGUFs carry it (the other families' files were made before we wrote it).
    ...(a === 'llama' ? [u32Entry(`${a}.rope.dimension_count`, s.headDim)] : []),
    ...tokenizer,
  ]
}

/** The tokenizer entries `shape` copies (from `bpeSource`, SmolLM2's GGUF, or for shapes with
 * `spmVocab` from LLaMA's vocab-only GGUF), and the vocabulary's size. */
export function tokenizerOf(shape: ArchShape, bpeSource: string): { entries: OutEntry[]; vocab: number } {
  const source = shape.spmVocab ? SPM_VOCAB : bpeSource
  const entries = readGgufHeader(source).entries.filter((e) => e.key.startsWith('tokenizer.') && e.key !== 'tokenizer.chat_template')
  const tokens = entries.find((e) => e.key === 'tokenizer.ggml.tokens')?.value
  if (!Array.isArray(tokens)) throw new Error(`${source} has no tokenizer.ggml.tokens`)
  return { entries, vocab: tokens.length }
}

/** Writes (once) and returns the F32 file of `name`, tokenizer copied from `bpeSource` (SmolLM2's
 * GGUF) or, for shapes with `spmVocab`, from LLaMA's vocab-only GGUF. */
export function makeArchModel(name: string, bpeSource: string): string {
  const out = archModelPath(name)
  if (existsSync(out)) return out
  const shape = ARCH_SHAPES[name]
  if (!shape) throw new Error(`no random model named ${name}; known: ${Object.keys(ARCH_SHAPES).join(', ')}`)
  const { entries, vocab } = tokenizerOf(shape, bpeSource)
  let shown = -1
  writeGgufStreaming(out, metadata(shape, entries), tensors(shape, vocab), (f) => {
    const pct = Math.floor(f * 4) * 25
    if (pct !== shown) process.stderr.write(`random ${name}: ${(shown = pct)}%\n`)
  })
  return out
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [bpeSource, ...names] = process.argv.slice(2)
  if (!bpeSource) throw new Error('usage: archModels.ts <smollm2.gguf> [name ...]')
  for (const name of names.length ? names : Object.keys(ARCH_SHAPES)) console.log(makeArchModel(name, bpeSource))
}
