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
import { Scheduler } from './Scheduler.js'
import { sendJson } from './sendJson.js'
import { validateRequest } from './validateRequest.js'

export interface ServeOptions {
  /** Default 8080; 0 picks a free port. */
  port?: number
  /** Default 127.0.0.1: listening on every interface is a choice to make explicitly. */
  host?: string
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
  /** Sampling defaults for requests that leave them out (nanochat's chat_web: 0.8, 50, 512). */
  temperature?: number
  topK?: number
  maxTokens?: number
  /** Receives one line per request. Default: stderr. */
  log?: (line: string) => void
}

export interface RunningServer {
  url: string
  close(): Promise<void>
}

/**
 * Serves `model` over HTTP: the OpenAI-compatible routes, a chat page, health and Prometheus
 * metrics. Every request shares one KV cache and one decode loop. The model stays the caller's.
 */
export async function serve(model: Model, options: ServeOptions = {}): Promise<RunningServer> {
  const { port = 8080, host = '127.0.0.1', maxRows = 16, maxQueue = 64 } = options
  checkInteger('port', port, 0, 65535)
  checkInteger('maxQueue', maxQueue, 1, 1 << 20)
  const maxSequence = options.maxSequence ?? Math.min(2048, model.info.contextLength)
  checkInteger('maxSequence', maxSequence, 2, model.info.contextLength)
  const defaults = { temperature: options.temperature ?? 0.8, topK: options.topK ?? 50, maxTokens: options.maxTokens ?? 512 }
  // The defaults obey the limits requests do, so a default can never be what a request may not ask for.
  validateRequest({ messages: [{ role: 'user', content: '-' }], temperature: defaults.temperature, top_k: defaults.topK, max_tokens: defaults.maxTokens }, 'chat', defaults)
  const chatPage = readFileSync(join(packageRoot(), 'src', 'server', 'chatPage.html'))
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`))
  const metrics = new Metrics()
  // One position block to start with; the cache grows in blocks as rows need it.
  const scheduler = new Scheduler(model.createCache(maxRows, Math.min(1024, maxSequence)), maxQueue)
  const loop = new BatchLoop(model, scheduler, metrics)
  const gauges = () => ({ runningRows: scheduler.runningRows, queuedRows: scheduler.queuedRows, kvCacheBytes: scheduler.cache.sizeBytes })
  const routes: Record<string, Route> = {
    'GET /': async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'content-length': chatPage.length })
      res.end(chatPage)
    },
    'GET /health': async (_req, res) => sendJson(res, 200, { status: 'ok', ready: true, model: modelId(model), running_rows: scheduler.runningRows, queued_rows: scheduler.queuedRows }),
    'GET /metrics': async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' })
      res.end(metrics.render(gauges()))
    },
    ...openaiRoutes({ model, modelId: modelId(model), loop, defaults, maxSequence, startedAt: Math.floor(Date.now() / 1000) }),
  }
  const server = createServer((req, res) => void handle(routes, req, res, metrics, log))
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, host, resolve)).catch(async (err: unknown) => {
    await loop.close(err)
    scheduler.cache.dispose()
    throw err
  })
  const { port: bound } = server.address() as AddressInfo
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${bound}/`,
    async close() {
      server.close()
      server.closeAllConnections()
      await loop.close(new ApiError(503, 'the server is shutting down'))
      scheduler.cache.dispose()
    },
  }
}

function checkInteger(name: string, value: number, min: number, max: number): void {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new KvEngineError('INVALID_ARGUMENT', `${name} must be an integer in ${min}..${max}, got ${String(value)}`)
  }
}

function modelId(model: Model): string {
  return basename(model.path).replace(/\.gguf$/i, '')
}

/** Routes one request, answers any error in OpenAI's shape, and logs one line when the response is over. */
async function handle(routes: Record<string, Route>, req: IncomingMessage, res: ServerResponse, metrics: Metrics, log: (line: string) => void): Promise<void> {
  const started = performance.now()
  const path = new URL(req.url ?? '/', 'http://localhost').pathname
  const key = `${req.method} ${path}`
  const known = Object.keys(routes).some((k) => k.endsWith(` ${path}`))
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
    const route = routes[key]
    if (!route) throw known ? new ApiError(405, `${req.method} is not allowed on ${path}`) : new ApiError(404, `no route ${req.method} ${path}`, { code: 'not_found' })
    await route(req, res, note)
  } catch (err) {
    const error = ApiError.from(err)
    if (res.headersSent || req.socket.destroyed) res.end()
    else {
      // A body refused for its size may still be arriving: close rather than read it to the end.
      if (error.status === 413) res.setHeader('connection', 'close')
      sendJson(res, error.status, error.body)
    }
  }
  await closed
  const status = abandoned ? 499 : res.statusCode // 499: nginx's code for a client that left
  metrics.countRequest(known ? path : 'other', status)
  log(`${new Date().toISOString()} ${req.method} ${req.url} ${status} ${(performance.now() - started).toFixed(0)}ms ${note.detail}`.trimEnd())
}
