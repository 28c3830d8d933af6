// Greedy golden fixture for Gemma 3 from llama.cpp (through node-llama-cpp), independent of our engine.
//
//   node --import=tsx scripts/make-gemma-fixtures.ts [--model models/gemma-3-270m-q4_k_m.gguf]
//        [--out __test__/fixtures/llamacpp-greedy-gemma3.json] [--tokens 32]
//
// Per prompt: the ids llama.cpp was fed (BOS included, tokenized by llama.cpp itself, so our tokenizer
// plays no part in the test), its N greedy tokens (not stopped at <end_of_turn> or EOS) and its top-2
// candidates with their probabilities at each step, to tell a near-tie from a real disagreement.
import { writeFileSync } from 'node:fs'
import { basename } from 'node:path'
import { parseArgs } from 'node:util'
import { readGgufFileInfo, JinjaTemplateChatWrapper, type Token } from 'node-llama-cpp'

import { greedyWithTop2, loadWithNodeLlamaCpp } from './nodeLlamaCpp.js'

const { values: args } = parseArgs({
  options: {
    model: { type: 'string', default: 'models/gemma-3-270m-q4_k_m.gguf' },
    out: { type: 'string', default: '__test__/fixtures/llamacpp-greedy-gemma3.json' },
    tokens: { type: 'string', default: '32' },
  },
})
const N = Number(args.tokens)
if (!Number.isInteger(N) || N < 1) throw new Error(`--tokens must be a positive integer, got ${args.tokens}`)
const log = (msg: string) => process.stderr.write(`[make-gemma-fixtures] ${msg}\n`)

// Gemma's turn format after BOS, written out literally and checked below against the GGUF's own template.
const gemmaChat = (user: string) => `<start_of_turn>user\n${user}<end_of_turn>\n<start_of_turn>model\n`

const PROMPTS: { name: string; kind: 'chat' | 'raw'; msg: string }[] = [
  { name: 'chat-en-capital', kind: 'chat', msg: 'What is the capital of France?' },
  { name: 'chat-en-explain', kind: 'chat', msg: 'Explain in two sentences why the sky is blue.' },
  { name: 'chat-fr', kind: 'chat', msg: 'Peux-tu me donner trois conseils pour bien dormir ?' },
  { name: 'chat-zh', kind: 'chat', msg: '请用一句话介绍一下你自己。' },
  { name: 'chat-code-py', kind: 'chat', msg: 'Write a Python function that reverses a string.' },
  { name: 'raw-en-story', kind: 'raw', msg: 'Once upon a time, in a small village by the sea, there lived' },
  { name: 'raw-es', kind: 'raw', msg: 'La receta tradicional de la paella valenciana lleva' },
  { name: 'raw-de', kind: 'raw', msg: 'Die Hauptstadt von Deutschland ist Berlin. Die Stadt ist bekannt für' },
  { name: 'raw-code-py', kind: 'raw', msg: 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n' },
  { name: 'raw-list', kind: 'raw', msg: 'The planets of the solar system, in order from the Sun, are' },
]

const { model, generator } = await loadWithNodeLlamaCpp(args.model)
log(`${generator}; model ${args.model}`)

// node-llama-cpp's tokenize() never adds BOS; prepend it exactly when llama.cpp would.
const bos = model.tokens.shouldPrependBosToken && model.tokens.bos != null ? [model.tokens.bos] : []
if (bos.length === 0) throw new Error('expected the Gemma GGUF to ask for BOS (tokenizer.ggml.add_bos_token)')

// This file has no tokenizer.chat_template; where a GGUF does, the literal must match its render.
const template = (await readGgufFileInfo(args.model, { readTensorInfo: false })).metadata?.tokenizer?.chat_template
if (typeof template === 'string') {
  const wrapper = new JinjaTemplateChatWrapper({ template })
  for (const p of PROMPTS.filter((p) => p.kind === 'chat')) {
    const rendered = wrapper.generateContextState({ chatHistory: [{ type: 'user', text: p.msg }, { type: 'model', response: [] }] }).contextText.toString()
    // The template begins with {{ bos_token }}, which we add as an id instead.
    if (rendered.replace(/^<bos>/, '') !== gemmaChat(p.msg)) throw new Error(`chat template mismatch for ${p.name}:\n${JSON.stringify(rendered)}`)
  }
  log('chat literal == jinja chat_template render')
} else {
  log('no chat template in the GGUF: chat prompts use Gemma\'s published turn format as written above')
}

const prompts = []
for (const p of PROMPTS) {
  const text = p.kind === 'chat' ? gemmaChat(p.msg) : p.msg
  const promptTokens: Token[] = [...bos, ...model.tokenize(text, p.kind === 'chat')]
  // llama.cpp's default F16 KV cache (ours is F16 too).
  const { greedyTokens, top2 } = await greedyWithTop2(model, promptTokens, N, 'F16')
  const greedyText = model.detokenize(greedyTokens, true)
  log(`${p.name}: ${promptTokens.length} prompt tokens: ${JSON.stringify(greedyText.slice(0, 70))}`)
  prompts.push({ name: p.name, kind: p.kind, text, promptTokens, greedyTokens, greedyText, top2 })
}
writeFileSync(args.out, JSON.stringify({ generator, model: basename(args.model), tokens: N, bosPrepended: true, kvCacheType: 'F16', prompts }, null, 1) + '\n')
log(`wrote ${args.out}`)
await model.dispose()
