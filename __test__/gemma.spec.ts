// Gemma 3 270M Q4_K_M against llama.cpp (node-llama-cpp 3.21.1) on the same file. The fixture
// comes from scripts/make-gemma-fixtures.ts: llama.cpp's own prompt ids (BOS included), so our
// tokenizer plays no part, its 32 greedy tokens and its top-2 probabilities at each step.
import test from 'ava'

import { Model } from '../index.js'
import { compare, crossReference, fixture, teacherForced } from './llamaCppAgreement.js'
import { modelPath } from './models.js'

const fx = fixture('llamacpp-greedy-gemma3.json')

// The must-show bar (32 identical free-running tokens on 9 of 10 prompts) is NOT met: this 270M
// Q4_K_M model is torn between near-equal tokens at many steps, and quantized arithmetic rounds
// differently from one build to the next, so free runs split at the first such step. Two builds
// of llama.cpp itself (node-llama-cpp's prebuilt one, and raw llama.cpp built here for this CPU)
// give identical 32-token runs on only 3 of these 10 prompts (logged below from the fixtures).
// The same comparison on the file re-encoded to F32 agreed on all 320 teacher-forced steps, so
// the model's maths is llama.cpp's. The free-running counts are logged; the asserted bar is per
// step.
for (const activations of ['f32', 'q8'] as const) {
  test.serial(`Gemma 3 270M Q4_K_M, ${activations} activations: per-step choices agree with llama.cpp's except at close calls; free-running agreement logged`, async (t) => {
    const model = await Model.load(modelPath('gemma'), { activations })
    t.is(model.info.vocabSize, 262144)
    t.is(fx.prompts.length, 10)
    const results = await compare(model, fx)
    for (const r of results) {
      // llama.cpp's probability for its token minus that for ours, when ours was its runner-up.
      const [[, p1], [second, p2]] = r.gap === undefined ? [[0, 0], [0, 0]] : (fx.prompts.find((p) => p.name === r.name)?.top2[r.agreed] ?? [[0, 0], [0, 0]])
      const theirGap = second === r.ours ? (p1 - p2).toFixed(4) : '(our token not in its top 2)'
      const split = r.gap === undefined ? '' : `; at the split our top-2 logit gap ${r.gap.toFixed(3)}, llama.cpp's probability gap ${theirGap}`
      t.log(`${r.name}: ${r.agreed}/${fx.tokens}${split}`)
    }
    const identical = results.filter((r) => r.agreed === fx.tokens).length
    t.log(`${identical}/10 prompts identical for ${fx.tokens} tokens (${fx.generator})`)
    const { builds, oursRaw, raw } = crossReference(fx, 'llamacpp-raw-greedy-gemma3.json', results)
    t.log(`${oursRaw}/10 identical with ${raw.generator}; the two llama.cpp builds: ${builds}/10 identical`)
    const { agree, steps, clear } = await teacherForced(model, fx)
    for (const c of clear) t.log(`clear disagreement: ${c}`)
    t.log(`teacher-forced: ${agree}/${steps} steps choose llama.cpp's token`)
    t.true(clear.length <= 0.01 * steps, `${clear.length}/${steps} steps are clear disagreements`)
    t.true(agree >= 0.93 * steps, `${agree}/${steps} steps agree`)
    model.dispose()
  })
}
