//! nanochat's GPT weights and the per-token maths both forward paths share (embedding, gates,
//! MLP, output head). Attention, RoPE and smear across positions differ between the cached
//! path (mod.rs) and the reference (reference.rs), so each writes its own.

use candle_core::{Device, Module, Tensor, D};
use candle_nn::Linear;

use super::checkpoint::TensorMap;
use super::config::{NanochatConfig, LOGIT_SOFTCAP, ROPE_BASE, SMEAR_GATE_CHANNELS, VE_GATE_CHANNELS, VE_GATE_SCALE};
use crate::error::Result;
use crate::weights::WeightSource;

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

fn linear(src: &mut TensorMap, name: &str, out_dim: usize, in_dim: usize) -> Result<Linear> {
    Ok(Linear::new(src.load_checked(&format!("{name}.weight"), &[out_dim, in_dim])?.into_dense()?, None))
}

fn scalar(src: &mut TensorMap, name: &str) -> Result<f32> {
    Ok(src.load_checked(name, &[1])?.into_dense()?.to_vec1::<f32>()?[0])
}

impl Weights {
    pub fn load(src: &mut TensorMap, cfg: &NanochatConfig, progress: &mut dyn FnMut(f64)) -> Result<Self> {
        let c = &cfg.base;
        let (e, vp, kvd, layers) = (c.hidden_size, cfg.padded_vocab, c.kv_dim(), c.n_layers);
        let wte = src.load_checked("transformer.wte.weight", &[vp, e])?.into_dense()?;
        let mut blocks = Vec::with_capacity(layers);
        for i in 0..layers {
            let p = format!("transformer.h.{i}");
            let value_embed = if cfg.has_value_embeds(i) {
                let gate = linear(src, &format!("{p}.attn.ve_gate"), c.n_kv_heads, VE_GATE_CHANNELS)?;
                Some((gate, src.load_checked(&format!("value_embeds.{i}.weight"), &[vp, kvd])?.into_dense()?))
            } else {
                None
            };
            blocks.push(Block {
                c_q: linear(src, &format!("{p}.attn.c_q"), c.q_dim(), e)?,
                c_k: linear(src, &format!("{p}.attn.c_k"), kvd, e)?,
                c_v: linear(src, &format!("{p}.attn.c_v"), kvd, e)?,
                c_proj: linear(src, &format!("{p}.attn.c_proj"), e, c.q_dim())?,
                value_embed,
                c_fc: linear(src, &format!("{p}.mlp.c_fc"), 4 * e, e)?,
                mlp_proj: linear(src, &format!("{p}.mlp.c_proj"), e, 4 * e)?,
            });
            progress((i + 1) as f64 / (layers + 1) as f64);
        }
        let weights = Self {
            wte,
            lm_head: linear(src, "lm_head", vp, e)?,
            blocks,
            resid_lambdas: src.load_or("resid_lambdas", layers, 1.0)?,
            x0_lambdas: src.load_or("x0_lambdas", layers, 0.0)?,
            smear_gate: linear(src, "smear_gate", 1, SMEAR_GATE_CHANNELS)?,
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
        let gate = candle_nn::ops::sigmoid(&self.smear_gate.forward(&x.narrow(D::Minus1, 0, SMEAR_GATE_CHANNELS)?)?)?;
        Ok((gate * self.smear_lambda as f64)?)
    }

    /// The block's q, k, v for normed input `u` `(N, C)`; on value-embedding layers v gets the
    /// token's value embedding mixed in through a per-KV-head gate.
    pub fn qkv(&self, b: &Block, u: &Tensor, ids: &Tensor, n_kv_heads: usize) -> Result<(Tensor, Tensor, Tensor)> {
        let (q, k, mut v) = (b.c_q.forward(u)?, b.c_k.forward(u)?, b.c_v.forward(u)?);
        if let Some((gate, table)) = &b.value_embed {
            let n = u.dim(0)?;
            let ve = table.index_select(ids, 0)?.reshape((n, n_kv_heads, ()))?;
            let g = (candle_nn::ops::sigmoid(&gate.forward(&u.narrow(D::Minus1, 0, VE_GATE_CHANNELS)?)?)? * VE_GATE_SCALE as f64)?;
            v = (v.reshape((n, n_kv_heads, ()))? + ve.broadcast_mul(&g.unsqueeze(2)?)?)?.reshape((n, ()))?;
        }
        Ok((q, k, v))
    }

    /// `x + MLP(norm(x))` with ReLU².
    pub fn mlp(&self, b: &Block, x: &Tensor) -> Result<Tensor> {
        let h = b.c_fc.forward(&norm(x)?)?.relu()?.sqr()?;
        Ok((x + b.mlp_proj.forward(&h)?)?)
    }

    /// Logits for the rows of `x`: back out the mid-layer residual, norm, project, drop the
    /// vocabulary padding, soft-cap. `(N, vocab)`.
    pub fn head(&self, x: &Tensor, x_backout: &Tensor, vocab: usize) -> Result<Tensor> {
        let x = norm(&(x - (x_backout * self.backout_lambda as f64)?)?)?;
        let logits = self.lm_head.forward(&x)?.narrow(D::Minus1, 0, vocab)?;
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
