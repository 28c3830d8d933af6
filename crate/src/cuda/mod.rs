//! The CUDA build (`--features cuda`): our KV-cache attention kernel and the model on the GPU.

pub mod kvattn;
pub mod model;
pub mod store;
