//! AVX2 kernel for 8-bit activations (`Activations::Q8`). A weight block's 32 values are brought
//! to signed bytes once per tile and multiplied into every activation row of the tile in
//! integer: |w| as unsigned bytes times a with w's sign (`maddubs`, products summed in pairs to
//! i16), then in fours to i32 (`madd`). Each block's eight partial sums are scaled by both
//! blocks' scales into an f32 accumulator. Every output runs this same sequence whatever the
//! tile's shape, so a row's result does not depend on how many rows share its call.

use std::arch::x86_64::*;

use super::activations::QuantizedRows;
use super::formats::{WeightFormat, BLOCK};
use super::out_columns::OutColumns;
use super::tiled::{Context, Q8At, Tile, TileKernel};
use super::x86::{block_scale, horizontal_sum, load_sums, store_sums, RowsAhead};

pub struct Avx2Q8;

impl TileKernel for Avx2Q8 {
    type Lanes = [f32; 8];
    type Acts = QuantizedRows;

    fn sweep_widest(ctx: &Context<Self>, rows_left: usize, row: usize, out: OutColumns) -> usize {
        // 16 vector registers: the accumulators beside one weight block's bytes, their
        // magnitudes and its scale.
        match rows_left {
            8.. => ctx.sweep::<8, 1>(row, out),
            4.. => ctx.sweep::<4, 2>(row, out),
            2.. => ctx.sweep::<2, 2>(row, out),
            _ => ctx.sweep::<1, 4>(row, out),
        }
    }

    unsafe fn tile<const MR: usize, const NR: usize>(format: WeightFormat, tile: &Tile<MR, NR, Q8At>, blocks: usize, acc: &mut [[[f32; 8]; NR]; MR]) {
        // One copy of the loop per format, so no branch on it runs per block.
        match format {
            WeightFormat::Q8_0 => tile_q8::<MR, NR, { WeightFormat::Q8_0 as u8 }>(tile, blocks, acc),
            WeightFormat::Q4_0 => tile_q8::<MR, NR, { WeightFormat::Q4_0 as u8 }>(tile, blocks, acc),
        }
    }

    unsafe fn total(lanes: &[f32; 8]) -> f32 {
        horizontal_sum(_mm256_loadu_ps(lanes.as_ptr()))
    }
}

/// A block's 32 values as signed bytes, in order.
#[inline(always)]
unsafe fn weight_bytes(format: WeightFormat, block: *const u8) -> __m256i {
    match format {
        WeightFormat::Q8_0 => _mm256_loadu_si256(block.add(2) as *const __m256i),
        // Low nibbles are values 0..16 and high ones 16..32: the two halves of the vector.
        WeightFormat::Q4_0 => {
            let packed = _mm_loadu_si128(block.add(2) as *const __m128i);
            let nibbles = _mm_set1_epi8(0x0f);
            let low = _mm_and_si128(packed, nibbles);
            let high = _mm_and_si128(_mm_srli_epi16::<4>(packed), nibbles);
            _mm256_sub_epi8(_mm256_set_m128i(high, low), _mm256_set1_epi8(8))
        }
    }
}

/// The eight partial sums of `w · a` over one block, in f32. |w| ≤ 128 and |a| ≤ 127, so a
/// pair of products (at most 32512) fits the i16 that `maddubs` saturates at.
#[inline(always)]
unsafe fn block_dot(abs_w: __m256i, w: __m256i, a: __m256i) -> __m256 {
    let pairs = _mm256_maddubs_epi16(abs_w, _mm256_sign_epi8(a, w));
    _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))
}

/// Adds activation row j · weight row i over `blocks` blocks to `sums[j][i]`, for the format
/// whose discriminant is `FORMAT`.
#[inline(always)]
unsafe fn tile_q8<const MR: usize, const NR: usize, const FORMAT: u8>(tile: &Tile<MR, NR, Q8At>, blocks: usize, sums: &mut [[[f32; 8]; NR]; MR]) {
    let format = if FORMAT == WeightFormat::Q8_0 as u8 { WeightFormat::Q8_0 } else { WeightFormat::Q4_0 };
    let stride = format.block_bytes();
    let mut acc = load_sums(sums);
    let ahead = RowsAhead::of(tile);
    for b in 0..blocks {
        ahead.prefetch(b * stride);
        for i in 0..NR {
            let block = tile.weights[i].add(b * stride);
            let w = weight_bytes(format, block);
            let abs_w = _mm256_sign_epi8(w, w);
            let weight_scale = _mm256_broadcastss_ps(block_scale(block));
            for j in 0..MR {
                let act = tile.acts[j];
                let a = _mm256_loadu_si256(act.values.add(b * BLOCK) as *const __m256i);
                let scale = _mm256_mul_ps(weight_scale, _mm256_broadcast_ss(&*act.scales.add(b)));
                acc[j][i] = _mm256_fmadd_ps(block_dot(abs_w, w, a), scale, acc[j][i]);
            }
        }
    }
    store_sums(&acc, sums);
}
