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

// The API: loading, the model and its cache, formats, tokenizers and the kernels the benches
// and tests drive directly.
pub mod any_model;
pub mod attention;
pub mod chat_template;
pub mod config;
pub mod convert;
pub mod cuda;
pub mod error;
pub mod exp;
pub mod gguf;
pub mod grammar;
pub mod kv_cache;
pub mod matmul;
pub mod model;
pub mod nanochat;
pub mod placement;
pub mod rope;
pub mod tokenizer;
pub mod weights;

// The engine's own parts.
mod candidates;
mod cpu_features;
mod forward;
mod loader;
mod memory;
mod nanogpt;
/// Orders a cache's passes for the binding; built for its unit tests too.
#[cfg(any(feature = "node", test))]
mod pass_queue;
mod safetensors_dir;
mod unfused;

#[cfg(feature = "node")]
mod node;

pub use any_model::LanguageModel;
pub use error::{Error, ErrorKind, Result};
pub use kv_cache::{KvCache, KvType};
pub use loader::{load, load_on, LoadedModel};
pub use model::{ForwardOutput, LogitsFor, Model};
pub use placement::Placement;
