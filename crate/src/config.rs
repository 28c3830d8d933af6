//! Model hyper-parameters. Each file format has its own spelling (GGUF metadata keys, Hugging
//! Face `config.json`); both are resolved into one `ModelConfig` the runtime reads.

use serde::Deserialize;

use crate::error::{Error, Result};

/// Upper bounds far above any real model, so a corrupted file cannot make later arithmetic
/// overflow or request absurd allocations.
pub const MAX_VOCAB: usize = 1 << 22;
pub const MAX_WIDTH: usize = 1 << 16;
pub const MAX_CONTEXT: usize = 1 << 22;

/// How RoPE pairs up the dimensions of a head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeStyle {
    /// Pairs (2i, 2i+1): GGUF Llama, whose Q/K rows were permuted by the converter.
    Interleaved,
    /// Pairs (i, i + d/2): Hugging Face checkpoints and GGUF Qwen2 (NeoX style).
    HalfSplit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    Llama,
    Qwen2,
    /// Qwen3 dense models: Qwen2's block without the QKV bias, with per-head query and key norms.
    Qwen3,
    /// Microsoft's Phi-3: Llama's block with fused QKV and gate/up matrices (`unfused.rs`),
    /// loaded from GGUF only.
    Phi3,
    /// karpathy/nanochat's GPT (crate::nanochat), loaded from its own checkpoint format only.
    Nanochat,
    /// Google's Gemma 3 text models: the Llama block with the departures in `BlockVariant`,
    /// loaded from GGUF only (its metadata holds the sliding window the variant needs).
    Gemma3,
    /// OpenAI's GPT-2 and karpathy/nanoGPT's GPT: learned positions, LayerNorm, biased
    /// projections and a plain GELU MLP (`BlockVariant::gpt2`), from GGUF or a nanoGPT `ckpt.pt`.
    Gpt2,
}

impl Architecture {
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "llama" | "LlamaForCausalLM" | "mistral" | "MistralForCausalLM" => Ok(Self::Llama),
            "qwen2" | "Qwen2ForCausalLM" => Ok(Self::Qwen2),
            "qwen3" | "Qwen3ForCausalLM" => Ok(Self::Qwen3),
            "phi3" | "Phi3ForCausalLM" => Ok(Self::Phi3),
            "gemma3" => Ok(Self::Gemma3),
            "gpt2" | "GPT2LMHeadModel" => Ok(Self::Gpt2),
            other => Err(Error::unsupported(format!(
                "unsupported model architecture '{other}': kvengine runs Llama-family \
                 (SmolLM2, TinyLlama, Llama 3.x), Qwen2/2.5, Qwen3, Phi-3 (GGUF), Gemma 3 (GGUF) and GPT-2 \
                 (GGUF or nanoGPT ckpt.pt) models"
            ))),
        }
    }
    pub fn has_qkv_bias(self) -> bool {
        self == Self::Qwen2
    }
}

/// The gated MLP's activation: `act(gate) · up`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Activation {
    /// SwiGLU (Llama, Qwen2).
    #[default]
    Silu,
    /// GELU in its tanh approximation (Gemma's GeGLU, `gelu_pytorch_tanh`; GPT-2's `gelu_new`,
    /// which llama.cpp also applies).
    GeluTanh,
    /// GELU exactly, through erf: PyTorch's `nn.GELU()`, which nanoGPT's MLP uses.
    GeluErf,
}

/// Where a family's layer departs from Llama's. Llama and Qwen2 take the default; the same
/// block code reads these options instead of being copied per architecture.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BlockVariant {
    /// Gemma scales the token embeddings by sqrt(hidden_size) before the first layer.
    pub embed_scale: Option<f32>,
    /// Gemma 3 and Qwen3 RMS-normalise each query and key head (`attn_q_norm`, `attn_k_norm`)
    /// before RoPE.
    pub qk_norm: bool,
    /// Gemma normalises each sub-layer's output (`post_attention_norm`, `post_ffw_norm`) before
    /// adding it to the residual stream.
    pub post_norms: bool,
    pub activation: Activation,
    /// Per layer, `Some(w)` for a sliding window (a query at `p` sees keys `p - w ..= p`) or
    /// `None` for full causal attention. Empty: every layer is full.
    pub windows: Vec<Option<usize>>,
    /// The RoPE base of windowed layers where it differs from `rope_theta` (Gemma 3: 10 000 on
    /// local layers, 1 000 000 on global ones).
    pub local_rope_theta: Option<f32>,
    /// Multiplies each query before attention's 1/sqrt(head_dim), where a model's attention
    /// scale is not 1/sqrt(head_dim) (Gemma's `query_pre_attn_scalar`).
    pub query_scale: Option<f32>,
    /// GPT-2: LayerNorm (mean removed, then a bias added where `biases`) in place of RMSNorm.
    pub layer_norm: bool,
    /// GPT-2: a learned position embedding (`position_embd`) added to the token embedding,
    /// and no RoPE.
    pub learned_positions: bool,
    /// GPT-2: `down(act(up(x)))`, no gate matrix.
    pub plain_mlp: bool,
    /// GPT-2: every projection and norm has a bias (nanoGPT's `bias=False` drops them all).
    pub biases: bool,
}

impl BlockVariant {
    /// Gemma 3 as llama.cpp runs it. `sliding_window` is the number of keys a local layer's
    /// query sees, itself included (llama.cpp masks a key when `p - key >= n_swa`); every sixth
    /// layer is global (llama.cpp's swa pattern 6: layer i is local unless (i + 1) % 6 == 0).
    /// Only the 27B model scales queries by hidden/heads rather than head_dim (llama.cpp picks
    /// it by the 27B's 62 layers; the GGUF holds no query_pre_attn_scalar).
    pub fn gemma3(hidden_size: usize, n_layers: usize, n_heads: usize, head_dim: usize, sliding_window: usize) -> Result<Self> {
        if sliding_window == 0 {
            return Err(Error::corrupt("gemma3.attention.sliding_window must be at least 1"));
        }
        let pre_attn_scalar = if n_layers == 62 { hidden_size / n_heads.max(1) } else { head_dim };
        let query_scale = (pre_attn_scalar != head_dim).then(|| (head_dim as f32 / pre_attn_scalar as f32).sqrt());
        Ok(Self {
            embed_scale: Some((hidden_size as f32).sqrt()),
            qk_norm: true,
            post_norms: true,
            activation: Activation::GeluTanh,
            windows: (0..n_layers).map(|i| ((i + 1) % 6 != 0).then_some(sliding_window - 1)).collect(),
            local_rope_theta: Some(10_000.0),
            query_scale,
            ..Self::default()
        })
    }

    /// GPT-2's block; `activation` is GELU's tanh form for GGUF files (as llama.cpp runs them)
    /// and erf for nanoGPT checkpoints (as PyTorch trained them).
    pub fn gpt2(activation: Activation, biases: bool) -> Self {
        Self { activation, layer_norm: true, learned_positions: true, plain_mlp: true, biases, ..Self::default() }
    }

    /// Qwen3: Llama's block with query and key norms (its missing QKV bias is the architecture's).
    pub fn qwen3() -> Self {
        Self { qk_norm: true, ..Self::default() }
    }

    /// Layer `layer`'s sliding window, `None` when it attends to the whole context.
    pub fn window(&self, layer: usize) -> Option<usize> {
        self.windows.get(layer).copied().flatten()
    }

    /// Whether this is Llama's block exactly (backends without the options check it).
    pub fn is_plain(&self) -> bool {
        *self == Self::default()
    }
}

/// The resolved configuration the forward pass runs on.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    pub architecture: Architecture,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub n_layers: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub rms_norm_eps: f32,
    pub rope_theta: f32,
    pub rope_style: RopeStyle,
    /// Per-frequency divisors from Llama 3 rope scaling; empty when unscaled.
    pub rope_freq_factors: Vec<f32>,
    pub context_length: usize,
    pub tie_word_embeddings: bool,
    pub variant: BlockVariant,
}

impl ModelConfig {
    /// Catches the hyper-parameter combinations the attention and RoPE code would silently
    /// mis-handle, so a malformed file fails at load time rather than producing garbage.
    pub fn validate(&self) -> Result<()> {
        // Checked one at a time, in order: later checks divide by and multiply fields that
        // earlier checks bound.
        let checks: [(&str, &dyn Fn() -> bool); 9] = [
            ("vocab_size must be in 1..=4194304", &|| (1..=MAX_VOCAB).contains(&self.vocab_size)),
            ("hidden_size must be in 1..=65536", &|| (1..=MAX_WIDTH).contains(&self.hidden_size)),
            ("intermediate_size must be in 1..=524288", &|| (1..=8 * MAX_WIDTH).contains(&self.intermediate_size)),
            ("n_layers must be in 1..=1024", &|| (1..=1024).contains(&self.n_layers)),
            ("head counts must be in 1..=1024", &|| (1..=1024).contains(&self.n_heads) && (1..=1024).contains(&self.n_kv_heads)),
            ("n_heads must be a multiple of n_kv_heads", &|| self.n_heads.is_multiple_of(self.n_kv_heads)),
            ("head_dim must be even and in 2..=1024", &|| (2..=1024).contains(&self.head_dim) && self.head_dim.is_multiple_of(2)),
            ("context_length must be in 1..=4194304", &|| (1..=MAX_CONTEXT).contains(&self.context_length)),
            ("norm eps and rope theta must be finite, theta positive", &|| {
                self.rms_norm_eps.is_finite() && self.rope_theta.is_finite() && self.rope_theta > 0.0
            }),
        ];
        for (what, ok) in checks {
            if !ok() {
                return Err(Error::corrupt(format!("invalid model config ({what}): {self:?}")));
            }
        }
        let v = &self.variant;
        if !v.windows.is_empty() && v.windows.len() != self.n_layers {
            return Err(Error::corrupt(format!("{} sliding windows for {} layers", v.windows.len(), self.n_layers)));
        }
        let finite_positive = |x: Option<f32>| x.is_none_or(|x| x.is_finite() && x > 0.0);
        if !finite_positive(v.embed_scale) || !finite_positive(v.local_rope_theta) || !finite_positive(v.query_scale) {
            return Err(Error::corrupt(format!("invalid model config (scales and rope bases must be finite and positive): {v:?}")));
        }
        if !self.rope_freq_factors.is_empty() && self.rope_freq_factors.len() != self.head_dim / 2 {
            return Err(Error::corrupt(format!(
                "rope frequency factors have {} entries, expected head_dim/2 = {}",
                self.rope_freq_factors.len(),
                self.head_dim / 2
            )));
        }
        Ok(())
    }

    pub fn kv_dim(&self) -> usize {
        self.n_kv_heads * self.head_dim
    }
    pub fn q_dim(&self) -> usize {
        self.n_heads * self.head_dim
    }
}

/// `config.json` of a Hugging Face checkpoint, the fields we read.
#[derive(Debug, Deserialize)]
pub struct HfConfig {
    #[serde(default)]
    pub architectures: Vec<String>,
    pub model_type: Option<String>,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: Option<usize>,
    pub head_dim: Option<usize>,
    #[serde(default = "default_rms_eps")]
    pub rms_norm_eps: f64,
    #[serde(default = "default_rope_theta")]
    pub rope_theta: f64,
    pub rope_scaling: Option<HfRopeScaling>,
    pub max_position_embeddings: Option<usize>,
    #[serde(default)]
    pub tie_word_embeddings: bool,
    pub torch_dtype: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct HfRopeScaling {
    #[serde(alias = "type")]
    pub rope_type: Option<String>,
    pub factor: Option<f64>,
    pub low_freq_factor: Option<f64>,
    pub high_freq_factor: Option<f64>,
    pub original_max_position_embeddings: Option<usize>,
}

fn default_rms_eps() -> f64 {
    1e-6
}
fn default_rope_theta() -> f64 {
    10_000.0
}

impl HfConfig {
    pub fn resolve(&self) -> Result<ModelConfig> {
        let arch_name = self
            .model_type
            .clone()
            .or_else(|| self.architectures.first().cloned())
            .ok_or_else(|| Error::corrupt("config.json names neither model_type nor architectures"))?;
        let architecture = Architecture::parse(&arch_name)?;
        match architecture {
            Architecture::Gemma3 | Architecture::Phi3 => {
                return Err(Error::unsupported(format!("{architecture:?} loads from GGUF files only, not from Hugging Face directories")));
            }
            // Its Conv1D weights are stored transposed and under other names than the Llama family's.
            Architecture::Gpt2 => {
                return Err(Error::unsupported(
                    "GPT-2 loads from GGUF files and nanoGPT ckpt.pt checkpoints, not from Hugging Face directories; convert it with llama.cpp's convert_hf_to_gguf.py",
                ));
            }
            _ => {}
        }
        let n_heads = self.num_attention_heads;
        let head_dim = self.head_dim.unwrap_or(self.hidden_size.checked_div(n_heads).unwrap_or(0));
        let mut cfg = ModelConfig {
            architecture,
            vocab_size: self.vocab_size,
            hidden_size: self.hidden_size,
            intermediate_size: self.intermediate_size,
            n_layers: self.num_hidden_layers,
            n_heads,
            n_kv_heads: self.num_key_value_heads.unwrap_or(n_heads),
            head_dim,
            rms_norm_eps: self.rms_norm_eps as f32,
            rope_theta: self.rope_theta as f32,
            rope_style: RopeStyle::HalfSplit,
            rope_freq_factors: Vec::new(),
            context_length: self.max_position_embeddings.unwrap_or(2048),
            tie_word_embeddings: self.tie_word_embeddings,
            variant: if architecture == Architecture::Qwen3 { BlockVariant::qwen3() } else { BlockVariant::default() },
        };
        cfg.validate()?;
        // Only now is head_dim known to be sane enough to size the factor table by.
        cfg.rope_freq_factors = match &self.rope_scaling {
            Some(s) if s.rope_type.as_deref() == Some("llama3") => llama3_freq_factors(s, head_dim, self.rope_theta)?,
            Some(s) if matches!(s.rope_type.as_deref(), Some("default") | None) => Vec::new(),
            Some(s) => return Err(Error::unsupported(format!("rope_scaling type {:?} is not supported (only llama3)", s.rope_type))),
            None => Vec::new(),
        };
        Ok(cfg)
    }
}

/// Llama 3.1's frequency-dependent RoPE stretch, expressed as a divisor per frequency — the
/// same form GGUF stores in `rope_freqs.weight`, so both formats share one RoPE code path.
fn llama3_freq_factors(s: &HfRopeScaling, head_dim: usize, theta: f64) -> Result<Vec<f32>> {
    let (Some(factor), Some(low), Some(high), Some(orig)) =
        (s.factor, s.low_freq_factor, s.high_freq_factor, s.original_max_position_embeddings)
    else {
        return Err(Error::corrupt("llama3 rope_scaling needs factor, low/high_freq_factor and original_max_position_embeddings"));
    };
    let low_wavelen = orig as f64 / low;
    let high_wavelen = orig as f64 / high;
    let factors: Vec<f32> = (0..head_dim / 2)
        .map(|i| {
            let freq = theta.powf(-((2 * i) as f64) / head_dim as f64);
            let wavelen = 2.0 * std::f64::consts::PI / freq;
            let divisor = if wavelen < high_wavelen {
                1.0
            } else if wavelen > low_wavelen {
                factor
            } else {
                let smooth = (orig as f64 / wavelen - low) / (high - low);
                1.0 / ((1.0 - smooth) / factor + smooth)
            };
            divisor as f32
        })
        .collect();
    if factors.iter().any(|f| !f.is_finite() || *f <= 0.0) {
        return Err(Error::corrupt(format!("llama3 rope_scaling {s:?} gives non-positive or infinite frequency factors")));
    }
    Ok(factors)
}

/// A small valid config for unit tests of the pieces that only need shapes.
#[cfg(test)]
pub(crate) fn test_config(n_layers: usize, n_heads: usize, n_kv_heads: usize, head_dim: usize) -> ModelConfig {
    ModelConfig {
        architecture: Architecture::Llama,
        vocab_size: 10,
        hidden_size: 8,
        intermediate_size: 8,
        n_layers,
        n_heads,
        n_kv_heads,
        head_dim,
        rms_norm_eps: 1e-5,
        rope_theta: 10_000.0,
        rope_style: RopeStyle::Interleaved,
        rope_freq_factors: Vec::new(),
        context_length: 8192,
        tie_word_embeddings: true,
        variant: BlockVariant::default(),
    }
}
