import { createHash } from 'node:crypto'
import { existsSync, readdirSync } from 'node:fs'
import { basename, join, relative } from 'node:path'

import { checkDownloadUrl } from './checkDownloadUrl.js'
import { downloadFile, type DownloadFileOptions } from './downloadFile.js'
import { ensureWritableDir } from './ensureWritableDir.js'
import { fetchErrorText } from './fetchErrorText.js'
import { hfEndpoint } from './hfEndpoint.js'
import { KvEngineError } from './KvEngineError.js'
import type { ModelSource } from './ModelSource.js'
import { modelsDir } from './modelsDir.js'
import { parseModelSource } from './parseModelSource.js'
import { pickQuantFile } from './pickQuantFile.js'

export interface DownloadModelOptions {
  /** Called as bytes arrive. Default: a progress line on stderr; `null` for silence. */
  onProgress?: DownloadFileOptions['onProgress']
  /** Aborts the download; the partial file stays, to be resumed by the next call. */
  signal?: AbortSignal
}

/**
 * Returns the local path of a model given as `hf:<owner>/<repo>/<file.gguf>`,
 * `hf:<owner>/<repo>:<quant>` or an https:// URL, downloading it into the per-user cache
 * (modelsDir()) unless it is there already: a cached file is used with no network at all.
 */
export async function downloadModel(spec: string, options: DownloadModelOptions = {}): Promise<string> {
  const source = typeof spec === 'string' ? parseModelSource(spec) : undefined
  if (!source) throw new KvEngineError('INVALID_ARGUMENT', `downloadModel() takes hf:<owner>/<repo>/<file.gguf>, hf:<owner>/<repo>:<quant> or an https:// URL, got ${JSON.stringify(spec)}`)
  const root = modelsDir()
  if (source.kind === 'url') checkDownloadUrl(source.url)
  const cached = cachedPath(root, source)
  if (cached && existsSync(cached)) return cached
  ensureWritableDir(root)
  if (source.kind === 'url') return downloadFile(source.url, urlCachePath(root, source.url), options)
  const endpoint = hfEndpoint()
  const file = source.file ?? (await hubQuantFile(endpoint, source))
  const url = new URL(`${source.owner}/${source.repo}/resolve/main/${file.split('/').map(encodeURIComponent).join('/')}`, endpoint)
  return downloadFile(url, join(hfCacheDir(root, source), file), { ...options, etagIsSha256: true })
}

/** Where `source` lies in the cache when it has been downloaded, if that can be told without the network. */
function cachedPath(root: string, source: ModelSource): string | undefined {
  if (source.kind === 'url') return urlCachePath(root, source.url)
  const dir = hfCacheDir(root, source)
  if (source.file !== undefined) return join(dir, source.file)
  // Only complete files carry the bare .gguf name (downloads land as .partial), so any match is whole.
  const files = existsSync(dir) ? readdirSync(dir, { recursive: true, encoding: 'utf8' }) : []
  const file = pickQuantFile(files, source.quant, `the cache folder ${dir}`)
  return file && join(dir, file)
}

function hfCacheDir(root: string, source: { owner: string; repo: string }): string {
  return join(root, 'hf', source.owner, source.repo)
}

/** URLs are cached under a hash of the whole URL, so two files of one name from different places never meet. */
function urlCachePath(root: string, url: URL): string {
  const name = basename(decodeURIComponent(url.pathname)).replace(/[^A-Za-z0-9._-]/g, '_')
  const id = createHash('sha256').update(url.href).digest('hex').slice(0, 16)
  return join(root, 'url', id, name && !name.startsWith('.') ? name : 'model.gguf')
}

/** Asks the hub which files the repository holds and picks the one for the quant. */
async function hubQuantFile(endpoint: URL, source: { owner: string; repo: string; quant: string }): Promise<string> {
  const api = new URL(`api/models/${source.owner}/${source.repo}`, endpoint)
  checkDownloadUrl(api, 'Hugging Face endpoint')
  const res = await fetch(api).catch((cause: unknown) => {
    throw new KvEngineError('DOWNLOAD_FAILED', `cannot reach ${api.href} (${fetchErrorText(cause)}); check the network, or set KVENGINE_HF_ENDPOINT to a reachable mirror`, { cause })
  })
  const name = `${source.owner}/${source.repo}`
  if (res.status === 401 || res.status === 404) throw new KvEngineError('NOT_FOUND', `Hugging Face has no public repository ${name} (HTTP ${res.status}); check the name`)
  if (!res.ok) throw new KvEngineError('DOWNLOAD_FAILED', `${api.href} answered HTTP ${res.status}; run again later`)
  const body = (await res.json()) as { siblings?: { rfilename?: unknown }[] }
  const files = (body.siblings ?? []).map((s) => s.rfilename).filter((f): f is string => typeof f === 'string')
  const file = pickQuantFile(files, source.quant, name)
  if (file === undefined) {
    const ggufs = files.filter((f) => f.toLowerCase().endsWith('.gguf'))
    throw new KvEngineError('NOT_FOUND', `${name} has no .gguf file for quant ${source.quant}; its .gguf files: ${ggufs.join(', ') || 'none'}`)
  }
  if (relative(hfCacheDir('/', source), join(hfCacheDir('/', source), file)).startsWith('..')) {
    throw new KvEngineError('INVALID_ARGUMENT', `${name} lists an unsafe file name '${file}'`)
  }
  return file
}
