use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::{AsyncTask, Buffer, Float32Array, Object, Uint32Array, Uint8Array};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Status, Task};
use napi_derive::napi;

use super::cancel_token::NativeCancelToken;
use super::chat_template::NativeChatTemplate;
use super::grammar::{CompileTask, CompilerSlot};
use super::kv_cache::{NativeKvCache, SharedCache};
use super::settlement::Settlement;
use super::{caught, disposed, guarded, task_error, Result};
use crate::candidates::Candidates;
use crate::chat_template::ChatTemplate;
use crate::error::{Error, ErrorKind};
use crate::kv_cache::KvCache;
use crate::loader::LoadedModel;
use crate::model::LogitsFor;
use crate::nanochat::render::{self, Content, Message, Part};

/// JS callback `(fraction) => void`, called from the worker thread without blocking it.
pub type ProgressFn = ThreadsafeFunction<f64, (), f64, Status, false>;

/// What a loaded model is, as read from its files.
#[napi(object)]
pub struct NativeModelInfo {
    pub architecture: String,
    /// e.g. "gguf f32+q4_1+q8_0" or "safetensors".
    pub format: String,
    pub vocab_size: u32,
    pub hidden_size: u32,
    pub n_layers: u32,
    pub n_heads: u32,
    pub n_kv_heads: u32,
    pub head_dim: u32,
    pub context_length: u32,
    pub bos_token: Option<u32>,
    pub eos_token: Option<u32>,
    pub add_bos_token: bool,
    /// Tokens that end a turn: EOS and the chat format's end-of-turn marker.
    pub eog_tokens: Vec<u32>,
    /// Where the model runs: "cpu" or "cuda".
    pub device: String,
    /// What a CPU model multiplies Q8_0/Q4_0 weights by: "q8" (8-bit, the default where its
    /// kernels keep results independent of batching) or "f32"; absent on CUDA.
    pub activations: Option<String>,
}

/// A nanochat conversation message: `content` text, or for assistant turns `parts` (text,
/// python tool calls and their outputs).
#[napi(object)]
pub struct NativeConversationMessage {
    pub role: String,
    pub content: Option<String>,
    pub parts: Option<Vec<NativeMessagePart>>,
}

#[napi(object)]
pub struct NativeMessagePart {
    /// "text", "python" or "python_output".
    #[napi(js_name = "type")]
    pub kind: String,
    pub text: String,
}

/// `forward`'s options, validated by src/Model.ts, which alone calls it.
#[napi(object, object_to_js = false)]
pub struct NativeForwardOptions {
    /// Logits for every new token, not only each row's last.
    pub all_logits: bool,
    /// Whether logits come back at all (into `logitsInto` when given).
    pub logits: bool,
    pub logits_into: Option<Float32Array>,
    /// How many of each logits row's highest tokens to pick, into the two arrays below.
    pub candidates: Option<u32>,
    pub candidate_ids: Option<Uint32Array>,
    pub candidate_logits: Option<Float32Array>,
    /// Greedy passes run back to back (1 when absent).
    pub steps: Option<u32>,
}

#[napi(object)]
pub struct NativeRenderedConversation {
    pub ids: Uint32Array,
    /// 1 where the assistant is trained to produce the token.
    pub mask: Uint8Array,
}

#[napi(object)]
pub struct NativeTokenBytes {
    /// Every token's bytes, end to end.
    pub bytes: Buffer,
    /// Token i's bytes are `bytes[offsets[i]..offsets[i + 1]]`.
    pub offsets: Uint32Array,
}

#[napi(object)]
pub struct NativeModelStats {
    pub forward_calls: f64,
    pub tokens_processed: f64,
    /// Seconds spent computing forward passes (on the worker thread, excluding the hand-off).
    pub forward_seconds: f64,
}

pub struct LoadTask {
    path: PathBuf,
    placement: crate::Placement,
    progress: Option<ProgressFn>,
}

impl Task for LoadTask {
    /// The engine's result, turned into a JS error with its code by `resolve` (napi-rs lets
    /// `compute` fail with its own status only).
    type Output = crate::Result<LoadedModel>;
    type JsValue = NativeModel;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        let progress = self.progress.take();
        Ok(caught(|| {
            crate::load_on(&self.path, self.placement, &mut |f| {
                if let Some(p) = &progress {
                    p.call(f, ThreadsafeFunctionCallMode::NonBlocking);
                }
            })
        }))
    }

    fn resolve(&mut self, env: Env, loaded: Self::Output) -> napi::Result<NativeModel> {
        let loaded = loaded.map_err(|e| task_error(&env, e))?;
        let activations = match self.placement {
            crate::Placement::Cpu(options) => Some(options.activations.name()),
            crate::Placement::Cuda { .. } => None,
        };
        Ok(NativeModel { inner: Mutex::new(Some(Arc::new(loaded))), activations, grammar: CompilerSlot::default() })
    }
}

/// Whether this build of the addon has the CUDA backend (`--features cuda`).
#[napi]
pub fn has_cuda() -> bool {
    cfg!(feature = "cuda")
}

/// Loads a model off the JS thread. `threads` sizes candle's thread pools; pools are created
/// once per process, so only the first load's value counts. `device` is "cpu" (default) or
/// "cuda"; `dtype` ("f32", "f16", "bf16") is what a CUDA model computes in; `activations`
/// ("f32" or "q8"; when absent, `Placement::default()`'s) what a CPU model multiplies
/// Q8_0/Q4_0 weights by; `quantize` ("q8_0" or "q4_0") the blocks a CPU model's
/// full-precision matrices are quantized to at load.
#[napi(ts_return_type = "Promise<NativeModel>")]
pub fn load_model(
    path: String,
    threads: Option<u32>,
    #[napi(ts_arg_type = "(fraction: number) => void")] progress: Option<ProgressFn>,
    device: Option<String>,
    dtype: Option<String>,
    activations: Option<String>,
    quantize: Option<String>,
) -> Result<AsyncTask<LoadTask>> {
    let placement = crate::Placement::parse(device.as_deref(), dtype.as_deref(), activations.as_deref(), quantize.as_deref())
        .map_err(super::to_napi)?;
    if let Some(n) = threads.filter(|&n| n > 0) {
        for var in ["RAYON_NUM_THREADS", "CANDLE_NUM_THREADS"] {
            if std::env::var_os(var).is_none() {
                std::env::set_var(var, n.to_string());
            }
        }
    }
    Ok(AsyncTask::new(LoadTask { path: PathBuf::from(path), placement, progress }))
}

/// One forward pass as the binding runs it, from its arguments to the promise's value. Results
/// go into the caller's arrays where it gives them: a decode step then makes no JS object but
/// its promise (each typed array made per step cost ~12 µs on the JS thread, its caches cold
/// after the pass).
struct ForwardPass {
    model: Arc<LoadedModel>,
    cache: Arc<SharedCache>,
    tokens: Vec<Vec<u32>>,
    which: LogitsFor,
    cancel: Option<Arc<AtomicBool>>,
    logits: LogitsOut,
    candidates: Option<CandidatesInto>,
    /// Greedy passes run back to back, each feeding the last one's top candidates (1: one pass).
    steps: usize,
}

/// Where a pass's logits go.
enum LogitsOut {
    /// A buffer the caller reuses across steps: no fresh array per step for V8 to collect.
    Into(Float32Array),
    Fresh,
    /// Nowhere: the caller samples from candidates alone.
    Dropped,
}

/// Each logits row's highest `per_row` tokens, written into the caller's arrays.
struct CandidatesInto {
    per_row: usize,
    ids: Uint32Array,
    logits: Float32Array,
}

impl CandidatesInto {
    /// Copies one pass's candidates in at element `at`; returns where the next pass's go.
    fn write(&mut self, at: usize, picked: &Candidates) -> usize {
        let end = at + picked.ids.len();
        // SAFETY: the JS side holds these arrays until the promise settles and does not touch
        // them meanwhile; `check_buffers` sized them for every pass of the call.
        unsafe {
            self.ids.as_mut()[at..end].copy_from_slice(&picked.ids);
            self.logits.as_mut()[at..end].copy_from_slice(&picked.logits);
        }
        end
    }
}

impl ForwardPass {
    /// Checked before the pass, so a buffer that is too small costs nothing and changes nothing.
    fn check_buffers(&self) -> crate::Result<()> {
        let rows = match self.which {
            LogitsFor::All => self.tokens.iter().map(Vec::len).sum(),
            LogitsFor::LastPerRow => self.tokens.iter().filter(|t| !t.is_empty()).count(),
        };
        if let LogitsOut::Into(into) = &self.logits {
            let needed = rows.saturating_mul(self.model.model.config.vocab_size);
            if into.len() < needed {
                return Err(Error::invalid(format!(
                    "logitsInto holds {} floats but this pass returns {needed} ({rows} rows × the vocabulary); size it rows × vocabSize",
                    into.len()
                )));
            }
        }
        if let Some(c) = &self.candidates {
            let needed = rows.saturating_mul(c.per_row).saturating_mul(self.steps);
            if c.ids.len() < needed || c.logits.len() < needed {
                return Err(Error::invalid(format!(
                    "the candidate arrays hold {} ids and {} logits but this call picks {needed} ({rows} rows × {} × {} steps); size them rows × candidates × steps",
                    c.ids.len(),
                    c.logits.len(),
                    c.per_row,
                    self.steps
                )));
            }
        }
        Ok(())
    }

    /// The pass itself, on a pool thread; returns the logits unless they went into a buffer.
    fn run(&mut self) -> Result<Vec<f32>> {
        let shared = self.cache.clone();
        shared.with(|cache| self.run_on(cache))
    }

    /// The pass, with the cache's lock held.
    fn run_on(&mut self, cache: &mut KvCache) -> Result<Vec<f32>> {
        if self.cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed)) {
            return Err(super::to_napi(Error::new(ErrorKind::Aborted, "the forward pass was cancelled")));
        }
        self.check_buffers().map_err(super::to_napi)?;
        let per_row = self.candidates.as_ref().map_or(0, |c| c.per_row);
        let constraints = self.cache.constraints();
        if self.steps > 1 && constraints.iter().any(Option::is_some) {
            return Err(super::to_napi(Error::invalid("a cache with constrained rows decodes one pass per call: steps must be 1")));
        }
        if self.steps > 1 {
            let passes =
                guarded(|| self.model.model.forward_greedy_steps(&self.tokens, cache, self.steps, self.cancel.as_deref(), per_row))?;
            if let Some(into) = &mut self.candidates {
                passes.iter().fold(0, |at, picked| into.write(at, picked));
            }
            return Ok(Vec::new());
        }
        let mut locked: Vec<_> = constraints.iter().map(|c| c.as_ref().map(|c| c.lock().unwrap_or_else(|p| p.into_inner()))).collect();
        let mut rows: Vec<_> = locked.iter_mut().map(|g| g.as_deref_mut()).collect();
        let (out, picked) =
            guarded(|| self.model.model.forward_picking(&self.tokens, cache, self.which, self.cancel.as_deref(), per_row, &mut rows))?;
        if let (Some(into), Some(picked)) = (&mut self.candidates, picked) {
            into.write(0, &picked);
        }
        // SAFETY: the JS side holds this array until the promise settles and does not touch it
        // meanwhile; its length was checked above.
        if let LogitsOut::Into(buffer) = &mut self.logits {
            unsafe { buffer.as_mut()[..out.logits.len()].copy_from_slice(&out.logits) };
        }
        Ok(out.logits)
    }

    /// The promise's value, on the JS thread (where the caller's arrays are also let go).
    fn result(self, logits: Vec<f32>) -> Option<Float32Array> {
        match self.logits {
            LogitsOut::Into(buffer) => Some(buffer),
            LogitsOut::Fresh => Some(Float32Array::new(logits)),
            LogitsOut::Dropped => None,
        }
    }
}

#[napi]
pub struct NativeModel {
    inner: Mutex<Option<Arc<LoadedModel>>>,
    activations: Option<&'static str>,
    grammar: CompilerSlot,
}

impl NativeModel {
    fn get(&self) -> Result<Arc<LoadedModel>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).clone().ok_or_else(|| disposed("model"))
    }
}

#[napi]
impl NativeModel {
    #[napi]
    pub fn info(&self) -> Result<NativeModelInfo> {
        let m = self.get()?;
        let (c, t) = (&m.model.config, &m.tokenizer);
        Ok(NativeModelInfo {
            architecture: format!("{:?}", c.architecture).to_lowercase(),
            format: m.format.clone(),
            vocab_size: c.vocab_size as u32,
            hidden_size: c.hidden_size as u32,
            n_layers: c.n_layers as u32,
            n_heads: c.n_heads as u32,
            n_kv_heads: c.n_kv_heads as u32,
            head_dim: c.head_dim as u32,
            context_length: c.context_length as u32,
            bos_token: t.bos_token,
            eos_token: t.eos_token,
            add_bos_token: t.add_bos,
            eog_tokens: t.eog_tokens.clone(),
            device: m.model.device().into(),
            activations: self.activations.map(String::from),
        })
    }

    #[napi]
    pub fn encode(&self, text: String, special: bool, add_bos: bool) -> Result<Uint32Array> {
        let m = self.get()?;
        guarded(|| m.tokenizer.encode(&text, special, add_bos)).map(Uint32Array::new)
    }

    /// Every token's bytes at once (see `Tokenizer::byte_table`), so streaming text needs no
    /// call into native code per token.
    #[napi]
    pub fn token_bytes(&self) -> Result<NativeTokenBytes> {
        let (bytes, offsets) = self.get()?.tokenizer.byte_table();
        Ok(NativeTokenBytes { bytes: Buffer::from(bytes), offsets: Uint32Array::new(offsets) })
    }

    #[napi]
    pub fn decode(&self, ids: Uint32Array) -> Result<String> {
        let m = self.get()?;
        guarded(|| m.tokenizer.decode(&ids))
    }

    /// The model's own chat template, or `source` in its place (rendered with the model's BOS
    /// and EOS text); none for a model without one and no `source`.
    #[napi]
    pub fn chat_template(&self, source: Option<String>) -> Result<Option<NativeChatTemplate>> {
        let m = self.get()?;
        guarded(|| {
            let template = match source {
                Some(src) => {
                    let name = |id: Option<u32>| id.and_then(|i| m.tokenizer.token_text(i)).unwrap_or_default();
                    Some(ChatTemplate::new(&src, name(m.tokenizer.bos_token), name(m.tokenizer.eos_token))?)
                }
                None => m.chat_template.clone(),
            };
            Ok(template.map(NativeChatTemplate::new))
        })
    }

    /// nanochat's chat format: ids and training mask of the conversation, truncated to
    /// `maxTokens` (default 2048, as upstream's render_conversation).
    #[napi]
    pub fn render_conversation(
        &self,
        messages: Vec<NativeConversationMessage>,
        max_tokens: Option<u32>,
    ) -> Result<NativeRenderedConversation> {
        let m = self.get()?;
        guarded(|| {
            let (ids, mask) = render::render_conversation(&m.tokenizer, &conversation(messages)?, max_tokens.unwrap_or(2048) as usize)?;
            Ok(NativeRenderedConversation { ids: Uint32Array::new(ids), mask: Uint8Array::new(mask) })
        })
    }

    /// nanochat's prompt for the assistant's reply: the conversation without its final
    /// assistant message, then `<|assistant_start|>`.
    #[napi]
    pub fn render_for_completion(&self, messages: Vec<NativeConversationMessage>) -> Result<Uint32Array> {
        let m = self.get()?;
        guarded(|| render::render_for_completion(&m.tokenizer, &conversation(messages)?)).map(Uint32Array::new)
    }

    #[napi]
    pub fn create_cache(&self, batch_size: u32, capacity: u32, kv_type: Option<String>) -> Result<NativeKvCache> {
        let m = self.get()?;
        guarded(|| m.model.new_cache_as(batch_size as usize, capacity as usize, crate::KvType::parse(kv_type.as_deref())?))
            .map(NativeKvCache::new)
    }

    /// One batched forward pass off the JS thread: `tokens[i]` are row i's new tokens (empty to
    /// skip the row). Resolves to logits for the last new token of each row (for every new token
    /// when `allLogits` is set), `(rows, vocabSize)` row-major: `logitsInto` when given, else a
    /// fresh array, or null when `logits` is false. With `candidates`, each logits row's highest
    /// that many tokens (fewer if the vocabulary is smaller), highest first, ties by lower id, go
    /// into `candidateIds` and `candidateLogits`. The rows are the non-empty ones in order (each
    /// once per token with `allLogits`). With `steps` > 1, that many greedy passes run back to
    /// back, each feeding every row the previous pass's top candidate; each pass's candidates
    /// follow the last's in the arrays, and logits must be off. Runs on the compute pool after
    /// the cache's earlier passes.
    #[napi(ts_return_type = "Promise<Float32Array | null>")]
    pub fn forward<'env>(
        &self,
        env: &'env Env,
        cache: &NativeKvCache,
        tokens: Vec<Uint32Array>,
        cancel: Option<&NativeCancelToken>,
        options: NativeForwardOptions,
    ) -> Result<Object<'env>> {
        let NativeForwardOptions { all_logits, logits, logits_into, candidates, candidate_ids, candidate_logits, steps } = options;
        let model = self.get()?;
        let steps = steps.unwrap_or(1).max(1) as usize;
        if steps > 1 && (candidates.unwrap_or(0) == 0 || logits || all_logits) {
            return Err(super::to_napi(Error::invalid(
                "steps > 1 decodes greedily from candidates: ask for candidates, with logits and allLogits off",
            )));
        }
        let candidates = match (candidates, candidate_ids, candidate_logits) {
            (None | Some(0), None, None) => None,
            (Some(n), Some(ids), Some(logits)) => {
                Some(CandidatesInto { per_row: (n as usize).min(model.model.config.vocab_size), ids, logits })
            }
            _ => return Err(super::to_napi(Error::invalid("candidates needs both candidateIds and candidateLogits arrays"))),
        };
        let logits = match (logits_into, logits) {
            (Some(into), true) => LogitsOut::Into(into),
            (None, true) => LogitsOut::Fresh,
            (None, false) => LogitsOut::Dropped,
            (Some(_), false) => return Err(super::to_napi(Error::invalid("logitsInto needs logits"))),
        };
        let mut pass = ForwardPass {
            model,
            cache: cache.shared.clone(),
            tokens: tokens.iter().map(|t| t.to_vec()).collect(),
            which: if all_logits { LogitsFor::All } else { LogitsFor::LastPerRow },
            cancel: cancel.map(|c| c.flag.clone()),
            logits,
            candidates,
            steps,
        };
        let (settlement, promise) = Settlement::new(env)?;
        cache.passes.submit(Box::new(move || {
            let outcome = pass.run();
            settlement.settle(move || outcome.map(|logits| pass.result(logits)));
        }));
        Ok(promise)
    }

    /// Compiles a grammar against this model's vocabulary off the JS thread: `kind` is
    /// "jsonSchema" (JSON text), "grammar" (Lark) or "regex". The first call also builds the
    /// vocabulary's token trie.
    #[napi(ts_return_type = "Promise<NativeConstraint>")]
    pub fn compile_grammar(&self, kind: String, text: String) -> Result<AsyncTask<CompileTask>> {
        Ok(AsyncTask::new(CompileTask { model: self.get()?, compiler: self.grammar.clone(), kind, text }))
    }

    #[napi]
    pub fn stats(&self) -> Result<NativeModelStats> {
        let m = self.get()?;
        Ok(NativeModelStats {
            forward_calls: m.model.stats().forward_calls.load(Ordering::Relaxed) as f64,
            tokens_processed: m.model.stats().tokens_processed.load(Ordering::Relaxed) as f64,
            forward_seconds: m.model.stats().forward_nanos.load(Ordering::Relaxed) as f64 / 1e9,
        })
    }

    /// Drops the weights now; a forward pass already running keeps them until it finishes.
    #[napi]
    pub fn dispose(&self) {
        let model = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        drop(model);
        crate::memory::release_freed_memory();
    }

    #[napi(getter)]
    pub fn disposed(&self) -> bool {
        self.inner.lock().map(|g| g.is_none()).unwrap_or(true)
    }
}

fn conversation(messages: Vec<NativeConversationMessage>) -> crate::Result<Vec<Message>> {
    messages
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            let content = match (m.content, m.parts) {
                (Some(text), None) => Content::Text(text),
                (None, Some(parts)) => Content::Parts(parts.into_iter().map(|p| Part { kind: p.kind, text: p.text }).collect()),
                _ => return Err(Error::invalid(format!("message {i} needs exactly one of content and parts"))),
            };
            Ok(Message { role: m.role, content })
        })
        .collect()
}
