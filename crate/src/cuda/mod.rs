//! The GPU side: our KV-cache attention op (`kvattn`, whose CPU semantics and tests build
//! everywhere, so they run without a GPU) and, with the `cuda` feature, its kernel's launcher,
//! the GPU store and the model on the GPU.

pub mod kvattn;
#[cfg(feature = "cuda")]
pub mod model;
#[cfg(feature = "cuda")]
pub mod store;
