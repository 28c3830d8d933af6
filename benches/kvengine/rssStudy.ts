// Resident memory over a long batch-1 generation: sampled every `every` tokens after a warm-up,
// to show whether a decode step leaks (it should stay flat).
import type { Engine } from '../../index.js'
import type { Plan } from '../lib/plan.js'
import { log, procStatusBytes } from '../lib/proc.js'
import type { RssStudy } from '../lib/results.js'
import { timedGenerate } from './timedGenerate.js'

export async function rssStudy(engine: Engine, prompt: number[], cfg: NonNullable<Plan['rss']>): Promise<RssStudy> {
  const samples: [number, number][] = []
  const options = { maxTokens: cfg.warmup + cfg.tokens, temperature: 1, topK: 50, seed: 7, stopTokens: [] }
  await timedGenerate(engine, prompt.slice(0, cfg.prompt), options, (step) => {
    if (step >= cfg.warmup && (step - cfg.warmup) % cfg.every === 0) samples.push([step - cfg.warmup, procStatusBytes('VmRSS')])
  })
  const first = samples[0]![1]
  const last = samples.at(-1)![1]
  const changePct = ((last - first) / first) * 100
  log('kvengine', `rss over ${cfg.tokens} tokens after ${cfg.warmup} warm-up: ${mib(first)} → ${mib(last)} MiB (${changePct.toFixed(2)}%)`)
  return { samples, warmupTokens: cfg.warmup, changePct }
}

const mib = (b: number) => (b / 2 ** 20).toFixed(1)
