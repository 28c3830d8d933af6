import type { ServerResponse } from 'node:http'

import type { FinishReason } from '../FinishReason.js'
import { ApiError } from './ApiError.js'
import type { JobSink, Usage } from './Job.js'
import type { OpenAiFormat } from './OpenAiFormat.js'
import { SseStream } from './SseStream.js'
import { sendJson } from './sendJson.js'

/** Writes a job's output to its HTTP response: as SSE chunks while it runs, or as one JSON body at the end. */
export class ResponseSink implements JobSink {
  /** Set when the job completed; the request log reads it. */
  usage: Usage | null = null
  readonly #res: ServerResponse
  readonly #format: OpenAiFormat
  readonly #stream: boolean
  readonly #includeUsage: boolean
  readonly #texts: string[]
  readonly #reasons: FinishReason[]
  #sse: SseStream | null = null

  constructor(res: ServerResponse, format: OpenAiFormat, options: { n: number; stream: boolean; includeUsage: boolean }) {
    this.#res = res
    this.#format = format
    this.#stream = options.stream
    this.#includeUsage = options.stream && options.includeUsage
    this.#texts = Array.from({ length: options.n }, () => '')
    this.#reasons = []
  }

  /** Starts a stream (headers, then each choice's opening chunk) once the job is accepted; a whole response waits. */
  open(): void {
    if (!this.#stream) return
    this.#sse = new SseStream(this.#res)
    for (let i = 0; i < this.#texts.length; i++) {
      const opening = this.#format.opening(i, this.#includeUsage)
      if (opening) this.#sse.send(opening)
    }
  }

  text(index: number, text: string): void {
    if (this.#sse) this.#sse.send(this.#format.text(index, text, this.#includeUsage))
    else this.#texts[index] += text
  }

  finish(index: number, reason: FinishReason): void {
    if (this.#sse) this.#sse.send(this.#format.finish(index, reason, this.#includeUsage))
    else this.#reasons[index] = reason
  }

  done(usage: Usage): void {
    this.usage = usage
    if (!this.#sse) return sendJson(this.#res, 200, this.#format.whole(this.#texts, this.#reasons, usage))
    if (this.#includeUsage) this.#sse.send(this.#format.usageChunk(usage))
    this.#sse.end()
  }

  /** After the stream has started the status is sent, so the error goes in-band, as OpenAI does. */
  fail(err: unknown): void {
    const error = ApiError.from(err)
    if (!this.#sse) return sendJson(this.#res, error.status, error.body)
    this.#sse.send(error.body)
    this.#sse.end()
  }
}
