/** A call the model made, in OpenAI's shape: `arguments` is JSON text that matches the tool's `parameters`. */
export interface ToolCall {
  id: string
  type: 'function'
  function: { name: string; arguments: string }
}
