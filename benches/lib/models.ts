// The models the benchmark runs, by id (pick some with --models=id,id or BENCH_MODELS).
import { join } from 'node:path'

import { MODELS_DIR } from './paths.js'

export interface BenchModel {
  id: string
  label: string
  path: string
  /** The ~1B random-weight shape: fewer repetitions, no long studies. */
  large: boolean
  /** How the file is made by scripts/bench-prep.ts. */
  make: { from: 'converter'; target: 'f32' | 'q8_0' | 'q4_0' } | { from: 'random'; target: 'q8_0' | 'q4_0' }
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

export const MODELS: BenchModel[] = [smol('q8_0'), smol('q4_0'), smol('f32'), large('q8_0'), large('q4_0')]

export function selectModels(list: string | undefined): BenchModel[] {
  if (!list) return MODELS
  const ids = list.split(',').map((s) => s.trim()).filter(Boolean)
  const unknown = ids.filter((id) => !MODELS.some((m) => m.id === id))
  if (unknown.length) throw new Error(`unknown model id(s) ${unknown.join(', ')}; known: ${MODELS.map((m) => m.id).join(', ')}`)
  return MODELS.filter((m) => ids.includes(m.id))
}
