//! The K-quant panels' tile for AVX2 CPUs without VNNI (Zen 3, Haswell to Skylake): the same
//! panels (`x86_kquant_panels.rs`), each 64-byte group read as two halves of eight columns,
//! and the same exact integer sums, reached with `maddubs` (unsigned values times signed
//! activations, pairs of products into i16 lanes) and `madd` (i16 pairs into i32) in place of
//! `vpdpbusd`.
//!
//! The i16 lanes are what bounds a step. A group adds two products to a lane, each at most
//! 63 × 127 (activations are rounded to ±127), so a lane takes eight groups of Q4_K (15 × 127 ×
//! 2 × 8 = 30480), a whole block, four of Q5_K (31 × 127 × 2 × 4 = 31496), a half-block, and
//! two of Q6_K (63 × 127 × 2 × 2 = 32004), a quarter, before it must widen. It widens by `madd`
//! with the sub-block's scale repeated in both i16 of each lane, which multiplies and widens in
//! one instruction, so a block costs a `maddubs` and an i16 add per group and row, and one
//! `madd` per partial, row and half. From there the tile is the VNNI
//! tile's: i32 sums per super-block, then one float step, in the same order, so both tiles
//! give the same bits.

use std::arch::x86_64::*;

use super::formats::BLOCK;
use super::kquants::SUBS;
use super::x86_kquant_panels::{block_bytes, Pair, Rows, Totals, COLS};

/// Activation rows per tile, at most: four rows' i16 partials, the four value vectors of a
/// group and two broadcasts fill the 16 registers; the i32 and f32 sums, touched once per block
/// or super-block, go to memory.
pub(super) const ROWS: usize = 4;

/// Columns in one half of a pair: the i32 lanes of a 256-bit vector.
const HALF: usize = COLS / 2;

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn tiles<const NIBBLES: bool, const HALVES: bool>(pair: &Pair, rows: &Rows, count: usize, totals: &mut Totals) {
    match count {
        4.. => tile::<4, NIBBLES, HALVES>(pair, rows, totals),
        3 => tile::<3, NIBBLES, HALVES>(pair, rows, totals),
        2 => tile::<2, NIBBLES, HALVES>(pair, rows, totals),
        _ => tile::<1, NIBBLES, HALVES>(pair, rows, totals),
    }
}

/// `R` activation rows times one pair, both halves, over every block (`NIBBLES`, `HALVES` as in
/// the VNNI tile: Q4_K's packing, Q6_K's scales).
#[inline(always)]
unsafe fn tile<const R: usize, const NIBBLES: bool, const HALVES: bool>(pair: &Pair, rows: &Rows, totals: &mut Totals) {
    let blocks = pair.blocks;
    let block_bytes = block_bytes::<NIBBLES, HALVES>();
    let (acts, scales, madd_with) = rows.starts::<R, HALVES>(blocks);
    let mut acc = [[_mm256_setzero_ps(); 2]; R];
    for sb in 0..blocks / SUBS {
        let mut dots = [[_mm256_setzero_si256(); 2]; R];
        let mut mins = [[_mm256_setzero_si256(); 2]; R];
        for b in sb * SUBS..(sb + 1) * SUBS {
            let base = pair.values.add(b * block_bytes);
            // The next pair's block, pulled in while this one computes, at batch 1 too (the
            // VNNI tile's only above it): alternating builds of `examples/throughput` on a 1B
            // Q4_K_M file on Zen 3 decoded 29.0–30.1 tok/s without, 31.2–36.1 with.
            for line in (0..block_bytes).step_by(64) {
                _mm_prefetch::<_MM_HINT_T0>(base.wrapping_add(blocks * block_bytes + line) as *const i8);
            }
            let block_rows = BlockRows { acts: &acts, madd_with: &madd_with, b };
            if NIBBLES && !HALVES {
                q4k_block(pair, base, &block_rows, &mut dots, &mut mins);
            } else {
                split_block::<R, NIBBLES, HALVES>(pair, base, &block_rows, &mut dots, &mut mins);
            }
        }
        let supers = pair.supers.add(sb * 2 * COLS);
        for h in 0..2 {
            let d = _mm256_cvtph_ps(_mm_loadu_si128(supers.add(HALF * h).cast()));
            let dmin = _mm256_cvtph_ps(_mm_loadu_si128(supers.add(COLS + HALF * h).cast()));
            for r in 0..R {
                let act_scale = _mm256_set1_ps(*scales[r].add(sb * SUBS));
                let (mut dot, min) = (dots[r][h], mins[r][h]);
                if HALVES {
                    dot = _mm256_sub_epi32(dot, _mm256_slli_epi32::<5>(min));
                }
                acc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(d, act_scale), acc[r][h]);
                if !HALVES {
                    acc[r][h] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(min), _mm256_mul_ps(dmin, act_scale), acc[r][h]);
                }
            }
        }
    }
    for r in 0..R {
        for h in 0..2 {
            _mm256_storeu_ps(totals[r][HALF * h..].as_mut_ptr(), acc[r][h]);
        }
    }
}

/// A tile's rows at block `b`: their 8-bit values, and the i16 pairs the block's sub-block
/// integers are `madd`ed with.
struct BlockRows<'a, const R: usize> {
    acts: &'a [*const u8; R],
    madd_with: &'a [*const i32; R],
    b: usize,
}

impl<const R: usize> BlockRows<'_, R> {
    /// Row `r`'s four activation bytes from `at` in the block, in every lane.
    #[inline(always)]
    unsafe fn four(&self, r: usize, at: usize) -> __m256i {
        _mm256_set1_epi32(self.acts[r].add(self.b * BLOCK + at).cast::<i32>().read_unaligned())
    }

    /// Row `r`'s i16 pair for the half whose sub-block integers are `sub`, `madd`ed in.
    #[inline(always)]
    unsafe fn mins(&self, r: usize, sub: __m256i) -> __m256i {
        _mm256_madd_epi16(sub, _mm256_set1_epi32(*self.madd_with[r].add(self.b)))
    }
}

/// A Q4_K block: its two halves share one scale and fit one i16 lane together (see the
/// module's note), so a row's products add before widening and a row keeps one partial per
/// half of the columns; that leaves the registers to take both halves at once, each broadcast
/// of activations used twice. Alternating runs of `matmul_speed 2048 2048 512 q8 Q4K` on one
/// Zen 3 thread: 80.5–83.1 GMAC/s with the split halves, 89.0–89.7 like this. That is ~74
/// cycles a block for four rows, near the ~62 its instructions need on Zen 3, where `maddubs`
/// and `madd` share two pipes and a `maddubs` with its add takes ~0.68 cycles; a row step in
/// `asm!`, with no spills left in the loop, measured the same 87–89.
#[inline(always)]
unsafe fn q4k_block<const R: usize>(
    pair: &Pair,
    base: *const u8,
    rows: &BlockRows<R>,
    dots: &mut [[__m256i; 2]; R],
    mins: &mut [[__m256i; 2]; R],
) {
    let mut partials = [[_mm256_setzero_si256(); 2]; R];
    for i in 0..BLOCK / 8 {
        let values = [value_groups::<true, false>(base, i), value_groups::<true, false>(base.add(4 * HALF), i)];
        for r in 0..R {
            let (low, high) = (rows.four(r, 4 * i), rows.four(r, BLOCK / 2 + 4 * i));
            for h in 0..2 {
                let products = _mm256_add_epi16(_mm256_maddubs_epi16(values[h].0, low), _mm256_maddubs_epi16(values[h].1, high));
                partials[r][h] = _mm256_add_epi16(partials[r][h], products);
            }
        }
    }
    for h in 0..2 {
        let (sub, scale, _) = sub_block_integers::<false>(pair.subs.add(rows.b * 2 * COLS + 2 * HALF * h));
        for r in 0..R {
            dots[r][h] = _mm256_add_epi32(dots[r][h], _mm256_madd_epi16(partials[r][h], scale));
            mins[r][h] = _mm256_add_epi32(mins[r][h], rows.mins(r, sub));
        }
    }
}

/// A Q5_K or Q6_K block, one half of the columns at a time: a row's i16 partials, the block's
/// first and second 16 values, stay in registers four rows tall.
#[inline(always)]
unsafe fn split_block<const R: usize, const NIBBLES: bool, const HALVES: bool>(
    pair: &Pair,
    base: *const u8,
    rows: &BlockRows<R>,
    dots: &mut [[__m256i; 2]; R],
    mins: &mut [[__m256i; 2]; R],
) {
    for h in 0..2 {
        let (sub, scale_first, scale_second) = sub_block_integers::<HALVES>(pair.subs.add(rows.b * 2 * COLS + 2 * HALF * h));
        let mut first = [_mm256_setzero_si256(); R];
        let mut second = [_mm256_setzero_si256(); R];
        for i in 0..BLOCK / 8 {
            let (low, high) = value_groups::<NIBBLES, HALVES>(base.add(4 * HALF * h), i);
            for r in 0..R {
                first[r] = _mm256_add_epi16(first[r], _mm256_maddubs_epi16(low, rows.four(r, 4 * i)));
                second[r] = _mm256_add_epi16(second[r], _mm256_maddubs_epi16(high, rows.four(r, BLOCK / 2 + 4 * i)));
                // Q6_K's lanes are full after two groups (see the module's note).
                if HALVES && i % 2 == 1 {
                    dots[r][h] = _mm256_add_epi32(dots[r][h], widen(first[r], second[r], scale_first, scale_second));
                    (first[r], second[r]) = (_mm256_setzero_si256(), _mm256_setzero_si256());
                }
            }
        }
        for r in 0..R {
            if !HALVES {
                // Q5_K: both halves of the block under the sub-block's one scale.
                dots[r][h] = _mm256_add_epi32(dots[r][h], widen(first[r], second[r], scale_first, scale_second));
            }
            mins[r][h] = _mm256_add_epi32(mins[r][h], rows.mins(r, sub));
        }
    }
}

/// Half of group `i`'s two vectors of values (first-half values `4i..4i+4`, second-half
/// `16+4i..`), the half's 32 bytes at `base` in each 64-byte group, as unsigned bytes.
#[inline(always)]
unsafe fn value_groups<const NIBBLES: bool, const HALVES: bool>(base: *const u8, i: usize) -> (__m256i, __m256i) {
    let group = |i: usize| _mm256_loadu_si256(base.add(i * 4 * COLS).cast());
    let low_nibble = _mm256_set1_epi8(0x0f);
    let high = |packed: __m256i| _mm256_and_si256(_mm256_srli_epi16::<4>(packed), low_nibble);
    let packed = group(i);
    if NIBBLES && HALVES {
        // Q6_K: each value's top two bits (bits `2i` of the planes after the nibbles) moved to
        // bits 4 and 5, over its low nibble.
        let at_four = |plane: __m256i| {
            let moved = match i {
                0 => _mm256_slli_epi16::<4>(plane),
                1 => _mm256_slli_epi16::<2>(plane),
                2 => plane,
                _ => _mm256_srli_epi16::<2>(plane),
            };
            _mm256_and_si256(moved, _mm256_set1_epi8(0x30))
        };
        (
            _mm256_or_si256(_mm256_and_si256(packed, low_nibble), at_four(group(BLOCK / 8))),
            _mm256_or_si256(high(packed), at_four(group(BLOCK / 8 + 1))),
        )
    } else if NIBBLES {
        (_mm256_and_si256(packed, low_nibble), high(packed))
    } else {
        (packed, group(BLOCK / 8 + i))
    }
}

/// One half's sub-block integers, its 16 bytes at `at`: the i16 pair per lane (as the VNNI
/// tile's), and the scales `widen` multiplies by, each repeated in both i16 of its lane
/// (Q6_K: the first half's, the second half's; else the one scale twice).
#[inline(always)]
unsafe fn sub_block_integers<const HALVES: bool>(at: *const u8) -> (__m256i, __m256i, __m256i) {
    let bytes = _mm_loadu_si128(at.cast());
    let sub = if HALVES { _mm256_cvtepi8_epi16(bytes) } else { _mm256_cvtepu8_epi16(bytes) };
    // `vpshufb` picks bytes within each 16-byte lane: lane j's i16 pair is at bytes 4j..4j+4.
    let repeat = |first: i32| {
        _mm256_setr_epi32(
            first,
            first + 0x0404_0404,
            first + 0x0808_0808,
            first + 0x0c0c_0c0c,
            first,
            first + 0x0404_0404,
            first + 0x0808_0808,
            first + 0x0c0c_0c0c,
        )
    };
    let low = _mm256_shuffle_epi8(sub, repeat(0x0100_0100));
    let high = if HALVES { _mm256_shuffle_epi8(sub, repeat(0x0302_0302)) } else { low };
    (sub, low, high)
}

/// A row's i16 partials, each times its scale, widened and added in i32 lanes.
#[inline(always)]
unsafe fn widen(first: __m256i, second: __m256i, scale_first: __m256i, scale_second: __m256i) -> __m256i {
    _mm256_add_epi32(_mm256_madd_epi16(first, scale_first), _mm256_madd_epi16(second, scale_second))
}
