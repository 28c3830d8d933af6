import { KvEngineError } from './KvEngineError.js'
import { lookupToken } from './lookupToken.js'
import type { Tokenizer } from './Tokenizer.js'
import type { Tool } from './Tool.js'
import type { ToolDelimiters } from './ToolDelimiters.js'
import type { ToolRegistry } from './ToolRegistry.js'
import type { ToolUse } from './ToolUse.js'

/** One ToolUse with its delimiters as token ids. */
interface Resolved {
  name: string
  tool: Tool
  callEnd: number
  outputStart: number
  outputEnd: number
}

const DELIMITERS = ['callStart', 'callEnd', 'outputStart', 'outputEnd'] as const

/**
 * The tool uses of one generation, checked and resolved to token ids up front, so per token a
 * row only asks "does this token open or close a call", and only a closed call decodes or encodes.
 */
export class ToolRunner {
  readonly #byCallStart = new Map<number, Resolved>()
  readonly #tokenizer: Pick<Tokenizer, 'encode' | 'decode'>

  constructor(uses: ToolUse[], registry: ToolRegistry, tokenizer: Pick<Tokenizer, 'encode' | 'decode'>, vocabSize: number) {
    if (!Array.isArray(uses)) throw new KvEngineError('INVALID_ARGUMENT', 'tools must be an array of { tool, delimiters } or false')
    this.#tokenizer = tokenizer
    for (const [i, use] of uses.entries()) {
      const tool = registry.get(use?.tool)
      if (!tool) {
        const known = registry.names.join(', ') || 'none'
        throw new KvEngineError('INVALID_ARGUMENT', `tools[${i}].tool: no tool named ${JSON.stringify(use?.tool)} is registered (registered: ${known})`)
      }
      const [callStart, callEnd, outputStart, outputEnd] = DELIMITERS.map((key) => resolveToken(use.delimiters, key, `tools[${i}].delimiters`, tokenizer, vocabSize))
      if (callStart === callEnd) throw new KvEngineError('INVALID_ARGUMENT', `tools[${i}].delimiters: callStart and callEnd must be different tokens`)
      if (this.#byCallStart.has(callStart)) throw new KvEngineError('INVALID_ARGUMENT', `tools[${i}].delimiters.callStart: token ${callStart} already opens another tool's calls`)
      this.#byCallStart.set(callStart, { name: use.tool, tool, callEnd, outputStart, outputEnd })
    }
  }

  get size(): number {
    return this.#byCallStart.size
  }

  isCallStart(token: number): boolean {
    return this.#byCallStart.has(token)
  }

  /** The token that closes calls opened by `callStart`. */
  callEndOf(callStart: number): number {
    return (this.#byCallStart.get(callStart) as Resolved).callEnd
  }

  /** Runs the call's tool on its decoded tokens: the tokens to force next, or null for no result. */
  run(callStart: number, callTokens: number[]): number[] | null {
    const { name, tool, outputStart, outputEnd } = this.#byCallStart.get(callStart) as Resolved
    const result: unknown = tool(this.#tokenizer.decode(callTokens))
    if (result === null) return null
    if (typeof result !== 'string') {
      throw new KvEngineError('INVALID_ARGUMENT', `tool '${name}' returned ${typeof result}; a tool returns a string or null`)
    }
    return [outputStart, ...this.#tokenizer.encode(result, { addBos: false }), outputEnd]
  }
}

function resolveToken(delimiters: ToolDelimiters, key: (typeof DELIMITERS)[number], where: string, tokenizer: Pick<Tokenizer, 'encode' | 'decode'>, vocabSize: number): number {
  const value: unknown = delimiters?.[key]
  if (typeof value === 'string') {
    const id = lookupToken(tokenizer, value)
    if (id === undefined) throw new KvEngineError('INVALID_ARGUMENT', `${where}.${key}: ${JSON.stringify(value)} is not a single token of this model's vocabulary`)
    return id
  }
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0 && value < vocabSize) return value
  throw new KvEngineError('INVALID_ARGUMENT', `${where}.${key} must be a token's text or an id in [0, ${vocabSize}), got ${String(value)}`)
}
