// Backpressure on one response: the sink reports `blocked` past its unsent-bytes cap, wakes the
// loop when the client drains, and drops a client that takes no bytes for the write timeout.
import { EventEmitter } from 'node:events'
import type { ServerResponse } from 'node:http'

import test from 'ava'

import { OpenAiFormat } from '../src/server/OpenAiFormat.js'
import { ToolCallFormat, type ToolCallFormatName } from '../src/ToolCallFormat.js'
import { ResponseSink } from '../src/server/ResponseSink.js'

/** A response whose socket hands bytes on only when `flush` says so, as a client that reads at will. */
class StalledResponse extends EventEmitter {
  writableLength = 0
  destroyed = false
  writableEnded = false
  headersSent = false
  readonly socket = { bytesWritten: 0, writableLength: 0 }
  writeHead() {
    this.headersSent = true
  }
  flushHeaders() {}
  write(chunk: string) {
    this.writableLength += Buffer.byteLength(chunk)
    this.socket.bytesWritten += Buffer.byteLength(chunk)
    this.socket.writableLength = this.writableLength
    return false
  }
  end(chunk = '') {
    this.write(chunk)
    this.writableEnded = true
  }
  destroy() {
    this.destroyed = true
    this.emit('close')
  }
  /** The client reads `bytes`; 'drain' once nothing is left. */
  flush(bytes: number) {
    this.writableLength = Math.max(0, this.writableLength - bytes)
    this.socket.writableLength = this.writableLength
    if (this.writableLength === 0) this.emit('drain')
  }
}

function sinkOver(res: StalledResponse, writeTimeoutMs: number) {
  const sink = new ResponseSink(res as unknown as ServerResponse, new OpenAiFormat('chat', 'm'), { n: 1, stream: true, includeUsage: false, maxUnsentBytes: 1024, writeTimeoutMs })
  sink.open()
  return sink
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

test('blocked past the cap, unblocked (and the loop woken) when the client drains', (t) => {
  const res = new StalledResponse()
  const sink = sinkOver(res, 60_000)
  let woken = 0
  sink.onUnblocked = () => woken++
  while (!sink.blocked) sink.text(0, 'word ')
  t.true(res.writableLength >= 1024)
  sink.text(0, 'x'.repeat(1024)) // what a step in flight still writes
  res.flush(512)
  t.true(sink.blocked, 'still over the cap')
  t.is(woken, 0)
  res.flush(Infinity)
  t.false(sink.blocked)
  t.is(woken, 1)
})

test('a client that takes no bytes for the write timeout is dropped; one that reads slowly is not', async (t) => {
  const idle = new StalledResponse()
  const idleSink = sinkOver(idle, 100)
  while (!idleSink.blocked) idleSink.text(0, 'word ')
  const slow = new StalledResponse()
  const slowSink = sinkOver(slow, 100)
  while (!slowSink.blocked) slowSink.text(0, 'word ')
  // The slow one's socket keeps taking a few bytes (the kernel's buffer emptying as it reads).
  for (let i = 0; i < 6; i++) {
    slow.socket.writableLength -= 8
    await sleep(50)
  }
  t.true(idle.destroyed, 'no byte taken in 100 ms: dropped, which ends its job')
  t.false(slow.destroyed, 'a reader that takes bytes keeps its stream')
  slow.flush(Infinity)
  await sleep(150)
  t.false(slow.destroyed, 'unblocked: no timer left running')
})

test('a whole (non-streaming) response is never blocked', (t) => {
  const res = new StalledResponse()
  const sink = new ResponseSink(res as unknown as ServerResponse, new OpenAiFormat('chat', 'm'), { n: 1, stream: false, includeUsage: false, maxUnsentBytes: 1024, writeTimeoutMs: 10 })
  sink.open()
  for (let i = 0; i < 1000; i++) sink.text(0, 'word ')
  t.false(sink.blocked)
})

/** A response that keeps every SSE event written to it. */
class RecordingResponse extends EventEmitter {
  writableLength = 0
  destroyed = false
  headersSent = false
  readonly socket = { bytesWritten: 0, writableLength: 0 }
  readonly events: Record<string, unknown>[] = []
  writeHead() {
    this.headersSent = true
  }
  flushHeaders() {}
  write(chunk: string) {
    for (const line of chunk.split('\n')) if (line.startsWith('data: {')) this.events.push(JSON.parse(line.slice(6)) as Record<string, unknown>)
    return true
  }
  end(chunk = '') {
    this.write(chunk)
  }
  destroy() {
    this.destroyed = true
  }
}

/** A streamed chat job of `n` choices whose replies may be calls (`tool_choice` auto) in `format`. */
function autoToolSink(n: number, names: string[], format: ToolCallFormatName) {
  const res = new RecordingResponse()
  const toolCalls = { names, required: false, format: new ToolCallFormat(format) }
  const sink = new ResponseSink(res as unknown as ServerResponse, new OpenAiFormat('chat', 'm'), { n, stream: true, includeUsage: false, maxUnsentBytes: 1 << 20, writeTimeoutMs: 1000, toolCalls })
  return { res, sink }
}

test('tool_choice auto, streamed: a reply starting with "{" is held and sent as its call; any other streams as text at once', (t) => {
  const { res, sink } = autoToolSink(3, ['add'], 'json')
  sink.open()
  const deltas = () => res.events.map((e) => (e.choices as { index: number; delta: Record<string, unknown>; finish_reason: string | null }[])[0])
  sink.text(0, ' ')
  sink.text(0, '{"name":"add",')
  sink.text(1, ' Hel')
  t.deepEqual(deltas().slice(3).map((d) => [d.index, d.delta.content]), [[1, ' Hel']], 'the text choice streams at its first letter, the call is held')
  sink.text(0, '"arguments":{"a":2,"b":3}}')
  sink.text(1, 'lo')
  sink.finish(0, 'stop')
  sink.finish(1, 'stop')
  sink.text(2, '{not a call')
  sink.finish(2, 'length')
  const d = deltas().slice(3)
  const call = d.find((x) => x.index === 0 && x.delta.tool_calls) as { delta: { tool_calls: { function: { name: string; arguments: string } }[] } }
  t.deepEqual(call.delta.tool_calls[0].function, { name: 'add', arguments: '{"a":2,"b":3}' })
  t.deepEqual(d.filter((x) => x.finish_reason).map((x) => [x.index, x.finish_reason]), [[0, 'tool_calls'], [1, 'stop'], [2, 'length']])
  t.is(d.filter((x) => x.index === 1).map((x) => x.delta.content ?? '').join(''), ' Hello')
  t.is(d.filter((x) => x.index === 2).map((x) => x.delta.content ?? '').join(''), '{not a call', 'a cut reply that is no call goes out as text')
})

test("tool_choice auto in Qwen's format: a reply held while it may open <tool_call>, its blocks sent as calls; one that turns out text streams whole", (t) => {
  const { res, sink } = autoToolSink(2, ['add', 'neg'], 'hermes')
  sink.open()
  const deltas = () => res.events.map((e) => (e.choices as { index: number; delta: Record<string, unknown>; finish_reason: string | null }[])[0]).slice(2)
  sink.text(0, '<tool_')
  sink.text(1, '<to')
  t.deepEqual(deltas(), [], 'both may still be calls')
  sink.text(1, 'day>')
  t.deepEqual(deltas().map((d) => [d.index, d.delta.content]), [[1, '<today>']], 'the text choice streams once it cannot be a call, from its first character')
  sink.text(0, 'call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>\n<tool_call>\n{"name": "neg", "arguments": {"x": 1}}\n</tool_call>')
  sink.finish(0, 'stop')
  sink.finish(1, 'stop')
  const call = deltas().find((x) => x.index === 0 && x.delta.tool_calls) as { delta: { tool_calls: { index: number; function: { name: string; arguments: string } }[] } }
  t.deepEqual(call.delta.tool_calls.map((c) => [c.index, c.function]), [[0, { name: 'add', arguments: '{"a":2,"b":3}' }], [1, { name: 'neg', arguments: '{"x":1}' }]])
  t.deepEqual(deltas().filter((x) => x.finish_reason).map((x) => [x.index, x.finish_reason]), [[0, 'tool_calls'], [1, 'stop']])
})
