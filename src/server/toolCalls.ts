import { randomUUID } from 'node:crypto'

import type { ChatMessage } from '../ChatMessage.js'
import { ApiError } from './ApiError.js'

type Body = Record<string, unknown>

/** One function a request offers the model. */
export interface FunctionTool {
  name: string
  description: string | null
  /** The JSON Schema of its arguments (an object schema; `{ type: 'object' }` when none was given). */
  parameters: object
}

/** What a request's `tools` and `tool_choice` ask: the functions the call may name. */
export interface ToolCallRequest {
  tools: FunctionTool[]
  /** The functions a call may name (`required` and `auto`: every tool; a named choice: that one). */
  callable: FunctionTool[]
  /** The reply must be a call (`required` or a named function), constrained to one; with `auto`
   * the model writes text or a call as it chooses, and a reply that is a call becomes one. */
  required: boolean
}

/** A call as the response reports it. */
export interface ToolCall {
  id: string
  type: 'function'
  function: { name: string; arguments: string }
}

const MAX_TOOLS = 128
const NAME = /^[A-Za-z0-9_-]{1,64}$/

/**
 * OpenAI's `tools` with `tool_choice`: `required` or `{ type: 'function', function: { name } }`
 * makes the reply a call, constrained to the schema of its arguments; `auto` (the default) lets
 * the model answer in text or with a call, unconstrained; `none` (or no tools) asks for text.
 */
export function toolCallRequest(b: Body): ToolCallRequest | null {
  const { tools: value, tool_choice: choice } = b
  if (value === undefined || value === null || (Array.isArray(value) && value.length === 0)) {
    if (choice !== undefined && choice !== null && choice !== 'none') throw ApiError.invalid('tool_choice', 'tool_choice needs tools')
    return null
  }
  if (!Array.isArray(value) || value.length > MAX_TOOLS) throw ApiError.invalid('tools', `tools must be a list of at most ${MAX_TOOLS} functions`)
  const tools = value.map((t: unknown, i) => functionTool(t, `tools[${i}]`))
  if (new Set(tools.map((t) => t.name)).size !== tools.length) throw ApiError.invalid('tools', 'tools must have distinct names')
  if (choice === 'none') return null
  if (choice === undefined || choice === null || choice === 'auto') return { tools, callable: tools, required: false }
  if (choice === 'required') return { tools, callable: tools, required: true }
  const named = typeof choice === 'object' && (choice as Body).type === 'function' ? ((choice as Body).function as Body | undefined)?.name : undefined
  const tool = tools.find((t) => t.name === named)
  if (!tool) throw ApiError.invalid('tool_choice', "tool_choice must be 'none', 'auto', 'required' or { type: 'function', function: { name } } naming one of the tools")
  return { tools, callable: [tool], required: true }
}

function functionTool(t: unknown, param: string): FunctionTool {
  const fn = typeof t === 'object' && t !== null && (t as Body).type === 'function' ? ((t as Body).function as Body | undefined) : undefined
  if (typeof fn !== 'object' || fn === null) throw ApiError.invalid(param, `${param} must be { type: 'function', function: { name, description?, parameters? } }`)
  const { name, description, parameters, strict, ...rest } = fn
  const extra = Object.keys(rest)[0]
  if (extra !== undefined) throw ApiError.invalid(`${param}.function.${extra}`, `${param}.function.${extra} is not supported`)
  if (typeof name !== 'string' || !NAME.test(name)) throw ApiError.invalid(`${param}.function.name`, `${param}.function.name must be 1 to 64 letters, digits, '_' or '-'`)
  if (description !== undefined && description !== null && typeof description !== 'string') throw ApiError.invalid(`${param}.function.description`, 'a description must be a string')
  if (strict !== undefined && strict !== null && typeof strict !== 'boolean') throw ApiError.invalid(`${param}.function.strict`, 'strict must be true or false')
  const schema = parameters ?? { type: 'object' }
  if (typeof schema !== 'object' || Array.isArray(schema)) throw ApiError.invalid(`${param}.function.parameters`, 'parameters must be a JSON Schema object')
  return { name, description: typeof description === 'string' ? description : null, parameters: schema }
}

/** The schema a call's text must match: `{ "name": one of the callable, "arguments": its parameters }`. */
export function toolCallSchema(request: ToolCallRequest): object {
  const call = (t: FunctionTool) => ({
    type: 'object',
    properties: { name: { const: t.name }, arguments: t.parameters },
    required: ['name', 'arguments'],
    additionalProperties: false,
  })
  return request.callable.length === 1 ? call(request.callable[0]) : { anyOf: request.callable.map(call) }
}

/**
 * The conversation as the chat template sees it: the functions described in the system message
 * (the first one, or a new one), an assistant's earlier calls as the JSON the model writes, and
 * each tool result as a `tool` message.
 */
export function withTools(messages: ChatMessage[], request: ToolCallRequest): ChatMessage[] {
  const listing = request.tools.map((t) => JSON.stringify({ name: t.name, ...(t.description && { description: t.description }), parameters: t.parameters })).join('\n')
  const guide = `You can call these functions. To call one, reply with only a JSON object {"name": <function name>, "arguments": <its arguments>}.\n${listing}`
  if (messages[0]?.role === 'system') return [{ role: 'system', content: `${messages[0].content}\n\n${guide}` }, ...messages.slice(1)]
  return [{ role: 'system', content: guide }, ...messages]
}

/** A finished choice's text as a call of one of `names`; null if it is not one (text, or a call
 * cut by max_tokens). */
export function parseToolCall(text: string, names: readonly string[]): ToolCall | null {
  try {
    const { name, arguments: args } = JSON.parse(text) as { name?: unknown; arguments?: unknown }
    if (typeof name !== 'string' || !names.includes(name) || typeof args !== 'object' || args === null || Array.isArray(args)) return null
    return { id: `call_${randomUUID().replaceAll('-', '').slice(0, 24)}`, type: 'function', function: { name, arguments: JSON.stringify(args ?? {}) } }
  } catch {
    return null
  }
}
