//! Walks the output in register tiles sized to AVX2's 16 vector registers: up to 8 activation
//! rows × 1 weight row, so a batch of 8 widens each weight block once per step (8 accumulators
//! beside the widened block), 1 × 4 for a lone row (decode), single columns at the edges.

use super::formats::{WeightFormat, BLOCK};
use super::x86::{tile, Tile};

/// `out` (`m × cols`) = `x` (`m × k`) · Wᵀ for the `cols` weight rows in `weights`.
pub fn run(format: WeightFormat, weights: &[u8], row_bytes: usize, cols: usize, x: &[f32], m: usize, out: &mut [f32]) {
    let k = row_bytes / format.block_bytes() * BLOCK;
    assert!(x.len() >= m * k && weights.len() >= cols * row_bytes && out.len() >= m * cols, "matmul operands out of range");
    let ctx = Context { format, weights, row_bytes, cols, x, k };
    let mut row = 0;
    while row < m {
        row += match m - row {
            8.. => ctx.sweep::<8, 1>(row, out),
            4.. => ctx.sweep::<4, 2>(row, out),
            2.. => ctx.sweep::<2, 2>(row, out),
            _ => ctx.sweep::<1, 4>(row, out),
        };
    }
}

struct Context<'a> {
    format: WeightFormat,
    weights: &'a [u8],
    row_bytes: usize,
    cols: usize,
    x: &'a [f32],
    k: usize,
}

impl Context<'_> {
    /// `MR` activation rows against every weight row, `NR` at a time, single rows at the edge;
    /// returns the rows done.
    fn sweep<const MR: usize, const NR: usize>(&self, row: usize, out: &mut [f32]) -> usize {
        let mut col = 0;
        while col + NR <= self.cols {
            self.tile::<MR, NR>(row, col, out);
            col += NR;
        }
        for col in col..self.cols {
            self.tile::<MR, 1>(row, col, out);
        }
        MR
    }

    fn tile<const MR: usize, const NR: usize>(&self, row: usize, col: usize, out: &mut [f32]) {
        let tile_ptrs = Tile::<MR, NR> {
            weights: std::array::from_fn(|i| self.weights[(col + i) * self.row_bytes..].as_ptr()),
            acts: std::array::from_fn(|j| self.x[(row + j) * self.k..].as_ptr()),
        };
        // SAFETY: every weight pointer starts a row of `row_bytes` (whole blocks) and every
        // activation pointer a row of `k` values, inside the slices (asserted in `run`).
        let sums = unsafe { tile(self.format, &tile_ptrs, self.k / BLOCK) };
        for (j, values) in sums.iter().enumerate() {
            out[(row + j) * self.cols + col..][..NR].copy_from_slice(values);
        }
    }
}
