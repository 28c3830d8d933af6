//! `e^x`, defined once: a scalar definition and eight lanes of AVX2 that give the same bits,
//! for softmax's shifted exponentials (`attention/kernels.rs`) and the gated MLP's sigmoids
//! (`model::gated`).

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma", target_feature = "f16c"))]
use crate::matmul::{kernel, Kernel};

/// `e^x` to about 2 ulp for x in [-87, 88] (see `exp_approx`); below flushes to zero.
pub fn exp(x: f32) -> f32 {
    exp_approx(x.min(88.0))
}

/// `exp` of every value in place, each with the bits `exp` gives it: eight at a time on AVX2,
/// where a gated MLP's scalar `exp`s were 6% of a 1B model's prefill.
pub fn exp_each(xs: &mut [f32]) {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma", target_feature = "f16c"))]
    if kernel() != Kernel::Portable {
        // SAFETY: only reads and writes inside `xs`.
        return unsafe { x86::exp_each(xs) };
    }
    xs.iter_mut().for_each(|x| *x = exp(*x));
}

/// `e^x` to about 2 ulp for the range softmax uses (x <= 0), branch-free: x = n·ln2 + r
/// with |r| <= ln2/2, e^r by its degree-6 Taylor polynomial, 2^n put into the exponent.
/// Each step is `x86::exp8`'s (ties round to even, as `vroundps` does), so both give the
/// same bits.
#[inline(always)]
pub(crate) fn exp_approx(x: f32) -> f32 {
    // Below this e^x is under f32's smallest normal; flushing to zero is what softmax wants.
    let x = x.max(-87.0);
    let n = (x * LOG2_E).round_ties_even();
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let p = TAYLOR.iter().rev().fold(0.0, |acc, &c| acc * r + c);
    p * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

const LOG2_E: f32 = std::f32::consts::LOG2_E;
const LN2_HI: f32 = 0.693_145_75;
const LN2_LO: f32 = 1.428_606_8e-6;
/// 1/k! for k = 0..=6.
const TAYLOR: [f32; 7] = [1.0, 1.0, 0.5, 1.0 / 6.0, 1.0 / 24.0, 1.0 / 120.0, 1.0 / 720.0];

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma", target_feature = "f16c"))]
pub(crate) mod x86 {
    use std::arch::x86_64::*;

    pub unsafe fn exp_each(xs: &mut [f32]) {
        let mut chunks = xs.chunks_exact_mut(8);
        for chunk in &mut chunks {
            let x = _mm256_min_ps(_mm256_loadu_ps(chunk.as_ptr()), _mm256_set1_ps(88.0));
            _mm256_storeu_ps(chunk.as_mut_ptr(), exp8(x));
        }
        chunks.into_remainder().iter_mut().for_each(|x| *x = super::exp(*x));
    }

    /// `exp_approx` in each lane.
    #[inline(always)]
    pub unsafe fn exp8(x: __m256) -> __m256 {
        let x = _mm256_max_ps(x, _mm256_set1_ps(-87.0));
        let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm256_mul_ps(x, _mm256_set1_ps(super::LOG2_E)));
        let r = _mm256_sub_ps(
            _mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(super::LN2_HI))),
            _mm256_mul_ps(n, _mm256_set1_ps(super::LN2_LO)),
        );
        let mut p = _mm256_setzero_ps();
        for &c in super::TAYLOR.iter().rev() {
            p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(c));
        }
        let bits = _mm256_slli_epi32::<23>(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)));
        _mm256_mul_ps(p, _mm256_castsi256_ps(bits))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_approx_matches_std_exp() {
        let mut worst = 0.0f32;
        // the whole range `exp` serves, positive side included (SiLU's e^-g)
        for i in -87_000..=88_000 {
            let x = i as f32 / 1000.0;
            let (got, want) = (exp(x), x.exp());
            if want > f32::MIN_POSITIVE {
                worst = worst.max(((got - want) / want).abs());
            }
        }
        assert!(worst < 1e-6, "worst relative error {worst}");
    }

    /// Whole vectors and a tail, over SiLU's range and the points where `x · log2 e` lies half
    /// way between integers (where rounding ties could part the two roads).
    #[test]
    fn exp_each_gives_exps_bits() {
        let halves = (-120..=120).map(|k| (k as f32 + 0.5) / LOG2_E);
        let mut xs: Vec<f32> =
            (-90_000..=90_000).step_by(7).map(|i| i as f32 / 1000.0).chain(halves).chain([f32::NEG_INFINITY, 100.0]).collect();
        let want: Vec<u32> = xs.iter().map(|&x| exp(x).to_bits()).collect();
        exp_each(&mut xs);
        assert!(xs.iter().map(|x| x.to_bits()).eq(want), "exp_each left exp's bits");
    }
}
