/**
 * The four tokens of a tool call, each as its text in the model's vocabulary (it must be one
 * token, e.g. a control token such as `<|python_start|>`) or as a token id. nanochat's are
 * `<|python_start|>`, `<|python_end|>`, `<|output_start|>`, `<|output_end|>`.
 */
export interface ToolDelimiters {
  /** Opens a call; the tokens after it are the call's text. */
  callStart: string | number
  /** Closes the call and runs the tool on its text. */
  callEnd: string | number
  /** Injected before the tool's result. */
  outputStart: string | number
  /** Injected after the tool's result. */
  outputEnd: string | number
}
