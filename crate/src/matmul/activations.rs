//! What the quantized matmuls multiply the weights by. `Activations::Q8` rounds them to 8-bit
//! blocks first, as llama.cpp does: per block of 32 a scale of max|x|/127 kept as f16 and values
//! round(x/scale), then bytes multiply bytes. Where both roads run in panels
//! (`x86_q8_panels.rs`) each row's products are the plain definition's whatever its batch, and
//! with attention cut at fixed positions (`attention`) a row's logits are then the same bits
//! however its tokens were grouped into passes: that is the default there. Elsewhere (AMX
//! tiles, no SIMD kernels) rounding could move a value across a block's rounding boundary with
//! its grouping, so those CPUs default to `F32`, which keeps activations exact and moves
//! results only by float rounding.

use half::f16;
use rayon::prelude::*;

use super::formats::BLOCK;
use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Activations {
    #[default]
    F32,
    Q8,
}

impl Activations {
    /// From the binding's string: "f32" or "q8"; absent, `preferred()`.
    pub fn parse(name: Option<&str>) -> Result<Self> {
        match name {
            None => Ok(Self::preferred()),
            Some("f32") => Ok(Self::F32),
            Some("q8") => Ok(Self::Q8),
            Some(other) => Err(Error::invalid(format!("activations must be 'f32' or 'q8', got '{other}'"))),
        }
    }

    /// 8-bit where it is both faster and independent of batching (panels on both roads), else f32.
    pub fn preferred() -> Self {
        if super::q8_panels() {
            Self::Q8
        } else {
            Self::F32
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::Q8 => "q8",
        }
    }
}

/// Fewer blocks than this are rounded by the calling thread: a decode step's rows take
/// microseconds, less than handing work to the pool.
const MIN_BLOCKS_PER_JOB: usize = 2048;

/// AMX tiles (`amx.rs`) read rows in groups of this many, so their activations are padded
/// with zero rows to a multiple of it.
pub const AMX_ROW_GROUP: usize = 32;

/// Rows of activations rounded to 8-bit blocks.
pub struct QuantizedRows {
    /// Row-major, `k` per row, then zero rows up to a multiple of the `pad_rows` asked for.
    pub values: Vec<i8>,
    /// One per block of 32 values, row-major, padded as `values` (with zero scales).
    pub scales: Vec<f32>,
    pub k: usize,
}

impl QuantizedRows {
    /// `x` holds whole rows of `k` values, `k` a multiple of 32. Only the AMX road needs
    /// `pad_rows` above 1: padding a decode step's one row to 32 zeroed and dequantized 31
    /// rows nobody reads, in every matmul.
    pub fn quantize(x: &[f32], k: usize, pad_rows: usize) -> Self {
        let padded = (x.len() / k.max(1)).next_multiple_of(pad_rows.max(1)) * k;
        let mut values = vec![0i8; padded];
        let mut scales = vec![0.0f32; padded / BLOCK];
        x.par_chunks_exact(BLOCK)
            .zip(values.par_chunks_exact_mut(BLOCK))
            .zip(scales.par_iter_mut())
            .with_min_len(MIN_BLOCKS_PER_JOB)
            .for_each(|((x, q), scale)| *scale = quantize_block(x, q));
        Self { values, scales, k }
    }

    /// Whether `m` rows of `k` values are all there, with their scales.
    pub fn holds(&self, m: usize, k: usize) -> bool {
        self.k == k && self.values.len() >= m * k && self.scales.len() >= m * k / BLOCK
    }

    /// Every value times its block's scale (padding rows included): what the wide road
    /// multiplies, in f32.
    pub fn dequantize(&self) -> Vec<f32> {
        let mut out = vec![0.0f32; self.values.len()];
        out.par_chunks_exact_mut(BLOCK)
            .zip(self.values.par_chunks_exact(BLOCK))
            .zip(self.scales.par_iter())
            .with_min_len(MIN_BLOCKS_PER_JOB)
            .for_each(|((out, q), &scale)| out.iter_mut().zip(q).for_each(|(v, &q)| *v = q as f32 * scale));
        out
    }
}

/// Returns the block's scale; the rounding (half away from zero, by the reciprocal of the
/// unrounded scale) is llama.cpp's `quantize_row_q8_0`.
fn quantize_block(x: &[f32], q: &mut [i8]) -> f32 {
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let scale = amax / 127.0;
    let inverse = if scale > 0.0 { 1.0 / scale } else { 0.0 };
    q.iter_mut().zip(x).for_each(|(q, &v)| *q = (v * inverse).round() as i8);
    f16::from_f32(scale).to_f32()
}

/// Rounded activations with what the VNNI kernel (`x86_vnni.rs`) also reads: the values biased
/// by 128 as unsigned bytes, each block's scale across eight lanes, and −8 × each lane's sum
/// of four values (what Q4_0's offset of 8 takes off).
pub struct VnniRows {
    pub rows: QuantizedRows,
    pub biased: Vec<u8>,
    pub lane_scales: Vec<f32>,
    pub q4_offsets: Vec<i32>,
}

/// Values per `vpdpbusd` lane.
const LANE: usize = 4;

impl VnniRows {
    pub fn new(rows: QuantizedRows) -> Self {
        let biased = rows.values.iter().map(|&v| (v as u8) ^ 0x80).collect();
        let lane_scales = rows.scales.iter().flat_map(|&s| [s; BLOCK / LANE]).collect();
        let q4_offsets = rows.values.chunks_exact(LANE).map(|four| -8 * four.iter().map(|&v| v as i32).sum::<i32>()).collect();
        Self { rows, biased, lane_scales, q4_offsets }
    }
}
