import { createHash, type Hash } from 'node:crypto'
import { createReadStream } from 'node:fs'

/** Feeds a file's bytes into `hash` (a new SHA-256 by default) and returns it, not yet digested. */
export async function hashFile(path: string, hash: Hash = createHash('sha256')): Promise<Hash> {
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer)
  return hash
}
