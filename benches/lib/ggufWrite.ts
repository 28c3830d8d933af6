// A streaming GGUF v3 writer for the benchmark's random-weight models: the header is built in
// memory (it is small), tensor data is produced chunk by chunk so a 1 GB model never sits in
// memory whole. Writes to a temporary file and renames it, so an interrupted run leaves nothing
// that looks like a finished model.
import { closeSync, openSync, renameSync, writeSync } from 'node:fs'

export const GGML_F32 = 0
export const GGML_Q4_0 = 2
export const GGML_Q8_0 = 8

/** Block size (elements) and bytes per block of the types this writer can produce. */
export const BLOCK: Record<number, { elems: number; bytes: number }> = {
  [GGML_F32]: { elems: 1, bytes: 4 },
  [GGML_Q4_0]: { elems: 32, bytes: 18 },
  [GGML_Q8_0]: { elems: 32, bytes: 34 },
}

export interface OutEntry {
  key: string
  /** Type id plus encoded value, as `ggufRead` keeps it. */
  raw: Buffer
}

export interface OutTensor {
  name: string
  /** GGUF order: the fastest-varying dimension first. */
  dims: number[]
  type: number
  /** Fills `buf` with the tensor's bytes from byte `at` on (`buf.length` is a whole number of blocks). */
  fill: (buf: Buffer, at: number) => void
}

const ALIGNMENT = 32
const CHUNK = 1 << 22

function stringBytes(s: string): Buffer {
  const b = Buffer.from(s, 'utf8')
  const len = Buffer.alloc(8)
  len.writeBigUInt64LE(BigInt(b.length))
  return Buffer.concat([len, b])
}

export function u32Entry(key: string, v: number): OutEntry {
  const raw = Buffer.alloc(8)
  raw.writeUInt32LE(4, 0)
  raw.writeUInt32LE(v, 4)
  return { key, raw }
}

export function f32Entry(key: string, v: number): OutEntry {
  const raw = Buffer.alloc(8)
  raw.writeUInt32LE(6, 0)
  raw.writeFloatLE(v, 4)
  return { key, raw }
}

export function stringEntry(key: string, s: string): OutEntry {
  const type = Buffer.alloc(4)
  type.writeUInt32LE(8)
  return { key, raw: Buffer.concat([type, stringBytes(s)]) }
}

export function tensorBytes(t: Pick<OutTensor, 'dims' | 'type'>): number {
  const { elems, bytes } = BLOCK[t.type]!
  const n = t.dims.reduce((a, b) => a * b, 1)
  if (n % elems !== 0) throw new Error(`tensor of ${n} elements does not divide into blocks of ${elems}`)
  return (n / elems) * bytes
}

const padTo = (n: number) => Math.ceil(n / ALIGNMENT) * ALIGNMENT

function header(entries: OutEntry[], tensors: OutTensor[]): Buffer {
  const parts: Buffer[] = [Buffer.from('GGUF', 'latin1')]
  const head = Buffer.alloc(20)
  head.writeUInt32LE(3, 0)
  head.writeBigUInt64LE(BigInt(tensors.length), 4)
  head.writeBigUInt64LE(BigInt(entries.length), 12)
  parts.push(head)
  for (const e of entries) parts.push(stringBytes(e.key), e.raw)
  let offset = 0
  for (const t of tensors) {
    const info = Buffer.alloc(4 + 8 * t.dims.length + 12)
    info.writeUInt32LE(t.dims.length, 0)
    t.dims.forEach((d, i) => info.writeBigUInt64LE(BigInt(d), 4 + 8 * i))
    info.writeUInt32LE(t.type, 4 + 8 * t.dims.length)
    info.writeBigUInt64LE(BigInt(offset), 8 + 8 * t.dims.length)
    parts.push(stringBytes(t.name), info)
    offset = padTo(offset + tensorBytes(t))
  }
  const out = Buffer.concat(parts)
  return Buffer.concat([out, Buffer.alloc(padTo(out.length) - out.length)])
}

/** Writes the file; `onProgress(fraction)` after each chunk. */
export function writeGgufStreaming(path: string, entries: OutEntry[], tensors: OutTensor[], onProgress: (f: number) => void): void {
  const total = tensors.reduce((a, t) => a + padTo(tensorBytes(t)), 0)
  const tmp = `${path}.partial`
  const fd = openSync(tmp, 'w')
  try {
    writeSync(fd, header(entries, tensors))
    let done = 0
    for (const t of tensors) {
      const bytes = tensorBytes(t)
      const block = BLOCK[t.type]!.bytes
      const chunk = Buffer.alloc(Math.floor(CHUNK / block) * block)
      for (let at = 0; at < bytes; at += chunk.length) {
        const part = chunk.subarray(0, Math.min(chunk.length, bytes - at))
        t.fill(part, at)
        writeSync(fd, part)
        onProgress((done + at + part.length) / total)
      }
      writeSync(fd, Buffer.alloc(padTo(bytes) - bytes))
      done += padTo(bytes)
    }
  } finally {
    closeSync(fd)
  }
  renameSync(tmp, path)
}
