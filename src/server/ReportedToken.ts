/** A sampled token's log-probabilities as OpenAI reports them: its text (decoded alone), its
 * bytes, and the step's most likely tokens likewise. */
export interface ReportedToken {
  token: string
  bytes: number[]
  logprob: number
  top: { token: string; bytes: number[]; logprob: number }[]
}
