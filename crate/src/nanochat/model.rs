//! nanochat's GPT weights and the per-token maths both forward paths share (embedding, gates,
//! MLP, output head). Attention, RoPE and smear across positions differ between the cached
//! path (mod.rs) and the reference (reference.rs), so each writes its own.

use candle_core::{Device, Tensor, D};

use super::checkpoint::TensorMap;
use super::config::{NanochatConfig, LOGIT_SOFTCAP, ROPE_BASE, SMEAR_GATE_CHANNELS, VE_GATE_CHANNELS, VE_GATE_SCALE};
use crate::error::{Error, Result};
use crate::matmul::{MatmulOptions, RowRuns};
use crate::model::Linear;
use crate::weights::WeightSource;

/// Which matmul the projections run: our kernels, each row on its sequence's road (the cached
/// path), or candle's on the same weights (the reference).
#[derive(Clone, Copy)]
pub(super) enum Road<'a> {
    Kernels(&'a RowRuns),
    Reference,
}

impl Road<'_> {
    pub(super) fn project(self, linear: &Linear, x: &Tensor) -> Result<Tensor> {
        match self {
            Self::Kernels(runs) => linear.forward(x, runs),
            Self::Reference => linear.forward_reference(x),
        }
    }

    /// Several projections of the same input: on our kernels in one parallel region.
    fn project_all<const N: usize>(self, linears: [&Linear; N], x: &Tensor) -> Result<[Tensor; N]> {
        let Self::Kernels(runs) = self else { return try_map(linears, |l| self.project(l, x)) };
        let n = x.dim(0)?;
        try_map(Linear::forward_group(linears, x, runs)?, |y| {
            let width = y.len() / n.max(1);
            Ok(Tensor::from_vec(y, (n, width), x.device())?)
        })
    }
}

pub(super) struct Block {
    pub c_q: Linear,
    pub c_k: Linear,
    pub c_v: Linear,
    pub c_proj: Linear,
    /// With the layer's value-embedding table, on value-embedding layers only.
    pub value_embed: Option<(Linear, Tensor)>,
    pub c_fc: Linear,
    pub mlp_proj: Linear,
}

pub(super) struct Weights {
    pub wte: Tensor,
    pub lm_head: Linear,
    pub blocks: Vec<Block>,
    pub resid_lambdas: Vec<f32>,
    pub x0_lambdas: Vec<f32>,
    pub smear_gate: Linear,
    pub smear_lambda: f32,
    pub backout_lambda: f32,
}

/// `items.map(f)`, stopping at the first error.
fn try_map<T, U, const N: usize>(items: [T; N], f: impl FnMut(T) -> Result<U>) -> Result<[U; N]> {
    let out: Vec<U> = items.into_iter().map(f).collect::<Result<_>>()?;
    out.try_into().map_err(|_| Error::internal("a projection went missing"))
}

fn linear(src: &mut TensorMap, name: &str, out_dim: usize, in_dim: usize, options: MatmulOptions) -> Result<Linear> {
    Linear::new(src.load_checked(&format!("{name}.weight"), &[out_dim, in_dim])?, None, options)
}

fn scalar(src: &mut TensorMap, name: &str) -> Result<f32> {
    Ok(src.load_checked(name, &[1])?.into_dense()?.to_vec1::<f32>()?[0])
}

impl Weights {
    /// The projections run on our kernels as `options` says; the gates stay in f32 on candle's
    /// matmul (their 24 and 12 inputs are no whole block).
    pub fn load(src: &mut TensorMap, cfg: &NanochatConfig, options: MatmulOptions, progress: &mut dyn FnMut(f64)) -> Result<Self> {
        let exact = MatmulOptions { quantize: None, ..options };
        let c = &cfg.base;
        let (e, vp, kvd, layers) = (c.hidden_size, cfg.padded_vocab, c.kv_dim(), c.n_layers);
        let wte = src.load_checked("transformer.wte.weight", &[vp, e])?.into_dense()?;
        let mut blocks = Vec::with_capacity(layers);
        for i in 0..layers {
            let p = format!("transformer.h.{i}");
            let value_embed = if cfg.has_value_embeds(i) {
                let gate = linear(src, &format!("{p}.attn.ve_gate"), c.n_kv_heads, VE_GATE_CHANNELS, exact)?;
                Some((gate, src.load_checked(&format!("value_embeds.{i}.weight"), &[vp, kvd])?.into_dense()?))
            } else {
                None
            };
            blocks.push(Block {
                c_q: linear(src, &format!("{p}.attn.c_q"), c.q_dim(), e, options)?,
                c_k: linear(src, &format!("{p}.attn.c_k"), kvd, e, options)?,
                c_v: linear(src, &format!("{p}.attn.c_v"), kvd, e, options)?,
                c_proj: linear(src, &format!("{p}.attn.c_proj"), e, c.q_dim(), options)?,
                value_embed,
                c_fc: linear(src, &format!("{p}.mlp.c_fc"), 4 * e, e, options)?,
                mlp_proj: linear(src, &format!("{p}.mlp.c_proj"), e, 4 * e, options)?,
            });
            progress((i + 1) as f64 / (layers + 1) as f64);
        }
        let weights = Self {
            wte,
            lm_head: linear(src, "lm_head", vp, e, options)?,
            blocks,
            resid_lambdas: src.load_or("resid_lambdas", layers, 1.0)?,
            x0_lambdas: src.load_or("x0_lambdas", layers, 0.0)?,
            smear_gate: linear(src, "smear_gate", 1, SMEAR_GATE_CHANNELS, exact)?,
            smear_lambda: scalar(src, "smear_lambda")?,
            backout_lambda: scalar(src, "backout_lambda")?,
        };
        src.ensure_all_used(
            "this nanochat model, which follows upstream 92d63d4 (the checkpoint was written by another nanochat version)",
        )?;
        progress(1.0);
        Ok(weights)
    }

    /// `norm(wte[ids])`: the pre-smear embedding, `(N, C)`.
    pub fn embed(&self, ids: &[u32]) -> Result<Tensor> {
        norm(&self.wte.index_select(&Tensor::new(ids, &Device::Cpu)?, 0)?)
    }

    /// How much of the previous token's embedding each token takes in: `(N, 1)`.
    pub fn smear_gate(&self, x: &Tensor) -> Result<Tensor> {
        let gate =
            candle_nn::ops::sigmoid(&self.smear_gate.forward_reference(&x.narrow(D::Minus1, 0, SMEAR_GATE_CHANNELS)?.contiguous()?)?)?;
        Ok((gate * self.smear_lambda as f64)?)
    }

    /// The block's q, k, v for normed input `u` `(N, C)`; on value-embedding layers v gets the
    /// token's value embedding mixed in through a per-KV-head gate.
    pub fn qkv(&self, b: &Block, u: &Tensor, ids: &Tensor, n_kv_heads: usize, road: Road) -> Result<(Tensor, Tensor, Tensor)> {
        let [q, k, mut v] = road.project_all([&b.c_q, &b.c_k, &b.c_v], u)?;
        if let Some((gate, table)) = &b.value_embed {
            let n = u.dim(0)?;
            let ve = table.index_select(ids, 0)?.reshape((n, n_kv_heads, ()))?;
            let g = (candle_nn::ops::sigmoid(&road.project(gate, &u.narrow(D::Minus1, 0, VE_GATE_CHANNELS)?.contiguous()?)?)?
                * VE_GATE_SCALE as f64)?;
            v = (v.reshape((n, n_kv_heads, ()))? + ve.broadcast_mul(&g.unsqueeze(2)?)?)?.reshape((n, ()))?;
        }
        Ok((q, k, v))
    }

    /// `x + MLP(norm(x))` with ReLU².
    pub fn mlp(&self, b: &Block, x: &Tensor, road: Road) -> Result<Tensor> {
        let h = road.project(&b.c_fc, &norm(x)?)?.relu()?.sqr()?;
        Ok((x + road.project(&b.mlp_proj, &h)?)?)
    }

    /// Logits for the rows of `x`: back out the mid-layer residual, norm, project, drop the
    /// vocabulary padding, soft-cap. `(N, vocab)`.
    pub fn head(&self, x: &Tensor, x_backout: &Tensor, vocab: usize, road: Road) -> Result<Tensor> {
        let x = norm(&(x - (x_backout * self.backout_lambda as f64)?)?)?;
        let logits = road.project(&self.lm_head, &x)?.narrow(D::Minus1, 0, vocab)?;
        Ok(((logits / LOGIT_SOFTCAP as f64)?.tanh()? * LOGIT_SOFTCAP as f64)?)
    }

    /// The residual stream entering layer `i`: `resid_lambdas[i]·x + x0_lambdas[i]·x0`.
    pub fn mix(&self, i: usize, x: &Tensor, x0: &Tensor) -> Result<Tensor> {
        Ok(((x * self.resid_lambdas[i] as f64)? + (x0 * self.x0_lambdas[i] as f64)?)?)
    }
}

/// RMSNorm over the last dimension without a weight, eps as PyTorch's default for f32.
pub(super) fn norm(x: &Tensor) -> Result<Tensor> {
    let ms = (x.sqr()?.mean_keepdim(D::Minus1)? + f32::EPSILON as f64)?;
    Ok(x.broadcast_div(&ms.sqrt()?)?)
}

/// Upstream's RoPE frequencies, computed in f32 as it does.
pub(super) fn inv_freq(head_dim: usize) -> Vec<f32> {
    (0..head_dim / 2).map(|j| 1.0 / ROPE_BASE.powf((2 * j) as f32 / head_dim as f32)).collect()
}
