// Load test for `kvengine serve`: the server runs as a child process, the clients run here and
// talk to it over loopback. One client alone first, then 16 concurrent streaming clients in two
// rounds; reports aggregate tokens/s, its ratio to one client's, time to first token (p50/p99),
// failed requests, and the server's RSS after each round. Exits 1 if the ratio is under 3×, any
// request failed, or RSS grew by more than 32 MiB from the first round to the second.
//
//   npm run bench:serve [-- model.gguf]
//   node --import=tsx benches/serve-load.ts --url=http://127.0.0.1:8081/ [label]
//     drives another OpenAI-compatible server already running there (llama-server, say) with
//     the same load; its RSS is not read.
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { once } from 'node:events'
import { cpus, loadavg } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'

const root = join(fileURLToPath(import.meta.url), '..', '..')
const external = process.argv.find((a) => a.startsWith('--url='))?.slice('--url='.length)
const positional = process.argv.slice(2).filter((a) => !a.startsWith('--url='))
const MODEL = positional[0] ?? join(root, 'models', 'SmolLM2-135M-Instruct.Q8_0.gguf')
const CLIENTS = 16
const ROUND_REQUESTS = 48
const SINGLE_REQUESTS = 6
const MAX_TOKENS = 64
const TOPICS = ['the sea', 'a lighthouse', 'winter', 'a robot', 'a garden', 'the moon', 'a library', 'trains', 'a dragon', 'coffee', 'a storm', 'bees']

interface Result {
  ok: boolean
  tokens: number
  ttft: number
}

/** One streamed chat completion; TTFT is measured to the first content delta. */
async function request(url: string, i: number): Promise<Result> {
  const started = performance.now()
  try {
    const res = await fetch(`${url}v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        messages: [{ role: 'user', content: `Write a long story about ${TOPICS[i % TOPICS.length]}, number ${i}.` }],
        stream: true,
        stream_options: { include_usage: true },
        max_tokens: MAX_TOKENS,
        seed: i,
      }),
    })
    if (!res.ok || !res.body) return { ok: false, tokens: 0, ttft: 0 }
    let ttft = 0
    let tokens = 0
    let buffer = ''
    for await (const bytes of res.body.pipeThrough(new TextDecoderStream())) {
      buffer += bytes
      const events = buffer.split('\n\n')
      buffer = events.pop() ?? ''
      for (const event of events) {
        if (!event.startsWith('data: {')) continue
        const chunk = JSON.parse(event.slice(6))
        if (!ttft && chunk.choices?.[0]?.delta?.content) ttft = performance.now() - started
        if (chunk.usage) tokens = chunk.usage.completion_tokens
      }
    }
    return { ok: tokens > 0, tokens, ttft }
  } catch {
    return { ok: false, tokens: 0, ttft: 0 }
  }
}

/** `total` requests spread over `clients` concurrent loops; returns every result and the wall time. */
async function load(url: string, clients: number, total: number, first: number): Promise<{ results: Result[]; seconds: number }> {
  const results: Result[] = []
  let next = 0
  const started = performance.now()
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < total) results.push(await request(url, first + next++))
    }),
  )
  return { results, seconds: (performance.now() - started) / 1000 }
}

function percentile(values: number[], p: number): number {
  const sorted = values.slice().sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]
}

function rssMiB(pid: number): number {
  const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1])
  return kb / 1024
}

async function main(): Promise<void> {
  if (external) return measure(external.endsWith('/') ? external : `${external}/`, positional[0] ?? external, null)
  const server = spawn(process.execPath, ['--import=tsx', join(root, 'src', 'cli.ts'), 'serve', '-m', MODEL, '--port', '0', '--max-rows', String(CLIENTS)], {
    stdio: ['ignore', 'pipe', 'ignore'],
  })
  try {
    const [line] = (await once(createInterface({ input: server.stdout }), 'line')) as [string]
    const url = /at (http:\S+)/.exec(line)?.[1]
    if (!url) throw new Error(`the server did not print its URL: ${line}`)
    await measure(url, MODEL, server.pid as number)
  } finally {
    server.kill('SIGTERM')
  }
}

/** The single-client and 16-client rounds against the server at `url`; `pid` is read for RSS when known. */
async function measure(url: string, label: string, pid: number | null): Promise<void> {
  await load(url, 2, 4, 1000) // warm-up
  const single = await load(url, 1, SINGLE_REQUESTS, 2000)
  const singleRate = single.results.reduce((s, r) => s + r.tokens, 0) / single.seconds
  console.log(`${label}, ${MAX_TOKENS} max tokens per request, ${cpus().length} CPUs, load average ${loadavg()[0].toFixed(1)} at start`)
  console.log(`1 client: ${SINGLE_REQUESTS} requests, ${singleRate.toFixed(1)} tokens/s, TTFT p50 ${percentile(single.results.map((r) => r.ttft), 50).toFixed(0)} ms`)
  const rss = pid === null ? [] : [rssMiB(pid)]
  const all: Result[] = []
  let tokens = 0
  let seconds = 0
  for (let round = 0; round < 2; round++) {
    const r = await load(url, CLIENTS, ROUND_REQUESTS, 3000 + round * ROUND_REQUESTS)
    all.push(...r.results)
    tokens += r.results.reduce((s, x) => s + x.tokens, 0)
    seconds += r.seconds
    if (pid !== null) rss.push(rssMiB(pid))
  }
  const failed = all.filter((r) => !r.ok).length
  const rate = tokens / seconds
  const ttfts = all.filter((r) => r.ok).map((r) => r.ttft)
  console.log(`${CLIENTS} clients: ${all.length} requests, ${failed} failed, ${rate.toFixed(1)} tokens/s aggregate (${(rate / singleRate).toFixed(2)}× one client)`)
  console.log(`TTFT p50 ${percentile(ttfts, 50).toFixed(0)} ms, p99 ${percentile(ttfts, 99).toFixed(0)} ms`)
  if (pid !== null) console.log(`server RSS: ${rss.map((m) => m.toFixed(1)).join(' → ')} MiB (before load, after round 1, after round 2)`)
  if (failed > 0 || rate < 3 * singleRate || (pid !== null && rss[2] - rss[1] > 32)) process.exitCode = 1
}

await main()
