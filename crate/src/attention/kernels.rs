//! The three inner loops of attention, over one query and a run of cached keys or values laid
//! out `stride` elements apart: scores, shifted exponentials, and the weighted sum of values.
//! Keys and values are the cache's elements (f16 or f32), widened to f32 as they are loaded;
//! all arithmetic is f32. AVX2 versions where the build targets it (F16C widens), a portable definition beside
//! each, and the same `KVENGINE_KERNEL=portable` switch as the matmul to run the portable ones.

use crate::kv_cache::KvElement;

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma", target_feature = "f16c"))]
use crate::matmul::{kernel, Kernel};

/// `scores[j] = scale · (q · key_j)`, key `j` at `keys[j * stride..][..q.len()]`.
pub fn scores<E: KvElement>(q: &[f32], keys: &[E], stride: usize, scale: f32, scores: &mut [f32]) {
    assert!(scores.is_empty() || keys.len() >= (scores.len() - 1) * stride + q.len(), "keys out of range");
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma", target_feature = "f16c"))]
    if kernel() != Kernel::Portable && q.len().is_multiple_of(8) {
        // SAFETY: the assert above bounds every key read; q.len() is a multiple of 8 lanes.
        return unsafe { x86::scores(q, keys, stride, scale, scores) };
    }
    portable::scores(q, keys, stride, scale, scores)
}

/// `out += Σ_j p[j] · value_j`, value `j` at `values[j * stride..][..out.len()]`.
pub fn accumulate<E: KvElement>(p: &[f32], values: &[E], stride: usize, out: &mut [f32]) {
    assert!(p.is_empty() || values.len() >= (p.len() - 1) * stride + out.len(), "values out of range");
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma", target_feature = "f16c"))]
    if kernel() != Kernel::Portable && out.len().is_multiple_of(8) {
        // SAFETY: the assert above bounds every value read; out.len() is a multiple of 8 lanes.
        return unsafe { x86::accumulate(p, values, stride, out) };
    }
    portable::accumulate(p, values, stride, out)
}

/// `scores` for two queries over the same keys: each key is loaded once for both, and every
/// score comes out with the same bits as `scores` gives for its query alone.
pub fn scores_pair<E: KvElement>(q: [&[f32]; 2], keys: &[E], stride: usize, scale: f32, out: [&mut [f32]; 2]) {
    let [out0, out1] = out;
    assert!(q[0].len() == q[1].len() && out0.len() == out1.len(), "paired queries differ in shape");
    assert!(out0.is_empty() || keys.len() >= (out0.len() - 1) * stride + q[0].len(), "keys out of range");
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma", target_feature = "f16c"))]
    if kernel() != Kernel::Portable && q[0].len().is_multiple_of(8) {
        // SAFETY: the asserts above bound every key read; the width is a multiple of 8 lanes;
        // the wide kernel runs only where the CPU has AVX-512VL.
        return unsafe {
            if x86::wide() {
                x86::scores_pair_wide(q, keys, stride, scale, [out0, out1])
            } else {
                x86::scores_pair(q, keys, stride, scale, [out0, out1])
            }
        };
    }
    portable::scores(q[0], keys, stride, scale, out0);
    portable::scores(q[1], keys, stride, scale, out1);
}

/// `accumulate` for two queries' weights over the same values: each value is loaded once for
/// both, and each output gets the same bits as `accumulate` gives it alone.
pub fn accumulate_pair<E: KvElement>(p: [&[f32]; 2], values: &[E], stride: usize, out: [&mut [f32]; 2]) {
    let [out0, out1] = out;
    assert!(p[0].len() == p[1].len() && out0.len() == out1.len(), "paired queries differ in shape");
    assert!(p[0].is_empty() || values.len() >= (p[0].len() - 1) * stride + out0.len(), "values out of range");
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma", target_feature = "f16c"))]
    if kernel() != Kernel::Portable && out0.len().is_multiple_of(8) {
        // SAFETY: the asserts above bound every value read; the width is a multiple of 8 lanes;
        // the wide kernel runs only where the CPU has AVX-512VL.
        return unsafe {
            if x86::wide() {
                x86::accumulate_pair_wide(p, values, stride, [out0, out1])
            } else {
                x86::accumulate_pair(p, values, stride, [out0, out1])
            }
        };
    }
    portable::accumulate(p[0], values, stride, out0);
    portable::accumulate(p[1], values, stride, out1);
}

/// Asks for the vectors of positions `range` (position j's `d` elements at `vectors[j * stride..]`)
/// to be brought into L2: where the hardware prefetcher does not follow a walk. Positions past
/// `vectors` are skipped.
pub fn prefetch<E: KvElement>(vectors: &[E], stride: usize, d: usize, range: std::ops::Range<usize>) {
    #[cfg(target_arch = "x86_64")]
    for j in range.take_while(|j| j * stride + d <= vectors.len()) {
        let at = vectors[j * stride..].as_ptr();
        for line in (0..d).step_by(64 / std::mem::size_of::<E>()) {
            // SAFETY: a prefetch reads nothing architecturally and cannot fault.
            unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(at.wrapping_add(line).cast()) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (vectors, stride, d, range);
}

/// `x ← exp(x - max)` over the row; returns `(max, Σ exp)`. `-inf` entries become exactly 0;
/// a row of only `-inf` is left as it is and returns `(-inf, 0)`.
pub fn exp_shifted(row: &mut [f32]) -> (f32, f32) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if max == f32::NEG_INFINITY {
        return (max, 0.0);
    }
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma", target_feature = "f16c"))]
    if kernel() != Kernel::Portable {
        // SAFETY: only reads and writes inside `row`.
        return (max, unsafe { x86::exp_shifted(row, max) });
    }
    (max, portable::exp_shifted(row, max))
}

pub(super) mod portable {
    use crate::kv_cache::KvElement;

    /// Independent per-lane accumulators: a fixed sum order that also vectorises.
    pub fn dot<E: KvElement>(a: &[f32], b: &[E]) -> f32 {
        const LANES: usize = 16;
        let mut acc = [0.0f32; LANES];
        let (a_chunks, b_chunks) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
        let tail: f32 = a_chunks.remainder().iter().zip(b_chunks.remainder()).map(|(x, y)| x * y.to_f32()).sum();
        for (x, y) in a_chunks.zip(b_chunks) {
            for i in 0..LANES {
                acc[i] += x[i] * y[i].to_f32();
            }
        }
        acc.iter().sum::<f32>() + tail
    }

    pub fn scores<E: KvElement>(q: &[f32], keys: &[E], stride: usize, scale: f32, scores: &mut [f32]) {
        for (j, s) in scores.iter_mut().enumerate() {
            *s = dot(q, &keys[j * stride..][..q.len()]) * scale;
        }
    }

    pub fn accumulate<E: KvElement>(p: &[f32], values: &[E], stride: usize, out: &mut [f32]) {
        let d = out.len();
        for (j, &pj) in p.iter().enumerate() {
            for (o, &v) in out.iter_mut().zip(&values[j * stride..][..d]) {
                *o += pj * v.to_f32();
            }
        }
    }

    pub fn exp_shifted(row: &mut [f32], max: f32) -> f32 {
        let mut sum = 0.0f32;
        for x in row.iter_mut() {
            *x = if *x == f32::NEG_INFINITY { 0.0 } else { crate::exp::exp_approx(*x - max) };
            sum += *x;
        }
        sum
    }
}

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma", target_feature = "f16c"))]
mod x86 {
    use std::arch::x86_64::*;

    use crate::kv_cache::KvElement;

    /// Eight keys at a time, one accumulator each, reduced together by a tree of `hadd`s.
    pub unsafe fn scores<E: KvElement>(q: &[f32], keys: &[E], stride: usize, scale: f32, scores: &mut [f32]) {
        let d = q.len();
        let (qp, kp) = (q.as_ptr(), keys.as_ptr());
        let n = scores.len();
        let mut j = 0;
        while j + 8 <= n {
            let mut acc = [_mm256_setzero_ps(); 8];
            for c in (0..d).step_by(8) {
                let qv = _mm256_loadu_ps(qp.add(c));
                for (kk, a) in acc.iter_mut().enumerate() {
                    *a = _mm256_fmadd_ps(qv, E::load8(kp.add((j + kk) * stride + c)), *a);
                }
            }
            let sums = reduce8(&acc);
            _mm256_storeu_ps(scores.as_mut_ptr().add(j), _mm256_mul_ps(sums, _mm256_set1_ps(scale)));
            j += 8;
        }
        for (jj, s) in scores.iter_mut().enumerate().skip(j) {
            let mut acc = _mm256_setzero_ps();
            for c in (0..d).step_by(8) {
                acc = _mm256_fmadd_ps(_mm256_loadu_ps(qp.add(c)), E::load8(kp.add(jj * stride + c)), acc);
            }
            *s = horizontal_sum(acc) * scale;
        }
    }

    /// Four keys at a time for both queries (eight accumulators), reduced by the same tree as
    /// `scores`; keys past its last group of eight take its one-at-a-time sum, as they do there.
    pub unsafe fn scores_pair<E: KvElement>(q: [&[f32]; 2], keys: &[E], stride: usize, scale: f32, out: [&mut [f32]; 2]) {
        let (d, n) = (q[0].len(), out[0].len());
        let kp = keys.as_ptr();
        let grouped = n / 8 * 8;
        let mut j = 0;
        while j < grouped {
            let mut acc = [_mm256_setzero_ps(); 8];
            for c in (0..d).step_by(8) {
                let qv = [_mm256_loadu_ps(q[0].as_ptr().add(c)), _mm256_loadu_ps(q[1].as_ptr().add(c))];
                for kk in 0..4 {
                    let key = E::load8(kp.add((j + kk) * stride + c));
                    acc[kk] = _mm256_fmadd_ps(qv[0], key, acc[kk]);
                    acc[4 + kk] = _mm256_fmadd_ps(qv[1], key, acc[4 + kk]);
                }
            }
            let sums = _mm256_mul_ps(reduce8(&acc), _mm256_set1_ps(scale));
            _mm_storeu_ps(out[0].as_mut_ptr().add(j), _mm256_castps256_ps128(sums));
            _mm_storeu_ps(out[1].as_mut_ptr().add(j), _mm256_extractf128_ps(sums, 1));
            j += 4;
        }
        if grouped < n {
            let [out0, out1] = out;
            scores(q[0], &keys[grouped * stride..], stride, scale, &mut out0[grouped..]);
            scores(q[1], &keys[grouped * stride..], stride, scale, &mut out1[grouped..]);
        }
    }

    /// Whether the paired kernels may take AVX-512VL's 32 vector registers: on CPUs with it,
    /// unless a lesser kernel was asked for (`KVENGINE_KERNEL`).
    pub fn wide() -> bool {
        static WIDE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *WIDE.get_or_init(|| super::kernel() == super::Kernel::Avx512 && is_x86_feature_detected!("avx512vl"))
    }

    /// `scores_pair` with 32 registers: eight keys at a time for both queries, sixteen
    /// accumulators, so each step loads ten vectors for sixteen multiply-adds where
    /// `scores_pair` loads six for eight. Each key keeps its own accumulator and the same
    /// reduction tree, so the same bits.
    #[target_feature(enable = "avx512f,avx512vl")]
    pub unsafe fn scores_pair_wide<E: KvElement>(q: [&[f32]; 2], keys: &[E], stride: usize, scale: f32, out: [&mut [f32]; 2]) {
        let (d, n) = (q[0].len(), out[0].len());
        let kp = keys.as_ptr();
        let grouped = n / 8 * 8;
        let mut j = 0;
        while j < grouped {
            let mut acc = [[_mm256_setzero_ps(); 8]; 2];
            for c in (0..d).step_by(8) {
                let qv = [_mm256_loadu_ps(q[0].as_ptr().add(c)), _mm256_loadu_ps(q[1].as_ptr().add(c))];
                for kk in 0..8 {
                    let key = E::load8(kp.add((j + kk) * stride + c));
                    acc[0][kk] = _mm256_fmadd_ps(qv[0], key, acc[0][kk]);
                    acc[1][kk] = _mm256_fmadd_ps(qv[1], key, acc[1][kk]);
                }
            }
            for half in 0..2 {
                let four = |i: usize| -> [__m256; 4] { std::array::from_fn(|kk| acc[i][4 * half + kk]) };
                let [a, b] = [four(0), four(1)];
                let sums = _mm256_mul_ps(reduce8(&[a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]]), _mm256_set1_ps(scale));
                _mm_storeu_ps(out[0].as_mut_ptr().add(j + 4 * half), _mm256_castps256_ps128(sums));
                _mm_storeu_ps(out[1].as_mut_ptr().add(j + 4 * half), _mm256_extractf128_ps(sums, 1));
            }
            j += 8;
        }
        if grouped < n {
            let [out0, out1] = out;
            scores(q[0], &keys[grouped * stride..], stride, scale, &mut out0[grouped..]);
            scores(q[1], &keys[grouped * stride..], stride, scale, &mut out1[grouped..]);
        }
    }

    /// `accumulate_pair` with 32 registers: 64 floats of each output (sixteen registers) per
    /// walk over the values, so each value is loaded once per query pair rather than twice.
    #[target_feature(enable = "avx512f,avx512vl")]
    pub unsafe fn accumulate_pair_wide<E: KvElement>(p: [&[f32]; 2], values: &[E], stride: usize, out: [&mut [f32]; 2]) {
        let d = out[0].len();
        let outs = [out[0].as_mut_ptr(), out[1].as_mut_ptr()];
        let mut c = 0;
        while c + 64 <= d {
            accumulate_pair_lanes::<_, 8>(p, values.as_ptr().add(c), stride, [outs[0].add(c), outs[1].add(c)]);
            c += 64;
        }
        while c < d {
            accumulate_pair_lanes::<_, 1>(p, values.as_ptr().add(c), stride, [outs[0].add(c), outs[1].add(c)]);
            c += 8;
        }
    }

    /// `accumulate`'s walk, two queries at a time: 32 floats of each output (eight registers
    /// between them) across all values, then 8 at a time.
    pub unsafe fn accumulate_pair<E: KvElement>(p: [&[f32]; 2], values: &[E], stride: usize, out: [&mut [f32]; 2]) {
        let d = out[0].len();
        let outs = [out[0].as_mut_ptr(), out[1].as_mut_ptr()];
        let mut c = 0;
        while c + 32 <= d {
            accumulate_pair_lanes::<_, 4>(p, values.as_ptr().add(c), stride, [outs[0].add(c), outs[1].add(c)]);
            c += 32;
        }
        while c < d {
            accumulate_pair_lanes::<_, 1>(p, values.as_ptr().add(c), stride, [outs[0].add(c), outs[1].add(c)]);
            c += 8;
        }
    }

    #[inline(always)]
    unsafe fn accumulate_pair_lanes<E: KvElement, const R: usize>(p: [&[f32]; 2], values: *const E, stride: usize, out: [*mut f32; 2]) {
        let mut acc: [[__m256; R]; 2] = std::array::from_fn(|i| std::array::from_fn(|r| _mm256_loadu_ps(out[i].add(8 * r))));
        for (j, (&p0, &p1)) in p[0].iter().zip(p[1]).enumerate() {
            let w = [_mm256_set1_ps(p0), _mm256_set1_ps(p1)];
            let [acc0, acc1] = &mut acc;
            for (r, (a0, a1)) in acc0.iter_mut().zip(acc1.iter_mut()).enumerate() {
                let v = E::load8(values.add(j * stride + 8 * r));
                *a0 = _mm256_fmadd_ps(w[0], v, *a0);
                *a1 = _mm256_fmadd_ps(w[1], v, *a1);
            }
        }
        for (i, acc) in acc.iter().enumerate() {
            for (r, a) in acc.iter().enumerate() {
                _mm256_storeu_ps(out[i].add(8 * r), *a);
            }
        }
    }

    /// Lane i of the result is the sum of all lanes of `v[i]`.
    #[inline(always)]
    unsafe fn reduce8(v: &[__m256; 8]) -> __m256 {
        let a = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
        let b = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
        _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31))
    }

    #[inline(always)]
    unsafe fn horizontal_sum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)))
    }

    /// The output is walked 64 floats (8 registers) at a time, so the running sums stay in
    /// registers across all keys; narrower heads or tails go 8 floats at a time.
    pub unsafe fn accumulate<E: KvElement>(p: &[f32], values: &[E], stride: usize, out: &mut [f32]) {
        let mut c = 0;
        while c + 64 <= out.len() {
            accumulate_lanes::<_, 8>(p, values.as_ptr().add(c), stride, out.as_mut_ptr().add(c));
            c += 64;
        }
        while c < out.len() {
            accumulate_lanes::<_, 1>(p, values.as_ptr().add(c), stride, out.as_mut_ptr().add(c));
            c += 8;
        }
    }

    #[inline(always)]
    unsafe fn accumulate_lanes<E: KvElement, const R: usize>(p: &[f32], values: *const E, stride: usize, out: *mut f32) {
        let mut acc: [__m256; R] = std::array::from_fn(|r| _mm256_loadu_ps(out.add(8 * r)));
        for (j, &pj) in p.iter().enumerate() {
            let w = _mm256_set1_ps(pj);
            for (r, a) in acc.iter_mut().enumerate() {
                *a = _mm256_fmadd_ps(w, E::load8(values.add(j * stride + 8 * r)), *a);
            }
        }
        for (r, a) in acc.iter().enumerate() {
            _mm256_storeu_ps(out.add(8 * r), *a);
        }
    }

    /// `exp_approx` eight lanes at a time (`exp8`); the tail goes through the portable loop.
    pub unsafe fn exp_shifted(row: &mut [f32], max: f32) -> f32 {
        let (shift, neg_inf) = (_mm256_set1_ps(max), _mm256_set1_ps(f32::NEG_INFINITY));
        let mut sum = _mm256_setzero_ps();
        let mut chunks = row.chunks_exact_mut(8);
        for chunk in &mut chunks {
            let x = _mm256_loadu_ps(chunk.as_ptr());
            let e = crate::exp::x86::exp8(_mm256_sub_ps(x, shift));
            let e = _mm256_andnot_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(x, neg_inf), e);
            _mm256_storeu_ps(chunk.as_mut_ptr(), e);
            sum = _mm256_add_ps(sum, e);
        }
        horizontal_sum(sum) + super::portable::exp_shifted(chunks.into_remainder(), max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noise(seed: usize, n: usize) -> Vec<f32> {
        (0..n).map(|i| (((i * 7919 + seed * 104_729) % 1000) as f32 / 500.0) - 1.0).collect()
    }

    /// Cached elements as a cache of element type `E` holds them.
    fn cached<E: KvElement>(seed: usize, n: usize) -> Vec<E> {
        let mut out = vec![E::ZERO; n];
        E::store(&mut out, &noise(seed, n));
        out
    }

    #[test]
    fn exp_shifted_zeroes_masked_positions() {
        for len in [4, 8, 13, 40] {
            let mut row: Vec<f32> = noise(len, len).iter().map(|x| x * 10.0).collect();
            row[1] = f32::NEG_INFINITY;
            let want_max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let want: Vec<f32> = row.iter().map(|x| (x - want_max).exp()).collect();
            let (max, sum) = exp_shifted(&mut row);
            assert_eq!(max, want_max);
            assert_eq!(row[1], 0.0);
            for (got, want) in row.iter().zip(&want) {
                assert!((got - want).abs() < 1e-6, "len {len}: {got} vs {want}");
            }
            assert!((sum - want.iter().sum::<f32>()).abs() < 1e-5);
        }
        let mut masked = [f32::NEG_INFINITY; 3];
        assert_eq!(exp_shifted(&mut masked), (f32::NEG_INFINITY, 0.0));
    }

    /// A query's scores and weighted values do not depend on whether it was paired, so how an
    /// item's queries pair up (which follows the batch) cannot move any result.
    #[test]
    fn paired_kernels_give_each_query_its_own_bits() {
        paired_bits::<half::f16>();
        paired_bits::<f32>();
    }

    fn paired_bits<E: KvElement>() {
        for (d, stride, n) in [(64, 192, 37), (64, 64, 8), (128, 256, 64), (8, 8, 5), (80, 80, 17), (12, 12, 9), (64, 192, 0)] {
            let keys = cached::<E>(n + 1, n.max(1) * stride);
            let (q0, q1) = (noise(d, d), noise(d + 3, d));
            let (mut alone0, mut alone1) = (vec![0.0; n], vec![0.0; n]);
            scores(&q0, &keys, stride, 0.125, &mut alone0);
            scores(&q1, &keys, stride, 0.125, &mut alone1);
            let (mut paired0, mut paired1) = (vec![0.0; n], vec![0.0; n]);
            scores_pair([&q0, &q1], &keys, stride, 0.125, [&mut paired0, &mut paired1]);
            assert_eq!((&alone0, &alone1), (&paired0, &paired1), "scores d {d} n {n}");

            let (p0, p1) = (noise(7, n), noise(8, n));
            let (mut alone0, mut alone1) = (noise(1, d), noise(2, d));
            let (mut paired0, mut paired1) = (alone0.clone(), alone1.clone());
            accumulate(&p0, &keys, stride, &mut alone0);
            accumulate(&p1, &keys, stride, &mut alone1);
            accumulate_pair([&p0, &p1], &keys, stride, [&mut paired0, &mut paired1]);
            assert_eq!((&alone0, &alone1), (&paired0, &paired1), "values d {d} n {n}");
        }
    }

    /// The dispatching kernels (AVX2 on this build) against the portable definitions and a
    /// plain f64 sum, for head widths with and without 64-float blocks and ragged key counts.
    #[test]
    fn kernels_equal_their_definitions() {
        definitions::<half::f16>();
        definitions::<f32>();
    }

    fn definitions<E: KvElement>() {
        for (d, stride, n) in [(64, 192, 37), (128, 256, 64), (8, 8, 5), (80, 80, 17), (12, 12, 9)] {
            let (q, keys) = (noise(d, d), cached::<E>(n, n * stride));
            let (mut got, mut want) = (vec![0.0; n], vec![0.0; n]);
            scores(&q, &keys, stride, 0.125, &mut got);
            portable::scores(&q, &keys, stride, 0.125, &mut want);
            for j in 0..n {
                let exact: f64 = (0..d).map(|c| q[c] as f64 * keys[j * stride + c].to_f32() as f64).sum::<f64>() * 0.125;
                assert!((got[j] as f64 - exact).abs() < 1e-5 && (want[j] as f64 - exact).abs() < 1e-5, "d {d} key {j}");
            }
            let p = noise(7, n);
            let (mut got, mut want) = (noise(1, d), noise(1, d));
            accumulate(&p, &keys, stride, &mut got);
            portable::accumulate(&p, &keys, stride, &mut want);
            for c in 0..d {
                let exact = noise(1, d)[c] as f64 + (0..n).map(|j| p[j] as f64 * keys[j * stride + c].to_f32() as f64).sum::<f64>();
                assert!((got[c] as f64 - exact).abs() < 1e-4 && (want[c] as f64 - exact).abs() < 1e-4, "d {d} lane {c}");
            }
        }
    }
}
