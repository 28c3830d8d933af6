//! The cache-free reference forward: the whole sequence as tensor ops, written the way upstream
//! writes its training forward (smear by slicing, candle's RoPE kernel, an explicit causal
//! window mask, GQA heads repeated). It shares only the weights and per-token maths with the
//! cached path, so the equivalence tests compare two implementations of the attention side.

use candle_core::{DType, Device, Tensor, D};

use super::config::QK_SCALE;
use super::model::{norm, Road};
use super::NanochatModel;
use crate::error::{Error, Result};

impl NanochatModel {
    /// Logits for every position of `tokens`, `(len, vocab)` row-major, from scratch.
    pub fn forward_reference(&self, tokens: &[u32]) -> Result<Vec<f32>> {
        let t = tokens.len();
        if t == 0 || t > self.config.base.context_length {
            return Err(Error::invalid("reference forward needs 1..=context_length tokens"));
        }
        let w = &self.weights;
        let ids = Tensor::new(tokens, &Device::Cpu)?;
        let x = w.embed(tokens)?;
        let x0 = if t > 1 {
            let rest = x.narrow(0, 1, t - 1)?;
            let smeared = (&rest + x.narrow(0, 0, t - 1)?.broadcast_mul(&w.smear_gate(&rest)?)?)?;
            Tensor::cat(&[&x.narrow(0, 0, 1)?, &smeared], 0)?
        } else {
            x
        };
        let (cos, sin) = self.rope_tables(t)?;
        let mut x = x0.clone();
        let mut x_backout = None;
        for i in 0..self.config.base.n_layers {
            let mixed = w.mix(i, &x, &x0)?;
            x = self.reference_layer(i, &mixed, &ids, &cos, &sin)?;
            if i == self.config.backout_layer {
                x_backout = Some(x.clone());
            }
        }
        let x_backout = x_backout.ok_or_else(|| Error::internal("backout layer out of range"))?;
        Ok(w.head(&x, &x_backout, self.config.base.vocab_size, Road::Reference)?.flatten_all()?.to_vec1::<f32>()?)
    }

    /// cos and −sin, `(T, D/2)`: candle's half-split kernel rotates by +θ, upstream by −θ.
    fn rope_tables(&self, t: usize) -> Result<(Tensor, Tensor)> {
        let half = self.inv_freq.len();
        let inv = Tensor::from_vec(self.inv_freq.clone(), (1, half), &Device::Cpu)?;
        let pos = Tensor::arange(0u32, t as u32, &Device::Cpu)?.to_dtype(DType::F32)?.reshape((t, 1))?;
        let angles = pos.broadcast_mul(&inv)?;
        Ok((angles.cos()?, angles.sin()?.neg()?))
    }

    fn reference_layer(&self, i: usize, x: &Tensor, ids: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        let cfg = &self.config.base;
        let (t, d) = (x.dim(0)?, cfg.head_dim);
        let b = &self.weights.blocks[i];
        let (q, k, v) = self.weights.qkv(b, &norm(x)?, ids, cfg.n_kv_heads, Road::Reference)?;
        let heads = |y: Tensor, n: usize| -> Result<Tensor> { Ok(y.reshape((1, t, n, d))?.transpose(1, 2)?.contiguous()?) };
        let rope_norm = |y: Tensor| -> Result<Tensor> { Ok((norm(&candle_nn::rotary_emb::rope(&y, cos, sin)?)? * QK_SCALE as f64)?) };
        let q = rope_norm(heads(q, cfg.n_heads)?)?;
        let k = rope_norm(heads(k, cfg.n_kv_heads)?)?;
        let v = heads(v, cfg.n_kv_heads)?;
        let group = cfg.n_heads / cfg.n_kv_heads;
        let repeat = |y: Tensor| -> Result<Tensor> { Ok(Tensor::cat(&vec![&y; group], 2)?.reshape((1, cfg.n_heads, t, d))?) };
        let (k, v) = (repeat(k)?, repeat(v)?);
        let window = self.config.windows[i];
        let mask: Vec<f32> = (0..t * t).map(|n| if n % t > n / t || n / t - n % t > window { f32::NEG_INFINITY } else { 0.0 }).collect();
        let mask = Tensor::from_vec(mask, (t, t), &Device::Cpu)?;
        let scores = (q.matmul(&k.t()?)? / (d as f64).sqrt())?.broadcast_add(&mask)?;
        let y = candle_nn::ops::softmax(&scores, D::Minus1)?.matmul(&v)?.transpose(1, 2)?.reshape((t, cfg.q_dim()))?;
        let x = (x + Road::Reference.project(&b.c_proj, &y)?)?;
        self.weights.mlp(b, &x, Road::Reference)
    }
}
