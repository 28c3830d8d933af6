// Paths of the model files the suites use. `npm test` makes them first (scripts/prepare-test-models.mjs):
// the default SmolLM2-135M-Instruct GGUF (Q4_1), its F32 and Q8_0 re-encodings by our converter, and
// Gemma 3 270M Q4_K_M.
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const root = join(dirname(fileURLToPath(import.meta.url)), '..')

export function modelPath(kind: 'Q4_1' | 'F32' | 'Q8_0' | 'gemma'): string {
  // Gemma 3 270M Q4_K_M, fetched by scripts/fetch-gemma.mjs.
  const file = kind === 'gemma' ? 'gemma-3-270m-q4_k_m.gguf' : `SmolLM2-135M-Instruct.${kind}.gguf`
  const path = join(root, 'models', file)
  if (!existsSync(path)) throw new Error(`${path} is missing: run "node scripts/prepare-test-models.mjs" (npm test does)`)
  return path
}

export const chatml = (user: string, system = 'You are a helpful AI assistant named SmolLM, trained by Hugging Face') =>
  `<|im_start|>system\n${system}<|im_end|>\n<|im_start|>user\n${user}<|im_end|>\n<|im_start|>assistant\n`
