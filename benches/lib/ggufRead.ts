// Reads a GGUF v2/v3 header: metadata (each value decoded, and also kept as its raw bytes so a
// writer can copy the tokenizer verbatim) and the tensor table. Reads only the header bytes.
import { closeSync, fstatSync, openSync, readSync } from 'node:fs'

export interface GgufEntry {
  key: string
  value: unknown
  /** The value's type id and encoding exactly as in the file, ready to copy. */
  raw: Buffer
}

export interface GgufTensorInfo {
  name: string
  /** GGUF order: the fastest-varying dimension first. */
  dims: number[]
  type: number
  /** Bytes from the start of the data section. */
  offset: number
}

export interface GgufHeader {
  entries: GgufEntry[]
  tensors: GgufTensorInfo[]
  /** Where the data section starts in the file. */
  dataStart: number
  alignment: number
  fileBytes: number
}

/** Element sizes of the scalar metadata types, by GGUF type id. */
const SCALAR_BYTES: Record<number, number> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 }
const STRING = 8
const ARRAY = 9

/** A cursor over a buffer that grows by reading more of the file on demand. */
class Reader {
  #fd: number
  buf = Buffer.alloc(0)
  pos = 0

  constructor(fd: number) {
    this.#fd = fd
  }

  need(n: number): void {
    if (this.pos + n <= this.buf.length) return
    const more = Buffer.alloc(Math.max(n, 1 << 20))
    const got = readSync(this.#fd, more, 0, more.length, this.buf.length)
    this.buf = Buffer.concat([this.buf, more.subarray(0, got)])
    if (this.pos + n > this.buf.length) throw new Error('GGUF header is truncated')
  }

  u32(): number {
    this.need(4)
    return this.buf.readUInt32LE((this.pos += 4) - 4)
  }

  u64(): number {
    this.need(8)
    return Number(this.buf.readBigUInt64LE((this.pos += 8) - 8))
  }

  string(): string {
    const n = this.u64()
    this.need(n)
    return this.buf.toString('utf8', this.pos, (this.pos += n))
  }

  scalar(type: number): unknown {
    const n = SCALAR_BYTES[type]
    if (n === undefined) throw new Error(`unknown GGUF metadata type ${type}`)
    this.need(n)
    const at = (this.pos += n) - n
    const b = this.buf
    switch (type) {
      case 0: return b.readUInt8(at)
      case 1: return b.readInt8(at)
      case 2: return b.readUInt16LE(at)
      case 3: return b.readInt16LE(at)
      case 4: return b.readUInt32LE(at)
      case 5: return b.readInt32LE(at)
      case 6: return b.readFloatLE(at)
      case 7: return b.readUInt8(at) !== 0
      case 10: return b.readBigUInt64LE(at)
      case 11: return b.readBigInt64LE(at)
      default: return b.readDoubleLE(at)
    }
  }

  value(type: number): unknown {
    if (type === STRING) return this.string()
    if (type !== ARRAY) return this.scalar(type)
    const inner = this.u32()
    const n = this.u64()
    return Array.from({ length: n }, () => this.value(inner))
  }
}

export function readGgufHeader(path: string): GgufHeader {
  const fd = openSync(path, 'r')
  try {
    const r = new Reader(fd)
    r.need(4)
    if (r.buf.toString('latin1', 0, 4) !== 'GGUF') throw new Error(`${path} is not a GGUF file`)
    r.pos = 4
    const version = r.u32()
    // v2 and v3 share the little-endian layout (our converter writes v2, llama.cpp v3).
    if (version !== 2 && version !== 3) throw new Error(`${path}: GGUF version ${version}, expected 2 or 3`)
    const tensorCount = r.u64()
    const entryCount = r.u64()
    const entries: GgufEntry[] = []
    for (let i = 0; i < entryCount; i++) {
      const key = r.string()
      const start = r.pos
      const value = r.value(r.u32())
      entries.push({ key, value, raw: Buffer.from(r.buf.subarray(start, r.pos)) })
    }
    const tensors: GgufTensorInfo[] = []
    for (let i = 0; i < tensorCount; i++) {
      const name = r.string()
      const dims = Array.from({ length: r.u32() }, () => r.u64())
      tensors.push({ name, dims, type: r.u32(), offset: r.u64() })
    }
    const alignment = Number(entries.find((e) => e.key === 'general.alignment')?.value ?? 32)
    const dataStart = Math.ceil(r.pos / alignment) * alignment
    return { entries, tensors, dataStart, alignment, fileBytes: fstatSync(fd).size }
  } finally {
    closeSync(fd)
  }
}

export function metadataValue(header: GgufHeader, key: string): unknown {
  return header.entries.find((e) => e.key === key)?.value
}
