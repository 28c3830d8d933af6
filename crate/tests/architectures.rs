//! Random-weight Qwen2, Qwen3 and Phi-3 GGUFs with the real layer shapes of Qwen2.5-0.5B,
//! Qwen3-0.6B and Phi-3-mini-4k (scripts/archModels.ts; `npm test` writes them through
//! scripts/prepare-test-models.mjs): the metadata resolves to each family's block, and the fast
//! path (KV cache, our kernels) agrees with the cache-free reference path, which applies the
//! biases and QK norms with candle's tensor ops, for a prompt in one pass and for tokens decoded
//! one at a time after it. Phi-3's fused matrices reach both paths already split.
//! Agreement with llama.cpp itself is __test__/architectures.spec.ts.

use std::path::PathBuf;

use kvengine::config::{Architecture, RopeStyle};
use kvengine::{KvType, LoadedModel, LogitsFor};

fn load(name: &str) -> LoadedModel {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../models/random-{name}.F32.gguf"));
    assert!(path.exists(), "{} is missing: run `node scripts/prepare-test-models.mjs` (npm test does) before cargo test", path.display());
    kvengine::load(&path, &mut |_| {}).expect("load the random model")
}

#[test]
fn qwen3_resolves_to_qk_norms_without_bias() {
    let c = load("qwen3").model.config;
    assert_eq!(c.architecture, Architecture::Qwen3);
    // head_dim comes from key_length: 128, not hidden / heads = 64.
    assert_eq!((c.hidden_size, c.n_heads, c.n_kv_heads, c.head_dim, c.intermediate_size), (1024, 16, 8, 128, 3072));
    assert_eq!(c.rope_style, RopeStyle::HalfSplit);
    assert!(c.variant.qk_norm && !c.variant.post_norms);
    assert!(!c.architecture.has_qkv_bias());
}

#[test]
fn qwen2_resolves_to_qkv_bias_without_norms() {
    let c = load("qwen2").model.config;
    assert_eq!(c.architecture, Architecture::Qwen2);
    assert_eq!((c.hidden_size, c.n_heads, c.n_kv_heads, c.head_dim), (896, 14, 2, 64));
    assert!(c.architecture.has_qkv_bias() && c.variant.is_plain());
}

#[test]
fn phi3_resolves_to_llamas_block_with_neox_rope() {
    let c = load("phi3").model.config;
    assert_eq!(c.architecture, Architecture::Phi3);
    assert_eq!((c.hidden_size, c.n_heads, c.n_kv_heads, c.head_dim, c.intermediate_size), (3072, 32, 32, 96, 8192));
    assert_eq!(c.rope_style, RopeStyle::HalfSplit);
    assert!(c.variant.is_plain() && !c.architecture.has_qkv_bias() && !c.tie_word_embeddings);
}

/// 24 ids: the first 16 in one pass, then 8 one at a time; every row against the reference.
fn fast_path_matches_reference(name: &str) {
    let m = load(name).model;
    let vocab = m.config.vocab_size;
    let ids: Vec<u32> = (0..24u32).map(|i| (i * 7919 + 13) % vocab as u32).collect();
    let mut cache = m.new_cache_as(1, ids.len(), KvType::F32).unwrap();
    let mut fast = m.forward(&[ids[..16].to_vec()], &mut cache, LogitsFor::All, None).unwrap().logits;
    for &id in &ids[16..] {
        fast.extend(m.forward(&[vec![id]], &mut cache, LogitsFor::All, None).unwrap().logits);
    }
    let reference = m.forward_reference(&ids).unwrap();
    assert_eq!(fast.len(), reference.len());
    let diff = fast.iter().zip(&reference).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
    // Both are f32 throughout; they differ only in summation order (logits span about ±15).
    assert!(diff < 1e-3, "{name}: max |fast - reference| = {diff}");
}

#[test]
fn qwen3_fast_path_matches_reference_in_prefill_and_decode() {
    fast_path_matches_reference("qwen3");
}

#[test]
fn qwen2_fast_path_matches_reference_in_prefill_and_decode() {
    fast_path_matches_reference("qwen2");
}

#[test]
fn phi3_fast_path_matches_reference_in_prefill_and_decode() {
    fast_path_matches_reference("phi3");
}
