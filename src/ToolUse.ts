import type { ToolDelimiters } from './ToolDelimiters.js'

/** Which registered tool answers calls written between which delimiters. */
export interface ToolUse {
  /** A name in the engine's ToolRegistry (`engine.tools`); `calculator` is built in. */
  tool: string
  delimiters: ToolDelimiters
}
