//! Our quantized matmul: `y = x · Wᵀ` for GGUF Q8_0 and Q4_0 weights, read in place from the
//! file's blocks. Activations are quantized to 8 bits per block once per call; the products run
//! in register tiles on SIMD integer dot products, split over the rayon pool by output columns.
//! candle's own quantized matmul stays the slow reference (see `model/reference.rs`).

mod activations;
mod formats;
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod x86;

use std::cell::RefCell;
use std::sync::{Arc, OnceLock};

use candle_core::quantized::{GgmlDType, QTensor};
use rayon::prelude::*;

pub use activations::{QuantizedActivations, BLOCK};
pub use formats::WeightFormat;

use crate::error::Result;

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
        let data = self.tensor.data()?;
        let row_bytes = self.k / BLOCK * self.format.block_bytes();
        thread_local! {
            static ACTIVATIONS: RefCell<QuantizedActivations> = RefCell::new(QuantizedActivations::default());
        }
        ACTIVATIONS.with_borrow_mut(|acts| {
            acts.quantize_into(x, m, self.k);
            Ok(self.multiply(&data, row_bytes, acts))
        })
    }

    fn multiply(&self, data: &[u8], row_bytes: usize, acts: &QuantizedActivations) -> Vec<f32> {
        let m = acts.rows;
        let chunk = column_chunk(self.n, m);
        let parts: Vec<Vec<f32>> = (0..self.n.div_ceil(chunk))
            .into_par_iter()
            .map(|c| {
                let cols = c * chunk..((c + 1) * chunk).min(self.n);
                let weights = &data[cols.start * row_bytes..cols.end * row_bytes];
                let mut part = vec![0.0f32; m * cols.len()];
                kernel().run(self.format, weights, row_bytes, acts, &mut part);
                part
            })
            .collect();
        let mut out = vec![0.0f32; m * self.n];
        for (c, part) in parts.iter().enumerate() {
            let width = part.len() / m.max(1);
            for (row, values) in part.chunks_exact(width).enumerate() {
                out[row * self.n + c * chunk..][..width].copy_from_slice(values);
            }
        }
        out
    }
}

/// Columns per parallel task: about four tasks per thread for balance, and for big batches
/// narrow enough that a task's weights stay in L2 while every activation row passes over them.
fn column_chunk(n: usize, m: usize) -> usize {
    let per_thread = n.div_ceil(rayon::current_num_threads() * 4);
    let cap = if m > 16 { 64 } else { usize::MAX };
    per_thread.clamp(8, cap.max(8)).next_multiple_of(4)
}

/// Which tile kernel this CPU runs, decided once.
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
        #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
        return if x86::has_vnni() { Kernel::Vnni } else { Kernel::Avx2 };
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
