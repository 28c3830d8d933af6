// Greedy generation against llama.cpp (node-llama-cpp 3.21.1) on the same GGUF file. The
// fixtures come from scripts/make-fixtures.ts; llama.cpp is not run here.
import test from 'ava'

import { Model } from '../index.js'
import { compare, crossReference, fixture, teacherForced } from './llamaCppAgreement.js'
import { modelPath } from './models.js'

test.serial('F32: the first 64 greedy tokens equal llama.cpp for at least 9 of 10 prompts; differences are near-ties', async (t) => {
  const model = await Model.load(modelPath('F32'))
  const fx = fixture('llamacpp-greedy-f32.json')
  t.is(fx.prompts.length, 10)
  const results = await compare(model, fx)
  for (const r of results) t.log(`${r.name}: ${r.agreed}/${fx.tokens} tokens agree${r.gap === undefined ? '' : `, logit gap at the split ${r.gap.toExponential(2)}`}`)
  const identical = results.filter((r) => r.agreed === fx.tokens).length
  t.true(identical >= 9, `${identical}/10 prompts identical`)
  for (const r of results.filter((r) => r.gap !== undefined)) {
    t.true(Math.abs(r.gap as number) < 1e-3, `${r.name}: top-two logits differ by ${r.gap} at step ${r.agreed}: not a near-tie`)
  }
  model.dispose()
})

test.serial('Q4_1 (the file as shipped): greedy agreement with llama.cpp, reported; per-step choices agree except at close calls and at most 1% clear splits', async (t) => {
  const model = await Model.load(modelPath('Q4_1'))
  const fx = fixture('llamacpp-greedy-q4_1.json')
  const results = await compare(model, fx)
  const total = results.reduce((a, r) => a + r.agreed, 0)
  for (const r of results) t.log(`${r.name}: ${r.agreed}/${fx.tokens}${r.gap === undefined ? '' : ` (logit gap ${r.gap.toExponential(2)})`}`)
  t.log(`Q4_1 free-running: ${total}/${fx.tokens * results.length} leading greedy tokens agree with llama.cpp`)
  // The engines round differently: llama.cpp multiplies Q4_1 by Q8_1 (8-bit) activations; we
  // re-encode Q4_1 as Q8_0 at load and multiply it by this CPU's default activations (Q8_0
  // blocks on x86 without AMX, f32 elsewhere). So a free run splits at the
  // first close call and never rejoins. Fed llama.cpp's own tokens, each step's choice should
  // match, except where either engine was torn between the two tokens. llama.cpp re-quantizing
  // every layer's input amplifies small differences (with 8-bit activations of our own, our AVX2
  // and portable kernels alone moved chat-fr step 3 across the line), so a clear disagreement
  // (neither engine torn) may happen, but rarely: at most 1% of steps.
  const { agree, steps, clear } = await teacherForced(model, fx)
  for (const c of clear) t.log(`clear disagreement: ${c}`)
  t.true(clear.length <= 0.01 * steps, `${clear.length}/${steps} steps are clear disagreements`)
  t.log(`Q4_1 teacher-forced: ${agree}/${steps} steps choose llama.cpp's token`)
  t.true(agree >= 0.93 * steps)
  model.dispose()
})

for (const activations of ['f32', 'q8'] as const) {
  test.serial(`Q8_0 with ${activations} activations: per-step choices agree with llama.cpp's except at close calls and at most 1% clear splits`, async (t) => {
    // llama.cpp multiplies Q8_0 weights by activations rounded to Q8_0 blocks, which 'q8' also
    // does; 'f32' keeps them exact. Both must pick llama.cpp's token wherever it was not torn.
    const model = await Model.load(modelPath('Q8_0'), { activations })
    const fx = fixture('llamacpp-greedy-q8_0.json')
    // One token per pass after the prompt: the decode road, where 'q8' multiplies bytes by bytes.
    const { agree, steps, clear } = await teacherForced(model, fx, true)
    for (const c of clear) t.log(`clear disagreement: ${c}`)
    t.log(`Q8_0 ${activations} teacher-forced: ${agree}/${steps} steps choose llama.cpp's token`)
    const results = await compare(model, fx)
    const { builds, oursRaw, raw } = crossReference(fx, 'llamacpp-raw-greedy-q8_0.json', results)
    const identical = results.filter((r) => r.agreed === fx.tokens).length
    t.log(`free-running ${fx.tokens} tokens: ${identical}/10 identical with ${fx.generator}, ${oursRaw}/10 with ${raw.generator}; the two llama.cpp builds: ${builds}/10`)
    t.true(clear.length <= 0.01 * steps, `${clear.length}/${steps} steps are clear disagreements`)
    t.true(agree >= 0.93 * steps)
    model.dispose()
  })
}
