import type { IncomingMessage, ServerResponse } from 'node:http'

import type { Model } from '../Model.js'
import type { Route } from './openaiRoutes.js'
import { ApiError } from './ApiError.js'
import { readJsonBody } from './readJsonBody.js'
import { sendJson } from './sendJson.js'

/** A tokenize body is text, a detokenize body ids: both far below this. */
const MAX_BODY_BYTES = 1 << 20

type Body = Record<string, unknown>

/**
 * llama-server's `/tokenize` and `/detokenize`, under `/v1/` as well: `{ content, add_special?,
 * with_pieces? }` gives `{ tokens }` (with `with_pieces`, `[{ id, piece }]`), and `{ tokens }`
 * gives `{ content }`. Unknown fields are a 400 naming them, as on every route.
 */
export function tokenizeRoutes(model: Model): Record<string, Route> {
  const tokenize = async (req: IncomingMessage, res: ServerResponse) => {
    const body = await jsonObject(req, ['content', 'add_special', 'with_pieces'])
    if (typeof body.content !== 'string') throw ApiError.invalid('content', 'content must be a string')
    const addSpecial = flag(body, 'add_special')
    const ids = model.tokenizer.encode(body.content, { addBos: addSpecial })
    const tokens = flag(body, 'with_pieces') ? ids.map((id) => ({ id, piece: model.tokenizer.decode([id]) })) : ids
    sendJson(res, 200, { tokens })
  }
  const detokenize = async (req: IncomingMessage, res: ServerResponse) => {
    const body = await jsonObject(req, ['tokens'])
    const { tokens } = body
    const vocab = model.info.vocabSize
    if (!Array.isArray(tokens) || tokens.some((t) => !Number.isInteger(t) || (t as number) < 0 || (t as number) >= vocab)) {
      throw ApiError.invalid('tokens', `tokens must be an array of token ids in [0, ${vocab})`)
    }
    sendJson(res, 200, { content: model.tokenizer.decode(tokens as number[]) })
  }
  return { 'POST /tokenize': tokenize, 'POST /v1/tokenize': tokenize, 'POST /detokenize': detokenize, 'POST /v1/detokenize': detokenize }
}

async function jsonObject(req: IncomingMessage, known: string[]): Promise<Body> {
  const body = await readJsonBody(req, MAX_BODY_BYTES)
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw ApiError.invalid('body', 'the request body must be a JSON object')
  const unknown = Object.keys(body).find((key) => !known.includes(key))
  if (unknown !== undefined) {
    throw new ApiError(400, `'${unknown}' is not supported here; this route takes ${known.join(', ')}`, { code: 'unsupported_parameter', param: unknown })
  }
  return body as Body
}

function flag(body: Body, key: string): boolean {
  const value = body[key] ?? false
  if (typeof value !== 'boolean') throw ApiError.invalid(key, `${key} must be true or false`)
  return value
}
