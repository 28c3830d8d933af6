// Raw llama.cpp for the fixture scripts: built once by scripts/build-llama-cpp.sh, driven through
// our probe llama-logits (scripts/llama-logits.cpp). Never used by the test suites.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export interface LlamaLogits {
  vocab: number
  /** The greedy continuation, `generate` tokens long. */
  greedy: number[]
  /** The logits rows: the prompt's (or its last `tail`), then one per greedy token but the last. */
  rows: Float32Array[]
}

export interface RawLlamaCpp {
  /** Where llama-quantize, llama-logits and the other tools are. */
  bin: string
  /** Names this build in fixtures. */
  generator: string
  logits(model: string, ids: number[], options: { kv: 'f16' | 'f32'; generate: number; tail?: number }): LlamaLogits
}

export function rawLlamaCpp(): RawLlamaCpp {
  const bin = execFileSync('bash', ['scripts/build-llama-cpp.sh'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim()
  const { version } = JSON.parse(readFileSync(join('scripts', 'llamaCppSdist.json'), 'utf8')) as { version: string }
  const logits: RawLlamaCpp['logits'] = (model, ids, { kv, generate, tail }) => {
    const work = mkdtempSync(join(tmpdir(), 'kvengine-llama-'))
    try {
      writeFileSync(join(work, 'ids.txt'), ids.join(' '))
      const args = [model, join(work, 'ids.txt'), join(work, 'logits.bin'), '--kv', kv, '--generate', String(generate), ...(tail === undefined ? [] : ['--tail', String(tail)])]
      const { vocab, rows, greedy } = JSON.parse(execFileSync(join(bin, 'llama-logits'), args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })) as { vocab: number; rows: number; greedy: number[] }
      const all = new Float32Array(readFileSync(join(work, 'logits.bin')).buffer.slice(0))
      return { vocab, greedy, rows: Array.from({ length: rows }, (_, r) => all.subarray(r * vocab, (r + 1) * vocab)) }
    } finally {
      rmSync(work, { recursive: true, force: true })
    }
  }
  return { bin, generator: `raw llama.cpp from llama-cpp-python ${version}'s sdist`, logits }
}
