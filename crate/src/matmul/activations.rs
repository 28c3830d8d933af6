//! What the quantized matmuls multiply the weights by. `Activations::Q8` rounds them to 8-bit
//! blocks first, as llama.cpp does: per block of 32 a scale of max|x|/127 kept as f16 and values
//! round(x/scale), then bytes multiply bytes. Where both roads run in panels
//! (`x86_q8_panels.rs`) each row's products are the plain definition's whatever its batch, and
//! with attention cut at fixed positions (`attention`) a row's logits are then the same bits
//! however its tokens were grouped into passes: that is the default there. Elsewhere (AMX
//! tiles, no SIMD kernels) rounding could move a value across a block's rounding boundary with
//! its grouping, so those CPUs default to `F32`, which keeps activations exact and moves
//! results only by float rounding.

use half::f16;
use rayon::prelude::*;

use super::formats::BLOCK;
use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Activations {
    #[default]
    F32,
    Q8,
}

impl Activations {
    /// From the binding's string: "f32" or "q8".
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "f32" => Ok(Self::F32),
            "q8" => Ok(Self::Q8),
            other => Err(Error::invalid(format!("activations must be 'f32' or 'q8', got '{other}'"))),
        }
    }

    /// 8-bit where it is both faster and independent of batching (panels on both roads), else f32.
    pub fn preferred() -> Self {
        if super::q8_panels() {
            Self::Q8
        } else {
            Self::F32
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::Q8 => "q8",
        }
    }
}

/// Fewer blocks than this are rounded by the calling thread: a decode step's rows take
/// microseconds, less than handing work to the pool.
const MIN_BLOCKS_PER_JOB: usize = 2048;

/// AMX tiles (`amx.rs`) read rows in groups of this many, so their activations are padded
/// with zero rows to a multiple of it.
pub const AMX_ROW_GROUP: usize = 32;

/// Rows of activations rounded to 8-bit blocks.
pub struct QuantizedRows {
    /// Row-major, `k` per row, then zero rows up to a multiple of the `pad_rows` asked for.
    pub values: Vec<i8>,
    /// One per block of 32 values, row-major, padded as `values` (with zero scales).
    pub scales: Vec<f32>,
    pub k: usize,
}

impl QuantizedRows {
    /// `x` holds whole rows of `k` values, `k` a multiple of 32. Only the AMX road needs
    /// `pad_rows` above 1: padding a decode step's one row to 32 zeroed and dequantized 31
    /// rows nobody reads, in every matmul.
    pub fn quantize(x: &[f32], k: usize, pad_rows: usize) -> Self {
        let padded = (x.len() / k.max(1)).next_multiple_of(pad_rows.max(1)) * k;
        let mut values = vec![0i8; padded];
        let mut scales = vec![0.0f32; padded / BLOCK];
        x.par_chunks_exact(BLOCK)
            .zip(values.par_chunks_exact_mut(BLOCK))
            .zip(scales.par_iter_mut())
            .with_min_len(MIN_BLOCKS_PER_JOB)
            .for_each(|((x, q), scale)| *scale = quantize_block(x, q));
        Self { values, scales, k }
    }

    /// `quantize`'s rows with one scale per 256 values, as llama.cpp rounds what it multiplies
    /// by K-quant super-blocks (its `quantize_row_q8_K`: values `x · 127/max|x|` rounded half to
    /// even, an f32 scale of the reciprocal), so the same integers as its and the same logits up
    /// to float order: 32-value blocks moved a Llama 3.2 Q4_K_M greedy run off llama.cpp's at
    /// its first step. Each block of 32 has its scale in `scales`, so the panels read these rows
    /// as any others.
    pub fn quantize_super(x: &[f32], k: usize) -> Self {
        const SUPER: usize = 256;
        let mut values = vec![0i8; x.len()];
        let mut scales = vec![0.0f32; x.len() / BLOCK];
        x.par_chunks_exact(SUPER)
            .zip(values.par_chunks_exact_mut(SUPER))
            .zip(scales.par_chunks_exact_mut(SUPER / BLOCK))
            .with_min_len(MIN_BLOCKS_PER_JOB / 8)
            .for_each(|((x, q), scales)| {
                let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                let inverse = if amax > 0.0 { 127.0 / amax } else { 0.0 };
                q.iter_mut().zip(x).for_each(|(q, &v)| *q = (inverse * v).round_ties_even().clamp(-127.0, 127.0) as i8);
                scales.fill(if amax > 0.0 { 1.0 / inverse } else { 0.0 });
            });
        Self { values, scales, k }
    }

    /// Whether `m` rows of `k` values are all there, with their scales.
    pub fn holds(&self, m: usize, k: usize) -> bool {
        self.k == k && self.values.len() >= m * k && self.scales.len() >= m * k / BLOCK
    }

    /// Every value times its block's scale (padding rows included): what the wide road
    /// multiplies, in f32.
    pub fn dequantize(&self) -> Vec<f32> {
        let mut out = vec![0.0f32; self.values.len()];
        out.par_chunks_exact_mut(BLOCK)
            .zip(self.values.par_chunks_exact(BLOCK))
            .zip(self.scales.par_iter())
            .with_min_len(MIN_BLOCKS_PER_JOB)
            .for_each(|((out, q), &scale)| out.iter_mut().zip(q).for_each(|(v, &q)| *v = q as f32 * scale));
        out
    }
}

/// Returns the block's scale; the rounding (half away from zero, by the reciprocal of the
/// unrounded scale) is llama.cpp's `quantize_row_q8_0`. One value at a time (libm's `roundf`
/// does not vectorize) this was 4% of a 1B batch-8 decode step, on one thread: a decode step's
/// rows are too few to split.
fn quantize_block(x: &[f32], q: &mut [i8]) -> f32 {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    if x.len() == BLOCK && q.len() == BLOCK {
        // SAFETY: both slices hold exactly one block, which is all the kernel reads and writes.
        return unsafe { x86::quantize_block(x, q) };
    }
    quantize_block_plainly(x, q)
}

/// The definition `quantize_block` keeps to, bit for bit.
fn quantize_block_plainly(x: &[f32], q: &mut [i8]) -> f32 {
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let scale = amax / 127.0;
    let inverse = if scale > 0.0 { 1.0 / scale } else { 0.0 };
    q.iter_mut().zip(x).for_each(|(q, &v)| *q = (v * inverse).round() as i8);
    f16::from_f32(scale).to_f32()
}

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod x86 {
    use std::arch::x86_64::*;

    use super::{f16, BLOCK};

    /// Eight values per vector. The largest magnitude is an integer max of the magnitudes'
    /// bits, which order as the magnitudes do (NaN, above infinity, counts as 0, as `f32::max`
    /// skips it). Rounding half away from zero: `y − trunc(y)` is exact, and a fraction of at
    /// least a half steps away from zero. Then `as i8`'s saturation, NaN to 0.
    ///
    /// # Safety
    /// `x` and `q` hold `BLOCK` values each.
    pub unsafe fn quantize_block(x: &[f32], q: &mut [i8]) -> f32 {
        let v: [__m256; BLOCK / 8] = std::array::from_fn(|i| _mm256_loadu_ps(x.as_ptr().add(8 * i)));
        let (magnitude, infinity) = (_mm256_set1_epi32(0x7fff_ffff), _mm256_set1_epi32(f32::INFINITY.to_bits() as i32));
        let bits = v.map(|v| {
            let b = _mm256_and_si256(_mm256_castps_si256(v), magnitude);
            _mm256_andnot_si256(_mm256_cmpgt_epi32(b, infinity), b)
        });
        let most = _mm256_max_epi32(_mm256_max_epi32(bits[0], bits[1]), _mm256_max_epi32(bits[2], bits[3]));
        let most = _mm_max_epi32(_mm256_castsi256_si128(most), _mm256_extracti128_si256(most, 1));
        let most = _mm_max_epi32(most, _mm_shuffle_epi32(most, 0b01_00_11_10));
        let most = _mm_max_epi32(most, _mm_shuffle_epi32(most, 0b10_11_00_01));
        let scale = f32::from_bits(_mm_cvtsi128_si32(most) as u32) / 127.0;
        let inverse = _mm256_set1_ps(if scale > 0.0 { 1.0 / scale } else { 0.0 });
        let (half, one, sign) = (_mm256_set1_ps(0.5), _mm256_set1_ps(1.0), _mm256_set1_ps(-0.0));
        let (low, high) = (_mm256_set1_ps(i8::MIN as f32), _mm256_set1_ps(i8::MAX as f32));
        let ints = v.map(|v| {
            let y = _mm256_mul_ps(v, inverse);
            let whole = _mm256_round_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(y);
            let away = _mm256_cmp_ps::<_CMP_GE_OQ>(_mm256_andnot_ps(sign, _mm256_sub_ps(y, whole)), half);
            let step = _mm256_and_ps(away, _mm256_or_ps(_mm256_and_ps(y, sign), one));
            let rounded = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(whole, step), low), high);
            _mm256_cvttps_epi32(_mm256_and_ps(rounded, _mm256_cmp_ps::<_CMP_ORD_Q>(y, y)))
        });
        // The packs interleave 128-bit lanes; the permutation puts the values back in order.
        let bytes = _mm256_packs_epi16(_mm256_packs_epi32(ints[0], ints[1]), _mm256_packs_epi32(ints[2], ints[3]));
        let bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256(q.as_mut_ptr().cast(), bytes);
        f16::from_f32(scale).to_f32()
    }
}

/// Rounded activations with what the VNNI kernel (`x86_vnni.rs`) also reads: the values biased
/// by 128 as unsigned bytes, each block's scale across eight lanes, and −8 × each lane's sum
/// of four values (what Q4_0's offset of 8 takes off).
pub struct VnniRows {
    pub rows: QuantizedRows,
    pub biased: Vec<u8>,
    pub lane_scales: Vec<f32>,
    pub q4_offsets: Vec<i32>,
}

/// Values per `vpdpbusd` lane.
const LANE: usize = 4;

impl VnniRows {
    pub fn new(rows: QuantizedRows) -> Self {
        let biased = rows.values.iter().map(|&v| (v as u8) ^ 0x80).collect();
        let lane_scales = rows.scales.iter().flat_map(|&s| [s; BLOCK / LANE]).collect();
        let q4_offsets = rows.values.chunks_exact(LANE).map(|four| -8 * four.iter().map(|&v| v as i32).sum::<i32>()).collect();
        Self { rows, biased, lane_scales, q4_offsets }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the plain definition (the vectorized kernel on x86 builds): wide magnitudes,
    /// exact halves after scaling, zeros, infinities, NaNs and subnormals.
    #[test]
    fn blocks_round_as_the_plain_definition() {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for case in 0..20_000 {
            let mut x: Vec<f32> = (0..BLOCK)
                .map(|_| {
                    let r = next();
                    match (case % 8, r % 53) {
                        // multiples of 1/2 with 127 the largest: y = v exactly, ties included
                        (0, _) => ((r >> 8) % 254) as f32 - 127.0 + if r % 2 == 0 { 0.5 } else { 0.0 },
                        (1, 0) => f32::NAN,
                        (2, 0) => f32::INFINITY,
                        (3, _) => 0.0,
                        (4, _) => f32::from_bits((r >> 11) as u32 & 0x807f_ffff),
                        _ => f32::from_bits(((r >> 9) as u32 & 0x807f_ffff) | ((100 + (r % 50) as u32) << 23)),
                    }
                })
                .collect();
            if case % 8 == 0 {
                x[0] = 127.0;
            }
            let (mut got, mut want) = ([0i8; BLOCK], [0i8; BLOCK]);
            let (scale, plain) = (quantize_block(&x, &mut got), quantize_block_plainly(&x, &mut want));
            assert!(scale.to_bits() == plain.to_bits() && got == want, "case {case}: {x:?}\n{got:?}\n{want:?}");
        }
    }
}
