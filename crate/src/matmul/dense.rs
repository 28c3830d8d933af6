//! Wide batches (prefill) take another road: a panel of weight rows is widened to f32 in a
//! per-thread buffer and multiplied by the f32 activations with the `gemm` crate's FMA kernels.
//! On AVX2 those run about twice as fast as our register tiles once the batch is wide enough to
//! pay for widening a whole panel (measured with `examples/matmul_speed`: 29 against 55 GMAC/s
//! at 512 rows, and ahead already at 64).

use std::cell::RefCell;

use gemm::{gemm, Parallelism};

use super::formats::{WeightFormat, BLOCK};
use super::out_columns::OutColumns;

/// Below this many activation rows the register tiles win: widening a panel to memory costs as
/// much as multiplying about 30 rows through it.
pub const DENSE_MIN_ROWS: usize = 64;

/// Weight rows per parallel task: at most 128, wide enough that gemm's packing is amortised and
/// narrow enough that a panel in f32 stays in L2, and a whole number of rounds per thread (576
/// columns in 128s left one thread idle for a fifth of the matmul).
pub fn panel_columns(total: usize) -> usize {
    const WIDEST: usize = 128;
    let threads = rayon::current_num_threads().max(1);
    let rounds = total.div_ceil(threads * WIDEST).max(1);
    total.div_ceil(threads * rounds).next_multiple_of(16)
}

/// `out` (`m × cols`) = `x` (`m × k`) · Wᵀ for the `cols` weight rows in `weights`.
///
/// # Safety
/// No other thread may write `out`'s values during the call.
pub unsafe fn run(format: WeightFormat, weights: &[u8], row_bytes: usize, x: &[f32], m: usize, out: OutColumns) {
    let cols = weights.len() / row_bytes;
    let k = format.row_values(row_bytes);
    assert!(out.rows() >= m && out.cols() == cols && x.len() >= m * k, "dense matmul operands out of range");
    thread_local! {
        static PANEL: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    }
    PANEL.with_borrow_mut(|panel| {
        panel.resize(cols * k, 0.0);
        widen(format, weights, panel);
        // SAFETY: x holds m×k values and the panel cols×k (asserted above); the window m×cols
        // values `stride` apart, this task's alone (the caller's contract). The strides below
        // walk them row-major, with the panel read transposed (k × cols, column stride k).
        unsafe {
            gemm(
                m,
                cols,
                k,
                out.as_mut_ptr(),
                1,
                out.stride() as isize,
                false,
                x.as_ptr(),
                1,
                k as isize,
                panel.as_ptr(),
                k as isize,
                1,
                0.0,
                1.0,
                false,
                false,
                false,
                Parallelism::None,
            );
        }
    });
}

/// Every block's values times its scale, in place of the blocks.
fn widen(format: WeightFormat, weights: &[u8], out: &mut [f32]) {
    for (block, values) in weights.chunks_exact(format.block_bytes()).zip(out.chunks_exact_mut(BLOCK)) {
        values.copy_from_slice(&format.values(block));
    }
}
