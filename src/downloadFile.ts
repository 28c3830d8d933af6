import type { Hash } from 'node:crypto'
import { createHash } from 'node:crypto'
import { open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises'
import { basename, dirname } from 'node:path'

import { checkDownloadUrl } from './checkDownloadUrl.js'
import type { DownloadProgress } from './DownloadProgress.js'
import { ensureWritableDir } from './ensureWritableDir.js'
import { fetchErrorText } from './fetchErrorText.js'
import { formatBytes } from './formatBytes.js'
import { hashFile } from './hashFile.js'
import { KvEngineError } from './KvEngineError.js'
import { stderrProgress } from './stderrProgress.js'

export interface DownloadFileOptions {
  /** The SHA-256 the file must have (hex). Without it, the one the source publishes, if any. */
  sha256?: string
  /** Whether a 64-hex `ETag` is the file's SHA-256, as on Hugging Face; `X-Linked-Etag` always is. */
  etagIsSha256?: boolean
  /** Called as bytes arrive. Default: a progress line on stderr; `null` for silence. */
  onProgress?: ((progress: DownloadProgress) => void) | null
  signal?: AbortSignal
}

/** What an interrupted download leaves beside its `.partial` file, to resume only the same file. */
interface Resume {
  url: string
  /** A strong ETag or a Last-Modified date: sent as If-Range, so a changed file comes back whole. */
  validator: string
  bytes: number
}

const MAX_REDIRECTS = 10
const SHA256_HEX = /^[0-9a-f]{64}$/

/**
 * Downloads `url` to `dest` and returns `dest`. Bytes go to `<dest>.partial` first; a rerun after a
 * dropped connection asks only for the rest (Range + If-Range), and the file is renamed into place
 * only once complete and, where a checksum is known, verified. A wrong checksum removes the file.
 */
export async function downloadFile(url: URL, dest: string, options: DownloadFileOptions = {}): Promise<string> {
  ensureWritableDir(dirname(dest))
  const partial = `${dest}.partial`
  const resume = await readResume(partial, url)
  const { res, published } = await openResponse(url, resume, options)
  if (res.status === 416 && resume) {
    // The partial file is as long as the whole, or longer: nothing to resume from.
    await res.body?.cancel()
    await rm(partial, { force: true })
    return downloadFile(url, dest, options)
  }
  const { offset, total } = startingPoint(res, resume, url)
  const validator = strongEtag(res) ?? res.headers.get('last-modified')
  await writeFile(`${partial}.json`, JSON.stringify({ url: url.href, validator }))
  const hash = offset > 0 ? await hashFile(partial) : createHash('sha256')
  const report = options.onProgress === undefined ? stderrProgress() : options.onProgress
  const started = performance.now()
  const progress = (received: number, done: boolean): void =>
    report?.({ file: basename(dest), received, total, resumedFrom: offset, done, bytesPerSecond: ((received - offset) * 1000) / Math.max(1, performance.now() - started) })
  const received = await receiveBody({ res, url, partial, offset, total, hash }, progress, options.signal)
  await verify(hash.digest('hex'), options.sha256?.toLowerCase() ?? published, url, partial)
  await rename(partial, dest)
  await rm(`${partial}.json`, { force: true })
  progress(received, true)
  return dest
}

/** The interrupted download worth resuming: only one from this URL whose server gave a validator. */
async function readResume(partial: string, url: URL): Promise<Resume | undefined> {
  const bytes = (await stat(partial).catch(() => undefined))?.size ?? 0
  // A missing or torn sidecar (a crash while writing it) just means starting over.
  const meta = await readFile(`${partial}.json`, 'utf8')
    .then((text) => JSON.parse(text) as Partial<Resume>)
    .catch(() => undefined)
  return bytes > 0 && meta?.url === url.href && typeof meta.validator === 'string' ? { url: meta.url, validator: meta.validator, bytes } : undefined
}

/** GETs `url`, following redirects by hand so that each hop is checked and the hub's checksum header, sent on the redirect, is seen. */
async function openResponse(url: URL, resume: Resume | undefined, options: DownloadFileOptions): Promise<{ res: Response; published?: string }> {
  // identity: a compressed body would make Content-Length and Range count other bytes than the file's.
  const headers: Record<string, string> = { 'accept-encoding': 'identity' }
  if (resume) Object.assign(headers, { range: `bytes=${resume.bytes}-`, 'if-range': resume.validator })
  let published: string | undefined
  let at = url
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    checkDownloadUrl(at)
    const res = await fetch(at, { headers, redirect: 'manual', signal: options.signal }).catch((cause: unknown) => {
      if (options.signal?.aborted) throw new KvEngineError('ABORTED', `download of ${url.href} aborted`, { cause })
      throw new KvEngineError('DOWNLOAD_FAILED', `cannot reach ${at.href}: ${fetchErrorText(cause)}; check the network and run again`, { cause })
    })
    published ??= publishedSha256(res, options.etagIsSha256 ?? false)
    const location = res.headers.get('location')
    if (res.status < 300 || res.status >= 400 || !location) return { res, published }
    await res.body?.cancel()
    at = new URL(location, at)
  }
  throw new KvEngineError('DOWNLOAD_FAILED', `${url.href} redirected more than ${MAX_REDIRECTS} times`)
}

/** Where the body starts in the file and the file's full size: a 206 continues the partial file, a 200 replaces it. */
function startingPoint(res: Response, resume: Resume | undefined, url: URL): { offset: number; total: number | undefined } {
  if (res.status === 206) {
    const m = /^bytes (\d+)-\d+\/(\d+|\*)$/.exec(res.headers.get('content-range') ?? '')
    if (!resume || !m || Number(m[1]) !== resume.bytes) {
      throw new KvEngineError('DOWNLOAD_FAILED', `${url.href} answered a range that was not asked for (Content-Range: ${res.headers.get('content-range')})`)
    }
    return { offset: resume.bytes, total: m[2] === '*' ? undefined : Number(m[2]) }
  }
  if (res.status !== 200 || !res.body) {
    throw new KvEngineError('DOWNLOAD_FAILED', `${url.href} answered HTTP ${res.status} ${res.statusText}${res.status === 404 ? ': no such file; check the name' : ''}`)
  }
  const length = res.headers.get('content-length')
  return { offset: 0, total: length === null ? undefined : Number(length) }
}

/** A response being written to the partial file: from `offset`, to `total` bytes when known. */
interface Transfer {
  res: Response
  url: URL
  partial: string
  offset: number
  total: number | undefined
  hash: Hash
}

/**
 * Appends the body to the partial file (or starts it anew at offset 0) and returns the file's
 * length after. A body that breaks off is reported as the end of the progress too, so that a
 * terminal's bar gets its line ended before the error is printed.
 */
async function receiveBody(transfer: Transfer, progress: (received: number, done: boolean) => void, signal?: AbortSignal): Promise<number> {
  const { res, url, partial, offset, total, hash } = transfer
  const file = await open(partial, offset > 0 ? 'a' : 'w')
  let received = offset
  let failure: KvEngineError | undefined
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      await file.write(chunk)
      hash.update(chunk)
      received += chunk.length
      progress(received, false)
    }
  } catch (cause) {
    failure = signal?.aborted
      ? new KvEngineError('ABORTED', `download of ${url.href} aborted; ${formatBytes(received)} kept in ${partial} for the next run`, { cause })
      : interrupted(transfer, received, fetchErrorText(cause), cause)
  } finally {
    await file.close()
  }
  if (!failure && total !== undefined && received !== total) failure = interrupted(transfer, received, 'the server ended the response early')
  if (failure) {
    progress(received, true)
    throw failure
  }
  return received
}

function interrupted(transfer: Pick<Transfer, 'url' | 'partial' | 'total'>, received: number, why: string, cause?: unknown): KvEngineError {
  const of = transfer.total === undefined ? '' : ` of ${formatBytes(transfer.total)}`
  return new KvEngineError(
    'DOWNLOAD_FAILED',
    `download of ${transfer.url.href} broke off after ${formatBytes(received)}${of} (${why}); the bytes are kept in ${transfer.partial}: run the same command again to resume`,
    { cause },
  )
}

async function verify(actual: string, expected: string | undefined, url: URL, partial: string): Promise<void> {
  if (expected === undefined || actual === expected) return
  await rm(partial, { force: true })
  await rm(`${partial}.json`, { force: true })
  throw new KvEngineError(
    'CHECKSUM_MISMATCH',
    `${url.href} downloaded with SHA-256 ${actual}, but its source publishes ${expected}; the file was removed. Run again to download it anew; if this repeats, the source or a proxy is serving a damaged file`,
  )
}

/** The SHA-256 a response vouches for: Hugging Face's X-Linked-Etag (on the redirect of an LFS file), or a 64-hex ETag where that is known to be one. */
function publishedSha256(res: Response, etagIsSha256: boolean): string | undefined {
  const candidates = [res.headers.get('x-linked-etag'), etagIsSha256 ? res.headers.get('etag') : null]
  return candidates.map((v) => v?.replace(/^W\//, '').replace(/"/g, '').toLowerCase()).find((v) => v !== undefined && SHA256_HEX.test(v))
}

/** If-Range needs a strong validator: weak ETags never match, so they would restart every time. */
function strongEtag(res: Response): string | null {
  const etag = res.headers.get('etag')
  return etag && !etag.startsWith('W/') ? etag : null
}
