//! A tiny random-weight Llama model (GQA, byte-level BPE tokenizer, ChatML template) that can be
//! written both as a GGUF file and as a Hugging Face checkpoint directory, so tests can check that
//! every loader path produces the same model.
//!
//! Shapes: vocab 282 (256 byte-level symbols + merges + 3 control tokens), hidden 64, 2 layers,
//! 4 query heads / 2 KV heads of dim 16, FFN 128, context 512.
//!
//! Weights are stored here in Hugging Face layout (RoPE pairs (i, i + d/2)). The GGUF writer
//! applies llama.cpp's `permute` to the Q/K rows, exactly as `convert_hf_to_gguf.py` does, so the
//! interleaved-RoPE GGUF model and the half-split-RoPE HF model compute the same function.

// Every test binary compiles this module, and none uses all of it.
#![allow(dead_code)]

mod rng;
mod tiny_model;
mod write_gguf;
mod write_hf;

pub use rng::Rng;
pub use tiny_model::*;
// A binary that only calls the methods these modules add to `TinyModel` uses no name from them.
#[allow(unused_imports)]
pub use write_gguf::*;
#[allow(unused_imports)]
pub use write_hf::*;

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use candle_core::quantized::GgmlDType;
use kvengine::ErrorKind;

pub fn load(path: &Path) -> kvengine::Result<kvengine::LoadedModel> {
    kvengine::load(path, &mut |_| {})
}

pub fn load_ok(path: &Path) -> kvengine::LoadedModel {
    load(path).unwrap_or_else(|e| panic!("loading {} failed: {:?}: {}", path.display(), e.kind, e.message))
}

/// The text of a panic payload. Takes `&dyn Any` so callers holding a `Box` must pass `&*boxed`:
/// a `&Box<dyn Any>` would coerce to the box itself and always read as non-string.
pub fn panic_message(p: &(dyn Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "<non-string panic>".into())
}

/// Loads `path` expecting an error of `kind` whose message contains every one of `needles`.
/// A panic fails the test with the panic message rather than unwinding through it.
#[track_caller]
pub fn expect_err(path: &Path, kind: ErrorKind, needles: &[&str]) -> kvengine::Error {
    let result = catch_unwind(AssertUnwindSafe(|| load(path)));
    let err = match result {
        Err(panic) => panic!("loading {} panicked: {}", path.display(), panic_message(&*panic)),
        Ok(Ok(_)) => panic!("loading {} succeeded, expected {kind:?}", path.display()),
        Ok(Err(e)) => e,
    };
    assert_eq!(err.kind, kind, "wrong kind for {}: {}", path.display(), err.message);
    for needle in needles {
        assert!(err.message.contains(needle), "message for {} lacks {needle:?}: {}", path.display(), err.message);
    }
    err
}

pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "length mismatch");
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

pub fn argmax(v: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best
}

/// A fresh temp dir under the system temp dir, removed on drop.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("kvengine-test-").tempdir().unwrap()
}

/// Paths of a ready-made set of files for one seed.
pub struct Written {
    pub dir: tempfile::TempDir,
    pub gguf: PathBuf,
    pub gguf_q8: PathBuf,
    pub hf: PathBuf,
    pub hf_sharded: PathBuf,
}

pub fn write_all(model: &TinyModel) -> Written {
    let dir = tempdir();
    let gguf = dir.path().join("tiny.f32.gguf");
    let gguf_q8 = dir.path().join("tiny.q8_0.gguf");
    let hf = dir.path().join("hf");
    let hf_sharded = dir.path().join("hf-sharded");
    model.write_gguf(&gguf, GgmlDType::F32);
    model.write_gguf(&gguf_q8, GgmlDType::Q8_0);
    model.write_hf_dir(&hf);
    model.write_hf_sharded(&hf_sharded, 3);
    Written { dir, gguf, gguf_q8, hf, hf_sharded }
}
