use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::{AsyncTask, Buffer, Object, Uint32Array, Uint8Array};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Status, Task};
use napi_derive::napi;

use super::cancel_token::NativeCancelToken;
use super::chat_template::NativeChatTemplate;
use super::forward_pass::{ForwardPass, NativeForwardOptions};
use super::grammar::{CompileTask, CompilerSlot};
use super::kv_cache::NativeKvCache;
use super::settlement::Settlement;
use super::{caught, disposed, guarded, task_error, Result};
use crate::chat_template::ChatTemplate;
use crate::error::Error;
use crate::loader::LoadedModel;
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
        let tokens = tokens.iter().map(|t| t.to_vec()).collect();
        let mut pass =
            ForwardPass::new(self.get()?, cache.shared.clone(), tokens, cancel.map(|c| c.flag.clone()), options).map_err(super::to_napi)?;
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
