//! Causal attention of a packed batch of new tokens over the KV store.
//!
//! Tokens of all rows are packed one after another (no padding). Token `i` of a row that held
//! `p` positions before this pass sits at position `p + i` and sees cache positions `0..=p+i`
//! of its own row: the rectangular causal mask, which makes prefill (many tokens), chunked
//! prefill (many tokens after a prefix) and decode (one token) the same code path.

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use crate::kv_cache::KvCache;

/// Where each packed token lives: its row and its absolute position in that row.
#[derive(Debug, Clone, Copy)]
pub struct TokenSlot {
    pub row: usize,
    pub pos: usize,
}

pub struct AttentionShape {
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
}

/// `q` is `(N, H, D)` with RoPE applied; the cache already holds this pass's K/V. Returns
/// `(N, H, D)`. Work is split per (token, KV head): the query heads that share a KV head are
/// computed together so each cached key is read once per group. Attention over a long prompt is
/// the longest stretch of a layer, so remaining items are skipped once `cancel` is set; the
/// caller then discards the output.
pub fn attend(cache: &KvCache, layer: usize, slots: &[TokenSlot], q: &[f32], shape: &AttentionShape, cancel: Option<&AtomicBool>) -> Vec<f32> {
    let AttentionShape { n_heads, n_kv_heads, head_dim } = *shape;
    let group = n_heads / n_kv_heads;
    let scale = 1.0 / (head_dim as f32).sqrt();
    let mut out = vec![0.0f32; slots.len() * n_heads * head_dim];
    out.par_chunks_mut(group * head_dim).enumerate().for_each(|(item, out_group)| {
        if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
            return;
        }
        let (token, kv_head) = (item / n_kv_heads, item % n_kv_heads);
        let slot = slots[token];
        let (k_row, v_row) = cache.row(layer, slot.row);
        let q_group = &q[item * group * head_dim..(item + 1) * group * head_dim];
        attend_group(q_group, k_row, v_row, slot.pos + 1, kv_head, n_kv_heads, head_dim, scale, out_group);
    });
    out
}

/// One KV head against `kv_len` cached positions, for the `group` query heads that share it.
#[allow(clippy::too_many_arguments)]
fn attend_group(
    q_group: &[f32],
    k_row: &[f32],
    v_row: &[f32],
    kv_len: usize,
    kv_head: usize,
    n_kv_heads: usize,
    head_dim: usize,
    scale: f32,
    out: &mut [f32],
) {
    let group = q_group.len() / head_dim;
    let stride = n_kv_heads * head_dim;
    let mut scores = vec![0.0f32; group * kv_len];
    for t in 0..kv_len {
        let key = &k_row[t * stride + kv_head * head_dim..][..head_dim];
        for g in 0..group {
            scores[g * kv_len + t] = dot(&q_group[g * head_dim..(g + 1) * head_dim], key) * scale;
        }
    }
    for g in 0..group {
        let s = &mut scores[g * kv_len..(g + 1) * kv_len];
        let max = s.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0;
        for x in s.iter_mut() {
            *x = (*x - max).exp();
            sum += *x;
        }
        let o = &mut out[g * head_dim..(g + 1) * head_dim];
        o.iter_mut().for_each(|x| *x = 0.0);
        for (t, &p) in s.iter().enumerate() {
            let value = &v_row[t * stride + kv_head * head_dim..][..head_dim];
            axpy(p / sum, value, o);
        }
    }
}

/// Eight independent accumulators let the compiler vectorise without reassociating floats.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let chunks = a.len() / 8;
    for i in 0..chunks {
        for j in 0..8 {
            acc[j] += a[i * 8 + j] * b[i * 8 + j];
        }
    }
    let mut sum: f32 = acc.iter().sum();
    for i in chunks * 8..a.len() {
        sum += a[i] * b[i];
    }
    sum
}

#[inline]
fn axpy(alpha: f32, x: &[f32], y: &mut [f32]) {
    for (yi, &xi) in y.iter_mut().zip(x) {
        *yi += alpha * xi;
    }
}
