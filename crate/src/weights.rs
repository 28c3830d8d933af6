//! A uniform view of model tensors, whatever file they came from. Model code asks for tensors by
//! their GGUF names (`blk.3.attn_q.weight`); each source maps that to its own spelling.

use std::sync::Arc;

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{DType, Device, Tensor};

use crate::error::{Error, Result};

pub enum Weight {
    /// Kept in its file's block format (GGUF, F32 included), multiplied by our kernels
    /// (`matmul`) or candle's.
    Quantized(Arc<QTensor>),
    /// Full-precision f32 (safetensors, or GGUF F16/BF16 after widening).
    Dense(Tensor),
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
    /// sixteen levels per block with far less rounding than the model already has. Full-precision
    /// matrices become candle's F32 blocks, which our kernels also read in place: candle's own
    /// f32 matmul ran a batch of 8 rows about 6× slower than one (SmolLM2 F32, 140 against 22 ms
    /// a step).
    pub fn for_kernels(self) -> Result<Self> {
        match self {
            Self::Quantized(q) if matches!(q.dtype(), GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1) => {
                let dense = q.dequantize(&Device::Cpu)?;
                Ok(Self::Quantized(Arc::new(QTensor::quantize(&dense, GgmlDType::Q8_0)?)))
            }
            Self::Dense(t) if t.rank() == 2 => Ok(Self::Quantized(Arc::new(QTensor::quantize(&t.to_dtype(DType::F32)?, GgmlDType::F32)?))),
            other => Ok(other),
        }
    }

    /// The weight as an f32 tensor (norm scales, biases).
    pub fn into_dense(self) -> Result<Tensor> {
        Ok(match self {
            Self::Quantized(q) => q.dequantize(&Device::Cpu)?,
            Self::Dense(t) => t.to_dtype(DType::F32)?,
        })
    }
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
