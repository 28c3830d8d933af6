// The attack table of issue 29, run against a real server on loopback: each abuse is held,
// refused with the right status, or cancelled with its resources back to baseline. Every loop
// is bounded in count and time.
import { once } from 'node:events'
import { connect } from 'node:net'

import test from 'ava'

import { serve } from '../src/server/serve.js'
import { metric, model, post, startServer } from './serverHarness.js'

const server = await startServer({ maxRows: 16 })
test.after.always(() => server.close())
const port = Number(new URL(server.url).port)

const user = (content: string) => ({ role: 'user', content })
const ok = { messages: [user('Hi')], max_tokens: 2 }

/** Sends `request` as raw bytes and resolves to the status of the reply, or 0 if the connection closed without one. */
async function raw(text: string, atPort = port): Promise<number> {
  const socket = connect(atPort, '127.0.0.1')
  let reply = ''
  socket.on('data', (d) => (reply += d.toString('latin1')))
  socket.on('error', () => {})
  socket.write(text)
  await Promise.race([once(socket, 'close'), new Promise((r) => setTimeout(r, 3000))])
  socket.destroy()
  return Number(/^HTTP\/1\.1 (\d{3})/.exec(reply)?.[1] ?? 0)
}

const get = (target: string, host = '127.0.0.1') => raw(`GET ${target} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`)

test.serial('hostile request targets are answered and the server lives', async (t) => {
  for (const target of ['//a:99999/', '//[/', 'http://[/', '//%zz/', '/%zz/', '*', 'http://127.0.0.1:99999/health', '/\u0000']) {
    const status = await get(target)
    t.true(status >= 400 && status < 500, `${JSON.stringify(target)} answered ${status}`)
  }
  t.is(await get('http://127.0.0.1/health'), 200, 'the absolute form of a good target is served')
  t.is((await fetch(`${server.url}health`)).status, 200)
})

test.serial('1,500 sampled requests (n 1-16) against one server process', async (t) => {
  const generatedBefore = await metric(server.url, 'kvengine_generation_tokens_total')
  let next = 0
  const statuses = new Map<number, number>()
  const client = async () => {
    while (next < 1500) {
      const i = next++
      const body = { messages: [user(`Say something about the number ${i % 50}.`)], n: 1 + (i % 16), max_tokens: 2, temperature: 0.9 }
      const status = (await post(server.url, 'v1/chat/completions', body)).status
      statuses.set(status, (statuses.get(status) ?? 0) + 1)
    }
  }
  await Promise.all(Array.from({ length: 8 }, client))
  t.deepEqual([...statuses], [[200, 1500]])
  t.true((await metric(server.url, 'kvengine_generation_tokens_total')) - generatedBefore >= 1500 * 2)
})

test.serial('a web page cannot drive it: text/plain bodies are 415 and start nothing', async (t) => {
  const before = await metric(server.url, 'kvengine_generation_tokens_total')
  const res = await fetch(`${server.url}v1/chat/completions`, { method: 'POST', body: JSON.stringify(ok) }) // text/plain, as a no-cors page sends
  t.is(res.status, 415)
  t.like(await res.json(), { error: { code: 'unsupported_media_type' } })
  const form = await fetch(`${server.url}v1/completions`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'prompt=a' })
  t.is(form.status, 415)
  t.is(await metric(server.url, 'kvengine_generation_tokens_total'), before)
})

test.serial('a foreign Host header (DNS rebinding) is 403; loopback names and --allowed-hosts pass', async (t) => {
  t.is(await get('/v1/models', 'evil.example'), 403)
  t.is(await get('/v1/models', 'evil.example:8080'), 403)
  t.is(await raw('GET /v1/models HTTP/1.0\r\n\r\n'), 403, 'no Host header at all')
  t.is(await get('/v1/models', `localhost:${port}`), 200)
  t.is(await get('/v1/models', `[::1]:${port}`), 200)
  const open = await startServer({ allowedHosts: ['kv.internal'] })
  const openPort = Number(new URL(open.url).port)
  t.is(await raw(`GET /v1/models HTTP/1.1\r\nHost: kv.internal:${openPort}\r\nConnection: close\r\n\r\n`, openPort), 200)
  t.is(await raw(`GET /v1/models HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n`, openPort), 403)
  await open.close()
})

test.serial('CORS is off by default and opens only to the origins given', async (t) => {
  const preflight = (url: string, origin: string) =>
    fetch(`${url}v1/chat/completions`, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' } })
  const refused = await preflight(server.url, 'https://evil.example')
  t.is(refused.status, 403)
  t.is(refused.headers.get('access-control-allow-origin'), null)
  const plain = await fetch(`${server.url}v1/models`, { headers: { origin: 'https://evil.example' } })
  t.is(plain.headers.get('access-control-allow-origin'), null)

  const cors = await startServer({ corsOrigins: ['https://app.example'] })
  const allowed = await preflight(cors.url, 'https://app.example')
  t.is(allowed.status, 204)
  t.is(allowed.headers.get('access-control-allow-origin'), 'https://app.example')
  t.regex(allowed.headers.get('access-control-allow-headers') ?? '', /content-type/)
  const res = await fetch(`${cors.url}v1/models`, { headers: { origin: 'https://app.example' } })
  t.is(res.headers.get('access-control-allow-origin'), 'https://app.example')
  t.is((await preflight(cors.url, 'https://evil.example')).status, 403)
  await cors.close()
})

test.serial('the chat page may not be framed and runs only its own script', async (t) => {
  const page = await fetch(server.url)
  t.is(page.headers.get('x-frame-options'), 'DENY')
  t.regex(page.headers.get('content-security-policy') ?? '', /frame-ancestors 'none'/)
  t.regex(page.headers.get('content-security-policy') ?? '', /connect-src 'self'/)
})

test.serial('an API key guards every route but /health and the page; a non-loopback host needs one', async (t) => {
  const keyed = await startServer({ apiKey: 'sk-test-0123456789' })
  const call = (authorization?: string) =>
    fetch(`${keyed.url}v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...(authorization && { authorization }) }, body: JSON.stringify(ok) })
  t.is((await call()).status, 401)
  t.is((await call('Bearer sk-test-0123456788')).status, 401)
  t.is((await call('Bearer sk-test-01234567890')).status, 401)
  t.like(await (await call('Basic c2stdGVzdA==')).json(), { error: { code: 'invalid_api_key' } })
  t.is((await call('Bearer sk-test-0123456789')).status, 200)
  t.is((await fetch(`${keyed.url}metrics`)).status, 401)
  t.is((await fetch(`${keyed.url}v1/models`)).status, 401)
  t.is((await fetch(`${keyed.url}health`)).status, 200)
  t.is((await fetch(keyed.url)).status, 200)
  await keyed.close()

  const error = await t.throwsAsync(serve(model, { host: '0.0.0.0', port: 0, log: () => {} }))
  t.regex(error?.message ?? '', /API key.*--allow-unauthenticated/)
  await t.throwsAsync(serve(model, { port: 0, apiKey: 'short', log: () => {} }), { message: /at least 8 characters/ })
})

const unsupported: [string, unknown][] = [
  ['logit_bias', { 42: 10 }],
  ['frequency_penalty', 0.5],
  ['presence_penalty', -0.5],
  ['best_of', 2],
  ['echo', true],
  ['suffix', 'x'],
  ['functions', [{ name: 'f' }]],
  ['function_call', 'auto'],
  ['no_such_option', 1],
]

test.serial('every parameter we do not implement is a 400 naming it; neutral values pass', async (t) => {
  for (const [param, value] of unsupported) {
    const res = await post(server.url, 'v1/chat/completions', { ...ok, [param]: value })
    t.is(res.status, 400, param)
    t.like(await res.json(), { error: { param, code: 'unsupported_parameter' } }, param)
  }
  const completion = await post(server.url, 'v1/completions', { prompt: 'a', max_tokens: 1, messages: [user('x')] })
  t.like(await completion.json(), { error: { param: 'messages' } }, 'messages on /v1/completions')
  const neutral = { frequency_penalty: 0, presence_penalty: 0, logprobs: false, logit_bias: {}, response_format: { type: 'text' }, user: 'me', tools: null }
  t.is((await post(server.url, 'v1/chat/completions', { ...ok, ...neutral })).status, 200)
})

// Clients that never read: the kernel takes megabytes per loopback socket before the server
// sees any backlog, so the pause and the write timeout are tested on ResponseSink with a response
// that never drains (responseSink.spec.ts) and on BatchLoop with a blocked sink (server-batchloop.spec.ts).

test.serial('--max-connections refuses connections past the cap; a slow header sender is cut at the timeout', async (t) => {
  const capped = await startServer({ maxConnections: 4, timeout: 2 })
  const cappedPort = Number(new URL(capped.url).port)
  const started = performance.now()
  const closedAt = Array.from({ length: 6 }, () => {
    const s = connect(cappedPort, '127.0.0.1')
    s.on('error', () => {}) // those past the cap are reset
    s.resume() // read, so the server's close is seen
    s.write('GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n') // headers never finished
    return new Promise<number>((resolve) => s.once('close', () => resolve(performance.now())))
  })
  const times = await Promise.all(closedAt.map((p) => Promise.race([p, new Promise<number>((r) => setTimeout(() => r(Infinity), 8000))])))
  const early = times.filter((at) => at - started < 1000).length
  t.is(early, 2, 'the two past the cap are dropped at once')
  t.true(times.every((at) => at - started < 6000), `the others are cut by the 2 s header timeout: ${times.map((at) => (at - started).toFixed(0)).join(', ')} ms`)
  t.is((await fetch(`${capped.url}health`)).status, 200)
  await capped.close()
})

test.serial('/health and /metrics answer while a long prompt is prefilled', async (t) => {
  const long = { prompt: 'The history of the lighthouse. '.repeat(250), max_tokens: 1, temperature: 0 }
  const pending = post(server.url, 'v1/completions', long)
  const worst = { health: 0, metrics: 0 }
  for (let i = 0; i < 20; i++) {
    for (const route of ['health', 'metrics'] as const) {
      const at = performance.now()
      await (await fetch(`${server.url}${route}`)).text()
      worst[route] = Math.max(worst[route], performance.now() - at)
    }
    await new Promise((r) => setTimeout(r, 10))
  }
  t.is((await pending).status, 200)
  // A route waiting on the pass would take the whole prefill (seconds); these read JS-side state.
  t.true(worst.health < 500 && worst.metrics < 500, `worst: health ${worst.health.toFixed(0)} ms, metrics ${worst.metrics.toFixed(0)} ms`)
})
