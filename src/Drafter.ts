import type { DraftBackoff } from './DraftBackoff.js'
import type { RowState } from './RowState.js'

/** What the Engine asks of a speculative drafter (PromptLookup, DraftModel), one per generation. */
export interface Drafter {
  /** Tokens one call drafts per row, at most. */
  readonly maxDraft: number
  /** When to draft: the Engine asks it before each call and tells it what each draft kept. */
  readonly backoff: DraftBackoff
  /**
   * The tokens a drafted call feeds each live row after its last (row r continues prompt
   * ⌊r / numSamples⌋), all one length so every row runs the same passes, at most `room`; null,
   * for a plain call, where a live row has no draft or `room` is 0 (a row in a tool call gets
   * none, see BurstLedger.passesFor: its forced answer would differ from any draft).
   */
  draftRows(rows: RowState[], prompts: Uint32Array[], numSamples: number, room: number): Promise<number[][] | null>
  /** Frees what the drafter holds (a draft model's cache). */
  dispose(): void
}
