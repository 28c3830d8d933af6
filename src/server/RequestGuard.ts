import { timingSafeEqual } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { isIP } from 'node:net'
import { hostname, networkInterfaces } from 'node:os'

import { ApiError } from './ApiError.js'

export interface GuardOptions {
  /** The address the server listens on. */
  host: string
  /** Bearer keys that open the API; empty leaves it open. */
  apiKeys: string[]
  /** Host names (or `*`) accepted besides the loopback names and the bound address. */
  allowedHosts: string[]
  /** Origins (or `*`) whose pages may call the API from a browser; empty: none (CORS off). */
  corsOrigins: string[]
}

/** Routes any client may reach without a key: a liveness probe, and the page that asks for one. */
const PUBLIC = new Set(['GET /health', 'GET /'])
const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '::1']

/**
 * What a request must pass before any route sees it. The Host check stops DNS rebinding (a page
 * on evil.example whose name resolves to 127.0.0.1 sends `Host: evil.example`); the key stops
 * anyone who can reach the port; CORS stays off unless asked for, so other sites' pages cannot
 * read the answers; and POST bodies must be JSON, which a page can only send after a CORS
 * preflight, so a `no-cors` form or `text/plain` fetch from any web page cannot start work.
 */
export class RequestGuard {
  readonly #keys: Buffer[]
  readonly #hosts: Set<string>
  readonly #anyHost: boolean
  readonly #origins: Set<string>

  constructor(options: GuardOptions) {
    this.#keys = options.apiKeys.map((k) => Buffer.from(k))
    this.#anyHost = options.allowedHosts.includes('*')
    this.#hosts = new Set([...LOOPBACK_NAMES, ...boundNames(options.host), ...options.allowedHosts].map((h) => h.toLowerCase()))
    this.#origins = new Set(options.corsOrigins)
  }

  /**
   * Throws the ApiError that refuses `req`, or sets the CORS headers it may have. True when the
   * request was a CORS preflight and has been answered here.
   */
  admit(req: IncomingMessage, res: ServerResponse, route: string): boolean {
    const host = hostOf(req.headers.host)
    if (!this.#anyHost && (host === null || !this.#hosts.has(host))) {
      throw new ApiError(403, `the Host header '${req.headers.host ?? ''}' is not one this server answers to; start it with --allowed-hosts to add it`, { code: 'host_not_allowed' })
    }
    const origin = req.headers.origin
    const corsAllowed = origin !== undefined && (this.#origins.has('*') || this.#origins.has(origin))
    if (corsAllowed) {
      res.setHeader('access-control-allow-origin', this.#origins.has('*') ? '*' : origin)
      res.setHeader('vary', 'Origin')
    }
    if (req.method === 'OPTIONS') {
      if (!corsAllowed) throw new ApiError(403, `cross-origin requests from '${origin ?? 'an unknown origin'}' are not allowed; start the server with --cors-origin to allow them`, { code: 'cors_not_allowed' })
      res.writeHead(204, {
        'access-control-allow-methods': 'GET, POST, OPTIONS',
        'access-control-allow-headers': 'authorization, content-type',
        'access-control-max-age': '600',
      })
      res.end()
      return true
    }
    if (!PUBLIC.has(route) && !this.#authorized(req.headers.authorization)) {
      throw new ApiError(401, 'a valid API key is required: send it as "Authorization: Bearer <key>"', { code: 'invalid_api_key' })
    }
    if (req.method === 'POST' && !isJson(req.headers['content-type'])) {
      throw new ApiError(415, `the request body must be sent as content-type application/json, not '${req.headers['content-type'] ?? 'none'}'`, { code: 'unsupported_media_type' })
    }
    return false
  }

  #authorized(header: string | undefined): boolean {
    if (this.#keys.length === 0) return true
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '')
    if (!match) return false
    const given = Buffer.from(match[1])
    // Compared in constant time, so response timing does not reveal how much of a key was right.
    return this.#keys.some((key) => key.length === given.length && timingSafeEqual(key, given))
  }
}

/** True for addresses only this machine can reach. */
export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host)
}

/** The names a client of `host` may use: the address itself, or every local address and the machine's name when it listens on all. */
function boundNames(host: string): string[] {
  if (host !== '0.0.0.0' && host !== '::') return [host]
  const addresses = Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((a) => a.address))
  return [hostname(), ...addresses]
}

/** The host name of a Host header, without port or IPv6 brackets; null when it is not one. */
function hostOf(header: string | undefined): string | null {
  if (!header) return null
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(header)
  if (bracketed) return isIP(bracketed[1]) === 6 ? bracketed[1].toLowerCase() : null
  const plain = /^([^:]+)(?::\d+)?$/.exec(header)
  return plain ? plain[1].toLowerCase() : null
}

function isJson(contentType: string | undefined): boolean {
  return /^application\/json\s*(;|$)/i.test(contentType ?? '')
}
