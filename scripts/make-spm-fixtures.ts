// Golden tokenizer fixture for a SentencePiece (`tokenizer.ggml.model = llama`) GGUF, from llama.cpp
// through node-llama-cpp, an implementation independent of ours (crate/src/tokenizer/spm.rs).
//
//   node --import=tsx scripts/make-spm-fixtures.ts [--model models/gemma-3-270m-q4_k_m.gguf]
//        [--out crate/tests/fixtures/gemma3-tokenizer.json]
//
// Per case: the text, whether special-token text is parsed, llama.cpp's ids (no BOS: add_special=false)
// and llama.cpp's detokenization of those ids.
import { basename, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

import { writeFixtureJson } from './fixtureJson.js'
import { loadWithNodeLlamaCpp } from './nodeLlamaCpp.js'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const { values: args } = parseArgs({
  options: {
    model: { type: 'string', default: join(root, 'models', 'gemma-3-270m-q4_k_m.gguf') },
    out: { type: 'string', default: join(root, 'crate', 'tests', 'fixtures', 'gemma3-tokenizer.json') },
  },
})
const log = (msg: string) => process.stderr.write(`[make-spm-fixtures] ${msg}\n`)

const GEMMA_TURN = '<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n'
// Text that a SentencePiece tokenizer finds awkward: whitespace runs (Gemma has pieces for runs
// of spaces, tabs and newlines, some of them user-defined and so always split out), characters
// outside the vocabulary (byte fallback), and text that looks like its control tokens.
const PLAIN: string[] = [
  '', 'Hello world', 'Hello, world!', ' Hello world', '  leading spaces', 'trailing spaces   ', ' ', '  ', '     ',
  '\n', '\n\n', '\n\n\n\n\n', '\t', '\t\t\t', ' \t \n ', 'a  b   c    d     e', 'line1\r\nline2', 'end.\n\n',
  'The quick brown fox jumps over the lazy dog.', "Don't stop: it's 5 o'clock, isn't it?",
  '0123456789', '3.14159 2.71828 -42 1e-9', '2024-01-31T23:59:59Z', '$1,000,000.00 (USD)', '12345678901234567890',
  'def add(a, b):\n    return a + b\n', 'if (x) {\n\tconsole.log("tab");\n\t\treturn;\n}',
  'for i in range(10):\n        print(i)  # eight spaces', '<html><body class="main"><iframe src="x"></iframe></body></html>',
  'fn main() { let v: Vec<u8> = vec![0x0A, 0xFF]; }', 'SELECT * FROM users WHERE id = 42;',
  'Café, naïve, façade, Übermäßig, señor, Ångström', '日本語のテキストです。', '你好，世界！今天天气很好。', '한국어 문장입니다',
  '𠜎𠜱𠝹𠱓 (CJK extension B)', 'Emoji: 😀🎉👍🏽 and 🇫🇷 flag', '👨‍👩‍👧‍👦', '🦀🚀✨', 'مرحبا بالعالم', 'שלום עולם',
  'Привет, мир!', 'Γειά σου Κόσμε', 'नमस्ते दुनिया', 'ᚠᛇᚻ᛫ᛒᛦᚦ', '\u0000\u0001\u007f control bytes', 'zero\u200bwidth\u00a0nbsp',
  'pneumonoultramicroscopicsilicovolcanoconiosis', 'x'.repeat(300), 'ab'.repeat(200), 'Supercalifragilisticexpialidocious!!!',
  'https://example.com/path?q=1&r=two#frag', 'snake_case camelCase PascalCase kebab-case', '!!!???...',
  '▁already▁has▁the▁mark', '<0x41> is not a byte token here', '<unk> <pad> <mask>',
  '<start_of_turn>', '<end_of_turn>', '<bos>', '<eos>', GEMMA_TURN, '<start_of_turn >', '<<start_of_turn>>',
]
// Special-token text parsed as specials, as a rendered chat template is.
const SPECIAL: string[] = [
  '<start_of_turn>', '<end_of_turn>', '<bos>', '<eos>', GEMMA_TURN, `<bos>${GEMMA_TURN}`, '<<start_of_turn>>',
  '<start_of_turn>user\n  indented\n<end_of_turn>', '<unk> <pad> <mask>', ' <start_of_turn> spaced ', 'a<eos>b<bos>c',
]

log(`loading ${args.model}`)
const { llama, model, generator } = await loadWithNodeLlamaCpp(args.model!, { vocabOnly: true })

const cases = [...PLAIN.map((text) => tokenizerCase(text, false)), ...SPECIAL.map((text) => tokenizerCase(text, true))]
const { bos, eos } = model.tokens
writeFixtureJson(args.out!, { generator, model: basename(args.model!), bos, eos, addBos: model.tokens.shouldPrependBosToken, cases }, log)
log(`${cases.length} cases; ${cases.filter((c) => c.detokenized === c.text).length} detokenize back to their text`)
await model.dispose()
await llama.dispose()

function tokenizerCase(text: string, special: boolean) {
  const ids = model.tokenize(text, special)
  return { text, special, ids, detokenized: model.detokenize(ids, special) }
}
