//! The slow reference path: the whole sequence through the model with no KV store, textbook
//! attention from tensor ops (explicit causal mask, GQA heads repeated, candle's own RoPE
//! kernels). It shares only the weights with the fast path, so the equivalence tests compare two
//! independent implementations of the same maths.

use candle_core::{DType, Device, Tensor, D};

use super::{Block, Linear, Model};
use crate::config::{Activation, RopeStyle};
use crate::error::{Error, Result};

impl Model {
    /// Logits for every position of `tokens`, `(len, vocab)` row-major, computed from scratch.
    pub fn forward_reference(&self, tokens: &[u32]) -> Result<Vec<f32>> {
        if tokens.is_empty() || tokens.len() > self.config.context_length {
            return Err(Error::invalid("reference forward needs 1..=context_length tokens"));
        }
        let global = self.reference_rope_tables(tokens.len(), self.config.rope_theta)?;
        let local = match self.config.variant.local_rope_theta {
            Some(theta) => self.reference_rope_tables(tokens.len(), theta)?,
            None => global.clone(),
        };
        let mut x = self.embed(tokens, || (0..tokens.len() as u32).collect())?;
        for (layer, block) in self.blocks.iter().enumerate() {
            let window = self.config.variant.window(layer);
            let (cos, sin) = if window.is_some() { &local } else { &global };
            x = self.reference_block(block, &x, cos, sin, window)?;
        }
        let x = self.reference_norm(&x, &self.norm, self.norm_bias.as_ref())?;
        let logits = self.lm_head.forward_reference(&x)?;
        Ok(logits.flatten_all()?.to_vec1::<f32>()?)
    }

    fn reference_rope_tables(&self, len: usize, theta: f32) -> Result<(Tensor, Tensor)> {
        let cfg = &self.config;
        let half = cfg.head_dim / 2;
        let inv: Vec<f32> = (0..half)
            .map(|i| {
                let f = 1.0 / (theta as f64).powf((2 * i) as f64 / cfg.head_dim as f64);
                (f / cfg.rope_freq_factors.get(i).copied().unwrap_or(1.0) as f64) as f32
            })
            .collect();
        let inv = Tensor::from_vec(inv, (1, half), &Device::Cpu)?;
        let pos = Tensor::arange(0u32, len as u32, &Device::Cpu)?.to_dtype(DType::F32)?.reshape((len, 1))?;
        let angles = pos.broadcast_mul(&inv)?;
        Ok((angles.cos()?, angles.sin()?))
    }

    /// RMSNorm, or candle's unfused LayerNorm (a zero bias where the model has none).
    fn reference_norm(&self, x: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        let eps = self.config.rms_norm_eps;
        if !self.config.variant.layer_norm {
            return Ok(candle_nn::ops::rms_norm(x, weight, eps)?);
        }
        let bias = match bias {
            Some(b) => b.clone(),
            None => weight.zeros_like()?,
        };
        Ok(candle_nn::ops::layer_norm_slow(x, weight, &bias, eps)?)
    }

    fn reference_block(&self, b: &Block<Linear>, x: &Tensor, cos: &Tensor, sin: &Tensor, window: Option<usize>) -> Result<Tensor> {
        let cfg = &self.config;
        let t = x.dim(0)?;
        let heads = |y: Tensor, n: usize| -> Result<Tensor> { Ok(y.reshape((1, t, n, cfg.head_dim))?.transpose(1, 2)?.contiguous()?) };
        let rope = |y: &Tensor| -> Result<Tensor> {
            Ok(match cfg.rope_style {
                _ if cfg.variant.learned_positions => y.clone(),
                RopeStyle::Interleaved => candle_nn::rotary_emb::rope_i(y, cos, sin)?,
                RopeStyle::HalfSplit => candle_nn::rotary_emb::rope(y, cos, sin)?,
            })
        };
        let eps = cfg.rms_norm_eps;
        // Gemma 3's per-head norms sit between the projection and the rotation.
        let head_norm = |y: Tensor, w: &Option<Tensor>| -> Result<Tensor> {
            Ok(match w {
                Some(w) => candle_nn::ops::rms_norm(&y, w, eps)?,
                None => y,
            })
        };
        let post_norm = |y: Tensor, w: &Option<Tensor>| head_norm(y, w);
        let h = self.reference_norm(x, &b.attn_norm, b.attn_norm_bias.as_ref())?;
        let q = rope(&head_norm(heads(b.q.forward_reference(&h)?, cfg.n_heads)?, &b.q_norm)?)?;
        let q = (q * cfg.variant.query_scale.unwrap_or(1.0) as f64)?;
        let k = rope(&head_norm(heads(b.k.forward_reference(&h)?, cfg.n_kv_heads)?, &b.k_norm)?)?;
        let v = heads(b.v.forward_reference(&h)?, cfg.n_kv_heads)?;
        let group = cfg.n_heads / cfg.n_kv_heads;
        let repeat = |y: Tensor| -> Result<Tensor> { Ok(Tensor::cat(&vec![&y; group], 2)?.reshape((1, cfg.n_heads, t, cfg.head_dim))?) };
        let (k, v) = (repeat(k)?, repeat(v)?);
        let scores = (q.matmul(&k.t()?)? / (cfg.head_dim as f64).sqrt())?;
        // Query i sees keys j with i - window <= j <= i.
        let hidden = |i: usize, j: usize| j > i || window.is_some_and(|w| i - j > w);
        let mask: Vec<f32> = (0..t * t).map(|n| if hidden(n / t, n % t) { f32::NEG_INFINITY } else { 0.0 }).collect();
        let mask = Tensor::from_vec(mask, (t, t), &Device::Cpu)?;
        let probs = candle_nn::ops::softmax(&scores.broadcast_add(&mask)?, D::Minus1)?;
        let attn = probs.matmul(&v)?.transpose(1, 2)?.reshape((t, cfg.q_dim()))?;
        let x = (x + post_norm(b.o.forward_reference(&attn)?, &b.post_attn_norm)?)?;
        let h = self.reference_norm(&x, &b.ffn_norm, b.ffn_norm_bias.as_ref())?;
        // candle's `gelu` is the tanh approximation, Gemma's `gelu_pytorch_tanh`.
        let act = |y: Tensor| -> Result<Tensor> {
            Ok(match cfg.variant.activation {
                Activation::Silu => candle_nn::ops::silu(&y)?,
                Activation::GeluTanh => y.gelu()?,
                Activation::GeluErf => y.gelu_erf()?,
            })
        };
        let up = b.up.forward_reference(&h)?;
        let mlp = match &b.gate {
            Some(gate) => (act(gate.forward_reference(&h)?)? * up)?,
            None => act(up)?,
        };
        Ok((x + post_norm(b.down.forward_reference(&mlp)?, &b.post_ffn_norm)?)?)
    }
}
