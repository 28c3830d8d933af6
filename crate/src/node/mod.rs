//! N-API bindings. The only place that knows about Node: it converts errors, moves work off the
//! JS thread and keeps panics from crossing into Node. The TypeScript module `src/native.ts`
//! is the only consumer; its classes wrap these.

mod cancel_token;
mod chat_template;
mod convert;
mod forward_pass;
mod grammar;
mod kv_cache;
mod model;
mod settlement;

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::{Error, ErrorKind};

/// Only the addon's own allocations: Node and V8 keep their allocators.
#[global_allocator]
static ALLOCATOR: crate::Allocator = crate::Allocator;

/// What the binding's calls return (named `Result`, as napi-rs's macros recognise results by
/// that name): errors carry our `ErrorKind`, which becomes the JS error's
/// `code` (napi-rs makes every error with its status as the code), so `src/native.ts` reads the
/// kind from a field instead of parsing the message.
pub(crate) type Result<T> = napi::Result<T, ErrorKind>;

/// The one error conversion.
pub(crate) fn to_napi(e: Error) -> napi::Error<ErrorKind> {
    napi::Error::new(e.kind, e.message)
}

/// napi-rs's own failures (making a promise, a channel or an object) inside a call of ours.
pub(crate) fn napi_failed(e: napi::Error) -> napi::Error<ErrorKind> {
    napi::Error::new(ErrorKind::Internal, format!("N-API call failed: {}", e.reason))
}

/// An async task's engine error as napi-rs's `Task::resolve` can return it (with its own
/// status only): the JS error is made here, code included, and the returned error refers to
/// it, so that object is what the promise rejects with.
pub(crate) fn task_error(env: &napi::Env, e: Error) -> napi::Error {
    // SAFETY: on the JS thread (`resolve` runs there) with its env; a null value (the env is
    // closing) is handled before use.
    let value = unsafe { napi::JsError::from(to_napi(e.clone())).into_value(env.raw()) };
    if value.is_null() {
        return napi::Error::from_reason(e.message);
    }
    napi::Error::from(unsafe { napi::Unknown::from_raw_unchecked(env.raw(), value) })
}

/// Runs engine code, turning both errors and panics into JS errors.
pub(crate) fn guarded<T>(f: impl FnOnce() -> crate::Result<T>) -> Result<T> {
    caught(f).map_err(to_napi)
}

/// Runs engine code, turning a panic into an `Internal` error.
pub(crate) fn caught<T>(f: impl FnOnce() -> crate::Result<T>) -> crate::Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(Error::internal(format!("kvengine panicked ({what}); please report this")))
        }
    }
}

pub(crate) fn disposed(what: &str) -> napi::Error<ErrorKind> {
    to_napi(Error::new(ErrorKind::Disposed, format!("this {what} has been disposed; create a new one")))
}
