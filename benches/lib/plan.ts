// What each runner measures, and how much of it: one plan per model, shared by both engines so
// they run exactly the same workloads. `--quick` shrinks every count for a smoke run.

export interface Plan {
  /** Prompt lengths for TTFT / prefill tokens/s. */
  prefillLengths: number[]
  /** Timed repetitions per prefill length (after one warm-up); the best is reported. */
  prefillReps: number
  /** Context lengths at which batch-1 decode speed is measured. */
  decodeContexts: number[]
  /** The context whose decode figure is the headline (issue 4: 128 tokens after 512). */
  decodeMainContext: number
  decodeTokens: number
  /** Samples from one prompt for aggregate tokens/s. */
  samples: number[]
  samplePrompt: number
  sampleTokens: number
  /** KV cache against recomputation (kvengine only); null skips it. */
  kv: { prompt: number; gens: number[]; exactUpTo: number; sampleEvery: number } | null
  /** RSS sampled over a long generation (kvengine only); null skips it. */
  rss: { prompt: number; warmup: number; tokens: number; every: number } | null
  /** The figures the targets are judged on (smaller in --quick, which judges nothing real). */
  targets: { prefillTokens: number; samples: number; kvGenerated: number }
}

export const FULL: Plan = {
  prefillLengths: [128, 512, 2048],
  prefillReps: 3,
  decodeContexts: [128, 512, 2048],
  decodeMainContext: 512,
  decodeTokens: 128,
  samples: [1, 4, 8, 16],
  samplePrompt: 512,
  sampleTokens: 128,
  // Timing every recomputed step to 256 is ~25 minutes here; BENCH_KV_EXACT=64 times fewer
  // exactly (the rest from sampled steps) when the full run does not fit.
  kv: { prompt: 512, gens: [64, 256, 1024], exactUpTo: Number(process.env.BENCH_KV_EXACT ?? 256), sampleEvery: 32 },
  rss: { prompt: 16, warmup: 250, tokens: 2000, every: 250 },
  targets: { prefillTokens: 512, samples: 8, kvGenerated: 256 },
}

export const QUICK: Plan = {
  prefillLengths: [64, 128],
  prefillReps: 1,
  decodeContexts: [64, 128],
  decodeMainContext: 128,
  decodeTokens: 8,
  samples: [1, 8],
  samplePrompt: 128,
  sampleTokens: 8,
  kv: { prompt: 64, gens: [4, 8, 16], exactUpTo: 8, sampleEvery: 4 },
  rss: { prompt: 16, warmup: 16, tokens: 48, every: 16 },
  targets: { prefillTokens: 128, samples: 8, kvGenerated: 8 },
}

/**
 * The 1B model's figures take minutes each (llama.cpp's sequential samples at 16 alone are ~5
 * minutes per thread count here): one repetition, samples 1 and 8 only (8 is target 3's figure)
 * and prompts of at most 512 tokens, unless `fullLarge` (BENCH_LARGE_FULL=1). The two long studies (recomputation alone is ~20
 * minutes) run on one model, `studies`: SmolLM2 Q8_0.
 */
export function planFor(base: Plan, large: boolean, fullLarge = false, studies = !large): Plan {
  const trimmed = studies ? base : { ...base, kv: null, rss: null }
  if (!large) return trimmed
  const samples = fullLarge ? base.samples : base.samples.filter((n) => n === 1 || n === base.targets.samples)
  // A 2048-token prompt is minutes per engine and thread count on this model at 2 cores.
  const short = (lengths: number[]) => (fullLarge ? lengths : lengths.filter((n) => n <= base.samplePrompt))
  return { ...trimmed, prefillReps: 1, samples, prefillLengths: short(base.prefillLengths), decodeContexts: short(base.decodeContexts) }
}

export interface RunSpec {
  model: string
  threads: number
  plan: Plan
  /** Token ids of the shared prompt text (SmolLM2's tokenizer; every model here shares it). */
  prompt: number[]
  /** kvengine only: what Q8_0/Q4_0 weights multiply (`ModelLoadOptions.activations`); the engine's default for this CPU when absent. */
  activations?: 'f32' | 'q8'
}

/** The longest prompt any figure needs, so the orchestrator tokenizes enough text once. */
export function promptTokensNeeded(plan: Plan): number {
  return Math.max(...plan.prefillLengths, ...plan.decodeContexts, plan.samplePrompt, plan.kv?.prompt ?? 0, plan.rss?.prompt ?? 0)
}
