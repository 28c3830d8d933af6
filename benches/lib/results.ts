// The figures each runner reports (one JSON object per engine, model and thread count).

export interface PrefillFigure {
  tokens: number
  /** Prompt handed over → first sampled token back, best repetition. */
  ttftMs: number
  /** tokens ÷ TTFT. */
  tokPerSec: number
}

export interface DecodeFigure {
  /** Prompt tokens before the timed decode steps. */
  context: number
  tokens: number
  tokPerSec: number
  msPerToken: number
  /** kvengine: share of the decode steps' wall time spent outside the engine's forward. */
  tsShare?: number
  /** kvengine: digest of the generated tokens (benches/kvengine/timedGenerate.ts). */
  tokensDigest?: string
}

export interface AggregateFigure {
  samples: number
  tokensPerSample: number
  /** Prompt handed over → every sample complete (prefill included). */
  wallMs: number
  /** samples · tokensPerSample ÷ wall. */
  tokPerSec: number
  /** How the engine produced the samples (llama.cpp: its faster way). */
  method: string
  tsShare?: number
  /** kvengine: digest of every sample's tokens (benches/kvengine/timedGenerate.ts). */
  tokensDigest?: string
  /** llama.cpp: wall time of every way tried, by method. */
  tried?: Record<string, number>
  /** Making the KV store before the timer starts (kvengine's cache, llama.cpp's context), ms. */
  setupMs?: number
}

export interface KvStudy {
  prompt: number
  rows: { generated: number; cachedMs: number; recomputeMs: number; speedup: number; estimated: boolean; tokensCompared: number; tokensIdentical: number }[]
  note: string
}

export interface RssStudy {
  /** [tokens generated, VmRSS bytes] after warm-up. */
  samples: [number, number][]
  warmupTokens: number
  changePct: number
}

export interface EngineResult {
  engine: 'kvengine' | 'llama.cpp'
  model: string
  threads: number
  loadMs: number
  rssAfterLoad: number
  /** VmHWM at the end of the runner: the peak over every figure it measured. */
  peakRss: number
  /** KV-cache bytes for the headline decode run (decodeMainContext + decodeTokens positions). */
  kvBytes: number
  kvNote: string
  prefill: PrefillFigure[]
  decode: DecodeFigure[]
  aggregate: AggregateFigure[]
  kv?: KvStudy
  rss?: RssStudy
}
