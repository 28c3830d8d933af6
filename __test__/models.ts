// Paths of the model files the suites use. `npm test` makes them first (scripts/prepare-test-models.mjs):
// the default SmolLM2-135M-Instruct GGUF (Q4_1) and its F32 and Q8_0 re-encodings by our converter.
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const root = join(dirname(fileURLToPath(import.meta.url)), '..')

export function modelPath(kind: 'Q4_1' | 'F32' | 'Q8_0'): string {
  const path = join(root, 'models', `SmolLM2-135M-Instruct.${kind}.gguf`)
  if (!existsSync(path)) throw new Error(`${path} is missing: run "node scripts/prepare-test-models.mjs" (npm test does)`)
  return path
}

export const chatml = (user: string, system = 'You are a helpful AI assistant named SmolLM, trained by Hugging Face') =>
  `<|im_start|>system\n${system}<|im_end|>\n<|im_start|>user\n${user}<|im_end|>\n<|im_start|>assistant\n`
