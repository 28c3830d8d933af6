#!/usr/bin/env node
// kvengine's command line: generate (stream one answer), chat (multi-turn REPL whose history
// stays in the KV cache), serve (OpenAI-compatible HTTP server), convert (re-encode a GGUF file).
import { readFileSync } from 'node:fs'
import { createInterface } from 'node:readline'
import { parseArgs } from 'node:util'

import type { ChatMessage } from './ChatMessage.js'
import type { GenerateOptions } from './GenerateOptions.js'
import { convertGguf, type GgufTarget } from './convertGguf.js'
import { defaultModelPath } from './defaultModelPath.js'
import { downloadModel } from './downloadModel.js'
import { Engine } from './Engine.js'
import { lookupToken } from './lookupToken.js'
import { encodeChat } from './encodeChat.js'
import { KvEngineError } from './KvEngineError.js'
import { Model } from './Model.js'
import { parseModelSource } from './parseModelSource.js'
import { serve as startServer } from './server/serve.js'

const USAGE = `usage:
  kvengine generate [-m model] [-p prompt] [--raw] [sampling options]
  kvengine chat [-m model] [-s system prompt] [sampling options]
  kvengine serve [-m model] [--port 8080] [--host 127.0.0.1] [--max-rows 16] [--max-queue 64] [--max-seq 2048] [sampling defaults]
                 [--api-key KEY | --api-key-file FILE] [--allow-unauthenticated] [--allowed-hosts a,b] [--cors-origin o1,o2]
                 [--timeout 600] [--max-connections 256] [--shutdown-timeout 10] [--prefill-chunk 8]
  kvengine convert <input.gguf> <output.gguf> --to f32|f16|q8_0|q4_0|q4_k

sampling options: --max-tokens N --temperature T --top-k K --top-p P --min-p P --seed S --threads N
--activations q8|f32: what Q8_0/Q4_0 weights multiply: 8-bit activations, as llama.cpp does
  (the default on x86 CPUs without AMX, where results stay independent of batching), or f32.
--quantize q8_0|q4_0: quantize full-precision weights (safetensors, nanochat, F32/F16 GGUF) once at load.
--device cpu|cuda [--dtype bf16|f16|f32]: where the model runs (cuda needs the CUDA build of the addon and
  an NVIDIA GPU) and what a CUDA model computes in.
--chat-template-file FILE: a Jinja chat template to use in place of the model's own (as llama-server's).
--speculative ngram | --model-draft FILE [--draft-max N]: speculative decoding for generate and chat, by
  prompt lookup or with a smaller draft model of the same vocabulary; the output is unchanged.
-m: a .gguf file or model folder, hf:<owner>/<repo>:<quant> (e.g. :Q4_K_M), hf:<owner>/<repo>/<file.gguf>,
  or an https:// URL; downloaded once (resuming if interrupted) into $KVENGINE_MODELS_DIR, else
  $XDG_CACHE_HOME/kvengine, else ~/.cache/kvengine. Left out: SmolLM2-135M-Instruct (fetched on first use).
  KVENGINE_HF_ENDPOINT points hf: at a mirror.

serve: an API key (Bearer) is required when --host is not a loopback address. --api-key-file reads
  one key per line. --allowed-hosts adds Host header names (or *) to the loopback names and the
  bound address; --cors-origin lets pages of those origins (or *) call the API. --timeout: seconds
  a client may take to send a request, or leave a stream unread. On SIGTERM or SIGINT the server
  stops accepting, lets running requests finish for --shutdown-timeout seconds, ends the rest with
  an error, and exits 0.`

const DEMO_PROMPT = 'In three sentences, why does a KV cache make text generation faster?'

const options = {
  model: { type: 'string', short: 'm' },
  prompt: { type: 'string', short: 'p' },
  system: { type: 'string', short: 's' },
  raw: { type: 'boolean' },
  to: { type: 'string' },
  'max-tokens': { type: 'string' },
  temperature: { type: 'string' },
  'top-k': { type: 'string' },
  'top-p': { type: 'string' },
  'min-p': { type: 'string' },
  seed: { type: 'string' },
  threads: { type: 'string' },
  activations: { type: 'string' },
  'chat-template-file': { type: 'string' },
  quantize: { type: 'string' },
  device: { type: 'string' },
  dtype: { type: 'string' },
  speculative: { type: 'string' },
  'model-draft': { type: 'string' },
  'draft-max': { type: 'string' },
  port: { type: 'string' },
  host: { type: 'string' },
  'max-rows': { type: 'string' },
  'max-queue': { type: 'string' },
  'max-seq': { type: 'string' },
  'api-key': { type: 'string' },
  'api-key-file': { type: 'string' },
  'allow-unauthenticated': { type: 'boolean' },
  'allowed-hosts': { type: 'string' },
  'cors-origin': { type: 'string' },
  timeout: { type: 'string' },
  'max-connections': { type: 'string' },
  'shutdown-timeout': { type: 'string' },
  'prefill-chunk': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const

type Args = ReturnType<typeof parseArgs<{ options: typeof options; allowPositionals: true }>>['values']

function num(v: string | undefined): number | undefined {
  return v === undefined ? undefined : Number(v)
}

/** Sampling from the flags; left out, 0.7 (nanochat's chat CLI: 0.6 and top-k 50 for a model
 * with nanochat's conversation format). */
function sampling(args: Args, model: Model) {
  const nanochat = speaksNanochat(model)
  return {
    maxTokens: num(args['max-tokens']),
    temperature: num(args.temperature) ?? (nanochat ? 0.6 : 0.7),
    topK: num(args['top-k']) ?? (nanochat ? 50 : undefined),
    topP: num(args['top-p']),
    minP: num(args['min-p']),
    seed: num(args.seed),
  }
}

/** The model `source` names (`-m` by default), loaded with the flags' options, showing progress. */
async function load(args: Args, source = args.model): Promise<Model> {
  const path = await modelPath(source)
  let shown = -1
  const templateFile = args['chat-template-file']
  const chatTemplate = templateFile === undefined ? undefined : readTemplate(templateFile)
  const model = await Model.load(path, {
    threads: num(args.threads),
    chatTemplate,
    activations: args.activations as 'f32' | 'q8' | undefined,
    quantize: args.quantize as 'q8_0' | 'q4_0' | undefined,
    device: args.device as 'cpu' | 'cuda' | undefined,
    dtype: args.dtype as 'f32' | 'f16' | 'bf16' | undefined,
    onProgress: (f) => {
      const pct = Math.round(f * 100)
      if (process.stderr.isTTY && pct !== shown) process.stderr.write(`\rloading ${path} ${(shown = pct)}%`)
    },
  })
  process.stderr.write(`${process.stderr.isTTY ? '\r' : ''}loaded ${path} (${model.info.architecture}, ${model.info.format}, on ${model.info.device})\n`)
  return model
}

/** `GenerateOptions.speculative` from the flags (a draft model is loaded here), or undefined. */
async function speculation(args: Args): Promise<GenerateOptions['speculative']> {
  const method = args.speculative ?? (args['model-draft'] !== undefined ? 'draft_model' : undefined)
  const numSpeculativeTokens = num(args['draft-max'])
  if (method === undefined) {
    if (numSpeculativeTokens !== undefined) throw new KvEngineError('INVALID_ARGUMENT', '--draft-max needs --speculative ngram or --model-draft')
    return undefined
  }
  if (method === 'ngram' && args['model-draft'] === undefined) return { method, numSpeculativeTokens }
  if (method !== 'draft_model' || args['model-draft'] === undefined) {
    throw new KvEngineError('INVALID_ARGUMENT', `--speculative takes ngram (or give --model-draft FILE alone for a draft model), got '${args.speculative}'${args['model-draft'] === undefined ? '' : ' with --model-draft'}`)
  }
  return { method, model: await load(args, args['model-draft']), numSpeculativeTokens }
}

/** Frees the draft model `speculation` loaded, if any. */
function disposeDraft(speculative: GenerateOptions['speculative']): void {
  if (speculative?.method === 'draft_model') (speculative.model as Model).dispose()
}

function readTemplate(file: string): string {
  try {
    return readFileSync(file, 'utf8')
  } catch (cause) {
    throw new KvEngineError('NOT_FOUND', `cannot read --chat-template-file '${file}': ${(cause as Error).message}`, { cause })
  }
}

/** A local path as given; hf: names and URLs downloaded into the cache (or found there). */
async function modelPath(spec: string | undefined): Promise<string> {
  if (spec === undefined) return defaultModelPath()
  return parseModelSource(spec) ? downloadModel(spec) : spec
}

async function generate(args: Args): Promise<void> {
  const model = await load(args)
  const prompt = args.prompt ?? DEMO_PROMPT
  const useChat = !args.raw && (model.info.hasChatTemplate || speaksNanochat(model))
  // A model with no template but nanochat's vocabulary is rendered as nanochat renders a turn.
  const tokens = useChat ? encodeChat(model, [{ role: 'user', content: prompt }]) : model.tokenizer.encode(prompt)
  if (!useChat) process.stdout.write(prompt)
  const speculative = await speculation(args)
  const started = performance.now()
  let count = 0
  try {
    for await (const step of new Engine(model).generate(tokens, { ...sampling(args, model), speculative })) {
      process.stdout.write(step.text[0])
      count++
    }
  } finally {
    disposeDraft(speculative)
  }
  const seconds = (performance.now() - started) / 1000
  process.stdout.write('\n')
  process.stderr.write(`[${count} tokens in ${seconds.toFixed(2)} s, ${(count / seconds).toFixed(1)} tokens/s]\n`)
  model.dispose()
}

function commonPrefix(a: number[], b: number[]): number {
  let n = 0
  while (n < a.length && n < b.length && a[n] === b[n]) n++
  return n
}

/** Whether the model takes nanochat's conversation format (its special tokens, no template). */
function speaksNanochat(model: Model): boolean {
  return !model.info.hasChatTemplate && NANOCHAT_TURN.every((name) => lookupToken(model.tokenizer, name) !== undefined)
}

const NANOCHAT_TURN = ['<|assistant_end|>', '<|user_start|>', '<|user_end|>', '<|assistant_start|>']

/**
 * The tokens that ask for the next reply. A template model's conversation is rendered whole (the
 * cache keeps the common prefix). nanochat's, as its chat CLI keeps it, is the tokens so far (the
 * replies as generated, the calculator's forced output included) with the reply closed and the
 * new user turn appended.
 */
function nextPrompt(model: Model, messages: ChatMessage[], history: number[]): number[] {
  if (model.info.hasChatTemplate || history.length === 0) return encodeChat(model, messages)
  const [end, userStart, userEnd, assistantStart] = NANOCHAT_TURN.map((name) => lookupToken(model.tokenizer, name) as number)
  const closed = history.at(-1) === end ? history : [...history, end]
  const text = model.tokenizer.encode((messages.at(-1) as ChatMessage).content, { special: false, addBos: false })
  return [...closed, userStart, ...text, userEnd, assistantStart]
}

async function chat(args: Args): Promise<void> {
  const model = await load(args)
  const speculative = await speculation(args)
  const engine = new Engine(model)
  const cache = model.createCache(1, Math.min(1024, model.info.contextLength))
  const messages: ChatMessage[] = args.system ? [{ role: 'system', content: args.system }] : []
  let cached: number[] = [] // the tokens whose K/V row 0 holds
  // The line iterator buffers input typed (or piped) while an answer is still streaming.
  const rl = createInterface({ input: process.stdin, terminal: process.stdin.isTTY })
  process.stderr.write('chat: type a message, or /exit\n> ')
  try {
    for await (const line of rl) {
      if (line.trim() === '/exit') break
      if (!line.trim()) {
        process.stderr.write('> ')
        continue
      }
      messages.push({ role: 'user', content: line })
      const full = nextPrompt(model, messages, cached)
      // Reuse the cached history; re-feed only what differs (at least one token, for logits).
      const reused = Math.min(commonPrefix(cached, full), full.length - 1)
      cache.truncateRow(0, reused)
      const produced: number[] = []
      let reply = ''
      for await (const step of engine.generate(full.slice(reused), { ...sampling(args, model), cache, speculative })) {
        produced.push(step.tokenColumn[0])
        reply += step.text[0]
        process.stdout.write(step.text[0])
      }
      process.stdout.write('\n')
      process.stderr.write(`[reused ${reused} cached tokens, prefilled ${full.length - reused}, generated ${produced.length}]\n`)
      cached = full.concat(produced).slice(0, cache.seqlens[0])
      messages.push({ role: 'assistant', content: reply })
      process.stderr.write('> ')
    }
  } finally {
    rl.close()
    cache.dispose()
    disposeDraft(speculative)
    model.dispose()
  }
}

async function serve(args: Args): Promise<void> {
  const shutdownSeconds = num(args['shutdown-timeout']) ?? 10
  if (!(shutdownSeconds >= 0 && shutdownSeconds <= 3600)) throw new KvEngineError('INVALID_ARGUMENT', `--shutdown-timeout must be 0..3600 seconds, got ${args['shutdown-timeout']}`)
  const drafting = (['speculative', 'model-draft', 'draft-max'] as const).filter((flag) => args[flag] !== undefined)
  if (drafting.length > 0) throw new KvEngineError('UNSUPPORTED', `serve does not decode speculatively yet; leave out --${drafting.join(' and --')}`)
  const model = await load(args)
  const server = await startServer(model, {
    port: num(args.port),
    host: args.host,
    apiKey: apiKeys(args),
    allowUnauthenticated: args['allow-unauthenticated'],
    allowedHosts: list(args['allowed-hosts']),
    corsOrigins: list(args['cors-origin']),
    timeout: num(args.timeout),
    maxConnections: num(args['max-connections']),
    maxRows: num(args['max-rows']),
    maxQueue: num(args['max-queue']),
    maxSequence: num(args['max-seq']),
    prefillChunk: num(args['prefill-chunk']),
    temperature: num(args.temperature),
    topK: num(args['top-k']),
    maxTokens: num(args['max-tokens']),
  }).catch((err: unknown) => {
    model.dispose()
    throw err
  })
  // A request's failure is answered where it happens; anything that still escapes is logged, and
  // the other clients keep being served rather than lose the process to one bad request.
  const survive = (err: unknown) => process.stderr.write(`kvengine: unhandled error, still serving: ${(err as Error)?.stack ?? String(err)}\n`)
  process.on('uncaughtException', survive)
  process.on('unhandledRejection', survive)
  process.stdout.write(`kvengine serving ${model.path} at ${server.url}\n`)
  const stop = (signal: string) => {
    process.stderr.write(`kvengine: ${signal}: finishing running requests (up to ${shutdownSeconds} s)\n`)
    // A second signal does not wait.
    process.once('SIGINT', () => process.exit(130))
    process.once('SIGTERM', () => process.exit(143))
    void server.close({ deadlineMs: shutdownSeconds * 1000 }).then(() => {
      model.dispose()
      process.exit(0)
    })
  }
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
}

function list(value: string | undefined): string[] | undefined {
  return value?.split(',').map((s) => s.trim()).filter(Boolean)
}

function apiKeys(args: Args): string[] | undefined {
  if (args['api-key'] !== undefined && args['api-key-file'] !== undefined) throw new KvEngineError('INVALID_ARGUMENT', 'give --api-key or --api-key-file, not both')
  if (args['api-key'] !== undefined) return [args['api-key']]
  if (args['api-key-file'] === undefined) return undefined
  const keys = readFileSync(args['api-key-file'], 'utf8').split('\n').map((l) => l.trim()).filter(Boolean)
  if (keys.length === 0) throw new KvEngineError('INVALID_ARGUMENT', `${args['api-key-file']} holds no API key (one per line)`)
  return keys
}

async function convert(args: Args, positionals: string[]): Promise<void> {
  const [input, output] = positionals
  if (!input || !output || !args.to) throw new KvEngineError('INVALID_ARGUMENT', `convert needs <input> <output> --to <type>\n${USAGE}`)
  await convertGguf(input, output, args.to as GgufTarget, (f) => process.stderr.write(`\rconverting ${Math.round(f * 100)}%`))
  process.stderr.write(`\nwrote ${output}\n`)
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({ options, allowPositionals: true })
  const [command, ...rest] = positionals
  if (values.help || !command) {
    console.log(USAGE)
    return
  }
  if (command === 'generate') return generate(values)
  if (command === 'chat') return chat(values)
  if (command === 'serve') return serve(values)
  if (command === 'convert') return convert(values, rest)
  throw new KvEngineError('INVALID_ARGUMENT', `unknown command '${command}'\n${USAGE}`)
}

main().catch((err: unknown) => {
  const code = err instanceof KvEngineError ? ` [${err.code}]` : ''
  process.stderr.write(`kvengine${code}: ${(err as Error).message}\n`)
  process.exitCode = 1
})
