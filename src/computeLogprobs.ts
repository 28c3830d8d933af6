import type { TokenLogprobs } from './TokenLogprobs.js'

/**
 * log-softmax of `logits[offset, offset + vocab)` at `token`, and the `top` most likely tokens
 * (ties by lower id; tokens a constraint masked out are never among them): one pass for the
 * maximum, one for the sum of exponentials and the top list.
 */
export function computeLogprobs(logits: Float32Array, offset: number, vocab: number, token: number, top: number): TokenLogprobs {
  let max = -Infinity
  for (let i = offset; i < offset + vocab; i++) if (logits[i] > max) max = logits[i]
  let sum = 0
  // The best `top` ids so far, best first.
  const best: number[] = []
  for (let i = 0; i < vocab; i++) {
    const x = logits[offset + i]
    sum += Math.exp(x - max)
    if (top === 0 || x === -Infinity || (best.length === top && x <= logits[offset + best[top - 1]])) continue
    let at = best.length
    while (at > 0 && x > logits[offset + best[at - 1]]) at--
    best.splice(at, 0, i)
    if (best.length > top) best.pop()
  }
  const lse = max + Math.log(sum)
  return { logprob: logits[offset + token] - lse, top: best.map((id) => ({ token: id, logprob: logits[offset + id] - lse })) }
}
