//! Walks the output in register tiles sized to AVX2's 16 vector registers: 2 activation rows ×
//! 2 weight rows where there are rows to pair (four accumulators beside both weight rows and
//! their magnitudes; a 4×4 tile spilled to the stack and ran 20% slower), 1 × 4 for a lone
//! row (decode), single columns at the edges.

use super::activations::QuantizedActivations;
use super::formats::WeightFormat;
use super::x86::{tile_avx2, tile_vnni, Tile};
use super::Kernel;

pub fn run(kernel: Kernel, format: WeightFormat, weights: &[u8], row_bytes: usize, cols: usize, acts: &QuantizedActivations, out: &mut [f32]) {
    let ctx = Context { kernel, format, weights, row_bytes, cols, acts };
    let mut row = 0;
    while row < acts.rows {
        if acts.rows - row >= 2 {
            ctx.sweep::<2, 2>(row, out);
            row += 2;
        } else {
            ctx.sweep::<1, 4>(row, out);
            row += 1;
        }
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
    /// `MR` activation rows against every weight row, `NR` at a time, single rows at the edge.
    fn sweep<const MR: usize, const NR: usize>(&self, row: usize, out: &mut [f32]) {
        let mut col = 0;
        while col + NR <= self.cols {
            self.tile::<MR, NR>(row, col, out);
            col += NR;
        }
        for col in col..self.cols {
            self.tile::<MR, 1>(row, col, out);
        }
    }

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
