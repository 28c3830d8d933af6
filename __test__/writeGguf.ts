// A minimal GGUF v3 writer for test models: F32 tensors and the metadata kinds our loader reads.
import { writeFileSync } from 'node:fs'

export type GgufMetadata = [key: string, kind: 'string' | 'u32' | 'f32' | 'bool' | 'strings' | 'i32s', value: string | number | boolean | string[] | number[]][]

/** A tensor in Hugging Face layout: `dims` row-major, e.g. [rows, cols] (GGUF stores them reversed). */
export interface GgufTensor {
  name: string
  dims: number[]
  data: Float32Array
}

const ALIGNMENT = 32
const TYPE = { u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9 } as const

/** Little-endian byte sink that grows as it is written. */
class Bytes {
  #chunks: Buffer[] = []
  length = 0

  push(buf: Buffer): void {
    this.#chunks.push(buf)
    this.length += buf.length
  }

  u32(v: number): void {
    const b = Buffer.alloc(4)
    b.writeUInt32LE(v)
    this.push(b)
  }

  i32(v: number): void {
    const b = Buffer.alloc(4)
    b.writeInt32LE(v)
    this.push(b)
  }

  u64(v: number): void {
    const b = Buffer.alloc(8)
    b.writeBigUInt64LE(BigInt(v))
    this.push(b)
  }

  f32(v: number): void {
    const b = Buffer.alloc(4)
    b.writeFloatLE(v)
    this.push(b)
  }

  string(s: string): void {
    const b = Buffer.from(s, 'utf8')
    this.u64(b.length)
    this.push(b)
  }

  pad(): void {
    this.push(Buffer.alloc((ALIGNMENT - (this.length % ALIGNMENT)) % ALIGNMENT))
  }

  concat(): Buffer {
    return Buffer.concat(this.#chunks)
  }
}

function writeValue(out: Bytes, kind: GgufMetadata[number][1], value: GgufMetadata[number][2]): void {
  switch (kind) {
    case 'string': return out.u32(TYPE.string), out.string(value as string)
    case 'u32': return out.u32(TYPE.u32), out.u32(value as number)
    case 'f32': return out.u32(TYPE.f32), out.f32(value as number)
    case 'bool': return out.u32(TYPE.bool), out.push(Buffer.of(value ? 1 : 0))
    case 'strings':
      out.u32(TYPE.array)
      out.u32(TYPE.string)
      out.u64((value as string[]).length)
      return (value as string[]).forEach((s) => out.string(s))
    case 'i32s':
      out.u32(TYPE.array)
      out.u32(TYPE.i32)
      out.u64((value as number[]).length)
      return (value as number[]).forEach((v) => out.i32(v))
  }
}

export function writeGguf(path: string, metadata: GgufMetadata, tensors: GgufTensor[]): void {
  const out = new Bytes()
  out.push(Buffer.from('GGUF', 'latin1'))
  out.u32(3)
  out.u64(tensors.length)
  out.u64(metadata.length)
  for (const [key, kind, value] of metadata) {
    out.string(key)
    writeValue(out, kind, value)
  }
  let offset = 0
  for (const t of tensors) {
    out.string(t.name)
    out.u32(t.dims.length)
    for (const d of [...t.dims].reverse()) out.u64(d)
    out.u32(0) // GGML_TYPE_F32
    out.u64(offset)
    offset += Math.ceil(t.data.byteLength / ALIGNMENT) * ALIGNMENT
  }
  out.pad()
  for (const t of tensors) {
    out.push(Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength))
    out.pad()
  }
  writeFileSync(path, out.concat())
}
