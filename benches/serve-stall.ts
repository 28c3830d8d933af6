// What a long prompt does to the streams already running: `kvengine serve` runs as a child
// process, 16 clients stream greedy completions (384 tokens max) from it over loopback, and once
// every stream is decoding steadily one ~2,000-token prompt is sent (after a first one, a warm-up:
// before the server sized its cache up front, that one grew it). Reports the streams'
// inter-chunk gaps from its arrival to its first token (p50/p99/max, in ms and in decode steps,
// one step being the median gap over 2 s before it and 2 s after its answer), and the latency of
// GET /health, polled every 20 ms, over the same window. Exits 1 if a request failed, a stream
// ended before the window did, or the gaps' p99 reached 3 decode steps.
//
//   node --import=tsx benches/serve-stall.ts [--prefill-chunk N] [model.gguf]
//   (--prefill-chunk 4096 prefills the prompt in one pass, as the server did before chunking)
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { cpus, loadavg } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

import { Model } from '../index.js'
import { promptText } from './lib/promptText.js'

const root = join(fileURLToPath(import.meta.url), '..', '..')
const { values, positionals } = parseArgs({ options: { 'prefill-chunk': { type: 'string' } }, allowPositionals: true })
const MODEL = positionals[0] ?? join(root, 'models', 'SmolLM2-135M-Instruct.Q8_0.gguf')
const STREAMS = 16
/** Enough for the streams to outlast a prefill in chunks of 8. */
const STREAM_TOKENS = 384
/** Tokens every stream has received before the long prompt is sent: they are all decoding by then. */
const WARM_TOKENS = 32
/** The decode step is the median gap over this long before the long prompt and after its answer: the load of a shared machine drifts. */
const BASELINE_MS = 2000
const LONG_TOKENS = 2000
const HEALTH_EVERY_MS = 20

/** Arrival times (performance.now()) of one stream's text chunks. */
interface Stream {
  arrivals: number[]
  ok: boolean
}

/** Streams one greedy completion, noting when each chunk with text arrives; resolves when it ends or is aborted. */
async function stream(url: string, prompt: string, maxTokens: number, into: Stream, signal: AbortSignal): Promise<void> {
  try {
    const res = await fetch(`${url}v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt, max_tokens: maxTokens, temperature: 0, stream: true }),
      signal,
    })
    if (!res.ok || !res.body) return
    let buffer = ''
    for await (const bytes of res.body.pipeThrough(new TextDecoderStream())) {
      const now = performance.now()
      buffer += bytes
      const events = buffer.split('\n\n')
      buffer = events.pop() ?? ''
      for (const event of events) {
        if (event === 'data: [DONE]') into.ok = true
        else if (event.startsWith('data: {') && JSON.parse(event.slice(6)).choices?.[0]?.text) into.arrivals.push(now)
      }
    }
  } catch (err) {
    if (!signal.aborted) throw err
    into.ok = true // stopped by the bench once its window was over
  }
}

/** GET /health every HEALTH_EVERY_MS until `signal` aborts: when each poll was sent, and its latency. */
async function pollHealth(url: string, signal: AbortSignal): Promise<{ at: number; ms: number }[]> {
  const polls: { at: number; ms: number }[] = []
  while (!signal.aborted) {
    const at = performance.now()
    await (await fetch(`${url}health`)).arrayBuffer()
    polls.push({ at, ms: performance.now() - at })
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, at + HEALTH_EVERY_MS - performance.now())))
  }
  return polls
}

/** About LONG_TOKENS tokens of prose, and how many the server will count, by the model's own tokenizer. */
async function longPrompt(): Promise<{ text: string; tokens: number }> {
  const model = await Model.load(MODEL, { threads: 1 })
  const text = model.tokenizer.decode(model.tokenizer.encode(promptText(80)).slice(0, LONG_TOKENS))
  const tokens = model.tokenizer.encode(text).length
  model.dispose()
  return { text, tokens }
}

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 5))
}

function percentile(values: number[], p: number): number {
  const sorted = values.slice().sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]
}

/** Every stream's gaps between consecutive chunks whose later chunk arrived in [from, to). */
function gaps(streams: Stream[], from: number, to: number): number[] {
  return streams.flatMap((s) => s.arrivals.slice(1).flatMap((t, i) => (t >= from && t < to ? [t - s.arrivals[i]] : [])))
}

async function main(): Promise<void> {
  const chunk = values['prefill-chunk']
  const prompt = await longPrompt()
  const args = ['--import=tsx', join(root, 'src', 'cli.ts'), 'serve', '-m', MODEL, '--port', '0', '--max-rows', String(STREAMS + 1), '--max-seq', '2048']
  const server = spawn(process.execPath, [...args, ...(chunk ? ['--prefill-chunk', chunk] : [])], { stdio: ['ignore', 'pipe', 'ignore'] })
  const abort = new AbortController()
  try {
    const [line] = (await once(createInterface({ input: server.stdout }), 'line')) as [string]
    const url = /at (http:\S+)/.exec(line)?.[1]
    if (!url) throw new Error(`the server did not print its URL: ${line}`)
    // Grows the KV cache to its full length first (a one-off copy of every row, ~2 s here, that
    // would stall the streams once whatever the chunk); its own text shares no prefix with the
    // prompt measured.
    await stream(url, `Warm-up. ${prompt.text}`, 1, { arrivals: [], ok: false }, abort.signal)
    const streams: Stream[] = Array.from({ length: STREAMS }, () => ({ arrivals: [], ok: false }))
    const running = streams.map((s, i) => stream(url, `${i * 100 + 1}, ${i * 100 + 2}, ${i * 100 + 3},`, STREAM_TOKENS, s, abort.signal))
    // Polled throughout, so the steady decode steps bear the same load as those beside the prefill.
    const polling = pollHealth(url, abort.signal)
    await until(() => streams.every((s) => s.arrivals.length >= WARM_TOKENS))
    const sentAt = performance.now()
    const long: Stream = { arrivals: [], ok: false }
    let longEnded = false
    const longDone = stream(url, prompt.text, 8, long, new AbortController().signal).finally(() => (longEnded = true))
    await until(() => long.arrivals.length > 0 || longEnded)
    const firstAt = long.arrivals[0] ?? performance.now()
    await longDone
    const endedAt = performance.now()
    await new Promise((resolve) => setTimeout(resolve, BASELINE_MS))
    abort.abort()
    await Promise.all(running)
    const polls = (await polling).filter((p) => p.at >= sentAt && p.at < firstAt)

    const steady = gaps(streams, sentAt - BASELINE_MS, sentAt).concat(gaps(streams, endedAt, endedAt + BASELINE_MS))
    const step = percentile(steady, 50)
    // Up to half a step past the first token: the gaps that end in the step that finished the prefill.
    const during = gaps(streams, sentAt, firstAt + step / 2)
    const alive = streams.filter((s) => s.arrivals.at(-1)! >= endedAt + BASELINE_MS / 2).length
    const failed = streams.filter((s) => !s.ok).length + (long.ok ? 0 : 1)
    const health = polls.map((p) => p.ms)
    const f = (ms: number) => ms.toFixed(0)
    console.log(`model ${MODEL}, prefill chunk ${chunk ?? 'default'}, ${cpus().length} CPUs, load average ${loadavg()[0].toFixed(1)} at the end`)
    console.log(`${STREAMS} greedy streams; a ${prompt.tokens}-token prompt sent after ${WARM_TOKENS} tokens each; its first token after ${f(firstAt - sentAt)} ms; ${alive}/${STREAMS} streams decoding to the end; ${failed} failed`)
    console.log(`decode step (median gap over ${BASELINE_MS} ms before it and after its answer): ${step.toFixed(1)} ms; p99 there ${f(percentile(steady, 99))} ms = ${(percentile(steady, 99) / step).toFixed(1)} steps`)
    console.log(`gaps while it was prefilled (${during.length}): p50 ${f(percentile(during, 50))} ms, p99 ${f(percentile(during, 99))} ms, max ${f(Math.max(...during))} ms = p99 ${(percentile(during, 99) / step).toFixed(1)} / max ${(Math.max(...during) / step).toFixed(1)} decode steps`)
    console.log(`GET /health every ${HEALTH_EVERY_MS} ms over that window (${health.length} polls): p50 ${f(percentile(health, 50))} ms, p99 ${f(percentile(health, 99))} ms, max ${f(Math.max(...health))} ms`)
    if (failed > 0 || alive < STREAMS || percentile(during, 99) >= 3 * step) process.exitCode = 1
  } finally {
    abort.abort()
    server.kill('SIGTERM')
  }
}

await main()
