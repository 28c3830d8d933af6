// The models the benchmark runs, by id (pick some with --models=id,id or BENCH_MODELS).
import { join } from 'node:path'

import { MODELS_DIR } from './paths.js'

export interface BenchModel {
  id: string
  label: string
  path: string
  /** The ~1B random-weight shape: fewer repetitions, no long studies. */
  large: boolean
  /** How the file is made by scripts/bench-prep.ts: llama-quantize runs on another model's file. */
  make: { from: 'converter'; target: 'f32' | 'q8_0' | 'q4_0' } | { from: 'random'; target: 'q8_0' | 'q4_0' } | { from: 'llama-quantize'; source: string; type: 'Q4_K_M' }
}

const smol = (target: 'f32' | 'q8_0' | 'q4_0'): BenchModel => ({
  id: `smollm2-${target}`,
  label: `SmolLM2-135M ${target.toUpperCase()}`,
  path: join(MODELS_DIR, `SmolLM2-135M-Instruct.${target.toUpperCase()}.gguf`),
  large: false,
  make: { from: 'converter', target },
})

const large = (target: 'q8_0' | 'q4_0'): BenchModel => ({
  id: `1b-${target}`,
  label: `Llama 1B (random) ${target.toUpperCase()}`,
  path: join(MODELS_DIR, `bench-llama-1B-random.${target.toUpperCase()}.gguf`),
  large: true,
  make: { from: 'random', target },
})

/** Q4_K_M, the type users download most, made as users' files are made: by llama-quantize (from
 * SmolLM2's F32 file; the random 1B model has no F32 file, so from its Q8_0 one). */
const kQuant = (id: string, label: string, file: string, source: string): BenchModel => ({
  id,
  label,
  path: join(MODELS_DIR, file),
  large: id.startsWith('1b'),
  make: { from: 'llama-quantize', source, type: 'Q4_K_M' },
})

export const MODELS: BenchModel[] = [
  smol('q8_0'),
  smol('q4_0'),
  smol('f32'),
  kQuant('smollm2-q4_k_m', 'SmolLM2-135M Q4_K_M', 'SmolLM2-135M-Instruct.Q4_K_M.gguf', 'smollm2-f32'),
  large('q8_0'),
  large('q4_0'),
  kQuant('1b-q4_k_m', 'Llama 1B (random) Q4_K_M', 'bench-llama-1B-random.Q4_K_M.gguf', '1b-q8_0'),
]

export function selectModels(list: string | undefined): BenchModel[] {
  if (!list) return MODELS
  const ids = list.split(',').map((s) => s.trim()).filter(Boolean)
  const unknown = ids.filter((id) => !MODELS.some((m) => m.id === id))
  if (unknown.length) throw new Error(`unknown model id(s) ${unknown.join(', ')}; known: ${MODELS.map((m) => m.id).join(', ')}`)
  return MODELS.filter((m) => ids.includes(m.id))
}
