import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

import { KvEngineError } from './KvEngineError.js'

/**
 * Creates `dir` if needed and proves it takes a file, so that a download fails before its first
 * request rather than after minutes of transfer. A real write, not access(W_OK): root passes that
 * check on read-only mounts, and it says nothing about a full disk's inodes.
 */
export function ensureWritableDir(dir: string): void {
  const probe = join(dir, `.kvengine-write-test-${process.pid}`)
  try {
    mkdirSync(dir, { recursive: true })
    writeFileSync(probe, '')
    rmSync(probe)
  } catch (cause) {
    throw new KvEngineError(
      'NOT_WRITABLE',
      `cannot write to the model cache folder ${dir} (${(cause as Error).message}); set KVENGINE_MODELS_DIR to a folder you can write to`,
      { cause },
    )
  }
}
