import type { FinishReason } from './FinishReason.js'
import type { GeneratedRow } from './GeneratedRow.js'
import type { ToolCall } from './ToolCall.js'

/** One of `Engine.chat`'s replies: text, or calls of the functions it was offered. */
export interface ChatReply extends Omit<GeneratedRow, 'finishReason'> {
  /** The calls the reply made (then `finishReason` is 'tool_calls'), or null for a text reply. */
  toolCalls: ToolCall[] | null
  finishReason: FinishReason | 'tool_calls'
}
