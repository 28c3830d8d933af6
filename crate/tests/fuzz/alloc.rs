//! A counting global allocator: the fuzz tests assert that no load allocates far beyond the size
//! of its input, which only the allocator itself can observe.

use std::alloc::{GlobalAlloc, Layout, System};
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// The iteration in progress, for the message printed before an allocation that will abort.
pub static ITERATION: AtomicUsize = AtomicUsize::new(usize::MAX);
const HUGE_REQUEST: usize = 16 << 30;

fn grew(n: usize) {
    let now = CURRENT.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

/// A fixed buffer to format into: the allocator must not allocate while reporting.
struct StackLine {
    buf: [u8; 96],
    len: usize,
}

impl std::fmt::Write for StackLine {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// A request this large usually aborts the process, so the iteration is printed first: it is
/// the only clue to which case to reproduce.
fn note_if_huge(size: usize) {
    if size < HUGE_REQUEST {
        return;
    }
    let mut line = StackLine { buf: [0; 96], len: 0 };
    let _ = writeln!(line, "fuzz: allocation request of {size} bytes, iteration {}", ITERATION.load(Ordering::Relaxed));
    let _ = std::io::stderr().write_all(&line.buf[..line.len]);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_if_huge(layout.size());
        let p = System.alloc(layout);
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_if_huge(layout.size());
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_if_huge(new_size);
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                CURRENT.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` and returns its result with the peak growth of live heap bytes while it ran. The
/// result is still alive when the peak is read, so what it keeps counts too.
pub fn with_peak_growth<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let result = f();
    (result, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}
