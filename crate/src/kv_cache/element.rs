//! What one K or V element of the store is. f16 by default, as in llama.cpp's cache: half the
//! bytes of f32 to allocate, copy and stream through attention, for a rounding of each element
//! to 11 significant bits. f32 keeps them exact, for comparisons with a reference at tight
//! tolerances (f16 rounding is discontinuous, so two implementations a few f32 ulps apart can
//! store values an f16 ulp apart, and the logits then differ by ~1e-2 rather than ~1e-5).

use half::f16;
use half::slice::HalfFloatSliceExt;

use crate::error::{Error, Result};

/// How the store keeps each element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KvType {
    #[default]
    F16,
    F32,
}

impl KvType {
    /// From the binding's string; absent means the default.
    pub fn parse(name: Option<&str>) -> Result<Self> {
        match name {
            None | Some("f16") => Ok(Self::F16),
            Some("f32") => Ok(Self::F32),
            Some(other) => Err(Error::invalid(format!("kvType must be 'f16' or 'f32', got '{other}'"))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::F16 => "f16",
            Self::F32 => "f32",
        }
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for half::f16 {}
    impl Sealed for f32 {}
}

/// An element type the store can hold and attention can read. Sealed: the store allocates
/// zeroed bytes for it, which must be a valid (zero) value.
pub trait KvElement: sealed::Sealed + Copy + Send + Sync + 'static {
    const ZERO: Self;
    fn to_f32(self) -> f32;
    /// `dst[i] = src[i]`, rounded to nearest.
    fn store(dst: &mut [Self], src: &[f32]);
    /// Eight elements from `at`, as f32.
    ///
    /// # Safety
    /// `at` must be valid for reading eight elements.
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma", target_feature = "f16c"))]
    unsafe fn load8(at: *const Self) -> std::arch::x86_64::__m256;
}

impl KvElement for f16 {
    const ZERO: Self = f16::ZERO;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    fn store(dst: &mut [Self], src: &[f32]) {
        dst.convert_from_f32_slice(src);
    }
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma", target_feature = "f16c"))]
    #[inline(always)]
    unsafe fn load8(at: *const Self) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        _mm256_cvtph_ps(_mm_loadu_si128(at.cast()))
    }
}

impl KvElement for f32 {
    const ZERO: Self = 0.0;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    fn store(dst: &mut [Self], src: &[f32]) {
        dst.copy_from_slice(src);
    }
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma", target_feature = "f16c"))]
    #[inline(always)]
    unsafe fn load8(at: *const Self) -> std::arch::x86_64::__m256 {
        std::arch::x86_64::_mm256_loadu_ps(at)
    }
}
