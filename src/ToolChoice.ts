/**
 * Which replies `tools` allow, as OpenAI's `tool_choice`: `auto` (the default) lets the model
 * answer in text or with calls; `required` makes the reply calls, constrained to the tools'
 * schemas; a named function makes it a call of that one; `none` asks for text.
 */
export type ToolChoice = 'none' | 'auto' | 'required' | { type: 'function'; function: { name: string } }
