// A one-layer Llama GGUF whose greedy continuation of token t is a chosen successor(t), so a
// test can script what the real forward pass generates. Attention and MLP outputs are zero, so
// the final hidden state is the token's own one-hot embedding, and the LM head row of each
// successor reads that coordinate: logit sqrt(hidden) ≈ 17 for the successor, 0 elsewhere.
import { join } from 'node:path'

import { writeGguf, type GgufTensor } from './writeGguf.js'

/** GPT-2's printable spelling of each byte, as byte-level BPE vocabularies store them. */
function byteTokens(): string[] {
  const printable = (b: number) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff)
  let next = 256
  return Array.from({ length: 256 }, (_, b) => String.fromCodePoint(printable(b) ? b : next++))
}

export interface SuccessorModel {
  path: string
  /** Token id by text: single characters for the byte tokens, names for the control tokens. */
  id: (text: string) => number
}

/**
 * Writes the model into `dir`. The vocabulary is the 256 bytes (no merges: one token per byte)
 * then `controls` as control tokens; the first control is BOS, the second EOS. Tokens missing
 * from `successors` continue with `fallback`.
 */
export function writeSuccessorModel(dir: string, controls: string[], successors: Record<string, string>, fallback: string): SuccessorModel {
  const tokens = [...byteTokens(), ...controls]
  const vocab = tokens.length
  const id = (text: string) => {
    const i = tokens.indexOf(text)
    if (i < 0) throw new Error(`no token ${JSON.stringify(text)} in the successor model`)
    return i
  }
  const heads = 4
  const hidden = Math.ceil(vocab / (2 * heads)) * 2 * heads
  const ffn = 8
  const zeros = (...dims: number[]): GgufTensor['data'] => new Float32Array(dims.reduce((a, b) => a * b))
  const ones = () => new Float32Array(hidden).fill(1)
  const embedding = zeros(vocab, hidden)
  const head = zeros(vocab, hidden)
  for (let t = 0; t < vocab; t++) {
    embedding[t * hidden + t] = 1
    head[id(successors[tokens[t]] ?? fallback) * hidden + t] = 1
  }
  const tensors: GgufTensor[] = [
    { name: 'token_embd.weight', dims: [vocab, hidden], data: embedding },
    { name: 'blk.0.attn_norm.weight', dims: [hidden], data: ones() },
    { name: 'blk.0.ffn_norm.weight', dims: [hidden], data: ones() },
    ...['attn_q', 'attn_k', 'attn_v', 'attn_output'].map((n) => ({ name: `blk.0.${n}.weight`, dims: [hidden, hidden], data: zeros(hidden, hidden) })),
    { name: 'blk.0.ffn_gate.weight', dims: [ffn, hidden], data: zeros(ffn, hidden) },
    { name: 'blk.0.ffn_up.weight', dims: [ffn, hidden], data: zeros(ffn, hidden) },
    { name: 'blk.0.ffn_down.weight', dims: [hidden, ffn], data: zeros(hidden, ffn) },
    { name: 'output_norm.weight', dims: [hidden], data: ones() },
    { name: 'output.weight', dims: [vocab, hidden], data: head },
  ]
  const path = join(dir, 'successor.gguf')
  writeGguf(
    path,
    [
      ['general.architecture', 'string', 'llama'],
      ['llama.context_length', 'u32', 256],
      ['llama.embedding_length', 'u32', hidden],
      ['llama.block_count', 'u32', 1],
      ['llama.feed_forward_length', 'u32', ffn],
      ['llama.attention.head_count', 'u32', heads],
      ['llama.attention.head_count_kv', 'u32', heads],
      ['llama.attention.layer_norm_rms_epsilon', 'f32', 1e-5],
      ['llama.rope.freq_base', 'f32', 10000],
      ['tokenizer.ggml.model', 'string', 'gpt2'],
      ['tokenizer.ggml.pre', 'string', 'gpt2'],
      ['tokenizer.ggml.tokens', 'strings', tokens],
      ['tokenizer.ggml.token_type', 'i32s', tokens.map((_, i) => (i < 256 ? 1 : 3))],
      ['tokenizer.ggml.merges', 'strings', []],
      ['tokenizer.ggml.bos_token_id', 'u32', 256],
      ['tokenizer.ggml.eos_token_id', 'u32', 257],
      ['tokenizer.ggml.add_bos_token', 'bool', false],
    ],
    tensors,
  )
  return { path, id }
}
