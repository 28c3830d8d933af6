//! 8-bit activations on x86 CPUs without AMX, on both roads. At load, each weight matrix is
//! repacked into panels of eight columns with four consecutive values of every column side by
//! side (32 bytes), so one `maddubs` multiplies four values of an activation row, broadcast,
//! into all eight columns, and each column's sum builds up in its own lane: no horizontal sums
//! per block, and a `maddubs` does 32 multiply-adds where an f32 FMA does 8, at the same rate
//! on Zen 3. Panels keep the file's bytes per value (Q4_0 stays in nibbles).
//!
//! Q4_0 keeps its nibbles unsigned (0..16), so `maddubs` takes them as they are, and a block's
//! products add up in i16 lanes, one `madd` widening them at the end. The offset of 8 is in the
//! lanes from the start: each begins at −8 × the sum of the activations it will multiply, so it
//! ends at Σ (w − 8)·a over its 16 values, at most 16 × 8 × 127 in size, which fits; the i16 adds
//! wrap, so the partial sums on the way may overflow without harm. Q5_0 is Q4_0 with a fifth
//! bit ORed into each nibble (values 0..32, offset 16): its sums reach at most 16 × 16 × 127,
//! which fits too. Q8_0's signed bytes take the sign trick (|w| times a with w's sign) and
//! widen at every step.
//!
//! With AVX-512 VNNI (Zen 4, Ice Lake and later) one `vpdpbusd` does what `maddubs` and its
//! widening do, into i32 lanes that cannot overflow, so both formats take one road: the weights
//! are the unsigned side (Q4_0's nibbles as they are, Q8_0's bytes biased by 128 when packed), and each
//! lane starts at −offset × the sum of the block's activations (offset 8 or 128), which cancels
//! the bias. The vector registers double to 32, so the tiles grow to `VNNI_ROWS` rows.
//!
//! Panels go in pairs, a pair's blocks interleaved (block b of the first panel, block b of the
//! second, then block b + 1 of each), so a tile of two panels reads one stream of bytes from
//! memory, not two a panel apart: at batch 1, with each panel whole in turn, the kernel
//! streamed 25.6 GB/s against 32.7 with one panel per tile, on a 2-thread Zen 4 that reads
//! 34 GB/s; interleaved, two-panel tiles read as fast as one-panel ones and keep their reuse of
//! each broadcast activation.
//!
//! Each output adds its blocks in order as `portable_q8` does, exact integer dot times the
//! product of both scales, in one fused multiply-add: the same bits as that definition,
//! whichever road, tile height or batch a row goes through.

use std::arch::x86_64::*;

use rayon::prelude::*;

use super::activations::QuantizedRows;
use super::formats::BLOCK;
use super::out_columns::OutColumns;
use super::vnni;
use super::x86_q8_pair512::tiles_vnni_pair;
pub use super::x86_q8_panel_format::PanelFormat;

/// Columns per panel: the lanes of one vector of i32.
pub(super) const COLS: usize = 8;
/// Values of one column side by side: what `madd` sums into one i32 lane.
pub(super) const GROUP: usize = 4;
/// Activation rows per tile, at most, by two panels: eight running sums, two weight vectors, a
/// broadcast and a product fill the 16 vector registers, and the eight f32 totals, touched once
/// per block, live in memory. Measured against 5 × 2, 6 × 2, 3 × 2, 6 × 1 and 8 × 1 tiles
/// (single thread, 2048 × 2048 at 8 and 512 rows): none faster, for either format.
const ROWS: usize = 4;
/// The same on the VNNI road, with 32 registers: 16 running sums, two weight vectors and a
/// broadcast at 8 × 2, the totals partly in memory. A batch-8 step then reads each panel once,
/// not twice as in 4 + 4 rows: `matmul_speed 8192 2048 8 q8` Q4_0, alternating, 179–196 → 196–228
/// GMAC/s (no change above noise in a whole 1B step).
const VNNI_ROWS: usize = 8;
/// Bytes of activations one pass over a task's panels reads: a prefill's rows are taken in
/// chunks that stay in L2 while every panel passes over them (all 512 rows of a 2048-wide
/// prompt, 1 MiB, came from L3 once per panel pair).
pub(super) const ACTS_IN_L2: usize = 128 * 1024;

/// A weight matrix `(n, k)` repacked. Panel p's block b holds, in its i-th 32 bytes, bytes
/// 4i..4i+4 of the block's values for each of the panel's columns: for Q8_0 (eight vectors)
/// values 4i..4i+4; for Q4_0 and Q5_0 (four vectors, the file's nibbles) values 4i..4i+4 in the
/// low nibbles and 16+4i..16+4i+4 in the high ones, and for Q5_0 a fifth vector of their fifth
/// bits (`PanelFormat::panel_body`). Blocks sit pair by pair (`PanelAt`). The
/// scales, `COLS` per panel and block, sit in the same order, kept as the file's f16 bits: a
/// batch-1 decode reads every byte of them from memory.
pub struct Q8Panels {
    format: PanelFormat,
    n: usize,
    blocks: usize,
    values: Vec<u8>,
    scales: Vec<u16>,
    /// XORed into every value byte at packing: 0x80 for Q8_0 on the VNNI road, whose unsigned
    /// side it is then (biased by 128 once at load, not per product), else 0.
    bias: u8,
}

impl Q8Panels {
    /// `data` is the matrix's blocks as the file stores them, `n` rows of `k` values.
    pub fn pack(format: PanelFormat, data: &[u8], n: usize, k: usize) -> Self {
        let blocks = k / BLOCK;
        let row_bytes = blocks * format.file_block_bytes();
        let panel_bytes = blocks * Self::block_bytes(format);
        let panels = n.div_ceil(COLS);
        // Columns past the last are zero, with a zero scale: their outputs are never stored.
        let mut values = vec![0u8; panels * panel_bytes];
        let mut scales = vec![0u16; panels * blocks * COLS];
        let bias = if format == PanelFormat::Q8_0 && vnni() { 0x80 } else { 0 };
        let pair_values = values.par_chunks_mut(PAIR * panel_bytes);
        pair_values.zip(scales.par_chunks_mut(PAIR * blocks * COLS)).enumerate().for_each(|(pair, (values, scales))| {
            let first = pair * PAIR * COLS;
            for (col, row) in data[first * row_bytes..(first + PAIR * COLS).min(n) * row_bytes].chunks_exact(row_bytes).enumerate() {
                let (at, lane) = (PanelAt::of(col / COLS, blocks, panels - pair * PAIR), col % COLS);
                for (b, block) in row.chunks_exact(format.file_block_bytes()).enumerate() {
                    scales[at.block(b) * COLS + lane] = u16::from_le_bytes([block[0], block[1]]);
                    for (i, four) in format.panel_body(block)[..format.body_bytes()].chunks_exact(GROUP).enumerate() {
                        let out = &mut values[at.group(b, i, Self::block_bytes(format)) + lane * GROUP..][..GROUP];
                        out.iter_mut().zip(four).for_each(|(o, &v)| *o = v ^ bias);
                    }
                }
            }
        });
        Self { format, n, blocks, values, scales, bias }
    }

    /// The matrix back in the file's blocks, for the reference path and tests: the panels are
    /// the only copy kept.
    pub fn unpack(&self) -> Vec<u8> {
        let row_bytes = self.blocks * self.format.file_block_bytes();
        let block_bytes = Self::block_bytes(self.format);
        let mut data = vec![0u8; self.n * row_bytes];
        for (col, row) in data.chunks_exact_mut(row_bytes).enumerate() {
            let (panel, lane) = (PanelAt::of(col / COLS, self.blocks, self.n.div_ceil(COLS)), col % COLS);
            for (b, block) in row.chunks_exact_mut(self.format.file_block_bytes()).enumerate() {
                block[..2].copy_from_slice(&self.scales[panel.block(b) * COLS + lane].to_le_bytes());
                let mut body = [0u8; BLOCK];
                for (i, four) in body[..self.format.body_bytes()].chunks_exact_mut(GROUP).enumerate() {
                    let packed = &self.values[panel.group(b, i, block_bytes) + lane * GROUP..][..GROUP];
                    four.iter_mut().zip(packed).for_each(|(v, &packed)| *v = packed ^ self.bias);
                }
                self.format.file_body(&body[..self.format.body_bytes()], block);
            }
        }
        data
    }

    /// Whether `run` reads `offsets`: on the VNNI road always, on AVX2 for Q4_0 and Q5_0.
    pub fn reads_offsets(&self) -> bool {
        vnni() || self.format != PanelFormat::Q8_0
    }

    /// Bytes of one panel's block.
    pub(super) const fn block_bytes(format: PanelFormat) -> usize {
        COLS * format.body_bytes()
    }

    /// `out` (`m × (last − first)`) = `acts` (`m` rows, 8-bit) · Wᵀ for weight rows
    /// `first..last`; `first` is a multiple of `COLS` (of `PAIR × COLS` for two-panel tiles) and `offsets` is `offsets(acts, …)`, read
    /// where `reads_offsets`.
    ///
    /// # Safety
    /// No other thread may write `out`'s values during the call.
    pub unsafe fn run(&self, first: usize, last: usize, acts: &QuantizedRows, offsets: &[i32], m: usize, out: OutColumns) {
        let blocks = self.blocks;
        assert!(
            first.is_multiple_of(COLS) && first <= last && (last - first) == out.cols() && out.rows() >= m,
            "panel columns {first}..{last} for a window of {}",
            out.cols()
        );
        assert!(last.div_ceil(COLS) * blocks * COLS <= self.scales.len(), "panel columns {first}..{last} past the matrix");
        assert!(
            acts.holds(m, blocks * BLOCK) && (!self.reads_offsets() || offsets.len() >= m * blocks),
            "8-bit activations short of {m} rows"
        );
        let vnni = vnni();
        let most = if vnni { VNNI_ROWS } else { ROWS };
        let chunk = (ACTS_IN_L2 / acts.k).max(most);
        for chunk_first in (0..m).step_by(chunk) {
            let chunk_rows = chunk_first..(chunk_first + chunk).min(m);
            // Tiles of even height: five rows as 3 + 2, not 4 + 1, a tile that would unpack
            // every weight for one row.
            let height = chunk_rows.len().div_ceil(chunk_rows.len().div_ceil(most));
            let mut col = first;
            while col < last {
                // Both panels of a pair per tile where the window holds both: each broadcast
                // activation then feeds two products.
                let at = PanelAt::of(col / COLS, blocks, self.n.div_ceil(COLS));
                let pair = at.stride == PAIR && (col / COLS).is_multiple_of(PAIR) && last - col > COLS;
                let width = (last - col).min(if pair { PAIR * COLS } else { COLS });
                let panel = Panel {
                    values: self.values[at.group(0, 0, Self::block_bytes(self.format))..].as_ptr(),
                    scales: self.scales[at.first * COLS..].as_ptr(),
                    blocks,
                    stride: at.stride,
                };
                for row in chunk_rows.clone().step_by(height) {
                    let rows = (chunk_rows.end - row).min(height);
                    let at = Rows { acts, offsets, first: row };
                    let mut totals: Totals = [[0.0f32; 2 * COLS]; TOTALS_ROWS];
                    match (vnni, self.format, pair) {
                        (true, PanelFormat::Q4_0, true) => tiles_vnni_pair::<true>(&panel, &at, rows, &mut totals),
                        (true, PanelFormat::Q4_0, false) => tiles_vnni::<1, 4>(&panel, &at, rows, &mut totals),
                        (true, PanelFormat::Q8_0, true) => tiles_vnni_pair::<false>(&panel, &at, rows, &mut totals),
                        (true, PanelFormat::Q8_0, false) => tiles_vnni::<1, 8>(&panel, &at, rows, &mut totals),
                        (true, PanelFormat::Q5_0, _) => unreachable!("Q5_0 is packed only off the VNNI road (q5_0_panels)"),
                        (false, PanelFormat::Q4_0, true) => tiles::<2, 4>(&panel, &at, rows, &mut totals),
                        (false, PanelFormat::Q4_0, false) => tiles::<1, 4>(&panel, &at, rows, &mut totals),
                        (false, PanelFormat::Q5_0, true) => tiles::<2, 5>(&panel, &at, rows, &mut totals),
                        (false, PanelFormat::Q5_0, false) => tiles::<1, 5>(&panel, &at, rows, &mut totals),
                        (false, PanelFormat::Q8_0, true) => tiles::<2, 8>(&panel, &at, rows, &mut totals),
                        (false, PanelFormat::Q8_0, false) => tiles::<1, 8>(&panel, &at, rows, &mut totals),
                    }
                    for (r, values) in totals[..rows].iter().enumerate() {
                        out.set_run(row + r, col - first, &values[..width]);
                    }
                }
                col += width;
            }
        }
    }
}

/// What the tiles start each block's sums from, per block of 8-bit activations, row-major. On
/// the VNNI road the sum of the block's values (every format). On AVX2, where Q4_0's i16 lanes
/// start: the lane pair of one column as an i32, each −8 × the sum of the 16 values its
/// `maddubs` pairs reach (bytes 0, 1 of every four for the low lane, 2, 3 for the high one),
/// which Q5_0's tile doubles (`start`); Q8_0 reads none. None where no matrix of the call
/// reads them (`read`, from `Q8Panels::reads_offsets`).
pub fn offsets(acts: &QuantizedRows, read: bool) -> Vec<i32> {
    if !read {
        return Vec::new();
    }
    if vnni() {
        return acts.values.chunks_exact(BLOCK).map(|block| block.iter().map(|&v| v as i32).sum()).collect();
    }
    let lane = |block: &[i8], half: usize| -> u32 {
        let sum: i32 = block.chunks_exact(GROUP).map(|four| four[2 * half] as i32 + four[2 * half + 1] as i32).sum();
        (-8 * sum) as i16 as u16 as u32
    };
    acts.values.chunks_exact(BLOCK).map(|block| (lane(block, 0) | lane(block, 1) << 16) as i32).collect()
}

/// Rows of a tile on each road, at most; `totals` has room for the taller.
const TOTALS_ROWS: usize = VNNI_ROWS;

/// `count` (at most `ROWS`) activation rows times `P` panels of `BITS`-bit values, into `totals`.
#[inline(always)]
unsafe fn tiles<const P: usize, const BITS: u32>(panel: &Panel, rows: &Rows, count: usize, totals: &mut Totals) {
    match count {
        4 => tile::<4, P, BITS, false>(panel, rows, totals),
        3 => tile::<3, P, BITS, false>(panel, rows, totals),
        2 => tile::<2, P, BITS, false>(panel, rows, totals),
        _ => tile::<1, P, BITS, false>(panel, rows, totals),
    }
}

/// `tiles` on the VNNI road: compiled with AVX-512, so the tile's sums have 32 registers.
#[target_feature(enable = "avx512f,avx512vl,avx512vnni")]
unsafe fn tiles_vnni<const P: usize, const BITS: u32>(panel: &Panel, rows: &Rows, count: usize, totals: &mut Totals) {
    match count {
        8.. => tile::<8, P, BITS, true>(panel, rows, totals),
        7 => tile::<7, P, BITS, true>(panel, rows, totals),
        6 => tile::<6, P, BITS, true>(panel, rows, totals),
        5 => tile::<5, P, BITS, true>(panel, rows, totals),
        4 => tile::<4, P, BITS, true>(panel, rows, totals),
        3 => tile::<3, P, BITS, true>(panel, rows, totals),
        2 => tile::<2, P, BITS, true>(panel, rows, totals),
        _ => tile::<1, P, BITS, true>(panel, rows, totals),
    }
}

pub(super) type Totals = [[f32; 2 * COLS]; TOTALS_ROWS];

/// Panels whose blocks sit side by side in memory: a pair's, interleaved.
pub(super) const PAIR: usize = 2;

/// Where a panel's blocks are. Its scales: block b's at `block(b)` (in panel blocks), its pair
/// partner's (if any) next to them. Its values: a pair's blocks in turn, and within a block
/// each 32-byte group of the first panel beside the same group of the second, so the group of
/// both is one 512-bit vector (`group`). Every pair but a lone last panel holds two panels.
struct PanelAt {
    first: usize,
    stride: usize,
    /// The pair's first block, and which of its panels this is.
    pair_first: usize,
    side: usize,
}

impl PanelAt {
    fn of(panel: usize, blocks: usize, panels: usize) -> Self {
        let pair = panel / PAIR;
        let (pair_first, side) = (pair * PAIR * blocks, panel % PAIR);
        Self { first: pair_first + side, stride: (panels - pair * PAIR).min(PAIR), pair_first, side }
    }

    fn block(&self, b: usize) -> usize {
        self.first + b * self.stride
    }

    /// The byte where group `i` of block `b` begins, for panel blocks of `block_bytes`.
    fn group(&self, b: usize, i: usize, block_bytes: usize) -> usize {
        (self.pair_first + b * self.stride) * block_bytes + (i * self.stride + self.side) * GROUP_BYTES
    }
}

/// Bytes of one group: four values of each of a panel's columns.
pub(super) const GROUP_BYTES: usize = COLS * GROUP;

/// A tile's repacked blocks and scales: group i of block b of the tile's panel p is at byte
/// `b · stride · block bytes + (i · stride + p) · GROUP_BYTES` (`PanelAt::group`), its scales
/// `(b · stride + p) · COLS` on.
pub(super) struct Panel {
    pub(super) values: *const u8,
    pub(super) scales: *const u16,
    pub(super) blocks: usize,
    pub(super) stride: usize,
}

/// The activation rows of one tile, from `first`.
pub(super) struct Rows<'a> {
    acts: &'a QuantizedRows,
    offsets: &'a [i32],
    first: usize,
}

impl Rows<'_> {
    /// Where each of `R` rows' values, scales and offsets begin (offsets only where `offsets`
    /// says they are read). Pointers, not slices: `run` checked that every row's blocks are
    /// there, and bounds checks in the loop would hold registers.
    #[inline(always)]
    pub(super) fn starts<const R: usize>(&self, blocks: usize, offsets: bool) -> ([*const u8; R], [*const f32; R], [*const i32; R]) {
        let row = |r: usize| self.first + r;
        (
            std::array::from_fn(|r| self.acts.values[row(r) * self.acts.k..].as_ptr().cast()),
            std::array::from_fn(|r| self.acts.scales[row(r) * blocks..].as_ptr()),
            std::array::from_fn(|r| if offsets { self.offsets[row(r) * blocks..].as_ptr() } else { std::ptr::null() }),
        )
    }
}

/// With several rows, the next tile's panels (which follow this tile's) are pulled in while
/// this one computes: at 4 to 8 rows it streamed 9-20% faster than without. One row reads its
/// panels as one stream that the hardware prefetcher follows, and asking for lines a tile ahead
/// was no faster there (1B Q8_0 batch-1 decode 25.6 tok/s with, 26.7 without). `bytes` from
/// `block` are this tile's block; the next tile's is `ahead` bytes on.
#[inline(always)]
pub(super) fn prefetch_next_tile<const R: usize>(block: *const u8, bytes: usize, ahead: usize) {
    for line in (0..if R > 1 { bytes } else { 0 }).step_by(64) {
        // SAFETY: a prefetch reads nothing architecturally and cannot fault.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(block.wrapping_add(ahead + line) as *const i8) };
    }
}

/// Adds four values of `R` activation rows (at byte `at` of each) times eight columns of each
/// of `P` panels (`w`: Q4_0 or Q5_0 values as unsigned bytes, or Q8_0 as packed: signed, or
/// biased on the VNNI road) to the block's sums.
#[inline(always)]
unsafe fn step<const R: usize, const P: usize, const UNSIGNED: bool, const VNNI: bool>(
    w: [__m256i; P],
    acts: &[*const u8; R],
    at: usize,
    dots: &mut [[__m256i; P]; R],
) {
    if VNNI {
        // `w` is the unsigned side: nibbles, or Q8_0 biased by 128 at packing (the sums' start
        // takes 128·Σa off).
        for r in 0..R {
            let a = _mm256_set1_epi32(acts[r].add(at).cast::<i32>().read_unaligned());
            for p in 0..P {
                dots[r][p] = _mm256_dpbusd_epi32(dots[r][p], w[p], a);
            }
        }
        return;
    }
    let abs_w: [__m256i; P] = std::array::from_fn(|p| if UNSIGNED { w[p] } else { _mm256_sign_epi8(w[p], w[p]) });
    for r in 0..R {
        let a = _mm256_set1_epi32(acts[r].add(at).cast::<i32>().read_unaligned());
        for p in 0..P {
            if UNSIGNED {
                dots[r][p] = pinned(_mm256_add_epi16(dots[r][p], _mm256_maddubs_epi16(w[p], a)));
            } else {
                let pairs = _mm256_maddubs_epi16(abs_w[p], _mm256_sign_epi8(a, w[p]));
                dots[r][p] = pinned(_mm256_add_epi32(dots[r][p], _mm256_madd_epi16(pairs, _mm256_set1_epi16(1))));
            }
        }
    }
}

/// `v`, through an empty `asm!` that LLVM cannot see into: a block's running sums then stay
/// chains of adds. Left to itself, LLVM regroups the adds into trees whose partial sums
/// outnumber the 16 vector registers, and spills them.
#[inline(always)]
fn pinned(mut v: __m256i) -> __m256i {
    // SAFETY: the template is a comment; `v` stays as it was.
    unsafe { std::arch::asm!("/* {0} */", inout(ymm_reg) v, options(pure, nomem, nostack, preserves_flags)) };
    v
}

/// Where a block's sums start, from the row's `offsets`: on AVX2 Q4_0's i16 lane pairs, twice
/// those for Q5_0's offset of 16 (the i16 adds wrap, and so does the doubling), Q8_0 at zero;
/// on the VNNI road −offset × the block's activation sum.
#[inline(always)]
unsafe fn start<const BITS: u32, const VNNI: bool>(offsets: *const i32, b: usize) -> __m256i {
    match (VNNI, BITS) {
        (true, _) => _mm256_set1_epi32(-(1 << (BITS - 1)) * *offsets.add(b)),
        (false, 8) => _mm256_setzero_si256(),
        (false, 5) => {
            let lanes = _mm256_set1_epi32(*offsets.add(b));
            _mm256_add_epi16(lanes, lanes)
        }
        (false, _) => _mm256_set1_epi32(*offsets.add(b)),
    }
}

/// `R` activation rows times `P` panels of eight columns, over every block.
#[inline(always)]
unsafe fn tile<const R: usize, const P: usize, const BITS: u32, const VNNI: bool>(panel: &Panel, rows: &Rows, totals: &mut Totals) {
    let blocks = panel.blocks;
    let format = match BITS {
        4 => PanelFormat::Q4_0,
        5 => PanelFormat::Q5_0,
        _ => PanelFormat::Q8_0,
    };
    let block_bytes = Q8Panels::block_bytes(format);
    let (acts, scales, offsets) = rows.starts::<R>(blocks, BITS < 8 || VNNI);
    let ones = _mm256_set1_epi16(1);
    let (nibble, fifth_bit) = (_mm256_set1_epi8(0x0f), _mm256_set1_epi8(0x10));
    let mut acc = [[_mm256_setzero_ps(); P]; R];
    let ahead = panel.stride * blocks * block_bytes;
    for b in 0..blocks {
        let base = panel.values.add(b * panel.stride * block_bytes);
        prefetch_next_tile::<R>(base, P * block_bytes, ahead);
        let load = |i: usize| -> [__m256i; P] {
            std::array::from_fn(|p| _mm256_loadu_si256(base.add((i * panel.stride + p) * GROUP_BYTES) as *const __m256i))
        };
        let mut dots: [[__m256i; P]; R] = std::array::from_fn(|r| [start::<BITS, VNNI>(offsets[r], b); P]);
        if BITS < 8 {
            for i in 0..BLOCK / 2 / GROUP {
                let packed = load(i);
                let mut low = packed.map(|v| _mm256_and_si256(v, nibble));
                let mut high = packed.map(|v| _mm256_and_si256(_mm256_srli_epi16::<4>(v), nibble));
                if BITS == 5 {
                    // Group i's fifth bits are bits i and 4 + i of each byte of the last group
                    // (`PanelFormat::panel_body`): moved to bit 4, within each byte of the
                    // 16-bit lanes the shifts move.
                    let fifth = load(BLOCK / 2 / GROUP);
                    let (up, down) = (_mm_cvtsi32_si128(4 - i as i32), _mm_cvtsi32_si128(i as i32));
                    for p in 0..P {
                        low[p] = _mm256_or_si256(low[p], _mm256_and_si256(_mm256_sll_epi16(fifth[p], up), fifth_bit));
                        high[p] = _mm256_or_si256(high[p], _mm256_and_si256(_mm256_srl_epi16(fifth[p], down), fifth_bit));
                    }
                }
                step::<R, P, true, VNNI>(low, &acts, b * BLOCK + i * GROUP, &mut dots);
                step::<R, P, true, VNNI>(high, &acts, b * BLOCK + BLOCK / 2 + i * GROUP, &mut dots);
            }
        } else {
            for i in 0..BLOCK / GROUP {
                step::<R, P, false, VNNI>(load(i), &acts, b * BLOCK + i * GROUP, &mut dots);
            }
        }
        for p in 0..P {
            let weight_scales = _mm256_cvtph_ps(_mm_loadu_si128(panel.scales.add((b * panel.stride + p) * COLS).cast()));
            for r in 0..R {
                let dot = if BITS < 8 && !VNNI { _mm256_madd_epi16(dots[r][p], ones) } else { dots[r][p] };
                let scale = _mm256_mul_ps(weight_scales, _mm256_set1_ps(*scales[r].add(b)));
                acc[r][p] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc[r][p]);
            }
        }
    }
    for (total, acc) in totals.iter_mut().zip(acc) {
        for (p, acc) in acc.into_iter().enumerate() {
            _mm256_storeu_ps(total[p * COLS..].as_mut_ptr(), acc);
        }
    }
}
