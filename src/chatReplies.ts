import type { ChatMessage } from './ChatMessage.js'
import type { ChatOptions } from './ChatOptions.js'
import type { ChatReply } from './ChatReply.js'
import { encodeChat } from './encodeChat.js'
import type { Engine } from './Engine.js'
import { GRAMMAR_KINDS } from './GrammarSpec.js'
import { KvEngineError } from './KvEngineError.js'
import type { Model } from './Model.js'
import { toolCallRequest } from './toolCallRequest.js'

/** `Engine.chat`: the conversation rendered with the tools, generated, and each reply read back as text or calls. */
export async function chatReplies(engine: Engine<Model>, messages: ChatMessage[], options: ChatOptions): Promise<ChatReply[]> {
  const { tools, toolChoice, parallelToolCalls, ...generation } = options
  const request = toolCallRequest(tools, toolChoice, parallelToolCalls, (_param, message) => new KvEngineError('INVALID_ARGUMENT', message))
  const given = GRAMMAR_KINDS.filter((key) => generation[key] !== undefined)
  if (request && given.length > 0) throw new KvEngineError('INVALID_ARGUMENT', `${given[0]} cannot be combined with tools: a reply is either the format or calls`)
  const format = engine.model.toolCallFormat
  const prompt = encodeChat(engine.model, messages, request)
  const rows = await engine.generateBatch(prompt, { ...generation, ...(request?.required && format.grammar(request)) })
  const names = request?.callable.map((t) => t.name) ?? []
  return rows.map((row) => {
    const toolCalls = request && row.finishReason === 'stop' ? format.parse(row.text, names) : null
    return { ...row, toolCalls, finishReason: toolCalls ? 'tool_calls' : row.finishReason }
  })
}
