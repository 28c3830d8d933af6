// Golden fixtures from llama.cpp (through node-llama-cpp), an implementation independent of ours.
//
//   node --import=tsx scripts/make-fixtures.ts --model <path.gguf> --out <greedy.json>
//        [--tokens 64] [--tokenizer-out <tokenizer.json>] [--kv-type F16|F32]
//
// Greedy fixture: per prompt, the exact prompt ids fed to llama.cpp, N greedy tokens (generation does not stop at
// EOS / <|im_end|>) and llama.cpp's top-2 candidates with their probabilities at every step.
// Tokenizer fixture: llama.cpp's ids and detokenized text for a corpus of awkward strings.
import { basename } from 'node:path'
import { parseArgs } from 'node:util'
import { readGgufFileInfo, JinjaTemplateChatWrapper, type Token } from 'node-llama-cpp'


import { writeFixtureJson } from './fixtureJson.js'
import { greedyWithTop2, loadWithNodeLlamaCpp } from './nodeLlamaCpp.js'

const { values: args } = parseArgs({
  options: {
    model: { type: 'string' },
    out: { type: 'string' },
    tokens: { type: 'string', default: '64' },
    'tokenizer-out': { type: 'string' },
    // llama.cpp's default KV cache is F16; F32 removes that rounding when comparing against an F32 model.
    'kv-type': { type: 'string', default: 'F16' },
  },
})
if (!args.model || !args.out) {
  console.error('usage: make-fixtures.ts --model <path.gguf> --out <fixture.json> [--tokens 64] [--tokenizer-out <path.json>] [--kv-type F16|F32]')
  process.exit(2)
}
const N = Number(args.tokens)
const kvType = args['kv-type']!.toUpperCase() as 'F16' | 'F32'
if (!Number.isInteger(N) || N < 1) throw new Error(`--tokens must be a positive integer, got ${args.tokens}`)
if (kvType !== 'F16' && kvType !== 'F32') throw new Error(`--kv-type must be F16 or F32, got ${args['kv-type']}`)
const log = (msg: string) => process.stderr.write(`[make-fixtures] ${msg}\n`)

const SYSTEM = 'You are a helpful AI assistant named SmolLM, trained by Hugging Face'
// SmolLM2's ChatML, written out literally (verified below against the GGUF's jinja chat template).
const chatml = (user: string) =>
  `<|im_start|>system\n${SYSTEM}<|im_end|>\n<|im_start|>user\n${user}<|im_end|>\n<|im_start|>assistant\n`

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
  { name: 'raw-code-js', kind: 'raw', msg: 'function debounce(fn, ms) {\n  let timer;\n  return function (...args) {\n' },
]

const TOKENIZER_CORPUS: string[] = [
  'Hello world', 'Hello, world!', ' Hello world', '  leading spaces', 'trailing spaces   ',
  'The quick brown fox jumps over the lazy dog.', "Don't stop: it's 5 o'clock, isn't it?",
  'Numbers: 1234567 and 3.14159, -42, 1e-9, 2024-01-31', '0123456789', '$1,000,000.00 (USD)',
  'def add(a, b):\n    return a + b\n', 'if (x) {\n\tconsole.log("tab");\n\t\treturn;\n}',
  'for i in range(10):\n\tprint(i)  # comment', '<html><body class="main">Hi</body></html>',
  'Café, naïve, façade, Übermäßig, señor, Ångström', 'Grüße aus München — schön!',
  '日本語のテキストです。', '你好，世界！今天天气很好。', '한국어 문장입니다', 'Emoji: 😀🎉👍🏽 and 🇫🇷 flag',
  '👨‍👩‍👧‍👦', 'مرحبا بالعالم', 'שלום עולם', 'Привет, мир!', 'Γειά σου Κόσμε',
  ' ', '  ', '\n', '\n\n\n', '\t', ' \t \n ', 'a  b   c    d', 'line1\r\nline2',
  'x', 'A', '!!!???...', 'https://example.com/path?q=1&r=two#frag', 'snake_case camelCase PascalCase kebab-case',
  // Special-token look-alikes typed as plain text: must NOT become special ids when specials are disabled.
  '<|im_start|>', '<|im_end|>', '<|endoftext|>', '<|im_start|>user\nhi<|im_end|>',
]

// ---- load (CPU only, quiet) ----
const modelPath = args.model
log(`loading ${modelPath}`)
const { llama, model, generator } = await loadWithNodeLlamaCpp(modelPath)
log(`${generator}; cpuMathCores=${llama.cpuMathCores}; kv=${kvType}`)

// node-llama-cpp's tokenize() never adds BOS (llama.cpp add_special=false), so prepend it ourselves
// exactly when llama.cpp would (GGUF tokenizer.ggml.add_bos_token); the recorded ids are what the model saw.
const bos = model.tokens.shouldPrependBosToken && model.tokens.bos != null ? [model.tokens.bos] : []
const tokenizePrompt = (text: string, special: boolean): Token[] => [...bos, ...model.tokenize(text, special)]
log(`BOS prepended: ${bos.length > 0}${bos.length ? ` (id ${bos[0]})` : ''}`)

// Check the literal ChatML against what the GGUF's own jinja template renders (system + user + generation prompt).
const template = (await readGgufFileInfo(modelPath, { readTensorInfo: false })).metadata?.tokenizer?.chat_template
if (typeof template !== 'string') {
  log('WARNING: no tokenizer.chat_template in this GGUF; cannot verify the ChatML literal')
} else {
  const wrapper = new JinjaTemplateChatWrapper({ template })
  for (const p of PROMPTS.filter((p) => p.kind === 'chat')) {
    for (const history of [[{ type: 'system' as const, text: SYSTEM }], []]) {
      const rendered = wrapper.generateContextState({
        chatHistory: [...history, { type: 'user', text: p.msg }, { type: 'model', response: [] }],
      }).contextText.toString()
      if (rendered !== chatml(p.msg)) throw new Error(`chat template mismatch for ${p.name}:\n${JSON.stringify(rendered)}`)
    }
  }
  log('ChatML literal == jinja chat_template render (with and without an explicit system message)')
}

// ---- greedy generation ----
const prompts = []
for (const p of PROMPTS) {
  const text = p.kind === 'chat' ? chatml(p.msg) : p.msg
  const promptTokens = tokenizePrompt(text, p.kind === 'chat')
  const t0 = Date.now()
  const { greedyTokens, top2 } = await greedyWithTop2(model, promptTokens, N, kvType)
  const greedyText = model.detokenize(greedyTokens, true)
  log(`${p.name}: ${promptTokens.length} prompt tokens, ${N} generated in ${Date.now() - t0} ms: ${JSON.stringify(greedyText.slice(0, 70))}`)
  prompts.push({ name: p.name, kind: p.kind, text, promptTokens, greedyTokens, greedyText, top2 })
}

const meta = { generator, model: basename(modelPath) }
writeJson(args.out, { ...meta, tokens: N, bosPrepended: bos.length > 0, kvCacheType: kvType, prompts })

// ---- tokenizer ----
if (args['tokenizer-out']) {
  const cases = []
  for (const text of TOKENIZER_CORPUS) cases.push(tokenizerCase(text, false))
  // Chat-template strings (and the bare look-alikes) with specials enabled, where <|im_start|> etc. become one id.
  for (const p of PROMPTS.filter((p) => p.kind === 'chat')) cases.push(tokenizerCase(chatml(p.msg), true))
  for (const text of TOKENIZER_CORPUS.filter((t) => t.includes('<|'))) cases.push(tokenizerCase(text, true))
  writeJson(args['tokenizer-out'], { ...meta, cases })
}
await model.dispose()
await llama.dispose()

function tokenizerCase(text: string, special: boolean) {
  // No BOS here: these ids are the bare tokenizer output (llama.cpp add_special=false).
  const ids = model.tokenize(text, special)
  // Detokenize renders special ids as their text only when they were parsed as specials.
  return { text, special, ids, detokenized: model.detokenize(ids, special) }
}

function writeJson(path: string, value: object) {
  writeFixtureJson(path, value, log)
}
