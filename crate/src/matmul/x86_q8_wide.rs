//! The wide road (prefill) for 8-bit activations on AVX2 CPUs without AMX. Each task first
//! repacks its weight rows into panels of eight columns with four consecutive values of every
//! column side by side (32 bytes), so one `maddubs` multiplies four values of an activation row,
//! broadcast, into all eight columns, and each column's sum builds up in its own lane: no
//! horizontal sums, which the narrow tile (`x86_q8.rs`) pays per block. A `maddubs` does 32
//! multiply-adds where an f32 FMA does 8, at the same rate on Zen 3.
//!
//! Q4_0 keeps its nibbles unsigned (0..16): a pair of products is then at most 2 × 15 × 127, so
//! a block's eight `maddubs` add up in i16 and one `madd` widens them; the offset of 8 comes off
//! once per block as 8 × the activations' block sum. Q8_0's signed bytes take the sign trick
//! (|w| times a with w's sign) and widen at every step, as in `x86_q8.rs`.
//!
//! Each output adds its blocks in order as `portable_q8` does, exact integer dot times the
//! product of both scales, with a separate multiply and add: the same bits as that definition.

use std::arch::x86_64::*;
use std::cell::RefCell;

use half::f16;

use super::activations::QuantizedRows;
use super::formats::{WeightFormat, BLOCK};
use super::out_columns::OutColumns;

/// Columns per panel: the lanes of one vector of i32.
const COLS: usize = 8;
/// Values of one column side by side: what `madd` sums into one i32 lane.
const GROUP: usize = 4;
/// Bytes of one panel's block: every column's 32 values.
const PANEL_BLOCK: usize = COLS * BLOCK;
/// Activation rows per tile, at most: Q4_0's six i16 sums per panel fit the 16 vector
/// registers beside the weights; Q8_0 also holds |w| and widens as it goes, and takes four.
const ROWS: usize = 6;
const Q8_ROWS: usize = 4;

/// One task's weight rows, repacked: per panel of `COLS` columns and per block, `BLOCK / GROUP`
/// steps of `COLS × GROUP` bytes, then the panel's scales, `COLS` per block.
#[derive(Default)]
struct Panels {
    values: Vec<u8>,
    scales: Vec<f32>,
}

impl Panels {
    fn pack(&mut self, format: WeightFormat, weights: &[u8], row_bytes: usize) {
        let cols = weights.len() / row_bytes;
        let blocks = row_bytes / format.block_bytes();
        let panels = cols.div_ceil(COLS);
        // Columns past the last are zero, with a zero scale; their outputs are not stored.
        self.values.clear();
        self.values.resize(panels * blocks * PANEL_BLOCK, 0);
        self.scales.clear();
        self.scales.resize(panels * blocks * COLS, 0.0);
        for (col, row) in weights.chunks_exact(row_bytes).enumerate() {
            let (panel, lane) = (col / COLS, col % COLS);
            for (b, block) in row.chunks_exact(format.block_bytes()).enumerate() {
                let values = stored_values(format, block);
                let at = (panel * blocks + b) * PANEL_BLOCK + lane * GROUP;
                for (step, four) in values.chunks_exact(GROUP).enumerate() {
                    self.values[at + step * COLS * GROUP..][..GROUP].copy_from_slice(four);
                }
                self.scales[(panel * blocks + b) * COLS + lane] = f16::from_le_bytes([block[0], block[1]]).to_f32();
            }
        }
    }
}

/// A block's 32 values as the tiles read them: Q4_0's unsigned nibbles (the value plus 8) in
/// order, Q8_0's signed bytes as they are.
#[inline]
fn stored_values(format: WeightFormat, block: &[u8]) -> [u8; BLOCK] {
    let mut values = [0u8; BLOCK];
    match format {
        WeightFormat::Q8_0 => values.copy_from_slice(&block[2..2 + BLOCK]),
        WeightFormat::Q4_0 => {
            for (i, &byte) in block[2..2 + BLOCK / 2].iter().enumerate() {
                values[i] = byte & 0x0f;
                values[i + BLOCK / 2] = byte >> 4;
            }
        }
    }
    values
}

/// Each block's sum of 8-bit activation values, row-major: what Q4_0's offset of 8 takes off.
pub fn block_sums(acts: &QuantizedRows) -> Vec<i32> {
    acts.values.chunks_exact(BLOCK).map(|block| block.iter().map(|&v| v as i32).sum()).collect()
}

/// `out` (`m × cols`) = `acts` (`m × k`, 8-bit) · Wᵀ for the `cols` weight rows in `weights`;
/// `sums` is `block_sums(acts)`.
///
/// # Safety
/// No other thread may write `out`'s values during the call.
pub unsafe fn run(format: WeightFormat, weights: &[u8], row_bytes: usize, acts: &QuantizedRows, sums: &[i32], m: usize, out: OutColumns) {
    let cols = weights.len() / row_bytes;
    let (k, blocks) = (format.row_values(row_bytes), row_bytes / format.block_bytes());
    assert!(out.rows() >= m && out.cols() == cols, "wide q8 output of {} × {} for {m} × {cols}", out.rows(), out.cols());
    assert!(acts.k == k && acts.values.len() >= m * k && acts.scales.len() >= m * blocks && sums.len() >= m * blocks, "wide q8 activations short of {m} rows of {k}");
    thread_local! {
        static PANELS: RefCell<Panels> = RefCell::new(Panels::default());
    }
    PANELS.with_borrow_mut(|panels| {
        panels.pack(format, weights, row_bytes);
        let mut first_col = 0;
        while first_col < cols {
            // Two panels per tile while two are left: each broadcast activation then feeds two
            // `maddubs`.
            let pair = cols - first_col > COLS;
            let width = (cols - first_col).min(if pair { 2 * COLS } else { COLS });
            let panel = Panel {
                values: panels.values[first_col / COLS * blocks * PANEL_BLOCK..].as_ptr(),
                scales: panels.scales[first_col / COLS * blocks * COLS..].as_ptr(),
                blocks,
            };
            let mut row = 0;
            while row < m {
                let rows = (m - row).min(if format == WeightFormat::Q4_0 { ROWS } else { Q8_ROWS });
                let at = Rows { acts, sums, first: row };
                let mut totals = [[0.0f32; 2 * COLS]; ROWS];
                match (format == WeightFormat::Q4_0, pair) {
                    (true, true) => tiles::<2, true>(&panel, &at, rows, &mut totals),
                    (true, false) => tiles::<1, true>(&panel, &at, rows, &mut totals),
                    (false, true) => tiles::<2, false>(&panel, &at, rows, &mut totals),
                    (false, false) => tiles::<1, false>(&panel, &at, rows, &mut totals),
                }
                for (r, values) in totals[..rows].iter().enumerate() {
                    out.set_run(row + r, first_col, &values[..width]);
                }
                row += rows;
            }
            first_col += width;
        }
    });
}

/// `rows` (at most `ROWS`) activation rows times `P` panels, into `totals`.
#[inline(always)]
unsafe fn tiles<const P: usize, const Q4: bool>(panel: &Panel, rows: &Rows, count: usize, totals: &mut [[f32; 2 * COLS]; ROWS]) {
    match count {
        ROWS => tile::<ROWS, P, Q4>(panel, rows, totals),
        5 => tile::<5, P, Q4>(panel, rows, totals),
        4 => tile::<4, P, Q4>(panel, rows, totals),
        3 => tile::<3, P, Q4>(panel, rows, totals),
        2 => tile::<2, P, Q4>(panel, rows, totals),
        _ => tile::<1, P, Q4>(panel, rows, totals),
    }
}

/// A panel's repacked blocks and scales; the next panel follows `blocks` blocks later.
struct Panel {
    values: *const u8,
    scales: *const f32,
    blocks: usize,
}

/// The activation rows of one tile, from `first`.
struct Rows<'a> {
    acts: &'a QuantizedRows,
    sums: &'a [i32],
    first: usize,
}

/// `R` activation rows times `P` panels of eight columns, over every block.
#[inline(always)]
unsafe fn tile<const R: usize, const P: usize, const Q4: bool>(panel: &Panel, rows: &Rows, totals: &mut [[f32; 2 * COLS]; ROWS]) {
    let (k, blocks) = (rows.acts.k, panel.blocks);
    let values: [*const u8; R] = std::array::from_fn(|r| rows.acts.values[(rows.first + r) * k..].as_ptr().cast());
    let scales: [&[f32]; R] = std::array::from_fn(|r| &rows.acts.scales[(rows.first + r) * blocks..]);
    let sums: [&[i32]; R] = std::array::from_fn(|r| &rows.sums[(rows.first + r) * blocks..]);
    let ones = _mm256_set1_epi16(1);
    let mut acc = [[_mm256_setzero_ps(); P]; R];
    for b in 0..blocks {
        let block: [*const u8; P] = std::array::from_fn(|p| panel.values.add((p * blocks + b) * PANEL_BLOCK));
        let mut dots = [[_mm256_setzero_si256(); P]; R];
        for step in 0..BLOCK / GROUP {
            let w: [__m256i; P] = std::array::from_fn(|p| _mm256_loadu_si256(block[p].add(step * COLS * GROUP) as *const __m256i));
            let abs_w: [__m256i; P] = std::array::from_fn(|p| if Q4 { w[p] } else { _mm256_sign_epi8(w[p], w[p]) });
            for r in 0..R {
                let a = _mm256_set1_epi32(values[r].add(b * BLOCK + step * GROUP).cast::<i32>().read_unaligned());
                for p in 0..P {
                    if Q4 {
                        // At most 8 × 2 × 15 × 127 = 30480 per i16 lane over the block.
                        dots[r][p] = _mm256_add_epi16(dots[r][p], _mm256_maddubs_epi16(w[p], a));
                    } else {
                        let pairs = _mm256_maddubs_epi16(abs_w[p], _mm256_sign_epi8(a, w[p]));
                        dots[r][p] = _mm256_add_epi32(dots[r][p], _mm256_madd_epi16(pairs, ones));
                    }
                }
            }
        }
        for p in 0..P {
            let weight_scales = _mm256_loadu_ps(panel.scales.add((p * blocks + b) * COLS));
            for r in 0..R {
                let dot = if Q4 { _mm256_sub_epi32(_mm256_madd_epi16(dots[r][p], ones), _mm256_set1_epi32(8 * sums[r][b])) } else { dots[r][p] };
                let scale = _mm256_mul_ps(weight_scales, _mm256_set1_ps(scales[r][b]));
                acc[r][p] = _mm256_add_ps(acc[r][p], _mm256_mul_ps(_mm256_cvtepi32_ps(dot), scale));
            }
        }
    }
    for (total, acc) in totals.iter_mut().zip(acc) {
        for (p, acc) in acc.into_iter().enumerate() {
            _mm256_storeu_ps(total[p * COLS..].as_mut_ptr(), acc);
        }
    }
}
