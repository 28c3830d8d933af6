import { readFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { basename, join } from 'node:path'

import { KvEngineError } from '../KvEngineError.js'
import type { Model } from '../Model.js'
import { packageRoot } from '../packageRoot.js'
import { ApiError } from './ApiError.js'
import { BatchLoop } from './BatchLoop.js'
import { Metrics } from './Metrics.js'
import { openaiRoutes, type Route } from './openaiRoutes.js'
import { tokenizeRoutes } from './tokenizeRoutes.js'
import { isLoopback, RequestGuard } from './RequestGuard.js'
import { Scheduler } from './Scheduler.js'
import { sendJson } from './sendJson.js'
import { validateRequest } from './validateRequest.js'

export interface ServeOptions {
  /** Default 8080; 0 picks a free port. */
  port?: number
  /** Default 127.0.0.1: listening on every interface is a choice to make explicitly. */
  host?: string
  /** Bearer keys that open the API (every route but /health and the chat page). Required when `host` is not loopback. */
  apiKey?: string | string[]
  /** Serve a non-loopback `host` with no API key: anyone who reaches the port can use it. */
  allowUnauthenticated?: boolean
  /** Host header names (or '*') accepted besides the loopback names and the bound address. */
  allowedHosts?: string[]
  /** Origins (or '*') whose web pages may call the API; default none (CORS off). */
  corsOrigins?: string[]
  /** Seconds a connection may take to send its request, or a stream may stay unread, before it is dropped. Default 600, as llama-server's --timeout. */
  timeout?: number
  /** Open connections at once; more are refused at accept. Default 256. */
  maxConnections?: number
  /** Bytes a stream may have written but not yet sent before its rows pause. Default 256 KiB. */
  maxUnsentBytes?: number
  /** KV cache rows decoded together, i.e. concurrent choices. Default 16. */
  maxRows?: number
  /**
   * Positions one request may use, prompt and completion together; at most the model's context.
   * Every row is sized for the longest, so this bounds the KV cache: maxRows × maxSequence
   * positions. Default 2048.
   */
  maxSequence?: number
  /** Requests allowed to wait for rows before new ones get 429. Default 64. */
  maxQueue?: number
  /** Prompt tokens prefilled per step beside running rows' decode (chunked prefill), so a long prompt delays them by a few steps. Default 8. */
  prefillChunk?: number
  /** Sampling defaults for requests that leave them out (nanochat's chat_web: 0.8, 50, 512). */
  temperature?: number
  topK?: number
  maxTokens?: number
  /** Receives one line per request. Default: stderr. */
  log?: (line: string) => void
}

export interface RunningServer {
  url: string
  /**
   * Stops accepting, answers queued requests 503, lets running ones finish for up to
   * `deadlineMs` (default 10 s) and ends the rest with an error (an error event then `[DONE]` on
   * a stream), then frees the cache.
   */
  close(options?: { deadlineMs?: number }): Promise<void>
}

/**
 * Serves `model` over HTTP: the OpenAI-compatible routes, a chat page, health and Prometheus
 * metrics. Every request shares one KV cache and one decode loop. The model stays the caller's.
 */
export async function serve(model: Model, options: ServeOptions = {}): Promise<RunningServer> {
  const settings = resolve(model, options)
  const chatPage = readFileSync(join(packageRoot(), 'src', 'server', 'chatPage.html'))
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`))
  const metrics = new Metrics()
  // Every row sized for the longest request up front, as llama-server sizes its context: growing
  // the cache later copies every row and froze all streams for ~2 s when the first passed 1,024.
  const scheduler = new Scheduler(model.createCache(settings.maxRows, settings.maxSequence), settings.maxQueue)
  const loop = new BatchLoop(model, scheduler, metrics, { prefillChunk: options.prefillChunk })
  const gauges = () => ({ runningRows: scheduler.runningRows, queuedRows: scheduler.queuedRows, kvCacheBytes: scheduler.cache.sizeBytes })
  const routes: Record<string, Route> = {
    'GET /': async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'content-length': chatPage.length, ...PAGE_HEADERS })
      res.end(chatPage)
    },
    'GET /health': async (_req, res) => {
      const ready = !loop.draining
      sendJson(res, ready ? 200 : 503, { status: ready ? 'ok' : 'shutting_down', ready, model: modelId(model), running_rows: scheduler.runningRows, queued_rows: scheduler.queuedRows })
    },
    'GET /metrics': async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' })
      res.end(metrics.render(gauges()))
    },
    ...openaiRoutes({ model, modelId: modelId(model), loop, defaults: settings.defaults, maxSequence: settings.maxSequence, maxUnsentBytes: settings.maxUnsentBytes, writeTimeoutMs: settings.timeout * 1000, startedAt: Math.floor(Date.now() / 1000) }),
    ...tokenizeRoutes(model),
  }
  const guard = new RequestGuard({ host: settings.host, apiKeys: settings.apiKeys, allowedHosts: options.allowedHosts ?? [], corsOrigins: options.corsOrigins ?? [] })
  // Node checks header and request deadlines on this beat (30 s by default, too coarse for short timeouts).
  const server = createServer({ connectionsCheckingInterval: Math.min(30_000, settings.timeout * 250) }, (req, res) => {
    handle({ routes, guard, metrics, log }, req, res).catch((err: unknown) => lastResort(res, err, log))
  })
  server.requestTimeout = settings.timeout * 1000
  server.headersTimeout = Math.min(60, settings.timeout) * 1000
  server.maxConnections = settings.maxConnections
  await new Promise<void>((done, fail) => server.once('error', fail).listen(settings.port, settings.host, done)).catch(async (err: unknown) => {
    await loop.close(err)
    scheduler.cache.dispose()
    throw err
  })
  const { port: bound } = server.address() as AddressInfo
  return {
    url: `http://${settings.host.includes(':') ? `[${settings.host}]` : settings.host}:${bound}/`,
    async close({ deadlineMs = 10_000 } = {}) {
      server.close()
      server.closeIdleConnections()
      await loop.drain(deadlineMs, new ApiError(503, 'the server is shutting down', { code: 'shutting_down' }))
      server.closeAllConnections()
      scheduler.cache.dispose()
    },
  }
}

/** The chat page frames nothing and is framed by no one; its one inline script and style are its own. */
const PAGE_HEADERS = {
  'x-frame-options': 'DENY',
  'content-security-policy': "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
}

/** Options checked and defaulted, so a bad one fails at start, never on a request. */
function resolve(model: Model, options: ServeOptions) {
  const { port = 8080, host = '127.0.0.1', maxRows = 16, maxQueue = 64, timeout = 600, maxConnections = 256, maxUnsentBytes = 256 << 10 } = options
  checkInteger('port', port, 0, 65535)
  checkInteger('maxQueue', maxQueue, 1, 1 << 20)
  checkInteger('timeout', timeout, 1, 86_400)
  checkInteger('maxConnections', maxConnections, 1, 1 << 20)
  checkInteger('maxUnsentBytes', maxUnsentBytes, 1024, 1 << 30)
  const maxSequence = options.maxSequence ?? Math.min(2048, model.info.contextLength)
  checkInteger('maxSequence', maxSequence, 2, model.info.contextLength)
  const apiKeys = options.apiKey === undefined ? [] : [options.apiKey].flat()
  if (apiKeys.some((k) => typeof k !== 'string' || !/^\S{8,}$/.test(k))) {
    throw new KvEngineError('INVALID_ARGUMENT', 'an API key must be at least 8 characters with no spaces')
  }
  if (apiKeys.length === 0 && !isLoopback(host) && !options.allowUnauthenticated) {
    throw new KvEngineError('INVALID_ARGUMENT', `listening on ${host} lets other machines reach the server: give it an API key (--api-key or --api-key-file), or pass --allow-unauthenticated to serve it open`)
  }
  const defaults = { temperature: options.temperature ?? 0.8, topK: options.topK ?? 50, maxTokens: options.maxTokens ?? 512 }
  // The defaults obey the limits requests do, so a default can never be what a request may not ask for.
  validateRequest({ messages: [{ role: 'user', content: '-' }], temperature: defaults.temperature, top_k: defaults.topK, max_tokens: defaults.maxTokens }, 'chat', defaults)
  return { port, host, maxRows, maxQueue, timeout, maxConnections, maxUnsentBytes, maxSequence, apiKeys, defaults }
}

function checkInteger(name: string, value: number, min: number, max: number): void {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new KvEngineError('INVALID_ARGUMENT', `${name} must be an integer in ${min}..${max}, got ${String(value)}`)
  }
}

function modelId(model: Model): string {
  return basename(model.path).replace(/\.gguf$/i, '')
}

interface Handling {
  routes: Record<string, Route>
  guard: RequestGuard
  metrics: Metrics
  log: (line: string) => void
}

/** Routes one request, answers any error in OpenAI's shape, and logs one line when the response is over. */
async function handle({ routes, guard, metrics, log }: Handling, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const started = performance.now()
  const path = pathOf(req.url)
  const key = `${req.method} ${path}`
  const known = path !== null && Object.keys(routes).some((k) => k.endsWith(` ${path}`))
  const note = { detail: '' }
  // A connection closed before the response ended was abandoned by the client.
  let abandoned = false
  const closed = new Promise<void>((resolve) =>
    res.once('close', () => {
      abandoned = !res.writableFinished
      resolve()
    }),
  )
  try {
    if (path === null) throw new ApiError(400, 'the request target is not a valid path', { code: 'invalid_url' })
    if (!guard.admit(req, res, key)) {
      const route = routes[key]
      if (!route) throw known ? new ApiError(405, `${req.method} is not allowed on ${path}`) : new ApiError(404, `no route ${req.method} ${path}`, { code: 'not_found' })
      await route(req, res, note)
    }
  } catch (err) {
    answerError(res, ApiError.from(err))
  }
  await closed
  const status = abandoned ? 499 : res.statusCode // 499: nginx's code for a client that left
  metrics.countRequest(known ? (path as string) : 'other', status)
  log(`${new Date().toISOString()} ${req.method} ${JSON.stringify(req.url).slice(1, -1)} ${status} ${(performance.now() - started).toFixed(0)}ms ${note.detail}`.trimEnd())
}

/**
 * The path of a request target (origin form `/p`, or absolute form `http://h/p`); null for
 * anything else (`//a:99999/`, `//[/`, `http://[/`, `*`), which URL parsing would throw on or
 * read as a host.
 */
function pathOf(target: string | undefined): string | null {
  const absolute = /^https?:\/\//i.test(target ?? '')
  if (!target || (!absolute && (!target.startsWith('/') || target.startsWith('//')))) return null
  try {
    return new URL(target, 'http://localhost').pathname
  } catch {
    return null
  }
}

function answerError(res: ServerResponse, error: ApiError): void {
  if (res.headersSent || res.socket?.destroyed) {
    res.end()
    return
  }
  // A body refused before it was read may still be arriving: close rather than read it to the end.
  if (error.status === 413 || error.status === 401 || error.status === 415) res.setHeader('connection', 'close')
  sendJson(res, error.status, error.body)
}

/** A bug in the handling itself must cost one request, never the process. */
function lastResort(res: ServerResponse, err: unknown, log: (line: string) => void): void {
  log(`${new Date().toISOString()} internal error: ${(err as Error)?.stack ?? String(err)}`)
  try {
    answerError(res, new ApiError(500, 'internal error'))
  } catch {
    res.destroy()
  }
}
