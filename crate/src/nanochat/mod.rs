//! karpathy/nanochat's GPT (upstream HEAD 92d63d4) over our KV store: untied embeddings,
//! weightless RMSNorm, RoPE by −θ, QK norm, ReLU² MLP, GQA, gated value embeddings on
//! alternating layers, smear, backout, per-layer residual/x0 lambdas, soft-capped logits and
//! per-layer sliding windows.
//!
//! Unlike upstream, rows are independent and may continue from any length: a chunk appended to
//! a non-empty row smears its first token with the row's last token (upstream skips that), so
//! chunked prefill equals one prefill. The row's token ids, kept in the cache, supply it.

pub mod checkpoint;
pub mod config;
mod model;
pub mod pickle;
mod reference;
pub mod render;
pub mod tiktoken;

use std::sync::atomic::AtomicBool;

use candle_core::{Device, Tensor};

use crate::attention::{self, AttentionShape};
use crate::error::{Error, Result};
use crate::forward::{check_cancel, ForwardOutput, LogitsFor, ModelStats, PassPlan};
use crate::kv_cache::{KvCache, KvType};
use crate::matmul::{MatmulOptions, RowRuns};
use checkpoint::TensorMap;
use config::{NanochatConfig, QK_SCALE};
use model::{norm, Road, Weights};

pub struct NanochatModel {
    pub config: NanochatConfig,
    weights: Weights,
    inv_freq: Vec<f32>,
    pub stats: ModelStats,
}

impl NanochatModel {
    pub fn load(src: &mut TensorMap, config: NanochatConfig, options: MatmulOptions, progress: &mut dyn FnMut(f64)) -> Result<Self> {
        let weights = Weights::load(src, &config, options, progress)?;
        let inv_freq = model::inv_freq(config.base.head_dim);
        Ok(Self { config, weights, inv_freq, stats: ModelStats::default() })
    }

    /// A cache that keeps each row's token ids, which smear reads.
    pub fn new_cache(&self, batch: usize, capacity: usize, kv_type: KvType) -> Result<KvCache> {
        Ok(KvCache::new(&self.config.base, batch, capacity, kv_type)?.recording_tokens())
    }

    /// Same contract as `Model::forward`: new tokens per row (empty skips the row), lengths and
    /// token ids committed to the cache only when the whole pass succeeds.
    pub fn forward(&self, batch: &[Vec<u32>], cache: &mut KvCache, which: LogitsFor, cancel: Option<&AtomicBool>) -> Result<ForwardOutput> {
        let vocab_size = self.config.base.vocab_size;
        let step = self.plan(batch, cache)?;
        let n = step.n_tokens();
        if n == 0 {
            return Ok(ForwardOutput::empty(vocab_size));
        }
        self.stats.count_pass(n);
        let ids = &step.ids;
        let ids_t = Tensor::new(ids.as_slice(), &Device::Cpu)?;
        let runs = RowRuns::for_sequences(step.spans.iter().map(|s| s.len));
        let x0 = self.smeared_embedding(ids, &step, cache)?;
        let mut x = x0.clone();
        let mut x_backout = None;
        for i in 0..self.config.base.n_layers {
            check_cancel(cancel)?;
            x = self.layer(i, &self.weights.mix(i, &x, &x0)?, &ids_t, (&step, &runs), cache, cancel)?;
            if i == self.config.backout_layer {
                x_backout = Some(x.clone());
            }
        }
        check_cancel(cancel)?;
        let (picked, rows) = step.logit_positions(which);
        let picked = Tensor::new(picked.as_slice(), &Device::Cpu)?;
        let x_backout = x_backout.ok_or_else(|| Error::internal("backout layer out of range"))?;
        // One row per picked position, each its own sequence, as the Llama model's head.
        let head_runs = RowRuns::for_sequences(rows.iter().map(|_| 1));
        let logits =
            self.weights.head(&x.index_select(&picked, 0)?, &x_backout.index_select(&picked, 0)?, vocab_size, Road::Kernels(&head_runs))?;
        let logits = logits.flatten_all()?.to_vec1::<f32>()?;
        for span in &step.spans {
            cache.record(span.row, &ids[span.of(1)]);
        }
        step.commit(cache);
        Ok(ForwardOutput { logits, rows, vocab_size })
    }

    /// The shared checks, and nanochat's own: the cache spans its RoPE table, and every row holds
    /// the token ids smear reads.
    fn plan(&self, batch: &[Vec<u32>], cache: &mut KvCache) -> Result<PassPlan> {
        if cache.max_len() != self.config.base.context_length {
            return Err(Error::invalid("this cache was created for a different model"));
        }
        let plan = PassPlan::new(batch, cache, &self.config.base)?;
        if cache.history(0).is_none() {
            return Err(Error::invalid("this cache does not keep token ids: create it with this nanochat model's createCache"));
        }
        if let Some(span) = plan.spans.iter().find(|s| cache.history(s.row).map(<[u32]>::len) != Some(s.before)) {
            return Err(Error::invalid(format!(
                "row {} of this cache was filled without its token ids (by another model?); reset the row",
                span.row
            )));
        }
        Ok(plan)
    }

    /// `norm(wte[id])` plus, for every token with a predecessor in its row (earlier in this
    /// chunk or the last cached token), the gated pre-smear embedding of that predecessor.
    fn smeared_embedding(&self, ids: &[u32], step: &PassPlan, cache: &KvCache) -> Result<Tensor> {
        let n = ids.len();
        let (mut prev, mut has_prev) = (ids.to_vec(), vec![0f32; n]);
        for span in &step.spans {
            for i in span.of(1) {
                let p = if i > span.start {
                    Some(ids[i - 1])
                } else {
                    span.before.checked_sub(1).and_then(|b| cache.history(span.row)?.get(b).copied())
                };
                if let Some(p) = p {
                    (prev[i], has_prev[i]) = (p, 1.0);
                }
            }
        }
        let x = self.weights.embed(ids)?;
        let gate = (self.weights.smear_gate(&x)? * Tensor::from_vec(has_prev, (n, 1), &Device::Cpu)?)?;
        Ok((&x + self.weights.embed(&prev)?.broadcast_mul(&gate)?)?)
    }

    fn layer(
        &self,
        i: usize,
        x: &Tensor,
        ids: &Tensor,
        (step, runs): (&PassPlan, &RowRuns),
        cache: &mut KvCache,
        cancel: Option<&AtomicBool>,
    ) -> Result<Tensor> {
        let cfg = &self.config.base;
        let b = &self.weights.blocks[i];
        let road = Road::Kernels(runs);
        let (q, k, v) = self.weights.qkv(b, &norm(x)?, ids, cfg.n_kv_heads, road)?;
        let mut q = q.flatten_all()?.to_vec1::<f32>()?;
        let mut k = k.flatten_all()?.to_vec1::<f32>()?;
        let v = v.flatten_all()?.to_vec1::<f32>()?;
        let positions = step.positions();
        self.rope_and_norm(&mut q, &positions);
        self.rope_and_norm(&mut k, &positions);
        step.write_kv(cache, i, &k, &v, cfg.kv_dim());
        let shape = AttentionShape {
            n_heads: cfg.n_heads,
            n_kv_heads: cfg.n_kv_heads,
            head_dim: cfg.head_dim,
            window: Some(self.config.windows[i]),
        };
        let y = attention::attend(cache, i, &step.slots, &q, &shape, cancel);
        let y = Tensor::from_vec(y, (step.n_tokens(), cfg.q_dim()), &Device::Cpu)?;
        let x = (x + road.project(&b.c_proj, &y)?)?;
        self.weights.mlp(b, &x, road)
    }

    /// In place on `(N, heads, D)`: upstream's half-split RoPE, which rotates by −θ
    /// (`y1 = x1·cos + x2·sin`, `y2 = −x1·sin + x2·cos`), then RMSNorm per head and the 1.2 scale.
    fn rope_and_norm(&self, x: &mut [f32], positions: &[usize]) {
        let half = self.inv_freq.len();
        let head_dim = 2 * half;
        let per_token = x.len() / positions.len().max(1);
        for (token, &pos) in x.chunks_exact_mut(per_token).zip(positions) {
            let angles: Vec<(f32, f32)> = self.inv_freq.iter().map(|&f| (pos as f32 * f).sin_cos()).collect();
            for head in token.chunks_exact_mut(head_dim) {
                let (lo, hi) = head.split_at_mut(half);
                for (j, &(s, c)) in angles.iter().enumerate() {
                    let (a, b) = (lo[j], hi[j]);
                    lo[j] = a * c + b * s;
                    hi[j] = b * c - a * s;
                }
                let ms = head.iter().map(|v| v * v).sum::<f32>() / head_dim as f32;
                let scale = QK_SCALE / (ms + f32::EPSILON).sqrt();
                head.iter_mut().for_each(|v| *v *= scale);
            }
        }
    }
}
