/** Bucket bounds in seconds: TTFT spans queueing and prefill, a token is one decode step. */
const TTFT_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
const TOKEN_BUCKETS = [0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56]

class Histogram {
  readonly bounds: number[]
  readonly counts: number[]
  sum = 0
  count = 0

  constructor(bounds: number[]) {
    this.bounds = bounds
    this.counts = bounds.map(() => 0)
  }

  observe(seconds: number): void {
    this.sum += seconds
    this.count++
    const i = this.bounds.findIndex((b) => seconds <= b)
    if (i !== -1) this.counts[i]++
  }

  render(name: string, help: string): string[] {
    const lines = [`# HELP ${name} ${help}`, `# TYPE ${name} histogram`]
    let cumulative = 0
    for (const [i, b] of this.bounds.entries()) {
      cumulative += this.counts[i]
      lines.push(`${name}_bucket{le="${b}"} ${cumulative}`)
    }
    lines.push(`${name}_bucket{le="+Inf"} ${this.count}`, `${name}_sum ${this.sum}`, `${name}_count ${this.count}`)
    return lines
  }
}

/** The server's counters, rendered in Prometheus' text format (vLLM-style names under kvengine_). */
export class Metrics {
  readonly #requests = new Map<string, number>()
  promptTokens = 0
  cachedPromptTokens = 0
  generatedTokens = 0
  decodeSteps = 0
  cancelledRequests = 0
  readonly timeToFirstToken = new Histogram(TTFT_BUCKETS)
  readonly timePerToken = new Histogram(TOKEN_BUCKETS)

  countRequest(route: string, status: number): void {
    const key = `route="${route}",status="${status}"`
    this.#requests.set(key, (this.#requests.get(key) ?? 0) + 1)
  }

  /** `gauges` are read at scrape time from the scheduler and the process. */
  render(gauges: { runningRows: number; queuedRows: number; kvCacheBytes: number }): string {
    const lines: string[] = ['# HELP kvengine_requests_total HTTP requests answered, by route and status.', '# TYPE kvengine_requests_total counter']
    for (const [labels, n] of this.#requests) lines.push(`kvengine_requests_total{${labels}} ${n}`)
    const scalar = (name: string, type: string, help: string, value: number) => lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, `${name} ${value}`)
    scalar('kvengine_prompt_tokens_total', 'counter', 'Prompt tokens of admitted requests, cached ones included.', this.promptTokens)
    scalar('kvengine_prompt_tokens_cached_total', 'counter', 'Prompt tokens whose K/V was reused from an earlier request.', this.cachedPromptTokens)
    scalar('kvengine_generation_tokens_total', 'counter', 'Tokens generated, over all choices.', this.generatedTokens)
    scalar('kvengine_decode_steps_total', 'counter', 'Batched forward passes run by the decode loop.', this.decodeSteps)
    scalar('kvengine_requests_cancelled_total', 'counter', 'Requests whose client left before the response ended.', this.cancelledRequests)
    scalar('kvengine_running_rows', 'gauge', 'KV cache rows held by requests being decoded.', gauges.runningRows)
    scalar('kvengine_queued_rows', 'gauge', 'Rows wanted by requests waiting for admission.', gauges.queuedRows)
    scalar('kvengine_kv_cache_bytes', 'gauge', 'Bytes held by the shared KV cache.', gauges.kvCacheBytes)
    scalar('process_resident_memory_bytes', 'gauge', 'Resident set size of the server process.', process.memoryUsage.rss())
    lines.push(...this.timeToFirstToken.render('kvengine_time_to_first_token_seconds', 'From arrival to the first generated token.'))
    lines.push(...this.timePerToken.render('kvengine_time_per_output_token_seconds', 'Between consecutive tokens of a request (one decode step).'))
    return lines.join('\n') + '\n'
  }
}
