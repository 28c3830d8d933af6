//! A uniform view of model tensors, whatever file they came from. Model code asks for tensors by
//! their GGUF names (`blk.3.attn_q.weight`); each source maps that to its own spelling.

use std::sync::Arc;

use candle_core::quantized::ggml_file::qtensor_from_ggml;
use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{DType, Device, Tensor};

use crate::error::{Error, Result};
use crate::matmul::Activations;

#[derive(Clone)]
pub enum Weight {
    /// Kept in its file's block format (GGUF, F32 included), multiplied by our kernels
    /// (`matmul`) or candle's.
    Quantized(Arc<QTensor>),
    /// Full-precision f32 (safetensors, or GGUF F16/BF16 after widening).
    Dense(Tensor),
}

/// A block format full-precision matrices can be quantized to once at load, for our kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantize {
    Q8_0,
    Q4_0,
}

impl Quantize {
    /// From the binding's string: "q8_0" or "q4_0".
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "q8_0" => Ok(Self::Q8_0),
            "q4_0" => Ok(Self::Q4_0),
            other => Err(Error::invalid(format!("quantize must be 'q8_0' or 'q4_0', got '{other}'"))),
        }
    }

    fn dtype(self) -> GgmlDType {
        match self {
            Self::Q8_0 => GgmlDType::Q8_0,
            Self::Q4_0 => GgmlDType::Q4_0,
        }
    }
}

impl Weight {
    pub fn dims(&self) -> &[usize] {
        match self {
            Self::Quantized(q) => q.shape().dims(),
            Self::Dense(t) => t.dims(),
        }
    }

    pub fn into_matmul(self) -> Result<QMatMul> {
        Ok(match self {
            Self::Quantized(q) => QMatMul::from_arc(q)?,
            Self::Dense(t) => QMatMul::Tensor(t),
        })
    }

    /// Block formats that only have candle's scalar kernels (Q4_1, Q5_0, Q5_1) re-encoded as
    /// Q8_0, which our SIMD kernels run: the default model ships as Q4_1, and eight bits hold its
    /// sixteen levels per block with far less rounding than the model already has. Q5_0 keeps
    /// its own scale and integers (`q5_0_as_q8_0`), so it changes no weight at all; where our
    /// panels multiply it in its own 5 bits (`matmul::q5_0_panels`, with 8-bit `activations`)
    /// it stays as it is, read at 5.5 bits a weight, not 8.5. Full-precision
    /// matrices become candle's F32 blocks, which our kernels also read in place: candle's own
    /// f32 matmul ran a batch of 8 rows about 6× slower than one (SmolLM2 F32, 140 against 22 ms
    /// a step).
    pub fn for_kernels(self, activations: Activations) -> Result<Self> {
        let q5_0_panels = activations == Activations::Q8 && crate::matmul::q5_0_panels();
        match self {
            Self::Quantized(q) if q.dtype() == GgmlDType::Q5_0 && !q5_0_panels => {
                let bytes = q5_0_as_q8_0(&q.data()?)?;
                Ok(Self::Quantized(Arc::new(qtensor_from_ggml(GgmlDType::Q8_0, &bytes, q.shape().dims().to_vec(), &Device::Cpu)?)))
            }
            Self::Quantized(q) if matches!(q.dtype(), GgmlDType::Q4_1 | GgmlDType::Q5_1) => {
                let dense = q.dequantize(&Device::Cpu)?;
                Ok(Self::Quantized(Arc::new(QTensor::quantize(&dense, GgmlDType::Q8_0)?)))
            }
            Self::Dense(t) if t.rank() == 2 => Ok(Self::Quantized(Arc::new(QTensor::quantize(&t.to_dtype(DType::F32)?, GgmlDType::F32)?))),
            other => Ok(other),
        }
    }

    /// A full-precision matrix (f32, f16 or bf16, in a GGUF or dense) in `to`'s blocks; any
    /// other weight as it is. A matrix whose rows are not whole blocks stays as it is too.
    pub fn quantized(self, to: Option<Quantize>) -> Result<Self> {
        let Some(to) = to else { return Ok(self) };
        let full_precision = match &self {
            Self::Quantized(q) => matches!(q.dtype(), GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16),
            Self::Dense(_) => true,
        };
        match self.dims() {
            [_, k] if full_precision && k % to.dtype().block_size() == 0 => {
                Ok(Self::Quantized(Arc::new(QTensor::quantize(&self.into_dense()?, to.dtype())?)))
            }
            _ => Ok(self),
        }
    }

    /// Rows `start .. start + rows` of a matrix, in its own format: a fused projection's part.
    pub fn rows(&self, start: usize, rows: usize) -> Result<Self> {
        let dims = self.dims().to_vec();
        // A fused bias: its part, in f32.
        if let [n] = dims[..] {
            if start + rows > n {
                return Err(Error::corrupt(format!("cannot take entries {start}..{} of a vector of {n}", start + rows)));
            }
            return Ok(Self::Dense(self.clone().into_dense()?.narrow(0, start, rows)?));
        }
        let (n, k) = match dims[..] {
            [n, k] if start + rows <= n => (n, k),
            _ => return Err(Error::corrupt(format!("cannot take rows {start}..{} of a tensor of shape {dims:?}", start + rows))),
        };
        Ok(match self {
            // Copied out: a narrowed view keeps the whole storage, which candle's quantizer
            // reads from its start.
            Self::Dense(t) => {
                let part = t.narrow(0, start, rows)?.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
                Self::Dense(Tensor::from_vec(part, (rows, k), t.device())?)
            }
            Self::Quantized(q) => {
                let data = q.data()?;
                let row_bytes = data.len() / n;
                let part = &data[start * row_bytes..(start + rows) * row_bytes];
                Self::Quantized(Arc::new(qtensor_from_ggml(q.dtype(), part, vec![rows, k], &Device::Cpu)?))
            }
        })
    }

    /// The weight as an f32 tensor (norm scales, biases).
    pub fn into_dense(self) -> Result<Tensor> {
        Ok(match self {
            Self::Quantized(q) => q.dequantize(&Device::Cpu)?,
            Self::Dense(t) => t.to_dtype(DType::F32)?,
        })
    }
}

/// Q5_0 blocks (f16 scale `d`, the fifth bits `qh` of all 32 values, 16 bytes of low nibbles;
/// value = (5-bit integer - 16) · d) as Q8_0 blocks with the same scale and integers: -16..=15
/// fits an i8, so the re-encoding is exact, where dequantizing and quantizing again would pick a
/// new scale (amax/127) and round every weight once more (Gemma 3's Q4_K_M file holds its
/// Q/K/gate/up matrices as Q5_0). 34 bytes per block against 22: +55% for those matrices.
pub(crate) fn q5_0_as_q8_0(blocks: &[u8]) -> Result<Vec<u8>> {
    const IN: usize = 22;
    if !blocks.len().is_multiple_of(IN) {
        return Err(Error::corrupt(format!("Q5_0 data of {} bytes is not whole 22-byte blocks", blocks.len())));
    }
    let mut out = Vec::with_capacity(blocks.len() / IN * 34);
    for b in blocks.chunks_exact(IN) {
        let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
        let (low, high): (Vec<i8>, Vec<i8>) = b[6..IN]
            .iter()
            .enumerate()
            .map(|(j, &q)| {
                let lo = (q & 0x0f) | ((((qh >> j) & 1) as u8) << 4);
                let hi = (q >> 4) | ((((qh >> (j + 16)) & 1) as u8) << 4);
                (lo as i8 - 16, hi as i8 - 16)
            })
            .unzip();
        out.extend_from_slice(&b[..2]);
        out.extend(low.iter().chain(&high).map(|&v| v as u8));
    }
    Ok(out)
}

pub trait WeightSource {
    fn contains(&self, name: &str) -> bool;
    fn load(&mut self, name: &str) -> Result<Weight>;

    /// The tensor's name as this file spells it, for error messages.
    fn file_name_of(&self, name: &str) -> String {
        name.to_owned()
    }

    /// Loads a tensor and checks its shape, so a malformed file fails here with a clear message
    /// rather than later inside a matmul.
    fn load_checked(&mut self, name: &str, dims: &[usize]) -> Result<Weight> {
        let w = self.load(name)?;
        if w.dims() != dims {
            return Err(Error::corrupt(format!(
                "tensor '{}' has shape {:?}, the model config implies {dims:?}",
                self.file_name_of(name),
                w.dims()
            )));
        }
        Ok(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fused matrix's rows, cut in its block format, dequantize to the same rows of the whole.
    #[test]
    fn rows_cut_quantized_blocks_at_row_boundaries() {
        let dense = Tensor::arange(0f32, 6.0 * 64.0, &Device::Cpu).unwrap().reshape((6, 64)).unwrap();
        let whole = Weight::Quantized(Arc::new(QTensor::quantize(&dense, GgmlDType::Q8_0).unwrap()));
        let part = whole.rows(2, 3).unwrap();
        assert_eq!(part.dims(), &[3, 64]);
        let expect = whole.clone().into_dense().unwrap().narrow(0, 2, 3).unwrap();
        let got = part.into_dense().unwrap();
        assert_eq!(got.to_vec2::<f32>().unwrap(), expect.to_vec2::<f32>().unwrap());
        assert!(whole.rows(4, 3).is_err());
    }

    /// The re-encoded Q5_0 holds exactly the values candle dequantizes from the file's blocks.
    #[test]
    fn q5_0_becomes_q8_0_without_rounding() {
        let values: Vec<f32> = (0..4 * 256).map(|i| ((i * 7919) % 1000) as f32 / 250.0 - 2.0).collect();
        let dense = candle_core::Tensor::from_vec(values, (4, 256), &Device::Cpu).unwrap();
        let q5 = QTensor::quantize(&dense, GgmlDType::Q5_0).unwrap();
        let q8 = match Weight::Quantized(Arc::new(q5)).for_kernels(Activations::F32).unwrap() {
            Weight::Quantized(q) => q,
            Weight::Dense(_) => panic!("Q5_0 became dense"),
        };
        assert_eq!(q8.dtype(), GgmlDType::Q8_0);
        let q5 = QTensor::quantize(&dense, GgmlDType::Q5_0).unwrap();
        let (a, b) = (q5.dequantize(&Device::Cpu).unwrap(), q8.dequantize(&Device::Cpu).unwrap());
        assert_eq!(a.flatten_all().unwrap().to_vec1::<f32>().unwrap(), b.flatten_all().unwrap().to_vec1::<f32>().unwrap());
    }
}
