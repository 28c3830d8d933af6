// One engine, one model, one thread count, in its own process (so thread pools and peak RSS are
// its own): measures what the plan asks and prints one RESULT line of JSON on stdout.
//
//   node --import=tsx benches/kvengineRunner.ts <spec.json>      (written by benches/compare.ts)
import { readFileSync } from 'node:fs'

import { aggregateFigures, decodeFigures, prefillFigures } from './kvengine/figures.js'
import { kvStudy } from './kvengine/kvStudy.js'
import { rssStudy } from './kvengine/rssStudy.js'
import type { RunSpec } from './lib/plan.js'
import { emitResult, log, procStatusBytes } from './lib/proc.js'
import { importShippedPackage } from './lib/shippedPackage.js'
import type { EngineResult } from './lib/results.js'

const { Engine, Model } = await importShippedPackage()
const spec = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as RunSpec
const { plan, prompt } = spec
const loadStart = performance.now()
const model = await Model.load(spec.model, { threads: spec.threads, activations: spec.activations })
const loadMs = performance.now() - loadStart
const rssAfterLoad = procStatusBytes('VmRSS')
log('kvengine', `loaded ${spec.model} with ${spec.threads} thread(s), ${model.info.activations ?? spec.activations ?? 'default'} activations, in ${loadMs.toFixed(0)} ms`)
const engine = new Engine(model)

const prefill = await prefillFigures(engine, prompt, plan)
const { decode, kvBytes } = await decodeFigures(engine, prompt, plan)
const aggregate = await aggregateFigures(engine, prompt, plan)
const kv = plan.kv ? await kvStudy(model, prompt, plan.kv) : undefined
const rss = plan.rss ? await rssStudy(engine, prompt, plan.rss) : undefined

const result: EngineResult = {
  engine: 'kvengine',
  model: spec.model,
  threads: spec.threads,
  loadMs,
  rssAfterLoad,
  peakRss: procStatusBytes('VmHWM'),
  kvBytes,
  kvNote: `cache.sizeBytes of the ${plan.decodeMainContext}+${plan.decodeTokens}-token decode run (f16 K and V, the default store)`,
  prefill,
  decode,
  aggregate,
  kv,
  rss,
}
emitResult(result)
model.dispose()
