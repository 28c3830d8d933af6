/** A function the model may call, in OpenAI's `tools` shape. */
export interface ChatTool {
  type: 'function'
  function: {
    /** 1 to 64 letters, digits, `_` or `-`. */
    name: string
    description?: string
    /** The JSON Schema of its arguments; default `{ type: 'object' }`. */
    parameters?: object
    /** Accepted for OpenAI's clients: calls are always held to `parameters`. */
    strict?: boolean
  }
}
