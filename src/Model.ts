import { stat } from 'node:fs/promises'

import { Candidates } from './Candidates.js'
import { Grammar } from './Grammar.js'
import { GRAMMAR_KINDS, type GrammarSpec } from './GrammarSpec.js'
import type { CacheOptions } from './CacheOptions.js'
import type { ChatMessage } from './ChatMessage.js'
import { checkInteger } from './checkInteger.js'
import { checkOptionKeys, checkSignal } from './checkOptionKeys.js'
import { KvCache } from './KvCache.js'
import { KvEngineError } from './KvEngineError.js'
import type { ModelInfo } from './ModelInfo.js'
import { Tokenizer } from './Tokenizer.js'
import { awaitNative, callNative, native, toKvEngineError, type NativeChatTemplate, type NativeModel } from './native.js'
import { toTokenIds } from './toTokenIds.js'
import { ToolCallFormat, type ToolCallFormatName } from './ToolCallFormat.js'
import type { ChatTool } from './ChatTool.js'

export interface ModelLoadOptions {
  /** Threads for the matmuls. Sized once per process (the first load decides). Defaults to the
   * number of CPU cores candle finds. */
  threads?: number
  /** Called with the fraction of weights loaded, from 0 to 1. */
  onProgress?: (fraction: number) => void
  /** Where the model runs. 'cuda' needs the CUDA build of the addon (the
   * `kvengine-linux-x64-gnu-cuda` package, or `npm run build:cuda`) and an NVIDIA GPU; without
   * either, loading fails with an `UNSUPPORTED` error. Defaults to 'cpu'. */
  device?: 'cpu' | 'cuda'
  /** What a CUDA model computes in (weights are converted once at load). Defaults to 'bf16'. */
  dtype?: 'f32' | 'f16' | 'bf16'
  /**
   * What a CPU model multiplies Q8_0/Q4_0 weights by. 'q8' rounds activations to 8-bit blocks
   * first, as llama.cpp does, and multiplies bytes by bytes: prefill and decode run up to 3×
   * faster than 'f32' (Zen 4, 2026-12-04: `git show a88b126:BENCHMARKS.md`). On x86 CPUs without
   * AMX, where the quantized weights are repacked at load into panels (in place of the file's
   * layout: no more memory), a row's logits are then the same bits however it is batched,
   * prefilled in chunks or decoded, so 'q8' is the default there (`model.info.activations` says
   * which was chosen). 'f32' keeps activations exact, the default elsewhere; there batching moves
   * results by float rounding only.
   */
  activations?: 'f32' | 'q8'
  /**
   * Quantize a CPU model's full-precision projections (f32, f16 or bf16: Hugging Face
   * safetensors, nanochat checkpoints, F32/F16 GGUFs) once at load into these blocks, which our
   * integer kernels run: a quarter (q8_0) or under a sixth (q4_0) of the bytes to read per
   * token, at the cost of rounding each weight. Weights already in a block format are kept.
   * Default: none, every weight as its file holds it.
   */
  quantize?: 'q8_0' | 'q4_0'
  /**
   * A Jinja chat template to render chats with in place of the one the model ships (as
   * llama-server's `--chat-template-file`): for a file whose template is missing, wrong, or
   * lacks the tool format its model was taught.
   */
  chatTemplate?: string
}

export interface ForwardOptions {
  /** Logits for every new token instead of only each row's last one. */
  allLogits?: boolean
  signal?: AbortSignal
  /**
   * Writes the logits into this array instead of a fresh one, which is returned as a view of
   * its first `rows × vocabSize` values. A decode loop that passes the same array every step
   * allocates nothing per step; the view is only valid until the array's next use.
   */
  logitsInto?: Float32Array
  /**
   * Also pick each logits row's highest `candidates` tokens in native code (`result.candidates`):
   * a top-k or greedy sampler then reads those instead of scanning the whole vocabulary.
   */
  candidates?: number
  /**
   * Writes the candidates into this object's arrays instead of fresh ones (it is returned as
   * `result.candidates`): a decode loop that passes the same one every step allocates nothing
   * per step. Its `perRow` must be `candidates` (or the vocabulary size, if smaller) and its
   * arrays hold at least `rows × perRow` values; valid only until its next use.
   */
  candidatesInto?: Candidates
  /**
   * `false` skips handing the logits over (`result.logits` is empty): for a caller that samples
   * from `candidates` alone, it saves copying a vocabulary of floats per row. Default true.
   */
  logits?: boolean
  /**
   * Greedy passes to run in this one call (default 1), as vLLM's multi-step scheduling: each pass
   * after the first feeds every row that was given tokens its highest-logit token of the pass
   * before, without coming back to JavaScript. Needs `candidates` and `logits: false`; pass i's
   * candidates follow pass i − 1's, so `result.candidates` holds `greedySteps × rows × perRow`.
   * On error or abort every row is rewound to where it was.
   */
  greedySteps?: number
  /**
   * Per cache row, the grammar its next token must fit (`compileGrammar()`), or null for a free
   * row: the pass sets every logit the grammar does not allow to -Infinity before candidates are
   * picked, so any sampler draws only allowed tokens. Constrained rows need one pass per call
   * (`greedySteps` 1) and the last logits per row (no `allLogits`).
   */
  constraints?: ReadonlyArray<Grammar | null | undefined>
}

/** The most passes one `forward` call runs with `greedySteps`. */
const MAX_GREEDY_STEPS = 64

const LOAD_OPTIONS: Record<keyof ModelLoadOptions, true> = { threads: true, onProgress: true, device: true, dtype: true, activations: true, quantize: true, chatTemplate: true }
const CACHE_OPTIONS: Record<keyof CacheOptions, true> = { kvType: true }
const FORWARD_OPTIONS: Record<keyof ForwardOptions, true> = {
  allLogits: true,
  signal: true,
  logitsInto: true,
  candidates: true,
  candidatesInto: true,
  logits: true,
  greedySteps: true,
  constraints: true,
}

export interface ForwardResult {
  /** `(rows.length, vocabSize)` row-major; a view of native memory (or of `logitsInto`), not a copy. */
  logits: Float32Array
  /** The cache row each logits row belongs to. */
  rows: Uint32Array
  /** When `candidates` was asked for. */
  candidates?: Candidates
}

/** A loaded model: weights, tokenizer and chat template. Free it with `dispose()`. */
export class Model {
  readonly tokenizer: Tokenizer
  readonly info: ModelInfo
  readonly path: string
  readonly #native: NativeModel
  /** What a CUDA model computes in, and so holds its cache in. */
  readonly #dtype: ModelLoadOptions['dtype']
  readonly #template: NativeChatTemplate | null
  /** How this model's chat template has it write function calls (see ToolCallFormat). */
  readonly toolCallFormat: ToolCallFormat

  private constructor(path: string, handle: NativeModel, dtype: ModelLoadOptions['dtype'], chatTemplate: string | undefined) {
    this.path = path
    this.#native = handle
    this.#dtype = dtype
    this.#template = callNative(() => handle.chatTemplate(chatTemplate))
    this.toolCallFormat = new ToolCallFormat((this.#template?.toolFormat as ToolCallFormatName | null) ?? 'json')
    this.info = { ...callNative(() => handle.info()), hasChatTemplate: this.#template !== null }
    this.tokenizer = new Tokenizer(handle, this.info.addBosToken, this.info.vocabSize)
  }

  /** Loads a `.gguf` file or a Hugging Face directory (config.json, *.safetensors, tokenizer.json). */
  static async load(path: string, options: ModelLoadOptions = {}): Promise<Model> {
    if (typeof path !== 'string' || path.length === 0) {
      throw new KvEngineError('INVALID_ARGUMENT', 'Model.load() needs the path of a .gguf file or a model directory')
    }
    checkOptionKeys<ModelLoadOptions>(options, LOAD_OPTIONS, 'Model.load()')
    const { threads, onProgress, device, dtype, activations, quantize, chatTemplate } = options
    if (quantize !== undefined && quantize !== 'q8_0' && quantize !== 'q4_0') {
      throw new KvEngineError('INVALID_ARGUMENT', `quantize must be 'q8_0' or 'q4_0', got ${JSON.stringify(quantize)}`)
    }
    if (chatTemplate !== undefined && (typeof chatTemplate !== 'string' || chatTemplate.length === 0)) {
      throw new KvEngineError('INVALID_ARGUMENT', 'chatTemplate must be the text of a Jinja chat template')
    }
    if (threads !== undefined) checkInteger('threads', threads, 1, 1024)
    if (activations !== undefined && activations !== 'f32' && activations !== 'q8') {
      throw new KvEngineError('INVALID_ARGUMENT', `activations must be 'f32' or 'q8', got ${JSON.stringify(activations)}`)
    }
    await stat(path).catch((cause: NodeJS.ErrnoException) => {
      throw new KvEngineError(
        cause.code === 'ENOENT' ? 'NOT_FOUND' : 'INVALID_ARGUMENT',
        `cannot open model '${path}': ${cause.message}. Pass a .gguf file or a Hugging Face model directory`,
        { cause },
      )
    })
    const handle = await awaitNative(() => native.loadModel(path, threads, onProgress, device, dtype, activations, quantize))
    try {
      return new Model(path, handle, dtype, chatTemplate)
    } catch (err) {
      handle.dispose()
      throw err
    }
  }

  /**
   * Renders messages with the model's chat template (Jinja, as Hugging Face renders it), and
   * `tools` (OpenAI's function list) where the template renders them.
   */
  applyChatTemplate(messages: ChatMessage[], options: { addGenerationPrompt?: boolean; tools?: ChatTool[] } = {}): string {
    if (!Array.isArray(messages) || messages.length === 0) {
      throw new KvEngineError('INVALID_ARGUMENT', 'applyChatTemplate() needs a non-empty array of messages')
    }
    const template = this.#template
    if (!template) throw new KvEngineError('UNSUPPORTED', 'this model ships no chat template; give one (Model.load\'s chatTemplate), or format the prompt yourself and use encode()')
    const hf = messages.map((m, i) => templateMessage(m, `messages[${i}]`))
    const tools = options.tools === undefined ? undefined : JSON.stringify(options.tools)
    return callNative(() => template.render(JSON.stringify(hf), options.addGenerationPrompt ?? true, tools))
  }

  /**
   * nanochat's prompt for the assistant's next reply (upstream's render_for_completion, for
   * models loaded from a nanochat checkpoint, which have no Jinja template): `<|bos|>`, each turn
   * between its delimiters with contents encoded as plain text, a leading system message merged
   * into the first user turn, then `<|assistant_start|>`. Roles must alternate, starting with user.
   */
  renderForCompletion(messages: ChatMessage[]): number[] {
    if (!Array.isArray(messages) || messages.length === 0) {
      throw new KvEngineError('INVALID_ARGUMENT', 'renderForCompletion() needs a non-empty array of messages')
    }
    // Upstream drops a final assistant message and opens a new one: give it the one to drop.
    const conversation = [...messages.map(({ role, content }) => ({ role, content })), { role: 'assistant', content: '' }]
    return Array.from(callNative(() => this.#native.renderForCompletion(conversation)))
  }

  /**
   * A KV cache with `batchSize` rows and room for `capacity` positions each (it grows as needed),
   * holding K and V as `options.kvType` (f16 unless asked).
   */
  createCache(batchSize = 1, capacity = 1024, options: CacheOptions = {}): KvCache {
    this.#checkCacheShape(batchSize, capacity, options)
    return new KvCache(callNative(() => this.#native.createCache(batchSize, capacity, options.kvType)))
  }

  /**
   * Bytes of K and V that `createCache(batchSize, capacity, options)` would hold: 2 × nLayers ×
   * batchSize × capacity × nKvHeads × headDim × (2 for f16 or bf16, 4 for f32). To check a
   * budget before asking for the memory.
   */
  cacheBytes(batchSize: number, capacity: number, options: CacheOptions = {}): number {
    this.#checkCacheShape(batchSize, capacity, options)
    const { nLayers, nKvHeads, headDim, device } = this.info
    const element = (device === 'cuda' ? this.#dtype === 'f32' : options.kvType === 'f32') ? 4 : 2
    return 2 * nLayers * batchSize * capacity * nKvHeads * headDim * element
  }

  #checkCacheShape(batchSize: number, capacity: number, options: CacheOptions): void {
    checkInteger('batchSize', batchSize, 1, 4096)
    checkInteger('capacity', capacity, 1, this.info.contextLength, " (the model's context)")
    checkOptionKeys<CacheOptions>(options, CACHE_OPTIONS, 'createCache()')
    const { kvType } = options
    if (kvType !== undefined && kvType !== 'f16' && kvType !== 'f32') {
      throw new KvEngineError('INVALID_ARGUMENT', `kvType must be 'f16' or 'f32', got ${String(kvType)}`)
    }
  }

  /**
   * The low-level step: runs `tokens[row]` (new tokens per row; empty skips the row) through the
   * model, appending their K/V to `cache`, and resolves to logits. Rows keep their own lengths
   * and positions. On error or abort the cache is left exactly as it was.
   */
  async forward(cache: KvCache, tokens: ArrayLike<number>[], options: ForwardOptions = {}): Promise<ForwardResult> {
    if (!(cache instanceof KvCache)) throw new KvEngineError('INVALID_ARGUMENT', 'forward() needs a KvCache from createCache()')
    checkOptionKeys<ForwardOptions>(options, FORWARD_OPTIONS, 'forward()')
    checkSignal(options.signal)
    if (options.logitsInto !== undefined && !(options.logitsInto instanceof Float32Array)) {
      throw new KvEngineError('INVALID_ARGUMENT', 'logitsInto must be a Float32Array of rows × vocabSize values')
    }
    if (!Array.isArray(tokens) || tokens.length !== cache.batchSize) {
      const got = Array.isArray(tokens) ? `${tokens.length} lists` : typeof tokens
      throw new KvEngineError('INVALID_ARGUMENT', `tokens must be an array with one token list per cache row (${cache.batchSize}), got ${got}`)
    }
    const rows = tokens.map((t, i) => toTokenIds(t, this.info.vocabSize, `tokens[${i}]`, this.info.contextLength))
    const allLogits = options.allLogits ?? false
    const logitRows = rowsOfLogits(rows, allLogits)
    const steps = options.greedySteps ?? 1
    checkInteger('greedySteps', steps, 1, MAX_GREEDY_STEPS)
    const picked = this.#candidatesFor(logitRows.length * steps, options)
    const wantLogits = options.logits ?? true
    if (steps > 1 && (picked === undefined || wantLogits || allLogits)) {
      throw new KvEngineError('INVALID_ARGUMENT', 'greedySteps > 1 decodes from candidates: give candidates, logits: false and no allLogits')
    }
    if (typeof wantLogits !== 'boolean' || (!wantLogits && options.logitsInto !== undefined)) {
      throw new KvEngineError('INVALID_ARGUMENT', 'logits must be a boolean, and logitsInto needs logits')
    }
    const { signal, logitsInto: into } = options
    this.#applyConstraints(cache, options.constraints, steps, allLogits)
    if (signal?.aborted) throw new KvEngineError('ABORTED', 'the signal was already aborted')
    const token = signal ? new native.NativeCancelToken() : undefined
    const onAbort = token && (() => token.cancel())
    if (onAbort) signal?.addEventListener('abort', onAbort, { once: true })
    let logits: Float32Array | null
    try {
      // Awaited here rather than through awaitNative: one async frame less per decode step.
      logits = await this.#native.forward(cache.native, rows, token, {
        allLogits,
        logits: wantLogits,
        logitsInto: into,
        candidates: picked?.perRow,
        candidateIds: picked?.ids,
        candidateLogits: picked?.logits,
        steps,
      })
    } catch (err) {
      throw toKvEngineError(err)
    } finally {
      if (onAbort) signal?.removeEventListener('abort', onAbort)
    }
    return {
      logits: into ? into.subarray(0, logitRows.length * this.info.vocabSize) : (logits ?? new Float32Array(0)),
      rows: logitRows,
      ...(picked && { candidates: picked }),
    }
  }

  /**
   * Compiles a grammar against this model's vocabulary, off the JS thread (the first one also
   * indexes the vocabulary, a few hundred milliseconds on 49k tokens). A schema, grammar or
   * expression llguidance cannot compile is an `INVALID_ARGUMENT` error saying why.
   */
  async compileGrammar(spec: GrammarSpec): Promise<Grammar> {
    const keys = spec !== null && typeof spec === 'object' ? Object.keys(spec) : []
    const kind = keys[0]
    if (keys.length !== 1 || !GRAMMAR_KINDS.includes(kind as (typeof GRAMMAR_KINDS)[number])) {
      throw new KvEngineError('INVALID_ARGUMENT', `a grammar is one of { jsonSchema }, { grammar } or { regex }, got ${keys.length === 0 ? String(spec) : `{ ${keys.join(', ')} }`}`)
    }
    const value = (spec as Record<string, unknown>)[kind]
    const text = kind === 'jsonSchema' && typeof value === 'object' && value !== null ? JSON.stringify(value) : value
    if (typeof text !== 'string') throw new KvEngineError('INVALID_ARGUMENT', `${kind} must be a ${kind === 'jsonSchema' ? 'schema object or its JSON text' : 'string'}, got ${typeof value}`)
    return new Grammar(await awaitNative(() => this.#native.compileGrammar(kind, text)), new Set(this.info.eogTokens))
  }

  /** Sets each row's constraint on the cache for this pass (a cache remembers only changes). */
  #applyConstraints(cache: KvCache, constraints: ForwardOptions['constraints'], steps: number, allLogits: boolean): void {
    if (constraints !== undefined) {
      if (!Array.isArray(constraints) || constraints.length !== cache.batchSize || constraints.some((c) => c != null && !(c instanceof Grammar))) {
        throw new KvEngineError('INVALID_ARGUMENT', `constraints must be an array of one Grammar or null per cache row (${cache.batchSize})`)
      }
      if (constraints.some((c) => c != null) && (steps > 1 || allLogits)) {
        throw new KvEngineError('INVALID_ARGUMENT', 'constrained rows need one pass per call (greedySteps 1) and the last logits per row (no allLogits)')
      }
    }
    cache.constrain(constraints ?? [])
  }

  /** Where a pass's candidates go: the caller's `candidatesInto` when it fits, else fresh arrays. */
  #candidatesFor(rows: number, { candidates, candidatesInto: into }: ForwardOptions): Candidates | undefined {
    if (candidates === undefined) {
      if (into !== undefined) throw new KvEngineError('INVALID_ARGUMENT', 'candidatesInto needs candidates')
      return undefined
    }
    checkInteger('candidates', candidates, 1, Candidates.MAX)
    const perRow = Math.min(candidates, this.info.vocabSize)
    if (into === undefined) return new Candidates(new Uint32Array(rows * perRow), new Float32Array(rows * perRow), perRow)
    if (!(into instanceof Candidates) || into.perRow !== perRow || into.ids.length < rows * perRow || into.logits.length < rows * perRow) {
      throw new KvEngineError('INVALID_ARGUMENT', `candidatesInto must be a Candidates with perRow ${perRow} and room for ${rows} rows of them`)
    }
    return into
  }

  /**
   * How many forward passes and tokens this model has run, and the seconds the engine spent in
   * them (excluding the hop between threads), to check what a call cost.
   */
  stats(): { forwardCalls: number; tokensProcessed: number; forwardSeconds: number } {
    return callNative(() => this.#native.stats())
  }

  get disposed(): boolean {
    return this.#native.disposed
  }

  /** Frees the weights now, rather than when the garbage collector gets to it. */
  dispose(): void {
    this.#native.dispose()
  }

  [Symbol.dispose](): void {
    this.dispose()
  }
}

/** The cache row of each logits row a pass returns: the rows given tokens, in order, each once
 * (or once per token with `allLogits`). */
function rowsOfLogits(tokens: Uint32Array[], allLogits: boolean): Uint32Array {
  let count = 0
  for (const t of tokens) count += allLogits ? t.length : Math.min(t.length, 1)
  const rows = new Uint32Array(count)
  let at = 0
  for (let row = 0; row < tokens.length; row++) {
    const n = allLogits ? tokens[row].length : Math.min(tokens[row].length, 1)
    rows.fill(row, at, (at += n))
  }
  return rows
}

/** A message as Hugging Face templates read it: an earlier call's arguments as an object, which templates write with `tojson`. */
function templateMessage(m: ChatMessage, param: string): object {
  if (typeof m?.role !== 'string' || typeof m?.content !== 'string') {
    throw new KvEngineError('INVALID_ARGUMENT', `${param} must be { role: string, content: string }`)
  }
  const { role, content, toolCalls, toolCallId, name } = m
  if (toolCalls !== undefined && !Array.isArray(toolCalls)) throw new KvEngineError('INVALID_ARGUMENT', `${param}.toolCalls must be a list of calls`)
  const calls = toolCalls?.map((c, j) => {
    try {
      return { id: c.id, type: 'function', function: { name: c.function.name, arguments: JSON.parse(c.function.arguments) as unknown } }
    } catch (cause) {
      throw new KvEngineError('INVALID_ARGUMENT', `${param}.toolCalls[${j}] must be { id, type: 'function', function: { name, arguments } } with arguments as JSON text`, { cause })
    }
  })
  return { role, content, ...(calls && { tool_calls: calls }), ...(toolCallId !== undefined && { tool_call_id: toolCallId }), ...(name !== undefined && { name }) }
}
