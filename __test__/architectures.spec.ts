// Architectures beside Llama against raw llama.cpp: random-weight models of real layer shapes
// (scripts/archModels.ts, the same bytes on every machine), in F32 and as llama.cpp's own
// llama-quantize made them Q4_K_M. The fixtures (scripts/make-arch-fixtures.ts) hold llama.cpp's
// top-8 logits and log-sum-exp for the last 64 rows of a prompt and every row of a 32-token
// greedy run. Llama 3.2's prompt runs 64 positions past its original 8192-token context, where
// its RoPE frequency scaling (rope_freqs.weight) decides the attention. TinyLlama's file carries
// LLaMA's 32k SentencePiece vocabulary, copied by our GGUF writer (its tokenization is checked in
// crate/tests/spm_tokenizer.rs).
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

import test from 'ava'

import { Engine, Model } from '../index.js'
import { hashFile } from '../src/hashFile.js'
import { archModelPath, makeArchModel } from '../scripts/archModels.js'
import { modelPath, root } from './models.js'

interface ArchFixture {
  generator: string
  shape: { arch: string }
  prompt: number[]
  /** The prompt position of the first row kept. */
  rowsFrom: number
  files: { type: string; sha256: string; greedy: number[]; rows: { top: [number, number][]; lse: number }[] }[]
}

/** Largest logit difference allowed on llama.cpp's top 8 and on the log-sum-exp, per file type.
 * F32 differs by float summation order only (we see 6e-5 at most). Q4_K_M rounds activations to
 * 8 bits before each product, so an ulp of difference upstream (or a tie rounded the other way)
 * moves a value to the next level, and one such step can move a row's logits by tenths: most
 * rows agree to the printed digit and a few jump (we see up to 0.37, phi3). llama.cpp differs
 * from itself by up to 0.15 the same way (its batched prompt path against its one-token path,
 * same file, same ids: qwen3 0.148, phi3 0.128). */
const TOLERANCE = { exact: 2e-3, quantized: 0.4 }
/** GPT-2's F32 file: llama.cpp's CPU GELU reads a table of f16 values indexed by the input
 * rounded to f16 (ggml-cpu/vec.h, GGML_GELU_FP16), a relative error near 1e-3 in every MLP
 * activation; we compute GELU in f32 (we see 2.4e-3). */
const GPT2_EXACT = 5e-3
/** Where the greedy runs may split on a quantized file: llama.cpp's own logits for its token and
 * ours within this. llama.cpp's two paths over the same file differ by up to 0.148 on a logit
 * (TOLERANCE above), so two logits moved that far in opposite directions flip a gap of twice
 * that; one 8-bit rounding step taken the other way anywhere upstream moves ours as much. We
 * see splits at gaps of 0.004 to 0.22 (Llama 3.2's, since the K-quant kernels sum a
 * super-block in integers before one float step, as llama.cpp does). */
const NEAR_TIE = 0.3
/** Formats we do not run as the file has them: Q5_1 is re-encoded to Q8_0 for our SIMD kernels
 * (candle has only scalar ones for it), which moves each weight by up to half a Q8_0 step, so
 * greedy agreement is logged there but only the logits tolerance is asserted. */
const REENCODED = new Set(['Q5_1'])


/** Our logits for the prompt's rows from `rowsFrom` (the rest in a pass of its own, without
 * them), then for each of llama.cpp's greedy tokens but the last. */
async function ourRows(model: Model, fx: ArchFixture, greedy: number[]): Promise<Float32Array[]> {
  const vocab = model.info.vocabSize
  const cache = model.createCache(1, fx.prompt.length + greedy.length, { kvType: 'f32' })
  try {
    if (fx.rowsFrom > 0) await model.forward(cache, [fx.prompt.slice(0, fx.rowsFrom)], { logits: false })
    const tail = fx.prompt.slice(fx.rowsFrom)
    const first = (await model.forward(cache, [tail], { allLogits: true })).logits
    const rows = Array.from({ length: tail.length }, (_, r) => first.subarray(r * vocab, (r + 1) * vocab))
    for (const token of greedy.slice(0, -1)) rows.push((await model.forward(cache, [[token]])).logits)
    return rows
  } finally {
    cache.dispose()
  }
}

function logSumExp(row: Float32Array): number {
  let max = -Infinity
  for (const v of row) max = Math.max(max, v)
  let sum = 0
  for (const v of row) sum += Math.exp(v - max)
  return max + Math.log(sum)
}

for (const name of ['qwen2', 'qwen3', 'phi3', 'llama32', 'tinyllama', 'gpt2']) {
  const fx = JSON.parse(readFileSync(join(root, '__test__', 'fixtures', `llamacpp-arch-${name}.json`), 'utf8')) as ArchFixture
  for (const file of fx.files) {
    const tolerance = file.type !== 'F32' ? TOLERANCE.quantized : name === 'gpt2' ? GPT2_EXACT : TOLERANCE.exact
    test.serial(`${name} (${file.type}): logits within ${tolerance} of llama.cpp on the last 64 prompt rows and 31 decode rows; ${file.type === 'F32' ? '32 greedy tokens equal' : REENCODED.has(file.type) ? 'greedy agreement logged' : 'greedy tokens equal up to a near-tie'}`, async (t) => {
      const path = file.type === 'F32' ? makeArchModel(name, modelPath('Q4_1')) : archModelPath(name, file.type)
      if (!existsSync(path)) {
        // llama-quantize is raw llama.cpp, which runs in the fixture script, not in the suite.
        t.log(`NOT RUN: ${path} is made by scripts/make-arch-fixtures.ts (raw llama.cpp's llama-quantize)`)
        t.pass()
        return
      }
      t.is((await hashFile(path)).digest('hex'), file.sha256, `${path} is not the file the fixture was made from`)
      const model = await Model.load(path)
      t.is(model.info.architecture, fx.shape.arch)
      const rows = await ourRows(model, fx, file.greedy)
      t.is(rows.length, file.rows.length)
      let worst = 0
      let where = ''
      for (const [r, ref] of file.rows.entries()) {
        const diffs = ref.top.map(([id, logit]) => Math.abs(rows[r][id] - logit)).concat(Math.abs(logSumExp(rows[r]) - ref.lse))
        const d = Math.max(...diffs)
        if (d > worst) [worst, where] = [d, `row ${r}`]
      }
      t.log(`largest difference from llama.cpp on its top-8 logits and log-sum-exp: ${worst.toExponential(2)} (${where})`)
      t.true(worst <= tolerance)
      const [run] = await new Engine(model).generateBatch(fx.prompt, { temperature: 0, maxTokens: file.greedy.length, stopTokens: [] })
      let agreed = 0
      while (agreed < file.greedy.length && run.tokens[agreed] === file.greedy[agreed]) agreed++
      t.log(`greedy: ${agreed}/${file.greedy.length} tokens equal llama.cpp's`)
      if (file.type === 'F32') t.deepEqual(run.tokens, file.greedy)
      else if (agreed < file.greedy.length) {
        // A split is allowed only where llama.cpp itself barely preferred its token over ours.
        const { top } = file.rows[fx.prompt.length - fx.rowsFrom - 1 + agreed]
        const theirs = top[0][1]
        const ours = top.find(([id]) => id === run.tokens[agreed])?.[1] ?? -Infinity
        t.log(`split at step ${agreed}: llama.cpp's logits ${theirs} for its token, ${ours} for ours`)
        if (!REENCODED.has(file.type)) t.true(theirs - ours <= NEAR_TIE, 'the greedy runs split where llama.cpp was not torn')
      }
      model.dispose()
    })
  }
}

// nanoGPT's ckpt.pt through the Node API: the Engine's greedy run from the prompt is PyTorch's
// (crate/tests/nanogpt.rs holds the logits comparison), and the character vocabulary refuses a
// character it lacks with a typed error.
test.serial('nanoGPT ckpt.pt: loads with its meta.pkl vocabulary and generates PyTorch\'s greedy tokens', async (t) => {
  const dir = join(root, 'crate', 'tests', 'fixtures', 'nanogpt')
  const expected = JSON.parse(readFileSync(join(dir, 'out-bias', 'expected.json'), 'utf8')) as { text: string; ids: number[]; greedy_prompt_ids: number[]; greedy_ids: number[] }
  const model = await Model.load(join(dir, 'out-bias', 'ckpt.pt'))
  t.is(model.info.architecture, 'gpt2')
  t.deepEqual(model.tokenizer.encode(expected.text), expected.ids)
  const [run] = await new Engine(model).generateBatch(expected.greedy_prompt_ids, { temperature: 0, maxTokens: expected.greedy_ids.length })
  t.deepEqual(run.tokens, expected.greedy_ids)
  t.throws(() => model.tokenizer.encode('Zoë'), { code: 'INVALID_ARGUMENT', message: /'ë' is not in this model's 65-character vocabulary/ })
  model.dispose()
})
