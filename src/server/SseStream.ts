import type { ServerResponse } from 'node:http'

/** Server-sent events as OpenAI streams them: `data: <json>` lines, ended by `data: [DONE]`. */
export class SseStream {
  readonly #res: ServerResponse

  constructor(res: ServerResponse) {
    this.#res = res
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      // Tells nginx-style proxies not to buffer, so tokens arrive as they are made.
      'x-accel-buffering': 'no',
    })
    res.flushHeaders()
  }

  /** False once the client has gone: writes after that are dropped. */
  get open(): boolean {
    return !this.#res.destroyed && !this.#res.writableEnded
  }

  send(data: unknown): void {
    if (this.open) this.#res.write(`data: ${JSON.stringify(data)}\n\n`)
  }

  end(): void {
    if (this.open) this.#res.end('data: [DONE]\n\n')
  }
}
