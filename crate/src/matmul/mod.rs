//! Our quantized matmul: `y = x · Wᵀ` for GGUF Q8_0 and Q4_0 weights, read in place from the
//! file's blocks. Activations are quantized to 8 bits per block once per call; the products run
//! in register tiles on SIMD integer dot products, split over the rayon pool by output columns.
//! Wide batches (prefill) widen panels of weights to f32 instead and run f32 FMA kernels
//! (`dense.rs`), which are faster there.
//! candle's own quantized matmul stays the slow reference (see `model/reference.rs`).

mod activations;
mod dense;
mod formats;
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod x86;

use std::cell::RefCell;
use std::sync::{Arc, OnceLock};

use candle_core::quantized::{GgmlDType, QTensor};
use rayon::prelude::*;

pub use activations::{QuantizedActivations, BLOCK};
pub use formats::WeightFormat;

use crate::error::{Error, Result};

/// A weight matrix `(n, k)` in a block format our kernels read.
pub struct QuantMatrix {
    tensor: Arc<QTensor>,
    format: WeightFormat,
    n: usize,
    k: usize,
}

impl QuantMatrix {
    /// `None` when the tensor's format has no kernel here (the caller keeps candle's).
    pub fn new(tensor: Arc<QTensor>) -> Option<Self> {
        let format = match tensor.dtype() {
            GgmlDType::Q8_0 => WeightFormat::Q8_0,
            GgmlDType::Q4_0 => WeightFormat::Q4_0,
            _ => return None,
        };
        let (n, k) = tensor.shape().dims2().ok()?;
        (k % BLOCK == 0).then_some(Self { tensor, format, n, k })
    }

    pub fn out_features(&self) -> usize {
        self.n
    }

    /// `x` is `(m, k)` row-major; returns `(m, n)`.
    pub fn forward(&self, x: &[f32], m: usize) -> Result<Vec<f32>> {
        Ok(Self::forward_many(&[self], x, m)?.pop().unwrap_or_default())
    }

    /// Several matrices over the same input (q/k/v, gate/up): the input is quantized once and
    /// all their columns are split over the pool in one parallel region, which matters at
    /// decode, where each region costs about as much as a small matmul.
    pub fn forward_many(matrices: &[&QuantMatrix], x: &[f32], m: usize) -> Result<Vec<Vec<f32>>> {
        let k = matrices.first().map_or(0, |w| w.k);
        if matrices.iter().any(|w| w.k != k) || x.len() != m * k {
            return Err(Error::invalid(format!("matmul input of {} values does not match {m} rows of {k}", x.len())));
        }
        let data = matrices.iter().map(|w| w.tensor.data()).collect::<candle_core::Result<Vec<_>>>()?;
        let total: usize = matrices.iter().map(|w| w.n).sum();
        let wide = m >= dense::DENSE_MIN_ROWS;
        let row_bytes = matrices.iter().map(|w| w.k / BLOCK * w.format.block_bytes()).max().unwrap_or(1);
        let chunk = if wide { dense::panel_columns(total) } else { column_chunk(total, m, row_bytes) };
        // (matrix, first column, last column) for every task
        let tasks: Vec<(usize, usize, usize)> = matrices
            .iter()
            .enumerate()
            .flat_map(|(i, w)| (0..w.n).step_by(chunk).map(move |c| (i, c, (c + chunk).min(w.n))))
            .collect();
        thread_local! {
            static ACTIVATIONS: RefCell<QuantizedActivations> = RefCell::new(QuantizedActivations::default());
        }
        ACTIVATIONS.with_borrow_mut(|acts| {
            if !wide {
                acts.quantize_into(x, m, k);
            }
            let acts = &*acts;
            let parts: Vec<Vec<f32>> = tasks
                .par_iter()
                .map(|&(i, first, last)| {
                    let w = matrices[i];
                    let row_bytes = w.k / BLOCK * w.format.block_bytes();
                    let mut part = vec![0.0f32; m * (last - first)];
                    let weights = &data[i][first * row_bytes..last * row_bytes];
                    if wide {
                        dense::run(w.format, weights, row_bytes, x, m, &mut part);
                    } else {
                        kernel().run(w.format, weights, row_bytes, acts, &mut part);
                    }
                    part
                })
                .collect();
            let mut outs: Vec<Vec<f32>> = matrices.iter().map(|w| vec![0.0f32; m * w.n]).collect();
            for (&(i, first, last), part) in tasks.iter().zip(&parts) {
                let n = matrices[i].n;
                for (row, values) in part.chunks_exact(last - first).enumerate() {
                    outs[i][row * n + first..row * n + last].copy_from_slice(values);
                }
            }
            Ok(outs)
        })
    }
}

/// Columns per parallel task: about four tasks per thread for balance, and with more than one
/// activation row narrow enough that a task's weights stay in L2 while the tiles pass over them
/// once per row pair (at batch 8 the 49152-row output matrix was read from memory four times).
fn column_chunk(n: usize, m: usize, row_bytes: usize) -> usize {
    const L2_SHARE: usize = 128 * 1024;
    let per_thread = n.div_ceil(rayon::current_num_threads() * 4);
    let cap = if m > 1 { L2_SHARE / row_bytes.max(1) } else { usize::MAX };
    per_thread.min(cap).max(8).next_multiple_of(4)
}

/// Which tile kernel this CPU runs, decided once: the best the CPU has, unless
/// `KVENGINE_KERNEL` names another (`portable`, `avx2`), for comparing them on one machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    Portable,
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    Avx2,
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    Vnni,
}

pub fn kernel() -> Kernel {
    static KERNEL: OnceLock<Kernel> = OnceLock::new();
    *KERNEL.get_or_init(|| {
        let requested = std::env::var("KVENGINE_KERNEL").unwrap_or_default();
        if requested == "portable" {
            return Kernel::Portable;
        }
        #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
        return if x86::has_vnni() && requested != "avx2" { Kernel::Vnni } else { Kernel::Avx2 };
        #[allow(unreachable_code)]
        Kernel::Portable
    })
}

impl Kernel {
    /// `out` is `(m, cols)` for the weight rows in `weights`.
    pub fn run(self, format: WeightFormat, weights: &[u8], row_bytes: usize, acts: &QuantizedActivations, out: &mut [f32]) {
        let cols = weights.len() / row_bytes;
        match self {
            Self::Portable => portable(format, weights, row_bytes, acts, out),
            #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
            Self::Avx2 | Self::Vnni => tiled::run(self, format, weights, row_bytes, cols, acts, out),
        }
    }
}

/// The plain-Rust definition of what every kernel computes, block by block.
fn portable(format: WeightFormat, weights: &[u8], row_bytes: usize, acts: &QuantizedActivations, out: &mut [f32]) {
    let cols = weights.len() / row_bytes;
    for row in 0..acts.rows {
        let (values, scales) = (acts.row_values(row), acts.row_scales(row));
        for col in 0..cols {
            let w_row = &weights[col * row_bytes..(col + 1) * row_bytes];
            let mut sum = 0.0f32;
            for (b, block) in w_row.chunks_exact(format.block_bytes()).enumerate() {
                let (scale, w) = format.decode(block);
                let dot: i32 = w.iter().zip(&values[b * BLOCK..(b + 1) * BLOCK]).map(|(&x, &y)| x as i32 * y as i32).sum();
                sum += dot as f32 * scale * scales[b];
            }
            out[row * cols + col] = sum;
        }
    }
}

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod tiled;

#[cfg(test)]
mod tests;
