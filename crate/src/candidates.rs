//! Each row's highest logits, for samplers that look at only a few tokens (top-k, and greedy as
//! top-1). Picking them in TypeScript meant a scan of every logit per row per step (~0.1 ms for
//! a 49152-token vocabulary, most of a batch-8 step's time outside the engine); here the scan
//! touches a chunk's values only when the chunk's maximum can place it among the top `n`.

use rayon::prelude::*;

/// `per_row` candidates for every row: token ids and their logits, highest first (ties by
/// lower id, the order a first-maximum argmax gives).
#[derive(Debug, Clone, PartialEq)]
pub struct Candidates {
    pub ids: Vec<u32>,
    pub logits: Vec<f32>,
    pub per_row: usize,
}

/// Logits per chunk whose maximum is taken in the first pass.
const CHUNK: usize = 64;

/// The `n` highest logits of each `vocab`-wide row of `logits` (all of them when `n` ≥ vocab).
/// NaN ranks as −∞.
pub fn top_per_row(logits: &[f32], vocab: usize, n: usize) -> Candidates {
    let per_row = n.min(vocab);
    let rows = logits.len().checked_div(vocab).unwrap_or(0);
    let mut ids = vec![0u32; rows * per_row];
    let mut values = vec![0f32; rows * per_row];
    if per_row > 0 {
        logits.par_chunks_exact(vocab).zip(ids.par_chunks_exact_mut(per_row).zip(values.par_chunks_exact_mut(per_row))).for_each(
            |(row, (ids, values))| {
                for (slot, (id, value)) in top_of_row(row, per_row).into_iter().enumerate() {
                    (ids[slot], values[slot]) = (id, value);
                }
            },
        );
    }
    Candidates { ids, logits: values, per_row }
}

/// The chunk's maximum, NaN skipped (−∞ if nothing else). Eight independent lanes, so the
/// compiler can keep them in one vector register instead of a serial chain of compares.
fn chunk_max(chunk: &[f32]) -> f32 {
    let pick = |m: f32, v: f32| if v > m { v } else { m };
    let mut lanes = [f32::NEG_INFINITY; 8];
    let mut eights = chunk.chunks_exact(8);
    for eight in &mut eights {
        for (lane, &v) in lanes.iter_mut().zip(eight) {
            *lane = pick(*lane, v);
        }
    }
    eights.remainder().iter().chain(&lanes).fold(f32::NEG_INFINITY, |m, &v| pick(m, v))
}

fn rank(value: f32) -> f32 {
    if value.is_nan() {
        f32::NEG_INFINITY
    } else {
        value
    }
}

/// Highest first, then lower id first.
fn by_rank(a: &(u32, f32), b: &(u32, f32)) -> std::cmp::Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

/// The row's `n` highest (`1 ≤ n ≤ row.len()`). The n-th highest chunk maximum is a floor: at
/// least n logits reach it (those maxima), so the top n all do, and only chunks whose maximum
/// reaches it hold any of them.
fn top_of_row(row: &[f32], n: usize) -> Vec<(u32, f32)> {
    let maxima: Vec<f32> = row.chunks(CHUNK).map(chunk_max).collect();
    let floor = if maxima.len() > n {
        let mut order = maxima.clone();
        let (_, nth, _) = order.select_nth_unstable_by(n - 1, |a, b| b.total_cmp(a));
        *nth
    } else {
        f32::NEG_INFINITY
    };
    let mut kept: Vec<(u32, f32)> = Vec::with_capacity(4 * n);
    for (c, (chunk, &max)) in row.chunks(CHUNK).zip(&maxima).enumerate() {
        if max >= floor {
            let first = c * CHUNK;
            kept.extend(chunk.iter().enumerate().filter(|(_, &v)| v >= floor).map(|(i, &v)| ((first + i) as u32, v)));
        }
    }
    // Fewer than n only when NaN filled whole chunks (their maxima stay −∞): rank everything.
    if kept.len() < n {
        kept = row.iter().enumerate().map(|(i, &v)| (i as u32, rank(v))).collect();
    }
    if kept.len() > n {
        kept.select_nth_unstable_by(n - 1, by_rank);
        kept.truncate(n);
    }
    kept.sort_unstable_by(by_rank);
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition: every logit sorted, highest first, ties by id, the first n kept.
    fn sorted_top(row: &[f32], n: usize) -> Vec<(u32, f32)> {
        let mut all: Vec<(u32, f32)> = row.iter().enumerate().map(|(i, &v)| (i as u32, rank(v))).collect();
        all.sort_by(by_rank);
        all.truncate(n);
        all
    }

    fn noisy_row(seed: u64, vocab: usize, levels: u64) -> Vec<f32> {
        let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (0..vocab)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                // few levels make many exact ties, as logits from quantized weights can have
                ((state >> 33) % levels) as f32 / 7.0 - 20.0
            })
            .collect()
    }

    #[test]
    fn matches_a_full_sort_with_ties_and_ragged_chunks() {
        for (vocab, levels) in [(49152, 1 << 20), (49152, 300), (1000, 5), (63, 1 << 20), (130, 2)] {
            for n in [1, 2, 50, 64, 300, vocab, vocab + 7] {
                let rows: Vec<f32> = (0..3).flat_map(|r| noisy_row(r * 1000 + vocab as u64 + levels, vocab, levels)).collect();
                let got = top_per_row(&rows, vocab, n);
                let per_row = n.min(vocab);
                assert_eq!(got.per_row, per_row);
                for (r, row) in rows.chunks(vocab).enumerate() {
                    let want = sorted_top(row, n);
                    let have: Vec<(u32, f32)> = (0..per_row).map(|j| (got.ids[r * per_row + j], got.logits[r * per_row + j])).collect();
                    assert_eq!(have, want, "vocab {vocab} levels {levels} n {n} row {r}");
                }
            }
        }
    }

    #[test]
    fn greedy_candidate_is_the_first_maximum() {
        let row = [1.0, 3.0, -2.0, 3.0, 0.5];
        assert_eq!(top_per_row(&row, 5, 1).ids, vec![1]);
    }

    #[test]
    fn nan_and_infinities_rank_as_floats_with_nan_lowest() {
        let mut row = vec![f32::NAN; 200];
        row[150] = f32::NEG_INFINITY;
        row[7] = 2.0;
        row[199] = f32::INFINITY;
        let got = top_per_row(&row, 200, 3);
        assert_eq!(got.ids[..2], [199, 7]);
        assert_eq!(got.logits[..2], [f32::INFINITY, 2.0]);
        assert_eq!(got.logits[2], f32::NEG_INFINITY);
    }

    #[test]
    fn empty_inputs_give_empty_candidates() {
        assert_eq!(top_per_row(&[], 10, 5).ids, Vec::<u32>::new());
        assert_eq!(top_per_row(&[1.0, 2.0], 2, 0).ids, Vec::<u32>::new());
    }
}
