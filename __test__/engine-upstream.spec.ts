// nanochat's tests/test_engine.py, ported to the real default model (SmolLM2-135M, Q8_0) in
// place of upstream's mock that returns zero logits.
import test from 'ava'

import { Engine, Model } from '../index.js'
import { modelPath } from './models.js'

const model = await Model.load(modelPath('Q8_0'))
const engine = new Engine(model)
// An open-ended raw prompt: many continuations are likely, and nothing ends the text early.
const prompt = model.tokenizer.encode('My favourite thing about the weekend is')

const tokensOf = async (options: Parameters<Engine['generateBatch']>[1]) => (await engine.generateBatch(prompt, options)).map((r) => r.tokens)

test.serial('test_kv_cache_prefill: a copied row holds the same positions and continues exactly like its source', async (t) => {
  const cache = model.createCache(2, 64)
  await model.forward(cache, [prompt, []])
  cache.copyRow(0, 1)
  t.deepEqual(Array.from(cache.seqlens), [prompt.length, prompt.length], 'the copy has the prompt length as its position')
  const next = model.tokenizer.encode(' sleeping')[0]
  const { logits, rows } = await model.forward(cache, [[next], [next]])
  t.deepEqual(Array.from(rows), [0, 1])
  const vocab = model.info.vocabSize
  const [source, copy] = [logits.slice(0, vocab), logits.slice(vocab, 2 * vocab)]
  t.deepEqual(copy, source, 'both rows continue identically')
  const fresh = model.createCache(1, 64)
  const alone = await model.forward(fresh, [[...prompt, next]])
  const maxDiff = source.reduce((m, x, i) => Math.max(m, Math.abs(x - alone.logits[i])), 0)
  t.true(maxDiff < 1e-3, `the copied row matches prefilling prompt + token in one go (max |Δlogit| ${maxDiff})`)
  cache.dispose()
  fresh.dispose()
})

test.serial('test_multi_sample_first_token_diversity: 16 samples at temperature 1 do not all start alike', async (t) => {
  const firsts = (await tokensOf({ numSamples: 16, maxTokens: 1, temperature: 1, seed: 42 })).map((tokens) => tokens[0])
  t.is(firsts.length, 16)
  t.true(new Set(firsts).size > 1, `first tokens: ${firsts.join(' ')}`)
})

test.serial('test_seed_reproducibility: seeds 1, 42, 123 and 999 each reproduce over three runs', async (t) => {
  for (const seed of [1, 42, 123, 999]) {
    const runs = [await tokensOf({ numSamples: 2, maxTokens: 4, temperature: 1, seed })]
    for (let i = 0; i < 2; i++) runs.push(await tokensOf({ numSamples: 2, maxTokens: 4, temperature: 1, seed }))
    t.deepEqual(runs[1], runs[0], `seed ${seed}, run 2`)
    t.deepEqual(runs[2], runs[0], `seed ${seed}, run 3`)
  }
})

test.serial('test_temperature_zero_determinism: greedy output is the same whatever the seed', async (t) => {
  const greedy = (seed: number) => tokensOf({ numSamples: 2, maxTokens: 8, temperature: 0, seed })
  const [a, b, c] = [await greedy(1), await greedy(42), await greedy(999)]
  t.is(a[0].length, 8)
  t.deepEqual(a[1], a[0], 'greedy samples of one prompt agree')
  t.deepEqual(b, a)
  t.deepEqual(c, a)
})

test.serial('test_max_tokens_respected: at most maxTokens for 1, 4, 16 and 64', async (t) => {
  for (const maxTokens of [1, 4, 16, 64]) {
    const [row] = await engine.generateBatch(prompt, { maxTokens, temperature: 1, seed: 7 })
    t.true(row.tokens.length <= maxTokens, `maxTokens ${maxTokens}: ${row.tokens.length} tokens`)
    if (row.finishReason === 'length') t.is(row.tokens.length, maxTokens)
  }
})

test.serial('test_num_samples_count: 1, 4, 16 and 64 samples give that many rows', async (t) => {
  for (const numSamples of [1, 4, 16, 64]) {
    const rows = await engine.generateBatch(prompt, { numSamples, maxTokens: 2, temperature: 1, seed: 3 })
    t.is(rows.length, numSamples)
    for (const row of rows) t.true(row.tokens.length >= 1 && row.tokens.length <= 2)
  }
})

test.serial('test_different_seeds_introduce_variation_when_temperature_nonzero: 10 seeds, several outputs', async (t) => {
  const outputs = new Set<string>()
  for (let seed = 0; seed < 10; seed++) outputs.add(JSON.stringify(await tokensOf({ maxTokens: 4, temperature: 1, seed })))
  t.true(outputs.size > 1, `${outputs.size} distinct outputs from 10 seeds`)
})
