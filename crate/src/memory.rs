//! How freed memory goes back to the OS: late enough that a forward pass reuses its buffers,
//! promptly once a model or cache is disposed.
//!
//! glibc raises its mmap threshold each time a large mmapped block is freed (up to 32 MiB), so
//! after the first model is disposed, weight tensors of a few MiB land in malloc arenas instead
//! of their own mappings, and freeing them no longer returns memory to the OS: RSS climbed by
//! ~10 MiB per load/dispose cycle. Pinning the threshold keeps large buffers in mmap.
//!
//! Our own binaries allocate through mimalloc instead (`crate::Allocator`). By default it hands
//! pages freed for 10 ms back to the kernel, and a prefill's per-op buffers then came back as
//! fresh zeroed (transparent huge) pages: sys time was a fifth of a 512-token prefill. A quarter
//! of a second outlasts the gap between a buffer's uses within a pass and between decode steps,
//! yet a finished phase's memory goes back within seconds (at 10 s, RSS fell 8% inside the
//! benchmark's 2000-token window as an earlier phase's pages went back late); a dispose
//! collects at once.

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod glibc {
    use std::os::raw::c_int;

    const M_MMAP_THRESHOLD: c_int = -3;

    extern "C" {
        fn mallopt(param: c_int, value: c_int) -> c_int;
        #[cfg(feature = "node")]
        fn malloc_trim(pad: usize) -> c_int;
    }

    pub fn pin_mmap_threshold() {
        // SAFETY: mallopt with a documented parameter; thread-safe in glibc.
        unsafe { mallopt(M_MMAP_THRESHOLD, 128 * 1024) };
    }

    #[cfg(feature = "node")]
    pub fn trim() {
        // SAFETY: malloc_trim only releases free memory back to the OS.
        unsafe { malloc_trim(0) };
    }
}

/// `mi_option_purge_delay` in mimalloc.h's option enum.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
const PURGE_DELAY_MS: std::os::raw::c_long = 250;

/// Called once before the first model is loaded.
pub fn prefer_mmap_for_large_buffers() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        glibc::pin_mmap_threshold();
        // SAFETY: setting a documented mimalloc option; harmless where mimalloc is linked but
        // not the global allocator (tests with their own).
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
    });
}

/// Returns memory freed by a dispose to the OS now rather than at the next allocation (the
/// binding's disposes; Rust callers free by dropping and need not ask).
#[cfg(feature = "node")]
pub fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    glibc::trim();
    // SAFETY: a forced collection only releases memory that is already free.
    unsafe { libmimalloc_sys::mi_collect(true) };
}
