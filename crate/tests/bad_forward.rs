//! Misuse of a loaded model and its KV cache (bad token ids, wrong batch shapes, context
//! overflow, foreign caches, absurd cache sizes): each must come back as an `Err` with the right
//! `ErrorKind`, never as a panic or an abort, and leave the cache as it was.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};

use candle_core::quantized::GgmlDType;
use common::*;
use kvengine::config::{Architecture, ModelConfig, RopeStyle};
use kvengine::{ErrorKind, KvCache, KvType, LogitsFor};

#[test]
fn forward_rejects_bad_tokens_and_overflow_without_touching_the_cache() {
    let tiny = TinyModel::new(11);
    let dir = tempdir();
    let path = dir.path().join("m.gguf");
    tiny.write_gguf(&path, GgmlDType::F32);
    let m = load_ok(&path);
    let vocab = m.model.config.vocab_size as u32;
    let ctx = m.model.config.context_length;
    let mut cache = m.model.new_cache(2, 16).unwrap();
    m.model.forward(&[vec![1, 2, 3], vec![4]], &mut cache, LogitsFor::LastPerRow, None).unwrap();
    assert_eq!(cache.seqlens(), &[3, 1]);

    let forward = |cache: &mut KvCache, batch: &[Vec<u32>]| {
        catch_unwind(AssertUnwindSafe(|| m.model.forward(batch, cache, LogitsFor::All, None)))
            .unwrap_or_else(|p| panic!("forward panicked: {}", panic_message(&*p)))
    };

    for bad in [vocab, vocab + 1, u32::MAX] {
        let err = forward(&mut cache, &[vec![5, bad], vec![6]]).err().expect("out-of-range id must fail");
        assert_eq!(err.kind, ErrorKind::InvalidArgument, "{}", err.message);
        assert!(err.message.contains(&format!("token id {bad}")) && err.message.contains("out of range"), "{}", err.message);
        assert_eq!(cache.seqlens(), &[3, 1], "a rejected pass must not advance any row");
        // The bad id in the second row also leaves the first (valid) row alone.
        let err = forward(&mut cache, &[vec![7], vec![bad]]).err().unwrap();
        assert_eq!(err.kind, ErrorKind::InvalidArgument);
        assert!(err.message.contains("row 1"), "{}", err.message);
        assert_eq!(cache.seqlens(), &[3, 1]);
    }

    // Wrong number of rows.
    let err = forward(&mut cache, &[vec![1]]).err().unwrap();
    assert_eq!(err.kind, ErrorKind::InvalidArgument);
    assert!(err.message.contains("rows"), "{}", err.message);
    assert_eq!(cache.seqlens(), &[3, 1]);

    // Context overflow: row 0 would exceed the 512-token context.
    let long = vec![9u32; ctx - 3 + 1];
    let err = forward(&mut cache, &[long.clone(), vec![1]]).err().unwrap();
    assert_eq!(err.kind, ErrorKind::ContextOverflow, "{}", err.message);
    assert!(err.message.contains(&format!("{}", ctx)) && err.message.contains("row 0"), "{}", err.message);
    assert_eq!(cache.seqlens(), &[3, 1]);
    // Exactly filling the context works, and one more token overflows.
    let out = forward(&mut cache, &[vec![9u32; ctx - 3], vec![]]).unwrap();
    assert_eq!(out.rows.len(), ctx - 3);
    assert_eq!(cache.seqlens(), &[ctx as i32, 1]);
    let err = forward(&mut cache, &[vec![1], vec![]]).err().unwrap();
    assert_eq!(err.kind, ErrorKind::ContextOverflow);
    assert_eq!(cache.seqlens(), &[ctx as i32, 1]);
    // Row 1 still works on its own.
    forward(&mut cache, &[vec![], vec![2, 3]]).unwrap();
    assert_eq!(cache.seqlens(), &[ctx as i32, 3]);

    // A cache from a different model.
    let other = TinyModel::with_spec(12, TinySpec { n_layers: 3, ..TinySpec::default() });
    let other_path = dir.path().join("other.gguf");
    other.write_gguf(&other_path, GgmlDType::F32);
    let other = load_ok(&other_path);
    let mut foreign = other.model.new_cache(2, 16).unwrap();
    let err = forward(&mut foreign, &[vec![1], vec![]]).err().unwrap();
    assert_eq!(err.kind, ErrorKind::InvalidArgument);
    assert!(err.message.contains("different model"), "{}", err.message);
    assert_eq!(foreign.seqlens(), &[0, 0]);

    // Cancellation before the first layer leaves lengths alone too.
    let cancel = std::sync::atomic::AtomicBool::new(true);
    let err = m.model.forward(&[vec![], vec![5]], &mut cache, LogitsFor::All, Some(&cancel)).err().unwrap();
    assert_eq!(err.kind, ErrorKind::Aborted);
    assert_eq!(cache.seqlens(), &[ctx as i32, 3]);
}

fn config_with(n_layers: usize, n_kv_heads: usize, head_dim: usize, context_length: usize) -> ModelConfig {
    ModelConfig {
        architecture: Architecture::Llama,
        vocab_size: 10,
        hidden_size: 8,
        intermediate_size: 8,
        n_layers,
        n_heads: n_kv_heads,
        n_kv_heads,
        head_dim,
        rms_norm_eps: 1e-5,
        rope_theta: 10_000.0,
        rope_style: RopeStyle::Interleaved,
        rope_freq_factors: Vec::new(),
        context_length,
        tie_word_embeddings: true,
        variant: Default::default(),
    }
}

#[test]
fn absurd_kv_cache_dims_are_errors_not_aborts() {
    let new = |cfg: &ModelConfig, batch: usize, cap: usize| {
        catch_unwind(AssertUnwindSafe(|| KvCache::new(cfg, batch, cap, KvType::F32)))
            .unwrap_or_else(|p| panic!("KvCache::new panicked: {}", panic_message(&*p)))
    };
    let small = config_with(2, 2, 16, 512);
    for batch in [0, 4097, usize::MAX] {
        let err = new(&small, batch, 16).err().expect("bad batch");
        assert_eq!(err.kind, ErrorKind::InvalidArgument);
        assert!(err.message.contains("batch size"), "{}", err.message);
    }
    // The element count overflows usize.
    let overflow = config_with(1 << 10, 1 << 20, 1 << 20, 1 << 22);
    let err = new(&overflow, 4096, 1 << 22).err().expect("overflowing dims");
    assert_eq!(err.kind, ErrorKind::InvalidArgument);
    assert!(err.message.contains("too large"), "{}", err.message);
    // Representable, but 128 TiB per buffer: the allocation fails and is reported.
    let huge = config_with(32, 256, 1024, 1 << 22);
    let err = new(&huge, 1, 1 << 22).err().expect("128 TiB cache");
    assert_eq!(err.kind, ErrorKind::InvalidArgument);
    assert!(err.message.contains("could not allocate") || err.message.contains("too large"), "{}", err.message);
    // Growth past the model context is an overflow.
    let mut cache = new(&small, 1, 16).unwrap();
    assert_eq!(cache.ensure_capacity(513).unwrap_err().kind, ErrorKind::ContextOverflow);
    // Growth to 4 TiB per buffer fails and keeps the old buffers. Only meaningful where the
    // kernel refuses obvious overcommits (mode 0 or 2): with mode 1 the mapping would succeed.
    // The starting buffers are 256 MiB each (a cache touches its pages when it is made).
    let overcommit = std::fs::read_to_string("/proc/sys/vm/overcommit_memory").unwrap_or_default();
    if overcommit.trim() != "1" {
        let mut grow = new(&config_with(1, 64, 1024, 1 << 24), 1, 1024).unwrap_or_else(|e| panic!("{}", e.message));
        assert_eq!(grow.capacity(), 1024);
        let err = grow.ensure_capacity(1 << 24).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidArgument, "{}", err.message);
        assert!(err.message.contains("could not allocate"), "{}", err.message);
        assert_eq!(grow.capacity(), 1024, "a failed growth keeps the old buffers");
    }
    cache.ensure_capacity(512).unwrap();
    assert_eq!(cache.capacity(), 512);
}
