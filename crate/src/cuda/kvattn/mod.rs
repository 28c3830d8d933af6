//! KV-cache attention as candle operations on the `(n_layers, B, T, H_kv, D)` store, the job of
//! FA3's `flash_attn_with_kvcache`: append each row's new K/V in place at its length, then causal
//! (optionally windowed) attention of the new tokens, rows of different lengths in one call, GQA
//! read straight from the H_kv cached heads.
//!
//! On the CPU the ops run `reference` (the semantics, written plainly); with the `cuda` feature
//! they run our kernel (`launch`) on CUDA tensors.

use candle_core::{CpuStorage, CustomOp3, Device, InplaceOp2, Layout, Shape, Tensor};

use crate::error::{Error, Result};

#[cfg(feature = "cuda")]
mod launch;
pub mod reference;
#[cfg(test)]
mod tests;

use reference::SlabDims;

/// Queries one kernel block attends together: consecutive tokens of one row times the query
/// heads of one KV group. Must equal `MAX_QUERIES` in `src/cuda/kvattn.cu`.
pub const TILE_QUERIES: usize = 16;

#[derive(Debug, Clone, Copy)]
pub struct KvAttnParams {
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    /// A query at position `p` sees keys `p - window ..= p`; `None` is full causal attention.
    pub window: Option<usize>,
    /// Splits of each tile's key range (flash-decoding); `None` lets the kernel choose from the
    /// GPU's size. Ignored on the CPU.
    pub num_splits: Option<usize>,
}

/// Where the new tokens of one pass go and what each sees. Built once per forward pass and
/// shared by every layer; its index tensors live on the device the model runs on.
pub struct KvAttnPlan {
    pub rows: Vec<u32>,
    pub pos: Vec<u32>,
    /// Per tile: first packed token, token count, first head within the group, head count.
    pub tiles: Vec<u32>,
    pub batch: usize,
    pub capacity: usize,
    #[cfg(feature = "cuda")]
    device_index: Option<DeviceIndex>,
}

/// `rows`, `pos` and `tiles` uploaded once per pass, so no layer copies from the host.
#[cfg(feature = "cuda")]
pub(crate) struct DeviceIndex {
    pub rows: Tensor,
    pub pos: Tensor,
    pub tiles: Tensor,
}

impl KvAttnPlan {
    /// New tokens packed row after row: row `r` gets `new_lens[r]` tokens at positions
    /// `seqlens[r]..`, the cache's `cache_seqlens` convention.
    pub fn new(seqlens: &[i32], new_lens: &[usize], capacity: usize, group: usize, device: &Device) -> Result<Self> {
        if seqlens.len() != new_lens.len() {
            return Err(Error::invalid(format!("{} row lengths for {} rows of new tokens", seqlens.len(), new_lens.len())));
        }
        let (mut rows, mut pos) = (Vec::new(), Vec::new());
        for (row, (&before, &n)) in seqlens.iter().zip(new_lens).enumerate() {
            let before = usize::try_from(before).map_err(|_| Error::invalid(format!("row {row} has a negative length")))?;
            if before + n > capacity {
                return Err(Error::invalid(format!("row {row} would hold {} positions in a cache of {capacity}", before + n)));
            }
            rows.extend(std::iter::repeat_n(row as u32, n));
            pos.extend((before..before + n).map(|p| p as u32));
        }
        let tiles = plan_tiles(&rows, group);
        #[cfg(feature = "cuda")]
        let device_index = match device {
            Device::Cpu => None,
            _ => Some(DeviceIndex {
                rows: Tensor::new(rows.as_slice(), device)?,
                pos: Tensor::new(pos.as_slice(), device)?,
                tiles: Tensor::new(tiles.as_slice(), device)?,
            }),
        };
        // Without the `cuda` feature every tensor is on the CPU, which reads the host vectors.
        #[cfg(not(feature = "cuda"))]
        let _ = device;
        Ok(Self {
            rows,
            pos,
            tiles,
            batch: seqlens.len(),
            capacity,
            #[cfg(feature = "cuda")]
            device_index,
        })
    }

    pub fn n_tokens(&self) -> usize {
        self.rows.len()
    }

    #[cfg(feature = "cuda")]
    pub(crate) fn device_index(&self) -> candle_core::Result<&DeviceIndex> {
        self.device_index.as_ref().ok_or_else(|| candle_core::Error::Msg("this KV attention plan was built for the CPU".into()))
    }
}

/// Consecutive tokens of a row share a tile so each key they read is loaded once for all of
/// them; a group wider than a tile is split across tiles by heads.
fn plan_tiles(rows: &[u32], group: usize) -> Vec<u32> {
    let mut tiles = Vec::new();
    let tokens_per_tile = (TILE_QUERIES / group).max(1);
    let heads_per_tile = group.min(TILE_QUERIES);
    let mut first = 0;
    while first < rows.len() {
        let mut len = 1;
        while len < tokens_per_tile && first + len < rows.len() && rows[first + len] == rows[first] {
            len += 1;
        }
        for g0 in (0..group).step_by(heads_per_tile) {
            tiles.extend([first as u32, len as u32, g0 as u32, heads_per_tile.min(group - g0) as u32]);
        }
        first += len;
    }
    tiles
}

/// Writes `k_new`/`v_new` `(N, H_kv, D)` into layer `layer` of the caches at the plan's slots.
pub fn append(k_cache: &Tensor, v_cache: &Tensor, layer: usize, k_new: &Tensor, v_new: &Tensor, plan: &KvAttnPlan) -> Result<()> {
    for (cache, new) in [(k_cache, k_new), (v_cache, v_new)] {
        let new = new.to_dtype(cache.dtype())?.contiguous()?;
        let (l, b, t, hkv, d) = cache.dims5()?;
        if new.dims() != [plan.n_tokens(), hkv, d] || layer >= l || b != plan.batch || t != plan.capacity {
            return Err(Error::invalid(format!("cannot append {:?} to layer {layer} of a cache of shape {:?}", new.dims(), cache.dims())));
        }
        cache.inplace_op2(&new, &Append { layer, plan })?;
    }
    Ok(())
}

/// Attention of `q` `(N, H, D)` over layer `layer`, which must already hold this pass's K/V.
pub fn attend(q: &Tensor, k_cache: &Tensor, v_cache: &Tensor, layer: usize, plan: &KvAttnPlan, params: KvAttnParams) -> Result<Tensor> {
    let (l, b, t, hkv, d) = k_cache.dims5()?;
    let valid = q.dims() == [plan.n_tokens(), params.n_heads, params.head_dim]
        && (hkv, d) == (params.n_kv_heads, params.head_dim)
        && params.n_kv_heads > 0
        && params.n_heads.is_multiple_of(params.n_kv_heads)
        && v_cache.dims() == k_cache.dims()
        && layer < l
        && (b, t) == (plan.batch, plan.capacity);
    if !valid {
        return Err(Error::invalid(format!("KV attention got q {:?} and caches {:?} for {params:?}", q.dims(), k_cache.dims())));
    }
    if plan.n_tokens() == 0 {
        return Ok(Tensor::zeros((0, params.n_heads, params.head_dim), k_cache.dtype(), k_cache.device())?);
    }
    let q = q.to_dtype(k_cache.dtype())?.contiguous()?;
    Ok(q.apply_op3_no_bwd(k_cache, v_cache, &Attend { layer, plan, params })?)
}

struct Append<'a> {
    layer: usize,
    plan: &'a KvAttnPlan,
}

impl Append<'_> {
    fn slab_dims(&self, layout: &Layout) -> candle_core::Result<(SlabDims, usize)> {
        layer_slab(layout, self.layer)
    }
}

/// The layer's `(B, T, H_kv, D)` slab of a contiguous cache, and where it starts.
fn layer_slab(layout: &Layout, layer: usize) -> candle_core::Result<(SlabDims, usize)> {
    if !layout.is_contiguous() {
        candle_core::bail!("the KV cache must be contiguous");
    }
    let (_, b, t, hkv, d) = layout.shape().dims5()?;
    let dims = SlabDims { batch: b, capacity: t, n_kv_heads: hkv, head_dim: d };
    Ok((dims, layout.start_offset() + layer * dims.len()))
}

impl InplaceOp2 for Append<'_> {
    fn name(&self) -> &'static str {
        "kv-append"
    }

    fn cpu_fwd(&self, dst: &mut CpuStorage, dst_l: &Layout, new: &CpuStorage, new_l: &Layout) -> candle_core::Result<()> {
        let (dims, at) = self.slab_dims(dst_l)?;
        let from = new_l.start_offset();
        let n = self.plan.n_tokens() * dims.n_kv_heads * dims.head_dim;
        let (rows, pos) = (&self.plan.rows, &self.plan.pos);
        match (dst, new) {
            (CpuStorage::F32(c), CpuStorage::F32(s)) => reference::append(&mut c[at..at + dims.len()], &s[from..from + n], rows, pos, dims),
            (CpuStorage::F16(c), CpuStorage::F16(s)) => reference::append(&mut c[at..at + dims.len()], &s[from..from + n], rows, pos, dims),
            (CpuStorage::BF16(c), CpuStorage::BF16(s)) => {
                reference::append(&mut c[at..at + dims.len()], &s[from..from + n], rows, pos, dims)
            }
            _ => candle_core::bail!("kv-append: the cache must be f32, f16 or bf16 and match the new K/V"),
        }
        Ok(())
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        dst: &mut candle_core::CudaStorage,
        dst_l: &Layout,
        new: &candle_core::CudaStorage,
        new_l: &Layout,
    ) -> candle_core::Result<()> {
        let (dims, at) = self.slab_dims(dst_l)?;
        launch::append(dst, at, (new, new_l), dims, self.plan)
    }
}

struct Attend<'a> {
    layer: usize,
    plan: &'a KvAttnPlan,
    params: KvAttnParams,
}

impl Attend<'_> {
    fn slab_dims(&self, layout: &Layout) -> candle_core::Result<(SlabDims, usize)> {
        layer_slab(layout, self.layer)
    }
}

fn widen(storage: &CpuStorage, from: usize, len: usize) -> candle_core::Result<Vec<f32>> {
    Ok(match storage {
        CpuStorage::F32(s) => s[from..from + len].to_vec(),
        CpuStorage::F16(s) => s[from..from + len].iter().map(|x| x.to_f32()).collect(),
        CpuStorage::BF16(s) => s[from..from + len].iter().map(|x| x.to_f32()).collect(),
        _ => candle_core::bail!("kv-attention: tensors must be f32, f16 or bf16"),
    })
}

impl CustomOp3 for Attend<'_> {
    fn name(&self) -> &'static str {
        "kv-attention"
    }

    fn cpu_fwd(
        &self,
        q: &CpuStorage,
        q_l: &Layout,
        k: &CpuStorage,
        k_l: &Layout,
        v: &CpuStorage,
        v_l: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (dims, at) = self.slab_dims(k_l)?;
        let shape = q_l.shape().clone();
        let (_, v_at) = layer_slab(v_l, self.layer)?;
        let k_slab = widen(k, at, dims.len())?;
        let v_slab = widen(v, v_at, dims.len())?;
        let q = widen(q, q_l.start_offset(), shape.elem_count())?;
        let out = reference::attend(&k_slab, &v_slab, &q, &self.plan.rows, &self.plan.pos, self.params.n_heads, self.params.window, dims);
        let storage = match k {
            CpuStorage::F16(_) => CpuStorage::F16(out.iter().map(|&x| half::f16::from_f32(x)).collect()),
            CpuStorage::BF16(_) => CpuStorage::BF16(out.iter().map(|&x| half::bf16::from_f32(x)).collect()),
            _ => CpuStorage::F32(out),
        };
        Ok((storage, shape))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        q: &candle_core::CudaStorage,
        q_l: &Layout,
        k: &candle_core::CudaStorage,
        k_l: &Layout,
        v: &candle_core::CudaStorage,
        v_l: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        let (dims, k_at) = self.slab_dims(k_l)?;
        let (_, v_at) = layer_slab(v_l, self.layer)?;
        let out = launch::attend((q, q_l), (k, k_at), (v, v_at), dims, self.plan, &self.params)?;
        Ok((out, q_l.shape().clone()))
    }
}
