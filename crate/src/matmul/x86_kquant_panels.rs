//! K-quant matrices (Q4_K, Q5_K, Q6_K) on the 8-bit road, on both roads, repacked once at
//! load; the tile here is AVX-512 VNNI's, AVX2 CPUs take `x86_kquant_avx2.rs` on the same panels. The shape is the Q8_0/Q4_0 pair tile's (`x86_q8_panels.rs`): sixteen
//! columns side by side, four consecutive values of each column per 32-bit lane, so one
//! `vpdpbusd` multiplies four activation bytes, broadcast, into all sixteen columns' sums. What
//! differs is how a sub-block of 32 values is scaled, which is what keeps every weight the
//! file's: the sub-block's integer scale (and min) multiply its exact integer dot inside the
//! tile, and only then the super-block's f16 `d` (and `dmin`) and the activations' scale.
//!
//! - The values go in unsigned, the `vpdpbusd` side that must be: Q4_K's nibbles two a byte
//!   (as Q4_0's panels keep them), Q5_K's one a byte, Q6_K's low four bits as Q4_K's nibbles
//!   and its top two bits in planes of their own, joined in the tile by a shift, a mask and a
//!   `vpternlogd` per 64 values.
//! - The activations are rounded with one scale per super-block (`KRows`), so a super-block's
//!   eight sub-blocks add up in i32 lanes and meet floats once: Q4_K/Q5_K sum `scale · Σ q·a`
//!   and `min · Σ a` (`Σ a` the activation block's sum), then add `d·dx` times the first and
//!   take `dmin·dx` times the second off; Q6_K sums its halves' `scale · Σ q·a` and
//!   `scale · Σ a`, takes 32 times the second off the first (its integers are stored biased by
//!   32) and adds `d·dx` times that.
//!
//! A batch-1 decode reads every byte of a matrix once per token, so the layout stays near the
//! file's size: 4.625 bits a weight for Q4_K (its 4.5 plus a byte per sub-block integer where
//! the file packs them in 6 bits), 6.625 for Q6_K (the file's 6.5625; a byte a value read 30%
//! more, and a 262144 × 2048 matrix at batch 1 ran at 15.3 GB/s of the file's bytes against
//! 20.2 now). Q5_K, rare in downloads, takes a byte a value (8.625 bits against 5.5).

use std::arch::x86_64::*;

use rayon::prelude::*;

use super::activations::QuantizedRows;
use super::formats::BLOCK;
use super::kquants::{KQuant, SuperBlock, SUBS, SUPER};
use super::out_columns::OutColumns;
use super::x86_q8_panels::ACTS_IN_L2;
use super::{vnni, x86_kquant_avx2};

/// Columns per panel pair: the i32 lanes of one 512-bit vector.
pub(super) const COLS: usize = 16;
/// Activation rows per tile, at most: two dot chains, a super-block's integer sums (two for
/// Q4_K/Q5_K) and a float total per row stay inside the 32 vector registers.
const ROWS: usize = 6;

/// A K-quant matrix `(n, k)` repacked, pair by pair of 8-column panels (16 columns, the last
/// padded with zero columns). For each block of 32 values, a pair holds: its values, in
/// 64-byte groups, group `i` giving column `c` four bytes at `4c` — values `4i..4i+4` (Q5_K:
/// eight groups), or values `4i..4i+4` in the low nibbles and `16+4i..` in the high ones
/// (Q4_K: four groups; Q6_K: the same of its low four bits, then two groups of top bits,
/// `packed_byte`); 32 bytes of sub-block integers, each column's scale and min (Q6_K: its
/// halves' scales) side by side, which widen to one i16 pair per lane; and per super-block of
/// 256, the 16 columns' `d` then their `dmin`, as the file's f16 bits.
pub struct KPanels {
    kind: KQuant,
    n: usize,
    blocks: usize,
    values: Vec<u8>,
    subs: Vec<u8>,
    supers: Vec<u16>,
}

impl KPanels {
    /// `data` is the matrix's super-blocks as the file stores them, `n` rows of `k` values (`k`
    /// a multiple of 256).
    pub fn pack(kind: KQuant, data: &[u8], n: usize, k: usize) -> Self {
        let (blocks, row_bytes) = (k / BLOCK, kind.row_bytes(k));
        let pairs = n.div_ceil(COLS);
        let (pair_values, pair_subs, pair_supers) = (blocks * value_bytes(kind), blocks * 2 * COLS, blocks / SUBS * 2 * COLS);
        let mut values = vec![0u8; pairs * pair_values];
        let mut subs = vec![0u8; pairs * pair_subs];
        let mut supers = vec![0u16; pairs * pair_supers];
        let chunks = values.par_chunks_mut(pair_values).zip(subs.par_chunks_mut(pair_subs)).zip(supers.par_chunks_mut(pair_supers));
        chunks.enumerate().for_each(|(pair, ((values, subs), supers))| {
            let first = pair * COLS;
            for (c, row) in data[first * row_bytes..(first + COLS).min(n) * row_bytes].chunks_exact(row_bytes).enumerate() {
                for (sb, block) in row.chunks_exact(kind.block_bytes()).enumerate() {
                    let block = kind.decode(block);
                    supers[sb * 2 * COLS + c] = block.d;
                    supers[sb * 2 * COLS + COLS + c] = block.dmin;
                    for s in 0..SUBS {
                        let b = sb * SUBS + s;
                        subs[b * 2 * COLS + 2 * c..][..2].copy_from_slice(&block.sub[s]);
                        let q = &block.q[s * BLOCK..][..BLOCK];
                        let lane = &mut values[b * value_bytes(kind)..][..value_bytes(kind)];
                        for (i, byte) in lane_bytes(kind, c) {
                            lane[byte] = packed_byte(kind, q, i);
                        }
                    }
                }
            }
        });
        Self { kind, n, blocks, values, subs, supers }
    }

    /// The matrix back in the file's super-blocks: the panels are the only copy kept.
    pub fn unpack(&self) -> Vec<u8> {
        let (kind, row_bytes) = (self.kind, self.kind.row_bytes(self.blocks * BLOCK));
        let mut data = vec![0u8; self.n * row_bytes];
        data.par_chunks_exact_mut(row_bytes).enumerate().for_each(|(col, row)| {
            let (pair, c) = (col / COLS, col % COLS);
            let values = &self.values[pair * self.blocks * value_bytes(kind)..];
            let subs = &self.subs[pair * self.blocks * 2 * COLS..];
            let supers = &self.supers[pair * self.blocks / SUBS * 2 * COLS..];
            for (sb, out) in row.chunks_exact_mut(kind.block_bytes()).enumerate() {
                let mut block =
                    SuperBlock { d: supers[sb * 2 * COLS + c], dmin: supers[sb * 2 * COLS + COLS + c], q: [0; SUPER], sub: [[0; 2]; SUBS] };
                for s in 0..SUBS {
                    let b = sb * SUBS + s;
                    block.sub[s] = [subs[b * 2 * COLS + 2 * c], subs[b * 2 * COLS + 2 * c + 1]];
                    let lane = &values[b * value_bytes(kind)..][..value_bytes(kind)];
                    let q = &mut block.q[s * BLOCK..][..BLOCK];
                    for (i, byte) in lane_bytes(kind, c) {
                        unpack_byte(kind, lane[byte], q, i);
                    }
                }
                kind.encode(&block, out);
            }
        });
        data
    }

    /// `out` (`m × (last − first)`) = `rows` (`m` rows, 8-bit) · Wᵀ for weight rows
    /// `first..last`, `first` a multiple of 16, on this CPU's tile (`vnni()`).
    ///
    /// # Safety
    /// No other thread may write `out`'s values during the call; the CPU has AVX2.
    pub unsafe fn run(&self, first: usize, last: usize, rows: &KRows, m: usize, out: OutColumns) {
        self.run_on(if vnni() { Tile::Vnni } else { Tile::Avx2 }, first, last, rows, m, out)
    }

    /// `run` on the tile given.
    ///
    /// # Safety
    /// As `run`; for `Tile::Vnni`, the CPU has AVX-512 VNNI.
    pub unsafe fn run_on(&self, tile: Tile, first: usize, last: usize, rows: &KRows, m: usize, out: OutColumns) {
        let KRows { rows: acts, sums, halves } = rows;
        let blocks = self.blocks;
        assert!(
            first.is_multiple_of(COLS) && first <= last && last <= self.n && last - first == out.cols() && out.rows() >= m,
            "K-quant panel columns {first}..{last} for a window of {} of {}",
            out.cols(),
            self.n
        );
        let q6 = self.kind == KQuant::Q6K;
        assert!(
            acts.holds(m, blocks * BLOCK) && sums.len() >= m * blocks && (!q6 || halves.len() >= m * blocks),
            "8-bit activations short of {m} rows"
        );
        let tallest = if tile == Tile::Vnni { ROWS } else { x86_kquant_avx2::ROWS };
        let chunk = (ACTS_IN_L2 / acts.k).max(tallest);
        for chunk_first in (0..m).step_by(chunk) {
            let chunk_rows = chunk_first..(chunk_first + chunk).min(m);
            let height = chunk_rows.len().div_ceil(chunk_rows.len().div_ceil(tallest));
            for col in (first..last).step_by(COLS) {
                let pair = col / COLS;
                let panel = Pair {
                    values: self.values[pair * blocks * value_bytes(self.kind)..].as_ptr(),
                    subs: self.subs[pair * blocks * 2 * COLS..].as_ptr(),
                    supers: self.supers[pair * blocks / SUBS * 2 * COLS..].as_ptr(),
                    blocks,
                };
                for row in chunk_rows.clone().step_by(height) {
                    let rows = (chunk_rows.end - row).min(height);
                    let at = Rows { acts, sums, halves, first: row };
                    let mut totals = [[0.0f32; COLS]; ROWS];
                    match (tile, self.kind) {
                        (Tile::Vnni, KQuant::Q4K) => tiles::<true, false>(&panel, &at, rows, &mut totals),
                        (Tile::Vnni, KQuant::Q5K) => tiles::<false, false>(&panel, &at, rows, &mut totals),
                        (Tile::Vnni, KQuant::Q6K) => tiles::<true, true>(&panel, &at, rows, &mut totals),
                        (Tile::Avx2, KQuant::Q4K) => x86_kquant_avx2::tiles::<true, false>(&panel, &at, rows, &mut totals),
                        (Tile::Avx2, KQuant::Q5K) => x86_kquant_avx2::tiles::<false, false>(&panel, &at, rows, &mut totals),
                        (Tile::Avx2, KQuant::Q6K) => x86_kquant_avx2::tiles::<true, true>(&panel, &at, rows, &mut totals),
                    }
                    let width = (last - col).min(COLS);
                    for (r, values) in totals[..rows].iter().enumerate() {
                        out.set_run(row + r, col - first, &values[..width]);
                    }
                }
            }
        }
    }
}

/// Which tile multiplies the panels: `vpdpbusd` on AVX-512 VNNI, or `maddubs` and `madd` on AVX2
/// (`x86_kquant_avx2.rs`). Both give the same bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tile {
    Vnni,
    Avx2,
}

/// What K-quant panels multiply: activation rows rounded with a scale per 256 values
/// (`QuantizedRows::quantize_super`), and per block of 32 the i16 pair a sub-block's pair of
/// scales is `madd`ed with: for Q4_K/Q5_K (0, the block's sum), which its (scale, min) turns
/// into min · sum; for Q6_K the sums of the block's halves, which its halves' scales turn into
/// what the integers' bias of 32 adds (`tile`).
pub struct KRows {
    rows: QuantizedRows,
    sums: Vec<i32>,
    halves: Vec<i32>,
}

impl KRows {
    pub fn new(x: &[f32], k: usize, q6k: bool) -> Self {
        let rows = QuantizedRows::quantize_super(x, k);
        let sum = |values: &[i8]| values.iter().map(|&v| v as i32).sum::<i32>();
        let pair = |low: i32, high: i32| (high << 16) | (low & 0xffff);
        let sums = rows.values.chunks_exact(BLOCK).map(|block| pair(0, sum(block))).collect();
        let halves = if q6k {
            rows.values.chunks_exact(BLOCK).map(|block| pair(sum(&block[..BLOCK / 2]), sum(&block[BLOCK / 2..]))).collect()
        } else {
            Vec::new()
        };
        Self { rows, sums, halves }
    }
}

/// Bytes of one pair's block of values.
const fn value_bytes(kind: KQuant) -> usize {
    match kind {
        KQuant::Q4K => COLS * BLOCK / 2,
        KQuant::Q5K => COLS * BLOCK,
        KQuant::Q6K => COLS * BLOCK * 3 / 4,
    }
}

/// For column `c` of a pair, each packed byte `i` of its block (in value order) and where it
/// sits among the block's groups.
fn lane_bytes(kind: KQuant, c: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..value_bytes(kind) / COLS).map(move |i| (i, i / 4 * 4 * COLS + 4 * c + i % 4))
}

/// Packed byte `i` of a block of 32 integers: Q4_K's values `i` and `16 + i` as two nibbles;
/// Q5_K's value `i`; Q6_K's bytes 0..16 as Q4_K's, of the low four bits, and bytes 16..24 the
/// top two bits of four values each, `(i − 16) / 4` the half, `i % 4` the value in each of its
/// four groups, group `g` at bits `2g`.
fn packed_byte(kind: KQuant, q: &[u8], i: usize) -> u8 {
    let nibbles = |i: usize| (q[i] & 0x0f) | (q[BLOCK / 2 + i] & 0x0f) << 4;
    match kind {
        KQuant::Q4K => nibbles(i),
        KQuant::Q5K => q[i],
        KQuant::Q6K if i < BLOCK / 2 => nibbles(i),
        KQuant::Q6K => (0..4).map(|g| (q[top_bits_value(i, g)] >> 4) << (2 * g)).fold(0, |byte, bits| byte | bits),
    }
}

/// `packed_byte`'s bits back into `q`, which starts zeroed.
fn unpack_byte(kind: KQuant, byte: u8, q: &mut [u8], i: usize) {
    match kind {
        KQuant::Q5K => q[i] = byte,
        KQuant::Q6K if i >= BLOCK / 2 => (0..4).for_each(|g| q[top_bits_value(i, g)] |= (byte >> (2 * g) & 3) << 4),
        _ => {
            q[i] |= byte & 0x0f;
            q[BLOCK / 2 + i] |= byte >> 4;
        }
    }
}

/// The value whose top bits Q6_K's packed byte `i` (16..24) keeps at bits `2g`.
fn top_bits_value(i: usize, g: usize) -> usize {
    let (half, t) = ((i - BLOCK / 2) / 4, i % 4);
    half * BLOCK / 2 + 4 * g + t
}

/// One pair's repacked values, sub-block scales and super-block scales.
pub(super) struct Pair {
    pub values: *const u8,
    pub subs: *const u8,
    pub supers: *const u16,
    pub blocks: usize,
}

/// The activation rows of one tile, from `first`.
pub(super) struct Rows<'a> {
    pub acts: &'a QuantizedRows,
    pub sums: &'a [i32],
    pub halves: &'a [i32],
    pub first: usize,
}

pub(super) type Totals = [[f32; COLS]; ROWS];

impl Rows<'_> {
    /// Where each of a tile's `R` rows starts: its 8-bit values, its scales, and the i16 pairs
    /// each sub-block's (scale, min) or halves' scales are `madd`ed with.
    #[inline(always)]
    pub(super) fn starts<const R: usize, const HALVES: bool>(&self, blocks: usize) -> ([*const u8; R], [*const f32; R], [*const i32; R]) {
        let row = |r: usize| self.first + r;
        let pairs = if HALVES { self.halves } else { self.sums };
        (
            std::array::from_fn(|r| self.acts.values[row(r) * self.acts.k..].as_ptr().cast()),
            std::array::from_fn(|r| self.acts.scales[row(r) * blocks..].as_ptr()),
            std::array::from_fn(|r| pairs[row(r) * blocks..].as_ptr()),
        )
    }
}

/// Bytes of one pair's block of values, by the tiles' parameters (`value_bytes`).
#[inline(always)]
pub(super) const fn block_bytes<const NIBBLES: bool, const HALVES: bool>() -> usize {
    value_bytes(match (NIBBLES, HALVES) {
        (true, true) => KQuant::Q6K,
        (true, false) => KQuant::Q4K,
        _ => KQuant::Q5K,
    })
}

#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn tiles<const NIBBLES: bool, const HALVES: bool>(pair: &Pair, rows: &Rows, count: usize, totals: &mut Totals) {
    match count {
        6.. => tile::<6, NIBBLES, HALVES>(pair, rows, totals),
        5 => tile::<5, NIBBLES, HALVES>(pair, rows, totals),
        4 => tile::<4, NIBBLES, HALVES>(pair, rows, totals),
        3 => tile::<3, NIBBLES, HALVES>(pair, rows, totals),
        2 => tile::<2, NIBBLES, HALVES>(pair, rows, totals),
        _ => tile::<1, NIBBLES, HALVES>(pair, rows, totals),
    }
}

/// `R` activation rows times one pair, over every block. `NIBBLES`: Q4_K's packing; `HALVES`:
/// Q6_K's scales (else a scale and a min per sub-block). The activations have one scale per
/// super-block, so a super-block's sub-blocks add up in integer lanes (the scaled dots; the
/// mins times the activation blocks' sums, or Q6_K's scales times its halves' sums, one `madd`
/// each) and meet floats once per super-block: a third fewer instructions a block than scaling
/// each sub-block in f32, which a batch-1 decode of Q4_K, bound by them, reads as speed; and
/// Q6_K's bias no longer costs two broadcasts per row and block. Integer sums are exact in any
/// order, so a tile's height and its split of the dots into chains change no bit.
#[inline(always)]
unsafe fn tile<const R: usize, const NIBBLES: bool, const HALVES: bool>(pair: &Pair, rows: &Rows, totals: &mut Totals) {
    let blocks = pair.blocks;
    let block_bytes = block_bytes::<NIBBLES, HALVES>();
    let (acts, scales, madd_with) = rows.starts::<R, HALVES>(blocks);
    let mut acc = [_mm512_setzero_ps(); R];
    for sb in 0..blocks / SUBS {
        let mut dots = [_mm512_setzero_si512(); R];
        let mut mins = [_mm512_setzero_si512(); R];
        for b in sb * SUBS..(sb + 1) * SUBS {
            let base = pair.values.add(b * block_bytes);
            if R > 1 {
                // The next pair's block, pulled in while this one computes (as the Q8_0 tiles do).
                for line in (0..block_bytes).step_by(64) {
                    _mm_prefetch::<_MM_HINT_T0>(base.wrapping_add(blocks * block_bytes + line) as *const i8);
                }
            }
            let four = |r: usize, at: usize| _mm512_set1_epi32(acts[r].add(b * BLOCK + at).cast::<i32>().read_unaligned());
            // Two chains a row (the block's halves, or Q4_K's low and high nibbles): half as
            // long a wait on `vpdpbusd`'s latency at batch 1.
            let mut first: [__m512i; R] = [_mm512_setzero_si512(); R];
            let mut second: [__m512i; R] = [_mm512_setzero_si512(); R];
            for i in 0..BLOCK / 8 {
                let (a, c) = value_groups::<NIBBLES, HALVES>(base, i);
                for r in 0..R {
                    first[r] = _mm512_dpbusd_epi32(first[r], a, four(r, 4 * i));
                    second[r] = _mm512_dpbusd_epi32(second[r], c, four(r, BLOCK / 2 + 4 * i));
                }
            }
            let (sub, scale_first, scale_second) = sub_block_integers::<HALVES>(pair.subs.add(b * 2 * COLS));
            for r in 0..R {
                let scaled = scaled_dot::<NIBBLES, HALVES>(first[r], second[r], scale_first, scale_second);
                dots[r] = _mm512_add_epi32(dots[r], scaled);
                // Q4_K/Q5_K: min · the block's sum; Q6_K: each half's scale · its sum (every
                // product within i16 × i16).
                mins[r] = _mm512_add_epi32(mins[r], _mm512_madd_epi16(sub, _mm512_set1_epi32(*madd_with[r].add(b))));
            }
        }
        let supers = pair.supers.add(sb * 2 * COLS);
        let d = _mm512_cvtph_ps(_mm256_loadu_si256(supers.cast()));
        let dmin = _mm512_cvtph_ps(_mm256_loadu_si256(supers.add(COLS).cast()));
        for r in 0..R {
            let act_scale = _mm512_set1_ps(*scales[r].add(sb * SUBS));
            if HALVES {
                // The integers' bias of 32, taken off once per super-block.
                dots[r] = _mm512_sub_epi32(dots[r], _mm512_slli_epi32::<5>(mins[r]));
            }
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots[r]), _mm512_mul_ps(d, act_scale), acc[r]);
            if !HALVES {
                acc[r] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mins[r]), _mm512_mul_ps(dmin, act_scale), acc[r]);
            }
        }
    }
    for r in 0..R {
        _mm512_storeu_ps(totals[r].as_mut_ptr(), acc[r]);
    }
}

/// The two vectors of values group `i` of the block at `base` multiplies, first-half values
/// `4i..4i+4` and second-half `16+4i..`, as unsigned bytes (Q4_K's second: 16 times them).
#[inline(always)]
unsafe fn value_groups<const NIBBLES: bool, const HALVES: bool>(base: *const u8, i: usize) -> (__m512i, __m512i) {
    let group = |i: usize| _mm512_loadu_si512(base.add(i * 4 * COLS).cast());
    let low_nibble = _mm512_set1_epi8(0x0f);
    if NIBBLES && HALVES {
        // Q6_K: each value's top two bits (group `i`'s at bits `2i` of the planes after the
        // nibbles) moved to bits 4, 5 of its byte and put over its low nibble: `vpternlogd` 0xE4
        // takes the bits where the mask (0x0f) is set from the first operand, the rest from the
        // second.
        let at_four = |plane: __m512i| {
            let moved = match i {
                0 => _mm512_slli_epi16::<4>(plane),
                1 => _mm512_slli_epi16::<2>(plane),
                2 => plane,
                _ => _mm512_srli_epi16::<2>(plane),
            };
            _mm512_and_si512(moved, _mm512_set1_epi8(0x30))
        };
        let packed = group(i);
        (
            _mm512_ternarylogic_epi32::<0xE4>(packed, at_four(group(BLOCK / 8)), low_nibble),
            _mm512_ternarylogic_epi32::<0xE4>(_mm512_srli_epi16::<4>(packed), at_four(group(BLOCK / 8 + 1)), low_nibble),
        )
    } else if NIBBLES {
        // Q4_K's high nibbles stay in place, 16 times their value, until `scaled_dot`.
        let packed = group(i);
        (_mm512_and_si512(packed, low_nibble), _mm512_and_si512(packed, _mm512_set1_epi8(0xf0u8 as i8)))
    } else {
        (group(i), group(BLOCK / 8 + i))
    }
}

/// A block's two sub-block integers per column, from its 32 bytes at `at`, as an i16 pair per
/// lane (Q6_K's signed scales, else (scale, min), unsigned and below 64), and as i32 lanes the
/// scales `scaled_dot` multiplies by.
#[inline(always)]
unsafe fn sub_block_integers<const HALVES: bool>(at: *const u8) -> (__m512i, __m512i, __m512i) {
    let bytes = _mm256_loadu_si256(at.cast());
    if HALVES {
        let sub = _mm512_cvtepi8_epi16(bytes);
        (sub, _mm512_srai_epi32::<16>(_mm512_slli_epi32::<16>(sub)), _mm512_srai_epi32::<16>(sub))
    } else {
        let sub = _mm512_cvtepu8_epi16(bytes);
        let scale = _mm512_and_si512(sub, _mm512_set1_epi32(0xffff));
        (sub, scale, scale)
    }
}

/// A row's block: its two chains' dots, each half times its scale (Q6_K), or their sum times
/// the sub-block's scale.
#[inline(always)]
unsafe fn scaled_dot<const NIBBLES: bool, const HALVES: bool>(
    first: __m512i,
    second: __m512i,
    scale_first: __m512i,
    scale_second: __m512i,
) -> __m512i {
    if HALVES {
        _mm512_add_epi32(_mm512_mullo_epi32(first, scale_first), _mm512_mullo_epi32(second, scale_second))
    } else {
        let second = if NIBBLES { _mm512_srai_epi32::<4>(second) } else { second };
        _mm512_mullo_epi32(_mm512_add_epi32(first, second), scale_first)
    }
}
