//! Phi-3 stores each layer's query, key and value projections as one matrix (`attn_qkv`, rows in
//! that order) and its gate and up projections as one (`ffn_up`, gate rows first, as llama.cpp's
//! fused SwiGLU splits it). This source serves the separate matrices the Llama block asks for,
//! cut from the fused ones in their own block format, so no model code knows the difference.

use crate::config::ModelConfig;
use crate::error::Result;
use crate::weights::{Weight, WeightSource};

pub struct Unfused<'a> {
    inner: &'a mut dyn WeightSource,
    q_rows: usize,
    kv_rows: usize,
    ffn_rows: usize,
    /// The fused matrix last loaded: each is asked for two or three times in a row.
    last: Option<(String, Weight)>,
}

/// Which fused tensor holds `name`, and where: (fused name, first row, rows).
fn part_of(name: &str, q: usize, kv: usize, ffn: usize) -> Option<(String, usize, usize)> {
    let (layer, tail) = name.strip_prefix("blk.")?.split_once('.')?;
    let fused = |t: &str| format!("blk.{layer}.{t}.weight");
    match tail {
        "attn_q.weight" => Some((fused("attn_qkv"), 0, q)),
        "attn_k.weight" => Some((fused("attn_qkv"), q, kv)),
        "attn_v.weight" => Some((fused("attn_qkv"), q + kv, kv)),
        "ffn_gate.weight" => Some((fused("ffn_up"), 0, ffn)),
        "ffn_up.weight" => Some((fused("ffn_up"), ffn, ffn)),
        _ => None,
    }
}

impl<'a> Unfused<'a> {
    pub fn new(inner: &'a mut dyn WeightSource, config: &ModelConfig) -> Self {
        Self { inner, q_rows: config.q_dim(), kv_rows: config.kv_dim(), ffn_rows: config.intermediate_size, last: None }
    }

    fn fused(&mut self, name: &str) -> Result<Weight> {
        if let Some((cached, w)) = &self.last {
            if cached == name {
                return Ok(w.clone());
            }
        }
        let w = self.inner.load(name)?;
        self.last = Some((name.to_owned(), w.clone()));
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
        let (q, kv, ffn) = (8, 2, 5);
        assert_eq!(part_of("blk.3.attn_q.weight", q, kv, ffn), Some(("blk.3.attn_qkv.weight".into(), 0, 8)));
        assert_eq!(part_of("blk.3.attn_k.weight", q, kv, ffn), Some(("blk.3.attn_qkv.weight".into(), 8, 2)));
        assert_eq!(part_of("blk.3.attn_v.weight", q, kv, ffn), Some(("blk.3.attn_qkv.weight".into(), 10, 2)));
        assert_eq!(part_of("blk.0.ffn_gate.weight", q, kv, ffn), Some(("blk.0.ffn_up.weight".into(), 0, 5)));
        assert_eq!(part_of("blk.0.ffn_up.weight", q, kv, ffn), Some(("blk.0.ffn_up.weight".into(), 5, 5)));
        assert_eq!(part_of("blk.0.ffn_down.weight", q, kv, ffn), None);
        assert_eq!(part_of("token_embd.weight", q, kv, ffn), None);
    }
}
