// nanochat's calculator during serving: a scripted model with nanochat's vocabulary writes a
// call, the server forces the answer, and the forced tokens stream as text like the rest.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import test from 'ava'

import { Model } from '../index.js'
import { serve } from '../src/server/serve.js'
import { root } from './models.js'
import { writeSuccessorModel } from './successorModel.js'

const NANOCHAT = ['<|bos|>', '<|assistant_end|>', '<|user_start|>', '<|user_end|>', '<|assistant_start|>', '<|python_start|>', '<|python_end|>', '<|output_start|>', '<|output_end|>']
// Greedy script: after 'a', the call 12+3, then (once the answer is forced) the end of the turn.
const dir = mkdtempSync(join(tmpdir(), 'kvengine-serve-tools-'))
const tiny = writeSuccessorModel(
  dir,
  NANOCHAT,
  { a: '<|python_start|>', '<|python_start|>': '1', 1: '2', 2: '+', '+': '3', 3: '<|python_end|>', '<|output_end|>': '<|assistant_end|>' },
  '<|assistant_end|>',
)
const model = await Model.load(tiny.path)
rmSync(dir, { recursive: true })
const server = await serve(model, { port: 0, maxRows: 4, log: () => {} })
test.after.always(async () => {
  await server.close()
  model.dispose()
})

const TRANSCRIPT = '<|python_start|>12+3<|python_end|><|output_start|>15<|output_end|>'
const ask = (stream: boolean) =>
  fetch(`${server.url}v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: 'a', temperature: 0, max_tokens: 32, stream, n: 2 }) })

test('the calculator answers during serving; its forced tokens are part of the text and the usage', async (t) => {
  const body = (await (await ask(false)).json()) as { choices: { text: string; finish_reason: string }[]; usage: { completion_tokens: number } }
  t.deepEqual(body.choices.map((c) => c.text), [TRANSCRIPT, TRANSCRIPT])
  t.deepEqual(body.choices.map((c) => c.finish_reason), ['stop', 'stop'])
  t.is(body.usage.completion_tokens, 2 * 10, 'six sampled and four forced tokens per choice')
})

test('forced tokens stream as text, one chunk per token', async (t) => {
  const events = (await (await ask(true)).text()).split('\n\n').filter((e) => e.startsWith('data: {'))
  const pieces = events.map((e) => JSON.parse(e.slice(6)).choices[0]).filter((c) => c.index === 0 && c.text)
  t.is(pieces.map((c) => c.text).join(''), TRANSCRIPT)
  t.deepEqual(pieces.slice(-4).map((c) => c.text), ['<|output_start|>', '1', '5', '<|output_end|>'])
})

test('a nanochat checkpoint is served with nanochat\'s own chat rendering', async (t) => {
  const nanochat = await Model.load(join(root, 'crate', 'tests', 'fixtures', 'nanochat', 'base_checkpoints', 'd4'))
  const tiny = await serve(nanochat, { port: 0, maxRows: 2, log: () => {} })
  t.teardown(async () => {
    await tiny.close()
    nanochat.dispose()
  })
  const messages = [{ role: 'system' as const, content: 'Be brief.' }, { role: 'user' as const, content: 'What is 2+2?' }]
  const chat = (body: object) => fetch(`${tiny.url}v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
  const res = await chat({ messages, temperature: 0, max_tokens: 8 })
  t.is(res.status, 200)
  const body = (await res.json()) as { usage: { prompt_tokens: number } }
  t.is(body.usage.prompt_tokens, nanochat.renderForCompletion(messages).length, '<|bos|><|user_start|>Be brief.\n\nWhat is 2+2?<|user_end|><|assistant_start|>')
  const unpaired = await chat({ messages: [messages[1], messages[1]] })
  t.is(unpaired.status, 400, 'nanochat needs alternating turns')
})

test('the calculator keeps working beside a constrained request served at the same time (one batch loop, shared steps)', async (t) => {
  const constrained = fetch(`${server.url}v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: 'b', temperature: 0, max_tokens: 16, response_format: { type: 'json_schema', json_schema: { name: 'n', schema: { type: 'integer', minimum: 0, maximum: 99 } } } }),
  })
  const [calc, json] = await Promise.all([ask(false), constrained])
  const calcBody = (await calc.json()) as { choices: { text: string }[] }
  t.deepEqual(calcBody.choices.map((c) => c.text), [TRANSCRIPT, TRANSCRIPT])
  const jsonBody = (await json.json()) as { choices: { text: string; finish_reason: string }[] }
  const value = JSON.parse(jsonBody.choices[0].text) as unknown
  t.true(Number.isInteger(value) && (value as number) >= 0 && (value as number) <= 99, jsonBody.choices[0].text)
  t.is(jsonBody.choices[0].finish_reason, 'stop')
})
