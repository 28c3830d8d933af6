import { randomUUID } from 'node:crypto'

import type { FinishReason } from '../FinishReason.js'
import type { Usage } from './Job.js'

/**
 * OpenAI's response objects for one request, streamed or whole: chat (`delta` / `message`) or
 * legacy completions (`text`). `id` and `created` are fixed per request, as OpenAI keeps them.
 */
export class OpenAiFormat {
  readonly #chat: boolean
  readonly #head: { id: string; object: string; created: number; model: string }

  constructor(kind: 'chat' | 'completion', model: string) {
    this.#chat = kind === 'chat'
    this.#head = {
      id: `${this.#chat ? 'chatcmpl' : 'cmpl'}-${randomUUID().replaceAll('-', '')}`,
      object: this.#chat ? 'chat.completion.chunk' : 'text_completion',
      created: Math.floor(Date.now() / 1000),
      model,
    }
  }

  /** The response's id, which the request log shows too. */
  get id(): string {
    return this.#head.id
  }

  /** The chat stream opens each choice with the assistant role and no text. */
  opening(index: number, includeUsage: boolean): object | null {
    return this.#chat ? this.chunk(index, { role: 'assistant', content: '' }, null, includeUsage) : null
  }

  text(index: number, text: string, includeUsage: boolean): object {
    return this.chunk(index, this.#chat ? { content: text } : text, null, includeUsage)
  }

  finish(index: number, reason: FinishReason, includeUsage: boolean): object {
    return this.chunk(index, this.#chat ? {} : '', reason, includeUsage)
  }

  /** The extra chunk `stream_options.include_usage` asks for, just before `[DONE]`. */
  usageChunk(usage: Usage): object {
    return { ...this.#head, choices: [], usage: usageOf(usage) }
  }

  whole(texts: string[], reasons: FinishReason[], usage: Usage): object {
    const choices = texts.map((text, index) =>
      this.#chat
        ? { index, message: { role: 'assistant', content: text, refusal: null }, logprobs: null, finish_reason: reasons[index] }
        : { index, text, logprobs: null, finish_reason: reasons[index] },
    )
    return { ...this.#head, object: this.#chat ? 'chat.completion' : 'text_completion', choices, usage: usageOf(usage) }
  }

  private chunk(index: number, content: object | string, reason: FinishReason | null, includeUsage: boolean): object {
    const choice = this.#chat ? { index, delta: content, logprobs: null, finish_reason: reason } : { index, text: content, logprobs: null, finish_reason: reason }
    return includeUsage ? { ...this.#head, choices: [choice], usage: null } : { ...this.#head, choices: [choice] }
  }
}

function usageOf(u: Usage) {
  return {
    prompt_tokens: u.promptTokens,
    completion_tokens: u.completionTokens,
    total_tokens: u.promptTokens + u.completionTokens,
    prompt_tokens_details: { cached_tokens: u.cachedTokens },
  }
}
