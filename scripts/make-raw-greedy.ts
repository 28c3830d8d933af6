// A second llama.cpp's greedy tokens for an existing node-llama-cpp fixture: raw llama.cpp built
// natively by scripts/build-llama-cpp.sh, fed the fixture's own prompt ids (BOS included), with its KV
// cache type and no flash attention, as node-llama-cpp ran. Two builds of llama.cpp on the same quantized
// file show how far llama.cpp agrees with itself, which bounds what any third engine can.
//
//   node --import=tsx scripts/make-raw-greedy.ts --fixture __test__/fixtures/llamacpp-greedy-gemma3.json
//        --model models/gemma-3-270m-q4_k_m.gguf --out __test__/fixtures/llamacpp-raw-greedy-gemma3.json
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'

import { writeFixtureJson } from './fixtureJson.js'

const { values: args } = parseArgs({ options: { fixture: { type: 'string' }, model: { type: 'string' }, out: { type: 'string' } } })
if (!args.fixture || !args.model || !args.out) throw new Error('--fixture, --model and --out are required')
const log = (msg: string) => process.stderr.write(`[make-raw-greedy] ${msg}\n`)

const bin = execFileSync('bash', ['scripts/build-llama-cpp.sh'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim()
const version = /VERSION=(\S+)/.exec(readFileSync('scripts/build-llama-cpp.sh', 'utf8'))?.[1]
const source = JSON.parse(readFileSync(args.fixture, 'utf8')) as { tokens: number; kvCacheType: 'F16' | 'F32'; prompts: { name: string; promptTokens: number[] }[] }
const work = mkdtempSync(join(tmpdir(), 'kvengine-raw-'))
try {
  const prompts = source.prompts.map((p) => {
    writeFileSync(join(work, 'ids.txt'), p.promptTokens.join(' '))
    const out = execFileSync(join(bin, 'llama-logits'), [args.model!, join(work, 'ids.txt'), join(work, 'logits.bin'), '--kv', source.kvCacheType.toLowerCase(), '--generate', String(source.tokens)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
    log(`${p.name}: done`)
    return { name: p.name, greedyTokens: (JSON.parse(out) as { greedy: number[] }).greedy }
  })
  writeFixtureJson(args.out, { generator: `raw llama.cpp from llama-cpp-python ${version}'s sdist, GGML_NATIVE on this CPU`, tokens: source.tokens, kvCacheType: source.kvCacheType, prompts }, log)
} finally {
  rmSync(work, { recursive: true, force: true })
}
