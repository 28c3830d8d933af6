// The Engine against upstream nanochat's own Engine.generate, token column by token column, masks
// included, on a d4 checkpoint trained to use the calculator (scripts/nanochat/make_engine_fixtures.py
// made the checkpoint and recorded upstream's columns, CPU fp32, temperature 0).
import { readFileSync } from 'node:fs'
import { join } from 'node:path'

import test from 'ava'

import { Engine, type GenerateOptions, Model } from '../index.js'
import { root } from './models.js'

interface UpstreamRow {
  tokens: number[]
  masks: number[]
}
interface UpstreamRun {
  conversation: string
  prompt: number[]
  num_samples: number
  max_tokens: number
  rows: UpstreamRow[]
}

const fixtures = join(root, 'crate', 'tests', 'fixtures', 'nanochat')
const golden: { checkpoint: string; runs: UpstreamRun[] } = JSON.parse(readFileSync(join(fixtures, 'engine_golden.json'), 'utf8'))
const model = await Model.load(join(fixtures, golden.checkpoint))
const engine = new Engine(model)
// A second copy of the checkpoint drafts (its drafts are all right). Rows draft only while no row
// of the batch is inside a call or has an answer queued, so alone a conversation drafts between
// its calls; in the batch of 10 that is rare.
const draftCopy = await Model.load(join(fixtures, golden.checkpoint))
const [PYTHON_START] = model.tokenizer.encode('<|python_start|>', { special: true, addBos: false })

/** Each row's tokens and masks up to its end, as upstream's columns are cut (its terminal token kept). */
async function columnsOf(prompts: number[][], options: GenerateOptions) {
  const rows: UpstreamRow[] = []
  const endSteps: number[] = []
  let step = 0
  for await (const { tokenColumn, tokenMasks, finished } of engine.generate(prompts, { temperature: 0, ...options })) {
    tokenColumn.forEach((token, r) => {
      rows[r] ??= { tokens: [], masks: [] }
      if (token < 0) return
      rows[r].tokens.push(token)
      rows[r].masks.push(tokenMasks[r])
      if (finished[r]) endSteps[r] = step
    })
    step++
  }
  return { rows, endSteps }
}

const singleSample = golden.runs.filter((run) => run.num_samples === 1 && run.max_tokens === 64)

test('the fixture is what it claims: at least 8 conversations, every one with a call, one with three in a row', (t) => {
  t.true(singleSample.length >= 8)
  const calls = singleSample.map((run) => run.rows[0].tokens.filter((token) => token === PYTHON_START).length)
  t.true(calls.every((n) => n >= 1), `calls per conversation: ${calls.join(' ')}`)
  t.true(calls.includes(3))
  t.true(
    singleSample.some((run) => run.rows[0].masks.includes(0)),
    'upstream forced answers',
  )
  const sampled = golden.runs.filter((run) => run.num_samples > 1)
  t.true(sampled.some((run) => run.num_samples === 4))
  for (const run of sampled) for (const row of run.rows) t.deepEqual(row, run.rows[0], 'at temperature 0 every sample is the greedy row')
})

for (const run of golden.runs) {
  test(`${run.conversation}, numSamples ${run.num_samples}, maxTokens ${run.max_tokens}: every row equals upstream's, with and without drafts`, async (t) => {
    const options = { numSamples: run.num_samples, maxTokens: run.max_tokens }
    t.deepEqual((await columnsOf([run.prompt], options)).rows, run.rows)
    const drafted = await columnsOf([run.prompt], { ...options, speculative: { method: 'ngram', numSpeculativeTokens: 4, promptLookupMin: 1 } })
    t.deepEqual(drafted.rows, run.rows)
  })
}

const batchOptions: [string, GenerateOptions][] = [
  ['one pass per call', { multiStep: 1 }],
  ['greedy bursts of 4', { multiStep: 4 }],
  ['prompt-lookup drafts', { speculative: { method: 'ngram', numSpeculativeTokens: 4, promptLookupMin: 1 } }],
  ['a draft model', { speculative: { method: 'draft_model', model: draftCopy, numSpeculativeTokens: 4 } }],
]
for (const [name, options] of batchOptions) {
  test(`all ${singleSample.length} conversations in one batch (${name}) give each one's upstream columns`, async (t) => {
    const { rows, endSteps } = await columnsOf(
      singleSample.map((run) => run.prompt),
      { maxTokens: 64, ...options },
    )
    t.deepEqual(
      rows,
      singleSample.map((run) => run.rows[0]),
    )
    // What the batch went through, read from the columns: rows ended at different steps, and at
    // some step one row was forced an answer while another sampled.
    t.true(new Set(endSteps).size > 1, `end steps ${endSteps.join(' ')}`)
    const mixed = Array.from({ length: Math.max(...endSteps) + 1 }, (_, step) => rows.map((row) => row.masks[step])).some(
      (masks) => masks.includes(0) && masks.includes(1),
    )
    t.true(mixed, 'no step had a forced row beside a sampled one')
  })
}

test("generateBatch drops the terminal token, as upstream's generate_batch does, and keeps the masks", async (t) => {
  const run = singleSample[0]
  const [row] = await engine.generateBatch(run.prompt, { temperature: 0, maxTokens: run.max_tokens })
  t.deepEqual(row.tokens, run.rows[0].tokens.slice(0, -1))
  t.deepEqual(row.masks, run.rows[0].masks.slice(0, -1))
  t.is(row.finishReason, 'stop')
})
