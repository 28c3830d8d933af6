//! AVX-512 VNNI kernel for 8-bit activations, picked at run time on CPUs that have it. One
//! `vpdpbusd` multiplies 64 unsigned bytes by 64 signed ones and adds them in fours into 16
//! i32 lanes: two blocks of 32 at a time, lanes 0..8 for the first and 8..16 for the second.
//! One side must be unsigned, so each format supplies an unsigned side and cancels its offset
//! by starting the integer sums from a correction instead of zero:
//! - Q4_0: the nibbles n (0..16) are the unsigned side; Σ(n − 8)·a = Σ n·a − 8·Σa, and −8·Σa
//!   per lane is kept with the rounded activations (`VnniRows`).
//! - Q8_0: the activations biased by 128 are the unsigned side; Σ(a + 128)·w − 128·Σw = Σ a·w,
//!   and 128·Σw per lane comes from one more `vpdpbusd` per weight block, shared by the tile's rows.
//!
//! Each pair of blocks' integer sums is then scaled by both blocks' scales into an f32
//! accumulator, the same sequence for every output whatever the tile's shape.

use std::arch::x86_64::*;

use super::activations::VnniRows;
use super::formats::{WeightFormat, BLOCK};
use super::out_columns::OutColumns;
use super::tiled::{Context, Tile, TileKernel, VnniAt};
use super::x86::RowsAhead;
use super::x86_avx512::horizontal_sum;

pub struct Vnni512;

/// Whether this CPU runs the kernel, and the panels' VNNI road (`x86_q8_panels.rs`, on ymm).
pub fn available() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vl")
        && is_x86_feature_detected!("avx512vnni")
}

impl TileKernel for Vnni512 {
    type Lanes = [f32; 16];
    type Acts = VnniRows;
    const BLOCKS_PER_STEP: usize = 2;

    fn sweep_widest(ctx: &Context<Self>, rows_left: usize, row: usize, out: OutColumns) -> usize {
        // 32 vector registers: the accumulators beside a block pair's bytes and corrections.
        match rows_left {
            8.. => ctx.sweep::<8, 2>(row, out),
            4.. => ctx.sweep::<4, 4>(row, out),
            2.. => ctx.sweep::<2, 4>(row, out),
            _ => ctx.sweep::<1, 8>(row, out),
        }
    }

    unsafe fn tile<const MR: usize, const NR: usize>(
        format: WeightFormat,
        tile: &Tile<MR, NR, VnniAt>,
        blocks: usize,
        acc: &mut [[[f32; 16]; NR]; MR],
    ) {
        match format {
            WeightFormat::Q8_0 => tile_vnni::<MR, NR, { WeightFormat::Q8_0 as u8 }>(tile, blocks, acc),
            WeightFormat::Q4_0 => tile_vnni::<MR, NR, { WeightFormat::Q4_0 as u8 }>(tile, blocks, acc),
            WeightFormat::F32 => unreachable!("f32 weights take f32 activations (QuantMatrix::new)"),
        }
    }

    unsafe fn total(lanes: &[f32; 16]) -> f32 {
        horizontal_sum(lanes)
    }
}

/// One weight row's block pair, as the rows of a tile multiply it.
struct WeightPair {
    /// The unsigned side for Q4_0 (nibbles), the signed side for Q8_0 (values).
    bytes: __m512i,
    /// Q8_0: −128·Σw per lane, where the sums start; Q4_0: unused (the activations bring theirs).
    start: __m512i,
    /// Each block's scale across its eight lanes.
    scales: __m512,
}

/// Blocks `b` and `b + 1` of a weight row; with `pair == false` only block `b` is read and the
/// second half is zero (its scale too, so it adds nothing).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
#[inline]
unsafe fn weight_pair<const FORMAT: u8>(row: *const u8, b: usize, pair: bool) -> WeightPair {
    let format = if FORMAT == WeightFormat::Q8_0 as u8 { WeightFormat::Q8_0 } else { WeightFormat::Q4_0 };
    let stride = format.block_bytes();
    let (first, second) = (row.add(b * stride), row.add((b + pair as usize) * stride));
    let scale = |block: *const u8| (block as *const u16).read_unaligned();
    let halves = _mm_cvtph_ps(_mm_cvtsi32_si128(scale(first) as i32 | if pair { (scale(second) as i32) << 16 } else { 0 }));
    let lanes = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    let scales = _mm512_permutexvar_ps(lanes, _mm512_castps128_ps512(halves));
    let scales = if pair { scales } else { _mm512_maskz_mov_ps(0x00ff, scales) };
    let upper: __mmask64 = if pair { !0 } else { 0xffff_ffff };
    if FORMAT == WeightFormat::Q8_0 as u8 {
        let low = _mm256_loadu_si256(first.add(2) as *const __m256i);
        let high = if pair { _mm256_loadu_si256(second.add(2) as *const __m256i) } else { _mm256_setzero_si256() };
        let bytes = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(low), high);
        let sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(-128), bytes);
        WeightPair { bytes, start: _mm512_sub_epi32(_mm512_setzero_si512(), sums), scales }
    } else {
        // Block b's 16 bytes hold its values 0..16 in low nibbles and 16..32 in high ones:
        // lay out [p_b, p_b >> 4, p_b1, p_b1 >> 4] and keep each byte's low nibble.
        let load = |block: *const u8| _mm_loadu_si128(block.add(2) as *const __m128i);
        let (p0, p1) = (load(first), if pair { load(second) } else { _mm_setzero_si128() });
        let halves = |p: __m128i| _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(p), _mm_srli_epi16::<4>(p));
        let packed = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(halves(p0)), halves(p1));
        let bytes = _mm512_maskz_mov_epi8(upper, _mm512_and_si512(packed, _mm512_set1_epi8(0x0f)));
        WeightPair { bytes, start: _mm512_setzero_si512(), scales }
    }
}

/// Adds activation row j · weight row i over `blocks` blocks to `sums[j][i]`, for the format
/// whose discriminant is `FORMAT`. Blocks go in pairs; an odd last block goes alone.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn tile_vnni<const MR: usize, const NR: usize, const FORMAT: u8>(
    tile: &Tile<MR, NR, VnniAt>,
    blocks: usize,
    sums: &mut [[[f32; 16]; NR]; MR],
) {
    let format = if FORMAT == WeightFormat::Q8_0 as u8 { WeightFormat::Q8_0 } else { WeightFormat::Q4_0 };
    let stride = format.block_bytes();
    let mut acc: [[__m512; NR]; MR] = std::array::from_fn(|j| std::array::from_fn(|i| _mm512_loadu_ps(sums[j][i].as_ptr())));
    let ahead = RowsAhead::of(tile);
    let mut b = 0;
    while b < blocks {
        let pair = b + 1 < blocks;
        ahead.prefetch(b * stride);
        ahead.prefetch((b + 1) * stride);
        let w: [WeightPair; NR] = std::array::from_fn(|i| weight_pair::<FORMAT>(tile.weights[i], b, pair));
        let upper: __mmask64 = if pair { !0 } else { 0xffff_ffff };
        for j in 0..MR {
            let act = tile.acts[j];
            let act_scales = _mm512_maskz_loadu_ps(if pair { 0xffff } else { 0x00ff }, act.lane_scales.add(b * 8));
            for i in 0..NR {
                let dot = if FORMAT == WeightFormat::Q8_0 as u8 {
                    let biased = _mm512_maskz_loadu_epi8(upper, act.biased.add(b * BLOCK) as *const i8);
                    _mm512_dpbusd_epi32(w[i].start, biased, w[i].bytes)
                } else {
                    let values = _mm512_maskz_loadu_epi8(upper, act.values.add(b * BLOCK));
                    let start = _mm512_maskz_loadu_epi32(if pair { 0xffff } else { 0x00ff }, act.q4_offsets.add(b * 8));
                    _mm512_dpbusd_epi32(start, w[i].bytes, values)
                };
                let scale = _mm512_mul_ps(w[i].scales, act_scales);
                acc[j][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[j][i]);
            }
        }
        b += 2;
    }
    for j in 0..MR {
        for i in 0..NR {
            _mm512_storeu_ps(sums[j][i].as_mut_ptr(), acc[j][i]);
        }
    }
}
