//! Walks the output in register tiles: 4 activation rows × 4 weight rows where both are
//! available (each loaded block then feeds four products), narrower tiles at the edges.

use super::activations::QuantizedActivations;
use super::formats::WeightFormat;
use super::x86::{tile_avx2, tile_vnni, Tile};
use super::Kernel;

pub fn run(kernel: Kernel, format: WeightFormat, weights: &[u8], row_bytes: usize, cols: usize, acts: &QuantizedActivations, out: &mut [f32]) {
    let ctx = Context { kernel, format, weights, row_bytes, cols, acts };
    let mut row = 0;
    while row < acts.rows {
        let tall = acts.rows - row >= 4;
        let mut col = 0;
        while col < cols {
            let wide = cols - col >= 4;
            match (tall, wide) {
                (true, true) => ctx.tile::<4, 4>(row, col, out),
                (true, false) => ctx.tile::<4, 1>(row, col, out),
                (false, true) => ctx.tile::<1, 4>(row, col, out),
                (false, false) => ctx.tile::<1, 1>(row, col, out),
            }
            col += if wide { 4 } else { 1 };
        }
        row += if tall { 4 } else { 1 };
    }
}

struct Context<'a> {
    kernel: Kernel,
    format: WeightFormat,
    weights: &'a [u8],
    row_bytes: usize,
    cols: usize,
    acts: &'a QuantizedActivations,
}

impl Context<'_> {
    fn tile<const MR: usize, const NR: usize>(&self, row: usize, col: usize, out: &mut [f32]) {
        let tile = Tile::<MR, NR> {
            weights: std::array::from_fn(|i| self.weights[(col + i) * self.row_bytes..].as_ptr()),
            values: std::array::from_fn(|j| self.acts.row_values(row + j).as_ptr()),
            scales: std::array::from_fn(|j| self.acts.row_scales(row + j).as_ptr()),
        };
        let blocks = self.acts.blocks_per_row;
        debug_assert_eq!(blocks * self.format.block_bytes(), self.row_bytes);
        // SAFETY: every pointer starts a row holding `blocks` whole blocks (weights) or
        // `blocks * BLOCK` values and `blocks` scales (activations), checked by the slicing above
        // and by the caller's shapes; the VNNI kernel runs only where the CPU reported VNNI.
        let sums = unsafe {
            match self.kernel {
                Kernel::Vnni => tile_vnni(self.format, &tile, blocks),
                _ => tile_avx2(self.format, &tile, blocks),
            }
        };
        for (j, values) in sums.iter().enumerate() {
            out[(row + j) * self.cols + col..][..NR].copy_from_slice(values);
        }
    }
}
