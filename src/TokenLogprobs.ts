/** A sampled token's log-probability under the distribution of the logits it was drawn from
 * (a constrained row's logits arrive masked), before temperature, top-k or top-p reshape it, as
 * OpenAI and vLLM report them; with the most likely tokens of that step, most likely first (fewer
 * where a constraint allowed fewer). */
export interface TokenLogprobs {
  logprob: number
  top: { token: number; logprob: number }[]
}
