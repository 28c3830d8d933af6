// nanochat on our kernels: a random-weight checkpoint of nanochat's d20 shape, decoded greedily
// at batch 1 after a 32-token prompt, each way the CPU can run it: with weights as the file
// holds them (f32), and with the projections quantized once at load to Q8_0 (`quantize`), with
// f32 or 8-bit activations. Reports decode tokens per second (the median of the rounds), how many
// of the 64 greedy tokens equal the f32 road's, and the largest logit difference from it after
// the prompt. BENCH_NANOCHAT_CONFIGS=f32 runs the f32 road alone, which a checkout from before
// `quantize` can run too (copy this file and benches/lib/nanochatCheckpoint.ts into it).
//
//   node --import=tsx benches/nanochatSpeed.ts [rounds, default 3]
import { Model, type ModelLoadOptions } from '../index.js'
import { D20, nanochatCheckpoint } from './lib/nanochatCheckpoint.js'

const STEPS = 64
const rounds = Number(process.argv[2] ?? 3)
const configs = (process.env.BENCH_NANOCHAT_CONFIGS ?? 'f32,q8_0+f32,q8_0+q8').split(',')
const dir = nanochatCheckpoint(D20, (line) => process.stderr.write(line))

interface Run {
  perSecond: number
  tokens: number[]
  firstLogits: Float32Array
}

async function decode(model: Model, prompt: number[]): Promise<Run> {
  const cache = model.createCache(1, prompt.length + STEPS + 1)
  try {
    let { logits } = await model.forward(cache, [prompt])
    const firstLogits = logits.slice()
    const tokens: number[] = []
    const start = performance.now()
    for (let i = 0; i < STEPS; i++) {
      tokens.push(argmax(logits))
      ;({ logits } = await model.forward(cache, [[tokens[i]]]))
    }
    return { perSecond: STEPS / ((performance.now() - start) / 1000), tokens, firstLogits }
  } finally {
    cache.dispose()
  }
}

function argmax(values: Float32Array): number {
  let best = 0
  for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i
  return best
}

let baseline: Run | null = null
for (const config of configs) {
  const [quantize, activations] = config === 'f32' ? [undefined, 'f32'] : config.split('+')
  const options = { activations, ...(quantize && { quantize }) } as ModelLoadOptions
  const loadStart = performance.now()
  const model = await Model.load(dir, options)
  const loadSeconds = (performance.now() - loadStart) / 1000
  const prompt = model.tokenizer.encode('The quick brown fox jumps over the lazy dog, and then it runs far away into the woods.').slice(0, 32)
  const runs: Run[] = []
  for (let r = 0; r < rounds; r++) runs.push(await decode(model, prompt))
  model.dispose()
  const median = [...runs].sort((a, b) => a.perSecond - b.perSecond)[Math.floor(runs.length / 2)]
  baseline ??= median
  const agree = median.tokens.findIndex((t, i) => t !== baseline?.tokens[i])
  const diff = median.firstLogits.reduce((m, v, i) => Math.max(m, Math.abs(v - (baseline as Run).firstLogits[i])), 0)
  console.log(
    JSON.stringify({
      config,
      loadSeconds: Number(loadSeconds.toFixed(1)),
      decodeTokensPerSecond: Number(median.perSecond.toFixed(2)),
      rounds: runs.map((r) => Number(r.perSecond.toFixed(2))),
      greedyTokensEqualToFirst: agree === -1 ? STEPS : agree,
      maxLogitDiffFromFirst: Number(diff.toFixed(4)),
      tokens: median.tokens.join(' '),
    }),
  )
}
