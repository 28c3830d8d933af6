import { calculator } from './calculator/calculator.js'
import { KvEngineError } from './KvEngineError.js'
import type { Tool } from './Tool.js'

/** Tools by name, for `GenerateOptions.tools` to refer to. */
export class ToolRegistry {
  readonly #tools = new Map<string, Tool>()

  /** A registry holding the built-in tools: `calculator` (nanochat's). */
  static builtIn(): ToolRegistry {
    return new ToolRegistry().register('calculator', calculator)
  }

  /** Adds `tool` under `name`, replacing any tool of that name (the built-in calculator too). */
  register(name: string, tool: Tool): this {
    if (typeof name !== 'string' || name.length === 0) throw new KvEngineError('INVALID_ARGUMENT', 'a tool needs a non-empty string name')
    if (typeof tool !== 'function') throw new KvEngineError('INVALID_ARGUMENT', `tool '${name}' must be a function (expression: string) => string | null`)
    this.#tools.set(name, tool)
    return this
  }

  get(name: string): Tool | undefined {
    return this.#tools.get(name)
  }

  get names(): string[] {
    return [...this.#tools.keys()]
  }
}
