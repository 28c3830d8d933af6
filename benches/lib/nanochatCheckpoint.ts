// A random-weight nanochat checkpoint of a given shape, in upstream's layout
// (base_checkpoints/<tag>/model_000001.safetensors beside meta_000001.json, tokenizer/tokenizer.pkl
// two levels up), with the tokenizer of the crate's nanochat fixture. Written once into an
// ignored cache folder; seeded, so every run reads the same weights.
import { closeSync, copyFileSync, existsSync, mkdirSync, openSync, renameSync, writeFileSync, writeSync } from 'node:fs'
import { join } from 'node:path'

import { xorshift32 } from '../../scripts/archModels.js'
import { ROOT } from './paths.js'

export interface NanochatShape {
  tag: string
  layers: number
  width: number
  heads: number
  kvHeads: number
  sequenceLen: number
}

/** nanochat's published d20 shape (speedrun.sh: depth 20, width 64 × depth, 128-wide heads). */
export const D20: NanochatShape = { tag: 'd20', layers: 20, width: 1280, heads: 10, kvHeads: 10, sequenceLen: 2048 }

const FIXTURE = join(ROOT, 'crate', 'tests', 'fixtures', 'nanochat')
/** The fixture tokenizer's vocabulary (its meta's vocab_size); nanochat pads tables to 64. */
const VOCAB = 300
const PADDED = 320

/** The checkpoint's directory, written first if it is not there. */
export function nanochatCheckpoint(shape: NanochatShape, log: (line: string) => void): string {
  const root = join(ROOT, '.cache', `nanochat-${shape.tag}`)
  const dir = join(root, 'base_checkpoints', shape.tag)
  if (existsSync(join(dir, 'meta_000001.json'))) return dir
  mkdirSync(join(root, 'tokenizer'), { recursive: true })
  mkdirSync(dir, { recursive: true })
  copyFileSync(join(FIXTURE, 'tokenizer', 'tokenizer.pkl'), join(root, 'tokenizer', 'tokenizer.pkl'))
  writeSafetensors(join(dir, 'model_000001.safetensors'), tensorsOf(shape), log)
  const config = { sequence_len: shape.sequenceLen, vocab_size: VOCAB, n_layer: shape.layers, n_head: shape.heads, n_kv_head: shape.kvHeads, n_embd: shape.width, window_pattern: 'SSSL' }
  writeFileSync(join(dir, 'meta_000001.json'), JSON.stringify({ step: 1, model_config: config, user_config: { note: 'kvengine benchmark, random weights' } }, null, 1))
  return dir
}

interface TensorSpec {
  name: string
  shape: number[]
  /** Half-width of the uniform distribution, or a constant fill. */
  scale: number | { fill: number }
}

function tensorsOf(s: NanochatShape): TensorSpec[] {
  const { layers, width: e } = s
  const kvd = (e / s.heads) * s.kvHeads
  const matrix = (name: string, rows: number, cols: number): TensorSpec => ({ name, shape: [rows, cols], scale: Math.sqrt(3 / cols) })
  const out: TensorSpec[] = [{ name: 'transformer.wte.weight', shape: [PADDED, e], scale: 1.7 }, matrix('lm_head.weight', PADDED, e)]
  for (let i = 0; i < layers; i++) {
    const p = `transformer.h.${i}`
    out.push(matrix(`${p}.attn.c_q.weight`, e, e), matrix(`${p}.attn.c_k.weight`, kvd, e), matrix(`${p}.attn.c_v.weight`, kvd, e), matrix(`${p}.attn.c_proj.weight`, e, e))
    out.push(matrix(`${p}.mlp.c_fc.weight`, 4 * e, e), matrix(`${p}.mlp.c_proj.weight`, e, 4 * e))
    // Value embeddings on alternate layers, the last one included (upstream's has_ve).
    if (i % 2 === (layers - 1) % 2) out.push({ name: `${p}.attn.ve_gate.weight`, shape: [s.kvHeads, 12], scale: 0.2 }, { name: `value_embeds.${i}.weight`, shape: [PADDED, kvd], scale: 1.7 })
  }
  out.push({ name: 'resid_lambdas', shape: [layers], scale: { fill: 1 } }, { name: 'x0_lambdas', shape: [layers], scale: { fill: 0.1 } })
  out.push({ name: 'smear_gate.weight', shape: [1, 24], scale: 0.2 }, { name: 'smear_lambda', shape: [1], scale: { fill: 0.5 } }, { name: 'backout_lambda', shape: [1], scale: { fill: 0.2 } })
  return out
}

function writeSafetensors(path: string, tensors: TensorSpec[], log: (line: string) => void): void {
  const header: Record<string, unknown> = {}
  let offset = 0
  for (const t of tensors) {
    const bytes = t.shape.reduce((a, b) => a * b, 1) * 4
    header[t.name] = { dtype: 'F32', shape: t.shape, data_offsets: [offset, offset + bytes] }
    offset += bytes
  }
  let json = JSON.stringify(header)
  json += ' '.repeat((8 - (json.length % 8)) % 8)
  const fd = openSync(`${path}.part`, 'w')
  const length = Buffer.alloc(8)
  length.writeBigUInt64LE(BigInt(json.length))
  writeSync(fd, length)
  writeSync(fd, json)
  const next = xorshift32(20)
  for (const [i, t] of tensors.entries()) {
    const values = new Float32Array(t.shape.reduce((a, b) => a * b, 1))
    if (typeof t.scale === 'number') for (let j = 0; j < values.length; j++) values[j] = (next() / 2 ** 32 - 0.5) * 2 * t.scale
    else values.fill(t.scale.fill)
    writeSync(fd, new Uint8Array(values.buffer))
    log(`\rwriting ${path}: ${i + 1}/${tensors.length} tensors`)
  }
  closeSync(fd)
  renameSync(`${path}.part`, path)
  log('\n')
}
