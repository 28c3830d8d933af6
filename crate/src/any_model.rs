//! One handle over the architectures we run, so the loader and the bindings need not care which
//! one a file held: the Llama/Qwen2 transformer (crate::model) or nanochat's GPT.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::candidates::{self, Candidates};
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::grammar::Constraint;
use crate::kv_cache::{KvCache, KvType};
use crate::model::{ForwardOutput, LogitsFor, Model, ModelStats};
use crate::nanochat::NanochatModel;

/// Which code runs a loaded model's forward pass (its architecture is `config.architecture`).
pub enum Implementation {
    /// The Llama block and its variants (Qwen, Gemma 3, Phi-3, GPT-2, ...) on our CPU kernels.
    Llama(Model),
    Nanochat(NanochatModel),
    /// The Llama/Qwen2 family on a CUDA GPU.
    #[cfg(feature = "cuda")]
    LlamaCuda(crate::cuda::model::CudaModel),
}

pub struct LanguageModel {
    /// The shapes every architecture shares; for nanochat its resolved base config.
    pub config: ModelConfig,
    pub implementation: Implementation,
}

impl From<Model> for LanguageModel {
    fn from(m: Model) -> Self {
        Self { config: m.config.clone(), implementation: Implementation::Llama(m) }
    }
}

impl From<NanochatModel> for LanguageModel {
    fn from(m: NanochatModel) -> Self {
        Self { config: m.config.base.clone(), implementation: Implementation::Nanochat(m) }
    }
}

#[cfg(feature = "cuda")]
impl From<crate::cuda::model::CudaModel> for LanguageModel {
    fn from(m: crate::cuda::model::CudaModel) -> Self {
        Self { config: m.config.clone(), implementation: Implementation::LlamaCuda(m) }
    }
}

impl LanguageModel {
    /// A cache holding f16 K/V (the default, as llama.cpp's).
    pub fn new_cache(&self, batch: usize, capacity: usize) -> Result<KvCache> {
        self.new_cache_as(batch, capacity, KvType::default())
    }

    /// A cache holding K/V as `kv_type`; a CUDA model's cache keeps its compute dtype instead.
    pub fn new_cache_as(&self, batch: usize, capacity: usize, kv_type: KvType) -> Result<KvCache> {
        match &self.implementation {
            Implementation::Llama(m) => m.new_cache(batch, capacity, kv_type),
            Implementation::Nanochat(m) => m.new_cache(batch, capacity, kv_type),
            #[cfg(feature = "cuda")]
            Implementation::LlamaCuda(m) => m.new_cache(batch, capacity),
        }
    }

    pub fn forward(&self, batch: &[Vec<u32>], cache: &mut KvCache, which: LogitsFor, cancel: Option<&AtomicBool>) -> Result<ForwardOutput> {
        Ok(self.forward_picking(batch, cache, which, cancel, 0, &mut [])?.0)
    }

    /// `forward`, then each constrained row's logits masked to what its grammar allows next
    /// (`constraints`, by cache row; empty for none), then each logits row's `candidates`
    /// highest logits (see `candidates.rs`; none when 0), all in the same job on the pool: one
    /// hand-off per step, not two or three.
    pub fn forward_picking(
        &self,
        batch: &[Vec<u32>],
        cache: &mut KvCache,
        which: LogitsFor,
        cancel: Option<&AtomicBool>,
        candidates: usize,
        constraints: &mut [Option<&mut Constraint>],
    ) -> Result<(ForwardOutput, Option<Candidates>)> {
        if cache.is_on_device() != self.on_gpu() {
            return Err(Error::invalid("this KV cache was created for a model on another device"));
        }
        if constraints.iter().any(Option::is_some) && which != LogitsFor::LastPerRow {
            return Err(Error::invalid("constraints mask each row's next token: ask for the last logits per row"));
        }
        let started = Instant::now();
        let out = on_pool(|| {
            let mut out = match &self.implementation {
                Implementation::Llama(m) => m.forward(batch, cache, which, cancel),
                Implementation::Nanochat(m) => m.forward(batch, cache, which, cancel),
                #[cfg(feature = "cuda")]
                Implementation::LlamaCuda(m) => m.forward(batch, cache, which, cancel),
            }?;
            mask_rows(&mut out, constraints)?;
            let picked = (candidates > 0).then(|| candidates::top_per_row(&out.logits, out.vocab_size, candidates));
            Ok((out, picked))
        });
        // Time inside the engine, so a benchmark can tell it from the binding's and the caller's.
        self.stats().forward_nanos.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        out
    }

    /// Greedy decoding for `steps` passes without returning to the caller (vLLM's multi-step
    /// scheduling): the first pass feeds `batch`; each later one feeds every row that was given
    /// tokens its highest-logit token of the pass before. Returns each pass's `per_row` (≥ 1)
    /// highest logits per fed row. A decode step's hand-off to the caller and back costs about
    /// as much as a small model's pass spends outside its matmuls, so `steps` passes share one.
    /// On error or cancellation every row is rewound to where it was, as after a failed pass.
    pub fn forward_greedy_steps(
        &self,
        batch: &[Vec<u32>],
        cache: &mut KvCache,
        steps: usize,
        cancel: Option<&AtomicBool>,
        per_row: usize,
    ) -> Result<Vec<Candidates>> {
        if steps == 0 || per_row == 0 {
            return Err(Error::invalid("greedy steps need at least one step and one candidate per row"));
        }
        let before = cache.seqlens().to_vec();
        let mut fed = batch.to_vec();
        let mut passes = Vec::with_capacity(steps);
        let outcome = (0..steps).try_for_each(|_| {
            let (_, picked) = self.forward_picking(&fed, cache, LogitsFor::LastPerRow, cancel, per_row, &mut [])?;
            let picked = picked.ok_or_else(|| Error::invalid("greedy steps pick no candidates"))?;
            for (tokens, best) in fed.iter_mut().filter(|t| !t.is_empty()).zip(picked.ids.chunks(picked.per_row)) {
                *tokens = vec![best[0]];
            }
            passes.push(picked);
            Ok(())
        });
        match outcome {
            Ok(()) => Ok(passes),
            Err(e) => {
                for (row, &len) in before.iter().enumerate() {
                    if cache.seqlen(row) > len as usize {
                        cache.truncate_row(row, len as usize)?;
                    }
                }
                Err(e)
            }
        }
    }

    /// The cache-free reference path, `(len, vocab)` logits.
    pub fn forward_reference(&self, tokens: &[u32]) -> Result<Vec<f32>> {
        match &self.implementation {
            Implementation::Llama(m) => m.forward_reference(tokens),
            Implementation::Nanochat(m) => m.forward_reference(tokens),
            #[cfg(feature = "cuda")]
            Implementation::LlamaCuda(_) => Err(Error::unsupported("the reference path runs on the CPU; load the model with device 'cpu'")),
        }
    }

    pub fn stats(&self) -> &ModelStats {
        match &self.implementation {
            Implementation::Llama(m) => &m.stats,
            Implementation::Nanochat(m) => &m.stats,
            #[cfg(feature = "cuda")]
            Implementation::LlamaCuda(m) => &m.stats,
        }
    }

    /// "cpu" or "cuda".
    pub fn device(&self) -> &'static str {
        if self.on_gpu() {
            "cuda"
        } else {
            "cpu"
        }
    }

    fn on_gpu(&self) -> bool {
        #[cfg(feature = "cuda")]
        if matches!(self.implementation, Implementation::LlamaCuda(_)) {
            return true;
        }
        false
    }
}

/// Runs a whole pass as one job on the rayon pool. A pass has about five parallel regions per
/// layer; started from outside the pool, each one wakes the workers and puts the caller to sleep
/// until they finish (a futex round trip per region, 9% of a batch-8 decode step). Started on a
/// worker, a region is picked up by the other workers while they are still spinning for work.
fn on_pool<R: Send>(pass: impl FnOnce() -> R + Send) -> R {
    rayon::scope(|_| pass())
}

/// Masks each logits row whose cache row has a constraint.
fn mask_rows(out: &mut ForwardOutput, constraints: &mut [Option<&mut Constraint>]) -> Result<()> {
    if constraints.is_empty() {
        return Ok(());
    }
    let vocab = out.vocab_size;
    for (logits, &row) in out.logits.chunks_mut(vocab).zip(&out.rows) {
        if let Some(Some(constraint)) = constraints.get_mut(row as usize) {
            constraint.mask_logits(logits)?;
        }
    }
    Ok(())
}
