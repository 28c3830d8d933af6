import type { FinishReason } from '../FinishReason.js'
import type { Grammar } from '../Grammar.js'
import type { ReportedToken } from './ReportedToken.js'

export interface Usage {
  promptTokens: number
  /** Prompt tokens whose K/V came from an earlier request instead of a prefill. */
  cachedTokens: number
  completionTokens: number
}

/** Where a job's output goes: the HTTP layer implements this, the decode loop calls it. */
export interface JobSink {
  /** Whole characters of choice `index`, stop strings withheld; never empty. */
  text(index: number, text: string): void
  finish(index: number, reason: FinishReason): void
  /** A sampled token's log-probabilities, for a job that asked for them; before its text. */
  logprobs(index: number, token: ReportedToken): void
  /** Every choice has finished; `completionTokens` counts all of them. */
  done(usage: Usage): void
  fail(err: unknown): void
  /**
   * True while the client has too many bytes written but not yet sent: the loop then neither
   * feeds nor samples the job's rows (they keep their state), so a client that stops reading
   * makes the server buffer no more of its output; they go on when this turns false.
   */
  readonly blocked: boolean
  /** Set by the loop, which may be idle with only paused jobs: call it when `blocked` turns false. */
  onUnblocked: (() => void) | null
}

/** One request as the scheduler and the decode loop see it: tokens in, `n` choices out. */
export interface Job {
  readonly prompt: number[]
  readonly n: number
  /** Already capped to what the context leaves after the prompt. */
  readonly maxTokens: number
  readonly sampling: { temperature: number; topK: number; topP: number; minP: number; seed: number }
  readonly stop: string[]
  /** The grammar every choice's output must match (each choice takes its own fork), or null. */
  readonly grammar: Grammar | null
  /** Top tokens to report with each sampled token's log-probability; null when not asked. */
  readonly logprobs: number | null
  readonly sink: JobSink
  /** performance.now() at submission, for time to first token. */
  readonly submittedAt: number
  /** Set by the HTTP layer when the client goes away; the loop frees the rows at its next step. */
  cancelled: boolean
}
