//! Activations quantized to 8 bits per 32-value block, the form the integer dot products take:
//! one scale per block (f16 precision), values in [-127, 127] (never -128, so a sign flip cannot overflow).

use half::f16;

pub const BLOCK: usize = 32;

#[derive(Default)]
pub struct QuantizedActivations {
    pub rows: usize,
    pub blocks_per_row: usize,
    pub values: Vec<i8>,
    pub scales: Vec<f32>,
}

impl QuantizedActivations {
    /// Quantizes `rows` rows of `k` values (`k` a multiple of [`BLOCK`]), reusing the buffers.
    pub fn quantize_into(&mut self, x: &[f32], rows: usize, k: usize) {
        debug_assert_eq!(x.len(), rows * k);
        debug_assert_eq!(k % BLOCK, 0);
        self.rows = rows;
        self.blocks_per_row = k / BLOCK;
        self.values.resize(rows * k, 0);
        self.scales.resize(rows * self.blocks_per_row, 0.0);
        for ((block, out), scale) in x.chunks_exact(BLOCK).zip(self.values.chunks_exact_mut(BLOCK)).zip(self.scales.iter_mut()) {
            let amax = block.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let d = amax / 127.0;
            let inv = if d == 0.0 { 0.0 } else { 1.0 / d };
            for (q, &v) in out.iter_mut().zip(block) {
                *q = (v * inv).round() as i8;
            }
            // Stored rounded to f16, as GGML's Q8_0 does, so our products match llama.cpp's.
            *scale = f16::from_f32(d).to_f32();
        }
    }

    pub fn row_values(&self, row: usize) -> &[i8] {
        let k = self.blocks_per_row * BLOCK;
        &self.values[row * k..(row + 1) * k]
    }

    pub fn row_scales(&self, row: usize) -> &[f32] {
        &self.scales[row * self.blocks_per_row..(row + 1) * self.blocks_per_row]
    }
}
