use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use napi_derive::napi;

/// Set from JS when an AbortSignal fires; a running forward pass checks it between layers.
#[napi]
pub struct NativeCancelToken {
    pub(crate) flag: Arc<AtomicBool>,
}

#[napi]
impl NativeCancelToken {
    #[napi(constructor)]
    pub fn new() -> Self {
        Self { flag: Arc::new(AtomicBool::new(false)) }
    }

    #[napi]
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::Relaxed);
    }

    #[napi(getter)]
    pub fn cancelled(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }
}
