// llama.cpp through node-llama-cpp for the fixture scripts: the model loaded quietly on the CPU,
// the string fixtures name it by, and a greedy run with llama.cpp's top-2 candidates per step.
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { getLlama, LlamaLogLevel, type Llama, type LlamaModel, type Token } from 'node-llama-cpp'

export interface NodeLlamaCpp {
  llama: Llama
  model: LlamaModel
  /** e.g. "node-llama-cpp 3.21.1 (llama.cpp v0.4.0)". */
  generator: string
}

export async function loadWithNodeLlamaCpp(modelPath: string, options: { vocabOnly?: boolean } = {}): Promise<NodeLlamaCpp> {
  const llama = await getLlama({ gpu: false, build: 'never', progressLogs: false, logLevel: LlamaLogLevel.disabled })
  const model = await llama.loadModel({ modelPath, gpuLayers: 0, vocabOnly: options.vocabOnly })
  // The package's exports map hides package.json, so find it from the resolved entry point (dist/index.js).
  const dir = join(dirname(fileURLToPath(import.meta.resolve('node-llama-cpp'))), '..')
  const version = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).version
  return { llama, model, generator: `node-llama-cpp ${version} (llama.cpp ${llama.llamaCppRelease.release})` }
}

// Six significant digits keep the JSON small and are well below the agreement we can expect across implementations.
const round = (p: number) => Number(p.toPrecision(6))

/** `n` greedy tokens after `promptTokens` (not stopped at end-of-turn), with llama.cpp's top-2
 * candidates and their probabilities at each step, in a fresh context per call so that no KV
 * state or sampler history leaks between prompts. */
export async function greedyWithTop2(model: LlamaModel, promptTokens: Token[], n: number, kvType: 'F16' | 'F32'): Promise<{ greedyTokens: Token[]; top2: [number, number][][] }> {
  const context = await model.createContext({
    contextSize: Math.max(256, promptTokens.length + n + 16),
    sequences: 1,
    threads: { ideal: 2, min: 2 },
    flashAttention: false,
    experimentalKvCacheKeyType: kvType,
    experimentalKvCacheValueType: kvType,
  })
  const greedyTokens: Token[] = []
  const top2: [number, number][][] = []
  // temperature 0 selects llama.cpp's greedy sampler alone (topK/topP are not applied, no repeat penalty).
  // `probabilities` is the softmax over the full vocabulary of the raw logits, sorted by probability.
  // yieldEogToken keeps the generator going through end-of-turn tokens; we stop after n tokens ourselves.
  const gen = context.getSequence().evaluateWithMetadata(promptTokens, { probabilities: true }, { temperature: 0, yieldEogToken: true })
  for await (const { token, probabilities } of gen) {
    greedyTokens.push(token)
    const it = probabilities.entries()
    const first = it.next().value!, second = it.next().value!
    if (first[0] !== token) throw new Error(`greedy token ${token} is not the top-1 candidate ${first[0]}`)
    top2.push([[first[0], round(first[1])], [second[0], round(second[1])]])
    if (greedyTokens.length >= n) break
  }
  await context.dispose()
  if (greedyTokens.length !== n) throw new Error(`generated ${greedyTokens.length} tokens, wanted ${n}`)
  return { greedyTokens, top2 }
}
