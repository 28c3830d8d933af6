/** One function a request offers the model, checked. */
export interface FunctionTool {
  name: string
  description: string | null
  /** The JSON Schema of its arguments (an object schema; `{ type: 'object' }` when none was given). */
  parameters: object
}

/** What `tools` and `tool_choice` ask: the functions a call may name. */
export interface ToolCallRequest {
  tools: FunctionTool[]
  /** The functions a call may name (`required` and `auto`: every tool; a named choice: that one). */
  callable: FunctionTool[]
  /** The reply must be calls (`required` or a named function), constrained to the schemas; with
   * `auto` the model writes text or calls as it chooses, and a reply that is calls becomes them. */
  required: boolean
  /** More than one call per reply may be made (OpenAI's `parallel_tool_calls`, default true),
   * where the model's call format can hold several. */
  parallel: boolean
}

/** Makes the error for a bad value: the server's names the request field, the Engine's the option. */
export type InvalidField = (param: string, message: string) => Error

const MAX_TOOLS = 128
const NAME = /^[A-Za-z0-9_-]{1,64}$/

type Body = Record<string, unknown>

/**
 * OpenAI's `tools` with `tool_choice` (see ToolChoice), checked; null when the reply is to be
 * text (no tools, or `none`).
 */
export function toolCallRequest(value: unknown, choice: unknown, parallel: unknown, invalid: InvalidField): ToolCallRequest | null {
  if (parallel !== undefined && parallel !== null && typeof parallel !== 'boolean') throw invalid('parallel_tool_calls', 'parallel_tool_calls must be true or false')
  if (value === undefined || value === null || (Array.isArray(value) && value.length === 0)) {
    if (choice !== undefined && choice !== null && choice !== 'none') throw invalid('tool_choice', 'tool_choice needs tools')
    return null
  }
  if (!Array.isArray(value) || value.length > MAX_TOOLS) throw invalid('tools', `tools must be a list of at most ${MAX_TOOLS} functions`)
  const tools = value.map((t: unknown, i) => functionTool(t, `tools[${i}]`, invalid))
  if (new Set(tools.map((t) => t.name)).size !== tools.length) throw invalid('tools', 'tools must have distinct names')
  if (choice === 'none') return null
  const asked = { tools, parallel: parallel !== false }
  if (choice === undefined || choice === null || choice === 'auto') return { ...asked, callable: tools, required: false }
  if (choice === 'required') return { ...asked, callable: tools, required: true }
  const named = typeof choice === 'object' && (choice as Body).type === 'function' ? ((choice as Body).function as Body | undefined)?.name : undefined
  const tool = tools.find((t) => t.name === named)
  if (!tool) throw invalid('tool_choice', "tool_choice must be 'none', 'auto', 'required' or { type: 'function', function: { name } } naming one of the tools")
  return { ...asked, callable: [tool], required: true }
}

function functionTool(t: unknown, param: string, invalid: InvalidField): FunctionTool {
  const fn = typeof t === 'object' && t !== null && (t as Body).type === 'function' ? ((t as Body).function as Body | undefined) : undefined
  if (typeof fn !== 'object' || fn === null) throw invalid(param, `${param} must be { type: 'function', function: { name, description?, parameters? } }`)
  const { name, description, parameters, strict, ...rest } = fn
  const extra = Object.keys(rest)[0]
  if (extra !== undefined) throw invalid(`${param}.function.${extra}`, `${param}.function.${extra} is not supported`)
  if (typeof name !== 'string' || !NAME.test(name)) throw invalid(`${param}.function.name`, `${param}.function.name must be 1 to 64 letters, digits, '_' or '-'`)
  if (description !== undefined && description !== null && typeof description !== 'string') throw invalid(`${param}.function.description`, 'a description must be a string')
  if (strict !== undefined && strict !== null && typeof strict !== 'boolean') throw invalid(`${param}.function.strict`, 'strict must be true or false')
  const schema = parameters ?? { type: 'object' }
  if (typeof schema !== 'object' || Array.isArray(schema)) throw invalid(`${param}.function.parameters`, 'parameters must be a JSON Schema object')
  return { name, description: typeof description === 'string' ? description : null, parameters: schema }
}
