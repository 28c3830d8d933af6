//! Our quantized matmul: `y = x · Wᵀ` for GGUF Q8_0 and Q4_0 weights, read in place from the
//! file's blocks, split over the rayon pool by output columns. Two roads compute the same sums:
//! narrow batches (decode) work in register tiles (`tiled.rs`); wide ones (prefill) widen panels
//! of weights and run gemm's f32 kernels (`dense.rs`). By default the activations stay f32, so
//! how a prompt is split into passes (prefix reuse, batching) moves results only by float
//! rounding, not by 8-bit steps; a model loaded with `Activations::Q8` rounds them to 8-bit
//! blocks as llama.cpp does (`activations.rs`). candle's own quantized matmul stays the slow
//! reference (see `model/reference.rs`). K-quant matrices (Q4_K, Q5_K, Q6_K) run only with
//! 8-bit activations on x86 CPUs without AMX, repacked into panels (`x86_kquant_panels.rs`,
//! with a `vpdpbusd` tile on AVX-512 VNNI and a `maddubs` one on AVX2); elsewhere
//! they stay on candle's matmul. Q5_0 runs in its 5 bits in the 8-bit panels' AVX2 tile
//! (`q5_0_panels`); elsewhere it is widened to Q8_0 at load, exactly (`Weight::for_kernels`).

mod activations;
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod amx;
mod dense;
mod formats;
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod kquants;
mod out_columns;
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod x86;
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod x86_avx512;
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod x86_kquant_avx2;
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod x86_kquant_panels;
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod x86_q8_pair512;
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod x86_q8_panel_format;
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod x86_q8_panels;
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod x86_vnni;

use std::sync::{Arc, OnceLock};

use candle_core::quantized::QTensor;
use rayon::prelude::*;

use activations::AMX_ROW_GROUP;
pub use activations::{Activations, QuantizedRows, VnniRows};
use formats::Format;
pub use formats::{WeightFormat, BLOCK};
use out_columns::OutColumns;

use crate::error::{Error, Result};

/// How a CPU model's projections multiply: the activations they take, and the block format
/// full-precision matrices are quantized to once at load (none: kept as they are).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MatmulOptions {
    pub activations: Activations,
    pub quantize: Option<crate::weights::Quantize>,
}

/// A weight matrix `(n, k)` in a block format our kernels read.
pub struct QuantMatrix {
    stored: Stored,
    format: Format,
    n: usize,
    k: usize,
    activations: Activations,
}

/// Where a matrix's weights live: in the file's blocks, or, on CPUs whose both roads multiply
/// 8-bit activations in panels (`x86_q8_panels.rs`, `x86_kquant_panels.rs`), only in the panels
/// repacked from them at load, so that 8-bit activations cost no second copy of the model.
enum Stored {
    File(Arc<QTensor>),
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    Panels(x86_q8_panels::Q8Panels),
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    KPanels(x86_kquant_panels::KPanels),
}

impl QuantMatrix {
    /// `None` when the tensor's format has no kernel here (the caller keeps candle's): K-quants
    /// run only as 8-bit panels (`q8_panels()`).
    pub fn new(tensor: Arc<QTensor>, activations: Activations) -> Option<Self> {
        let format = Format::of(tensor.dtype())?;
        let (n, k) = tensor.shape().dims2().ok()?;
        if k == 0 || k % format.block_values() != 0 {
            return None;
        }
        // llama.cpp multiplies f32 weights by f32 activations too: rounding the activations
        // would throw away the precision that is the point of an unquantized model.
        let activations = if format == Format::Blocks(WeightFormat::F32) { Activations::F32 } else { activations };
        let stored = match (activations, format) {
            #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
            (Activations::Q8, Format::K(kind)) if q8_panels() => {
                Stored::KPanels(x86_kquant_panels::KPanels::pack(kind, &tensor.data().ok()?, n, k))
            }
            #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
            (_, Format::K(_)) => return None,
            #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
            (Activations::Q8, format)
                if q8_panels()
                    && let Some(panel_format) = x86_q8_panels::PanelFormat::of(format) =>
            {
                Stored::Panels(x86_q8_panels::Q8Panels::pack(panel_format, &tensor.data().ok()?, n, k))
            }
            #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
            (_, Format::Q5_0) => return None,
            _ => Stored::File(tensor),
        };
        Some(Self { stored, format, n, k, activations })
    }

    fn block_values(&self) -> usize {
        self.format.block_values()
    }

    /// Whether this matrix multiplies 8-bit activations in panels, which are then its
    /// only copy: `file_bytes` and `file_tensor` rebuild the file's blocks from them.
    pub fn has_panels(&self) -> bool {
        !matches!(self.stored, Stored::File(_))
    }

    /// The weights in the file's blocks: borrowed, or unpacked from the panels.
    pub fn file_bytes(&self) -> Result<std::borrow::Cow<'_, [u8]>> {
        Ok(match &self.stored {
            Stored::File(tensor) => tensor.data()?,
            #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
            Stored::Panels(panels) => panels.unpack().into(),
            #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
            Stored::KPanels(panels) => panels.unpack().into(),
        })
    }

    /// The weights as candle's tensor, for its matmul (the reference path): rebuilt from the
    /// panels where those are the only copy.
    pub fn file_tensor(&self) -> Result<Arc<QTensor>> {
        match &self.stored {
            Stored::File(tensor) => Ok(tensor.clone()),
            #[allow(unreachable_patterns)]
            _ => {
                let dims = vec![self.n, self.k];
                let tensor = candle_core::quantized::ggml_file::qtensor_from_ggml(
                    self.format.dtype(),
                    &self.file_bytes()?,
                    dims,
                    &candle_core::Device::Cpu,
                )?;
                Ok(Arc::new(tensor))
            }
        }
    }

    pub fn out_features(&self) -> usize {
        self.n
    }

    /// `x` is `(m, k)` row-major; returns `(m, n)`.
    pub fn forward(&self, x: &[f32], m: usize) -> Result<Vec<f32>> {
        Ok(Self::forward_many(&[self], x, &RowRuns::uniform(m))?.pop().unwrap_or_default())
    }

    /// Several matrices over the same input (q/k/v, gate/up): all their columns are split over
    /// the pool in one parallel region per run of rows, which
    /// matters at decode, where each region costs about as much as a small matmul.
    pub fn forward_many(matrices: &[&QuantMatrix], x: &[f32], runs: &RowRuns) -> Result<Vec<Vec<f32>>> {
        let k = matrices.first().map_or(0, |w| w.k);
        let m = runs.rows();
        if matrices.iter().any(|w| w.k != k) || x.len() != m * k {
            return Err(Error::invalid(format!("matmul input of {} values does not match {m} rows of {k}", x.len())));
        }
        if matrices.iter().any(|w| w.activations != matrices[0].activations) {
            // A file mixing f32 and quantized projections of one input: each on its own road.
            return matrices.iter().map(|w| Ok(Self::forward_many(&[w], x, runs)?.pop().unwrap_or_default())).collect();
        }
        if let [(rows, wide)] = runs.0.as_slice() {
            return Self::forward_run(matrices, x, rows.len(), *wide);
        }
        let mut outs: Vec<Vec<f32>> = matrices.iter().map(|w| Vec::with_capacity(m * w.n)).collect();
        for (rows, wide) in &runs.0 {
            let part = Self::forward_run(matrices, &x[rows.start * k..rows.end * k], rows.len(), *wide)?;
            outs.iter_mut().zip(part).for_each(|(out, part)| out.extend_from_slice(&part));
        }
        Ok(outs)
    }

    fn forward_run(matrices: &[&QuantMatrix], x: &[f32], m: usize, wide: bool) -> Result<Vec<Vec<f32>>> {
        let q8 = matrices.first().is_some_and(|w| w.activations == Activations::Q8);
        let is_k = |w: &&QuantMatrix| w.block_values() != BLOCK;
        // 8-bit activations: panels on both roads where the CPU has no AMX; else the wide
        // road multiplies bytes in AMX tiles and the narrow one runs the VNNI tile. K-quant
        // matrices (always panels) take rows of their own rounding (`KRows`).
        let panels = q8 && matrices.iter().all(|w| w.has_panels());
        let tiles = wide && q8 && !panels && amx();
        let blocks = q8 && !matrices.iter().all(is_k);
        let rounded = blocks.then(|| QuantizedRows::quantize(x, matrices[0].k, if tiles { AMX_ROW_GROUP } else { 1 }));
        let widened = if wide && !tiles && !panels { rounded.as_ref().map(QuantizedRows::dequantize) } else { None };
        #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
        let offsets = match &rounded {
            Some(rounded) if panels => {
                let read = matrices.iter().any(|w| matches!(&w.stored, Stored::Panels(p) if p.reads_offsets()));
                x86_q8_panels::offsets(rounded, read)
            }
            _ => Vec::new(),
        };
        #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
        let k_rows = (q8 && matrices.iter().any(is_k)).then(|| {
            let q6k = matrices.iter().any(|w| w.format == Format::K(kquants::KQuant::Q6K));
            x86_kquant_panels::KRows::new(x, matrices[0].k, q6k)
        });
        let (rounded, vnni_rows) = if wide || panels || !vnni() { (rounded, None) } else { (None, rounded.map(VnniRows::new)) };
        let (x, input) = match (&widened, &vnni_rows, &rounded) {
            (Some(widened), _, _) => (widened.as_slice(), Input::F32(widened)),
            (None, Some(rows), _) => (x, Input::Vnni(rows)),
            (None, None, Some(rounded)) => (x, Input::Q8(rounded)),
            (None, None, None) => (x, Input::F32(x)),
        };
        // The panels' kernels read no file blocks (and they are not kept).
        let data = matrices.iter().map(|w| if panels { Ok(Default::default()) } else { w.file_bytes() }).collect::<Result<Vec<_>>>()?;
        let total: usize = matrices.iter().map(|w| w.n).sum();
        let row_bytes = matrices.iter().map(|w| w.format.row_bytes(w.k)).max().unwrap_or(1);
        let chunk = if wide { dense::panel_columns(total) } else { column_chunk(total, m, row_bytes) };
        // (matrix, first column, last column) for every task
        let tasks: Vec<(usize, usize, usize)> =
            matrices.iter().enumerate().flat_map(|(i, w)| (0..w.n).step_by(chunk).map(move |c| (i, c, (c + chunk).min(w.n)))).collect();
        let mut outs: Vec<Vec<f32>> = matrices.iter().map(|w| Vec::with_capacity(m * w.n)).collect();
        let windows: Vec<OutColumns> =
            outs.iter_mut().zip(matrices).map(|(out, w)| OutColumns::spare(out.spare_capacity_mut(), m, w.n)).collect();
        tasks.par_iter().for_each(|&(i, first, last)| {
            let w = matrices[i];
            let out = windows[i].columns(first, last);
            // SAFETY: every task got its own column range of its matrix's window.
            unsafe {
                match (&w.stored, &rounded, w.format) {
                    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
                    (Stored::Panels(p), Some(rounded), _) => p.run(first, last, rounded, &offsets, m, out),
                    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
                    (Stored::KPanels(p), _, _) => match &k_rows {
                        Some(rows) => p.run(first, last, rows, m, out),
                        None => unreachable!("K-quant panels take 8-bit activations (QuantMatrix::new)"),
                    },
                    (_, _, Format::Blocks(format)) => {
                        let row_bytes = format.row_bytes(w.k);
                        let weights: &[u8] = &data[i][first * row_bytes..last * row_bytes];
                        match (wide, &rounded) {
                            #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
                            (true, Some(rounded)) if tiles => amx::run(format, weights, row_bytes, rounded, m, out),
                            (true, _) => dense::run(format, weights, row_bytes, x, m, out),
                            (false, _) => kernel().run_into(format, weights, row_bytes, input, m, out),
                        }
                    }
                    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
                    (_, _, Format::K(_) | Format::Q5_0) => unreachable!("K-quant and Q5_0 matrices are panels (QuantMatrix::new)"),
                }
            }
        });
        for (out, w) in outs.iter_mut().zip(matrices) {
            // SAFETY: the tasks cover columns 0..n of every matrix, and each kernel writes all
            // m rows of its columns, so all m × n values are set.
            unsafe { out.set_len(m * w.n) };
        }
        Ok(outs)
    }
}

/// Which road each row of a call takes, as runs of consecutive rows: wide (gemm over widened
/// panels, `dense.rs`) or narrow (register tiles, `tiled.rs`). Runs follow the sequences packed in a batch, so a row's arithmetic
/// depends on its own sequence only and a prompt batched with others gives the same tokens as
/// alone.
pub struct RowRuns(pub Vec<(std::ops::Range<usize>, bool)>);

impl RowRuns {
    /// `m` rows of one sequence.
    pub fn uniform(m: usize) -> Self {
        Self(vec![(0..m, m >= dense::DENSE_MIN_ROWS)])
    }

    /// Sequences of these lengths packed in order; neighbours on the same road share a run.
    pub fn for_sequences(lens: impl IntoIterator<Item = usize>) -> Self {
        let mut runs: Vec<(std::ops::Range<usize>, bool)> = Vec::new();
        let mut at = 0;
        for len in lens {
            let wide = len >= dense::DENSE_MIN_ROWS;
            match runs.last_mut() {
                Some((rows, w)) if *w == wide => rows.end = at + len,
                _ => runs.push((at..at + len, wide)),
            }
            at += len;
        }
        Self(runs)
    }

    pub fn rows(&self) -> usize {
        self.0.last().map_or(0, |(rows, _)| rows.end)
    }
}

/// Columns per parallel task: about four tasks per thread for balance, and with more than one
/// activation row narrow enough that a task's weights stay in L2 while the tiles pass over them
/// once per row pair (at batch 8 the 49152-row output matrix was read from memory four times).
/// Whole pairs of 8-column panels, which the 8-bit panels store interleaved.
fn column_chunk(n: usize, m: usize, row_bytes: usize) -> usize {
    const L2_SHARE: usize = 128 * 1024;
    let per_thread = n.div_ceil(rayon::current_num_threads() * 4);
    let cap = if m > 1 { L2_SHARE / row_bytes.max(1) } else { usize::MAX };
    per_thread.min(cap).max(16).next_multiple_of(16)
}

/// Which narrow kernel runs, decided once: AVX-512 on CPUs that have it, else AVX2 where the
/// build has it. `KVENGINE_KERNEL=avx2` or `=portable` (the plain-Rust definition) asks for a
/// lesser one, for comparing them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    Portable,
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    Avx2,
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    Avx512,
}

pub fn kernel() -> Kernel {
    static KERNEL: OnceLock<Kernel> = OnceLock::new();
    *KERNEL.get_or_init(|| {
        let asked = std::env::var("KVENGINE_KERNEL").unwrap_or_default();
        if asked == "portable" {
            return Kernel::Portable;
        }
        #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
        return if asked != "avx2" && std::arch::is_x86_feature_detected!("avx512f") { Kernel::Avx512 } else { Kernel::Avx2 };
        #[allow(unreachable_code)]
        Kernel::Portable
    })
}

/// Whether 8-bit activations run on the AVX-512 VNNI kernel: on CPUs that have it, unless a
/// lesser kernel was asked for (`KVENGINE_KERNEL`).
pub fn vnni() -> bool {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    static VNNI: OnceLock<bool> = OnceLock::new();
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    return *VNNI.get_or_init(|| kernel() == Kernel::Avx512 && x86_vnni::available());
    #[allow(unreachable_code)]
    false
}

/// Whether the wide road multiplies 8-bit activations in AMX tiles (`amx.rs`): on CPUs that
/// have them, unless a lesser kernel was asked for (`KVENGINE_KERNEL`).
pub fn amx() -> bool {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    return kernel() == Kernel::Avx512 && amx::available();
    #[allow(unreachable_code)]
    false
}

/// Whether 8-bit activations multiply weights repacked into panels (`x86_q8_panels.rs`) on
/// both roads: on SIMD kernels of CPUs without AMX, whose wide road (`amx.rs`) and VNNI tile
/// (`x86_vnni.rs`) take the file's blocks as they are. `KVENGINE_KERNEL=portable` runs the
/// plain definition instead.
pub fn q8_panels() -> bool {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    return kernel() != Kernel::Portable && !amx();
    #[allow(unreachable_code)]
    false
}

/// Whether Q5_0 matrices with 8-bit activations are kept in their 5 bits, in panels: on the
/// panels' AVX2 tile (`x86_q8_panels.rs`). Elsewhere (AMX, the VNNI road, other CPUs) they are
/// widened to Q8_0 at load (`Weight::for_kernels`).
pub fn q5_0_panels() -> bool {
    q8_panels() && !vnni()
}

/// The activations a narrow call multiplies.
#[derive(Clone, Copy)]
pub enum Input<'a> {
    F32(&'a [f32]),
    Q8(&'a QuantizedRows),
    /// 8-bit, with what the VNNI kernel also reads; kernels without VNNI take the rows inside.
    Vnni(&'a VnniRows),
}

impl Kernel {
    /// `out` (`m × cols`) = `x` (`m × k`) · Wᵀ for the `cols` weight rows in `weights`. With
    /// 8-bit activations only the VNNI kernel has a tile of its own.
    pub fn run(self, format: WeightFormat, weights: &[u8], row_bytes: usize, x: Input, m: usize, out: &mut [f32]) {
        let out = OutColumns::whole(out, m, weights.len() / row_bytes);
        // SAFETY: the window is the whole of `out`, borrowed mutably for this call.
        unsafe { self.run_into(format, weights, row_bytes, x, m, out) }
    }

    /// `run`, into a window of a larger output.
    ///
    /// # Safety
    /// No other thread may write `out`'s values during the call.
    unsafe fn run_into(self, format: WeightFormat, weights: &[u8], row_bytes: usize, x: Input, m: usize, out: OutColumns) {
        let cols = weights.len() / row_bytes;
        assert!(out.rows() >= m && out.cols() == cols, "output window of {} × {} for {m} × {cols}", out.rows(), out.cols());
        match (self, x) {
            (Self::Portable, Input::F32(x)) => portable(format, weights, row_bytes, x, m, out),
            #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
            (Self::Avx2, Input::F32(x)) => tiled::run::<x86::Avx2>(format, weights, row_bytes, cols, x, m, out),
            #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
            (Self::Avx512, Input::F32(x)) => tiled::run::<x86_avx512::Avx512>(format, weights, row_bytes, cols, x, m, out),
            #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
            (Self::Avx512, Input::Vnni(x)) if x86_vnni::available() && format != WeightFormat::F32 => {
                tiled::run::<x86_vnni::Vnni512>(format, weights, row_bytes, cols, x, m, out)
            }
            // Off AMX CPUs, 8-bit rows take the panels (`x86_q8_panels.rs`), which need the
            // weights repacked and so do not run here; these rows get the definition.
            (_, Input::Q8(x) | Input::Vnni(VnniRows { rows: x, .. })) => portable_q8(format, weights, row_bytes, x, m, out),
        }
    }
}

/// The plain-Rust definition of what every kernel computes, block by block.
///
/// # Safety
/// As `Kernel::run_into`.
unsafe fn portable(format: WeightFormat, weights: &[u8], row_bytes: usize, x: &[f32], m: usize, out: OutColumns) {
    let cols = weights.len() / row_bytes;
    let k = format.row_values(row_bytes);
    for row in 0..m {
        let acts = &x[row * k..(row + 1) * k];
        for col in 0..cols {
            let w_row = &weights[col * row_bytes..(col + 1) * row_bytes];
            let mut sum = 0.0f32;
            for (block, a) in w_row.chunks_exact(format.block_bytes()).zip(acts.chunks_exact(BLOCK)) {
                sum += match format {
                    WeightFormat::F32 => format.values(block).iter().zip(a).map(|(&w, &a)| w * a).sum(),
                    _ => {
                        let (scale, w) = format.decode(block);
                        w.iter().zip(a).map(|(&w, &a)| w as f32 * a).sum::<f32>() * scale
                    }
                };
            }
            out.set(row, col, sum);
        }
    }
}

/// The plain-Rust definition of the 8-bit road: per block, the integer dot product of weights
/// and rounded activations, times both scales.
///
/// # Safety
/// As `Kernel::run_into`.
unsafe fn portable_q8(format: WeightFormat, weights: &[u8], row_bytes: usize, x: &QuantizedRows, m: usize, out: OutColumns) {
    let cols = weights.len() / row_bytes;
    let (k, blocks) = (format.row_values(row_bytes), row_bytes / format.block_bytes());
    for row in 0..m {
        let acts = x.values[row * k..(row + 1) * k].chunks_exact(BLOCK).zip(&x.scales[row * blocks..(row + 1) * blocks]);
        for col in 0..cols {
            let w_row = &weights[col * row_bytes..(col + 1) * row_bytes];
            let mut sum = 0.0f32;
            for (block, (a, &act_scale)) in w_row.chunks_exact(format.block_bytes()).zip(acts.clone()) {
                sum = match format {
                    // Never asked for by a model (`QuantMatrix::new`), but defined all the same.
                    WeightFormat::F32 => {
                        format.values(block).iter().zip(a).map(|(&w, &a)| w * a as f32).sum::<f32>().mul_add(act_scale, sum)
                    }
                    _ => {
                        let (scale, w) = format.decode(block);
                        let dot: i32 = w.iter().zip(a).map(|(&w, &a)| w as i32 * a as i32).sum();
                        // Fused, as the SIMD kernels add it: one instruction there, not two.
                        (dot as f32).mul_add(scale * act_scale, sum)
                    }
                };
            }
            out.set(row, col, sum);
        }
    }
}

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod tiled;

#[cfg(test)]
mod tests;

#[cfg(all(test, target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod kquant_tests;
