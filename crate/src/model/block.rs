//! One transformer layer's weights, shared by the CPU model and the CUDA one: the GGUF names and
//! shapes live here once, and each backend says only how it holds a linear layer and a norm.

use candle_core::Tensor;

use crate::config::ModelConfig;
use crate::error::Result;
use crate::weights::WeightSource;

pub struct Block<L> {
    pub attn_norm: Tensor,
    pub q: L,
    pub k: L,
    pub v: L,
    pub o: L,
    pub ffn_norm: Tensor,
    /// The gated MLP's gate; `None` for GPT-2's plain MLP (`BlockVariant::plain_mlp`).
    pub gate: Option<L>,
    pub up: L,
    pub down: L,
    /// Gemma 3's per-head query and key norms, over head_dim (`BlockVariant::qk_norm`).
    pub q_norm: Option<Tensor>,
    pub k_norm: Option<Tensor>,
    /// Gemma's norms of the attention and MLP outputs (`BlockVariant::post_norms`).
    pub post_attn_norm: Option<Tensor>,
    pub post_ffn_norm: Option<Tensor>,
    /// GPT-2's LayerNorm biases (`BlockVariant::layer_norm` with `biases`).
    pub attn_norm_bias: Option<Tensor>,
    pub ffn_norm_bias: Option<Tensor>,
}

/// How a backend loads one tensor of a layer: `linear(src, name, out, in, with_bias)` for the
/// projection whose weight is `{name}.weight`, `norm(src, name, dim)` for a norm weight `name`.
pub struct BlockLoader<'a, L> {
    pub linear: &'a mut LoadLinear<'a, L>,
    pub norm: &'a mut dyn FnMut(&mut dyn WeightSource, &str, usize) -> Result<Tensor>,
}

/// `(source, name, out, in, with_bias)` to the backend's projection.
pub type LoadLinear<'a, L> = dyn FnMut(&mut dyn WeightSource, &str, usize, usize, bool) -> Result<L> + 'a;

impl<L> Block<L> {
    pub fn load(src: &mut dyn WeightSource, cfg: &ModelConfig, layer: usize, with: &mut BlockLoader<'_, L>) -> Result<Self> {
        let p = format!("blk.{layer}");
        let (h, qd, kvd, ff) = (cfg.hidden_size, cfg.q_dim(), cfg.kv_dim(), cfg.intermediate_size);
        let all = cfg.variant.biases;
        let qkv_bias = all || cfg.architecture.has_qkv_bias();
        let mut linear =
            |src: &mut dyn WeightSource, n: &str, out: usize, inp: usize, b: bool| (with.linear)(src, &format!("{p}.{n}"), out, inp, b);
        let q = linear(src, "attn_q", qd, h, qkv_bias)?;
        let k = linear(src, "attn_k", kvd, h, qkv_bias)?;
        let v = linear(src, "attn_v", kvd, h, qkv_bias)?;
        let o = linear(src, "attn_output", h, qd, all)?;
        let gate = (!cfg.variant.plain_mlp).then(|| linear(src, "ffn_gate", ff, h, false)).transpose()?;
        let up = linear(src, "ffn_up", ff, h, all)?;
        let down = linear(src, "ffn_down", h, ff, all)?;
        let attn_norm = (with.norm)(src, &format!("{p}.attn_norm.weight"), h)?;
        let ffn_norm = (with.norm)(src, &format!("{p}.ffn_norm.weight"), h)?;
        let mut optional = |wanted: bool, name: &str, dim: usize| -> Result<Option<Tensor>> {
            wanted.then(|| (with.norm)(src, &format!("{p}.{name}"), dim)).transpose()
        };
        let (qk, post, norm_bias) = (cfg.variant.qk_norm, cfg.variant.post_norms, cfg.variant.layer_norm && all);
        Ok(Self {
            q_norm: optional(qk, "attn_q_norm.weight", cfg.head_dim)?,
            k_norm: optional(qk, "attn_k_norm.weight", cfg.head_dim)?,
            post_attn_norm: optional(post, "post_attention_norm.weight", h)?,
            post_ffn_norm: optional(post, "post_ffw_norm.weight", h)?,
            attn_norm_bias: optional(norm_bias, "attn_norm.bias", h)?,
            ffn_norm_bias: optional(norm_bias, "ffn_norm.bias", h)?,
            attn_norm,
            q,
            k,
            v,
            o,
            ffn_norm,
            gate,
            up,
            down,
        })
    }
}
