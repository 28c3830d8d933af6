import type { IncomingMessage, ServerResponse } from 'node:http'
import { randomInt } from 'node:crypto'

import type { Grammar } from '../Grammar.js'
import type { GrammarSpec } from '../GrammarSpec.js'
import { KvEngineError } from '../KvEngineError.js'
import type { Model } from '../Model.js'
import { ApiError } from './ApiError.js'
import type { BatchLoop } from './BatchLoop.js'
import { encodeChat } from '../encodeChat.js'
import type { Job } from './Job.js'
import { OpenAiFormat } from './OpenAiFormat.js'
import { ResponseSink } from './ResponseSink.js'
import { readJsonBody } from './readJsonBody.js'
import { sendJson } from './sendJson.js'
import { validateRequest, type ValidRequest } from './validateRequest.js'

/** 32000 characters of content can take six bytes each once JSON-escaped, plus the envelope. */
const MAX_BODY_BYTES = 1 << 20

/** What the routes need from the server. */
export interface ServerContext {
  model: Model
  /** The name clients pass as `model`. */
  modelId: string
  loop: BatchLoop
  defaults: { temperature: number; topK: number; maxTokens: number }
  /** Positions one row may hold, prompt and completion together. */
  maxSequence: number
  /** Bytes a stream may have unsent before its rows pause. */
  maxUnsentBytes: number
  /** How long a stream may stay paused (its client not reading) before it is dropped. */
  writeTimeoutMs: number
  /** Unix seconds, for GET /v1/models. */
  startedAt: number
}

/** A route handler; it may add a few words to the request's log line through `note`. */
export type Route = (req: IncomingMessage, res: ServerResponse, note: { detail: string }) => Promise<void>

/** The OpenAI-compatible endpoints, keyed by "METHOD /path". */
export function openaiRoutes(ctx: ServerContext): Record<string, Route> {
  return {
    'GET /v1/models': async (_req, res) =>
      sendJson(res, 200, { object: 'list', data: [{ id: ctx.modelId, object: 'model', created: ctx.startedAt, owned_by: 'kvengine' }] }),
    'POST /v1/chat/completions': (req, res, note) => complete(ctx, 'chat', req, res, note),
    'POST /v1/completions': (req, res, note) => complete(ctx, 'completion', req, res, note),
  }
}

/** Validates, queues the job, and resolves once the response is over (finished or abandoned). */
async function complete(ctx: ServerContext, kind: 'chat' | 'completion', req: IncomingMessage, res: ServerResponse, note: { detail: string }): Promise<void> {
  // Listened for first: a client may leave while its body is still being read.
  const closed = new Promise<void>((resolve) => res.once('close', resolve))
  const request = validateRequest(await readJsonBody(req, MAX_BODY_BYTES), kind, ctx.defaults)
  if (request.model !== null && request.model !== ctx.modelId) {
    throw new ApiError(404, `The model '${request.model}' does not exist: this server serves '${ctx.modelId}'`, { code: 'model_not_found', param: 'model' })
  }
  const { tools } = request
  const calling = ctx.model.toolCallFormat
  const prompt = encodePrompt(ctx.model, request, ctx.maxSequence)
  const grammar = tools?.required
    ? await compileFor(ctx.model, calling.grammar(tools), 'tools')
    : request.jsonSchema && (await compileFor(ctx.model, { jsonSchema: request.jsonSchema }, 'response_format.json_schema.schema'))
  const format = new OpenAiFormat(kind, ctx.modelId, request.logprobs !== null)
  const toolCalls = tools && { names: tools.callable.map((t) => t.name), required: tools.required, format: calling }
  const sink = new ResponseSink(res, format, { ...request, toolCalls, maxUnsentBytes: ctx.maxUnsentBytes, writeTimeoutMs: ctx.writeTimeoutMs })
  const job: Job = {
    prompt,
    n: request.n,
    // Only the server's default is fitted to the room left; a limit the client asked for is checked in encodePrompt.
    maxTokens: Math.min(request.maxTokens ?? ctx.defaults.maxTokens, ctx.maxSequence - prompt.length),
    sampling: { ...request.sampling, seed: request.sampling.seed ?? randomInt(2 ** 32) },
    stop: request.stop,
    grammar,
    logprobs: request.logprobs,
    sink,
    submittedAt: performance.now(),
    cancelled: false,
  }
  ctx.loop.submit(job) // a full queue throws here, before anything is written
  sink.open()
  await closed
  if (!sink.usage) ctx.loop.cancel(job)
  const u = sink.usage
  const tokens = u ? `prompt=${u.promptTokens} cached=${u.cachedTokens} completion=${u.completionTokens}` : `prompt=${prompt.length} unfinished`
  note.detail = `n=${job.n} ${tokens} ${format.id}`
}

/** What the replies must match, compiled for this model; one llguidance cannot compile is a 400 naming `param`. */
async function compileFor(model: Model, spec: GrammarSpec, param: string): Promise<Grammar> {
  try {
    return await model.compileGrammar(spec)
  } catch (err) {
    if (err instanceof KvEngineError && err.code === 'INVALID_ARGUMENT') throw ApiError.invalid(param, err.message)
    throw err
  }
}

function encodePrompt(model: Model, request: ValidRequest, maxSequence: number): number[] {
  const { tokenizer } = model
  const prompt = request.messages
    ? encodeChat(model, request.messages, request.tools)
    : tokenizer.encode(request.prompt as string)
  if (prompt.length >= maxSequence) {
    throw new KvEngineError('CONTEXT_OVERFLOW', `the prompt has ${prompt.length} tokens but this server holds at most ${maxSequence} per request; shorten it`)
  }
  if (request.maxTokens !== null && prompt.length + request.maxTokens > maxSequence) {
    throw new KvEngineError(
      'CONTEXT_OVERFLOW',
      `the prompt has ${prompt.length} tokens and max_tokens asks for ${request.maxTokens} more, but this server holds at most ${maxSequence} per request; lower max_tokens to ${maxSequence - prompt.length} or shorten the prompt`,
    )
  }
  return prompt
}
