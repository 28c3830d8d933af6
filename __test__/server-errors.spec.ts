// Bad input, overload and abandoned streams: each gets its answer and the server stays healthy.
import { once } from 'node:events'
import { connect } from 'node:net'

import test from 'ava'

import { metric, post, scrape, startServer } from './serverHarness.js'

const server = await startServer()
test.after.always(() => server.close())

const user = (content: string) => ({ role: 'user', content })
const ok = { messages: [user('Hi')], max_tokens: 2 }

const rejected: [string, object, string][] = [
  ['no messages', { messages: [] }, 'messages'],
  ['501 messages', { messages: Array.from({ length: 501 }, () => user('a')) }, 'messages'],
  ['an empty content', { messages: [user('')] }, 'messages[0].content'],
  ['a content of 8001 characters', { messages: [user('a'.repeat(8001))] }, 'messages[0].content'],
  ['32001 characters in all', { messages: [...Array.from({ length: 4 }, () => user('a'.repeat(8000))), user('a')] }, 'messages'],
  ['the legacy role function', { messages: [{ role: 'function', content: 'x' }] }, 'messages[0].role'],
  ['an assistant call that is not one', { messages: [user('a'), { role: 'assistant', tool_calls: [{ function: { name: 'f' } }] }] }, 'messages[1].tool_calls[0]'],
  ['temperature 2.5', { ...ok, temperature: 2.5 }, 'temperature'],
  ['temperature -0.1', { ...ok, temperature: -0.1 }, 'temperature'],
  ['top_k 201', { ...ok, top_k: 201 }, 'top_k'],
  ['top_k 1.5', { ...ok, top_k: 1.5 }, 'top_k'],
  ['max_tokens 0', { ...ok, max_tokens: 0 }, 'max_tokens'],
  ['max_tokens 4097', { ...ok, max_tokens: 4097 }, 'max_tokens'],
  ['top_p 0', { ...ok, top_p: 0 }, 'top_p'],
  ['a string temperature', { ...ok, temperature: '1' }, 'temperature'],
  ['n larger than the rows', { ...ok, n: 9 }, 'n'],
  ['five stop strings', { ...ok, stop: ['a', 'b', 'c', 'd', 'e'] }, 'stop'],
]

for (const [what, body, param] of rejected) {
  test.serial(`400 for ${what}, in OpenAI's error shape`, async (t) => {
    const res = await post(server.url, 'v1/chat/completions', body)
    t.is(res.status, 400)
    const { error } = (await res.json()) as { error: Record<string, unknown> }
    t.is(error.param, param)
    t.is(error.type, 'invalid_request_error')
    t.is(typeof error.message, 'string')
    t.true('code' in error)
  })
}

test.serial('malformed JSON is a 400, an unknown model a 404 model_not_found, an unknown route a 404', async (t) => {
  const bad = await fetch(`${server.url}v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"messages": [' })
  t.is(bad.status, 400)
  t.like(await bad.json(), { error: { code: 'invalid_json' } })
  const unknown = await post(server.url, 'v1/chat/completions', { ...ok, model: 'gpt-9' })
  t.is(unknown.status, 404)
  t.like(await unknown.json(), { error: { code: 'model_not_found', param: 'model' } })
  t.is((await fetch(`${server.url}v2/nothing`)).status, 404)
  t.is((await fetch(`${server.url}v1/completions`)).status, 405)
})

test.serial('an oversized body is a 413, whether its length is declared or streamed', async (t) => {
  const big = JSON.stringify({ messages: [user('a'.repeat(2 << 20))] })
  const declared = await fetch(`${server.url}v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: big })
  t.is(declared.status, 413)
  const chunked = new ReadableStream({
    start(c) {
      c.enqueue(new TextEncoder().encode(big))
      c.close()
    },
  })
  const streamed = await fetch(`${server.url}v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: chunked, duplex: 'half' } as RequestInit)
  t.is(streamed.status, 413)
  t.is((await post(server.url, 'v1/chat/completions', ok)).status, 200, 'the server still answers')
})

test.serial('a client that leaves halfway through sending its body is logged as 499 and costs nothing', async (t) => {
  const { port } = new URL(server.url)
  const socket = connect(Number(port), '127.0.0.1')
  await once(socket, 'connect')
  socket.write('POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"messages": [')
  await new Promise((r) => setTimeout(r, 50))
  socket.destroy()
  await until(async () => server.lines.some((l) => / 499 \d+ms$/.test(l)))
  t.true(server.lines.some((l) => /POST \/v1\/chat\/completions 499 \d+ms$/.test(l)), server.lines.slice(-3).join("\n"))
  t.is(await metric(server.url, 'kvengine_queued_rows'), 0)
  t.is((await post(server.url, 'v1/chat/completions', ok)).status, 200)
})

test.serial('a full queue answers 429 instead of growing', async (t) => {
  const small = await startServer({ maxRows: 1, maxQueue: 1 })
  const long = { messages: [user('Tell me a long story.')], max_tokens: 40 }
  const statuses = await Promise.all([1, 2, 3].map(() => post(small.url, 'v1/chat/completions', long).then((r) => r.status)))
  t.deepEqual(statuses.sort(), [200, 200, 429])
  await small.close()
})

test.serial('--max-seq bounds each request: a longer prompt or max_tokens past it is a 400, the default stops at the limit', async (t) => {
  const small = await startServer({ maxSequence: 48 })
  const long = await post(small.url, 'v1/chat/completions', { messages: [user('word '.repeat(60))] })
  t.is(long.status, 400)
  t.like(await long.json(), { error: { code: 'context_length_exceeded' } })
  const past = await post(small.url, 'v1/chat/completions', { messages: [user('Tell me a long story.')], max_tokens: 100, temperature: 0 })
  t.is(past.status, 400)
  t.like(await past.json(), { error: { code: 'context_length_exceeded' } })
  const res = await post(small.url, 'v1/chat/completions', { messages: [user('Tell me a long story.')], temperature: 0 })
  const body = (await res.json()) as { usage: { prompt_tokens: number; completion_tokens: number }; choices: { finish_reason: string }[] }
  t.is(body.usage.prompt_tokens + body.usage.completion_tokens, 48)
  t.is(body.choices[0].finish_reason, 'length')
  await small.close()
})

/** Starts a streamed request, waits for `chunks` SSE events, then drops the connection. */
async function abandon(chunks: number): Promise<void> {
  const controller = new AbortController()
  const res = await post(server.url, 'v1/chat/completions', { messages: [user('Write a very long essay about the sea.')], max_tokens: 400, stream: true }, controller.signal)
  const reader = (res.body as ReadableStream<Uint8Array>).getReader()
  reader.closed.catch(() => {}) // the abort below rejects it, as intended
  let seen = 0
  while (seen < chunks) seen += new TextDecoder().decode((await reader.read()).value).split('data: ').length - 1
  controller.abort()
}

async function until(condition: () => Promise<boolean>, pauseMs = 10): Promise<void> {
  for (let i = 0; i < 5000 / (pauseMs + 1) && !(await condition()); i++) await new Promise((r) => setTimeout(r, pauseMs))
}

test.serial('a client that disconnects mid-stream frees its rows within one step', async (t) => {
  // Another request (four rows) keeps the loop stepping, so "within one step" is measurable.
  const stop = new AbortController()
  const busy = post(server.url, 'v1/chat/completions', { messages: [user('Describe the ocean in detail.')], n: 4, max_tokens: 400, temperature: 0 }, stop.signal)
  busy.catch(() => {}) // aborted below once the measurement is done
  await until(async () => (await metric(server.url, 'kvengine_running_rows')) === 4)
  const cancelledBefore = await metric(server.url, 'kvengine_requests_cancelled_total')
  await abandon(4)
  // Counted from the step the server saw the client leave, not from the abort: the test's own
  // scrape can reach the server before the dropped connection's FIN does.
  let seenAt = -1
  let freedAt = -1
  await until(async () => {
    const m = await scrape(server.url)
    const steps = m.get('kvengine_decode_steps_total') as number
    if (seenAt === -1 && (m.get('kvengine_requests_cancelled_total') as number) > cancelledBefore) seenAt = steps
    if (seenAt !== -1 && m.get('kvengine_running_rows') === 4) freedAt = steps
    return freedAt !== -1
  }, 0) // no pause: a step is a few milliseconds
  // The step in flight when the client left completes; the row is gone from the one after.
  t.true(seenAt !== -1 && freedAt !== -1 && freedAt - seenAt <= 1, `the rows were freed ${freedAt - seenAt} steps after the server saw the disconnect`)
  stop.abort()
})

test.serial('100 disconnects in a row leave memory and the running count where they were', async (t) => {
  // Leaving after the opening chunk catches a request queued or in prefill; after two, mid-decode.
  for (let i = 0; i < 10; i++) await abandon(1 + (i % 2)) // warm-up: allocator arenas, cache growth
  await until(async () => (await metric(server.url, 'kvengine_running_rows')) === 0)
  const rss = await metric(server.url, 'process_resident_memory_bytes')
  for (let i = 0; i < 100; i++) await abandon(1 + (i % 2))
  await until(async () => (await metric(server.url, 'kvengine_running_rows')) === 0)
  t.is(await metric(server.url, 'kvengine_running_rows'), 0)
  t.is(await metric(server.url, 'kvengine_queued_rows'), 0)
  const grown = (await metric(server.url, 'process_resident_memory_bytes')) - rss
  t.log(`RSS ${(rss / 2 ** 20).toFixed(1)} MiB before, grew ${(grown / 2 ** 20).toFixed(1)} MiB over 100 disconnects`)
  t.true(grown < 32 * 2 ** 20, `RSS grew by ${(grown / 2 ** 20).toFixed(1)} MiB`)
  t.is((await post(server.url, 'v1/chat/completions', ok)).status, 200, 'the server still answers')
  t.true(server.lines.filter((l) => / 499 /.test(l)).length >= 111, 'each abandoned stream is logged as 499')
})
