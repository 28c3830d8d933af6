import type { ChatMessage } from '../ChatMessage.js'
import type { Model } from '../Model.js'

/**
 * Renders `messages` with the model's chat template and tokenizes the result so that only the
 * template's own text can produce special tokens: message contents are encoded as plain text, as
 * nanochat's encode_ordinary does, so a user typing `<|im_end|>` cannot close their turn and
 * forge another. The template is rendered with a placeholder per content, and the text between
 * placeholders is encoded with special tokens on. A template that alters contents (so the
 * placeholders do not come back in order) falls back to parsing the whole rendering. A model
 * without a template (a nanochat checkpoint) is rendered the way nanochat renders it.
 */
export function encodeChat(model: Model, messages: ChatMessage[]): number[] {
  // nanochat checkpoints carry no template; their own rendering already keeps contents plain.
  if (!model.info.hasChatTemplate) return model.renderForCompletion(messages)
  const { tokenizer } = model
  // Private-use characters: no template writes them, so each is found exactly where a content was.
  const marks = messages.map((_, i) => `\u{E000}${i}\u{E001}`)
  const rendered = model.applyChatTemplate(
    messages.map((m, i) => ({ role: m.role, content: marks[i] })),
    { addGenerationPrompt: true },
  )
  const tokens: number[] = []
  let at = 0
  for (const [i, mark] of marks.entries()) {
    const next = rendered.indexOf(mark, at)
    if (next === -1) return tokenizer.encode(model.applyChatTemplate(messages, { addGenerationPrompt: true }), { special: true })
    tokens.push(...tokenizer.encode(rendered.slice(at, next), { special: true, addBos: i === 0 ? undefined : false }))
    tokens.push(...tokenizer.encode(messages[i].content, { special: false, addBos: false }))
    at = next + mark.length
  }
  tokens.push(...tokenizer.encode(rendered.slice(at), { special: true, addBos: false }))
  return tokens
}
