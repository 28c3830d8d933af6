//! x86-64 kernels: a register tile of `MR` activation rows by `NR` weight rows, accumulating
//! one 8-lane f32 vector per output. The integer part of each block's dot product is the
//! sign trick (|w| as unsigned times a·sign(w)), done by AVX-512 VNNI's `vpdpbusd` where the
//! CPU has it and by AVX2's `maddubs`/`madd` pair otherwise. Both paths read GGUF blocks in
//! place, so the weights are never repacked or copied.

use std::arch::x86_64::*;

use super::activations::BLOCK;
use super::formats::{block_scale, WeightFormat};

/// The 32 values of one weight block as signed bytes.
#[inline(always)]
unsafe fn load_weights(format: WeightFormat, block: *const u8) -> __m256i {
    match format {
        WeightFormat::Q8_0 => _mm256_loadu_si256(block.add(2) as *const __m256i),
        WeightFormat::Q4_0 => {
            let packed = _mm_loadu_si128(block.add(2) as *const __m128i);
            let low_mask = _mm_set1_epi8(0x0f);
            let low = _mm_and_si128(packed, low_mask);
            let high = _mm_and_si128(_mm_srli_epi16(packed, 4), low_mask);
            _mm256_sub_epi8(_mm256_set_m128i(high, low), _mm256_set1_epi8(8))
        }
    }
}

#[inline(always)]
unsafe fn horizontal_sum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)))
}

#[inline(always)]
unsafe fn dot_avx2(abs_w: __m256i, signed_a: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(abs_w, signed_a), _mm256_set1_epi16(1))
}

#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512vnni")]
#[inline]
unsafe fn dot_vnni(abs_w: __m256i, signed_a: __m256i) -> __m256i {
    _mm256_dpbusd_epi32(_mm256_setzero_si256(), abs_w, signed_a)
}

/// Pointers into one tile's inputs: `NR` weight rows (block-encoded) and `MR` activation rows.
pub struct Tile<const MR: usize, const NR: usize> {
    pub weights: [*const u8; NR],
    pub values: [*const i8; MR],
    pub scales: [*const f32; MR],
}

/// How many tiles ahead of the current one the weights are prefetched.
const PREFETCH_TILES: usize = 2;

macro_rules! tile_kernel {
    ($name:ident, $dot:ident $(, $feature:literal)?) => {
        /// `out[j][i]` = row j of the activations · weight row i, over `blocks` blocks.
        $(#[target_feature(enable = $feature)])?
        pub unsafe fn $name<const MR: usize, const NR: usize>(format: WeightFormat, tile: &Tile<MR, NR>, blocks: usize) -> [[f32; NR]; MR] {
            let stride = format.block_bytes();
            let mut acc = [[_mm256_setzero_ps(); NR]; MR];
            // The NR rows are adjacent, and the next tiles continue right after them: pulling
            // that stretch in while this tile computes keeps batch-1 decode at memory speed
            // instead of stalling on every row's first lines.
            let tile_bytes = NR * blocks * stride;
            let ahead = tile.weights[0].wrapping_add(tile_bytes * PREFETCH_TILES);
            for b in 0..blocks {
                let mut line = 0;
                while line < NR * stride {
                    _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(b * NR * stride + line) as *const i8);
                    line += 64;
                }
                let mut abs_w = [_mm256_setzero_si256(); NR];
                let mut w = [_mm256_setzero_si256(); NR];
                let mut scale_w = [0.0f32; NR];
                for i in 0..NR {
                    let block = tile.weights[i].add(b * stride);
                    w[i] = load_weights(format, block);
                    abs_w[i] = _mm256_sign_epi8(w[i], w[i]);
                    scale_w[i] = block_scale(block);
                }
                for j in 0..MR {
                    let a = _mm256_loadu_si256(tile.values[j].add(b * BLOCK) as *const __m256i);
                    let scale_a = *tile.scales[j].add(b);
                    for i in 0..NR {
                        let products = _mm256_cvtepi32_ps($dot(abs_w[i], _mm256_sign_epi8(a, w[i])));
                        acc[j][i] = _mm256_fmadd_ps(products, _mm256_set1_ps(scale_w[i] * scale_a), acc[j][i]);
                    }
                }
            }
            let mut out = [[0.0f32; NR]; MR];
            for j in 0..MR {
                for i in 0..NR {
                    out[j][i] = horizontal_sum(acc[j][i]);
                }
            }
            out
        }
    };
}

tile_kernel!(tile_avx2, dot_avx2);
tile_kernel!(tile_vnni, dot_vnni, "avx512f,avx512vl,avx512bw,avx512vnni");

pub fn has_vnni() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512vl")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vnni")
}
