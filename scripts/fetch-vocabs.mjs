#!/usr/bin/env node
// Fetches real tokenizer vocabularies for the tests: llama.cpp's own vocab-only GGUFs (LLaMA's
// 32k SentencePiece, as Llama 2, Mistral 7B and TinyLlama use it, and Phi-3's), taken from the
// llama.cpp copy inside PyPI's llama-cpp-python sdist (pinned, SHA-256 checked; the same archive
// scripts/build-llama-cpp.sh builds from). Only the .gguf files are extracted, into
// models/vocab/. Prints that folder on stdout. Idempotent.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

// Run with tsx (prepare-test-models does): the package's own downloader, checked against the hash.
import { downloadFile } from '../src/downloadFile.js'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const out = join(process.env.KVENGINE_MODELS_DIR ?? join(root, 'models'), 'vocab')
const { version: VERSION, sha256: SHA256, url: URL_ } = JSON.parse(readFileSync(join(root, 'scripts', 'llamaCppSdist.json'), 'utf8'))
const FILES = ['ggml-vocab-llama-spm.gguf', 'ggml-vocab-phi-3.gguf']

if (FILES.every((f) => existsSync(join(out, f)))) {
  console.log(out)
  process.exit(0)
}
const work = mkdtempSync(join(tmpdir(), 'kvengine-vocab-'))
try {
  const tarball = join(work, 'sdist.tar.gz')
  await downloadFile(new URL(URL_), tarball, { sha256: SHA256 })
  const members = FILES.map((f) => `llama_cpp_python-${VERSION}/vendor/llama.cpp/models/${f}`)
  execFileSync('tar', ['-xzf', tarball, '-C', work, ...members], { stdio: 'inherit' })
  mkdirSync(out, { recursive: true })
  for (const [i, f] of FILES.entries()) renameSync(join(work, members[i]), join(out, f))
  console.error(`fetch-vocabs: ${FILES.join(', ')} in ${out}`)
  console.log(out)
} finally {
  rmSync(work, { recursive: true, force: true })
}
