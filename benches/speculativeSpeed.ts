// What prompt-lookup speculative decoding (`speculative: { method: 'ngram' }`) does to decode
// speed: SmolLM2-135M Q8_0 through the Engine at batch 1, greedy, each prompt decoded plainly
// (the default greedy bursts) and speculatively, alternating. Three tasks copy from their
// prompt (fixing typos, renaming a variable, extracting lines) and one is free text. Speed is
// decode tokens per second after the first token; both runs must give the same tokens.
//
//   node --import=tsx benches/speculativeSpeed.ts [rounds, default 3] [numSpeculativeTokens, default 8] [task, default all]
import { join } from 'node:path'

import { Engine, type GenerateOptions, Model } from '../index.js'
import { ROOT } from './lib/paths.js'

const rounds = Number(process.argv[2] ?? 3)
const numSpeculativeTokens = Number(process.argv[3] ?? 8)
const model = await Model.load(join(ROOT, 'models', 'SmolLM2-135M-Instruct.Q8_0.gguf'))
const engine = new Engine(model)

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
async function run(prompt: number[], speculative: boolean): Promise<Run> {
  const options: GenerateOptions = { temperature: 0, maxTokens: 256, ...(speculative && { speculative: { method: 'ngram', numSpeculativeTokens } }) }
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

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]
for (const [task, request] of Object.entries(TASKS).filter(([name]) => [name, undefined].includes(process.argv[4]))) {
  const prompt = model.tokenizer.encode(`<|im_start|>user\n${request}<|im_end|>\n<|im_start|>assistant\n`, { special: true })
  await run(prompt, false)
  const plain: number[] = []
  const drafted: number[] = []
  let same = true
  let length = 0
  for (let round = 0; round < rounds; round++) {
    const a = await run(prompt, false)
    const b = await run(prompt, true)
    plain.push(a.perSecond)
    drafted.push(b.perSecond)
    same &&= a.tokens.length === b.tokens.length && a.tokens.every((t, i) => t === b.tokens[i])
    length = a.tokens.length
  }
  const [p, d] = [median(plain), median(drafted)]
  console.log(JSON.stringify({ task, promptTokens: prompt.length, tokens: length, sameTokens: same, plainTokPerS: Number(p.toFixed(1)), ngramTokPerS: Number(d.toFixed(1)), speedup: Number((d / p).toFixed(2)), plain: plain.map((x) => Number(x.toFixed(1))), ngram: drafted.map((x) => Number(x.toFixed(1))) }))
}
model.dispose()
