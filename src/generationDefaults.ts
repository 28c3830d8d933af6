import type { ForwardModel } from './ForwardModel.js'
import { nanochatDefaults } from './nanochatDefaults.js'
import type { ToolUse } from './ToolUse.js'

/** What a generation uses where its request leaves it out, the same for the Engine and the server. */
export interface GenerationDefaults {
  /** The model's end-of-generation tokens, and nanochat's `<|assistant_end|>` and `<|bos|>`. */
  stopTokens: ReadonlySet<number>
  /** nanochat's calculator where the vocabulary is nanochat's (its models were taught it); else none. */
  tools: ToolUse[]
}

export function generationDefaults(model: Pick<ForwardModel, 'info' | 'tokenizer'>): GenerationDefaults {
  const nanochat = nanochatDefaults(model.tokenizer)
  return { stopTokens: new Set([...model.info.eogTokens, ...(nanochat?.stopTokens ?? [])]), tools: nanochat?.tools ?? [] }
}
