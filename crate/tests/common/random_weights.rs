//! Random weights under GGUF names, so a model of any shape runs without a file: the GPU tests
//! and the GPU bench share them.

use candle_core::{DType, Device, Tensor};
use kvengine::config::{Architecture, ModelConfig, RopeStyle};
use kvengine::weights::{Weight, WeightSource};

/// Deterministic uniform values in [-1, 1) (xorshift), different for every seed.
pub fn noise(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// Random weights under GGUF names, for a model of any shape without a file.
pub struct RandomWeights {
    pub cfg: ModelConfig,
    /// Round every weight through f16, as an F16 file would hold it.
    pub f16: bool,
}

impl RandomWeights {
    fn dims(&self, name: &str) -> Vec<usize> {
        let c = &self.cfg;
        let (h, q, kv, ff) = (c.hidden_size, c.q_dim(), c.kv_dim(), c.intermediate_size);
        match name.rsplit('.').nth(1).unwrap_or("") {
            "token_embd" => vec![c.vocab_size, h],
            "attn_q" => vec![q, h],
            "attn_k" | "attn_v" => vec![kv, h],
            "attn_output" => vec![h, q],
            "ffn_gate" | "ffn_up" => vec![ff, h],
            "ffn_down" => vec![h, ff],
            _ => vec![h],
        }
    }
}

impl WeightSource for RandomWeights {
    fn contains(&self, name: &str) -> bool {
        name != "output.weight"
    }
    fn load(&mut self, name: &str) -> kvengine::Result<Weight> {
        let dims = self.dims(name);
        let seed = name.bytes().fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
        let fan_in = *dims.last().unwrap_or(&1) as f32;
        let values: Vec<f32> = if name.contains("norm") {
            noise(seed, dims.iter().product()).iter().map(|x| 1.0 + 0.1 * x).collect()
        } else {
            // Uniform with variance 1/fan_in keeps activations of order one through the layers;
            // embeddings get a larger spread so greedy choices are not near-ties.
            let scale = if name.starts_with("token_embd") { 1.0 } else { (3.0 / fan_in).sqrt() };
            noise(seed, dims.iter().product()).iter().map(|x| x * scale).collect()
        };
        let t = Tensor::from_vec(values, dims, &Device::Cpu)?;
        let t = if self.f16 { t.to_dtype(DType::F16)?.to_dtype(DType::F32)? } else { t };
        Ok(Weight::Dense(t))
    }
}

/// SmolLM2-135M's shape (the default model), with its vocabulary of `vocab_size`.
pub fn smollm_shape(vocab_size: usize) -> ModelConfig {
    ModelConfig {
        architecture: Architecture::Llama,
        vocab_size,
        hidden_size: 576,
        intermediate_size: 1536,
        n_layers: 30,
        n_heads: 9,
        n_kv_heads: 3,
        head_dim: 64,
        rms_norm_eps: 1e-5,
        rope_theta: 100_000.0,
        rope_style: RopeStyle::HalfSplit,
        rope_freq_factors: Vec::new(),
        context_length: 2048,
        tie_word_embeddings: true,
        variant: Default::default(),
    }
}

/// Llama-3.2-1B's shape: a model of about 1.2 billion parameters.
#[allow(dead_code)] // used by the bench, not the tests
pub fn llama_1b_shape() -> ModelConfig {
    ModelConfig {
        architecture: Architecture::Llama,
        vocab_size: 128_256,
        hidden_size: 2048,
        intermediate_size: 8192,
        n_layers: 16,
        n_heads: 32,
        n_kv_heads: 8,
        head_dim: 64,
        rms_norm_eps: 1e-5,
        rope_theta: 500_000.0,
        rope_style: RopeStyle::HalfSplit,
        rope_freq_factors: Vec::new(),
        context_length: 8192,
        tie_word_embeddings: true,
        variant: Default::default(),
    }
}
