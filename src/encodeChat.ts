import type { ChatMessage } from './ChatMessage.js'
import { KvEngineError } from './KvEngineError.js'
import type { Model } from './Model.js'
import type { ToolCallRequest } from './toolCallRequest.js'

/**
 * Renders `messages` with the model's chat template, and the functions of `tools` in the
 * model's own call format (`model.toolCallFormat`), and tokenizes the result so that only the
 * template's own text can produce special tokens: message contents are encoded as plain text, as
 * nanochat's encode_ordinary does, so a user typing `<|im_end|>` cannot close their turn and
 * forge another. The template is rendered with a placeholder per content, and the text between
 * placeholders is encoded with special tokens on. A template that alters contents (so that
 * putting them back in place of the placeholders does not give its own rendering) falls back to
 * parsing the whole rendering. A model without a template (a nanochat checkpoint) is rendered
 * the way nanochat renders it.
 */
export function encodeChat(model: Model, messages: ChatMessage[], tools: ToolCallRequest | null = null): number[] {
  if (!model.info.hasChatTemplate) {
    if (tools) throw new KvEngineError('UNSUPPORTED', 'this model has no chat template to offer functions with; its own tools (the calculator) run through Engine.generate')
    // nanochat's own rendering already keeps contents plain.
    return model.renderForCompletion(messages)
  }
  const { tokenizer } = model
  const prompt = model.toolCallFormat.prompt(messages, tools)
  const render = (list: ChatMessage[]) => model.applyChatTemplate(list, { addGenerationPrompt: true, tools: prompt.tools })
  const whole = render(prompt.messages)
  // Private-use characters: no template writes them, so each is found exactly where a content was.
  // An empty content stays empty: templates test it (`if message.content`).
  const marks = prompt.messages.map((m, i) => (m.content === '' ? '' : `\u{E000}${i}\u{E001}`))
  const marked = render(prompt.messages.map((m, i) => ({ ...m, content: marks[i] })))
  const parts: { text: string; special: boolean }[] = []
  let at = 0
  for (const [i, mark] of marks.entries()) {
    if (mark === '') continue
    const next = marked.indexOf(mark, at)
    if (next === -1) break
    parts.push({ text: marked.slice(at, next), special: true }, { text: prompt.messages[i].content, special: false })
    at = next + mark.length
  }
  parts.push({ text: marked.slice(at), special: true })
  if (parts.map((p) => p.text).join('') !== whole) return tokenizer.encode(whole, { special: true })
  return parts.flatMap((p, i) => tokenizer.encode(p.text, { special: p.special, addBos: i === 0 ? undefined : false }))
}
