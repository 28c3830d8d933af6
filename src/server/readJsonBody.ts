import type { IncomingMessage } from 'node:http'

import { KvEngineError } from '../KvEngineError.js'
import { ApiError } from './ApiError.js'

/**
 * Reads and parses a JSON body of at most `limit` bytes. A larger body is refused as soon as its
 * size shows (413) and the rest is discarded unread, so the answer can still be sent; text that
 * is not JSON is a 400.
 */
export function readJsonBody(req: IncomingMessage, limit: number): Promise<unknown> {
  const tooLarge = new ApiError(413, `the request body exceeds ${limit} bytes`, { code: 'request_too_large' })
  if (Number(req.headers['content-length'] ?? 0) > limit) {
    req.resume()
    return Promise.reject(tooLarge)
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    req.on('data', (chunk: Buffer) => {
      size += chunk.length
      if (size > limit) {
        chunks.length = 0
        reject(tooLarge)
      } else chunks.push(chunk)
    })
    // The client left before sending it all ('error' is how a reset connection shows; both are
    // no-ops once the body has ended).
    const left = () => reject(new KvEngineError('ABORTED', 'the client closed the connection while sending the request'))
    req.on('error', left)
    req.on('close', left)
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')))
      } catch (err) {
        reject(new ApiError(400, `the request body is not valid JSON: ${(err as Error).message}`, { code: 'invalid_json' }))
      }
    })
  })
}
