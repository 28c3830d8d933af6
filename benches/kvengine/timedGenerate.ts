// Runs engine.generate and timestamps its steps: the first step marks the end of the prefill
// (TTFT), the rest are decode steps. Also reads the engine's own forward time at both ends, so
// the wall time between them splits into engine compute and everything else (TypeScript's
// sampling and row state, crossing into native code and back). Every token is hashed, so two
// builds' runs can be shown to generate the same tokens (a refactor's before and after).
import { createHash } from 'node:crypto'

import type { Engine, GenerateOptions, Model } from '../../index.js'

export interface GenerateTiming {
  startMs: number
  firstStepMs: number
  lastStepMs: number
  steps: number
  /** Share of the decode steps' wall time (first step → last) not spent in the engine's forward; undefined on an addon without forwardSeconds. */
  tsShare: number | undefined
  /** SHA-256 (first 16 hex digits) of every row's token at every step, in order. */
  tokensDigest: string
}

function forwardSeconds(model: Model): number | undefined {
  const s = model.stats().forwardSeconds
  return typeof s === 'number' ? s : undefined
}

export async function timedGenerate(engine: Engine, prompt: number[], options: GenerateOptions, onStep?: (step: number) => void): Promise<GenerateTiming> {
  const startMs = performance.now()
  let firstStepMs = 0
  let lastStepMs = 0
  let steps = 0
  let forwardAtFirst: number | undefined
  const hash = createHash('sha256')
  for await (const step of engine.generate(prompt, options)) {
    lastStepMs = performance.now()
    hash.update(Int32Array.from(step.tokenColumn))
    if (++steps === 1) {
      firstStepMs = lastStepMs
      forwardAtFirst = forwardSeconds(engine.model)
    }
    onStep?.(steps)
  }
  // The generator returns after its last step without another forward, so this reading ends the window.
  const forwardAtLast = forwardSeconds(engine.model)
  const wall = (lastStepMs - firstStepMs) / 1000
  const tsShare = forwardAtFirst !== undefined && forwardAtLast !== undefined && wall > 0 ? 1 - (forwardAtLast - forwardAtFirst) / wall : undefined
  return { startMs, firstStepMs, lastStepMs, steps, tsShare, tokensDigest: hash.digest('hex').slice(0, 16) }
}
