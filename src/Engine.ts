import { BurstLedger } from './BurstLedger.js'
import { Candidates } from './Candidates.js'
import type { ChatMessage } from './ChatMessage.js'
import type { ChatOptions } from './ChatOptions.js'
import type { ChatReply } from './ChatReply.js'
import type { Drafter } from './Drafter.js'
import { chatReplies } from './chatReplies.js'
import type { FinishReason } from './FinishReason.js'
import type { ForwardModel } from './ForwardModel.js'
import type { GenerateOptions } from './GenerateOptions.js'
import type { GenerateStep } from './GenerateStep.js'
import type { GeneratedRow } from './GeneratedRow.js'
import type { Grammar } from './Grammar.js'
import { GRAMMAR_KINDS, type GrammarSpec } from './GrammarSpec.js'
import { KvCache } from './KvCache.js'
import { KvEngineError } from './KvEngineError.js'
import { Model, type ForwardResult } from './Model.js'
import { Rng } from './Rng.js'
import type { RowCache } from './RowCache.js'
import { RowState } from './RowState.js'
import { Sampler } from './Sampler.js'
import { checkInteger, show } from './checkInteger.js'
import { checkOptionKeys, checkSignal } from './checkOptionKeys.js'
import { formatBytes } from './formatBytes.js'
import { generationDefaults, type GenerationDefaults } from './generationDefaults.js'
import { toTokenIds } from './toTokenIds.js'
import { ToolRegistry } from './ToolRegistry.js'
import { ToolRunner } from './ToolRunner.js'
import { speculationOf, type Speculation } from './speculationOf.js'
import { validateSamplingOptions } from './validateSamplingOptions.js'

/** Positions a generation without `maxTokens` reserves past its prompt (the Rust cache's growth step). */
const DEFAULT_RESERVE = 1024
/** Rows one cache holds (the Rust cache's limit). */
const MAX_ROWS = 4096

const GENERATE_OPTIONS: Record<keyof GenerateOptions, true> = {
  temperature: true,
  topK: true,
  topP: true,
  minP: true,
  seed: true,
  numSamples: true,
  maxTokens: true,
  stop: true,
  stopTokens: true,
  tools: true,
  signal: true,
  cache: true,
  multiStep: true,
  jsonSchema: true,
  grammar: true,
  regex: true,
  logprobs: true,
  maxMemory: true,
  speculative: true,
}

/** Callers' caches that a generation is running in: a second one there would feed its tokens
 * into the same rows, and both would read garbage. */
const cachesInUse = new WeakSet<RowCache>()

/** A validated generation request: who the rows are and when each must stop. */
interface Plan {
  prompts: Uint32Array[]
  numSamples: number
  /** Prompts × samples. */
  rowCount: number
  maxTokens: number
  /** Positions reserved in a fresh cache beyond the prompt: `maxTokens` when it was given. */
  reserve: number
  stopTokens: ReadonlySet<number>
  /** The tool uses in force, or null when tools are off. */
  tools: ToolRunner | null
  /** Greedy passes per call into the engine. */
  multiStep: number
  /** What every row's output must match, or null. */
  grammar: GrammarSpec | null
  /** Top tokens to report with each sampled token's log-probability; null for none. */
  logprobs: number | null
  /** What `speculative` asks for; null without it. */
  speculation: Speculation | null
}

/** A decode call started before its steps were handed out: the rows it feeds, and its passes. */
interface InFlightPass {
  pass: Promise<ForwardResult>
  fed: number[]
  passes: number
  /** Per row, the drafted tokens the call fed after the row's last one; null for a greedy burst. */
  drafts: number[][] | null
}

/**
 * What the last call returned: per cache row, its row among the `fedRows` of each pass (a
 * greedy burst's logits are pass by pass); after a drafted call, the row's first logits row
 * (its passes follow it) and what it was fed.
 */
interface LastCall {
  logits: Float32Array
  logitRow: Int32Array
  candidates?: Candidates
  fedRows: number
  passes: number
  drafts: number[][] | null
}

/** OpenAI's limit on top_logprobs. */
const MAX_TOP_LOGPROBS = 20

/** Default `multiStep`: greedy passes per call into the engine. */
const DEFAULT_MULTI_STEP = 4
const MAX_MULTI_STEP = 64

/** Whether `value` has RowCache's methods: what can be checked of a cache whose class the Engine does not know. */
function hasRowCacheMethods(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false
  const { copyRow, truncateRow, dispose } = value as Partial<RowCache>
  return [copyRow, truncateRow, dispose].every((method) => typeof method === 'function')
}

/**
 * KV-cached generation in the shape of nanochat's Engine: prefill each prompt once, copy its
 * cache row into every sample, then decode all rows together, one batched forward per step.
 * Sampling and per-row state live here; the forward pass is the model's (the Rust core, for a
 * `Model`).
 */
export class Engine<M extends ForwardModel = Model> {
  readonly model: M
  /** Tools `GenerateOptions.tools` can name: `calculator` (nanochat's), plus any registered here. */
  readonly tools = ToolRegistry.builtIn()
  #generationDefaults: GenerationDefaults | undefined

  constructor(model: M) {
    this.model = model
  }

  /**
   * Yields one `GenerateStep` per decode step until every row has finished. `prompt` is one
   * token list, or several (each gets `numSamples` rows, all decoded in the same batch).
   */
  async *generate(prompt: ArrayLike<number> | ArrayLike<number>[], options: GenerateOptions<ReturnType<M['createCache']>> = {}): AsyncGenerator<GenerateStep> {
    for await (const { step } of this.#run(prompt, options)) yield step
  }

  async *#run(prompt: ArrayLike<number> | ArrayLike<number>[], options: GenerateOptions<RowCache>): AsyncGenerator<{ step: GenerateStep; states: RowState[] }> {
    // 1) Validate everything before any work, so bad input costs nothing.
    const plan = this.#plan(prompt, options)
    const sampling = validateSamplingOptions(options)
    const capacity = this.#checkCache(plan, options)
    const seed = sampling.seed ?? Math.floor(Math.random() * 2 ** 32)
    const rowCount = plan.rowCount
    const grammar = plan.grammar && (await this.#compile(plan.grammar))
    const rows = Array.from({ length: rowCount }, (_, r) => {
      const constraint = grammar && (r === 0 ? grammar : grammar.fork())
      return new RowState(new Sampler(sampling, Rng.forRow(seed, r)), this.model.tokenizer.createDecoder(), options.stop ?? [], plan.tools, constraint)
    })
    const vocab = this.model.info.vocabSize
    // Greedy and top-k rows sample from each row's few highest logits, picked natively, and need
    // no logits; others get every step's logits in one array (nothing per step for the GC).
    const wanted = plan.logprobs === null ? rows[0].sampler.candidatesWanted(vocab) : 0
    const perRow = Math.min(wanted, vocab)
    const multiStep = wanted === 1 ? plan.multiStep : 1
    // A drafted call reads one logits row per token it feeds.
    const passesAtMost = Math.max(multiStep, (plan.speculation?.maxDraft ?? 0) + 1)
    const picks = rowCount * perRow * passesAtMost
    const constraints = grammar ? rows.map((s) => s.constraint) : undefined
    const forwardOptions =
      wanted > 0
        ? { signal: options.signal, constraints, candidates: wanted, logits: false, candidatesInto: new Candidates(new Uint32Array(picks), new Float32Array(picks), perRow) }
        : { signal: options.signal, constraints, logitsInto: new Float32Array(rowCount * vocab * passesAtMost) }
    const lengths = new BurstLedger(rowCount)
    let inFlight: InFlightPass | undefined
    let drafter: Drafter | null = null
    // Last, so that nothing between taking the cache and the `finally` that gives it back can throw.
    const { cache, owned } = this.#takeCache(plan, options.cache, capacity)
    try {
      drafter = plan.speculation?.create(rowCount, Math.max(...plan.prompts.map((p) => p.length)) + plan.reserve) ?? null
      // 2) Prefill: each prompt once, into the first row of its samples.
      const prefill = rows.map((_, r) => (r % plan.numSamples === 0 ? plan.prompts[r / plan.numSamples] : []))
      let { logits, rows: logitRows, candidates } = await this.model.forward(cache, prefill, forwardOptions)
      // 3) Replicate each prefilled row into its samples; they share the prompt's logits.
      for (let r = 0; r < rowCount; r++) {
        if (r % plan.numSamples !== 0) cache.copyRow(r - (r % plan.numSamples), r)
      }
      // Which logits row (and candidates row) is each cache row's; sample rows read their
      // prompt's after the prefill.
      const logitRow = new Int32Array(rowCount)
      const locate = (forRows: Uint32Array) => forRows.forEach((row, i) => (logitRow[row] = i))
      locate(logitRows)
      for (let r = 0; r < rowCount; r++) logitRow[r] = logitRow[r - (r % plan.numSamples)]
      lengths.prefilledTo(cache.seqlens)
      // 4) Decode: every live row takes its forced token or a sample, once per pass of the last
      //    call (greedy rows run several passes per call, see `multiStep`). The tokens go back
      //    into the model before the steps are handed out, so the caller's work overlaps the call.
      let passes = 1
      let drafts: number[][] | null = null
      for (;;) {
        this.#throwIfAborted(options.signal)
        const steps = this.#takeSteps(rows, plan, lengths, { logits, logitRow, candidates, fedRows: logitRows.length, passes, drafts })
        if (drafts) drafter?.backoff.judge(steps.length - 1)
        // A row that stopped, or took a forced token, inside a burst had passes past it.
        lengths.take(steps, cache)
        const fed = rows.flatMap((s, r) => (s.completed ? [] : [r]))
        if (fed.length > 0) {
          const last = steps[steps.length - 1].tokenColumn
          // Drafts run passes as a burst does, so they get the room a burst would.
          const room = drafter?.backoff.wants() ? lengths.passesFor(rows, plan.maxTokens, this.model.info.contextLength, drafter.maxDraft + 1) - 1 : 0
          const drafted = room > 0 ? await (drafter as Drafter).draftRows(rows, plan.prompts, plan.numSamples, room) : null
          passes = drafted ? drafted[fed[0]].length + 1 : multiStep > 1 ? lengths.passesFor(rows, plan.maxTokens, this.model.info.contextLength, multiStep) : 1
          const next = rows.map((s, r) => (s.completed ? [] : drafted ? [last[r], ...drafted[r]] : [last[r]]))
          const callOptions = drafted ? { ...forwardOptions, allLogits: true } : passes > 1 ? { ...forwardOptions, greedySteps: passes } : forwardOptions
          const pass = this.model.forward(cache, next, callOptions)
          // Handled here as well, so a pass that fails while the caller holds the step is no
          // unhandled rejection; the error is still thrown where the pass is awaited.
          pass.catch(() => {})
          inFlight = { pass, fed, passes, drafts: drafted }
        }
        for (const step of steps) {
          this.#throwIfAborted(options.signal)
          lengths.handOut(step)
          yield { step, states: rows }
        }
        if (!inFlight) return
        const call = inFlight
        inFlight = undefined
        ;({ logits, rows: logitRows, candidates } = await call.pass)
        lengths.landed(call.fed, call.passes)
        locate(logitRows)
        drafts = call.drafts
        // `locate` found each drafted row's last logits row; its passes start at its first.
        if (drafts) for (const r of call.fed) logitRow[r] -= call.passes - 1
      }
    } catch (err) {
      if (options.signal?.aborted) throw new KvEngineError('ABORTED', 'generation was aborted', { cause: err })
      throw err
    } finally {
      // The caller stopped early with a call in flight: let it finish (freeing the cache would
      // wait for it on this thread).
      if (inFlight) {
        const landed = await inFlight.pass.then(
          () => true,
          () => false, // a failed call leaves the cache as it was
        )
        if (landed) lengths.landed(inFlight.fed, inFlight.passes)
      }
      // Then take out of a kept cache what the caller has not seen fed, however the generation
      // ended: an abort thrown after a call landed has nothing in flight, but that call's
      // tokens are in the cache all the same.
      if (!owned) lengths.rewindToSeen(cache)
      if (owned) cache.dispose()
      else cachesInUse.delete(cache)
      drafter?.dispose()
    }
  }

  /**
   * Each live row's token for every pass of the last call (forced, or sampled from that pass),
   * accepted into its state: one step per pass, ending early where a row took a token other
   * than the one the model fed itself next, since the passes after that fed the wrong token.
   */
  #takeSteps(rows: RowState[], plan: Plan, lengths: BurstLedger, last: LastCall): GenerateStep[] {
    const steps: GenerateStep[] = []
    for (let pass = 0; pass < last.passes; pass++) {
      // A burst's logits rows go pass by pass; a drafted row's passes follow its first row.
      const firstRow = last.drafts ? pass : pass * last.fedRows
      const step = this.#takeStep(rows, plan, lengths, last, firstRow)
      steps.push(step)
      if (pass + 1 === last.passes || rows.every((s) => s.completed)) break
      const { drafts, candidates, logitRow } = last
      // What the model was fed after this pass: the row's draft, or (a burst always decodes from
      // candidates) its own top token.
      const fedNext = drafts ? (r: number) => drafts[r][pass] : (r: number) => (candidates as Candidates).ids[(firstRow + logitRow[r]) * (candidates as Candidates).perRow]
      if (BurstLedger.diverged(rows, step, fedNext)) break
    }
    return steps
  }

  /** Each row's token for one pass (forced, or sampled), accepted into its state. */
  #takeStep(rows: RowState[], plan: Plan, lengths: BurstLedger, last: LastCall, firstRow: number): GenerateStep {
    const vocab = this.model.info.vocabSize
    const step: GenerateStep = { tokenColumn: [], tokenMasks: [], text: [], finished: [], ...(plan.logprobs !== null && { logprobs: [] }) }
    for (const [r, state] of rows.entries()) {
      if (state.completed) {
        step.tokenColumn.push(-1)
        step.tokenMasks.push(0)
        step.text.push('')
        step.finished.push(null)
        step.logprobs?.push(null)
        continue
      }
      const limit = Math.min(plan.maxTokens, this.model.info.contextLength - lengths.prefilled(r))
      const { token, mask, text, logprobs } = state.takeToken(last, firstRow + last.logitRow[r], vocab, plan.stopTokens, limit, plan.logprobs)
      step.logprobs?.push(logprobs)
      step.tokenColumn.push(token)
      step.tokenMasks.push(mask)
      step.text.push(text)
      step.finished.push(state.completed ? (state.finishReason as FinishReason) : null)
    }
    return step
  }

  /**
   * Answers a conversation with the model's chat template: `numSamples` replies, each text or
   * calls of the functions `options.tools` offers (OpenAI's shapes; see ChatOptions).
   */
  async chat(this: Engine<Model>, messages: ChatMessage[], options: ChatOptions = {}): Promise<ChatReply[]> {
    return chatReplies(this, messages, options)
  }

  /** Runs generation to the end and returns each row's tokens, masks, text and finish reason. */
  async generateBatch(prompt: ArrayLike<number> | ArrayLike<number>[], options: GenerateOptions<ReturnType<M['createCache']>> = {}): Promise<GeneratedRow[]> {
    let rows: RowState[] = []
    for await (const { states } of this.#run(prompt, options)) rows = states
    return rows.map((s) => ({ tokens: s.tokens, masks: s.masks, text: s.text, finishReason: s.finishReason ?? 'length', ...(options.logprobs !== undefined && { logprobs: s.logprobs }) }))
  }

  #plan(prompt: ArrayLike<number> | ArrayLike<number>[], options: GenerateOptions<RowCache>): Plan {
    checkOptionKeys<GenerateOptions<RowCache>>(options, GENERATE_OPTIONS, 'generate()')
    checkSignal(options.signal)
    const { vocabSize, contextLength } = this.model.info
    const isList = Array.isArray(prompt) && prompt.length > 0 && typeof prompt[0] !== 'number'
    const lists = (isList ? prompt : [prompt]) as ArrayLike<number>[]
    checkInteger('the number of prompts', lists.length, 1, MAX_ROWS)
    const prompts = lists.map((p, i) => toTokenIds(p, vocabSize, isList ? `prompt[${i}]` : 'prompt', contextLength))
    for (const [i, p] of prompts.entries()) {
      if (p.length === 0) throw new KvEngineError('INVALID_ARGUMENT', `prompt${isList ? `[${i}]` : ''} is empty: give at least one token`)
    }
    const numSamples = options.numSamples ?? 1
    checkInteger('numSamples', numSamples, 1, 1024)
    const rowCount = prompts.length * numSamples
    if (rowCount > MAX_ROWS) {
      throw new KvEngineError('INVALID_ARGUMENT', `${prompts.length} prompts × ${numSamples} samples make ${rowCount} rows, more than the ${MAX_ROWS} a batch holds; lower numSamples or split the prompts`)
    }
    const longest = Math.max(...prompts.map((p) => p.length))
    const maxTokens = options.maxTokens ?? Math.max(contextLength - longest, 1)
    if (!Number.isSafeInteger(maxTokens) || maxTokens < 1) {
      throw new KvEngineError('INVALID_ARGUMENT', `maxTokens must be a positive integer, got ${show(options.maxTokens)}`)
    }
    if (options.stop !== undefined && (!Array.isArray(options.stop) || options.stop.some((s) => typeof s !== 'string'))) {
      throw new KvEngineError('INVALID_ARGUMENT', 'stop must be an array of strings')
    }
    const stopTokens = options.stopTokens ? new Set(toTokenIds(options.stopTokens, vocabSize, 'stopTokens')) : this.#defaults().stopTokens
    // A cache's pages are resident from the start, so an unbounded generation reserves one growth
    // step, not the whole context; the cache grows if the generation runs on.
    const reserve = options.maxTokens ?? Math.min(maxTokens, DEFAULT_RESERVE)
    const multiStep = options.multiStep ?? DEFAULT_MULTI_STEP
    checkInteger('multiStep', multiStep, 1, MAX_MULTI_STEP)
    const { maxMemory } = options
    if (maxMemory !== undefined && (typeof maxMemory !== 'number' || !(maxMemory > 0))) {
      throw new KvEngineError('INVALID_ARGUMENT', `maxMemory must be a number of bytes > 0 (Infinity for no limit), got ${String(maxMemory)}`)
    }
    const grammar = grammarOf(options)
    const logprobs = options.logprobs ?? null
    if (logprobs !== null) checkInteger('logprobs', logprobs, 0, MAX_TOP_LOGPROBS)
    // A grammar's rows decode one pass per call (a burst's later passes would feed tokens no mask
    // had checked), and so do rows reporting log-probabilities (they need each pass's logits).
    const onePass = grammar !== null || logprobs !== null
    const speculation = speculationOf(options.speculative, this.model, longest + maxTokens)
    if (speculation && onePass) {
      throw new KvEngineError('INVALID_ARGUMENT', `speculative cannot be combined with ${grammar ? Object.keys(grammar)[0] : 'logprobs'}, which need each token's logits before the next is fed`)
    }
    return { prompts, numSamples, rowCount, maxTokens, reserve, stopTokens, tools: grammar ? null : this.#toolRunner(options.tools), multiStep: onePass ? 1 : multiStep, grammar, logprobs, speculation }
  }

  async #compile(spec: GrammarSpec): Promise<Grammar> {
    if (!this.model.compileGrammar) throw new KvEngineError('UNSUPPORTED', 'this model cannot compile grammars, so jsonSchema, grammar and regex are not available')
    return this.model.compileGrammar(spec)
  }

  /** Tools are on by default only for nanochat's vocabulary, whose models were taught the calculator. */
  #toolRunner(tools: GenerateOptions['tools']): ToolRunner | null {
    const uses = tools === undefined ? this.#defaults().tools : tools === false ? [] : tools
    const runner = new ToolRunner(uses, this.tools, this.model.tokenizer, this.model.info.vocabSize)
    return runner.size > 0 ? runner : null
  }

  #defaults(): GenerationDefaults {
    this.#generationDefaults ??= generationDefaults(this.model)
    return this.#generationDefaults
  }


  /**
   * Checks the cache the generation would run in, a fresh one or the caller's, before any work:
   * the caller's must have one row per prompt and sample and no other generation in it, and
   * either must fit (`#checkFits`). Returns the capacity a fresh one is made with.
   */
  #checkCache(plan: Plan, options: GenerateOptions<RowCache>): number {
    const given = options.cache
    if (given === undefined) {
      const longest = Math.max(...plan.prompts.map((p) => p.length))
      const capacity = Math.min(longest + plan.reserve, this.model.info.contextLength)
      this.#checkFits(plan, options, capacity)
      return capacity
    }
    this.#checkKind(given)
    if (given.batchSize !== plan.rowCount) {
      throw new KvEngineError(
        'INVALID_ARGUMENT',
        `a given cache needs one row per prompt and sample: ${plan.prompts.length} × ${plan.numSamples} = ${plan.rowCount}, but it has ${given.batchSize}; create it with model.createCache(${plan.rowCount}, …)`,
      )
    }
    if (cachesInUse.has(given)) {
      throw new KvEngineError('BUSY', 'this cache is being used by another generation; wait for that one to finish (or abort it), or give this one a cache of its own')
    }
    this.#checkFits(plan, options, 0, given)
    return 0
  }

  /**
   * Refuses, before any work, a caller's cache the model cannot run. A Model runs KvCaches alone;
   * another ForwardModel (a scripted one, in tests) is trusted with any object with RowCache's
   * methods, since only its own `forward` knows its caches.
   */
  #checkKind(given: unknown): void {
    const isModel = this.model instanceof Model
    if (isModel ? given instanceof KvCache : hasRowCacheMethods(given)) return
    throw new KvEngineError('INVALID_ARGUMENT', `cache must be ${isModel ? 'a KvCache' : 'a RowCache'} from model.createCache()`)
  }

  /** The checked cache: a fresh one, or the caller's, which is this generation's alone until it ends. */
  #takeCache(plan: Plan, given: RowCache | undefined, capacity: number): { cache: RowCache; owned: boolean } {
    if (given === undefined) return { cache: this.model.createCache(plan.rowCount, capacity), owned: true }
    cachesInUse.add(given)
    return { cache: given, owned: false }
  }

  /**
   * Refuses in milliseconds a generation that cannot fit, rather than after reserving and
   * touching its memory: a row that would pass the model's context, or a cache too large
   * (`#checkMemory`). A fresh cache reserves `reserved` positions per row.
   */
  #checkFits(plan: Plan, options: GenerateOptions<RowCache>, reserved: number, given?: RowCache): void {
    const { contextLength } = this.model.info
    // Prompt i continues row i × numSamples; its other samples' rows are overwritten with copies.
    const seqlens = given?.seqlens
    const held = plan.prompts.map((_, i) => seqlens?.[i * plan.numSamples] ?? 0)
    const starts = plan.prompts.map((p, i) => held[i] + p.length)
    const start = Math.max(...starts)
    const worst = starts.indexOf(start)
    const name = `${plan.prompts.length > 1 ? `prompt[${worst}]` : 'the prompt'} has ${plan.prompts[worst].length} tokens${held[worst] > 0 ? ` after the ${held[worst]} its cache row holds` : ''}`
    if (start >= contextLength) {
      throw new KvEngineError('CONTEXT_OVERFLOW', `${name} but the model's context is ${contextLength}; shorten it`)
    }
    if (options.maxTokens !== undefined && start + options.maxTokens > contextLength) {
      throw new KvEngineError(
        'CONTEXT_OVERFLOW',
        `${name} and maxTokens is ${options.maxTokens}: ${start + options.maxTokens} positions, more than the model's context of ${contextLength}; lower maxTokens to at most ${contextLength - start}, or leave it out to stop at the end of the context`,
      )
    }
    this.#checkMemory(plan, options.maxMemory, Math.min(start + plan.maxTokens, contextLength), reserved, given)
  }

  /**
   * With `maxMemory`, the cache as large as its rows can grow (`reach` positions, or the given
   * cache's capacity if more) must fit in it. Without, a fresh CPU cache's reservation must fit
   * in the memory the system has available: its pages are all touched at once.
   */
  #checkMemory(plan: Plan, maxMemory: number | undefined, reach: number, reserved: number, given?: RowCache): void {
    if (maxMemory === undefined && (given || this.model.info.device !== 'cpu')) return
    const perPosition = this.model.cacheBytes(1, 1, { kvType: given?.kvType })
    const positions = maxMemory === undefined ? reserved : Math.max(reach, given?.capacity ?? 0)
    const limit = maxMemory ?? process.availableMemory()
    const bytes = plan.rowCount * positions * perPosition
    if (bytes <= limit) return
    const [needs, budget, or] =
      maxMemory === undefined
        ? ['needs', `the ${formatBytes(limit)} of memory the system has available`, '']
        : ['can grow to', `maxMemory (${formatBytes(limit)})`, ', or raise maxMemory']
    throw new KvEngineError(
      'INVALID_ARGUMENT',
      `this generation's KV cache ${needs} ${formatBytes(bytes)} (${plan.rowCount} rows × ${positions} positions × ${perPosition} bytes), more than ${budget}; lower numSamples or maxTokens${or}`,
    )
  }

  #throwIfAborted(signal?: AbortSignal): void {
    if (signal?.aborted) throw new KvEngineError('ABORTED', 'generation was aborted')
  }
}

/** The one of `jsonSchema`, `grammar` and `regex` given, as a spec; null for none. */
function grammarOf(options: GenerateOptions<RowCache>): GrammarSpec | null {
  const given = GRAMMAR_KINDS.filter((key) => options[key] !== undefined)
  if (given.length > 1) throw new KvEngineError('INVALID_ARGUMENT', `give one of jsonSchema, grammar and regex, not ${given.join(' and ')}`)
  if (given.length === 0) return null
  if (options.tools !== undefined && options.tools !== false) {
    throw new KvEngineError('INVALID_ARGUMENT', `tools cannot be combined with ${given[0]}: a tool's answer is forced into the row, outside the grammar`)
  }
  return { [given[0]]: options[given[0]] } as GrammarSpec
}
