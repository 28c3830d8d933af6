// What speculative decoding does to decode speed: SmolLM2-135M Q8_0 through the Engine at batch
// 1, greedy, each prompt decoded plainly (the default greedy bursts), with prompt lookup
// (`method: 'ngram'`) and with a draft model (a Q4_0 copy of the same model, quantized at load
// from the F32 file), in turn. Three tasks copy from their prompt (fixing typos, renaming a
// variable, extracting lines) and one is free text. Speed is decode tokens per second after the
// first token; every run must give the plain run's tokens. The draft model's agreement is the
// share of the plain output's tokens that are its own top token after the same prefix (what
// each of its greedy drafts is accepted with).
//
//   node --import=tsx benches/speculativeSpeed.ts [rounds, default 3] [task, default all]
import { join } from 'node:path'

import { Engine, type GenerateOptions, Model } from '../index.js'
import { ROOT } from './lib/paths.js'

const rounds = Number(process.argv[2] ?? 3)
const model = await Model.load(join(ROOT, 'models', 'SmolLM2-135M-Instruct.Q8_0.gguf'))
const draftModel = await Model.load(join(ROOT, 'models', 'SmolLM2-135M-Instruct.F32.gguf'), { quantize: 'q4_0' })
const engine = new Engine(model)
const ROADS: Record<string, GenerateOptions['speculative']> = {
  plain: undefined,
  ngram: { method: 'ngram' },
  draftModel: { method: 'draft_model', model: draftModel },
}

const CODE = `def summarize(orders):
    count = 0
    for order in orders:
        if order.status == "paid":
            count += order.amount
        elif order.status == "refunded":
            count -= order.amount
    print("total paid:", count)
    return count


def report(orders, days):
    count = summarize(orders)
    average = count / max(days, 1)
    return {"count": count, "average": average, "days": days}
`
const TASKS: Record<string, string> = {
  typos: `Rewrite this paragraph with the spelling mistakes fixed, changing nothing else:\n\nThe lighthouse stood at the edge of the cliff for more than two hundred yaers. Every night its keeper climbed the narow stairs, lit the great lamp and watched the ships pass safely through the straight. In winter the storms were so strong that the whole tower shook, but the light never went out. The villagers said the keeper never slept, and the sailors beleived them.`,
  rename: `Rename the variable count to total in this Python code. Reply with the whole code and nothing else.\n\n${CODE}`,
  extract: `Copy out, word for word, the lines of this log that contain ERROR.\n\n2026-12-01 10:00:01 INFO server started on port 8080\n2026-12-01 10:00:05 ERROR could not open database connection to db-primary: timeout after 30 seconds\n2026-12-01 10:00:09 INFO retrying connection to db-primary\n2026-12-01 10:00:40 ERROR could not open database connection to db-primary: timeout after 30 seconds\n2026-12-01 10:01:02 WARN falling back to db-replica in read-only mode\n2026-12-01 10:01:03 ERROR write rejected by db-replica: read-only mode is on for this replica`,
  free: 'Write a short story about a fox who learns to swim.',
}

interface Run {
  perSecond: number
  tokens: number[]
}

/** Decode tokens per second of one greedy generation, after its first token. */
async function run(prompt: number[], speculative: GenerateOptions['speculative']): Promise<Run> {
  const options: GenerateOptions = { temperature: 0, maxTokens: 256, speculative }
  const tokens: number[] = []
  let first = 0
  let last = 0
  for await (const step of engine.generate(prompt, options)) {
    last = performance.now()
    if (first === 0) first = last
    if (step.tokenColumn[0] >= 0) tokens.push(step.tokenColumn[0])
  }
  return { perSecond: (tokens.length - 1) / ((last - first) / 1000), tokens }
}

/** The share of `output` whose every token is the draft model's top token after the tokens before it. */
async function agreement(prompt: number[], output: number[]): Promise<number> {
  const cache = draftModel.createCache(1, prompt.length + output.length)
  const { candidates } = await draftModel.forward(cache, [[...prompt, ...output.slice(0, -1)]], { allLogits: true, candidates: 1, logits: false })
  cache.dispose()
  const ids = candidates?.ids ?? new Uint32Array(0)
  return output.filter((token, i) => ids[prompt.length - 1 + i] === token).length / output.length
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]
const round1 = (x: number) => Number(x.toFixed(1))
for (const [task, request] of Object.entries(TASKS).filter(([name]) => [name, undefined].includes(process.argv[3]))) {
  const prompt = model.tokenizer.encode(`<|im_start|>user\n${request}<|im_end|>\n<|im_start|>assistant\n`, { special: true })
  const rates: Record<string, number[]> = Object.fromEntries(Object.keys(ROADS).map((road) => [road, []]))
  const reference = await run(prompt, undefined)
  let same = true
  for (let round = 0; round < rounds; round++) {
    for (const [road, speculative] of Object.entries(ROADS)) {
      const r = await run(prompt, speculative)
      rates[road].push(r.perSecond)
      same &&= r.tokens.length === reference.tokens.length && r.tokens.every((t, i) => t === reference.tokens[i])
    }
  }
  const [plain, ngram, draft] = ['plain', 'ngram', 'draftModel'].map((road) => median(rates[road]))
  const agreed = await agreement(prompt, reference.tokens)
  console.log(
    JSON.stringify({
      task,
      promptTokens: prompt.length,
      tokens: reference.tokens.length,
      sameTokens: same,
      plainTokPerS: round1(plain),
      ngramTokPerS: round1(ngram),
      ngramSpeedup: Number((ngram / plain).toFixed(2)),
      draftModelTokPerS: round1(draft),
      draftModelSpeedup: Number((draft / plain).toFixed(2)),
      draftAgreement: Number(agreed.toFixed(3)),
      rounds: Object.fromEntries(Object.entries(rates).map(([road, xs]) => [road, xs.map(round1)])),
    }),
  )
}
model.dispose()
draftModel.dispose()
