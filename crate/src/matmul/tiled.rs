//! Walks the output in register tiles: each SIMD kernel picks tile shapes that fit its vector
//! registers (so a batch of 8 widens each weight block once per step), with single columns at
//! the edges.

use std::marker::PhantomData;

use super::formats::{WeightFormat, BLOCK};

/// Pointers into one tile's inputs: `NR` weight rows (block-encoded) and `MR` activation rows.
pub struct Tile<const MR: usize, const NR: usize> {
    pub weights: [*const u8; NR],
    pub acts: [*const f32; MR],
}

/// A SIMD register-tile kernel.
pub trait TileKernel: Sized {
    /// Sweeps the rows from `row` with the widest tile that fits `rows_left`; returns the rows done.
    fn sweep_widest(ctx: &Context<Self>, rows_left: usize, row: usize, out: &mut [f32]) -> usize;

    /// `out[j][i]` = activation row j · weight row i, over `blocks` blocks.
    ///
    /// # Safety
    /// Every weight pointer must start `blocks` whole blocks of `format` and every activation
    /// pointer `blocks × 32` values, and the CPU must have the kernel's instruction set.
    unsafe fn tile<const MR: usize, const NR: usize>(format: WeightFormat, tile: &Tile<MR, NR>, blocks: usize) -> [[f32; NR]; MR];
}

/// `out` (`m × cols`) = `x` (`m × k`) · Wᵀ for the `cols` weight rows in `weights`.
pub fn run<K: TileKernel>(format: WeightFormat, weights: &[u8], row_bytes: usize, cols: usize, x: &[f32], m: usize, out: &mut [f32]) {
    let k = row_bytes / format.block_bytes() * BLOCK;
    assert!(x.len() >= m * k && weights.len() >= cols * row_bytes && out.len() >= m * cols, "matmul operands out of range");
    let ctx = Context { format, weights, row_bytes, cols, x, k, kernel: PhantomData::<K> };
    let mut row = 0;
    while row < m {
        row += K::sweep_widest(&ctx, m - row, row, out);
    }
}

pub struct Context<'a, K> {
    format: WeightFormat,
    weights: &'a [u8],
    row_bytes: usize,
    cols: usize,
    x: &'a [f32],
    k: usize,
    kernel: PhantomData<K>,
}

impl<K: TileKernel> Context<'_, K> {
    /// `MR` activation rows against every weight row, `NR` at a time, single rows at the edge;
    /// returns the rows done.
    pub fn sweep<const MR: usize, const NR: usize>(&self, row: usize, out: &mut [f32]) -> usize {
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
        // activation pointer a row of `k` values, inside the slices (asserted in `run`); the
        // kernel was chosen for this CPU by `matmul::kernel`.
        let sums = unsafe { K::tile(self.format, &tile_ptrs, self.k / BLOCK) };
        for (j, values) in sums.iter().enumerate() {
            out[(row + j) * self.cols + col..][..NR].copy_from_slice(values);
        }
    }
}
