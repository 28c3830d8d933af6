//! Keeps freed model memory from lingering in the process.
//!
//! glibc raises its mmap threshold each time a large mmapped block is freed (up to 32 MiB), so
//! after the first model is disposed, weight tensors of a few MiB land in malloc arenas instead
//! of their own mappings, and freeing them no longer returns memory to the OS: RSS climbed by
//! ~10 MiB per load/dispose cycle. Pinning the threshold keeps large buffers in mmap.

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod glibc {
    use std::os::raw::c_int;

    const M_MMAP_THRESHOLD: c_int = -3;

    extern "C" {
        fn mallopt(param: c_int, value: c_int) -> c_int;
        fn malloc_trim(pad: usize) -> c_int;
    }

    pub fn pin_mmap_threshold() {
        // SAFETY: mallopt with a documented parameter; thread-safe in glibc.
        unsafe { mallopt(M_MMAP_THRESHOLD, 128 * 1024) };
    }

    pub fn trim() {
        // SAFETY: malloc_trim only releases free memory back to the OS.
        unsafe { malloc_trim(0) };
    }
}

/// Called once before the first model is loaded.
pub fn prefer_mmap_for_large_buffers() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    ONCE.call_once(glibc::pin_mmap_threshold);
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    ONCE.call_once(|| {});
}

/// Returns memory freed by a dispose to the OS now rather than at the next allocation.
pub fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    glibc::trim();
}
