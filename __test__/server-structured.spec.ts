// Structured output through the server, as OpenAI's own client asks for it: `response_format`
// with a JSON schema or `json_object`, several choices, streamed and not; every choice parses and
// ajv validates it. What the server cannot honour is a 400 naming the field.
import test from 'ava'
import Ajv from 'ajv'
import OpenAI from 'openai'

import { Engine, Model } from '../index.js'
import { archModelPath, makeArchModel } from '../scripts/archModels.js'
import { serve } from '../src/server/serve.js'
import { modelPath } from './models.js'
import { SCHEMAS } from './schemas.js'
import { chatPrompt, model, post, startServer } from './serverHarness.js'

const server = await startServer()
const client = new OpenAI({ baseURL: `${server.url}v1`, apiKey: 'unused' })
const MODEL = 'SmolLM2-135M-Instruct.Q8_0'
// A random-weight model: nothing but the constraint can make its output valid.
makeArchModel('qwen2', modelPath('Q4_1'))
const randomModel = await Model.load(archModelPath('qwen2'))
const randomServer = await serve(randomModel, { port: 0, maxRows: 8, log: () => {} })
test.after.always(async () => {
  await server.close()
  await randomServer.close()
  randomModel.dispose()
})

const ajv = new Ajv({ strict: true })
const person = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 20 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    role: { enum: ['admin', 'user', 'guest'] },
    tags: { type: 'array', items: { type: 'string', maxLength: 10 }, minItems: 1, maxItems: 3 },
  },
  required: ['name', 'age', 'role', 'tags'],
  additionalProperties: false,
}
const messages = [{ role: 'user' as const, content: 'Describe a fictional person as JSON with a name, an age, a role and some tags.' }]
const responseFormat = { type: 'json_schema' as const, json_schema: { name: 'person', schema: person, strict: true } }

/** One schema's choices, asked whole and streamed: chat for a model with a template, completions
 * (with llama-server's `response_format`) for the random model, which has none. */
async function choices(openai: OpenAI, chat: boolean, name: string, schema: object): Promise<{ whole: string[]; streamed: string[] }> {
  const common = { n: 3, temperature: 1, seed: 5, max_tokens: 150, response_format: { type: 'json_schema' as const, json_schema: { name, schema } } }
  const streamed = ['', '', '']
  if (chat) {
    const whole = await openai.chat.completions.create({ ...common, messages })
    for await (const chunk of await openai.chat.completions.create({ ...common, messages, stream: true })) for (const c of chunk.choices) streamed[c.index] += c.delta.content ?? ''
    return { whole: whole.choices.map((c) => c.message.content ?? ''), streamed }
  }
  const ask = { ...common, prompt: 'A record:' } as unknown as OpenAI.CompletionCreateParamsNonStreaming
  const whole = await openai.completions.create(ask)
  for await (const chunk of await openai.completions.create({ ...ask, stream: true })) for (const c of chunk.choices) streamed[c.index] += c.text
  return { whole: whole.choices.map((c) => c.text), streamed }
}

for (const [label, url, chat] of [
  ['SmolLM2-135M (chat)', server.url, true],
  ['a random-weight model (completions)', randomServer.url, false],
] as const) {
  test.serial(`${label}: four schema shapes, n 3, whole and streamed: every choice parses and validates`, async (t) => {
    const openai = new OpenAI({ baseURL: `${url}v1`, apiKey: 'unused' })
    let checked = 0
    for (const [name, schema] of Object.entries(SCHEMAS)) {
      const validate = ajv.compile(schema)
      const { whole: texts, streamed } = await choices(openai, chat, name, schema)
      for (const text of [...texts, ...streamed]) {
        let value: unknown
        t.notThrows(() => (value = JSON.parse(text)), `${name}: ${text}`)
        t.true(validate(value), `${name}: ${text} ${ajv.errorsText(validate.errors)}`)
        checked++
      }
      t.deepEqual(streamed, texts, `${name}: the same seed streams what it answers whole`)
    }
    t.is(checked, Object.keys(SCHEMAS).length * 6)
  })
}

test.serial('json_schema: three choices, each one valid JSON for the schema', async (t) => {
  const validate = ajv.compile(person)
  const r = await client.chat.completions.create({ model: MODEL, messages, n: 3, temperature: 1, seed: 9, max_tokens: 120, response_format: responseFormat })
  t.is(r.choices.length, 3)
  for (const choice of r.choices) {
    t.is(choice.finish_reason, 'stop', choice.message.content ?? '')
    const value = JSON.parse(choice.message.content ?? '')
    t.true(validate(value), `${choice.message.content} ${ajv.errorsText(validate.errors)}`)
  }
})

test.serial('json_schema streamed: the deltas of each choice add up to valid JSON', async (t) => {
  const validate = ajv.compile(person)
  const stream = await client.chat.completions.create({ model: MODEL, messages, n: 3, temperature: 0.8, seed: 4, max_tokens: 120, response_format: responseFormat, stream: true })
  const texts = ['', '', '']
  for await (const chunk of stream) for (const c of chunk.choices) texts[c.index] += c.delta.content ?? ''
  for (const text of texts) t.true(validate(JSON.parse(text)), `${text} ${ajv.errorsText(validate.errors)}`)
})

test.serial('json_object: any JSON object', async (t) => {
  const r = await client.chat.completions.create({ model: MODEL, messages, temperature: 0, max_tokens: 80, response_format: { type: 'json_object' } })
  const value = JSON.parse(r.choices[0].message.content ?? '') as unknown
  t.is(typeof value, 'object')
  t.false(Array.isArray(value))
})

test.serial('response_format the server cannot honour is a 400 naming the field', async (t) => {
  const refused = async (format: unknown, param: string, message: RegExp) => {
    const res = await post(server.url, 'v1/chat/completions', { model: MODEL, messages, max_tokens: 8, response_format: format })
    t.is(res.status, 400)
    const { error } = (await res.json()) as { error: { param: string; message: string } }
    t.is(error.param, param)
    t.regex(error.message, message)
  }
  await refused({ type: 'xml' }, 'response_format.type', /'text', 'json_object' or 'json_schema'/)
  await refused({ type: 'json_schema' }, 'response_format.json_schema', /must be an object/)
  await refused({ type: 'json_schema', json_schema: { name: 'p', schema: { type: 'foo' } } }, 'response_format.json_schema.schema', /could not be compiled/)
  await refused({ type: 'json_schema', json_schema: { name: 'p', schema: person, extra: 1 } }, 'response_format.json_schema.extra', /not supported/)
  const completions = await post(server.url, 'v1/completions', { model: MODEL, prompt: 'Hi', max_tokens: 8, response_format: { type: 'json_object', schema: {} } })
  t.is(completions.status, 400, 'the completions endpoint checks it as chat does')
})

test.serial("tokenize and detokenize in llama-server's shape, under /v1 too", async (t) => {
  const text = 'Hello, world!'
  const want = model.tokenizer.encode(text)
  for (const prefix of ['', 'v1/']) {
    const tokens = (await (await post(server.url, `${prefix}tokenize`, { content: text })).json()) as { tokens: number[] }
    t.deepEqual(tokens.tokens, want)
    const pieces = (await (await post(server.url, `${prefix}tokenize`, { content: text, with_pieces: true })).json()) as { tokens: { id: number; piece: string }[] }
    t.is(pieces.tokens.map((p) => p.piece).join(''), text)
    const back = (await (await post(server.url, `${prefix}detokenize`, { tokens: want })).json()) as { content: string }
    t.is(back.content, text)
  }
  const bad = await post(server.url, 'tokenize', { content: text, pieces: true })
  t.is(bad.status, 400)
  t.like(await bad.json(), { error: { param: 'pieces', code: 'unsupported_parameter' } })
  t.is((await post(server.url, 'detokenize', { tokens: [-1] })).status, 400)
})

test.serial('logprobs: chat and completions in OpenAI shapes, streamed and whole, consistent with the Engine', async (t) => {
  const ask = { model: MODEL, messages, temperature: 0, max_tokens: 8 } as const
  const whole = await client.chat.completions.create({ ...ask, logprobs: true, top_logprobs: 2 })
  const content = whole.choices[0].logprobs?.content ?? []
  const [row] = await new Engine(model).generateBatch(chatPrompt(messages[0].content), { temperature: 0, maxTokens: 8, logprobs: 2 })
  t.is(content.length, row.tokens.length)
  t.is(content.map((c) => c.token).join(''), whole.choices[0].message.content ?? '')
  for (const [i, c] of content.entries()) {
    t.true(Math.abs(c.logprob - (row.logprobs?.[i]?.logprob ?? NaN)) < 1e-6, `token ${i}`)
    t.is(c.top_logprobs.length, 2)
    t.is(c.top_logprobs[0].token, c.token, 'greedy takes the most likely token')
    t.deepEqual(c.bytes, Array.from(Buffer.from(c.token)))
  }
  const stream = await client.chat.completions.create({ ...ask, logprobs: true, top_logprobs: 2, stream: true })
  const streamed: number[] = []
  for await (const chunk of stream) for (const c of chunk.choices[0]?.logprobs?.content ?? []) streamed.push(c.logprob)
  t.deepEqual(streamed, content.map((c) => c.logprob))
  const plain = await client.chat.completions.create(ask)
  t.is(plain.choices[0].logprobs, null)
  const legacy = await client.completions.create({ model: MODEL, prompt: 'The capital of France is', temperature: 0, max_tokens: 5, logprobs: 3 })
  const lp = legacy.choices[0].logprobs
  t.is(lp?.tokens?.join(''), legacy.choices[0].text)
  t.is(lp?.top_logprobs?.[0] && Object.keys(lp.top_logprobs[0]).length, 3)
  t.deepEqual(lp?.text_offset?.[0], 0)
  const refused = await post(server.url, 'v1/chat/completions', { ...ask, top_logprobs: 2 })
  t.is(refused.status, 400)
  t.like(await refused.json(), { error: { param: 'top_logprobs' } })
})

const weather = {
  type: 'function' as const,
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 20 }, unit: { enum: ['celsius', 'fahrenheit'] } }, required: ['city', 'unit'], additionalProperties: false },
  },
}
const add = {
  type: 'function' as const,
  function: { name: 'add', parameters: { type: 'object', properties: { a: { type: 'integer', minimum: -1000, maximum: 1000 }, b: { type: 'integer', minimum: -1000, maximum: 1000 } }, required: ['a', 'b'], additionalProperties: false } },
}

test.serial("tools with tool_choice 'required' or a named function: every choice is a call whose arguments validate, whole and streamed", async (t) => {
  const validators = new Map([weather, add].map((tool) => [tool.function.name, ajv.compile(tool.function.parameters)]))
  const ask = { model: MODEL, messages: [{ role: 'user' as const, content: 'What is the weather in Paris?' }], tools: [weather, add], n: 2, temperature: 1, seed: 3, max_tokens: 80 }
  for (const toolChoice of ['required', { type: 'function', function: { name: 'add' } }] as const) {
    const whole = await client.chat.completions.create({ ...ask, tool_choice: toolChoice })
    const calls = whole.choices.map((c) => {
      t.is(c.finish_reason, 'tool_calls')
      t.is(c.message.content, null)
      return c.message.tool_calls?.[0]
    })
    const streamed = new Map<number, { name: string; args: string; id: string }>()
    const finishes: (string | null)[] = []
    for await (const chunk of await client.chat.completions.create({ ...ask, tool_choice: toolChoice, stream: true })) {
      for (const c of chunk.choices) {
        for (const d of c.delta.tool_calls ?? []) {
          const got = streamed.get(c.index) ?? { name: '', args: '', id: '' }
          streamed.set(c.index, { name: got.name + (d.function?.name ?? ''), args: got.args + (d.function?.arguments ?? ''), id: got.id + (d.id ?? '') })
        }
        if (c.finish_reason) finishes[c.index] = c.finish_reason
      }
    }
    t.deepEqual(finishes, ['tool_calls', 'tool_calls'])
    for (const call of [...calls.map((c) => ({ name: c?.type === 'function' ? c.function.name : '', args: c?.type === 'function' ? c.function.arguments : '' })), ...streamed.values()]) {
      if (typeof toolChoice === 'object') t.is(call.name, 'add')
      const validate = validators.get(call.name)
      t.truthy(validate, `a call of ${call.name}`)
      t.true(validate?.(JSON.parse(call.args)), `${call.name}(${call.args})`)
    }
  }
})

test.serial('a tool result goes back in and the conversation carries on; what the server cannot honour is a 400', async (t) => {
  const messages = [
    { role: 'user' as const, content: 'What is 2 + 3?' },
    { role: 'assistant' as const, content: null, tool_calls: [{ id: 'call_1', type: 'function' as const, function: { name: 'add', arguments: '{"a":2,"b":3}' } }] },
    { role: 'tool' as const, tool_call_id: 'call_1', content: '5' },
  ]
  const reply = await client.chat.completions.create({ model: MODEL, messages, tools: [add], tool_choice: 'none', temperature: 0, max_tokens: 20 })
  t.is(reply.choices[0].finish_reason === 'stop' || reply.choices[0].finish_reason === 'length', true)
  t.true((reply.choices[0].message.content ?? '').length > 0)
  const again = await client.chat.completions.create({ model: MODEL, messages, tools: [add], tool_choice: 'required', temperature: 0, max_tokens: 40 })
  t.is(again.choices[0].message.tool_calls?.[0]?.type === 'function' && again.choices[0].message.tool_calls[0].function.name, 'add')
  const refused = async (body: object, param: string) => {
    const res = await post(server.url, 'v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, ...body })
    t.is(res.status, 400, param)
    t.like(await res.json(), { error: { param } }, param)
  }
  await refused({ tools: [add], tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice')
  await refused({ tools: [{ type: 'function', function: { name: 'bad name' } }], tool_choice: 'required' }, 'tools[0].function.name')
  await refused({ tools: [add], tool_choice: 'required', response_format: { type: 'json_object' } }, 'response_format')
})

test.serial("tool_choice 'auto' (the default with tools): each choice is text or a call of one of the tools, never a call of something else", async (t) => {
  for (const tool_choice of [undefined, 'auto' as const]) {
    const r = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Add 2 and 3.' }], tools: [add, weather], tool_choice, n: 3, temperature: 1, seed: 8, max_tokens: 40 })
    for (const c of r.choices) {
      const call = c.message.tool_calls?.[0]
      if (c.finish_reason === 'tool_calls') t.true(call?.type === 'function' && ['add', 'get_weather'].includes(call.function.name) && typeof JSON.parse(call.function.arguments) === 'object')
      else t.true(typeof c.message.content === 'string' && c.message.tool_calls === undefined, JSON.stringify(c))
    }
  }
})
