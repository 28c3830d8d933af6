// Extracts a zip archive (a Python wheel) with Node alone: the central directory names each
// entry, its local header finds the data, zlib inflates it. Stored and deflated entries only, and
// no zip64 (over 65535 entries or 4 GiB), which wheels of the tools we fetch do not use.
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join, normalize } from 'node:path'
import { inflateRawSync } from 'node:zlib'

const END_OF_DIRECTORY = 0x06054b50
const DIRECTORY_ENTRY = 0x02014b50

export function unzip(archive, dest) {
  const zip = readFileSync(archive)
  const end = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]))
  if (end < 0 || zip.readUInt32LE(end) !== END_OF_DIRECTORY) throw new Error(`${archive} is not a zip archive`)
  const count = zip.readUInt16LE(end + 10)
  let at = zip.readUInt32LE(end + 16)
  for (let i = 0; i < count; i++) {
    if (zip.readUInt32LE(at) !== DIRECTORY_ENTRY) throw new Error(`${archive}: corrupt central directory`)
    const method = zip.readUInt16LE(at + 10)
    const size = zip.readUInt32LE(at + 20)
    const [nameLength, extraLength, commentLength] = [28, 30, 32].map((o) => zip.readUInt16LE(at + o))
    const mode = zip.readUInt32LE(at + 38) >>> 16
    const local = zip.readUInt32LE(at + 42)
    const name = zip.toString('utf8', at + 46, at + 46 + nameLength)
    at += 46 + nameLength + extraLength + commentLength
    if (name.endsWith('/')) continue
    const path = join(dest, normalize(name))
    if (!path.startsWith(dest)) throw new Error(`${archive}: entry ${name} leaves the destination`)
    const start = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28)
    const data = zip.subarray(start, start + size)
    if (method !== 0 && method !== 8) throw new Error(`${archive}: entry ${name} uses compression method ${method}`)
    mkdirSync(dirname(path), { recursive: true })
    writeFileSync(path, method === 8 ? inflateRawSync(data) : data)
    if (mode & 0o111) chmodSync(path, mode & 0o777)
  }
}
