#!/usr/bin/env -S node --import=tsx
// Makes every model file the benchmark needs, cached in models/: the default model and its
// F32/Q8_0 re-encodings (scripts/prepare-test-models.mjs, shared with the tests), its Q4_0
// re-encoding by our converter, the 1B random-weight models, and Q4_K_M files by raw llama.cpp's
// llama-quantize (built once by scripts/build-llama-cpp.sh). Idempotent.
//
//   node --import=tsx scripts/bench-prep.ts [--models=id,id]   (or BENCH_MODELS=id,id)
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'

import { convertGguf } from '../index.js'
import { MODELS, selectModels } from '../benches/lib/models.js'
import { ROOT } from '../benches/lib/paths.js'
import { makeBenchModel } from './make-bench-model.js'
import { rawLlamaCpp } from './rawLlamaCpp.js'

const arg = process.argv.find((a) => a.startsWith('--models='))?.slice('--models='.length) ?? process.env.BENCH_MODELS
const chosen = selectModels(arg)
// A Q4_K_M file is made from another model's, which comes first.
const sources = chosen.flatMap((m) => (m.make.from === 'llama-quantize' ? MODELS.filter((s) => s.id === (m.make as { source: string }).source) : []))
const wanted = [...new Set([...sources, ...chosen])]
// The default model, F32 and Q8_0; its stdout would be noise here.
execFileSync(process.execPath, [join(ROOT, 'scripts', 'prepare-test-models.mjs')], { stdio: ['ignore', 'ignore', 'inherit'] })
const source = join(ROOT, 'models', 'SmolLM2-135M-Instruct.Q4_1.gguf')
const metadataSource = MODELS[0]!.path // SmolLM2 Q8_0: its tokenizer and chat template go into the 1B files

for (const m of wanted) {
  if (existsSync(m.path)) continue
  if (m.make.from === 'converter') {
    let shown = -1
    await convertGguf(source, m.path, m.make.target, (f) => {
      const pct = Math.floor(f * 10) * 10
      if (pct !== shown) process.stderr.write(`bench-prep: converting to ${m.make.target}: ${(shown = pct)}%\n`)
    })
  } else if (m.make.from === 'random') {
    makeBenchModel(m.make.target, metadataSource, m.path)
  } else {
    const source = MODELS.find((s) => s.id === (m.make as { source: string }).source) as (typeof MODELS)[number]
    console.error(`bench-prep: llama-quantize ${source.path} to ${m.make.type}`)
    execFileSync(join(rawLlamaCpp().bin, 'llama-quantize'), ['--allow-requantize', source.path, m.path, m.make.type], { stdio: ['ignore', 'ignore', 'inherit'] })
  }
  console.error(`bench-prep: wrote ${m.path}`)
}
console.error(`bench-prep: ready: ${chosen.map((m) => m.id).join(', ')}`)
