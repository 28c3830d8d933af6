//! N-API bindings. The only place that knows about Node: it converts errors, moves work off the
//! JS thread and keeps panics from crossing into Node. The TypeScript module `src/native.ts`
//! is the only consumer; its classes wrap these.

mod cancel_token;
mod convert;
mod kv_cache;
mod model;
mod settlement;

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::{Error, ErrorKind};

/// Only the addon's own allocations: Node and V8 keep their allocators.
#[global_allocator]
static ALLOCATOR: crate::Allocator = crate::Allocator;

/// The one error conversion: `[CODE] message`, which `src/native.ts` turns into a
/// `KvEngineError` with that code.
pub(crate) fn to_napi(e: Error) -> napi::Error {
    napi::Error::new(napi::Status::GenericFailure, format!("[{}] {}", e.kind.code(), e.message))
}

/// Runs engine code, turning both errors and panics into JS errors.
pub(crate) fn guarded<T>(f: impl FnOnce() -> crate::Result<T>) -> napi::Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r.map_err(to_napi),
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(to_napi(Error::new(ErrorKind::Internal, format!("kvengine panicked ({what}); please report this"))))
        }
    }
}

pub(crate) fn disposed(what: &str) -> napi::Error {
    to_napi(Error::new(ErrorKind::Disposed, format!("this {what} has been disposed; create a new one")))
}
