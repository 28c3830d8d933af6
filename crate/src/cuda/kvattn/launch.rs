//! Launches `kvattn.cu` for the ops in `super`: picks the kernel for the dtype and head
//! dim, the grid from the plan's tiles, and how many key splits fill the GPU.

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::sys::CUdevice_attribute;
use candle_core::cuda_backend::cudarc::driver::{CudaSlice, CudaView, DeviceRepr, LaunchConfig, PushKernelArg};
use candle_core::cuda_backend::{CudaDType, WrapErr};
use candle_core::{bail, CudaDevice, CudaStorage, DType, Layout, Result, Storage};
use half::{bf16, f16};

use super::reference::SlabDims;
use super::{KvAttnParams, KvAttnPlan};

const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/kvattn.ptx"));
const MODULE: &str = "kvengine_kvattn";
/// Threads per block; `WARPS * 32` in the kernel.
const THREADS: u32 = 128;
/// Keys per shared-memory step; a split shorter than a few steps costs more than it saves.
const KEYS_PER_STEP: usize = 32;
const MIN_KEYS_PER_SPLIT: usize = 4 * KEYS_PER_STEP;
/// Blocks resident per SM at the kernel's 41 KB of shared memory, with margin.
const BLOCKS_PER_SM: usize = 4;
const MAX_SPLITS: usize = 64;

fn suffix(dtype: DType) -> Result<&'static str> {
    Ok(match dtype {
        DType::BF16 => "bf16",
        DType::F16 => "f16",
        DType::F32 => "f32",
        other => bail!("kv-attention runs on bf16, f16 or f32 caches, not {other:?}"),
    })
}

/// A `u32` index tensor of the plan as the kernel's argument; the plan built it contiguous.
fn index_slice(storage: &Storage) -> Result<&CudaSlice<u32>> {
    match storage {
        Storage::Cuda(s) => s.as_cuda_slice::<u32>(),
        _ => bail!("kv-attention: the plan's index tensors must be on the GPU"),
    }
}

pub fn append(dst: &mut CudaStorage, at: usize, (new, new_l): (&CudaStorage, &Layout), dims: SlabDims, plan: &KvAttnPlan) -> Result<()> {
    let index = plan.device_index()?;
    let (rows, pos) = (index.rows.storage_and_layout().0, index.pos.storage_and_layout().0);
    let (rows, pos) = (index_slice(&rows)?, index_slice(&pos)?);
    let width = dims.n_kv_heads * dims.head_dim;
    let n = plan.n_tokens() * width;
    if n == 0 {
        return Ok(());
    }
    let dev = dst.device().clone();
    let name = format!("kv_append_{}", suffix(dst.dtype())?);
    let cfg = LaunchConfig { grid_dim: (n.div_ceil(256).min(65_535) as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
    fn go<T: CudaDType + DeviceRepr>(
        (dev, name, cfg): (&CudaDevice, &str, LaunchConfig),
        (dst, at, len): (&mut CudaStorage, usize, usize),
        (new, from): (&CudaStorage, usize),
        (rows, pos, n, width, capacity): (&CudaSlice<u32>, &CudaSlice<u32>, i64, i32, i32),
    ) -> Result<()> {
        let src = new.as_cuda_slice::<T>()?.slice(from..from + n as usize);
        let mut slab = dst.as_cuda_slice_mut::<T>()?.slice_mut(at..at + len);
        let func = dev.get_or_load_custom_func(name, MODULE, PTX)?;
        let mut b = func.builder();
        b.arg(&mut slab).arg(&src).arg(rows).arg(pos).arg(&n).arg(&width).arg(&capacity);
        // SAFETY: the kernel writes only slab[rows[i], pos[i]] for i < N, inside `len` by the
        // plan's capacity check, and reads `src` within its N·width elements.
        unsafe { b.launch(cfg) }.w()?;
        Ok(())
    }
    let launch = (&dev, name.as_str(), cfg);
    let args = (rows, pos, n as i64, width as i32, dims.capacity as i32);
    let from = new_l.start_offset();
    match dst.dtype() {
        DType::BF16 => go::<bf16>(launch, (dst, at, dims.len()), (new, from), args),
        DType::F16 => go::<f16>(launch, (dst, at, dims.len()), (new, from), args),
        _ => go::<f32>(launch, (dst, at, dims.len()), (new, from), args),
    }
}

/// Splits per tile so that tiles × KV heads × splits keeps every SM busy, but never so many that
/// a split holds only a few steps of keys.
fn choose_splits(dev: &CudaDevice, blocks: usize, longest: usize, asked: Option<usize>) -> Result<usize> {
    if let Some(n) = asked {
        return Ok(n.clamp(1, MAX_SPLITS));
    }
    let sms = dev.cuda_stream().context().attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).w()? as usize;
    let target = sms * BLOCKS_PER_SM;
    if blocks >= target {
        return Ok(1);
    }
    Ok(target.div_ceil(blocks).min(longest.div_ceil(MIN_KEYS_PER_SPLIT)).clamp(1, MAX_SPLITS))
}

/// The longest key range any tile reads, which bounds how finely splitting can help.
fn longest_tile(plan: &KvAttnPlan, window: Option<usize>) -> usize {
    plan.tiles
        .chunks_exact(4)
        .map(|t| {
            let (first, last) = (plan.pos[t[0] as usize] as usize, plan.pos[(t[0] + t[1] - 1) as usize] as usize);
            last + 1 - window.map_or(0, |w| first.saturating_sub(w))
        })
        .max()
        .unwrap_or(0)
}

pub fn attend(
    (q, q_l): (&CudaStorage, &Layout),
    (k, k_at): (&CudaStorage, usize),
    (v, v_at): (&CudaStorage, usize),
    dims: SlabDims,
    plan: &KvAttnPlan,
    params: &KvAttnParams,
) -> Result<CudaStorage> {
    let (n, h, d) = (plan.n_tokens(), params.n_heads, params.head_dim);
    if d != 64 && d != 128 {
        bail!("the CUDA kv-attention kernel supports head dims 64 and 128, not {d}");
    }
    let dev = q.device().clone();
    let name = format!("kvattn_{}_d{d}", suffix(q.dtype())?);
    let n_tiles = plan.tiles.len() / 4;
    let splits = choose_splits(&dev, n_tiles * dims.n_kv_heads, longest_tile(plan, params.window), params.num_splits)?;
    let queries = n * h;
    // With one split the kernel writes `out` directly and never touches the partials.
    let part = if splits > 1 { queries * splits } else { 1 };
    // SAFETY: with several splits, every (split, query) partial is written before the combine
    // reads it, empty splits included.
    let (part_o, part_ml) = unsafe { (dev.alloc::<f32>(part * d)?, dev.alloc::<f32>(part * 2)?) };
    let index = plan.device_index()?;
    let guards = [&index.rows, &index.pos, &index.tiles].map(|t| t.storage_and_layout().0);
    let (rows, pos, tiles) = (index_slice(&guards[0])?, index_slice(&guards[1])?, index_slice(&guards[2])?);
    let scale_log2 = std::f32::consts::LOG2_E / (d as f32).sqrt();
    let window = params.window.map_or(-1, |w| w.min(i32::MAX as usize) as i32);
    let scalars = [n as i32, h as i32, dims.n_kv_heads as i32, dims.capacity as i32, window];
    let grid =
        LaunchConfig { grid_dim: (n_tiles as u32, dims.n_kv_heads as u32, splits as u32), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
    let combine = LaunchConfig { grid_dim: (queries.div_ceil(4) as u32, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };

    fn go<T: CudaDType + DeviceRepr>(
        dev: &CudaDevice,
        name: &str,
        (q, q_at, q_len): (&CudaStorage, usize, usize),
        (k, k_at, v, v_at, slab): (&CudaStorage, usize, &CudaStorage, usize, usize),
        (part_o, part_ml, rows, pos, tiles): (&CudaSlice<f32>, &CudaSlice<f32>, &CudaSlice<u32>, &CudaSlice<u32>, &CudaSlice<u32>),
        (scalars, scale_log2, splits): ([i32; 5], f32, i32),
        (grid, combine): (LaunchConfig, LaunchConfig),
    ) -> Result<CudaStorage> {
        let qv: CudaView<T> = q.as_cuda_slice::<T>()?.slice(q_at..q_at + q_len);
        let kv: CudaView<T> = k.as_cuda_slice::<T>()?.slice(k_at..k_at + slab);
        let vv: CudaView<T> = v.as_cuda_slice::<T>()?.slice(v_at..v_at + slab);
        // SAFETY: every element of `out` is written, by the attention kernel with one split or
        // by the combine kernel otherwise.
        let out = unsafe { dev.alloc::<T>(q_len)? };
        let func = dev.get_or_load_custom_func(name, MODULE, PTX)?;
        let mut b = func.builder();
        b.arg(&qv).arg(&kv).arg(&vv).arg(&out).arg(part_o).arg(part_ml).arg(rows).arg(pos).arg(tiles);
        for s in &scalars {
            b.arg(s);
        }
        b.arg(&scale_log2);
        // SAFETY: tiles index tokens < N and heads < H; keys are read below each token's position
        // in its own row, inside the slab by the plan's capacity check.
        unsafe { b.launch(grid) }.w()?;
        if splits > 1 {
            let queries = scalars[0] * scalars[1];
            let func = dev.get_or_load_custom_func(&format!("{name}_combine"), MODULE, PTX)?;
            let mut b = func.builder();
            b.arg(part_o).arg(part_ml).arg(&out).arg(&queries).arg(&splits);
            // SAFETY: the partials hold `splits × queries` entries, all written above.
            unsafe { b.launch(combine) }.w()?;
        }
        Ok(CudaStorage::wrap_cuda_slice(out, dev.clone()))
    }
    let qs = (q, q_l.start_offset(), queries * d);
    let kvs = (k, k_at, v, v_at, dims.len());
    let bufs = (&part_o, &part_ml, rows, pos, tiles);
    let consts = (scalars, scale_log2, splits as i32);
    match q.dtype() {
        DType::BF16 => go::<bf16>(&dev, &name, qs, kvs, bufs, consts, (grid, combine)),
        DType::F16 => go::<f16>(&dev, &name, qs, kvs, bufs, consts, (grid, combine)),
        _ => go::<f32>(&dev, &name, qs, kvs, bufs, consts, (grid, combine)),
    }
}
