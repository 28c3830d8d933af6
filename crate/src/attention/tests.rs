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

/// Fills `len` positions of every row with noise and checks `attend` (planned for `threads`)
/// against brute force for each window.
fn check_against_brute_force(threads: usize, rows: usize, len: usize, d: usize, slots: &[TokenSlot]) {
    let (heads, kv_heads) = (4, 2);
    let mut cache = KvCache::new(&test_config(1, heads, kv_heads, d), rows, len).expect("cache");
    let width = kv_heads * d;
    for row in 0..rows {
        cache.write(0, row, 0, &noise(row, len * width), &noise(row + 7, len * width));
    }
    let q = noise(3, slots.len() * heads * d);
    for window in [None, Some(5), Some(0), Some(100), Some(300)] {
        let shape = AttentionShape { n_heads: heads, n_kv_heads: kv_heads, head_dim: d, window };
        let out = attend_split_for(threads, &cache, 0, slots, &q, &shape, None);
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

#[test]
fn blocked_windowed_attention_equals_brute_force() {
    // Row 0 decodes one token; row 1 prefills 21 tokens after a 19-token prefix (two blocks).
    let slots: Vec<TokenSlot> = std::iter::once(TokenSlot { row: 0, pos: 39 }).chain((19..40).map(|pos| TokenSlot { row: 1, pos })).collect();
    for d in [8, 64, 12] {
        check_against_brute_force(1, 2, 40, d, &slots);
    }
}

#[test]
fn key_range_splits_merge_to_the_same_result() {
    // Decode over a long context at batch 1: with 8 threads the 2 KV heads' keys are split.
    let slots = [TokenSlot { row: 0, pos: 1199 }, TokenSlot { row: 1, pos: 700 }];
    let shape = AttentionShape { n_heads: 4, n_kv_heads: 2, head_dim: 64, window: None };
    let items = plan_items(&slots, &shape, 8);
    assert!(items.len() > 4, "expected the key ranges to be split, got {} items", items.len());
    for threads in [1, 8] {
        check_against_brute_force(threads, 2, 1200, 64, &slots);
    }
}

#[test]
fn splits_cover_each_key_range_once() {
    let slots: Vec<TokenSlot> = (0..3).map(|pos| TokenSlot { row: 0, pos: 1000 + pos }).chain([TokenSlot { row: 1, pos: 5000 }]).collect();
    for window in [None, Some(700)] {
        let shape = AttentionShape { n_heads: 6, n_kv_heads: 3, head_dim: 64, window };
        let items = plan_items(&slots, &shape, 4);
        for (first, last) in [(0, 2), (3, 3)] {
            for kv_head in 0..3 {
                let ranges: Vec<&Range<usize>> = items.iter().filter(|i| i.first == first && i.kv_head == kv_head).map(|i| &i.keys).collect();
                assert_eq!(ranges.first().map(|r| r.start), Some(shape.visible(slots[first].pos).start));
                assert_eq!(ranges.last().map(|r| r.end), Some(slots[last].pos + 1));
                assert!(ranges.windows(2).all(|w| w[0].end == w[1].start && w[0].len() >= MIN_SPLIT_KEYS.min(KEY_CHUNK)));
            }
        }
    }
}

#[test]
fn long_prefill_across_key_chunks_equals_brute_force() {
    // 150 tokens after a 30-token prefix: query blocks whose keys span several KEY_CHUNKs.
    let slots: Vec<TokenSlot> = (30..180).map(|pos| TokenSlot { row: 0, pos }).collect();
    check_against_brute_force(2, 1, 180, 64, &slots);
}
