//! Causal attention of a packed batch of new tokens over the KV store.
//!
//! Tokens of all rows are packed one after another (no padding). Token `i` of a row that held
//! `p` positions before this pass sits at position `p + i` and sees cache positions `0..=p+i`
//! of its own row (or the last `window + 1` of them): the rectangular causal mask, which makes
//! prefill (many tokens), chunked prefill (many tokens after a prefix) and decode (one token)
//! the same code path.

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use crate::kv_cache::KvCache;
use crate::simd;

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
    /// Sliding window: a query at position `p` sees keys `p - window ..= p`. `None` is full
    /// causal attention.
    pub window: Option<usize>,
}

/// Consecutive tokens of one row attended together, so each cached key is loaded once for all
/// of them (and for every query head sharing its KV head) rather than once per token.
const QUERY_BLOCK: usize = 16;

/// A unit of parallel work: a run of packed tokens of one row, against one KV head.
struct Item {
    first: usize,
    len: usize,
    kv_head: usize,
}

/// `q` is `(N, H, D)` with RoPE applied; the cache already holds this pass's K/V. Returns
/// `(N, H, D)`. Attention over a long prompt is the longest stretch of a layer, so remaining
/// items are skipped once `cancel` is set; the caller then discards the output.
pub fn attend(cache: &KvCache, layer: usize, slots: &[TokenSlot], q: &[f32], shape: &AttentionShape, cancel: Option<&AtomicBool>) -> Vec<f32> {
    let (h, d) = (shape.n_heads, shape.head_dim);
    let group = h / shape.n_kv_heads;
    let items = plan_items(slots, shape.n_kv_heads);
    let results: Vec<Vec<f32>> = items
        .par_iter()
        .map(|item| {
            if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                return Vec::new();
            }
            attend_item(cache, layer, slots, q, shape, item)
        })
        .collect();
    let mut out = vec![0.0f32; slots.len() * h * d];
    for (item, result) in items.iter().zip(&results) {
        // (token, group head, D) blocks go back to their place in (N, H, D).
        for (t, chunk) in result.chunks_exact(group * d).enumerate() {
            let at = ((item.first + t) * h + item.kv_head * group) * d;
            out[at..at + group * d].copy_from_slice(chunk);
        }
    }
    out
}

fn plan_items(slots: &[TokenSlot], n_kv_heads: usize) -> Vec<Item> {
    let mut items = Vec::new();
    let mut first = 0;
    while first < slots.len() {
        let row = slots[first].row;
        let mut len = 1;
        while len < QUERY_BLOCK && first + len < slots.len() && slots[first + len].row == row {
            len += 1;
        }
        items.extend((0..n_kv_heads).map(|kv_head| Item { first, len, kv_head }));
        first += len;
    }
    items
}

/// The `len` tokens of one item against one KV head: returns `(len, group, D)`.
fn attend_item(cache: &KvCache, layer: usize, slots: &[TokenSlot], q: &[f32], shape: &AttentionShape, item: &Item) -> Vec<f32> {
    let (h, d, kvh) = (shape.n_heads, shape.head_dim, shape.n_kv_heads);
    let group = h / kvh;
    let scale = 1.0 / (d as f32).sqrt();
    let tokens = &slots[item.first..item.first + item.len];
    let visible = |pos: usize| (shape.window.map_or(0, |w| pos.saturating_sub(w)), pos + 1);
    let (lo, _) = visible(tokens[0].pos);
    let (_, hi) = visible(tokens[item.len - 1].pos);
    let span = hi - lo;
    let (k_row, v_row) = cache.row(layer, tokens[0].row);
    let stride = kvh * d;
    let queries: Vec<&[f32]> = (0..item.len)
        .flat_map(|t| (0..group).map(move |g| ((item.first + t) * h + item.kv_head * group + g) * d))
        .map(|at| &q[at..at + d])
        .collect();

    // Scores, one row of `span` per query; each key is read once for every query.
    let mut scores = vec![f32::NEG_INFINITY; queries.len() * span];
    for j in 0..span {
        let key = &k_row[(lo + j) * stride + item.kv_head * d..][..d];
        for (qi, query) in queries.iter().enumerate() {
            let (key_lo, key_hi) = visible(tokens[qi / group].pos);
            if lo + j >= key_lo && lo + j < key_hi {
                scores[qi * span + j] = simd::dot(query, key) * scale;
            }
        }
    }
    for row in scores.chunks_exact_mut(span) {
        simd::softmax_in_place(row);
    }
    // Weighted values, again reading each cached value once.
    let mut out = vec![0.0f32; queries.len() * d];
    for j in 0..span {
        let value = &v_row[(lo + j) * stride + item.kv_head * d..][..d];
        for (qi, o) in out.chunks_exact_mut(d).enumerate() {
            let p = scores[qi * span + j];
            if p > 0.0 {
                simd::axpy(p, value, o);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_config;

    /// Deterministic values in [-1, 1) that differ everywhere.
    fn noise(seed: usize, n: usize) -> Vec<f32> {
        (0..n).map(|i| (((i * 7919 + seed * 104_729) % 1000) as f32 / 500.0) - 1.0).collect()
    }

    /// Textbook attention for one query head: every visible key, std `exp`, no blocking.
    fn brute_force(cache: &KvCache, slot: TokenSlot, q: &[f32], kv_head: usize, shape: &AttentionShape) -> Vec<f32> {
        let (d, stride) = (shape.head_dim, shape.n_kv_heads * shape.head_dim);
        let (k, v) = cache.row(0, slot.row);
        let lo = shape.window.map_or(0, |w| slot.pos.saturating_sub(w));
        let scores: Vec<f32> = (lo..=slot.pos)
            .map(|j| q.iter().zip(&k[j * stride + kv_head * d..][..d]).map(|(a, b)| a * b).sum::<f32>() / (d as f32).sqrt())
            .collect();
        let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let weights: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect();
        let total: f32 = weights.iter().sum();
        (0..d).map(|i| (lo..=slot.pos).zip(&weights).map(|(j, w)| w / total * v[j * stride + kv_head * d + i]).sum()).collect()
    }

    #[test]
    fn blocked_windowed_attention_equals_brute_force() {
        let (heads, kv_heads, d) = (4, 2, 8);
        let mut cache = KvCache::new(&test_config(1, heads, kv_heads, d), 2, 64).expect("cache");
        let width = kv_heads * d;
        for row in 0..2 {
            cache.write(0, row, 0, &noise(row, 40 * width), &noise(row + 7, 40 * width));
        }
        // Row 0 decodes one token; row 1 prefills 21 tokens after a 19-token prefix (two blocks).
        let slots: Vec<TokenSlot> = std::iter::once(TokenSlot { row: 0, pos: 39 }).chain((19..40).map(|pos| TokenSlot { row: 1, pos })).collect();
        let q = noise(3, slots.len() * heads * d);
        for window in [None, Some(5), Some(0), Some(100)] {
            let shape = AttentionShape { n_heads: heads, n_kv_heads: kv_heads, head_dim: d, window };
            let out = attend(&cache, 0, &slots, &q, &shape, None);
            for (t, &slot) in slots.iter().enumerate() {
                for head in 0..heads {
                    let at = (t * heads + head) * d;
                    let want = brute_force(&cache, slot, &q[at..at + d], head / (heads / kv_heads), &shape);
                    for (got, want) in out[at..at + d].iter().zip(&want) {
                        assert!((got - want).abs() < 1e-5, "window {window:?} token {t} head {head}: {got} vs {want}");
                    }
                }
            }
        }
    }
}
