//! Panics inside kvengine are the failures the fuzz tests look for, and there are thousands of
//! cases: they are caught and recorded, not printed one by one.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use crate::common::panic_message;

thread_local! {
    /// Set while kvengine code runs under `guarded`; other panics print as usual.
    static GUARDED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Where the last panic happened and what it said (the hook runs before unwinding).
static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// `catch_unwind` with the panic recorded quietly in `LAST_PANIC`.
pub fn guarded<T>(f: impl FnOnce() -> T) -> std::thread::Result<T> {
    GUARDED.with(|g| g.set(true));
    let r = catch_unwind(AssertUnwindSafe(f));
    GUARDED.with(|g| g.set(false));
    r
}

pub fn clear_last_panic() {
    *LAST_PANIC.lock().unwrap() = None;
}

/// The message and location of the last guarded panic, or "" if there was none.
pub fn take_last_panic() -> String {
    LAST_PANIC.lock().unwrap().take().unwrap_or_default()
}

pub fn install_quiet_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let msg = panic_message(info.payload());
            let loc = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
            // Panics of the fuzz loop itself (assertions, harness bugs) still print normally.
            if !GUARDED.with(|g| g.get()) {
                default(info);
            } else {
                *LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("{msg} at {loc}"));
            }
        }));
    });
}
