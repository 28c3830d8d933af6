//! The store's two planes (all of K, all of V) in the element type the cache was made with.
//! Offsets are in elements; the layout is the cache's business.

use half::f16;
use rayon::prelude::*;

use super::element::{KvElement, KvType};
use crate::error::{Error, Result};

pub(super) struct Plane<E> {
    k: Vec<E>,
    v: Vec<E>,
}

pub(super) enum Planes {
    F16(Plane<f16>),
    F32(Plane<f32>),
}

/// One row's keys and values in one layer, `(T, H_kv, D)` flattened.
pub enum RowKv<'a> {
    F16(&'a [f16], &'a [f16]),
    F32(&'a [f32], &'a [f32]),
}

#[cfg(test)]
impl RowKv<'_> {
    /// Both spans as f32, for tests that read what was stored.
    pub fn widened(&self) -> (Vec<f32>, Vec<f32>) {
        fn widen<E: KvElement>(x: &[E]) -> Vec<f32> {
            x.iter().map(|e| e.to_f32()).collect()
        }
        match self {
            Self::F16(k, v) => (widen(k), widen(v)),
            Self::F32(k, v) => (widen(k), widen(v)),
        }
    }
}

impl<E: KvElement> Plane<E> {
    fn zeroed(elems: usize) -> Result<Self> {
        Ok(Self { k: zeroed(elems)?, v: zeroed(elems)? })
    }

    fn copy_within(&mut self, from: usize, len: usize, to: usize) {
        self.k.copy_within(from..from + len, to);
        self.v.copy_within(from..from + len, to);
    }

    fn regrown(&self, elems: usize, moves: &[(usize, usize, usize)]) -> Result<Self> {
        let mut grown = Self::zeroed(elems)?;
        for &(from, len, to) in moves {
            grown.k[to..to + len].copy_from_slice(&self.k[from..from + len]);
            grown.v[to..to + len].copy_from_slice(&self.v[from..from + len]);
        }
        Ok(grown)
    }

    fn write(&mut self, at: usize, k: &[f32], v: &[f32]) {
        E::store(&mut self.k[at..at + k.len()], k);
        E::store(&mut self.v[at..at + v.len()], v);
    }

    fn span(&self, at: usize, len: usize) -> (&[E], &[E]) {
        (&self.k[at..at + len], &self.v[at..at + len])
    }
}

impl Planes {
    pub(super) fn zeroed(kv_type: KvType, elems: usize) -> Result<Self> {
        Ok(match kv_type {
            KvType::F16 => Self::F16(Plane::zeroed(elems)?),
            KvType::F32 => Self::F32(Plane::zeroed(elems)?),
        })
    }

    pub(super) fn kv_type(&self) -> KvType {
        match self {
            Self::F16(_) => KvType::F16,
            Self::F32(_) => KvType::F32,
        }
    }

    /// Bytes held by both planes.
    pub(super) fn size_bytes(&self) -> usize {
        match self {
            Self::F16(p) => 2 * p.k.len() * std::mem::size_of::<f16>(),
            Self::F32(p) => 2 * p.k.len() * std::mem::size_of::<f32>(),
        }
    }

    pub(super) fn copy_within(&mut self, from: usize, len: usize, to: usize) {
        match self {
            Self::F16(p) => p.copy_within(from, len, to),
            Self::F32(p) => p.copy_within(from, len, to),
        }
    }

    /// New planes of `elems` elements holding `(from, len, to)` runs of these.
    pub(super) fn regrown(&self, elems: usize, moves: &[(usize, usize, usize)]) -> Result<Self> {
        Ok(match self {
            Self::F16(p) => Self::F16(p.regrown(elems, moves)?),
            Self::F32(p) => Self::F32(p.regrown(elems, moves)?),
        })
    }

    pub(super) fn write(&mut self, at: usize, k: &[f32], v: &[f32]) {
        match self {
            Self::F16(p) => p.write(at, k, v),
            Self::F32(p) => p.write(at, k, v),
        }
    }

    pub(super) fn span(&self, at: usize, len: usize) -> RowKv<'_> {
        match self {
            Self::F16(p) => {
                let (k, v) = p.span(at, len);
                RowKv::F16(k, v)
            }
            Self::F32(p) => {
                let (k, v) = p.span(at, len);
                RowKv::F32(k, v)
            }
        }
    }
}

/// A zero-filled buffer whose allocation failure is an error, not an abort. Every page is
/// touched here, while the cache is made: the memory a cache of this capacity needs is then
/// resident from the start (as llama.cpp's context is), so RSS stays flat while it fills and no
/// decode step stops for page faults (a cache that faulted them in as rows filled showed as RSS
/// growth during generation). Pages fresh from the OS are zero already, so one write per page,
/// split over the pool, makes them resident; a memset after the faults (what `resize` did)
/// zeroed every page twice on one thread, 0.4 s for 8 rows of 1024.
fn zeroed<E: KvElement>(elems: usize) -> Result<Vec<E>> {
    let page_elems = 4096 / std::mem::size_of::<E>();
    let too_big = || {
        Error::invalid(format!(
            "could not allocate {} MiB for the KV cache; use a smaller batch or context",
            (elems * std::mem::size_of::<E>()) >> 20
        ))
    };
    if elems == 0 {
        return Ok(Vec::new());
    }
    let layout = std::alloc::Layout::array::<E>(elems).map_err(|_| too_big())?;
    // SAFETY: the layout is non-empty; null (out of memory) is an error; otherwise the block is
    // exactly what a Vec<E> of capacity `elems` frees, and all-zero bytes are a valid f16 or f32.
    let mut buffer = unsafe {
        let ptr = std::alloc::alloc_zeroed(layout) as *mut E;
        if ptr.is_null() {
            return Err(too_big());
        }
        Vec::from_raw_parts(ptr, elems, elems)
    };
    buffer.par_chunks_mut(page_elems * 256).for_each(|chunk| {
        for page in chunk.chunks_mut(page_elems) {
            // Volatile, so the store of a value already there is not optimised away.
            // SAFETY: a valid, exclusive pointer to the page's first element.
            unsafe { std::ptr::write_volatile(page.as_mut_ptr(), E::ZERO) };
        }
    });
    Ok(buffer)
}
