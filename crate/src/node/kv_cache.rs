use std::sync::atomic::{fence, Ordering};
use std::sync::{Arc, Mutex, TryLockError};

use napi::bindgen_prelude::Int32Array;
use napi_derive::napi;

use super::grammar::{NativeConstraint, SharedConstraint};
use super::{disposed, guarded, Result};
use crate::kv_cache::{KvCache, KvCacheView};
use crate::pass_queue::PassQueue;

/// A cache and what may be read of it without its lock. The lock is held for a whole forward
/// pass, so a cache is never read and written at once; the getters read `view` instead, which
/// whoever holds the lock refreshes before letting go.
pub(crate) struct SharedCache {
    store: Mutex<Option<KvCache>>,
    view: KvCacheView,
    /// Per row, the grammar its next token must fit (none for a free row).
    constraints: Mutex<Vec<Option<SharedConstraint>>>,
}

impl SharedCache {
    /// Each row's constraint as the next pass will apply it.
    pub(crate) fn constraints(&self) -> Vec<Option<SharedConstraint>> {
        self.constraints.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Runs `f` on the cache under its lock (after any pass in flight), then publishes what it
    /// changed. A cache disposed meanwhile is freed here instead.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut KvCache) -> Result<T>) -> Result<T> {
        if self.view.disposed() {
            return Err(disposed("KV cache"));
        }
        let mut guard = self.store.lock().unwrap_or_else(|p| p.into_inner());
        let out = match guard.as_mut() {
            Some(cache) if !self.view.disposed() => {
                let out = f(cache);
                self.view.publish(cache);
                out
            }
            _ => Err(disposed("KV cache")),
        };
        drop(guard);
        self.free_if_disposed();
        out
    }

    /// Frees the buffers of a disposed cache unless a pass holds them; that pass calls this
    /// again once it lets go. The fence pairs with the one a disposer passes between marking
    /// and trying the lock, so either the disposer takes the lock or the pass sees the mark.
    fn free_if_disposed(&self) {
        fence(Ordering::SeqCst);
        if !self.view.disposed() {
            return;
        }
        let freed = match self.store.try_lock() {
            Ok(mut guard) => guard.take(),
            Err(TryLockError::Poisoned(p)) => p.into_inner().take(),
            Err(TryLockError::WouldBlock) => return,
        };
        if freed.is_some() {
            drop(freed);
            crate::memory::release_freed_memory();
        }
    }
}

/// A KV store owned by JS. Its passes run one after another through `passes` (see
/// `pass_queue.rs` for why they must). The getters and `dispose` never wait for one; the row
/// methods change the cache under its lock, so they wait for a pass running at that moment.
#[napi]
pub struct NativeKvCache {
    pub(crate) shared: Arc<SharedCache>,
    pub(crate) passes: Arc<PassQueue>,
}

impl NativeKvCache {
    pub(crate) fn new(cache: KvCache) -> Self {
        let view = KvCacheView::new(&cache);
        let constraints = Mutex::new(vec![None; cache.batch()]);
        Self { shared: Arc::new(SharedCache { store: Mutex::new(Some(cache)), view, constraints }), passes: Arc::default() }
    }

    fn with<T>(&self, f: impl FnOnce(&mut KvCache) -> crate::Result<T>) -> Result<T> {
        self.shared.with(|cache| guarded(|| f(cache)))
    }

    /// The published view, for the getters: answered at once even while a pass runs.
    fn view(&self) -> Result<&KvCacheView> {
        let view = &self.shared.view;
        if view.disposed() {
            return Err(disposed("KV cache"));
        }
        Ok(view)
    }
}

#[napi]
impl NativeKvCache {
    /// Each row's length after the last pass or change that completed.
    #[napi]
    pub fn seqlens(&self) -> Result<Int32Array> {
        Ok(Int32Array::new(self.view()?.seqlens()))
    }

    #[napi(getter)]
    pub fn batch_size(&self) -> Result<u32> {
        Ok(self.view()?.batch() as u32)
    }

    /// As of the last pass that completed (a pass that grows the cache shows here when it ends).
    #[napi(getter)]
    pub fn capacity(&self) -> Result<u32> {
        Ok(self.view()?.capacity() as u32)
    }

    #[napi(getter)]
    pub fn size_bytes(&self) -> Result<f64> {
        Ok(self.view()?.size_bytes() as f64)
    }

    #[napi(getter)]
    pub fn kv_type(&self) -> Result<String> {
        Ok(self.view()?.kv_type().to_string())
    }

    /// Sets the grammar row `row`'s next tokens must fit, or frees the row (null); passes from
    /// then on mask that row's logits.
    #[napi]
    pub fn set_constraint(&self, row: u32, constraint: Option<&NativeConstraint>) -> Result<()> {
        let mut rows = self.shared.constraints.lock().unwrap_or_else(|p| p.into_inner());
        let batch = rows.len();
        let slot = rows
            .get_mut(row as usize)
            .ok_or_else(|| super::to_napi(crate::Error::invalid(format!("row {row} is out of range for a cache of {batch} rows"))))?;
        *slot = constraint.map(|c| c.inner.clone());
        Ok(())
    }

    #[napi]
    pub fn copy_row(&self, src: u32, dst: u32) -> Result<()> {
        self.with(|c| c.copy_row(src as usize, dst as usize))
    }

    #[napi]
    pub fn reset(&self) -> Result<()> {
        self.with(|c| {
            c.reset();
            Ok(())
        })
    }

    #[napi]
    pub fn reset_row(&self, row: u32) -> Result<()> {
        self.with(|c| c.reset_row(row as usize))
    }

    #[napi]
    pub fn truncate_row(&self, row: u32, len: u32) -> Result<()> {
        self.with(|c| c.truncate_row(row as usize, len as usize))
    }

    /// Marks the cache disposed at once; its buffers go now, or when the pass holding them ends.
    #[napi]
    pub fn dispose(&self) {
        self.shared.view.mark_disposed();
        self.shared.free_if_disposed();
    }

    #[napi(getter)]
    pub fn disposed(&self) -> bool {
        self.shared.view.disposed()
    }
}
