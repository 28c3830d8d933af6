// Constrained decoding (issue 33): JSON schemas, Lark grammars and regular expressions compiled by
// llguidance against the model's vocabulary. Outputs are checked by independent means: ajv
// validates every JSON output against its schema, and the mask of one pass is checked token by
// token against what each token's text is.
import test from 'ava'
import Ajv from 'ajv'

import { Engine, Grammar, KvEngineError, Model } from '../index.js'
import { archModelPath, makeArchModel } from '../scripts/archModels.js'
import { chatml, modelPath } from './models.js'
import { SCHEMAS } from './schemas.js'

const smol = await Model.load(modelPath('Q8_0'))
// Random weights: nothing but the constraint can make its output valid.
makeArchModel('qwen2', modelPath('Q4_1'))
const random = await Model.load(archModelPath('qwen2'))

const ajv = new Ajv({ strict: true })

for (const [label, model] of [
  ['SmolLM2-135M Q8_0', smol],
  ['a random-weight Qwen2 layer pair', random],
] as const) {
  test(`every output of ${label} parses and validates against its schema, sampled (3 per prompt) and greedy`, async (t) => {
    const engine = new Engine(model)
    const prompt = model.tokenizer.encode(chatml('Reply with the JSON object asked for.'), { special: true })
    let outputs = 0
    for (const [name, schema] of Object.entries(SCHEMAS)) {
      const validate = ajv.compile(schema)
      for (const sampling of [{ temperature: 1, numSamples: 3, seed: 7 }, { temperature: 0 }]) {
        const rows = await engine.generateBatch(prompt, { ...sampling, jsonSchema: schema, maxTokens: 200 })
        for (const row of rows) {
          t.is(row.finishReason, 'stop', `${name}: ${row.text}`)
          let value: unknown
          t.notThrows(() => (value = JSON.parse(row.text)), `${name}: ${row.text}`)
          t.true(validate(value), `${name}: ${row.text} ${ajv.errorsText(validate.errors)}`)
          outputs++
        }
      }
    }
    t.is(outputs, Object.keys(SCHEMAS).length * 4)
  })
}

test('a regex and a Lark grammar bound the whole output', async (t) => {
  const engine = new Engine(random)
  const prompt = random.tokenizer.encode('Hello', { special: false })
  for (const row of await engine.generateBatch(prompt, { regex: '[a-c]{3}-[0-9]{2,4}', temperature: 1, numSamples: 4, seed: 3, maxTokens: 64 })) {
    t.regex(row.text, /^[a-c]{3}-[0-9]{2,4}$/)
  }
  const grammar = 'start: "answer: " ("yes" | "no") "." '
  for (const row of await engine.generateBatch(prompt, { grammar, temperature: 1, numSamples: 4, seed: 5, maxTokens: 64 })) {
    t.regex(row.text, /^answer: (yes|no)\.$/)
    t.is(row.finishReason, 'stop')
  }
})

test("a grammar's end token ends the row as no text, even where the caller's stop tokens leave it out", async (t) => {
  const engine = new Engine(smol)
  const prompt = smol.tokenizer.encode(chatml('How many legs does a spider have? Answer with a number.'), { special: true })
  const rows = await engine.generateBatch(prompt, { regex: '[0-9]+', stopTokens: [], temperature: 1, numSamples: 6, seed: 1, maxTokens: 12, logprobs: 0 })
  for (const row of rows) {
    t.regex(row.text, /^[0-9]+$/)
    t.is(row.logprobs?.length, row.tokens.length, 'one log-probability per token kept, none for the end token')
  }
  // The end token is allowed only once the grammar is complete; where it was drawn, the row ended there.
  t.true(rows.some((r) => r.finishReason === 'stop'), rows.map((r) => `${r.finishReason}:${r.text}`).join(' '))
})

test("one pass's mask allows exactly the tokens whose text can start the output, and keeps their logits", async (t) => {
  const digits = await smol.compileGrammar({ regex: '[0-9]+' })
  const prompt = smol.tokenizer.encode(chatml('Pick a number.'), { special: true })
  const free = smol.createCache(1, prompt.length + 1)
  const masked = smol.createCache(1, prompt.length + 1)
  const want = await smol.forward(free, [prompt])
  const got = await smol.forward(masked, [prompt], { constraints: [digits] })
  let allowed = 0
  for (let id = 0; id < smol.info.vocabSize; id++) {
    // The oracle: a token may start a run of digits when its text is digits alone (special
    // tokens decode to their names, which are not).
    const text = smol.tokenizer.decode([id])
    if (/^[0-9]+$/.test(text)) {
      allowed++
      if (got.logits[id] !== want.logits[id]) t.fail(`token ${id} (${JSON.stringify(text)}) is allowed but its logit changed`)
    } else if (got.logits[id] !== -Infinity) {
      t.fail(`token ${id} (${JSON.stringify(text)}) is not a run of digits but was allowed`)
    }
  }
  t.true(allowed >= 10, `${allowed} tokens allowed`)
  // A pass on a cache without constraints leaves every logit as it was: the cache forgets them.
  masked.truncateRow(0, 0)
  const again = await smol.forward(masked, [prompt])
  t.deepEqual(again.logits, want.logits)
  free.dispose()
  masked.dispose()
})

test('schemas and grammars llguidance cannot compile, and requests that cannot be honoured, are refused with the reason', async (t) => {
  const engine = new Engine(smol)
  const prompt = smol.tokenizer.encode('Hi', { special: false })
  const refused = async (options: object, code: string, message: RegExp) => {
    const err = await t.throwsAsync(engine.generateBatch(prompt, { maxTokens: 4, ...options }), { instanceOf: KvEngineError })
    t.is(err?.code, code, err?.message)
    t.regex(err?.message ?? '', message)
  }
  await refused({ jsonSchema: { type: 'foo' } }, 'INVALID_ARGUMENT', /jsonSchema could not be compiled: .*foo/)
  await refused({ jsonSchema: { type: 'integer', minimum: 5, maximum: 1 } }, 'INVALID_ARGUMENT', /jsonSchema could not be compiled: .*minimum/)
  await refused({ jsonSchema: '{not json' }, 'INVALID_ARGUMENT', /jsonSchema is not valid JSON/)
  await refused({ regex: '(abc' }, 'INVALID_ARGUMENT', /regex could not be compiled/)
  await refused({ grammar: 'start: foo' }, 'INVALID_ARGUMENT', /grammar could not be compiled: .*foo/)
  await refused({ regex: 'a', grammar: 'start: "a"' }, 'INVALID_ARGUMENT', /one of jsonSchema, grammar and regex, not grammar and regex/)
  await refused({ regex: 'a', tools: [] }, 'INVALID_ARGUMENT', /tools cannot be combined with regex/)
  await t.throwsAsync(smol.compileGrammar({ xml: 'a' } as never), { instanceOf: KvEngineError, message: /one of \{ jsonSchema \}, \{ grammar \} or \{ regex \}/ })
  const g = await smol.compileGrammar({ regex: 'ab' })
  t.true(g instanceof Grammar)
  const cache = smol.createCache(1, 8)
  await t.throwsAsync(smol.forward(cache, [prompt], { constraints: [g], greedySteps: 2, candidates: 1, logits: false }), { instanceOf: KvEngineError, message: /one pass per call/ })
  t.throws(() => g.consume(smol.tokenizer.encode('z')[0]), { instanceOf: KvEngineError, message: /does not fit the grammar/ })
  cache.dispose()
})

test('logprobs: the sampled token is log-softmax of the logits it was drawn from, top tokens sorted, with and without a schema', async (t) => {
  const engine = new Engine(smol)
  const prompt = smol.tokenizer.encode(chatml('Name a colour.'), { special: true })
  for (const extra of [{}, { regex: '(red|green|blue) and (red|green|blue)' }]) {
    const [row] = await engine.generateBatch(prompt, { temperature: 0.9, seed: 2, maxTokens: 6, logprobs: 3, stopTokens: [], ...extra })
    t.is(row.logprobs?.length, row.tokens.length)
    // Replay: the same tokens through a cache of our own give the logits each token was drawn from.
    const cache = smol.createCache(1, prompt.length + row.tokens.length + 1)
    const constraint = 'regex' in extra ? await smol.compileGrammar(extra) : null
    let feed: number[] = Array.from(prompt)
    for (const [i, token] of row.tokens.entries()) {
      const { logits } = await smol.forward(cache, [feed], { constraints: [constraint] })
      let max = -Infinity
      for (const x of logits) max = Math.max(max, x)
      let sum = 0
      let allowed = 0
      for (const x of logits) {
        sum += Math.exp(x - max)
        if (x !== -Infinity) allowed++
      }
      const want = logits[token] - max - Math.log(sum)
      const got = row.logprobs?.[i]
      t.true(got !== null && got !== undefined && Math.abs(got.logprob - want) < 1e-4, `token ${i}: ${got?.logprob} vs ${want}`)
      const top = got?.top ?? []
      t.is(top.length, Math.min(3, allowed))
      t.true(top.every((e, j) => j === 0 || top[j - 1].logprob >= e.logprob), 'top tokens sorted')
      t.true(top[0].logprob >= (got?.logprob ?? 0) - 1e-6, 'the best is at least as likely as the sampled one')
      for (const e of top) t.true(Math.abs(e.logprob - (logits[e.token] - max - Math.log(sum))) < 1e-4)
      constraint?.consume(token)
      feed = [token]
    }
    cache.dispose()
  }
  const err = await t.throwsAsync(engine.generateBatch(prompt, { logprobs: 21, maxTokens: 2 }), { instanceOf: KvEngineError })
  t.regex(err?.message ?? '', /logprobs/)
})
