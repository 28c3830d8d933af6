import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import test from 'ava'

import { Engine, KvEngineError, Model, ToolRegistry, type GenerateOptions } from '../index.js'
import { Rng } from '../src/Rng.js'
import { RowState } from '../src/RowState.js'
import { Sampler } from '../src/Sampler.js'
import { ToolRunner } from '../src/ToolRunner.js'
import { calculator } from '../src/calculator/calculator.js'
import { writeSuccessorModel } from './successorModel.js'

const NANOCHAT = ['<|bos|>', '<|assistant_end|>', '<|user_start|>', '<|user_end|>', '<|assistant_start|>', '<|python_start|>', '<|python_end|>', '<|output_start|>', '<|output_end|>']
const CUSTOM = ['<calc>', '</calc>', '<result>', '</result>']
const NANOCHAT_DELIMITERS = { callStart: '<|python_start|>', callEnd: '<|python_end|>', outputStart: '<|output_start|>', outputEnd: '<|output_end|>' }

// Greedy scripts of the successor model. 'a': one calculator call, then the end of the turn.
// 'c': a call in the custom delimiters, whose output leads into a nanochat call. 'h': plain text.
// 'b': text, then <|bos|>.
const dir = mkdtempSync(join(tmpdir(), 'kvengine-tools-'))
const tiny = writeSuccessorModel(
  dir,
  [...NANOCHAT, ...CUSTOM],
  {
    a: '<|python_start|>', '<|python_start|>': '1', 1: '2', 2: '+', '+': '3', 3: '<|python_end|>', '<|output_end|>': '<|assistant_end|>',
    c: '<calc>', '<calc>': '4', 4: '*', '*': '5', 5: '</calc>', '</result>': '<|python_start|>',
    h: 'i', i: '!',
    b: 'y', y: '<|bos|>',
  },
  '<|assistant_end|>',
)
const model = await Model.load(tiny.path)
rmSync(dir, { recursive: true })
const { id } = tiny
const ids = (...texts: string[]) => texts.map(id)
const prompt = (last: string) => ids('<|bos|>', last)
const CUSTOM_DELIMITERS = { callStart: id('<calc>'), callEnd: id('</calc>'), outputStart: id('<result>'), outputEnd: id('</result>') }

const CALL_12_PLUS_3 = ids('<|python_start|>', '1', '2', '+', '3', '<|python_end|>')
const OUTPUT_15 = ids('<|output_start|>', '1', '5', '<|output_end|>')

test('a calculator round trip through the real forward pass: <|output_start|>15<|output_end|> forced with mask 0', async (t) => {
  const engine = new Engine(model)
  const tools = [{ tool: 'calculator', delimiters: NANOCHAT_DELIMITERS }]
  const steps = []
  for await (const step of engine.generate(prompt('a'), { temperature: 0, maxTokens: 32, tools })) steps.push(step)
  t.deepEqual(steps.map((s) => s.tokenColumn[0]), [...CALL_12_PLUS_3, ...OUTPUT_15, id('<|assistant_end|>')])
  t.deepEqual(steps.map((s) => s.tokenMasks[0]), [1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1])
  t.is(steps.map((s) => s.text[0]).join(''), '<|python_start|>12+3<|python_end|><|output_start|>15<|output_end|>', 'forced tokens stream as text too')
  t.is(steps.at(-1)?.finished[0], 'stop')
})

// Serial: model.stats() counts every test's passes, and serial tests run before the others.
test.serial('rows in different states share one batch; a row makes calls with two delimiter sets; finished rows are fed nothing', async (t) => {
  const engine = new Engine(model)
  const options: GenerateOptions = {
    temperature: 0,
    maxTokens: 40,
    // One pass per call, so what each row is fed can be counted exactly: with bursts, a row
    // that stops inside one is fed the rest of it (rewound after).
    multiStep: 1,
    tools: [
      { tool: 'calculator', delimiters: NANOCHAT_DELIMITERS },
      { tool: 'calculator', delimiters: CUSTOM_DELIMITERS },
    ],
  }
  const before = model.stats()
  const [a, c, h] = await engine.generateBatch([prompt('a'), prompt('c'), prompt('h')], options)
  const after = model.stats()
  t.deepEqual(a.tokens, [...CALL_12_PLUS_3, ...OUTPUT_15])
  t.deepEqual(a.masks, [1, 1, 1, 1, 1, 1, 0, 0, 0, 0])
  t.deepEqual(c.tokens, [...ids('<calc>', '4', '*', '5', '</calc>', '<result>', '2', '0', '</result>'), ...CALL_12_PLUS_3, ...OUTPUT_15])
  t.deepEqual(c.masks, [1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0])
  t.is(c.text, '<calc>4*5</calc><result>20</result><|python_start|>12+3<|python_end|><|output_start|>15<|output_end|>')
  t.deepEqual(h.tokens, ids('i', '!'))
  t.deepEqual(h.masks, [1, 1])
  for (const row of [a, c, h]) t.is(row.finishReason, 'stop')
  // Each row is fed every token it kept (its stop token ends it unfed), after a 2-token prompt.
  const fed = a.tokens.length + c.tokens.length + h.tokens.length
  t.is(after.tokensProcessed - before.tokensProcessed, 3 * 2 + fed)
  t.is(after.forwardCalls - before.forwardCalls, c.tokens.length + 1, 'the batch runs until its longest row ends')
})

test("nanochat's vocabulary turns the calculator on by default; tools: false turns it off", async (t) => {
  const engine = new Engine(model)
  const [on] = await engine.generateBatch(prompt('a'), { temperature: 0, maxTokens: 32 })
  t.deepEqual(on.tokens, [...CALL_12_PLUS_3, ...OUTPUT_15])
  const [off] = await engine.generateBatch(prompt('a'), { temperature: 0, maxTokens: 32, tools: false })
  t.deepEqual(off.tokens, CALL_12_PLUS_3, 'no answer is injected; the model ends its turn')
  t.deepEqual(off.masks, [1, 1, 1, 1, 1, 1])
  // As in upstream's engine, <|bos|> ends a row too.
  const [bos] = await engine.generateBatch(prompt('b'), { temperature: 0, maxTokens: 32 })
  t.deepEqual(bos.tokens, ids('y'))
  t.is(bos.finishReason, 'stop')
})

test('forced tokens count toward maxTokens, and a row cut off mid-answer stops there', async (t) => {
  const engine = new Engine(model)
  const [row] = await engine.generateBatch(prompt('a'), { temperature: 0, maxTokens: 8 })
  t.deepEqual(row.tokens, [...CALL_12_PLUS_3, ...OUTPUT_15].slice(0, 8))
  t.deepEqual(row.masks, [1, 1, 1, 1, 1, 1, 0, 0])
  t.is(row.finishReason, 'length')
})

test('tools registered from TypeScript answer calls between their own delimiters; null injects nothing', async (t) => {
  const engine = new Engine(model)
  const seen: string[] = []
  engine.tools.register('shout', (text) => (seen.push(text), `${text}!`)).register('silent', () => null)
  const shout = await engine.generateBatch(prompt('c'), { temperature: 0, maxTokens: 14, tools: [{ tool: 'shout', delimiters: CUSTOM_DELIMITERS }] })
  t.deepEqual(seen, ['4*5'])
  t.true(shout[0].text.startsWith('<calc>4*5</calc><result>4*5!</result>'), shout[0].text)
  const silent = await engine.generateBatch(prompt('c'), { temperature: 0, maxTokens: 14, tools: [{ tool: 'silent', delimiters: CUSTOM_DELIMITERS }] })
  t.deepEqual(silent[0].tokens, ids('<calc>', '4', '*', '5', '</calc>'))
  t.deepEqual(silent[0].masks, [1, 1, 1, 1, 1])
})

test('bad tool options are INVALID_ARGUMENT errors that say what to fix', async (t) => {
  const engine = new Engine(model)
  const run = (tools: unknown) => engine.generateBatch(prompt('a'), { temperature: 0, maxTokens: 8, tools: tools as GenerateOptions['tools'] })
  const cases: [unknown, RegExp][] = [
    ['calculator', /tools must be an array/],
    [[{ tool: 'nope', delimiters: NANOCHAT_DELIMITERS }], /no tool named "nope" is registered \(registered: calculator\)/],
    [[{ tool: 'calculator', delimiters: { ...NANOCHAT_DELIMITERS, callStart: '<|python_begin|>' } }], /callStart: "<\|python_begin\|>" is not a single token/],
    [[{ tool: 'calculator', delimiters: { ...NANOCHAT_DELIMITERS, outputEnd: 100_000 } }], /outputEnd must be a token's text or an id in \[0, 269\)/],
    [[{ tool: 'calculator', delimiters: { ...NANOCHAT_DELIMITERS, callEnd: '<|python_start|>' } }], /callStart and callEnd must be different/],
    [[{ tool: 'calculator', delimiters: NANOCHAT_DELIMITERS }, { tool: 'calculator', delimiters: NANOCHAT_DELIMITERS }], /already opens another tool's calls/],
    [[{ tool: 'calculator' }], /callStart must be a token's text or an id/],
  ]
  for (const [tools, message] of cases) {
    const err = await t.throwsAsync(run(tools), { instanceOf: KvEngineError, message })
    t.is(err?.code, 'INVALID_ARGUMENT')
  }
  t.throws(() => new ToolRegistry().register('', () => null), { instanceOf: KvEngineError, message: /non-empty string name/ })
  engine.tools.register('numeric', (() => 42) as never)
  await t.throwsAsync(run([{ tool: 'numeric', delimiters: NANOCHAT_DELIMITERS }]), { instanceOf: KvEngineError, message: /tool 'numeric' returned number/ })
})

// The state machine alone, driven by scripted tokens instead of a model's samples.

/** A row over the tiny model's tokenizer whose sampler must never be asked: scripts give the tokens. */
function scriptedRow(tools: ToolRegistry = new ToolRegistry().register('calculator', calculator)) {
  const runner = new ToolRunner([{ tool: 'calculator', delimiters: NANOCHAT_DELIMITERS }], tools, model.tokenizer, model.info.vocabSize)
  return new RowState(new Sampler({ temperature: 0 }, new Rng(0)), model.tokenizer.createDecoder(), [], runner)
}

/** Feeds `script` the way the Engine does: a forced token, when one is queued, replaces the scripted sample. */
function drive(row: RowState, script: number[]): void {
  for (const sampled of script) {
    const forced = row.takeForced()
    row.accept(forced >= 0 ? forced : sampled, forced >= 0 ? 0 : 1, sampled === id('<|assistant_end|>') && forced < 0)
    if (row.completed) return
  }
}

test('state machine: a forced token takes precedence over the sample and has mask 0', (t) => {
  const row = scriptedRow()
  const noise = ids('z', 'z', 'z', 'z')
  drive(row, [...ids('<|python_start|>', '7', '*', '6'), ...ids('<|python_end|>'), ...noise, ...ids('k')])
  t.deepEqual(row.tokens, [...ids('<|python_start|>', '7', '*', '6', '<|python_end|>', '<|output_start|>', '4', '2', '<|output_end|>'), id('k')])
  t.deepEqual(row.masks, [1, 1, 1, 1, 1, 0, 0, 0, 0, 1])
  t.is(row.takeForced(), -1)
})

test('state machine: several calls in one row, no result injects nothing, empty calls run nothing', (t) => {
  const calls: string[] = []
  const spy = new ToolRegistry().register('calculator', (text) => (calls.push(text), calculator(text)))
  const row = scriptedRow(spy)
  const script = [
    ...ids('<|python_start|>', '1', '/', '0', '<|python_end|>'), // ZeroDivisionError: no answer
    ...ids('<|python_start|>', '<|python_end|>'), // empty: the tool is not called
    ...ids('<|python_start|>', '9', '<|python_start|>', '2', '+', '2', '<|python_end|>'), // a new start restarts the call
    ...ids('z', 'z', 'z'),
    ...ids('<|python_end|>', 'q'), // an end outside a call is an ordinary token
    id('<|assistant_end|>'),
  ]
  drive(row, script)
  t.deepEqual(calls, ['1/0', '2+2'])
  t.is(row.text, '<|python_start|>1/0<|python_end|><|python_start|><|python_end|><|python_start|>9<|python_start|>2+2<|python_end|><|output_start|>4<|output_end|><|python_end|>q')
  t.deepEqual(row.masks.filter((m) => m === 0).length, 3)
  t.is(row.finishReason, 'stop', '<|assistant_end|> completes the row')
  t.false(row.inToolCall)
})

test('state machine: the row is in a call between the delimiters only', (t) => {
  const row = scriptedRow()
  t.false(row.inToolCall)
  drive(row, ids('<|python_start|>', '1'))
  t.true(row.inToolCall)
  drive(row, ids('<|python_end|>'))
  t.false(row.inToolCall)
  t.is(row.takeForced(), id('<|output_start|>'))
})
