//! How a forward pass's promise is settled from the pool thread: through one threadsafe function
//! per JS thread, made once. napi-rs's `create_deferred` makes a threadsafe function per promise
//! and closes it after, each with its own async resource and libuv handle; on a decode loop that
//! is every step, and right after a pass has streamed the weights through the caches, that work
//! ran cold (2 vCPU VM: ~7 µs to make warm, and the settle path was the largest part of the
//! ~0.2 ms a step spent outside the engine).
//!
//! The function is unreferenced while no promise is pending, so an idle model does not keep
//! Node's event loop alive, and referenced while one is, so a pending pass always settles.

use std::cell::Cell;
use std::ffi::c_void;
use std::ptr;

use napi::bindgen_prelude::{Object, ToNapiValue};
use napi::{sys, Env};

use super::{napi_failed, Result};
use crate::error::{Error, ErrorKind};

/// What makes a promise's value (or its error) on the JS thread.
type Job = Box<dyn FnOnce(sys::napi_env) -> Result<sys::napi_value> + Send>;
/// A job with the promise it settles, as queued to the JS thread.
type Settle = Box<dyn FnOnce(sys::napi_env) + Send>;

thread_local! {
    /// This JS thread's function, made on its first promise and forgotten when Node tears the
    /// environment down.
    static CHANNEL: Cell<sys::napi_threadsafe_function> = const { Cell::new(ptr::null_mut()) };
    /// Promises made on this thread and not yet settled.
    static PENDING: Cell<usize> = const { Cell::new(0) };
}

/// The pending side of one promise. Settled once, from any thread; dropped unsettled (a pass that
/// panicked past its guard) it rejects, so no promise is left hanging.
pub struct Settlement {
    deferred: sys::napi_deferred,
    channel: sys::napi_threadsafe_function,
    settled: bool,
}

// SAFETY: the raw handles are only used on the JS thread (in `call_js`) or through the
// thread-safe calls N-API allows from any thread.
unsafe impl Send for Settlement {}

impl Settlement {
    /// A new promise and its settlement; on the JS thread.
    pub fn new(env: &Env) -> Result<(Self, Object<'_>)> {
        let channel = channel(env)?;
        let (mut deferred, mut promise) = (ptr::null_mut(), ptr::null_mut());
        check(unsafe { sys::napi_create_promise(env.raw(), &mut deferred, &mut promise) }, "create a promise")?;
        // The pool thread holds the function until it has queued its result, so an environment
        // torn down meanwhile cannot free it under that thread.
        check(unsafe { sys::napi_acquire_threadsafe_function(channel) }, "acquire the settling function")?;
        if PENDING.replace(PENDING.get() + 1) == 0 {
            check(unsafe { sys::napi_ref_threadsafe_function(env.raw(), channel) }, "reference the settling function")?;
        }
        Ok((Self { deferred, channel, settled: false }, Object::from_raw(env.raw(), promise)))
    }

    /// Resolves with what `value` makes on the JS thread, or rejects with its error.
    pub fn settle<T: ToNapiValue>(mut self, value: impl FnOnce() -> Result<T> + Send + 'static) {
        self.settled = true;
        self.queue(Box::new(move |env| {
            let made = std::panic::catch_unwind(std::panic::AssertUnwindSafe(value))
                .unwrap_or_else(|_| Err(internal("kvengine panicked while building a result; please report this")));
            // SAFETY: on the JS thread, inside the handle scope Node opens for `call_js`.
            made.and_then(|v| unsafe { T::to_napi_value(env, v) }.map_err(napi_failed))
        }));
    }

    /// Hands `job` to the JS thread, which settles this promise with what it returns.
    fn queue(&self, job: Job) {
        let deferred = self.deferred as usize;
        let settle: Settle = Box::new(move |env| {
            let deferred = deferred as sys::napi_deferred;
            // SAFETY: on the JS thread, inside the handle scope Node opens for `call_js`.
            unsafe {
                match job(env) {
                    Ok(value) => sys::napi_resolve_deferred(env, deferred, value),
                    Err(e) => sys::napi_reject_deferred(env, deferred, napi::Error::to_napi_value(env, e).unwrap_or(ptr::null_mut())),
                };
            }
        });
        let data = Box::into_raw(Box::new(settle));
        let status = unsafe { sys::napi_call_threadsafe_function(self.channel, data.cast(), sys::ThreadsafeFunctionCallMode::nonblocking) };
        if status != sys::Status::napi_ok {
            // The environment is closing: there is no promise left to settle, and the job's
            // values belong to that environment, so they are not dropped here.
            std::mem::forget(unsafe { Box::from_raw(data) });
        }
        unsafe { sys::napi_release_threadsafe_function(self.channel, sys::ThreadsafeFunctionReleaseMode::release) };
    }
}

impl Drop for Settlement {
    fn drop(&mut self) {
        if !self.settled {
            self.queue(Box::new(|_| Err(internal("the forward pass ended without a result; please report this"))));
        }
    }
}

/// This thread's settling function, made on first use.
fn channel(env: &Env) -> Result<sys::napi_threadsafe_function> {
    let made = CHANNEL.get();
    if !made.is_null() {
        return Ok(made);
    }
    let mut name = ptr::null_mut();
    check(
        unsafe { sys::napi_create_string_utf8(env.raw(), c"kvengine forward pass".as_ptr(), -1, &mut name) },
        "name the settling function",
    )?;
    let mut channel = ptr::null_mut();
    check(
        unsafe {
            sys::napi_create_threadsafe_function(
                env.raw(),
                ptr::null_mut(),
                ptr::null_mut(),
                name,
                0,
                1,
                ptr::null_mut(),
                Some(forget_channel),
                ptr::null_mut(),
                Some(call_js),
                &mut channel,
            )
        },
        "create the settling function",
    )?;
    check(unsafe { sys::napi_unref_threadsafe_function(env.raw(), channel) }, "unreference the settling function")?;
    CHANNEL.set(channel);
    Ok(channel)
}

unsafe extern "C" fn call_js(env: sys::napi_env, _callback: sys::napi_value, _context: *mut c_void, data: *mut c_void) {
    let settle = unsafe { Box::from_raw(data.cast::<Settle>()) };
    if env.is_null() {
        // Teardown drains the queue without an environment; see `queue`.
        std::mem::forget(settle);
        return;
    }
    settle(env);
    let left = PENDING.get().saturating_sub(1);
    PENDING.set(left);
    if left == 0 {
        let channel = CHANNEL.get();
        if !channel.is_null() {
            unsafe { sys::napi_unref_threadsafe_function(env, channel) };
        }
    }
}

unsafe extern "C" fn forget_channel(_env: sys::napi_env, _data: *mut c_void, _hint: *mut c_void) {
    CHANNEL.set(ptr::null_mut());
    PENDING.set(0);
}

fn check(status: sys::napi_status, what: &str) -> Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(internal(&format!("could not {what} (N-API status {status})")))
    }
}

fn internal(message: &str) -> napi::Error<ErrorKind> {
    super::to_napi(Error::internal(message))
}
