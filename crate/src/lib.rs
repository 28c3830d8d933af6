//! kvengine: KV-cached LLM inference on candle.
//!
//! The engine is free of Node: `cargo test`/`cargo bench` use it directly, and the `node`
//! feature adds the N-API bindings in `node/`.

// Kernels index several arrays with one lane or row number; iterator chains would hide that.
#![allow(clippy::needless_range_loop)]

/// The allocator our own binaries install (the Node addon, examples, benches). Every pass
/// allocates activations of a few MB per op; glibc hands blocks that size back to the kernel
/// when they are freed, so each op faulted in fresh zeroed pages (300k faults in a 512-token
/// prefill, which ran 1.7x slower for it). mimalloc keeps freed pages for reuse. The library
/// itself installs nothing, so tests can count allocations with their own.
pub use mimalloc::MiMalloc as Allocator;

pub mod any_model;
pub mod attention;
pub mod candidates;
pub mod chat_template;
pub mod config;
pub mod convert;
pub mod cpu_features;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod error;
pub mod forward;
pub mod gguf;
pub mod kv_cache;
pub mod kvattn;
pub mod loader;
pub mod matmul;
pub mod memory;
pub mod model;
pub mod nanochat;
pub mod nanogpt;
pub mod pass_queue;
pub mod placement;
pub mod rope;
pub mod safetensors_dir;
pub mod tokenizer;
mod unfused;
pub mod weights;

#[cfg(feature = "node")]
mod node;

pub use any_model::LanguageModel;
pub use error::{Error, ErrorKind, Result};
pub use kv_cache::{KvCache, KvType};
pub use loader::{load, load_on, LoadedModel};
pub use model::{ForwardOutput, LogitsFor, Model};
pub use placement::Placement;
