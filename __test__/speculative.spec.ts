// Speculative decoding on the real SmolLM2 model, prompt lookup (`method: 'ngram'`) and a draft
// model (a Q4_0 copy made from the F32 file): every row's tokens, masks, text and finish must be
// those of plain decoding, greedy or sampled (a drafted position is sampled with the same draw
// as without drafting), while calls that feed drafts really happen.
import { join } from 'node:path'

import test from 'ava'

import { Engine, type ForwardModel, type GenerateOptions, KvEngineError, Model } from '../index.js'
import { chatml, modelPath, root } from './models.js'

const model = await Model.load(modelPath('Q8_0'))
const draftModel = await Model.load(modelPath('F32'), { quantize: 'q4_0' })
const LOG = [
  '10:00:01 INFO server started on port 8080',
  '10:00:05 ERROR could not open database connection to db-primary: timeout after 30 seconds',
  '10:00:09 INFO retrying connection to db-primary',
  '10:00:40 ERROR could not open database connection to db-primary: timeout after 30 seconds',
  '10:01:03 ERROR write rejected by db-replica: read-only mode is on for this replica',
].join('\n')
const copyPrompt = model.tokenizer.encode(chatml(`Copy out, word for word, the lines of this log that contain ERROR.\n\n${LOG}`), { special: true })
const freePrompt = model.tokenizer.encode(chatml('Write a short story about a fox who learns to swim.'), { special: true })
const ngram = { method: 'ngram' } as const
const drafting = { method: 'draft_model', model: draftModel } as const

/** The model, counting the calls that fed drafts (several tokens to a row after the prefill) and the tokens they fed. */
function counting() {
  const seen = { drafted: 0, fed: 0, calls: 0 }
  const forward: ForwardModel['forward'] = (cache, tokens, options) => {
    seen.calls++
    if (options?.allLogits) {
      seen.drafted++
      seen.fed += tokens.reduce((n, t) => n + t.length, 0)
    }
    return model.forward(cache, tokens, options)
  }
  const proxy: ForwardModel = {
    info: model.info,
    tokenizer: model.tokenizer,
    forward,
    createCache: (rows, capacity) => model.createCache(rows, capacity),
    cacheBytes: (rows, capacity, options) => model.cacheBytes(rows, capacity, options),
  }
  return { engine: new Engine(proxy), seen }
}

const rowsOf = (engine: Engine<ForwardModel>, prompt: number[] | number[][], options: GenerateOptions) =>
  engine.generateBatch(prompt, options as GenerateOptions<ReturnType<ForwardModel['createCache']>>)

const cases: [string, number[] | number[][], GenerateOptions][] = [
  ['greedy, bursts of 4', copyPrompt, { temperature: 0, maxTokens: 96 }],
  ['greedy, one pass per plain call', copyPrompt, { temperature: 0, maxTokens: 96, multiStep: 1 }],
  ['temperature 0.7, top-k 40, 3 samples', copyPrompt, { temperature: 0.7, topK: 40, seed: 5, numSamples: 3, maxTokens: 96 }],
  ['temperature 1 over the whole vocabulary, top-p 0.95', copyPrompt, { temperature: 1, topP: 0.95, seed: 9, maxTokens: 96 }],
  ['two prompts in one batch', [copyPrompt, freePrompt], { temperature: 0, maxTokens: 64 }],
  ['a stop string inside the copied text', copyPrompt, { temperature: 0, maxTokens: 96, stop: ['db-replica'] }],
  ['maxTokens 7, inside the first drafts', copyPrompt, { temperature: 0, maxTokens: 7 }],
]

for (const speculative of [ngram, drafting]) {
  for (const [name, prompt, options] of cases) {
    test.serial(`${speculative.method}, ${name}: the same rows as plain decoding`, async (t) => {
      const plain = counting()
      const drafted = counting()
      const expected = await rowsOf(plain.engine, prompt, options)
      const got = await rowsOf(drafted.engine, prompt, { ...options, speculative })
      t.deepEqual(got, expected)
      const tokens = expected.reduce((n, row) => n + row.tokens.length, 0)
      t.log(`${tokens} tokens: plain ${plain.seen.calls} calls, speculative ${drafted.seen.calls} (${drafted.seen.drafted} drafted, feeding ${drafted.seen.fed} tokens)`)
      if ((options.maxTokens ?? 0) > 7) t.true(drafted.seen.drafted > 0, 'no call fed a draft')
    })
  }
}

test.serial('on a copy task, drafts carry the generation: fewer calls than plain greedy bursts of 4', async (t) => {
  const plain = counting()
  const drafted = counting()
  const options: GenerateOptions = { temperature: 0, maxTokens: 96 }
  const [row] = await rowsOf(plain.engine, copyPrompt, options)
  await rowsOf(drafted.engine, copyPrompt, { ...options, speculative: ngram })
  t.true(row.text.includes('ERROR could not open database connection'), row.text)
  t.true(drafted.seen.calls < plain.seen.calls, `plain ${plain.seen.calls} calls, speculative ${drafted.seen.calls}`)
})

test.serial('a draft model with the same context as the target runs a generation left to end on its own (no maxTokens)', async (t) => {
  const options: GenerateOptions = { temperature: 0 }
  const [plain] = await new Engine(model).generateBatch(copyPrompt, options)
  const [drafted] = await new Engine(model).generateBatch(copyPrompt, { ...options, speculative: drafting })
  t.is(plain.finishReason, 'stop')
  t.deepEqual(drafted, plain)
})

test.serial("a caller's cache is left holding what plain decoding leaves in it", async (t) => {
  const engine = new Engine(model)
  const seqlens: number[][] = []
  for (const speculative of [undefined, ngram]) {
    const cache = model.createCache(1, 512)
    await engine.generateBatch(copyPrompt, { temperature: 0, maxTokens: 40, cache, speculative })
    seqlens.push(Array.from(cache.seqlens))
    cache.dispose()
  }
  t.deepEqual(seqlens[1], seqlens[0])
})

test.serial('bad speculative options are refused, naming what is wrong', async (t) => {
  const engine = new Engine(model)
  const refused = async (speculative: unknown, pattern: RegExp, extra: GenerateOptions = {}) => {
    const err = await t.throwsAsync(engine.generateBatch(copyPrompt, { maxTokens: 4, ...extra, speculative } as GenerateOptions), { instanceOf: KvEngineError })
    t.is(err?.code, 'INVALID_ARGUMENT')
    t.regex(err?.message ?? '', pattern)
  }
  await refused({ method: 'medusa' }, /speculative\.method must be 'ngram' \(prompt lookup\) or 'draft_model', got "medusa"/)
  await refused({ method: 'ngram', lookahead: 3 }, /unknown speculative \(method 'ngram'\) option 'lookahead'/)
  await refused({ method: 'ngram', model: draftModel }, /unknown speculative \(method 'ngram'\) option 'model'/)
  await refused({ method: 'draft_model' }, /speculative\.model must be a loaded model/)
  const other = await Model.load(join(root, 'crate', 'tests', 'fixtures', 'nanochat', 'chatsft_checkpoints', 'd4'))
  await refused({ method: 'draft_model', model: other }, /a draft model must share the vocabulary/)
  other.dispose()
  await refused({ method: 'ngram', numSpeculativeTokens: 0 }, /numSpeculativeTokens must be an integer in 1\.\.32/)
  await refused({ method: 'ngram', promptLookupMax: 2, promptLookupMin: 3 }, /promptLookupMin must be an integer in 1\.\.2/)
  await refused('ngram', /speculative options must be an object/)
  await refused(ngram, /cannot be combined with regex/, { regex: '[a-z]+' })
  await refused(ngram, /cannot be combined with logprobs/, { logprobs: 2 })
})
