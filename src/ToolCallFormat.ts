import { randomUUID } from 'node:crypto'

import type { ChatMessage } from './ChatMessage.js'
import type { ChatTool } from './ChatTool.js'
import type { GrammarSpec } from './GrammarSpec.js'
import type { ToolCall } from './ToolCall.js'
import type { FunctionTool, ToolCallRequest } from './toolCallRequest.js'

/** How a model writes function calls: see ToolCallFormat. */
export type ToolCallFormatName = 'hermes' | 'llama3' | 'json'

const HERMES_OPEN = '<tool_call>'
const HERMES_BLOCK = /<tool_call>\s*([\s\S]*?)\s*<\/tool_call>/g
/** `json.dumps`'s spacing, which templates that render calls write (`tojson`) and models learnt. */
const PYTHON_SPACING = { whitespace_flexible: false, item_separator: ', ', key_separator: ': ' }

/**
 * How a model writes function calls, so that they can be asked for, constrained and read back.
 * A chat template that renders `tools` itself teaches its model a format, named after it:
 * `hermes` (Qwen 2.5 and 3, Hermes: `<tool_call>\n{"name": …, "arguments": …}\n</tool_call>`,
 * one block per call) or `llama3` (Llama 3.1 to 3.3: a bare `{"name": …, "parameters": …}`).
 * For a template that does not (SmolLM2's, Gemma 3's), `json`: the functions are described in
 * the system message and a call is `{"name": …, "arguments": …}`.
 */
export class ToolCallFormat {
  readonly name: ToolCallFormatName

  constructor(name: ToolCallFormatName) {
    this.name = name
  }

  /** Whether the chat template renders the tools and the calls (otherwise they are written into the messages). */
  get renderedByTemplate(): boolean {
    return this.name !== 'json'
  }

  /** The conversation and the tools to render it with: the template's own way, or the tools described in the system message. */
  prompt(messages: ChatMessage[], request: ToolCallRequest | null): { messages: ChatMessage[]; tools?: ChatTool[] } {
    if (this.renderedByTemplate) return request ? { messages, tools: request.tools.map(openAiTool) } : { messages }
    const plain = messages.map((m) => (m.toolCalls?.length ? { role: m.role, content: m.toolCalls.map((c) => callJson(c)).join('\n') } : m))
    if (!request) return { messages: plain }
    const listing = request.tools.map((t) => JSON.stringify({ name: t.name, ...(t.description && { description: t.description }), parameters: t.parameters })).join('\n')
    const guide = `You can call these functions. To call one, reply with only a JSON object {"name": <function name>, "arguments": <its arguments>}.\n${listing}`
    if (plain[0]?.role === 'system') return { messages: [{ role: 'system', content: `${plain[0].content}\n\n${guide}` }, ...plain.slice(1)] }
    return { messages: [{ role: 'system', content: guide }, ...plain] }
  }

  /** What a reply must match when it must be calls of `request.callable`. */
  grammar(request: ToolCallRequest): GrammarSpec {
    const schema = (key: string, spacing: object | null) => {
      const call = (t: FunctionTool) => ({ type: 'object', properties: { name: { const: t.name }, [key]: t.parameters }, required: ['name', key], additionalProperties: false })
      const calls = request.callable.length === 1 ? call(request.callable[0]) : { anyOf: request.callable.map(call) }
      return spacing ? { ...calls, 'x-guidance': spacing } : calls
    }
    if (this.name === 'json') return { jsonSchema: schema('arguments', null) }
    if (this.name === 'llama3') return { jsonSchema: schema('parameters', PYTHON_SPACING) }
    const blocks = request.parallel ? 'block ("\\n" block)*' : 'block'
    return { grammar: `start: ${blocks}\nblock: "${HERMES_OPEN}\\n" call "\\n</tool_call>"\ncall: %json ${JSON.stringify(schema('arguments', PYTHON_SPACING))}\n` }
  }

  /** Whether a reply that begins with `text` may be calls: undefined while it cannot tell yet. */
  mayBeCalls(text: string): boolean | undefined {
    const start = text.trimStart()
    if (this.name !== 'hermes') return start === '' ? undefined : start.startsWith('{')
    if (start.length < HERMES_OPEN.length) return HERMES_OPEN.startsWith(start) ? undefined : false
    return start.startsWith(HERMES_OPEN)
  }

  /** A finished reply's calls of functions among `names`; null if it is not calls (text, or calls cut short). */
  parse(text: string, names: readonly string[]): ToolCall[] | null {
    const key = this.name === 'llama3' ? 'parameters' : 'arguments'
    if (this.name !== 'hermes') {
      const call = parseCall(text, names, key)
      return call ? [call] : null
    }
    // Blocks and the whitespace between them, nothing else.
    if (text.replaceAll(HERMES_BLOCK, '').trim() !== '') return null
    const calls = [...text.matchAll(HERMES_BLOCK)].map(([, json]) => parseCall(json, names, key))
    return calls.length > 0 && calls.every((c) => c !== null) ? (calls as ToolCall[]) : null
  }
}

function parseCall(json: string, names: readonly string[], key: string): ToolCall | null {
  try {
    const { name, [key]: args } = JSON.parse(json) as Record<string, unknown>
    if (typeof name !== 'string' || !names.includes(name) || typeof args !== 'object' || args === null || Array.isArray(args)) return null
    return { id: `call_${randomUUID().replaceAll('-', '').slice(0, 24)}`, type: 'function', function: { name, arguments: JSON.stringify(args) } }
  } catch {
    return null
  }
}

/** An earlier call as the `json` format writes it. */
function callJson(call: ToolCall): string {
  return JSON.stringify({ name: call.function.name, arguments: JSON.parse(call.function.arguments) as unknown })
}

function openAiTool(t: FunctionTool): ChatTool {
  return { type: 'function', function: { name: t.name, ...(t.description !== null && { description: t.description }), parameters: t.parameters } }
}
