/**
 * Each logits row's highest tokens, picked in native code after a forward pass (see
 * `ForwardOptions.candidates`): `(rows, perRow)` row-major, highest logit first, ties by lower id.
 * A top-k or greedy `Sampler` reads these instead of scanning the whole vocabulary.
 */
export class Candidates {
  /** The most a pass picks per row; a sampler that needs more scans the logits itself. */
  static readonly MAX = 4096

  constructor(
    readonly ids: Uint32Array,
    readonly logits: Float32Array,
    readonly perRow: number,
  ) {}
}
