#!/usr/bin/env -S node --import=tsx
// Makes every model file the benchmark needs, cached in models/: the default model and its
// F32/Q8_0 re-encodings (scripts/prepare-test-models.mjs, shared with the tests), its Q4_0
// re-encoding by our converter, and the 1B random-weight models. Idempotent.
//
//   node --import=tsx scripts/bench-prep.ts [--models=id,id]   (or BENCH_MODELS=id,id)
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'

import { convertGguf } from '../index.js'
import { MODELS, selectModels } from '../benches/lib/models.js'
import { ROOT } from '../benches/lib/paths.js'
import { makeBenchModel } from './make-bench-model.js'

const arg = process.argv.find((a) => a.startsWith('--models='))?.slice('--models='.length) ?? process.env.BENCH_MODELS
const wanted = selectModels(arg)
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
  } else {
    makeBenchModel(m.make.target, metadataSource, m.path)
  }
  console.error(`bench-prep: wrote ${m.path}`)
}
console.error(`bench-prep: ready: ${wanted.map((m) => m.id).join(', ')}`)
