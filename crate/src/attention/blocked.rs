//! An item with many queries (prefill) as two matrix products, `S = Q·Kᵀ` and `O = P·V`, on the
//! `gemm` crate's register-tiled FMA kernels: the per-query kernels in `kernels.rs` reload each
//! query and reduce every dot product horizontally, which made attention 11% of a 512-token
//! prefill. Keys and values are read in place from the cache through strides.

use std::ops::Range;

use gemm::{gemm, Parallelism};

use super::{kernels, Partial};

/// Queries of one item, gathered: `(nq, d)` row-major, and the key positions each one sees.
pub struct Queries {
    pub values: Vec<f32>,
    pub seen: Vec<Range<usize>>,
}

/// `keys`/`values` start at the item's first key of its KV head; consecutive positions are
/// `stride` floats apart and each holds `d` floats.
pub fn attend(queries: &Queries, keys: &[f32], values: &[f32], stride: usize, d: usize, span: Range<usize>, scale: f32) -> Partial {
    let (nq, n) = (queries.seen.len(), span.len());
    let reach = n.saturating_sub(1) * stride + d;
    assert!(n > 0 && keys.len() >= reach && values.len() >= reach && queries.values.len() == nq * d, "attention operands out of range");
    let mut scores = vec![0.0f32; nq * n];
    // SAFETY: the assert bounds every read: row j of Kᵀ's columns is keys[j*stride..][..d], and
    // the output and queries are exactly nq×n and nq×d.
    unsafe { product(nq, n, d, &mut scores, queries.values.as_ptr(), d as isize, 1, keys.as_ptr(), 1, stride as isize, scale) };
    let (mut max, mut sum) = (Vec::with_capacity(nq), Vec::with_capacity(nq));
    for (row, seen) in scores.chunks_exact_mut(n).zip(&queries.seen) {
        let lo = seen.start.clamp(span.start, span.end) - span.start;
        let hi = (seen.end.clamp(span.start, span.end) - span.start).max(lo);
        row[..lo].fill(f32::NEG_INFINITY);
        row[hi..].fill(f32::NEG_INFINITY);
        let (m, s) = kernels::exp_shifted(row);
        max.push(m);
        sum.push(s);
    }
    let mut out = vec![0.0f32; nq * d];
    // SAFETY: as above; V's rows are values[j*stride..][..d].
    unsafe { product(nq, d, n, &mut out, scores.as_ptr(), n as isize, 1, values.as_ptr(), stride as isize, 1, 1.0) };
    Partial { max, sum, out }
}

/// `dst (m×n, row-major) = scale · lhs (m×k) · rhs (k×n)`, operands given by row and column
/// strides.
#[allow(clippy::too_many_arguments)]
unsafe fn product(m: usize, n: usize, k: usize, dst: &mut [f32], lhs: *const f32, lhs_rs: isize, lhs_cs: isize, rhs: *const f32, rhs_rs: isize, rhs_cs: isize, scale: f32) {
    gemm(m, n, k, dst.as_mut_ptr(), 1, n as isize, false, lhs, lhs_cs, lhs_rs, rhs, rhs_cs, rhs_rs, 0.0, scale, false, false, false, Parallelism::None);
}
