//! nanochat's `GPTConfig` as its `meta_<step>.json` stores it, resolved into the runtime config
//! with upstream's hard-coded constants (they live in upstream's code, not in the checkpoint).

use serde::Deserialize;

use crate::config::{Architecture, ModelConfig, RopeStyle, MAX_CONTEXT, MAX_VOCAB, MAX_WIDTH};
use crate::error::{Error, Result};

pub const ROPE_BASE: f32 = 100_000.0;
pub const LOGIT_SOFTCAP: f32 = 15.0;
pub const QK_SCALE: f32 = 1.2;
pub const VE_GATE_CHANNELS: usize = 12;
pub const VE_GATE_SCALE: f32 = 3.0;
pub const SMEAR_GATE_CHANNELS: usize = 24;
/// Upstream pads the embedding tables to a multiple of this; logits are sliced back.
pub const VOCAB_PAD: usize = 64;
/// Upstream precomputes RoPE for 10 × sequence_len positions and cannot go further.
pub const ROPE_POSITIONS_PER_SEQ: usize = 10;

/// The `model_config` object of `meta_<step>.json`.
#[derive(Debug, Deserialize)]
pub struct GptConfig {
    pub sequence_len: usize,
    pub vocab_size: usize,
    pub n_layer: usize,
    pub n_head: usize,
    pub n_kv_head: usize,
    pub n_embd: usize,
    /// Absent in checkpoints from before sliding windows, which were trained with full context.
    #[serde(default = "full_context_pattern")]
    pub window_pattern: String,
}

fn full_context_pattern() -> String {
    "L".into()
}

#[derive(Debug, Deserialize)]
pub struct Meta {
    pub model_config: GptConfig,
}

/// What the forward pass runs on.
#[derive(Debug, Clone)]
pub struct NanochatConfig {
    /// The shapes every architecture shares (KV cache, model info). `context_length` is the
    /// RoPE table's reach, 10 × sequence_len as upstream; past sequence_len every layer slides.
    pub base: ModelConfig,
    pub sequence_len: usize,
    /// Rows of the embedding tables and lm_head: vocab_size rounded up to VOCAB_PAD.
    pub padded_vocab: usize,
    /// Per layer, how many earlier positions a query sees (`p - window ..= p`).
    pub windows: Vec<usize>,
    /// Layer whose output is subtracted (scaled) before the final norm.
    pub backout_layer: usize,
}

impl NanochatConfig {
    /// Layers with value embeddings: alternating, the last always included.
    pub fn has_value_embeds(&self, layer: usize) -> bool {
        layer % 2 == (self.base.n_layers - 1) % 2
    }
}

impl GptConfig {
    pub fn resolve(&self) -> Result<NanochatConfig> {
        self.validate()?;
        let head_dim = self.n_embd / self.n_head;
        let base = ModelConfig {
            architecture: Architecture::Nanochat,
            vocab_size: self.vocab_size,
            hidden_size: self.n_embd,
            intermediate_size: 4 * self.n_embd,
            n_layers: self.n_layer,
            n_heads: self.n_head,
            n_kv_heads: self.n_kv_head,
            head_dim,
            // F.rms_norm without eps uses the dtype's machine epsilon.
            rms_norm_eps: f32::EPSILON,
            rope_theta: ROPE_BASE,
            rope_style: RopeStyle::HalfSplit,
            rope_freq_factors: Vec::new(),
            context_length: self.sequence_len * ROPE_POSITIONS_PER_SEQ,
            tie_word_embeddings: false,
            variant: crate::config::BlockVariant::default(),
        };
        base.validate()?;
        Ok(NanochatConfig {
            base,
            sequence_len: self.sequence_len,
            padded_vocab: self.vocab_size.div_ceil(VOCAB_PAD) * VOCAB_PAD,
            windows: self.windows(),
            backout_layer: self.n_layer / 2,
        })
    }

    /// The pattern tiled over layers, the last layer forced to L. L is `sequence_len` and S a
    /// quarter of it rounded up to 128 (FA3's tile); both are finite windows.
    fn windows(&self) -> Vec<usize> {
        let long = self.sequence_len;
        let short = long.div_ceil(4).div_ceil(128) * 128;
        let pattern: Vec<char> = self.window_pattern.to_uppercase().chars().collect();
        let mut windows: Vec<usize> = (0..self.n_layer).map(|i| if pattern[i % pattern.len()] == 'S' { short } else { long }).collect();
        if let Some(last) = windows.last_mut() {
            *last = long;
        }
        windows
    }

    fn validate(&self) -> Result<()> {
        let pattern_ok = !self.window_pattern.is_empty() && self.window_pattern.to_uppercase().chars().all(|c| c == 'S' || c == 'L');
        let checks: [(&str, bool); 7] = [
            ("vocab_size must be in 1..=4194304", (1..=MAX_VOCAB).contains(&self.vocab_size)),
            ("n_embd must be in 24..=65536 (the smear gate reads 24 channels)", (SMEAR_GATE_CHANNELS..=MAX_WIDTH).contains(&self.n_embd)),
            ("n_layer must be in 1..=1024", (1..=1024).contains(&self.n_layer)),
            ("n_head and n_kv_head must be in 1..=1024", (1..=1024).contains(&self.n_head) && (1..=1024).contains(&self.n_kv_head)),
            ("n_embd must be a multiple of n_head", self.n_embd.is_multiple_of(self.n_head)),
            ("sequence_len must be in 1..=419430", (1..=MAX_CONTEXT / ROPE_POSITIONS_PER_SEQ).contains(&self.sequence_len)),
            ("window_pattern must be made of S and L", pattern_ok),
        ];
        for (what, ok) in checks {
            if !ok {
                return Err(Error::corrupt(format!("invalid nanochat model_config ({what}): {self:?}")));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(sequence_len: usize, n_layer: usize, pattern: &str) -> GptConfig {
        GptConfig { sequence_len, vocab_size: 300, n_layer, n_head: 4, n_kv_head: 2, n_embd: 32, window_pattern: pattern.into() }
    }

    #[test]
    fn windows_follow_upstream() {
        assert_eq!(config(2048, 6, "SSSL").windows(), vec![512, 512, 512, 2048, 512, 2048]);
        assert_eq!(config(256, 4, "sssl").windows(), vec![128, 128, 128, 256]);
        assert_eq!(config(1000, 3, "L").windows(), vec![1000, 1000, 1000]);
    }

    #[test]
    fn missing_pattern_means_full_context() {
        let meta: Meta = serde_json::from_str(
            r#"{"model_config": {"sequence_len": 64, "vocab_size": 300, "n_layer": 2, "n_head": 2, "n_kv_head": 2, "n_embd": 32}}"#,
        )
        .unwrap();
        assert_eq!(meta.model_config.window_pattern, "L");
        let cfg = meta.model_config.resolve().unwrap();
        assert_eq!(cfg.windows, vec![64, 64]);
        assert_eq!(cfg.padded_vocab, 320);
        assert!(config(64, 2, "SXL").resolve().is_err());
        let no_heads = GptConfig { n_head: 0, n_kv_head: 0, ..config(64, 2, "L") };
        assert!(no_heads.resolve().is_err());
    }
}
