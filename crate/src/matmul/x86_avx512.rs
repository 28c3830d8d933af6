//! AVX-512 kernel, picked at run time on CPUs that have it (the build itself stays x86-64-v3).
//! A block's 32 weights fill two 16-lane vectors, widened to f32 and multiplied by their scale
//! once per tile, so each output costs two FMAs per block where the AVX2 tile spends five, and
//! the 32 vector registers hold twice the tile. Each output accumulates `weight × activation`
//! into one vector in block order whatever the tile's shape, so a row's result does not depend
//! on how many rows share its call.

use std::arch::x86_64::*;

use super::formats::{WeightFormat, BLOCK};
use super::out_columns::OutColumns;
use super::tiled::{Context, Tile, TileKernel};
use super::x86::{self, block_scale, RowsAhead};

pub struct Avx512;

impl TileKernel for Avx512 {
    type Lanes = [f32; 16];
    type Acts = [f32];

    fn sweep_widest(ctx: &Context<Self>, rows_left: usize, row: usize, out: OutColumns) -> usize {
        // 16 accumulators (8 for a lone row, whose FMA chains still cover the latency).
        match rows_left {
            8.. => ctx.sweep::<8, 2>(row, out),
            4.. => ctx.sweep::<4, 4>(row, out),
            2.. => ctx.sweep::<2, 4>(row, out),
            _ => ctx.sweep::<1, 8>(row, out),
        }
    }

    unsafe fn tile<const MR: usize, const NR: usize>(
        format: WeightFormat,
        tile: &Tile<MR, NR, *const f32>,
        blocks: usize,
        acc: &mut [[[f32; 16]; NR]; MR],
    ) {
        // One copy of the loop per format, so no branch on it runs per block.
        match format {
            WeightFormat::Q8_0 => tile_avx512::<MR, NR, { WeightFormat::Q8_0 as u8 }>(tile, blocks, acc),
            WeightFormat::Q4_0 => tile_avx512::<MR, NR, { WeightFormat::Q4_0 as u8 }>(tile, blocks, acc),
            WeightFormat::F32 => tile_avx512::<MR, NR, { WeightFormat::F32 as u8 }>(tile, blocks, acc),
        }
    }

    unsafe fn total(lanes: &[f32; 16]) -> f32 {
        horizontal_sum(lanes)
    }
}

/// A block's values times its scale: the same f32 the wide road widens its panels to.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn widen(format: WeightFormat, block: *const u8) -> [__m512; 2] {
    let scale = _mm512_broadcastss_ps(block_scale(block));
    let bytes = |at: usize| _mm_loadu_si128(block.add(2 + at) as *const __m128i);
    match format {
        WeightFormat::Q8_0 => [0, 16].map(|at| _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes(at))), scale)),
        WeightFormat::Q4_0 => {
            // The 16 bytes zero-extended to 32-bit lanes hold values 0..16 in their low nibbles
            // and 16..32 in their high ones. A nibble indexes a table of the 16 values it can
            // stand for, (n − 8)·s, and vpermps reads only an index's low four bits, so the
            // low nibbles need no mask and no conversion. fma(n, s, −8s) is one rounding of
            // the exact (n − 8)·s, the bits the wide road's `(n - 8) as f32 * s` gives.
            let packed = _mm512_cvtepu8_epi32(bytes(0));
            let nibbles = _mm512_set_ps(15.0, 14.0, 13.0, 12.0, 11.0, 10.0, 9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.0);
            let table = _mm512_fmadd_ps(nibbles, scale, _mm512_mul_ps(scale, _mm512_set1_ps(-8.0)));
            [_mm512_permutexvar_ps(packed, table), _mm512_permutexvar_ps(_mm512_srli_epi32::<4>(packed), table)]
        }
        WeightFormat::F32 => unreachable!("f32 blocks are loaded as they are (`tile_avx512`)"),
    }
}

#[target_feature(enable = "avx512f")]
#[inline]
pub(super) unsafe fn horizontal_sum(lanes: &[f32; 16]) -> f32 {
    let v = _mm512_loadu_ps(lanes.as_ptr());
    let high = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
    x86::horizontal_sum(_mm256_add_ps(_mm512_castps512_ps256(v), high))
}

/// Adds activation row j · weight row i over `blocks` blocks to `sums[j][i]`, for the format
/// whose discriminant is `FORMAT`.
#[target_feature(enable = "avx512f")]
unsafe fn tile_avx512<const MR: usize, const NR: usize, const FORMAT: u8>(
    tile: &Tile<MR, NR, *const f32>,
    blocks: usize,
    sums: &mut [[[f32; 16]; NR]; MR],
) {
    let format =
        [WeightFormat::Q8_0, WeightFormat::Q4_0, WeightFormat::F32].into_iter().find(|f| *f as u8 == FORMAT).unwrap_or(WeightFormat::F32);
    let stride = format.block_bytes();
    // Plain loops over arrays, not closures: through `from_fn` the f32 loads stayed out of
    // line and every vector went through the stack (SmolLM2 F32 at batch 8: 37 ms a step,
    // against 24 at batch 1).
    let mut acc = [[_mm512_setzero_ps(); NR]; MR];
    for j in 0..MR {
        for i in 0..NR {
            acc[j][i] = _mm512_loadu_ps(sums[j][i].as_ptr());
        }
    }
    let ahead = RowsAhead::of(tile);
    for b in 0..blocks {
        ahead.prefetch(b * stride);
        if stride > 64 {
            // An f32 block is two cache lines.
            ahead.prefetch(b * stride + 64);
        }
        let mut w = [[_mm512_setzero_ps(); 2]; NR];
        for i in 0..NR {
            let block = tile.weights[i].add(b * stride);
            w[i] = if format == WeightFormat::F32 {
                [0, 16].map(|at| _mm512_loadu_ps((block as *const f32).add(at)))
            } else {
                widen(format, block)
            };
        }
        // Row by row, so only one row's activations are live beside the accumulators: loading
        // all of them first spilled accumulators to the stack at 8 rows.
        for j in 0..MR {
            let a = tile.acts[j].add(b * BLOCK);
            let (low, high) = (_mm512_loadu_ps(a), _mm512_loadu_ps(a.add(16)));
            for i in 0..NR {
                acc[j][i] = _mm512_fmadd_ps(w[i][0], low, acc[j][i]);
                acc[j][i] = _mm512_fmadd_ps(w[i][1], high, acc[j][i]);
            }
        }
    }
    for j in 0..MR {
        for i in 0..NR {
            _mm512_storeu_ps(sums[j][i].as_mut_ptr(), acc[j][i]);
        }
    }
}
