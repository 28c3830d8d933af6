// Tokenizes the benchmark's prompt text with kvengine's tokenizer and prints the ids as JSON.
// Both engines are then fed these same ids (every model here carries SmolLM2's tokenizer, and
// llama.cpp reads it from the same GGUF metadata).
//
//   node --import=tsx benches/tokenizePrompt.ts <model.gguf> <tokens>
import { Model } from '../index.js'
import { promptText } from './lib/promptText.js'

const [path, countArg] = process.argv.slice(2)
const count = Number(countArg)
const model = await Model.load(path!, { threads: 1 })
let ids: number[] = []
for (let paragraphs = 16; ids.length < count; paragraphs *= 2) ids = model.tokenizer.encode(promptText(paragraphs))
process.stdout.write(`${JSON.stringify(ids.slice(0, count))}\n`)
model.dispose()
