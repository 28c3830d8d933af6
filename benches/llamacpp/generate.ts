// Generation on one node-llama-cpp sequence, timestamped like kvengine's: the first yielded
// token ends the prefill (TTFT), the rest are decode steps. No end-of-generation stop (EOG
// tokens are yielded and generation goes on), so every run produces exactly `count` tokens.
import type { LlamaContextSequence, Token } from 'node-llama-cpp'

export interface SequenceTiming {
  startMs: number
  firstMs: number
  lastMs: number
  tokens: Token[]
}

export interface Sampling {
  temperature: number
  topK?: number
  seed?: number
}

export async function generateOn(seq: LlamaContextSequence, input: Token[], count: number, sampling: Sampling): Promise<SequenceTiming> {
  const startMs = performance.now()
  let firstMs = 0
  let lastMs = 0
  const tokens: Token[] = []
  for await (const token of seq.evaluate(input, { ...sampling, yieldEogToken: true })) {
    lastMs = performance.now()
    if (tokens.length === 0) firstMs = lastMs
    tokens.push(token)
    if (tokens.length === count) break
  }
  if (tokens.length !== count) throw new Error(`llama.cpp stopped after ${tokens.length} of ${count} tokens`)
  return { startMs, firstMs, lastMs, tokens }
}
