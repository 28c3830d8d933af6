//! The transformer (Llama / Qwen2 family) and its batched forward pass over the KV store.
//!
//! Weights are immutable after `load`; everything a forward pass mutates lives in the `KvCache`
//! the caller passes in, so one model serves any number of caches.

use std::sync::atomic::AtomicBool;

use candle_core::quantized::QMatMul;
use candle_core::{Module, Tensor};
use rayon::prelude::*;

use crate::attention::{self, AttentionShape};
use crate::config::{Activation, ModelConfig};
use crate::error::{Error, ErrorKind, Result};
use crate::forward::{check_cancel, PassPlan};
pub use crate::forward::{ForwardOutput, LogitsFor, ModelStats};
use crate::kv_cache::{KvCache, KvType};
use crate::matmul::{MatmulOptions, QuantMatrix, RowRuns};
use crate::rope::{Rope, RopeAngles};
use crate::weights::{Weight, WeightSource};

mod block;
mod reference;

pub use block::{Block, BlockLoader};

/// A projection. Block formats with a kernel of ours (`matmul`) run on it; candle's matmul on
/// the same weights is the reference path, and the fast path for every other format.
pub(crate) struct Linear {
    /// candle's matmul, where our kernels do not read the format; else `fast` holds the only
    /// copy of the weights (as 8-bit panels, or blocks candle would widen again), from which the
    /// reference path rebuilds it.
    weight: Option<QMatMul>,
    fast: Option<QuantMatrix>,
    bias: Option<Tensor>,
}

impl Linear {
    fn load(
        src: &mut dyn WeightSource,
        name: &str,
        out_dim: usize,
        in_dim: usize,
        with_bias: bool,
        options: MatmulOptions,
    ) -> Result<Self> {
        let weight = src.load_checked(&format!("{name}.weight"), &[out_dim, in_dim])?;
        let bias = if with_bias { Some(src.load_checked(&format!("{name}.bias"), &[out_dim])?.into_dense()?) } else { None };
        Self::new(weight, bias, options)
    }

    pub(crate) fn new(weight: Weight, bias: Option<Tensor>, options: MatmulOptions) -> Result<Self> {
        let weight = weight.quantized(options.quantize)?.for_kernels(options.activations)?;
        let fast = match &weight {
            Weight::Quantized(q) => QuantMatrix::new(q.clone(), options.activations),
            Weight::Dense(_) => None,
        };
        let weight = match &fast {
            Some(_) => None,
            None => Some(weight.into_matmul()?),
        };
        Ok(Self { weight, fast, bias })
    }

    pub(crate) fn forward(&self, x: &Tensor, runs: &RowRuns) -> Result<Tensor> {
        let Some(fast) = &self.fast else { return self.forward_reference(x) };
        let (m, _) = x.dims2()?;
        let y = QuantMatrix::forward_many(&[fast], &x.flatten_all()?.to_vec1::<f32>()?, runs)?.pop().unwrap_or_default();
        let y = Tensor::from_vec(y, (m, fast.out_features()), x.device())?;
        self.add_bias(y)
    }

    /// The same input through several projections, as flat `(m, out)` vectors; one parallel
    /// region for all of them when our kernels cover every one.
    pub(crate) fn forward_group<const N: usize>(linears: [&Linear; N], x: &Tensor, runs: &RowRuns) -> Result<[Vec<f32>; N]> {
        let fast: Option<Vec<&QuantMatrix>> = linears.iter().map(|l| l.fast.as_ref()).collect();
        let outs: Vec<Vec<f32>> = match fast {
            Some(matrices) => {
                let mut outs = QuantMatrix::forward_many(&matrices, &x.flatten_all()?.to_vec1::<f32>()?, runs)?;
                for (out, linear) in outs.iter_mut().zip(linears) {
                    if let Some(bias) = &linear.bias {
                        let bias = bias.to_vec1::<f32>()?;
                        out.chunks_exact_mut(bias.len()).for_each(|row| row.iter_mut().zip(&bias).for_each(|(y, b)| *y += b));
                    }
                }
                outs
            }
            None => linears.iter().map(|l| Ok(l.forward_reference(x)?.flatten_all()?.to_vec1::<f32>()?)).collect::<Result<_>>()?,
        };
        outs.try_into().map_err(|_| Error::new(ErrorKind::Internal, "projection count changed"))
    }

    /// candle's matmul, whatever the format.
    pub(crate) fn forward_reference(&self, x: &Tensor) -> Result<Tensor> {
        let y = match (&self.weight, &self.fast) {
            (Some(weight), _) => weight.forward(x)?,
            (None, Some(fast)) => QMatMul::from_arc(fast.file_tensor()?)?.forward(x)?,
            (None, None) => return Err(Error::new(ErrorKind::Internal, "a projection without weights")),
        };
        self.add_bias(y)
    }

    fn add_bias(&self, y: Tensor) -> Result<Tensor> {
        Ok(match &self.bias {
            Some(b) => y.broadcast_add(b)?,
            None => y,
        })
    }
}

/// The gated MLP's `act(gate) · up`, in place of `gate`; split over the pool, since a
/// 512-token prefill takes 0.8M exponentials per layer (7% of its time when they ran on one
/// thread with libm's `expf`; the polynomial vectorizes). Both activations are `x · σ(a(x))`:
/// SiLU with `a(x) = x`, and tanh-GELU, `x/2 · (1 + tanh(y))`, is `x · σ(2y)` with
/// `y = sqrt(2/π) (x + 0.044715 x³)`, so neither needs a tanh.
fn gated(activation: Activation, mut gate: Vec<f32>, up: &[f32]) -> Result<Vec<f32>> {
    const CHUNK: usize = 16 * 1024;
    /// Values whose exponentials are taken together, in a buffer that stays in L1.
    const RUN: usize = 1024;
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    if activation == Activation::GeluErf {
        // No gated model uses it; GPT-2's plain MLP takes candle's erf instead (`Model::mlp`).
        return Err(Error::unsupported("a gated MLP with erf GELU"));
    }
    let tanh_form = activation == Activation::GeluTanh;
    gate.par_chunks_mut(CHUNK).zip(up.par_chunks(CHUNK)).for_each(|(g, u)| {
        let mut buffer = [0.0f32; RUN];
        for (g, u) in g.chunks_mut(RUN).zip(u.chunks(RUN)) {
            let e = &mut buffer[..g.len()];
            if tanh_form {
                e.iter_mut().zip(&*g).for_each(|(e, &x)| *e = -(2.0 * SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x)));
            } else {
                e.iter_mut().zip(&*g).for_each(|(e, &x)| *e = -x);
            }
            crate::exp::exp_each(e);
            g.iter_mut().zip(u).zip(&*e).for_each(|((g, &u), &e)| *g = *g / (1.0 + e) * u);
        }
    });
    Ok(gate)
}

/// RMSNorm of each `width`-wide piece of `x` (Gemma 3's per-head query and key norms).
fn norm_pieces(x: Vec<f32>, weight: &Tensor, width: usize, eps: f32) -> Result<Vec<f32>> {
    let n = x.len() / width;
    let t = Tensor::from_vec(x, (n, width), weight.device())?;
    Ok(candle_nn::ops::rms_norm(&t, weight, eps)?.flatten_all()?.to_vec1::<f32>()?)
}

/// A sub-layer's output, through its post-norm where the block has one (Gemma).
fn post_norm(y: Tensor, norm: Option<&Tensor>, eps: f32) -> Result<Tensor> {
    Ok(match norm {
        Some(w) => candle_nn::ops::rms_norm(&y, w, eps)?,
        None => y,
    })
}

/// Per-pass bookkeeping shared by every layer.
struct Step {
    plan: PassPlan,
    angles: RopeAngles,
    /// The same positions rotated with the windowed layers' base, where it differs.
    local_angles: Option<RopeAngles>,
    /// Each row's sequence decides its matmul road (see `RowRuns`).
    runs: RowRuns,
}

pub struct Model {
    pub config: ModelConfig,
    embed: Weight,
    /// GPT-2's learned positions, `(context_length, hidden)`.
    position_embd: Option<Tensor>,
    blocks: Vec<Block<Linear>>,
    norm: Tensor,
    norm_bias: Option<Tensor>,
    lm_head: Linear,
    rope: Rope,
    /// Windowed layers' rotation, where their base differs (Gemma 3).
    local_rope: Option<Rope>,
    pub stats: ModelStats,
}

impl Model {
    /// Loads every tensor the config implies, reporting progress as a fraction in [0, 1].
    /// Q8_0/Q4_0 weights multiply `options.activations` (f32, or rounded to 8 bits as llama.cpp
    /// does); full-precision projections are first quantized to `options.quantize`, if given.
    pub fn load(src: &mut dyn WeightSource, config: ModelConfig, options: MatmulOptions, progress: &mut dyn FnMut(f64)) -> Result<Self> {
        let embed = src.load_checked("token_embd.weight", &[config.vocab_size, config.hidden_size])?.for_kernels(options.activations)?;
        let mut blocks = Vec::with_capacity(config.n_layers);
        let mut with = BlockLoader {
            linear: &mut |src, name, out, inp, bias| Linear::load(src, name, out, inp, bias, options),
            norm: &mut |src, name, dim| src.load_checked(name, &[dim])?.into_dense(),
        };
        for layer in 0..config.n_layers {
            blocks.push(Block::load(src, &config, layer, &mut with)?);
            progress((layer + 1) as f64 / (config.n_layers + 1) as f64);
        }
        let norm = src.load_checked("output_norm.weight", &[config.hidden_size])?.into_dense()?;
        let (v, h) = (&config.variant, config.hidden_size);
        let norm_bias = (v.layer_norm && v.biases).then(|| src.load_checked("output_norm.bias", &[h])?.into_dense()).transpose()?;
        let position_embd =
            v.learned_positions.then(|| src.load_checked("position_embd.weight", &[config.context_length, h])?.into_dense()).transpose()?;
        let lm_head = if src.contains("output.weight") {
            src.load_checked("output.weight", &[config.vocab_size, config.hidden_size])?
        } else {
            match &embed {
                Weight::Quantized(q) => Weight::Quantized(q.clone()),
                Weight::Dense(t) => Weight::Dense(t.clone()),
            }
        };
        let lm_head = Linear::new(lm_head, None, options)?;
        progress(1.0);
        let rope = Rope::new(&config);
        let local_rope = config.variant.local_rope_theta.map(|theta| Rope::with_base(&config, theta));
        Ok(Self { config, embed, position_embd, blocks, norm, norm_bias, lm_head, rope, local_rope, stats: ModelStats::default() })
    }

    /// A cache for this model with `batch` rows and room for `capacity` positions per row.
    pub fn new_cache(&self, batch: usize, capacity: usize, kv_type: KvType) -> Result<KvCache> {
        KvCache::new(&self.config, batch, capacity, kv_type)
    }

    /// Runs the new tokens of every row (an empty list skips that row) through the model,
    /// appending their K/V to the cache. Row lengths advance only if the whole pass succeeds, so
    /// an error or a cancellation leaves the cache as it was.
    pub fn forward(&self, batch: &[Vec<u32>], cache: &mut KvCache, which: LogitsFor, cancel: Option<&AtomicBool>) -> Result<ForwardOutput> {
        let step = self.plan(batch, cache)?;
        let n = step.plan.n_tokens();
        if n == 0 {
            return Ok(ForwardOutput::empty(self.config.vocab_size));
        }
        self.stats.count_pass(n);
        let mut x = self.embed(&step.plan.ids, || step.plan.slots.iter().map(|s| s.pos as u32).collect())?;
        for (layer, block) in self.blocks.iter().enumerate() {
            check_cancel(cancel)?;
            x = self.block_forward(block, layer, &x, &step, cache, cancel)?;
        }
        // Also after the last layer: a cancelled attention left its output incomplete.
        check_cancel(cancel)?;
        let (picked, rows) = step.plan.logit_positions(which);
        let x = if picked.len() == n { x } else { x.index_select(&Tensor::new(picked.as_slice(), x.device())?, 0)? };
        let x = self.normalize(&x, &self.norm, self.norm_bias.as_ref())?;
        // One picked row per sequence, or all of them: each keeps its sequence's road.
        let last_per_row;
        let runs = match which {
            LogitsFor::All => &step.runs,
            LogitsFor::LastPerRow => {
                last_per_row = RowRuns::for_sequences(picked.iter().map(|_| 1));
                &last_per_row
            }
        };
        let logits = self.lm_head.forward(&x, runs)?.flatten_all()?.to_vec1::<f32>()?;
        step.plan.commit(cache);
        Ok(ForwardOutput { logits, rows, vocab_size: self.config.vocab_size })
    }

    fn plan(&self, batch: &[Vec<u32>], cache: &mut KvCache) -> Result<Step> {
        let plan = PassPlan::new(batch, cache, &self.config)?;
        let positions = plan.positions();
        let angles = self.rope.angles(&positions);
        let local_angles = self.local_rope.as_ref().map(|r| r.angles(&positions));
        let runs = RowRuns::for_sequences(plan.spans.iter().map(|s| s.len));
        Ok(Step { plan, angles, local_angles, runs })
    }

    /// Token embeddings (scaled, for Gemma), plus the learned embedding of each position (GPT-2).
    /// `positions` is asked for only where the model has learned positions.
    fn embed(&self, ids: &[u32], positions: impl FnOnce() -> Vec<u32>) -> Result<Tensor> {
        let x = match &self.embed {
            Weight::Quantized(q) => q.embedding(&Tensor::new(ids, &candle_core::Device::Cpu)?)?,
            Weight::Dense(t) => t.index_select(&Tensor::new(ids, t.device())?, 0)?,
        };
        let x = match self.config.variant.embed_scale {
            Some(scale) => (x * scale as f64)?,
            None => x,
        };
        Ok(match &self.position_embd {
            Some(table) => (x + table.index_select(&Tensor::new(positions(), table.device())?, 0)?)?,
            None => x,
        })
    }

    /// The block's norm: RMSNorm, or GPT-2's LayerNorm with its bias where it has one.
    fn normalize(&self, x: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        let eps = self.config.rms_norm_eps;
        if !self.config.variant.layer_norm {
            return Ok(candle_nn::ops::rms_norm(x, weight, eps)?);
        }
        let zeros;
        let bias = match bias {
            Some(b) => b,
            None => {
                zeros = weight.zeros_like()?;
                &zeros
            }
        };
        Ok(candle_nn::ops::layer_norm(x, weight, bias, eps)?)
    }

    /// The MLP on normalised input `h`: the gated `down(act(gate) · up)`, or GPT-2's
    /// `down(act(up))`.
    fn mlp(&self, b: &Block<Linear>, h: &Tensor, runs: &RowRuns) -> Result<Tensor> {
        let (n, activation) = (h.dim(0)?, self.config.variant.activation);
        let Some(gate) = &b.gate else {
            let up = b.up.forward(h, runs)?;
            let act = match activation {
                Activation::Silu => candle_nn::ops::silu(&up)?,
                Activation::GeluTanh => up.gelu()?,
                Activation::GeluErf => up.gelu_erf()?,
            };
            return b.down.forward(&act, runs);
        };
        let [gate, up] = Linear::forward_group([gate, &b.up], h, runs)?;
        let mlp = Tensor::from_vec(gated(activation, gate, &up)?, (n, self.config.intermediate_size), h.device())?;
        b.down.forward(&mlp, runs)
    }

    /// The rotation of layer `layer`: windowed layers take the local base where there is one.
    fn rope_for<'a>(&'a self, layer: usize, step: &'a Step) -> (&'a Rope, &'a RopeAngles) {
        match (self.config.variant.window(layer), &self.local_rope, &step.local_angles) {
            (Some(_), Some(rope), Some(angles)) => (rope, angles),
            _ => (&self.rope, &step.angles),
        }
    }

    fn block_forward(
        &self,
        b: &Block<Linear>,
        layer: usize,
        x: &Tensor,
        step: &Step,
        cache: &mut KvCache,
        cancel: Option<&AtomicBool>,
    ) -> Result<Tensor> {
        let cfg = &self.config;
        let h = self.normalize(x, &b.attn_norm, b.attn_norm_bias.as_ref())?;
        let [mut q, mut k, v] = Linear::forward_group([&b.q, &b.k, &b.v], &h, &step.runs)?;
        if let (Some(qn), Some(kn)) = (&b.q_norm, &b.k_norm) {
            q = norm_pieces(q, qn, cfg.head_dim, cfg.rms_norm_eps)?;
            k = norm_pieces(k, kn, cfg.head_dim, cfg.rms_norm_eps)?;
        }
        if !cfg.variant.learned_positions {
            let (rope, angles) = self.rope_for(layer, step);
            rope.apply(&mut q, cfg.n_heads, angles);
            rope.apply(&mut k, cfg.n_kv_heads, angles);
        }
        if let Some(s) = cfg.variant.query_scale {
            q.iter_mut().for_each(|x| *x *= s);
        }
        step.plan.write_kv(cache, layer, &k, &v, cfg.kv_dim());
        let shape =
            AttentionShape { n_heads: cfg.n_heads, n_kv_heads: cfg.n_kv_heads, head_dim: cfg.head_dim, window: cfg.variant.window(layer) };
        let attn = attention::attend(cache, layer, &step.plan.slots, &q, &shape, cancel);
        let attn = Tensor::from_vec(attn, (step.plan.n_tokens(), cfg.q_dim()), x.device())?;
        let x = (x + post_norm(b.o.forward(&attn, &step.runs)?, b.post_attn_norm.as_ref(), cfg.rms_norm_eps)?)?;
        let h = self.normalize(&x, &b.ffn_norm, b.ffn_norm_bias.as_ref())?;
        let mlp = self.mlp(b, &h, &step.runs)?;
        Ok((x + post_norm(mlp, b.post_ffn_norm.as_ref(), cfg.rms_norm_eps)?)?)
    }
}
