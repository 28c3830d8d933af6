//! Random-weight Qwen2, Qwen3, Phi-3, Llama 3.2 and GPT-2 GGUFs with the real layer shapes of
//! Qwen2.5-0.5B, Qwen3-0.6B, Phi-3-mini-4k, Llama-3.2-1B and GPT-2 124M (scripts/archModels.ts; `npm test` writes them through
//! scripts/prepare-test-models.mjs): the metadata resolves to each family's block, and the fast
//! path (KV cache, our kernels) agrees with the cache-free reference path, which applies the
//! biases and QK norms with candle's tensor ops, for a prompt in one pass and for tokens decoded
//! one at a time after it. Phi-3's fused matrices reach both paths already split.
//! Agreement with llama.cpp itself is __test__/architectures.spec.ts.

mod common;

use std::path::PathBuf;

use candle_core::quantized::gguf_file::Content;
use candle_core::Device;
use common::{argmax, tempdir, write_json, write_safetensors, TinyModel};
use kvengine::config::{Activation, Architecture, RopeStyle};
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

#[test]
fn gpt2_resolves_to_learned_positions_layer_norm_and_biases() {
    let c = load("gpt2").model.config;
    assert_eq!(c.architecture, Architecture::Gpt2);
    assert_eq!((c.hidden_size, c.n_heads, c.head_dim, c.intermediate_size, c.context_length), (768, 12, 64, 3072, 1024));
    let v = &c.variant;
    assert!(v.learned_positions && v.layer_norm && v.plain_mlp && v.biases && v.activation == Activation::GeluTanh);
    assert!(!v.is_plain() && !c.tie_word_embeddings);
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
fn gpt2_fast_path_matches_reference_in_prefill_and_decode() {
    fast_path_matches_reference("gpt2");
}

#[test]
fn phi3_fast_path_matches_reference_in_prefill_and_decode() {
    fast_path_matches_reference("phi3");
}

/// Llama 3.2 1B's rope_scaling in config.json resolves to the divisors its GGUF stores in
/// rope_freqs.weight (scripts/archModels.ts writes them as llama.cpp's converter does), so a
/// Hugging Face directory and a GGUF of the same model rotate alike; the GGUF's are checked
/// against llama.cpp past the original 8192 positions in __test__/architectures.spec.ts.
#[test]
fn llama3_rope_scaling_from_config_json_equals_the_gguf_divisors() {
    let gguf = load("llama32").model.config;
    let json = r#"{
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 49152,
        "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 2,
        "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
        "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "max_position_embeddings": 131072,
        "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "tie_word_embeddings": true
    }"#;
    let hf = serde_json::from_str::<kvengine::config::HfConfig>(json).unwrap().resolve().unwrap();
    assert_eq!(gguf.rope_freq_factors.len(), 32);
    assert_eq!(hf.rope_freq_factors.len(), 32);
    for (i, (a, b)) in gguf.rope_freq_factors.iter().zip(&hf.rope_freq_factors).enumerate() {
        assert!((a - b).abs() <= 1e-5 * a.abs(), "frequency {i}: GGUF {a}, config.json {b}");
    }
    // Scaled at all: the lowest frequencies are divided by the full factor.
    assert_eq!(hf.rope_freq_factors[31], 32.0);
    assert_eq!(hf.rope_freq_factors[0], 1.0);
}

/// The random GGUF's weights as a Hugging Face directory: safetensors under Hugging Face's names
/// (llama.cpp's converter leaves Qwen's Q/K rows as they are, so nothing is permuted), a
/// config.json of the same shape, and the tiny model's tokenizer.json (the test feeds ids).
fn hf_dir_of(name: &str, model_type: &str) -> tempfile::TempDir {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../models/random-{name}.F32.gguf"));
    let mut file = std::fs::File::open(&path).expect("the random model (npm test writes it)");
    let content = Content::read(&mut file).unwrap();
    let c = load(name).model.config;
    let tensors: Vec<(String, Vec<usize>, Vec<f32>)> = content
        .tensor_infos
        .keys()
        .map(|gguf| {
            let t = content.tensor(&mut file, gguf, &Device::Cpu).unwrap().dequantize(&Device::Cpu).unwrap();
            (common::hf_name(gguf), t.dims().to_vec(), t.flatten_all().unwrap().to_vec1::<f32>().unwrap())
        })
        .collect();
    let dir = tempdir();
    write_safetensors(&dir.path().join("model.safetensors"), &tensors);
    let config = serde_json::json!({
        "model_type": model_type, "vocab_size": c.vocab_size, "hidden_size": c.hidden_size,
        "intermediate_size": c.intermediate_size, "num_hidden_layers": c.n_layers,
        "num_attention_heads": c.n_heads, "num_key_value_heads": c.n_kv_heads, "head_dim": c.head_dim,
        "rms_norm_eps": c.rms_norm_eps, "rope_theta": c.rope_theta, "max_position_embeddings": c.context_length,
        "tie_word_embeddings": false,
    });
    write_json(&dir.path().join("config.json"), &config);
    TinyModel::new(1).hf_tokenizer().save(dir.path().join("tokenizer.json"), false).unwrap();
    dir
}

/// The Hugging Face directory of `name` against llama.cpp's F32 fixture for its GGUF
/// (scripts/make-arch-fixtures.ts): the prompt's rows and the rows after each of llama.cpp's
/// greedy tokens, on llama.cpp's top 8 logits and the log-sum-exp, and the greedy choices.
fn hf_dir_matches_llama_cpp(name: &str, model_type: &str) {
    let dir = hf_dir_of(name, model_type);
    let m = kvengine::load(dir.path(), &mut |_| {}).unwrap_or_else(|e| panic!("load the {name} directory: {e}"));
    assert_eq!(m.format, "safetensors");
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../__test__/fixtures/llamacpp-arch-{name}.json"));
    let fx: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let ids = |v: &serde_json::Value| v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect::<Vec<_>>();
    let (prompt, f32_file) = (ids(&fx["prompt"]), &fx["files"][0]);
    assert_eq!((fx["rowsFrom"].as_u64(), f32_file["type"].as_str()), (Some(0), Some("F32")));
    let greedy = ids(&f32_file["greedy"]);
    let vocab = m.model.config.vocab_size;
    let mut cache = m.model.new_cache_as(1, prompt.len() + greedy.len(), KvType::F32).unwrap();
    let mut rows: Vec<Vec<f32>> = m
        .model
        .forward(std::slice::from_ref(&prompt), &mut cache, LogitsFor::All, None)
        .unwrap()
        .logits
        .chunks(vocab)
        .map(<[f32]>::to_vec)
        .collect();
    for &t in &greedy[..greedy.len() - 1] {
        rows.push(m.model.forward(&[vec![t]], &mut cache, LogitsFor::LastPerRow, None).unwrap().logits);
    }
    let reference = f32_file["rows"].as_array().unwrap();
    assert_eq!(rows.len(), reference.len());
    let mut worst = 0f32;
    for (row, r) in rows.iter().zip(reference) {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let lse = max + row.iter().map(|v| (v - max).exp()).sum::<f32>().ln();
        worst = worst.max((lse - r["lse"].as_f64().unwrap() as f32).abs());
        for top in r["top"].as_array().unwrap() {
            let (id, logit) = (top[0].as_u64().unwrap() as usize, top[1].as_f64().unwrap() as f32);
            worst = worst.max((row[id] - logit).abs());
        }
    }
    let ours: Vec<u32> = rows[prompt.len() - 1..].iter().map(|r| argmax(r) as u32).collect();
    eprintln!("{name} from a Hugging Face directory: largest difference from llama.cpp {worst:.2e}");
    assert!(worst < 2e-3, "{name}: {worst}");
    assert_eq!(ours, greedy, "{name}: greedy choices");
}

#[test]
fn qwen2_from_a_hugging_face_directory_matches_llama_cpp() {
    hf_dir_matches_llama_cpp("qwen2", "qwen2");
}

#[test]
fn qwen3_from_a_hugging_face_directory_matches_llama_cpp() {
    hf_dir_matches_llama_cpp("qwen3", "qwen3");
}
