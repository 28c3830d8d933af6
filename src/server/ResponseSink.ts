import type { ServerResponse } from 'node:http'

import type { FinishReason } from '../FinishReason.js'
import type { ToolCall } from '../ToolCall.js'
import type { ToolCallFormat } from '../ToolCallFormat.js'
import { ApiError } from './ApiError.js'
import type { JobSink, Usage } from './Job.js'
import type { OpenAiFormat } from './OpenAiFormat.js'
import type { ReportedToken } from './ReportedToken.js'
import { SseStream } from './SseStream.js'
import { sendJson } from './sendJson.js'

export interface SinkOptions {
  n: number
  stream: boolean
  includeUsage: boolean
  /** Unsent bytes at which the job's rows pause until the client reads. */
  maxUnsentBytes: number
  /** A client that reads nothing for this long is dropped, which cancels its job. */
  writeTimeoutMs: number
  /**
   * Replies may be function calls of `names`, written in `format`: a reply that is calls is held
   * and sent as `tool_calls` when it ends. `required`: every reply is held. Otherwise a reply is
   * held while it may be calls (it starts as they do), and streamed as text once it is not.
   */
  toolCalls?: { names: string[]; required: boolean; format: ToolCallFormat } | null
}

/** Writes a job's output to its HTTP response: as SSE chunks while it runs, or as one JSON body at the end. */
export class ResponseSink implements JobSink {
  /** Set when the job completed; the request log reads it. */
  usage: Usage | null = null
  /** Called when a paused stream can take more; the decode loop sets it to wake up. */
  onUnblocked: (() => void) | null = null
  readonly #res: ServerResponse
  readonly #format: OpenAiFormat
  readonly #options: SinkOptions
  readonly #includeUsage: boolean
  readonly #texts: string[]
  readonly #reasons: FinishReason[]
  /** Per choice, reported tokens not yet sent (streamed: until the next chunk; whole: all). */
  readonly #tokens: ReportedToken[][]
  /** Per choice, the calls its text made (tool-call jobs), or null. */
  readonly #calls: (ToolCall[] | null)[] = []
  /** Per choice of a job whose replies may be calls: true while its text is held, false once streamed. */
  readonly #holding: boolean[] = []
  #sse: SseStream | null = null
  #stalled: NodeJS.Timeout | null = null

  constructor(res: ServerResponse, format: OpenAiFormat, options: SinkOptions) {
    this.#res = res
    this.#format = format
    this.#options = options
    this.#includeUsage = options.stream && options.includeUsage
    this.#texts = Array.from({ length: options.n }, () => '')
    this.#tokens = Array.from({ length: options.n }, () => [])
    this.#reasons = []
    res.on('drain', () => this.#drained())
    res.once('close', () => this.#drained())
  }

  /**
   * True while the client has more unsent bytes than the cap: the decode loop then skips this
   * job's rows, so a client that never reads costs neither compute nor unbounded memory.
   */
  get blocked(): boolean {
    return this.#sse !== null && this.#sse.open && this.#res.writableLength >= this.#options.maxUnsentBytes
  }

  /** Starts a stream (headers, then each choice's opening chunk) once the job is accepted; a whole response waits. */
  open(): void {
    if (!this.#options.stream) return
    this.#sse = new SseStream(this.#res)
    for (let i = 0; i < this.#texts.length; i++) {
      const opening = this.#format.opening(i, this.#includeUsage)
      if (opening) this.#send(opening)
    }
  }

  /** A sampled token's log-probabilities; streamed, they go with the next chunk of that choice. */
  logprobs(index: number, token: ReportedToken): void {
    this.#tokens[index].push(token)
  }

  text(index: number, text: string): void {
    if (!this.#sse) {
      this.#texts[index] += text
      return
    }
    const held = this.#options.toolCalls ? this.#hold(index, text) : ''
    if (!this.#holding[index]) this.#send(this.#format.text(index, held + text, this.#includeUsage, this.#takeTokens(index)))
  }

  /** Keeps `text` while the choice may be a call; returns what was held before, once it is text. */
  #hold(index: number, text: string): string {
    const before = this.#texts[index]
    this.#texts[index] += text
    if (this.#holding[index] === false) return ''
    const { required, format } = this.#options.toolCalls as NonNullable<SinkOptions['toolCalls']>
    this.#holding[index] = required || format.mayBeCalls(this.#texts[index]) !== false
    return this.#holding[index] ? '' : before
  }

  finish(index: number, reason: FinishReason): void {
    // A call cut short by max_tokens is no call: its text goes out as text, with its reason.
    const calling = this.#options.toolCalls
    const calls = calling && reason === 'stop' && this.#holding[index] !== false ? calling.format.parse(this.#texts[index], calling.names) : null
    this.#calls[index] = calls
    if (!this.#sse) {
      this.#reasons[index] = reason
      return
    }
    if (calls) this.#send(this.#format.toolCalls(index, calls, this.#includeUsage, this.#takeTokens(index)))
    else if (this.#holding[index] && this.#texts[index]) this.#send(this.#format.text(index, this.#texts[index], this.#includeUsage, this.#takeTokens(index)))
    this.#send(this.#format.finish(index, calls ? 'tool_calls' : reason, this.#includeUsage, this.#takeTokens(index)))
  }

  done(usage: Usage): void {
    this.usage = usage
    if (!this.#sse) return sendJson(this.#res, 200, this.#format.whole(this.#texts, this.#reasons, usage, this.#tokens, this.#calls))
    if (this.#includeUsage) this.#send(this.#format.usageChunk(usage))
    this.#sse.end()
  }

  /** After the stream has started the status is sent, so the error goes in-band, as OpenAI does. */
  fail(err: unknown): void {
    const error = ApiError.from(err)
    if (!this.#sse) {
      if (!this.#res.headersSent && !this.#res.destroyed) sendJson(this.#res, error.status, error.body)
      return
    }
    this.#send(error.body)
    this.#sse.end()
  }

  #takeTokens(index: number): ReportedToken[] {
    const taken = this.#tokens[index]
    this.#tokens[index] = []
    return taken
  }

  #send(data: unknown): void {
    const sse = this.#sse as SseStream
    sse.send(data)
    if (this.#stalled === null && this.blocked) this.#watch()
  }

  /**
   * While blocked, the client must take some bytes every `writeTimeoutMs` or be dropped (which
   * cancels the job): a slow reader is served, one that reads nothing is not held forever.
   */
  #watch(): void {
    const socket = this.#res.socket
    const flushed = () => (socket ? socket.bytesWritten - socket.writableLength : 0)
    const before = flushed()
    this.#stalled = setTimeout(() => {
      this.#stalled = null
      if (!this.blocked) return
      if (flushed() > before) this.#watch()
      else this.#res.destroy()
    }, this.#options.writeTimeoutMs)
    this.#stalled.unref()
  }

  #drained(): void {
    if (this.#stalled !== null) clearTimeout(this.#stalled)
    this.#stalled = null
    this.onUnblocked?.()
  }
}
