import type { ToolCall } from './ToolCall.js'

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool'
  content: string
  /** An assistant's calls, for a conversation that goes on after them. */
  toolCalls?: ToolCall[]
  /** A `tool` message's answer is to this call. */
  toolCallId?: string
  /** A `tool` message's function. */
  name?: string
}
