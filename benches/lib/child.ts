// Runs one runner in its own process and returns its RESULT line, parsed.
import { spawn } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

import { OUT_DIR, ROOT } from './paths.js'
import type { RunSpec } from './plan.js'
import { RESULT_PREFIX } from './proc.js'
import type { EngineResult } from './results.js'

const RUNNERS = { kvengine: 'kvengineRunner.ts', 'llama.cpp': 'llamaCppRunner.ts' } as const

export async function runEngine(engine: keyof typeof RUNNERS, tag: string, spec: RunSpec): Promise<EngineResult> {
  mkdirSync(OUT_DIR, { recursive: true })
  const specPath = join(OUT_DIR, `spec-${tag}.json`)
  writeFileSync(specPath, JSON.stringify(spec))
  const child = spawn(process.execPath, ['--import=tsx', join(ROOT, 'benches', RUNNERS[engine]), specPath], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] })
  let stdout = ''
  child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s))
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
  const line = stdout.split('\n').find((l) => l.startsWith(RESULT_PREFIX))
  if (code !== 0 || !line) throw new Error(`${engine} runner for ${tag} exited with ${code}${line ? '' : ' and no result'}`)
  return JSON.parse(line.slice(RESULT_PREFIX.length)) as EngineResult
}

export async function tokenizePrompt(modelPath: string, count: number): Promise<number[]> {
  const child = spawn(process.execPath, ['--import=tsx', join(ROOT, 'benches', 'tokenizePrompt.ts'), modelPath, String(count)], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] })
  let stdout = ''
  child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s))
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
  if (code !== 0) throw new Error(`tokenizing the prompt failed (exit ${code})`)
  const ids = JSON.parse(stdout) as number[]
  if (ids.length < count) throw new Error(`the prompt text gave ${ids.length} tokens, ${count} needed`)
  return ids
}
