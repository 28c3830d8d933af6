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

const HEADS: usize = 4;
const KV_HEADS: usize = 2;

/// Fills `len` positions of every row with noise and checks `attend` (planned for `threads`)
/// against brute force for each window.
fn check_against_brute_force(threads: usize, rows: usize, len: usize, d: usize, slots: &[TokenSlot]) {
    let mut cache = KvCache::new(&test_config(1, HEADS, KV_HEADS, d), rows, len).expect("cache");
    let width = KV_HEADS * d;
    for row in 0..rows {
        cache.write(0, row, 0, &noise(row, len * width), &noise(row + 7, len * width));
    }
    for window in [None, Some(5), Some(0), Some(100), Some(300)] {
        assert_matches_brute_force(threads, &cache, slots, &AttentionShape { n_heads: HEADS, n_kv_heads: KV_HEADS, head_dim: d, window });
    }
}

fn assert_matches_brute_force(threads: usize, cache: &KvCache, slots: &[TokenSlot], shape: &AttentionShape) {
    let (heads, d) = (shape.n_heads, shape.head_dim);
    let q = noise(3, slots.len() * heads * d);
    let out = attend_split_for(threads, cache, 0, slots, &q, shape, None);
    for (t, &slot) in slots.iter().enumerate() {
        for head in 0..heads {
            let at = (t * heads + head) * d;
            let want = brute_force(cache, slot, &q[at..at + d], head / (heads / shape.n_kv_heads), shape);
            for (got, want) in out[at..at + d].iter().zip(&want) {
                assert!((got - want).abs() < 1e-5, "window {:?} token {t} head {head}: {got} vs {want}", shape.window);
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
    let items = plan_items(&slots, &shape, 8, &[]);
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
        let items = plan_items(&slots, &shape, 4, &[]);
        for (first, last) in [(0, 2), (3, 3)] {
            for kv_head in 0..3 {
                let ranges: Vec<&Range<usize>> = items.iter().filter(|i| i.tokens[0] == first && i.kv_head == kv_head).map(|i| &i.keys).collect();
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

#[test]
fn rows_sharing_a_prompt_read_it_once_and_match_brute_force() {
    // A 300-token prompt fanned out to 6 rows, then 20 tokens of each row's own. Row 4 was
    // rewound to 200 and rewritten, so the group may share only 200 positions.
    let d = 64;
    let width = KV_HEADS * d;
    let mut cache = KvCache::new(&test_config(1, HEADS, KV_HEADS, d), 6, 400).expect("cache");
    cache.write(0, 0, 0, &noise(0, 300 * width), &noise(7, 300 * width));
    cache.set_seqlen(0, 300);
    for row in 1..6 {
        cache.copy_row(0, row).expect("copy");
    }
    cache.truncate_row(4, 200).expect("truncate");
    cache.write(0, 4, 200, &noise(40, 100 * width), &noise(41, 100 * width));
    for row in 0..6 {
        cache.write(0, row, 300, &noise(row + 10, 20 * width), &noise(row + 20, 20 * width));
    }
    let shape = AttentionShape { n_heads: HEADS, n_kv_heads: KV_HEADS, head_dim: d, window: None };
    let decode: Vec<TokenSlot> = (0..6).map(|row| TokenSlot { row, pos: 300 + row }).collect();
    let two_rows_prefill: Vec<TokenSlot> = [1, 2].iter().flat_map(|&row| (300..320).map(move |pos| TokenSlot { row, pos })).collect();
    // Without row 4 in the pass, rows 1 and 2 share the whole prompt.
    for (slots, len, tokens) in [(&decode, 200, 6), (&two_rows_prefill, 300, 40)] {
        let groups = shared_groups(&cache, slots, &shape);
        assert_eq!(groups.iter().map(|g| (g.source, g.len, g.tokens.len())).collect::<Vec<_>>(), [(0, len, tokens)]);
        for threads in [1, 8] {
            assert_matches_brute_force(threads, &cache, slots, &shape);
        }
    }
}
