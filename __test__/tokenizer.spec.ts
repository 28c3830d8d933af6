// Our tokenizer (built from the GGUF metadata) against llama.cpp's on the same file.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'

import test from 'ava'

import { type KvEngineError, Model } from '../index.js'
import { modelPath, root } from './models.js'

interface Case {
  text: string
  special: boolean
  ids: number[]
}

const fx = JSON.parse(readFileSync(join(root, '__test__', 'fixtures', 'llamacpp-tokenizer.json'), 'utf8')) as { cases: Case[] }
const model = await Model.load(modelPath('Q4_1'))

test('token ids equal llama.cpp on a varied corpus (code, unicode, numbers, special-token look-alikes)', (t) => {
  t.true(fx.cases.length >= 30)
  for (const c of fx.cases) {
    t.deepEqual(model.tokenizer.encode(c.text, { special: c.special, addBos: false }), c.ids, JSON.stringify(c.text))
  }
})

test('decoding the ids gives the text back', (t) => {
  for (const c of fx.cases) t.is(model.tokenizer.decode(c.ids), c.text, JSON.stringify(c.text))
})

test('the streaming decoder, fed llama.cpp\'s ids one at a time, gives each text back, and refuses an id outside the vocabulary', (t) => {
  for (const c of fx.cases) {
    const decoder = model.tokenizer.createDecoder()
    t.is(c.ids.map((id) => decoder.push(id)).join('') + decoder.flush(), c.text, JSON.stringify(c.text))
  }
  const decoder = model.tokenizer.createDecoder()
  for (const bad of [model.info.vocabSize, -1, 2.5]) {
    const error = t.throws(() => decoder.push(bad), { message: /out of range: the vocabulary has 49152 tokens/ })
    t.is((error as KvEngineError).code, 'INVALID_ARGUMENT')
  }
})

test('special-token text typed by a user stays plain text unless asked for', (t) => {
  const imStart = model.tokenizer.encode('<|im_start|>', { special: true })
  t.is(imStart.length, 1)
  const plain = model.tokenizer.encode('<|im_start|>')
  t.true(plain.length > 1)
  t.false(plain.includes(imStart[0]))
})

test('the incremental decoder emits only whole characters, and all of them', (t) => {
  const text = 'naïve café 日本語のテキスト 🦀🚀 ok'
  const ids = model.tokenizer.encode(text)
  const decoder = model.tokenizer.createDecoder()
  let out = ''
  let splitChars = 0
  for (const id of ids) {
    const piece = decoder.push(id)
    t.false(piece.includes('\uFFFD'), 'no replacement characters mid-stream')
    if (piece === '') splitChars++
    out += piece
  }
  out += decoder.flush()
  t.is(out, text)
  t.true(splitChars > 0, 'the corpus has characters split across tokens, held back until complete')
})
