use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::{AsyncTask, Buffer, Float32Array, Object, Uint32Array, Uint8Array};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Status, Task};
use napi_derive::napi;

use super::cancel_token::NativeCancelToken;
use super::kv_cache::NativeKvCache;
use super::{disposed, guarded};
use crate::candidates::Candidates;
use crate::chat_template::ChatMessage;
use crate::error::{Error, ErrorKind};
use crate::kv_cache::KvCache;
use crate::loader::LoadedModel;
use crate::model::{ForwardOutput, LogitsFor};
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
    pub has_chat_template: bool,
    /// Where the model runs: "cpu" or "cuda".
    pub device: String,
    /// What a CPU model multiplies Q8_0/Q4_0 weights by: "q8" (8-bit, the default where its
    /// kernels keep results independent of batching) or "f32"; absent on CUDA.
    pub activations: Option<String>,
}

#[napi(object)]
pub struct NativeChatMessage {
    pub role: String,
    pub content: String,
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

#[napi(object)]
pub struct NativeRenderedConversation {
    pub ids: Uint32Array,
    /// 1 where the assistant is trained to produce the token.
    pub mask: Uint8Array,
}

#[napi(object)]
pub struct NativeForwardResult {
    /// `(rows.length, vocabSize)` row-major, handed over without a copy; or the caller's
    /// `logitsInto` array (whole), whose first `rows.length × vocabSize` values hold them; empty
    /// when the caller asked for candidates only.
    pub logits: Float32Array,
    /// The cache row each logits row belongs to.
    pub rows: Uint32Array,
    /// When asked for: each logits row's highest `candidates` token ids, highest first (ties by
    /// lower id), `(rows.length, candidates)` row-major; fewer per row if the vocabulary is smaller.
    pub candidate_ids: Option<Uint32Array>,
    /// Their logits, in the same order.
    pub candidate_logits: Option<Float32Array>,
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
    type Output = LoadedModel;
    type JsValue = NativeModel;

    fn compute(&mut self) -> napi::Result<LoadedModel> {
        let progress = self.progress.take();
        guarded(|| {
            crate::load_on(&self.path, self.placement, &mut |f| {
                if let Some(p) = &progress {
                    p.call(f, ThreadsafeFunctionCallMode::NonBlocking);
                }
            })
        })
    }

    fn resolve(&mut self, _env: Env, loaded: LoadedModel) -> napi::Result<NativeModel> {
        let activations = match self.placement {
            crate::Placement::Cpu { activations } => Some(activations.name()),
            crate::Placement::Cuda { .. } => None,
        };
        Ok(NativeModel { inner: Mutex::new(Some(Arc::new(loaded))), activations })
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
/// ("f32" or "q8"; when absent, `Activations::preferred()`) what a CPU model multiplies
/// Q8_0/Q4_0 weights by.
#[napi(ts_return_type = "Promise<NativeModel>")]
pub fn load_model(
    path: String,
    threads: Option<u32>,
    #[napi(ts_arg_type = "(fraction: number) => void")] progress: Option<ProgressFn>,
    device: Option<String>,
    dtype: Option<String>,
    activations: Option<String>,
) -> napi::Result<AsyncTask<LoadTask>> {
    let placement = crate::Placement::parse(device.as_deref(), dtype.as_deref(), activations.as_deref()).map_err(super::to_napi)?;
    if let Some(n) = threads.filter(|&n| n > 0) {
        for var in ["RAYON_NUM_THREADS", "CANDLE_NUM_THREADS"] {
            if std::env::var_os(var).is_none() {
                std::env::set_var(var, n.to_string());
            }
        }
    }
    Ok(AsyncTask::new(LoadTask { path: PathBuf::from(path), placement, progress }))
}

/// One forward pass as the binding runs it, from its arguments to the promise's value.
struct ForwardPass {
    model: Arc<LoadedModel>,
    cache: Arc<Mutex<Option<KvCache>>>,
    tokens: Vec<Vec<u32>>,
    which: LogitsFor,
    cancel: Option<Arc<AtomicBool>>,
    /// A buffer the caller reuses across steps: no fresh array per step for V8 to collect.
    into: Option<Float32Array>,
    /// How many top candidates per row to pick (0: none).
    candidates: usize,
    /// Whether JS wants the logits themselves (a sampler reading candidates does not).
    logits: bool,
}

impl ForwardPass {
    /// Checked before the pass, so a buffer that is too small costs nothing and changes nothing.
    fn check_into(&self) -> crate::Result<()> {
        let Some(into) = &self.into else { return Ok(()) };
        let rows = match self.which {
            LogitsFor::All => self.tokens.iter().map(Vec::len).sum(),
            LogitsFor::LastPerRow => self.tokens.iter().filter(|t| !t.is_empty()).count(),
        };
        let needed = rows.saturating_mul(self.model.model.config.vocab_size);
        if into.len() < needed {
            return Err(Error::invalid(format!(
                "logitsInto holds {} floats but this pass returns {needed} ({rows} rows × the vocabulary); size it rows × vocabSize",
                into.len()
            )));
        }
        Ok(())
    }

    /// The pass itself, on a pool thread; the logits are written into `into` when given.
    fn run(&mut self) -> napi::Result<(ForwardOutput, Option<Candidates>)> {
        let mut guard = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let cache = guard.as_mut().ok_or_else(|| disposed("KV cache"))?;
        if self.cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed)) {
            return Err(super::to_napi(Error::new(ErrorKind::Aborted, "the forward pass was cancelled")));
        }
        self.check_into().map_err(super::to_napi)?;
        let (out, candidates) = guarded(|| self.model.model.forward_picking(&self.tokens, cache, self.which, self.cancel.as_deref(), self.candidates))?;
        if let Some(buffer) = &mut self.into {
            // SAFETY: the JS side holds the array until the promise settles and does not touch
            // it meanwhile; the length was checked above.
            unsafe { buffer.as_mut()[..out.logits.len()].copy_from_slice(&out.logits) };
        }
        Ok((out, candidates))
    }

    /// The promise's value, on the JS thread (where `into` is also let go).
    fn result(self, (out, candidates): (ForwardOutput, Option<Candidates>)) -> NativeForwardResult {
        let logits = self.into.unwrap_or_else(|| Float32Array::new(if self.logits { out.logits } else { Vec::new() }));
        let (candidate_ids, candidate_logits) = match candidates {
            Some(c) => (Some(Uint32Array::new(c.ids)), Some(Float32Array::new(c.logits))),
            None => (None, None),
        };
        NativeForwardResult { logits, rows: Uint32Array::new(out.rows), candidate_ids, candidate_logits }
    }
}

#[napi]
pub struct NativeModel {
    inner: Mutex<Option<Arc<LoadedModel>>>,
    activations: Option<&'static str>,
}

impl NativeModel {
    fn get(&self) -> napi::Result<Arc<LoadedModel>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).clone().ok_or_else(|| disposed("model"))
    }
}

#[napi]
impl NativeModel {
    #[napi]
    pub fn info(&self) -> napi::Result<NativeModelInfo> {
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
            has_chat_template: m.chat_template.is_some(),
            device: m.model.device().into(),
            activations: self.activations.map(String::from),
        })
    }

    #[napi]
    pub fn encode(&self, text: String, special: bool, add_bos: bool) -> napi::Result<Uint32Array> {
        let m = self.get()?;
        guarded(|| m.tokenizer.encode(&text, special, add_bos)).map(Uint32Array::new)
    }

    /// The exact bytes of the ids; may end inside a UTF-8 character (the TS decoder buffers it).
    #[napi]
    pub fn decode_bytes(&self, ids: Uint32Array) -> napi::Result<Buffer> {
        let m = self.get()?;
        guarded(|| m.tokenizer.decode_bytes(&ids)).map(Buffer::from)
    }

    #[napi]
    pub fn decode(&self, ids: Uint32Array) -> napi::Result<String> {
        let m = self.get()?;
        guarded(|| m.tokenizer.decode(&ids))
    }

    #[napi]
    pub fn apply_chat_template(&self, messages: Vec<NativeChatMessage>, add_generation_prompt: bool) -> napi::Result<String> {
        let m = self.get()?;
        let messages: Vec<ChatMessage> = messages.into_iter().map(|m| ChatMessage { role: m.role, content: m.content }).collect();
        guarded(|| {
            let template = m.chat_template.as_ref().ok_or_else(|| {
                Error::unsupported("this model ships no chat template; format the prompt yourself and use encode()")
            })?;
            template.render(&messages, add_generation_prompt)
        })
    }

    /// nanochat's chat format: ids and training mask of the conversation, truncated to
    /// `maxTokens` (default 2048, as upstream's render_conversation).
    #[napi]
    pub fn render_conversation(&self, messages: Vec<NativeConversationMessage>, max_tokens: Option<u32>) -> napi::Result<NativeRenderedConversation> {
        let m = self.get()?;
        guarded(|| {
            let (ids, mask) = render::render_conversation(&m.tokenizer, &conversation(messages)?, max_tokens.unwrap_or(2048) as usize)?;
            Ok(NativeRenderedConversation { ids: Uint32Array::new(ids), mask: Uint8Array::new(mask) })
        })
    }

    /// nanochat's prompt for the assistant's reply: the conversation without its final
    /// assistant message, then `<|assistant_start|>`.
    #[napi]
    pub fn render_for_completion(&self, messages: Vec<NativeConversationMessage>) -> napi::Result<Uint32Array> {
        let m = self.get()?;
        guarded(|| render::render_for_completion(&m.tokenizer, &conversation(messages)?)).map(Uint32Array::new)
    }

    #[napi]
    pub fn create_cache(&self, batch_size: u32, capacity: u32) -> napi::Result<NativeKvCache> {
        let m = self.get()?;
        guarded(|| m.model.new_cache(batch_size as usize, capacity as usize)).map(NativeKvCache::new)
    }

    /// One batched forward pass off the JS thread: `tokens[i]` are row i's new tokens (empty to
    /// skip the row). Resolves to logits for the last new token of each row, or for every new
    /// token when `allLogits` is set. Runs on the compute pool after the cache's earlier passes.
    #[napi(ts_return_type = "Promise<NativeForwardResult>")]
    pub fn forward<'env>(
        &self,
        env: &'env Env,
        cache: &NativeKvCache,
        tokens: Vec<Uint32Array>,
        all_logits: bool,
        cancel: Option<&NativeCancelToken>,
        logits_into: Option<Float32Array>,
        candidates: Option<u32>,
        logits: Option<bool>,
    ) -> napi::Result<Object<'env>> {
        let mut pass = ForwardPass {
            model: self.get()?,
            cache: cache.inner.clone(),
            tokens: tokens.iter().map(|t| t.to_vec()).collect(),
            which: if all_logits { LogitsFor::All } else { LogitsFor::LastPerRow },
            cancel: cancel.map(|c| c.flag.clone()),
            into: logits_into,
            candidates: candidates.unwrap_or(0) as usize,
            logits: logits.unwrap_or(true),
        };
        let (deferred, promise) = env.create_deferred()?;
        cache.passes.submit(Box::new(move || {
            let outcome = pass.run();
            deferred.resolve(move |_env| outcome.map(|out| pass.result(out)));
        }));
        Ok(promise)
    }

    #[napi]
    pub fn stats(&self) -> napi::Result<NativeModelStats> {
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
