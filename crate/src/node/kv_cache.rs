use std::sync::{Arc, Mutex, MutexGuard};

use napi::bindgen_prelude::Int32Array;
use napi_derive::napi;

use super::{disposed, guarded};
use crate::kv_cache::KvCache;
use crate::pass_queue::PassQueue;

/// A KV store owned by JS. The mutex is held for a whole forward pass, so a cache is never read
/// and written at once; `dispose` frees the buffers as soon as no pass is using them. Its passes
/// run one after another through `passes` (see `pass_queue.rs` for why they must).
#[napi]
pub struct NativeKvCache {
    pub(crate) inner: Arc<Mutex<Option<KvCache>>>,
    pub(crate) passes: Arc<PassQueue>,
}

impl NativeKvCache {
    pub(crate) fn new(cache: KvCache) -> Self {
        Self { inner: Arc::new(Mutex::new(Some(cache))), passes: Arc::default() }
    }

    fn with<T>(&self, f: impl FnOnce(&mut KvCache) -> crate::Result<T>) -> napi::Result<T> {
        let mut guard: MutexGuard<Option<KvCache>> = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let cache = guard.as_mut().ok_or_else(|| disposed("KV cache"))?;
        guarded(|| f(cache))
    }
}

#[napi]
impl NativeKvCache {
    #[napi]
    pub fn seqlens(&self) -> napi::Result<Int32Array> {
        self.with(|c| Ok(Int32Array::new(c.seqlens().to_vec())))
    }

    #[napi(getter)]
    pub fn batch_size(&self) -> napi::Result<u32> {
        self.with(|c| Ok(c.batch() as u32))
    }

    #[napi(getter)]
    pub fn capacity(&self) -> napi::Result<u32> {
        self.with(|c| Ok(c.capacity() as u32))
    }

    #[napi(getter)]
    pub fn size_bytes(&self) -> napi::Result<f64> {
        self.with(|c| Ok(c.size_bytes() as f64))
    }

    #[napi(getter)]
    pub fn kv_type(&self) -> napi::Result<String> {
        self.with(|c| Ok(c.kv_type().name().to_string()))
    }

    #[napi]
    pub fn copy_row(&self, src: u32, dst: u32) -> napi::Result<()> {
        self.with(|c| c.copy_row(src as usize, dst as usize))
    }

    #[napi]
    pub fn reset(&self) -> napi::Result<()> {
        self.with(|c| {
            c.reset();
            Ok(())
        })
    }

    #[napi]
    pub fn reset_row(&self, row: u32) -> napi::Result<()> {
        self.with(|c| c.reset_row(row as usize))
    }

    #[napi]
    pub fn truncate_row(&self, row: u32, len: u32) -> napi::Result<()> {
        self.with(|c| c.truncate_row(row as usize, len as usize))
    }

    #[napi]
    pub fn dispose(&self) {
        let cache = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        drop(cache);
        crate::memory::release_freed_memory();
    }

    #[napi(getter)]
    pub fn disposed(&self) -> bool {
        self.inner.lock().map(|g| g.is_none()).unwrap_or(true)
    }
}
