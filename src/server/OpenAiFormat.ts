import { randomUUID } from 'node:crypto'

import type { FinishReason } from '../FinishReason.js'
import type { Usage } from './Job.js'
import type { ReportedToken } from './ReportedToken.js'
import type { ToolCall } from '../ToolCall.js'

/**
 * OpenAI's response objects for one request, streamed or whole: chat (`delta` / `message`) or
 * legacy completions (`text`). `id` and `created` are fixed per request, as OpenAI keeps them.
 */
export class OpenAiFormat {
  readonly #chat: boolean
  readonly #head: { id: string; object: string; created: number; model: string }
  /** Whether the request asked for log-probabilities (else every choice says `logprobs: null`). */
  readonly #logprobs: boolean
  /** Completions' `text_offset`: characters each choice has reported so far. */
  readonly #offsets: number[] = []

  constructor(kind: 'chat' | 'completion', model: string, logprobs = false) {
    this.#chat = kind === 'chat'
    this.#logprobs = logprobs
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

  text(index: number, text: string, includeUsage: boolean, tokens: ReportedToken[] = []): object {
    return this.chunk(index, this.#chat ? { content: text } : text, null, includeUsage, tokens)
  }

  finish(index: number, reason: FinishReason | 'tool_calls', includeUsage: boolean, tokens: ReportedToken[] = []): object {
    return this.chunk(index, this.#chat ? {} : '', reason, includeUsage, tokens)
  }

  /** A choice's calls, each whole in one delta (OpenAI streams them in pieces; clients join them). */
  toolCalls(index: number, calls: ToolCall[], includeUsage: boolean, tokens: ReportedToken[] = []): object {
    return this.chunk(index, { tool_calls: calls.map((call, i) => ({ index: i, ...call })) }, null, includeUsage, tokens)
  }

  /** The extra chunk `stream_options.include_usage` asks for, just before `[DONE]`. */
  usageChunk(usage: Usage): object {
    return { ...this.#head, choices: [], usage: usageOf(usage) }
  }

  whole(texts: string[], reasons: FinishReason[], usage: Usage, tokens: ReportedToken[][] = [], calls: (ToolCall[] | null)[] = []): object {
    const choices = texts.map((text, index) => {
      const logprobs = this.#logprobsOf(index, tokens[index] ?? [])
      const made = calls[index]
      if (made) return { index, message: { role: 'assistant', content: null, tool_calls: made, refusal: null }, logprobs, finish_reason: 'tool_calls' }
      return this.#chat
        ? { index, message: { role: 'assistant', content: text, refusal: null }, logprobs, finish_reason: reasons[index] }
        : { index, text, logprobs, finish_reason: reasons[index] }
    })
    return { ...this.#head, object: this.#chat ? 'chat.completion' : 'text_completion', choices, usage: usageOf(usage) }
  }

  private chunk(index: number, content: object | string, reason: FinishReason | 'tool_calls' | null, includeUsage: boolean, tokens: ReportedToken[] = []): object {
    const logprobs = this.#logprobsOf(index, tokens)
    const choice = this.#chat ? { index, delta: content, logprobs, finish_reason: reason } : { index, text: content, logprobs, finish_reason: reason }
    return includeUsage ? { ...this.#head, choices: [choice], usage: null } : { ...this.#head, choices: [choice] }
  }

  /** OpenAI's shapes: chat `{ content: [...], refusal }`, completions' parallel lists. */
  #logprobsOf(index: number, tokens: ReportedToken[]): object | null {
    if (!this.#logprobs) return null
    if (this.#chat) {
      const entry = (t: { token: string; bytes: number[]; logprob: number }) => ({ token: t.token, logprob: t.logprob, bytes: t.bytes })
      return { content: tokens.map((t) => ({ ...entry(t), top_logprobs: t.top.map(entry) })), refusal: null }
    }
    const offsets = tokens.map((t) => {
      const at = this.#offsets[index] ?? 0
      this.#offsets[index] = at + t.token.length
      return at
    })
    return {
      tokens: tokens.map((t) => t.token),
      token_logprobs: tokens.map((t) => t.logprob),
      top_logprobs: tokens.map((t) => Object.fromEntries(t.top.map((e) => [e.token, e.logprob]))),
      text_offset: offsets,
    }
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
