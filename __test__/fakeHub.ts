// A Hugging Face hub on 127.0.0.1 that answers as huggingface.co does for the routes the
// downloader uses: /api/models/<owner>/<repo> lists the files (siblings[].rfilename), and
// /<owner>/<repo>/resolve/<rev>/<file> redirects (302) to a second path, as the hub hands LFS
// files to its CDN, with the SHA-256 in X-Linked-Etag and ETag. The second path serves bytes with
// its own ETag and honours Range (206) and If-Range. It records every request, and can drop the
// connection part-way through a file.
import { createHash } from 'node:crypto'
import { once } from 'node:events'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface HubFile {
  bytes: Buffer
  /** The SHA-256 the hub advertises: the true one unless a test wants a lie; null for none. */
  sha256?: string | null
  /** The CDN's ETag for this version of the file. */
  etag?: string
}

export interface HubRequest {
  path: string
  status: number
  range?: string
  ifRange?: string
}

export interface FakeHub {
  url: string
  /** "owner/repo" → file path in the repository → file. Tests may swap files between runs. */
  repos: Map<string, Map<string, HubFile>>
  requests: HubRequest[]
  /** When set, the next file response sends this many body bytes, then destroys the socket. */
  dropNextAfter?: number
  close(): Promise<void>
}

export async function fakeHub(repos: Record<string, Record<string, HubFile>>): Promise<FakeHub> {
  const hub: FakeHub = {
    url: '',
    repos: new Map(Object.entries(repos).map(([name, files]) => [name, new Map(Object.entries(files))])),
    requests: [],
    close: async () => {
      server.closeAllConnections()
      server.close()
      await once(server, 'close')
    },
  }
  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname)
    const record: HubRequest = { path, status: 0, range: req.headers.range, ifRange: req.headers['if-range'] as string | undefined }
    hub.requests.push(record)
    res.on('finish', () => (record.status = res.statusCode))
    res.on('close', () => (record.status ||= res.statusCode))
    answer(hub, path, req, res)
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  hub.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return hub
}

function answer(hub: FakeHub, path: string, req: IncomingMessage, res: ServerResponse): void {
  const api = /^\/api\/models\/([^/]+\/[^/]+)$/.exec(path)
  if (api) {
    const files = hub.repos.get(api[1])
    if (!files) return void res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"Repository not found"}')
    return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: api[1], siblings: [...files.keys()].map((rfilename) => ({ rfilename })) }))
  }
  const resolve = /^\/([^/]+\/[^/]+)\/resolve\/[^/]+\/(.+)$/.exec(path)
  const cdn = /^\/cdn\/([^/]+\/[^/]+)\/(.+)$/.exec(path)
  const file = hub.repos.get((resolve ?? cdn)?.[1] ?? '')?.get((resolve ?? cdn)?.[2] ?? '')
  if (!file) return void res.writeHead(404).end('Entry not found')
  if (resolve) {
    const sha = file.sha256 === undefined ? sha256(file.bytes) : file.sha256
    const checksum = sha === null ? {} : { 'x-linked-etag': `"${sha}"`, etag: `"${sha}"` }
    return void res.writeHead(302, { location: `/cdn/${resolve[1]}/${resolve[2]}`, ...checksum, 'x-linked-size': String(file.bytes.length) }).end()
  }
  serveBytes(hub, file, req, res)
}

function serveBytes(hub: FakeHub, file: HubFile, req: IncomingMessage, res: ServerResponse): void {
  const etag = `"${file.etag ?? `cdn-${sha256(file.bytes).slice(0, 16)}`}"`
  const range = /^bytes=(\d+)-$/.exec(req.headers.range ?? '')
  const ifRange = req.headers['if-range']
  const start = range && (ifRange === undefined || ifRange === etag) ? Number(range[1]) : 0
  const size = file.bytes.length
  const headers = { etag, 'accept-ranges': 'bytes', 'content-type': 'application/octet-stream' }
  if (start >= size && start > 0) return void res.writeHead(416, { ...headers, 'content-range': `bytes */${size}` }).end()
  if (start > 0) res.writeHead(206, { ...headers, 'content-length': String(size - start), 'content-range': `bytes ${start}-${size - 1}/${size}` })
  else res.writeHead(200, { ...headers, 'content-length': String(size) })
  const drop = hub.dropNextAfter
  if (drop === undefined) return void res.end(file.bytes.subarray(start))
  hub.dropNextAfter = undefined
  res.write(file.bytes.subarray(start, start + drop), () => res.socket?.destroy())
}

function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex')
}
