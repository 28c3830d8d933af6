// One pinned download for the build and fixture scripts (which run before dist/ exists, so they
// cannot use src/downloadFile.ts): streamed to disk, then refused unless its SHA-256 matches.
import { createHash } from 'node:crypto'
import { createReadStream, createWriteStream, renameSync, rmSync } from 'node:fs'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'

/** Downloads `url` to `dest` (written under a temporary name first) and checks its SHA-256. */
export async function downloadVerified(url, sha256, dest) {
  const partial = `${dest}.partial`
  const response = await fetch(url)
  if (!response.ok || !response.body) throw new Error(`GET ${url}: HTTP ${response.status}`)
  await pipeline(Readable.fromWeb(response.body), createWriteStream(partial))
  const hash = createHash('sha256')
  await pipeline(createReadStream(partial), hash)
  const digest = hash.digest('hex')
  if (digest !== sha256) {
    rmSync(partial, { force: true })
    throw new Error(`checksum mismatch for ${url}: got ${digest}, expected ${sha256}`)
  }
  renameSync(partial, dest)
}
