//! The KV store on the GPU: K and V each one `(n_layers, B, T, H_kv, D)` tensor, the layout the
//! kernel reads and the CPU store uses; the lengths stay in `KvCache` on the host.

use candle_core::{DType, Device, Tensor};

use crate::error::Result;

pub struct DeviceKv {
    pub k: Tensor,
    pub v: Tensor,
}

impl DeviceKv {
    pub fn zeros(dims: (usize, usize, usize, usize, usize), dtype: DType, device: &Device) -> Result<Self> {
        Ok(Self { k: Tensor::zeros(dims, dtype, device)?, v: Tensor::zeros(dims, dtype, device)? })
    }

    pub fn size_bytes(&self) -> usize {
        2 * self.k.elem_count() * self.k.dtype().size_in_bytes()
    }

    /// A store with room for `capacity` positions per row holding everything this one does.
    pub fn grown(&self, capacity: usize) -> Result<Self> {
        let (l, b, _, h, d) = self.k.dims5()?;
        let next = Self::zeros((l, b, capacity, h, d), self.k.dtype(), self.k.device())?;
        next.k.slice_set(&self.k, 2, 0)?;
        next.v.slice_set(&self.v, 2, 0)?;
        Ok(next)
    }

    /// Row `src` copied over row `dst` in every layer (all positions: cheaper on the GPU than
    /// cutting at the row's length, and what lies past a length is never read).
    pub fn copy_row(&self, src: usize, dst: usize) -> Result<()> {
        for t in [&self.k, &self.v] {
            let row = t.narrow(1, src, 1)?.contiguous()?;
            t.slice_set(&row, 1, dst)?;
        }
        Ok(())
    }
}
