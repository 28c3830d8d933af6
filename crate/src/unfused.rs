//! Phi-3 stores each layer's query, key and value projections as one matrix (`attn_qkv`, rows in
//! that order) and its gate and up projections as one (`ffn_up`, gate rows first, as llama.cpp's
//! fused SwiGLU splits it). This source serves the separate matrices the Llama block asks for,
//! cut from the fused ones in their own block format, so no model code knows the difference.
//! GPT-2 fuses only Q, K and V, biases included; its `ffn_up` is a plain up projection.

use crate::config::ModelConfig;
use crate::error::Result;
use crate::weights::{Weight, WeightSource};

pub struct Unfused<'a> {
    inner: &'a mut dyn WeightSource,
    q_rows: usize,
    kv_rows: usize,
    /// Rows of the FFN's gate (and of its up projection); `None` where `ffn_up` is not fused.
    ffn_rows: Option<usize>,
    /// The fused tensors last loaded: each is asked for two or three times, alternating
    /// between a matrix and its bias where there is one, so two are kept.
    recent: Vec<(String, Weight)>,
}

/// Which fused tensor holds `name` (a weight or a bias), and where: (fused name, first row, rows).
fn part_of(name: &str, q: usize, kv: usize, ffn: Option<usize>) -> Option<(String, usize, usize)> {
    let (layer, tail) = name.strip_prefix("blk.")?.split_once('.')?;
    let (tensor, kind) = tail.split_once('.')?;
    let fused = |t: &str| format!("blk.{layer}.{t}.{kind}");
    match (tensor, ffn) {
        ("attn_q", _) => Some((fused("attn_qkv"), 0, q)),
        ("attn_k", _) => Some((fused("attn_qkv"), q, kv)),
        ("attn_v", _) => Some((fused("attn_qkv"), q + kv, kv)),
        ("ffn_gate", Some(ffn)) => Some((fused("ffn_up"), 0, ffn)),
        ("ffn_up", Some(ffn)) => Some((fused("ffn_up"), ffn, ffn)),
        _ => None,
    }
}

impl<'a> Unfused<'a> {
    pub fn new(inner: &'a mut dyn WeightSource, config: &ModelConfig) -> Self {
        let ffn_rows = (!config.variant.plain_mlp).then_some(config.intermediate_size);
        Self { inner, q_rows: config.q_dim(), kv_rows: config.kv_dim(), ffn_rows, recent: Vec::with_capacity(2) }
    }

    fn fused(&mut self, name: &str) -> Result<Weight> {
        if let Some((_, w)) = self.recent.iter().find(|(cached, _)| cached == name) {
            return Ok(w.clone());
        }
        let w = self.inner.load(name)?;
        if self.recent.len() == 2 {
            self.recent.remove(0);
        }
        self.recent.push((name.to_owned(), w.clone()));
        Ok(w)
    }
}

impl WeightSource for Unfused<'_> {
    fn contains(&self, name: &str) -> bool {
        match part_of(name, self.q_rows, self.kv_rows, self.ffn_rows) {
            Some((fused, ..)) => self.inner.contains(&fused),
            None => self.inner.contains(name),
        }
    }

    fn load(&mut self, name: &str) -> Result<Weight> {
        match part_of(name, self.q_rows, self.kv_rows, self.ffn_rows) {
            Some((fused, start, rows)) => self.fused(&fused)?.rows(start, rows),
            None => self.inner.load(name),
        }
    }

    fn file_name_of(&self, name: &str) -> String {
        match part_of(name, self.q_rows, self.kv_rows, self.ffn_rows) {
            Some((fused, start, rows)) => format!("{} (rows {start}..{})", self.inner.file_name_of(&fused), start + rows),
            None => self.inner.file_name_of(name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_the_fused_rows_in_order() {
        let (q, kv, ffn) = (8, 2, Some(5));
        assert_eq!(part_of("blk.3.attn_q.weight", q, kv, ffn), Some(("blk.3.attn_qkv.weight".into(), 0, 8)));
        assert_eq!(part_of("blk.3.attn_k.weight", q, kv, ffn), Some(("blk.3.attn_qkv.weight".into(), 8, 2)));
        assert_eq!(part_of("blk.3.attn_v.weight", q, kv, ffn), Some(("blk.3.attn_qkv.weight".into(), 10, 2)));
        assert_eq!(part_of("blk.0.ffn_gate.weight", q, kv, ffn), Some(("blk.0.ffn_up.weight".into(), 0, 5)));
        assert_eq!(part_of("blk.0.ffn_up.weight", q, kv, ffn), Some(("blk.0.ffn_up.weight".into(), 5, 5)));
        assert_eq!(part_of("blk.0.ffn_down.weight", q, kv, ffn), None);
        assert_eq!(part_of("token_embd.weight", q, kv, ffn), None);
        // GPT-2: biases are cut as their weights are, and an unfused FFN is left alone.
        assert_eq!(part_of("blk.1.attn_k.bias", q, kv, None), Some(("blk.1.attn_qkv.bias".into(), 8, 2)));
        assert_eq!(part_of("blk.1.ffn_up.weight", q, kv, None), None);
        assert_eq!(part_of("blk.1.attn_norm.bias", q, kv, None), None);
    }
}
