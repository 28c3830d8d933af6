import type { ChatTool } from './ChatTool.js'
import type { GenerateOptions } from './GenerateOptions.js'
import type { ToolChoice } from './ToolChoice.js'

/** `Engine.chat`'s options: generation's, with functions in place of nanochat's tools. */
export interface ChatOptions extends Omit<GenerateOptions, 'tools' | 'cache'> {
  /**
   * Functions the model may call, in OpenAI's shape. The chat template renders them where it
   * knows how (Qwen's and Llama 3's do, in the format their models were taught: see
   * `Model.toolCallFormat`); otherwise they are described in the system message. Calls come back
   * as `ChatReply.toolCalls`. Not with `jsonSchema`, `grammar` or `regex`.
   */
  tools?: ChatTool[]
  /** Default 'auto'. `required` or a named function constrains every reply to calls whose arguments match the schemas. */
  toolChoice?: ToolChoice
  /** Whether one reply may hold several calls, where the model's format has room for them. Default true. */
  parallelToolCalls?: boolean
}
