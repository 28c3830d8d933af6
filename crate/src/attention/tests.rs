use super::*;
use crate::config::test_config;
use crate::kv_cache::KvType;

/// Deterministic values in [-1, 1) that differ everywhere.
fn noise(seed: usize, n: usize) -> Vec<f32> {
    (0..n).map(|i| (((i * 7919 + seed * 104_729) % 1000) as f32 / 500.0) - 1.0).collect()
}

/// Textbook attention for one query head: every visible key, std `exp`, no blocking.
fn brute_force(cache: &KvCache, slot: TokenSlot, q: &[f32], kv_head: usize, shape: &AttentionShape) -> Vec<f32> {
    let (d, stride) = (shape.head_dim, shape.n_kv_heads * shape.head_dim);
    let (k, v) = cache.row(0, slot.row).widened();
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
/// against brute force for each window, over f16 and f32 stores.
fn check_against_brute_force(threads: usize, rows: usize, len: usize, d: usize, slots: &[TokenSlot]) {
    for kv_type in [KvType::F16, KvType::F32] {
        let mut cache = KvCache::new(&test_config(1, HEADS, KV_HEADS, d), rows, len, kv_type).expect("cache");
        let width = KV_HEADS * d;
        for row in 0..rows {
            cache.write(0, row, 0, &noise(row, len * width), &noise(row + 7, len * width));
        }
        for window in [None, Some(5), Some(0), Some(100), Some(300)] {
            assert_matches_brute_force(
                threads,
                &cache,
                slots,
                &AttentionShape { n_heads: HEADS, n_kv_heads: KV_HEADS, head_dim: d, window },
            );
        }
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
fn prefill_and_windowed_attention_equal_brute_force() {
    // Row 0 decodes one token; row 1 prefills 21 tokens after a 19-token prefix (two blocks).
    let slots: Vec<TokenSlot> =
        std::iter::once(TokenSlot { row: 0, pos: 39 }).chain((19..40).map(|pos| TokenSlot { row: 1, pos })).collect();
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
                let ranges: Vec<&Range<usize>> =
                    items.iter().filter(|i| i.tokens[0] == first && i.kv_head == kv_head).map(|i| &i.keys).collect();
                assert_eq!(ranges.first().map(|r| r.start), Some(shape.visible(slots[first].pos).start));
                assert_eq!(ranges.last().map(|r| r.end), Some(slots[last].pos + 1));
                assert!(ranges.windows(2).all(|w| w[0].end == w[1].start && w[0].end % SPLIT == 0));
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
    // A 600-token prompt fanned out to 6 rows, then 20 tokens of each row's own. Row 4 was
    // rewound to 400 and rewritten, so the group may share only 400 positions, of which whole
    // splits: 256.
    let cache = fanned_out_cache(6, 600, 20, Some((4, 400)));
    let shape = AttentionShape { n_heads: HEADS, n_kv_heads: KV_HEADS, head_dim: 64, window: None };
    let decode: Vec<TokenSlot> = (0..6).map(|row| TokenSlot { row, pos: 600 + row }).collect();
    let two_rows_prefill: Vec<TokenSlot> = [1, 2].iter().flat_map(|&row| (600..620).map(move |pos| TokenSlot { row, pos })).collect();
    // Without row 4 in the pass, rows 1 and 2 share the whole prompt's splits.
    for (slots, len, tokens) in [(&decode, 256, 6), (&two_rows_prefill, 512, 40)] {
        let groups = shared_groups(&cache, slots, &shape);
        assert_eq!(groups.iter().map(|g| (g.source, g.len, g.tokens.len())).collect::<Vec<_>>(), [(0, len, tokens)]);
        for threads in [1, 8] {
            assert_matches_brute_force(threads, &cache, slots, &shape);
        }
    }
}

/// `rows` rows of d = 64 holding a `prompt` of noise copied from row 0, then `own` positions of
/// each row's own; `rewound` rewinds a row to a length and rewrites its prompt from there.
fn fanned_out_cache(rows: usize, prompt: usize, own: usize, rewound: Option<(usize, usize)>) -> KvCache {
    let width = KV_HEADS * 64;
    let mut cache = KvCache::new(&test_config(1, HEADS, KV_HEADS, 64), rows, prompt + own + 8, KvType::F16).expect("cache");
    cache.write(0, 0, 0, &noise(0, prompt * width), &noise(7, prompt * width));
    cache.set_seqlen(0, prompt);
    for row in 1..rows {
        cache.copy_row(0, row).expect("copy");
    }
    if let Some((row, len)) = rewound {
        cache.truncate_row(row, len).expect("truncate");
        cache.write(0, row, len, &noise(40, (prompt - len) * width), &noise(41, (prompt - len) * width));
    }
    for row in 0..rows {
        cache.write(0, row, prompt, &noise(row + 10, own * width), &noise(row + 20, own * width));
    }
    cache
}

/// The same query (same vector, row and position) gets the same bits in every pass that holds
/// it: a 300-token prefill after a 400-token prompt, that prefill in chunks of 7, one token at a
/// time, planned for 1 or 8 threads, beside rows sharing the prompt, with and without a window.
#[test]
fn a_querys_output_does_not_depend_on_its_pass() {
    let d = 64;
    let cache = fanned_out_cache(3, 700, 0, None);
    let vector = |pos: usize| noise(pos + 1000, HEADS * d);
    let attend_slots = |threads: usize, slots: &[TokenSlot], shape: &AttentionShape| {
        let q: Vec<f32> = slots.iter().flat_map(|s| vector(s.pos)).collect();
        attend_split_for(threads, &cache, 0, slots, &q, shape, None)
    };
    let at = |pos: usize| TokenSlot { row: 0, pos };
    for window in [None, Some(300)] {
        let shape = AttentionShape { n_heads: HEADS, n_kv_heads: KV_HEADS, head_dim: d, window };
        let prefill: Vec<TokenSlot> = (400..700).map(at).collect();
        let whole = attend_slots(1, &prefill, &shape);
        let want = |pos: usize| &whole[(pos - 400) * HEADS * d..][..HEADS * d];
        for threads in [1, 8] {
            for chunk in prefill.chunks(7) {
                let got = attend_slots(threads, chunk, &shape);
                assert!(
                    got[..] == whole[(chunk[0].pos - 400) * HEADS * d..][..got.len()],
                    "window {window:?}, {threads} threads: a chunk at {} changed",
                    chunk[0].pos
                );
            }
            for pos in [400, 511, 512, 513, 699] {
                assert!(
                    attend_slots(threads, &[at(pos)], &shape) == want(pos),
                    "window {window:?}, {threads} threads: decode at {pos} changed"
                );
                // Rows 1 and 2 hold row 0's positions: the same query there, beside row 0's.
                let beside: Vec<TokenSlot> = (0..3).map(|row| TokenSlot { row, pos }).collect();
                let got = attend_slots(threads, &beside, &shape);
                for row in 0..3 {
                    assert!(
                        &got[row * HEADS * d..][..HEADS * d] == want(pos),
                        "window {window:?}, {threads} threads: row {row} beside the others at {pos} changed"
                    );
                }
            }
        }
    }
}
