//! x86-64 kernel: a register tile of `MR` activation rows by `NR` weight rows, accumulating one
//! 8-lane f32 vector per output. Each weight block is widened to f32 once per tile and
//! multiplied into every activation row of the tile; the block's sum is scaled once. The
//! activations keep full precision, so these narrow tiles and the wide road (`dense.rs`) differ
//! only in float rounding. Blocks are read in place from the GGUF data, never repacked.

use std::arch::x86_64::*;

use super::formats::{WeightFormat, BLOCK};
use super::out_columns::OutColumns;
use super::tiled::{Context, Tile, TileKernel};

pub struct Avx2;

impl TileKernel for Avx2 {
    type Lanes = [f32; 8];
    type Acts = [f32];

    fn sweep_widest(ctx: &Context<Self>, rows_left: usize, row: usize, out: OutColumns) -> usize {
        // 16 vector registers: up to 8 accumulators beside a widened block.
        match rows_left {
            8.. => ctx.sweep::<8, 1>(row, out),
            4.. => ctx.sweep::<4, 2>(row, out),
            2.. => ctx.sweep::<2, 2>(row, out),
            _ => ctx.sweep::<1, 4>(row, out),
        }
    }

    unsafe fn tile<const MR: usize, const NR: usize>(
        format: WeightFormat,
        tile: &Tile<MR, NR, *const f32>,
        blocks: usize,
        acc: &mut [[[f32; 8]; NR]; MR],
    ) {
        tile_avx2(format, tile, blocks, acc)
    }

    unsafe fn total(lanes: &[f32; 8]) -> f32 {
        horizontal_sum(_mm256_loadu_ps(lanes.as_ptr()))
    }
}

/// A block's 32 values as four vectors of eight f32.
#[inline(always)]
unsafe fn widen(format: WeightFormat, block: *const u8) -> [__m256; 4] {
    let to_f32 = |bytes: __m128i| _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
    match format {
        // Eight bytes at a time straight from memory into the sign extension.
        WeightFormat::Q8_0 => std::array::from_fn(|c| to_f32(_mm_loadl_epi64(block.add(2 + 8 * c) as *const __m128i))),
        WeightFormat::F32 => std::array::from_fn(|c| _mm256_loadu_ps((block as *const f32).add(8 * c))),
        // Bytes 0..8 and 8..16 zero-extended to 32-bit lanes hold values 0..8 and 8..16 in
        // their low nibbles and 16..24 and 24..32 in their high ones. A nibble n put in the
        // mantissa of 2^23 is the float 2^23 + n, and taking 2^23 + 8 off leaves n − 8 exactly:
        // the value `vcvtdq2ps` and a subtraction would give, without the conversion, which
        // Zen 2 runs on one port only.
        WeightFormat::Q4_0 => {
            let nibbles = _mm256_set1_epi32(0x0f);
            let two_pow_23 = _mm256_set1_epi32(0x4B00_0000);
            let offset = _mm256_set1_ps(8_388_616.0);
            let half = |at: usize| _mm256_cvtepu8_epi32(_mm_loadl_epi64(block.add(2 + at) as *const __m128i));
            let (first, second) = (half(0), half(8));
            let f = |v: __m256i| _mm256_sub_ps(_mm256_castsi256_ps(_mm256_or_si256(v, two_pow_23)), offset);
            [
                f(_mm256_and_si256(first, nibbles)),
                f(_mm256_and_si256(second, nibbles)),
                f(_mm256_srli_epi32::<4>(first)),
                f(_mm256_srli_epi32::<4>(second)),
            ]
        }
    }
}

/// A block's f16 scale in the low lane. Read as a plain integer and moved in whole: converting
/// it through `half` loads it with `vpinsrw`, which merges into a register the compiler had
/// just used for an accumulator and so chained every block's scale behind the previous FMAs.
#[inline(always)]
pub unsafe fn block_scale(block: *const u8) -> __m128 {
    let bits = (block as *const u16).read_unaligned();
    _mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32))
}

#[inline(always)]
pub unsafe fn horizontal_sum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)))
}

/// How many tiles ahead of the current one the weights are prefetched.
const PREFETCH_TILES: usize = 2;

/// The weight rows `PREFETCH_TILES` tiles past a tile's own, pulled in while it computes, which
/// keeps batch-1 decode at memory speed instead of stalling on every row's first lines.
pub struct RowsAhead<const NR: usize>([*const u8; NR]);

impl<const NR: usize> RowsAhead<NR> {
    #[inline(always)]
    pub fn of<const MR: usize, A>(tile: &Tile<MR, NR, A>) -> Self {
        Self(std::array::from_fn(|i| tile.weights[i].wrapping_add(tile.row_stride * NR * PREFETCH_TILES)))
    }

    /// Prefetches every row `offset` bytes in (a hint: it never faults, wherever it points).
    #[inline(always)]
    pub fn prefetch(&self, offset: usize) {
        for row in self.0 {
            // SAFETY: a prefetch reads nothing architecturally and cannot fault.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(offset) as *const i8) };
        }
    }
}

/// A tile's running sums moved into registers; `store_sums` moves them back.
#[inline(always)]
pub unsafe fn load_sums<const MR: usize, const NR: usize>(sums: &[[[f32; 8]; NR]; MR]) -> [[__m256; NR]; MR] {
    std::array::from_fn(|j| std::array::from_fn(|i| _mm256_loadu_ps(sums[j][i].as_ptr())))
}

#[inline(always)]
pub unsafe fn store_sums<const MR: usize, const NR: usize>(acc: &[[__m256; NR]; MR], sums: &mut [[[f32; 8]; NR]; MR]) {
    for (acc, sums) in acc.iter().zip(sums.iter_mut()) {
        for (acc, sums) in acc.iter().zip(sums.iter_mut()) {
            _mm256_storeu_ps(sums.as_mut_ptr(), *acc);
        }
    }
}

/// Adds activation row j · weight row i over `blocks` blocks to `sums[j][i]`.
#[inline(always)]
unsafe fn tile_avx2<const MR: usize, const NR: usize>(
    format: WeightFormat,
    tile: &Tile<MR, NR, *const f32>,
    blocks: usize,
    sums: &mut [[[f32; 8]; NR]; MR],
) {
    let stride = format.block_bytes();
    let mut acc = load_sums(sums);
    let ahead = RowsAhead::of(tile);
    for b in 0..blocks {
        ahead.prefetch(b * stride);
        if stride > 64 {
            // An f32 block spans two cache lines.
            ahead.prefetch(b * stride + 64);
        }
        for i in 0..NR {
            let block = tile.weights[i].add(b * stride);
            let w = widen(format, block);
            let scale = if format == WeightFormat::F32 { _mm256_set1_ps(1.0) } else { _mm256_broadcastss_ps(block_scale(block)) };
            for j in 0..MR {
                // Every output runs this same sequence whatever the tile's shape, so a row's
                // result does not depend on how many rows share its call.
                let a = tile.acts[j].add(b * BLOCK);
                let mut sum = _mm256_mul_ps(w[0], _mm256_loadu_ps(a));
                for (c, w) in w.iter().enumerate().skip(1) {
                    sum = _mm256_fmadd_ps(*w, _mm256_loadu_ps(a.add(8 * c)), sum);
                }
                acc[j][i] = _mm256_fmadd_ps(sum, scale, acc[j][i]);
            }
        }
    }
    store_sums(&acc, sums);
}
