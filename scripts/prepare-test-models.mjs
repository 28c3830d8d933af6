#!/usr/bin/env node
// Makes the model files the test suites need: the default model (fetched), its F32 and Q8_0
// re-encodings made by our own converter, Gemma 3 270M (fetched; its SentencePiece tokenizer
// is tested against llama.cpp's), llama.cpp's vocab-only GGUFs of LLaMA's and Phi-3's SentencePiece
// vocabularies (scripts/fetch-vocabs.mjs) and the random-weight files of scripts/archModels.ts
// (TinyLlama's copies the LLaMA vocabulary, so they come after the vocabularies).
// Cached in models/; idempotent.
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const source = execFileSync(process.execPath, [join(root, 'scripts', 'fetch-model.mjs')], {
  encoding: 'utf8',
  stdio: ['ignore', 'pipe', 'inherit'],
}).trim()
execFileSync(process.execPath, [join(root, 'scripts', 'fetch-gemma.mjs')], { stdio: ['ignore', 'ignore', 'inherit'] })
execFileSync(process.execPath, ['--import=tsx', join(root, 'scripts', 'fetch-vocabs.mjs')], { stdio: ['ignore', 'ignore', 'inherit'] })
const { convertGguf } = createRequire(import.meta.url)(join(root, 'native.cjs'))

for (const target of ['f32', 'q8_0']) {
  const out = join(dirname(source), `SmolLM2-135M-Instruct.${target.toUpperCase()}.gguf`)
  if (existsSync(out)) continue
  let shown = -1
  await convertGguf(source, out, target, (f) => {
    const pct = Math.floor(f * 10) * 10
    if (pct !== shown) process.stderr.write(`converting to ${target}: ${(shown = pct)}%\n`)
  })
  console.error(`prepare-test-models: wrote ${out}`)
}

// The random models copy the fetched file's tokenizer (pinned by hash, so their bytes are too).
execFileSync(process.execPath, ['--import=tsx', join(root, 'scripts', 'archModels.ts'), source], { stdio: ['ignore', 'ignore', 'inherit'] })
