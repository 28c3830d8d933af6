import type { ChatMessage } from '../ChatMessage.js'
import { validateSamplingOptions } from '../validateSamplingOptions.js'
import { ApiError } from './ApiError.js'
import type { ToolCall } from '../ToolCall.js'
import { toolCallRequest, type ToolCallRequest } from '../toolCallRequest.js'

/** A request body that passed every check, with defaults filled in. */
export interface ValidRequest {
  model: string | null
  /** Chat messages (/v1/chat/completions) or a prompt (/v1/completions): exactly one is set. */
  messages: ChatMessage[] | null
  prompt: string | null
  n: number
  /** null: the server's default. */
  maxTokens: number | null
  stream: boolean
  includeUsage: boolean
  stop: string[]
  sampling: { temperature: number; topK: number; topP: number; minP: number; seed?: number }
  /** The JSON Schema `response_format` asks every choice to match, or null (on completions too, as llama-server takes it). */
  jsonSchema: object | null
  /** Top tokens to report with each sampled token's log-probability, or null for none. */
  logprobs: number | null
  /** The functions a reply may (`auto`) or must (`required`, named) call, or null. */
  tools: ToolCallRequest | null
}

/** nanochat's chat_web limits, kept as they were (rejected, not clamped). */
const LIMITS = { messages: 500, contentChars: 8000, totalChars: 32000, temperature: 2, topK: 200, maxTokens: 4096, stops: 4, n: 128 }
const ROLES = new Set(['system', 'user', 'assistant', 'tool'])

type Body = Record<string, unknown>

/** The fields each endpoint implements; `user` only labels the caller, so there is nothing to honour. */
const COMMON = ['model', 'stream', 'stream_options', 'temperature', 'top_k', 'top_p', 'min_p', 'max_tokens', 'n', 'seed', 'stop', 'user']
const KNOWN = { chat: new Set([...COMMON, 'messages', 'max_completion_tokens', 'response_format', 'logprobs', 'top_logprobs', 'tools', 'tool_choice', 'parallel_tool_calls']), completion: new Set([...COMMON, 'prompt', 'logprobs', 'response_format']) }

/**
 * OpenAI fields we do not implement, with the value that asks for nothing: clients that send
 * those (many send `frequency_penalty: 0` or `logprobs: false` by default) are served; any other
 * value would be silently ignored, so it is refused.
 */
const NEUTRAL: Record<string, (v: unknown) => boolean> = {
  frequency_penalty: (v) => v === 0,
  presence_penalty: (v) => v === 0,
  repetition_penalty: (v) => v === 1,
  logit_bias: (v) => typeof v === 'object' && v !== null && Object.keys(v).length === 0,
  best_of: (v) => v === 1,
  echo: (v) => v === false,
  suffix: (v) => v === '',
  response_format: (v) => typeof v === 'object' && v !== null && (v as Body).type === 'text' && Object.keys(v).length === 1,
  functions: (v) => Array.isArray(v) && v.length === 0,
  function_call: (v) => v === 'none',
}

/**
 * Checks a parsed JSON body the way nanochat's server did, in OpenAI's field names; `kind` says
 * which endpoint it came to. A field we do not implement is a 400 naming it, never a silent
 * ignore (null counts as left out, as OpenAI reads it).
 */
export function validateRequest(body: unknown, kind: 'chat' | 'completion', defaults: { temperature: number; topK: number }): ValidRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw ApiError.invalid('body', 'the request body must be a JSON object')
  const b = body as Body
  for (const [key, value] of Object.entries(b)) {
    if (KNOWN[kind].has(key) || value === null || NEUTRAL[key]?.(value)) continue
    const route = kind === 'chat' ? '/v1/chat/completions' : '/v1/completions'
    throw new ApiError(400, `'${key}' is not supported by ${route} on this server; remove it from the request`, { code: 'unsupported_parameter', param: key })
  }
  const model = optional(b, 'model', 'string', 'a string') ?? null
  const stream = optional(b, 'stream', 'boolean', 'true or false') ?? false
  const options = optional(b, 'stream_options', 'object', 'an object') as Body | undefined
  const includeUsage = (options && optional(options, 'include_usage', 'boolean', 'true or false', 'stream_options.include_usage')) ?? false
  const temperature = number(b, 'temperature', 0, LIMITS.temperature) ?? defaults.temperature
  const topK = integer(b, 'top_k', 0, LIMITS.topK) ?? defaults.topK
  const maxTokens = integer(b, 'max_completion_tokens', 1, LIMITS.maxTokens) ?? integer(b, 'max_tokens', 1, LIMITS.maxTokens) ?? null
  const n = integer(b, 'n', 1, LIMITS.n) ?? 1
  const seed = integer(b, 'seed', 0, 2 ** 53)
  const sampling = { temperature, topK, topP: number(b, 'top_p', 0, 1) ?? 1, minP: number(b, 'min_p', 0, 1) ?? 0, seed }
  try {
    validateSamplingOptions(sampling) // what the ranges above leave open, e.g. top_p = 0
  } catch (err) {
    throw ApiError.invalid(/topP/.test((err as Error).message) ? 'top_p' : 'sampling', (err as Error).message)
  }
  const messages = kind === 'chat' ? chatMessages(b.messages) : null
  const prompt = kind === 'completion' ? completionPrompt(b.prompt) : null
  const jsonSchema = responseSchema(b.response_format)
  const tools = kind === 'chat' ? toolCallRequest(b.tools, b.tool_choice, b.parallel_tool_calls, ApiError.invalid) : null
  if (tools && jsonSchema) throw ApiError.invalid('response_format', 'response_format cannot be combined with tools: a reply is either the format or a call')
  return { model, messages, prompt, n, maxTokens, stream, includeUsage, stop: stops(b.stop), sampling, jsonSchema, logprobs: logprobsOf(b, kind), tools }
}

/**
 * OpenAI's log-probability fields: chat's `logprobs` (true or false) with `top_logprobs` (0 to 20,
 * only with `logprobs: true`), completions' `logprobs` (0 to 5 top tokens; null or absent for none).
 */
function logprobsOf(b: Body, kind: 'chat' | 'completion'): number | null {
  if (kind === 'completion') return integer(b, 'logprobs', 0, 5) ?? null
  const wanted = optional(b, 'logprobs', 'boolean', 'true or false') ?? false
  const top = integer(b, 'top_logprobs', 0, 20)
  if (top !== undefined && !wanted) throw ApiError.invalid('top_logprobs', 'top_logprobs needs logprobs: true')
  return wanted ? (top ?? 0) : null
}

/**
 * OpenAI's `response_format`: `text` (nothing asked), `json_object` (any JSON object) or
 * `json_schema` (`{ name, schema, strict?, description? }`: its schema). Anything else is a 400.
 */
function responseSchema(value: unknown): object | null {
  if (value === undefined || value === null) return null
  const param = 'response_format'
  if (typeof value !== 'object' || Array.isArray(value)) throw ApiError.invalid(param, `${param} must be an object { type }`)
  const { type, json_schema: spec, ...rest } = value as Body
  const extra = Object.keys(rest)
  if (extra.length > 0) throw ApiError.invalid(`${param}.${extra[0]}`, `${param}.${extra[0]} is not supported; ${param} takes type and json_schema`)
  if (type === 'text' || type === 'json_object') {
    if (spec !== undefined) throw ApiError.invalid(`${param}.json_schema`, `${param}.json_schema goes with type 'json_schema', not '${type}'`)
    return type === 'text' ? null : { type: 'object' }
  }
  if (type !== 'json_schema') throw ApiError.invalid(`${param}.type`, `${param}.type must be 'text', 'json_object' or 'json_schema', got ${JSON.stringify(type)}`)
  const p = `${param}.json_schema`
  if (typeof spec !== 'object' || spec === null || Array.isArray(spec)) throw ApiError.invalid(p, `${p} must be an object { name, schema }`)
  const { name, schema, strict, description, ...others } = spec as Body
  const unknown = Object.keys(others)
  if (unknown.length > 0) throw ApiError.invalid(`${p}.${unknown[0]}`, `${p}.${unknown[0]} is not supported; ${p} takes name, schema, strict and description`)
  if (typeof name !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(name)) throw ApiError.invalid(`${p}.name`, `${p}.name must be 1 to 64 letters, digits, '_' or '-'`)
  if (strict !== undefined && strict !== null && typeof strict !== 'boolean') throw ApiError.invalid(`${p}.strict`, `${p}.strict must be true or false`)
  if (description !== undefined && description !== null && typeof description !== 'string') throw ApiError.invalid(`${p}.description`, `${p}.description must be a string`)
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) throw ApiError.invalid(`${p}.schema`, `${p}.schema must be a JSON Schema object`)
  return schema
}

function chatMessages(value: unknown): ChatMessage[] {
  if (!Array.isArray(value)) throw ApiError.invalid('messages', 'messages must be an array of { role, content }')
  if (value.length < 1 || value.length > LIMITS.messages) {
    throw ApiError.invalid('messages', `messages must hold 1 to ${LIMITS.messages} messages, got ${value.length}`)
  }
  let total = 0
  const messages = value.map((m: unknown, i): ChatMessage => {
    const param = `messages[${i}]`
    if (typeof m !== 'object' || m === null) throw ApiError.invalid(param, `${param} must be an object { role, content }`)
    const { role, content, tool_calls: calls, tool_call_id: callId, name } = m as Body
    if (typeof role !== 'string' || !ROLES.has(role)) throw ApiError.invalid(`${param}.role`, `${param}.role must be 'system', 'user', 'assistant' or 'tool'`)
    const toolCalls = role === 'assistant' && calls !== undefined && calls !== null ? earlierCalls(calls, `${param}.tool_calls`) : undefined
    const text = toolCalls && (content === undefined || content === null || content === '') ? '' : messageText(content, `${param}.content`)
    const size = text.length + (toolCalls?.reduce((n, c) => n + c.function.arguments.length, 0) ?? 0)
    if (size > LIMITS.contentChars) {
      throw ApiError.invalid(`${param}.content`, `${param}.content has ${size} characters; at most ${LIMITS.contentChars} are allowed`)
    }
    total += size
    const message: ChatMessage = { role: role as ChatMessage['role'], content: text, ...(toolCalls && { toolCalls }) }
    if (role === 'tool') {
      if (callId !== undefined && callId !== null) message.toolCallId = string(callId, `${param}.tool_call_id`)
      if (name !== undefined && name !== null) message.name = string(name, `${param}.name`)
    }
    return message
  })
  if (total > LIMITS.totalChars) throw ApiError.invalid('messages', `the messages hold ${total} characters in all; at most ${LIMITS.totalChars} are allowed`)
  return messages
}

/** An assistant's earlier calls, checked: each function's arguments must be JSON text. */
function earlierCalls(calls: unknown, param: string): ToolCall[] {
  if (!Array.isArray(calls) || calls.length === 0) throw ApiError.invalid(param, `${param} must be a non-empty list of calls`)
  return calls.map((c: unknown, i): ToolCall => {
    const { id, function: fn } = typeof c === 'object' && c !== null ? (c as { id?: unknown; function?: Body }) : {}
    if (typeof fn?.name !== 'string' || typeof fn.arguments !== 'string') throw ApiError.invalid(`${param}[${i}]`, `${param}[${i}] must be { id, type: 'function', function: { name, arguments } }`)
    try {
      JSON.parse(fn.arguments)
    } catch {
      throw ApiError.invalid(`${param}[${i}].function.arguments`, 'arguments must be a JSON text')
    }
    return { id: typeof id === 'string' ? id : `call_${i}`, type: 'function', function: { name: fn.name, arguments: fn.arguments } }
  })
}

function string(value: unknown, param: string): string {
  if (typeof value !== 'string' || value.length > 256) throw ApiError.invalid(param, `${param} must be a string of at most 256 characters`)
  return value
}

/** A string, or OpenAI's list of content parts of which we take the text ones. */
function messageText(content: unknown, param: string): string {
  const parts = Array.isArray(content) ? content : [content]
  const texts = parts.map((p: unknown) => (typeof p === 'string' ? p : typeof p === 'object' && p !== null && (p as Body).type === 'text' ? (p as Body).text : undefined))
  if (texts.some((t) => typeof t !== 'string')) throw ApiError.invalid(param, `${param} must be a string or a list of text parts`)
  const text = texts.join('')
  if (text.length === 0) throw ApiError.invalid(param, `${param} must not be empty`)
  return text
}

function completionPrompt(value: unknown): string {
  const prompt = Array.isArray(value) && value.length === 1 ? value[0] : value
  if (typeof prompt !== 'string') throw ApiError.invalid('prompt', 'prompt must be a string (or a list of one string)')
  if (prompt.length === 0 || prompt.length > LIMITS.totalChars) {
    throw ApiError.invalid('prompt', `prompt must hold 1 to ${LIMITS.totalChars} characters, got ${prompt.length}`)
  }
  return prompt
}

function stops(value: unknown): string[] {
  if (value === undefined || value === null) return []
  const list = typeof value === 'string' ? [value] : value
  if (!Array.isArray(list) || list.length > LIMITS.stops || list.some((s) => typeof s !== 'string' || s.length === 0)) {
    throw ApiError.invalid('stop', `stop must be a non-empty string or a list of at most ${LIMITS.stops} of them`)
  }
  return list as string[]
}

function optional<T extends 'string' | 'boolean' | 'object'>(b: Body, key: string, type: T, what: string, param = key) {
  const v = b[key]
  if (v === undefined || v === null) return undefined
  if (typeof v !== type || Array.isArray(v)) throw ApiError.invalid(param, `${param} must be ${what}`)
  return v as T extends 'string' ? string : T extends 'boolean' ? boolean : Body
}

function number(b: Body, key: string, min: number, max: number): number | undefined {
  const v = b[key]
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) throw ApiError.invalid(key, `${key} must be a number in [${min}, ${max}], got ${JSON.stringify(v)}`)
  return v
}

function integer(b: Body, key: string, min: number, max: number): number | undefined {
  const v = number(b, key, min, max)
  if (v !== undefined && !Number.isInteger(v)) throw ApiError.invalid(key, `${key} must be an integer in [${min}, ${max}], got ${v}`)
  return v
}
