//! What a cache's owner may read about it without taking its lock. A forward pass holds the
//! cache for its whole duration (seconds for a long prefill), and a server's health and metrics
//! handlers read its size on the JS thread: through the lock they froze until the pass ended.
//! The holder of the lock publishes here after every change it makes, and readers take the last
//! published values at once, whatever a pass is doing.

use std::sync::atomic::{fence, AtomicBool, AtomicI32, AtomicU64, Ordering};

use super::KvCache;

pub struct KvCacheView {
    batch: usize,
    kv_type: &'static str,
    disposed: AtomicBool,
    capacity: AtomicU64,
    size_bytes: AtomicU64,
    /// Odd while `seqlens` is being written: a reader that sees it odd, or changed across its
    /// read, reads again, so it never returns some rows before a pass and others after it.
    version: AtomicU64,
    seqlens: Box<[AtomicI32]>,
}

impl KvCacheView {
    pub fn new(cache: &KvCache) -> Self {
        let view = Self {
            batch: cache.batch(),
            kv_type: cache.kv_type().name(),
            disposed: AtomicBool::new(false),
            capacity: AtomicU64::new(0),
            size_bytes: AtomicU64::new(0),
            version: AtomicU64::new(0),
            seqlens: (0..cache.batch()).map(|_| AtomicI32::new(0)).collect(),
        };
        view.publish(cache);
        view
    }

    /// Copies the cache's current state in. Only the holder of the cache's lock calls this, so
    /// two publications never interleave.
    pub fn publish(&self, cache: &KvCache) {
        self.capacity.store(cache.capacity() as u64, Ordering::Relaxed);
        self.size_bytes.store(cache.size_bytes() as u64, Ordering::Relaxed);
        let version = self.version.load(Ordering::Relaxed);
        self.version.store(version + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        for (slot, &len) in self.seqlens.iter().zip(cache.seqlens()) {
            slot.store(len, Ordering::Relaxed);
        }
        self.version.store(version + 2, Ordering::Release);
    }

    /// Every row's length as last published: all from the same publication.
    pub fn seqlens(&self) -> Vec<i32> {
        loop {
            let before = self.version.load(Ordering::Acquire);
            if before.is_multiple_of(2) {
                let lens = self.seqlens.iter().map(|s| s.load(Ordering::Relaxed)).collect();
                fence(Ordering::Acquire);
                if self.version.load(Ordering::Relaxed) == before {
                    return lens;
                }
            }
            std::hint::spin_loop();
        }
    }

    pub fn batch(&self) -> usize {
        self.batch
    }

    pub fn capacity(&self) -> usize {
        self.capacity.load(Ordering::Relaxed) as usize
    }

    pub fn size_bytes(&self) -> u64 {
        self.size_bytes.load(Ordering::Relaxed)
    }

    pub fn kv_type(&self) -> &'static str {
        self.kv_type
    }

    /// Sequentially consistent, with `mark_disposed`: the owner that frees the cache checks
    /// this after letting go of its lock, and a disposer that could not take the lock set it
    /// before trying, so one of the two always sees the other (see the binding's `free_if_disposed`).
    pub fn disposed(&self) -> bool {
        self.disposed.load(Ordering::SeqCst)
    }

    pub fn mark_disposed(&self) {
        self.disposed.store(true, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::config::test_config;
    use crate::kv_cache::KvType;

    #[test]
    fn follows_the_cache_as_published() {
        let cfg = test_config(2, 2, 1, 4);
        let mut cache = KvCache::new(&cfg, 3, 10, KvType::F16).unwrap();
        let view = KvCacheView::new(&cache);
        assert_eq!((view.batch(), view.capacity(), view.kv_type()), (3, 10, "f16"));
        assert_eq!(view.size_bytes(), cache.size_bytes() as u64);
        cache.set_seqlen(1, 7);
        cache.ensure_capacity(1500).unwrap();
        assert_eq!(view.seqlens(), vec![0, 0, 0], "unpublished changes are not seen");
        view.publish(&cache);
        assert_eq!(view.seqlens(), vec![0, 7, 0]);
        assert_eq!(view.capacity(), 2048);
        assert_eq!(view.size_bytes(), cache.size_bytes() as u64);
    }

    /// Every publication gives all rows the same length, so a reader that ever sees two
    /// different lengths has read half of one publication and half of another.
    #[test]
    fn readers_never_see_half_a_publication() {
        let cfg = test_config(1, 2, 1, 2);
        let rows = 512;
        let cache = Arc::new(Mutex::new(KvCache::new(&cfg, rows, 8, KvType::F16).unwrap()));
        let view = Arc::new(KvCacheView::new(&cache.lock().unwrap()));
        let writer = {
            let (cache, view) = (cache.clone(), view.clone());
            std::thread::spawn(move || {
                for len in 1..=20_000 {
                    let mut c = cache.lock().unwrap();
                    (0..rows).for_each(|r| c.set_seqlen(r, len));
                    view.publish(&c);
                }
            })
        };
        let mut reads = 0;
        while !writer.is_finished() || reads == 0 {
            let lens = view.seqlens();
            assert!(lens.iter().all(|&l| l == lens[0]), "a torn read: {:?}", &lens[..8]);
            reads += 1;
        }
        writer.join().unwrap();
        assert_eq!(view.seqlens(), vec![20_000; rows]);
    }
}
