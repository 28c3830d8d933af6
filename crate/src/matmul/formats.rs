//! The GGUF block formats the kernels read in place: 32 weights per block with one f16 scale in
//! front. Q8_0 stores the 32 values as i8; Q4_0 packs them in 16 bytes as unsigned nibbles with
//! an offset of 8 (low nibbles are values 0..16, high nibbles 16..32). F32 rows are read as
//! blocks of 32 plain floats with no scale, so the same tiles and tasks serve unquantized models.

use candle_core::quantized::GgmlDType;
use half::f16;

/// Values per block in every format here.
pub const BLOCK: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightFormat {
    Q8_0,
    Q4_0,
    F32,
}

impl WeightFormat {
    /// The format of candle's quantized tensors of this type, where our kernels read it.
    pub fn of(dtype: GgmlDType) -> Option<Self> {
        match dtype {
            GgmlDType::Q8_0 => Some(Self::Q8_0),
            GgmlDType::Q4_0 => Some(Self::Q4_0),
            GgmlDType::F32 => Some(Self::F32),
            _ => None,
        }
    }

    /// candle's name for this format.
    pub fn dtype(self) -> GgmlDType {
        match self {
            Self::Q8_0 => GgmlDType::Q8_0,
            Self::Q4_0 => GgmlDType::Q4_0,
            Self::F32 => GgmlDType::F32,
        }
    }

    pub const fn block_bytes(self) -> usize {
        match self {
            Self::Q8_0 => 2 + BLOCK,
            Self::Q4_0 => 2 + BLOCK / 2,
            Self::F32 => BLOCK * size_of::<f32>(),
        }
    }

    /// Bytes of one weight row of `k` values (a whole number of blocks).
    pub const fn row_bytes(self, k: usize) -> usize {
        k / BLOCK * self.block_bytes()
    }

    /// Values in one weight row of `row_bytes` bytes.
    pub const fn row_values(self, row_bytes: usize) -> usize {
        row_bytes / self.block_bytes() * BLOCK
    }

    /// The block's 32 values as f32: each integer times the scale, or the floats themselves.
    pub fn values(self, block: &[u8]) -> [f32; BLOCK] {
        match self {
            Self::F32 => std::array::from_fn(|i| f32::from_le_bytes([0, 1, 2, 3].map(|b| block[4 * i + b]))),
            _ => {
                let (scale, ints) = self.decode(block);
                ints.map(|q| q as f32 * scale)
            }
        }
    }

    /// The block's scale and its 32 values as signed integers (the portable path and tests).
    /// Integer formats only: f32 rows never meet the 8-bit roads that read these
    /// (`QuantMatrix::new` gives them f32 activations).
    pub fn decode(self, block: &[u8]) -> (f32, [i8; BLOCK]) {
        let scale = f16::from_le_bytes([block[0], block[1]]).to_f32();
        let mut values = [0i8; BLOCK];
        match self {
            Self::Q8_0 => values.iter_mut().zip(&block[2..2 + BLOCK]).for_each(|(v, &b)| *v = b as i8),
            Self::Q4_0 => {
                for (i, &b) in block[2..2 + BLOCK / 2].iter().enumerate() {
                    values[i] = (b & 0x0f) as i8 - 8;
                    values[i + BLOCK / 2] = (b >> 4) as i8 - 8;
                }
            }
            Self::F32 => unreachable!("f32 rows have no integer blocks"),
        }
        (scale, values)
    }
}

/// The file's format of a matrix: blocks of 32 that the tiles read in place; Q5_0's blocks of
/// 32, which only run repacked into 8-bit panels (`x86_q8_panels.rs`); or K-quant super-blocks,
/// which only run repacked into panels of their own (`x86_kquant_panels.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    Blocks(WeightFormat),
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    Q5_0,
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    K(super::kquants::KQuant),
}

/// Bytes of one Q5_0 block: an f16 scale, the fifth bits of its 32 values, 16 bytes of nibbles.
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
pub(super) const Q5_0_BLOCK_BYTES: usize = 2 + 4 + BLOCK / 2;

impl Format {
    pub(super) fn of(dtype: GgmlDType) -> Option<Self> {
        #[allow(unused_mut)]
        let mut format = WeightFormat::of(dtype).map(Self::Blocks);
        #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
        {
            format = format.or(super::kquants::KQuant::of(dtype).map(Self::K));
            if dtype == GgmlDType::Q5_0 {
                format = Some(Self::Q5_0);
            }
        }
        format
    }

    pub(super) fn dtype(self) -> GgmlDType {
        match self {
            Self::Blocks(format) => format.dtype(),
            #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
            Self::Q5_0 => GgmlDType::Q5_0,
            #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
            Self::K(kind) => kind.dtype(),
        }
    }

    pub(super) fn row_bytes(self, k: usize) -> usize {
        match self {
            Self::Blocks(format) => format.row_bytes(k),
            #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
            Self::Q5_0 => k / BLOCK * Q5_0_BLOCK_BYTES,
            #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
            Self::K(kind) => kind.row_bytes(k),
        }
    }

    /// Values per block: rows are whole blocks.
    pub(super) fn block_values(self) -> usize {
        match self {
            #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
            Self::K(_) => super::kquants::SUPER,
            _ => BLOCK,
        }
    }
}
