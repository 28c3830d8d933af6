//! Rotary position embeddings, applied per token at that token's own position, so rows of
//! different lengths in one batch each rotate correctly.

use crate::config::{ModelConfig, RopeStyle};

pub struct Rope {
    inv_freq: Vec<f32>,
    style: RopeStyle,
}

/// cos/sin for each token of a forward pass, `(N, D/2)`, computed once and shared by all layers.
pub struct RopeAngles {
    cos: Vec<f32>,
    sin: Vec<f32>,
    half: usize,
}

impl RopeAngles {
    /// The `(N, D/2)` cos and sin tables, for a model that rotates on another device.
    pub fn into_tables(self) -> (Vec<f32>, Vec<f32>) {
        (self.cos, self.sin)
    }
}

impl Rope {
    pub fn new(cfg: &ModelConfig) -> Self {
        Self::with_base(cfg, cfg.rope_theta)
    }

    /// The rotation with base `theta` instead of the config's (Gemma 3's local layers).
    pub fn with_base(cfg: &ModelConfig, theta: f32) -> Self {
        let half = cfg.head_dim / 2;
        let inv_freq = (0..half)
            .map(|i| {
                let freq = theta.powf(-2.0 * i as f32 / cfg.head_dim as f32);
                let divisor = cfg.rope_freq_factors.get(i).copied().unwrap_or(1.0);
                freq / divisor
            })
            .collect();
        Self { inv_freq, style: cfg.rope_style }
    }

    pub fn angles(&self, positions: &[usize]) -> RopeAngles {
        let half = self.inv_freq.len();
        let mut cos = Vec::with_capacity(positions.len() * half);
        let mut sin = Vec::with_capacity(positions.len() * half);
        for &pos in positions {
            for &f in &self.inv_freq {
                let (s, c) = (pos as f32 * f).sin_cos();
                cos.push(c);
                sin.push(s);
            }
        }
        RopeAngles { cos, sin, half }
    }

    /// Rotates `x`, laid out `(N, heads, D)`, in place.
    pub fn apply(&self, x: &mut [f32], n_heads: usize, angles: &RopeAngles) {
        let half = angles.half;
        let head_dim = 2 * half;
        for (t, token) in x.chunks_exact_mut(n_heads * head_dim).enumerate() {
            let cos = &angles.cos[t * half..(t + 1) * half];
            let sin = &angles.sin[t * half..(t + 1) * half];
            for head in token.chunks_exact_mut(head_dim) {
                match self.style {
                    RopeStyle::Interleaved => rotate_interleaved(head, cos, sin),
                    RopeStyle::HalfSplit => rotate_half_split(head, cos, sin),
                }
            }
        }
    }
}

fn rotate_interleaved(head: &mut [f32], cos: &[f32], sin: &[f32]) {
    for (pair, (&c, &s)) in head.chunks_exact_mut(2).zip(cos.iter().zip(sin)) {
        let (a, b) = (pair[0], pair[1]);
        pair[0] = a * c - b * s;
        pair[1] = a * s + b * c;
    }
}

fn rotate_half_split(head: &mut [f32], cos: &[f32], sin: &[f32]) {
    let (lo, hi) = head.split_at_mut(cos.len());
    for i in 0..cos.len() {
        let (a, b) = (lo[i], hi[i]);
        lo[i] = a * cos[i] - b * sin[i];
        hi[i] = a * sin[i] + b * cos[i];
    }
}
