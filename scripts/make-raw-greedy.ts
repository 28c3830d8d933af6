// A second llama.cpp's greedy tokens for an existing node-llama-cpp fixture: raw llama.cpp built
// natively by scripts/build-llama-cpp.sh, fed the fixture's own prompt ids (BOS included), with its KV
// cache type and no flash attention, as node-llama-cpp ran. Two builds of llama.cpp on the same quantized
// file show how far llama.cpp agrees with itself, which bounds what any third engine can.
//
//   node --import=tsx scripts/make-raw-greedy.ts --fixture __test__/fixtures/llamacpp-greedy-gemma3.json
//        --model models/gemma-3-270m-q4_k_m.gguf --out __test__/fixtures/llamacpp-raw-greedy-gemma3.json
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'

import { writeFixtureJson } from './fixtureJson.js'
import { rawLlamaCpp } from './rawLlamaCpp.js'

const { values: args } = parseArgs({ options: { fixture: { type: 'string' }, model: { type: 'string' }, out: { type: 'string' } } })
if (!args.fixture || !args.model || !args.out) throw new Error('--fixture, --model and --out are required')
const log = (msg: string) => process.stderr.write(`[make-raw-greedy] ${msg}\n`)

const llamaCpp = rawLlamaCpp()
const source = JSON.parse(readFileSync(args.fixture, 'utf8')) as { tokens: number; kvCacheType: 'F16' | 'F32'; prompts: { name: string; promptTokens: number[] }[] }
const prompts = source.prompts.map((p) => {
  const { greedy } = llamaCpp.logits(args.model!, p.promptTokens, { kv: source.kvCacheType === 'F32' ? 'f32' : 'f16', generate: source.tokens })
  log(`${p.name}: done`)
  return { name: p.name, greedyTokens: greedy }
})
writeFixtureJson(args.out, { generator: `${llamaCpp.generator}, GGML_NATIVE on this CPU`, tokens: source.tokens, kvCacheType: source.kvCacheType, prompts }, log)
