//! Malformed models and arguments: each must come back as an `Err` with the right `ErrorKind` and a
//! message that says what is wrong, never as a panic.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use candle_core::quantized::gguf_file::Value;
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use common::*;
use kvengine::config::{Architecture, ModelConfig, RopeStyle};
use kvengine::{ErrorKind, KvCache, LogitsFor};

/// Loads `path` expecting an error of `kind` whose message contains every one of `needles`.
/// A panic fails the test with the panic message rather than unwinding through it.
#[track_caller]
fn expect_err(path: &Path, kind: ErrorKind, needles: &[&str]) -> kvengine::Error {
    let result = catch_unwind(AssertUnwindSafe(|| load(path)));
    let err = match result {
        Err(panic) => panic!("loading {} panicked: {}", path.display(), panic_message(&panic)),
        Ok(Ok(_)) => panic!("loading {} succeeded, expected {kind:?}", path.display()),
        Ok(Err(e)) => e,
    };
    assert_eq!(err.kind, kind, "wrong kind for {}: {}", path.display(), err.message);
    for needle in needles {
        assert!(err.message.contains(needle), "message for {} lacks {needle:?}: {}", path.display(), err.message);
    }
    err
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_else(|| "<non-string panic>".into())
}

fn set_meta(meta: &mut Vec<(String, Value)>, key: &str, value: Value) {
    match meta.iter_mut().find(|(k, _)| k == key) {
        Some(slot) => slot.1 = value,
        None => meta.push((key.to_string(), value)),
    }
}

fn write_gguf_with(dir: &Path, name: &str, tiny: &TinyModel, edit: impl FnOnce(&mut Vec<(String, Value)>, &mut Vec<(String, QTensor)>)) -> std::path::PathBuf {
    let mut meta = tiny.gguf_metadata();
    let mut tensors = tiny.gguf_tensors(GgmlDType::F32);
    edit(&mut meta, &mut tensors);
    let path = dir.join(name);
    write_gguf_parts(&path, &meta, &tensors);
    path
}

/// Offset where GGUF tensor data starts in a file written by candle (32-byte aligned after the
/// tensor infos): found by locating the first tensor's bytes.
fn tensor_data_offset(bytes: &[u8], tiny: &TinyModel, first: &str) -> usize {
    let data: Vec<u8> = tiny.tensor(first).data.iter().take(8).flat_map(|x| x.to_le_bytes()).collect();
    bytes.windows(data.len()).position(|w| w == data.as_slice()).expect("first tensor's data")
}

// ------------------------------------------------------------------------------ paths

#[test]
fn missing_path_is_not_found() {
    let dir = tempdir();
    let path = dir.path().join("does-not-exist.gguf");
    expect_err(&path, ErrorKind::NotFound, &["cannot open model", "does-not-exist.gguf"]);
}

#[test]
fn directory_without_safetensors_is_not_found() {
    let dir = tempdir();
    expect_err(dir.path(), ErrorKind::NotFound, &["no .safetensors files"]);
    // Config and tokenizer alone are not a checkpoint either.
    TinyModel::new(1).write_hf_side_files(dir.path());
    expect_err(dir.path(), ErrorKind::NotFound, &["no .safetensors files"]);
}

#[test]
fn hf_dir_missing_config_or_tokenizer() {
    let tiny = TinyModel::new(1);
    let dir = tempdir();
    tiny.write_hf_dir(dir.path());
    std::fs::remove_file(dir.path().join("tokenizer.json")).unwrap();
    expect_err(dir.path(), ErrorKind::NotFound, &["tokenizer.json", "missing"]);
    tiny.write_hf_dir(dir.path());
    std::fs::remove_file(dir.path().join("config.json")).unwrap();
    expect_err(dir.path(), ErrorKind::NotFound, &["config.json"]);
}

// ------------------------------------------------------------------------------ GGUF

#[test]
fn truncated_gguf_is_corrupt() {
    let tiny = TinyModel::new(2);
    let bytes = tiny.gguf_bytes(GgmlDType::F32);
    let data_start = tensor_data_offset(&bytes, &tiny, "token_embd.weight");
    let dir = tempdir();
    let path = dir.path().join("cut.gguf");
    // (cut length, a phrase the message must contain)
    let cuts: Vec<(usize, &str)> = vec![
        (0, "not a valid GGUF file"),
        (3, "not a valid GGUF file"),             // inside the magic
        (10, "not a valid GGUF file"),            // inside the tensor count
        (24, "not a valid GGUF file"),            // right after the counts
        (60, "not a valid GGUF file"),            // inside the first metadata key/value
        (1500, "not a valid GGUF file"),          // inside the token list
        (data_start - 40, "not a valid GGUF file"), // inside the tensor infos
        (data_start + 100, "does not fit in the file"), // inside the first tensor's data
        (bytes.len() / 2, "does not fit in the file"),
        (bytes.len() - 1, "does not fit in the file"), // the last byte of the last tensor
    ];
    for (cut, phrase) in cuts {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let err = expect_err(&path, ErrorKind::CorruptFile, &[phrase]);
        assert!(err.message.contains("cut.gguf"), "message should name the file: {}", err.message);
    }
    // Every cut inside the header region, byte by byte near its end, fails cleanly.
    for cut in (data_start.saturating_sub(300)..data_start).step_by(7) {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        expect_err(&path, ErrorKind::CorruptFile, &[]);
    }
}

#[test]
fn not_a_gguf_file_is_corrupt() {
    let dir = tempdir();
    let path = dir.path().join("junk.gguf");
    std::fs::write(&path, b"this is a text file, not a model\n".repeat(10)).unwrap();
    expect_err(&path, ErrorKind::CorruptFile, &["not a valid GGUF file", "magic"]);
}

#[test]
fn unknown_architecture_is_unsupported() {
    let tiny = TinyModel::new(3);
    let dir = tempdir();
    let path = write_gguf_with(dir.path(), "mamba.gguf", &tiny, |meta, _| {
        set_meta(meta, "general.architecture", Value::String("mamba".into()));
    });
    expect_err(&path, ErrorKind::Unsupported, &["architecture 'mamba'"]);
    // A non-string architecture is corrupt, not unsupported.
    let path = write_gguf_with(dir.path(), "numeric-arch.gguf", &tiny, |meta, _| {
        set_meta(meta, "general.architecture", Value::U32(7));
    });
    expect_err(&path, ErrorKind::CorruptFile, &["general.architecture"]);
}

#[test]
fn gguf_tensor_with_wrong_shape_is_corrupt() {
    let tiny = TinyModel::new(4);
    let dir = tempdir();
    let path = write_gguf_with(dir.path(), "shape.gguf", &tiny, |_, tensors| {
        let slot = tensors.iter_mut().find(|(n, _)| n == "blk.1.attn_k.weight").unwrap();
        let t = Tensor::zeros((64, 64), candle_core::DType::F32, &Device::Cpu).unwrap();
        slot.1 = QTensor::quantize(&t, GgmlDType::F32).unwrap();
    });
    expect_err(&path, ErrorKind::CorruptFile, &["blk.1.attn_k.weight", "[64, 64]", "[32, 64]"]);
    // A transposed matrix.
    let path = write_gguf_with(dir.path(), "transposed.gguf", &tiny, |_, tensors| {
        let slot = tensors.iter_mut().find(|(n, _)| n == "blk.0.ffn_down.weight").unwrap();
        let t = Tensor::zeros((128, 64), candle_core::DType::F32, &Device::Cpu).unwrap();
        slot.1 = QTensor::quantize(&t, GgmlDType::F32).unwrap();
    });
    expect_err(&path, ErrorKind::CorruptFile, &["blk.0.ffn_down.weight", "[128, 64]", "[64, 128]"]);
    // A norm that is a matrix.
    let path = write_gguf_with(dir.path(), "norm.gguf", &tiny, |_, tensors| {
        let slot = tensors.iter_mut().find(|(n, _)| n == "output_norm.weight").unwrap();
        let t = Tensor::ones((2, 64), candle_core::DType::F32, &Device::Cpu).unwrap();
        slot.1 = QTensor::quantize(&t, GgmlDType::F32).unwrap();
    });
    expect_err(&path, ErrorKind::CorruptFile, &["output_norm.weight", "[2, 64]"]);
}

#[test]
fn gguf_missing_pieces_are_reported() {
    let tiny = TinyModel::new(5);
    let dir = tempdir();
    let path = write_gguf_with(dir.path(), "no-ffn.gguf", &tiny, |_, tensors| tensors.retain(|(n, _)| n != "blk.1.ffn_up.weight"));
    expect_err(&path, ErrorKind::CorruptFile, &["blk.1.ffn_up.weight"]);
    let path = write_gguf_with(dir.path(), "no-embd.gguf", &tiny, |_, tensors| tensors.retain(|(n, _)| n != "token_embd.weight"));
    expect_err(&path, ErrorKind::CorruptFile, &["token_embd.weight"]);
    let path = write_gguf_with(dir.path(), "no-heads.gguf", &tiny, |meta, _| meta.retain(|(k, _)| k != "llama.attention.head_count"));
    expect_err(&path, ErrorKind::CorruptFile, &["llama.attention.head_count"]);
    let path = write_gguf_with(dir.path(), "no-tokenizer.gguf", &tiny, |meta, _| meta.retain(|(k, _)| !k.starts_with("tokenizer.ggml.model")));
    expect_err(&path, ErrorKind::Unsupported, &["tokenizer model"]);
    let path = write_gguf_with(dir.path(), "no-tokens.gguf", &tiny, |meta, _| meta.retain(|(k, _)| k != "tokenizer.ggml.tokens"));
    expect_err(&path, ErrorKind::CorruptFile, &["tokenizer.ggml.tokens"]);
    let path = write_gguf_with(dir.path(), "bad-pre.gguf", &tiny, |meta, _| set_meta(meta, "tokenizer.ggml.pre", Value::String("klingon".into())));
    expect_err(&path, ErrorKind::Unsupported, &["pre-tokenizer 'klingon'"]);
    let path = write_gguf_with(dir.path(), "bad-template.gguf", &tiny, |meta, _| set_meta(meta, "tokenizer.chat_template", Value::String("{% for %}".into())));
    expect_err(&path, ErrorKind::CorruptFile, &["chat template"]);
    // More tokens than embedding rows: ids past the table would crash the forward pass later.
    let path = write_gguf_with(dir.path(), "big-vocab.gguf", &tiny, |meta, _| {
        let mut tokens: Vec<Value> = tiny.tokens.iter().cloned().map(Value::String).collect();
        tokens.push(Value::String("extra".into()));
        set_meta(meta, "tokenizer.ggml.tokens", Value::Array(tokens));
        meta.retain(|(k, _)| k != "tokenizer.ggml.token_type");
    });
    expect_err(&path, ErrorKind::CorruptFile, &["embedding table"]);
}

#[test]
fn gguf_out_of_range_hyperparameters_are_corrupt() {
    let tiny = TinyModel::new(6);
    let dir = tempdir();
    let cases: Vec<(&str, Value, &str)> = vec![
        ("llama.block_count", Value::U32(0), "llama.block_count"),
        ("llama.block_count", Value::U64(1 << 40), "llama.block_count"),
        ("llama.context_length", Value::U64(u64::MAX), "llama.context_length"),
        ("llama.embedding_length", Value::I32(-64), "llama.embedding_length"),
        ("llama.attention.head_count", Value::U32(3), "n_heads must be a multiple"),
        ("llama.attention.head_count", Value::String("four".into()), "llama.attention.head_count"),
        ("llama.rope.freq_base", Value::F32(f32::NAN), "rope theta"),
        ("llama.rope.freq_base", Value::String("1e4".into()), "llama.rope.freq_base"),
        ("llama.attention.key_length", Value::U32(15), "head_dim"),
    ];
    for (i, (key, value, needle)) in cases.into_iter().enumerate() {
        let path = write_gguf_with(dir.path(), &format!("hp{i}.gguf"), &tiny, |meta, _| set_meta(meta, key, value));
        expect_err(&path, ErrorKind::CorruptFile, &[needle]);
    }
}

/// BUG (crate/src/config.rs, `ModelConfig::validate`): the checks array is built eagerly, so
/// `self.n_heads % self.n_kv_heads` is evaluated even when `n_kv_heads == 0` and panics with
/// "attempt to calculate the remainder with a divisor of zero" instead of returning CorruptFile.
#[test]
fn zero_kv_heads_is_corrupt_not_a_panic() {
    let tiny = TinyModel::new(6);
    let dir = tempdir();
    let path = write_gguf_with(dir.path(), "kv0.gguf", &tiny, |meta, _| set_meta(meta, "llama.attention.head_count_kv", Value::U32(0)));
    expect_err(&path, ErrorKind::CorruptFile, &["head counts must be in 1..=1024"]);
    tiny.write_hf_dir(&dir.path().join("hf"));
    let mut cfg = tiny.hf_config();
    cfg["num_key_value_heads"] = 0.into();
    write_json(&dir.path().join("hf/config.json"), &cfg);
    expect_err(&dir.path().join("hf"), ErrorKind::CorruptFile, &["head counts must be in 1..=1024"]);
}

/// BUG (crate/src/gguf.rs `config`, `attention.key_length`; crate/src/config.rs `HfConfig::resolve`,
/// `head_dim`): head_dim is not bounded, and `q_dim()`/`kv_dim()` multiply it by the head counts
/// with wrapping arithmetic in release builds. head_dim = 2^63 + 16 with 4 heads / 2 KV heads
/// wraps to q_dim = 64, kv_dim = 32, so every tensor shape check passes, and then `Rope::new`
/// collects head_dim/2 = 2^62 + 8 floats: "capacity overflow" panic (or an abort on allocation
/// failure for smaller absurd values).
#[test]
fn absurd_head_dim_is_corrupt_not_a_panic() {
    let tiny = TinyModel::new(6);
    let dir = tempdir();
    let huge = (1u64 << 63) + 16;
    let path = write_gguf_with(dir.path(), "hd.gguf", &tiny, |meta, _| set_meta(meta, "llama.attention.key_length", Value::U64(huge)));
    expect_err(&path, ErrorKind::CorruptFile, &["head_dim"]);
    tiny.write_hf_dir(&dir.path().join("hf"));
    let mut cfg = tiny.hf_config();
    cfg["head_dim"] = huge.into();
    write_json(&dir.path().join("hf/config.json"), &cfg);
    expect_err(&dir.path().join("hf"), ErrorKind::CorruptFile, &["head_dim"]);
    // With llama3 rope scaling, `llama3_freq_factors` collects head_dim/2 floats before
    // `validate` runs: 2^62 panics with "capacity overflow"; values like 2^40 abort the process
    // on the failed 2 TiB allocation, and 2^32 makes the loader allocate and fill 8 GiB.
    let mut cfg = tiny.hf_config();
    cfg["head_dim"] = (1u64 << 62).into();
    cfg["rope_scaling"] = serde_json::json!({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192});
    write_json(&dir.path().join("hf/config.json"), &cfg);
    expect_err(&dir.path().join("hf"), ErrorKind::CorruptFile, &["head_dim"]);
}

/// BUG (reached through crate/src/gguf.rs:31 `Content::read`): candle computes the tensor data
/// offset as `position.div_ceil(alignment)`, so `general.alignment = 0` panics with a division by
/// zero inside candle; kvengine neither validates the key nor catches the panic.
#[test]
fn zero_alignment_is_corrupt_not_a_panic() {
    let tiny = TinyModel::new(6);
    let dir = tempdir();
    let path = write_gguf_with(dir.path(), "align0.gguf", &tiny, |meta, _| set_meta(meta, "general.alignment", Value::U32(0)));
    expect_err(&path, ErrorKind::CorruptFile, &["alignment"]);
}

/// A tensor dimension whose product with the others wraps around to the true byte size.
/// kvengine must not accept a vocabulary of 2^58 rows backed by 300 rows of data.
#[test]
fn wrapping_tensor_dims_are_corrupt() {
    // Tied embeddings, so token_embd.weight alone decides the vocabulary size.
    let tiny = TinyModel::with_spec(6, TinySpec { tied: true, ..TinySpec::default() });
    let bytes = tiny.gguf_bytes(GgmlDType::F32);
    let vocab = tiny.vocab_size() as u64;
    // token_embd.weight's info: name, n_dims = 2, dims (ggml order: 64, vocab), dtype, offset.
    let name = b"token_embd.weight";
    let at = bytes.windows(name.len()).position(|w| w == name).unwrap() + name.len();
    assert_eq!(u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()), 2);
    let dim1 = at + 4 + 8;
    assert_eq!(u64::from_le_bytes(bytes[dim1..dim1 + 8].try_into().unwrap()), vocab);
    let mut bad = bytes.clone();
    // (vocab + 2^58) * 64 * 4 bytes wraps to exactly the real tensor size.
    bad[dim1..dim1 + 8].copy_from_slice(&(vocab + (1u64 << 58)).to_le_bytes());
    let dir = tempdir();
    let path = dir.path().join("wrap.gguf");
    std::fs::write(&path, &bad).unwrap();
    expect_err(&path, ErrorKind::CorruptFile, &["token_embd.weight"]);
}

// ------------------------------------------------------------------------------ safetensors

#[test]
fn corrupt_safetensors_header_is_corrupt() {
    let tiny = TinyModel::new(7);
    let dir = tempdir();
    tiny.write_hf_dir(dir.path());
    let st = dir.path().join("model.safetensors");
    let good = std::fs::read(&st).unwrap();
    let header_len = u64::from_le_bytes(good[..8].try_into().unwrap()) as usize;

    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    let mut huge_len = good.clone();
    huge_len[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    cases.push(("header length u64::MAX", huge_len));
    let mut past_end = good.clone();
    past_end[..8].copy_from_slice(&((good.len() as u64) + 1).to_le_bytes());
    cases.push(("header length past the end", past_end));
    let mut garbage = good.clone();
    for b in &mut garbage[8..8 + header_len.min(64)] {
        *b = b'#';
    }
    cases.push(("garbage JSON", garbage));
    let text = String::from_utf8(good[8..8 + header_len].to_vec()).unwrap();
    // Offsets pointing past the data: same header length, so patch a digit string in place.
    let needle = "\"data_offsets\":[0,";
    let at = text.find(needle).expect("data_offsets in header");
    let mut offsets = good.clone();
    offsets[8 + at + needle.len()] = b'9';
    cases.push(("data offsets", offsets));
    cases.push(("empty file", Vec::new()));
    cases.push(("only the length", good[..8].to_vec()));
    cases.push(("cut inside the data", good[..good.len() - 100].to_vec()));
    for (what, bytes) in cases {
        std::fs::write(&st, &bytes).unwrap();
        let err = expect_err(dir.path(), ErrorKind::CorruptFile, &["model.safetensors"]);
        assert!(err.message.contains("not a valid safetensors file"), "{what}: {}", err.message);
    }
}

#[test]
fn safetensors_tensor_with_wrong_shape_or_dtype() {
    let tiny = TinyModel::new(8);
    let dir = tempdir();
    tiny.write_hf_dir(dir.path());
    let mut tensors = tiny.hf_tensors();
    let slot = tensors.iter_mut().find(|(n, _, _)| n == "model.layers.0.self_attn.v_proj.weight").unwrap();
    slot.1 = vec![64, 32];
    write_safetensors(&dir.path().join("model.safetensors"), &tensors);
    expect_err(dir.path(), ErrorKind::CorruptFile, &["model.layers.0.self_attn.v_proj.weight", "[64, 32]", "[32, 64]"]);

    // An integer tensor is unsupported, not corrupt.
    let mut tensors = tiny.hf_tensors();
    tensors.retain(|(n, _, _)| n != "model.norm.weight");
    write_safetensors(&dir.path().join("model.safetensors"), &tensors);
    let ints: Vec<u8> = (0..64i32).flat_map(|x| x.to_le_bytes()).collect();
    let mut views: Vec<(String, safetensors::tensor::TensorView<'_>)> = Vec::new();
    views.push(("model.norm.weight".into(), safetensors::tensor::TensorView::new(safetensors::Dtype::I32, vec![64], &ints).unwrap()));
    safetensors::serialize_to_file(views, None, &dir.path().join("norm.safetensors")).unwrap();
    expect_err(dir.path(), ErrorKind::Unsupported, &["model.norm.weight", "dtype"]);
}

#[test]
fn index_json_with_bad_shards() {
    let tiny = TinyModel::new(9);
    let dir = tempdir();
    tiny.write_hf_sharded(dir.path(), 2);
    let index_path = dir.path().join("model.safetensors.index.json");
    let good: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&index_path).unwrap()).unwrap();
    let first_key = good["weight_map"].as_object().unwrap().keys().next().unwrap().clone();
    let with_shard = |shard: &str| {
        let mut v = good.clone();
        v["weight_map"][&first_key] = shard.into();
        v
    };
    // Outside the directory: refused before anything is opened.
    for shard in ["../x.safetensors", "/etc/passwd", "sub/dir.safetensors", "..\\x.safetensors", ".hidden.safetensors"] {
        write_json(&index_path, &with_shard(shard));
        expect_err(dir.path(), ErrorKind::CorruptFile, &["must be a .safetensors file in the same directory", shard]);
    }
    // A shard that does not exist.
    write_json(&index_path, &with_shard("model-00009-of-00009.safetensors"));
    expect_err(dir.path(), ErrorKind::NotFound, &["model-00009-of-00009.safetensors"]);
    // Structural problems.
    write_json(&index_path, &with_shard("")); // "" is not a file either: no panic, some error
    let err = catch_unwind(AssertUnwindSafe(|| load(dir.path()))).expect("no panic").err().expect("an error");
    assert!(err.message.contains("model.safetensors") || err.message.contains(&dir.path().display().to_string()), "{:?}", err);
    let mut no_map = good.clone();
    no_map.as_object_mut().unwrap().remove("weight_map");
    write_json(&index_path, &no_map);
    expect_err(dir.path(), ErrorKind::CorruptFile, &["weight_map"]);
    let mut numeric = good.clone();
    numeric["weight_map"][&first_key] = 3.into();
    write_json(&index_path, &numeric);
    expect_err(dir.path(), ErrorKind::CorruptFile, &["shard names must be strings"]);
    write_json(&index_path, &serde_json::json!({ "weight_map": {} }));
    expect_err(dir.path(), ErrorKind::CorruptFile, &["lists no shards"]);
    std::fs::write(&index_path, "{\"weight_map\": {").unwrap();
    expect_err(dir.path(), ErrorKind::CorruptFile, &["invalid", "model.safetensors.index.json"]);
    // An index that omits a tensor some shard holds is fine only if the tensor is not needed;
    // one that lists only the first shard loses half the model.
    let mut partial = good.clone();
    let shard1 = good["weight_map"][&first_key].as_str().unwrap().to_string();
    for (_, v) in partial["weight_map"].as_object_mut().unwrap().iter_mut() {
        *v = shard1.clone().into();
    }
    write_json(&index_path, &partial);
    expect_err(dir.path(), ErrorKind::CorruptFile, &["checkpoint in", "has no tensor"]);
}

#[test]
fn config_json_problems() {
    let tiny = TinyModel::new(10);
    let dir = tempdir();
    tiny.write_hf_dir(dir.path());
    let cfg_path = dir.path().join("config.json");
    std::fs::write(&cfg_path, "{ \"model_type\": \"llama\", ").unwrap();
    expect_err(dir.path(), ErrorKind::CorruptFile, &["invalid", "config.json"]);
    std::fs::write(&cfg_path, "").unwrap();
    expect_err(dir.path(), ErrorKind::CorruptFile, &["invalid", "config.json"]);
    std::fs::write(&cfg_path, [0xffu8, 0xfe, 0x00]).unwrap();
    let err = expect_err(dir.path(), ErrorKind::CorruptFile, &["config.json"]);
    assert!(!err.message.is_empty());

    let edits: Vec<(&str, serde_json::Value, ErrorKind, &str)> = vec![
        ("model_type", "mamba".into(), ErrorKind::Unsupported, "architecture 'mamba'"),
        ("hidden_size", "sixty-four".into(), ErrorKind::CorruptFile, "invalid"),
        ("num_hidden_layers", 0.into(), ErrorKind::CorruptFile, "n_layers"),
        ("num_attention_heads", 0.into(), ErrorKind::CorruptFile, "head"),
        ("num_attention_heads", 3.into(), ErrorKind::CorruptFile, "n_heads must be a multiple"),
        ("vocab_size", (-1).into(), ErrorKind::CorruptFile, "invalid"),
        ("vocab_size", 1000.into(), ErrorKind::CorruptFile, "model.embed_tokens.weight"),
        ("intermediate_size", 129.into(), ErrorKind::CorruptFile, "mlp.gate_proj"),
        ("rope_scaling", serde_json::json!({"rope_type": "yarn", "factor": 4.0}), ErrorKind::Unsupported, "rope_scaling"),
        ("rope_scaling", serde_json::json!({"rope_type": "llama3"}), ErrorKind::CorruptFile, "llama3 rope_scaling"),
        ("head_dim", 15.into(), ErrorKind::CorruptFile, "head_dim"),
    ];
    for (key, value, kind, needle) in edits {
        let mut cfg = tiny.hf_config();
        cfg[key] = value;
        write_json(&cfg_path, &cfg);
        expect_err(dir.path(), kind, &[needle]);
    }
    let mut cfg = tiny.hf_config();
    cfg.as_object_mut().unwrap().remove("hidden_size");
    write_json(&cfg_path, &cfg);
    expect_err(dir.path(), ErrorKind::CorruptFile, &["hidden_size"]);
    let mut cfg = tiny.hf_config();
    cfg.as_object_mut().unwrap().remove("model_type");
    cfg.as_object_mut().unwrap().remove("architectures");
    write_json(&cfg_path, &cfg);
    expect_err(dir.path(), ErrorKind::CorruptFile, &["neither model_type nor architectures"]);

    // Broken tokenizer files next to a good config.
    tiny.write_hf_dir(dir.path());
    std::fs::write(dir.path().join("tokenizer.json"), "{\"model\": 3}").unwrap();
    expect_err(dir.path(), ErrorKind::CorruptFile, &["tokenizer.json"]);
    tiny.write_hf_dir(dir.path());
    std::fs::write(dir.path().join("tokenizer_config.json"), "[1, 2").unwrap();
    expect_err(dir.path(), ErrorKind::CorruptFile, &["tokenizer_config.json"]);
}

// ------------------------------------------------------------------------------ forward / cache

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
            .unwrap_or_else(|p| panic!("forward panicked: {}", panic_message(&p)))
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
    }
}

#[test]
fn absurd_kv_cache_dims_are_errors_not_aborts() {
    let new = |cfg: &ModelConfig, batch: usize, cap: usize| {
        catch_unwind(AssertUnwindSafe(|| KvCache::new(cfg, batch, cap))).unwrap_or_else(|p| panic!("KvCache::new panicked: {}", panic_message(&p)))
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
    // The starting buffers (1 GiB each) are zero pages that are never touched.
    let overcommit = std::fs::read_to_string("/proc/sys/vm/overcommit_memory").unwrap_or_default();
    if overcommit.trim() != "1" {
        let mut grow = new(&config_with(1, 256, 1024, 1 << 22), 1, 1).unwrap_or_else(|e| panic!("{}", e.message));
        assert_eq!(grow.capacity(), 1024);
        let err = grow.ensure_capacity(1 << 22).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidArgument, "{}", err.message);
        assert!(err.message.contains("could not allocate"), "{}", err.message);
        assert_eq!(grow.capacity(), 1024, "a failed growth keeps the old buffers");
    }
    cache.ensure_capacity(512).unwrap();
    assert_eq!(cache.capacity(), 512);
}

/// BUG (crate/src/safetensors_dir.rs `safetensors_files`): the in-directory check only rejects
/// '/', '\\' and a leading '.', so an empty shard name joins to the directory itself ("cannot map
/// <dir>/: No such device") and a name with a NUL byte fails in `File::open`; both come back as
/// INTERNAL instead of CORRUPT_FILE.
#[test]
fn empty_or_nul_shard_names_are_corrupt() {
    let tiny = TinyModel::new(9);
    let dir = tempdir();
    tiny.write_hf_sharded(dir.path(), 2);
    let index_path = dir.path().join("model.safetensors.index.json");
    let good: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&index_path).unwrap()).unwrap();
    let first_key = good["weight_map"].as_object().unwrap().keys().next().unwrap().clone();
    for shard in ["", "model-00001-of-00002.safetensors\u{0}"] {
        let mut v = good.clone();
        v["weight_map"][&first_key] = shard.into();
        write_json(&index_path, &v);
        expect_err(dir.path(), ErrorKind::CorruptFile, &["model.safetensors.index.json"]);
    }
}

/// BUG (reached through crate/src/tokenizer.rs `Tokenizer::from_hf_dir`, which calls
/// `tokenizers::Tokenizer::from_file`): tokenizers 0.23.2 deserializes the "decoder" section with
/// `DecoderHelper::deserialize(deserializer).expect("Helper")` (tokenizers/src/decoders/mod.rs:90),
/// so a JSON syntax error inside that section panics instead of returning an error. Parsing the
/// file into a `serde_json::Value` first (then `serde_json::from_value`) would turn it into an
/// error. Syntax errors elsewhere in the file are fine (see `truncated_tokenizer_json_is_corrupt`).
#[test]
fn tokenizer_json_with_broken_decoder_is_corrupt_not_a_panic() {
    let tiny = TinyModel::new(13);
    let dir = tempdir();
    tiny.write_hf_dir(dir.path());
    let path = dir.path().join("tokenizer.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let at = text.find("\"decoder\"").expect("decoder section") + "\"decoder\": {".len() + 5;
    std::fs::write(&path, &text[..at]).unwrap();
    expect_err(dir.path(), ErrorKind::CorruptFile, &["tokenizer.json"]);
}

#[test]
fn truncated_tokenizer_json_is_corrupt() {
    let tiny = TinyModel::new(13);
    let dir = tempdir();
    tiny.write_hf_dir(dir.path());
    let path = dir.path().join("tokenizer.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let model = text.find("\"model\"").expect("model section");
    for cut in [0, 1, 10, model + 20, text.len() / 2, text.len() - 2] {
        std::fs::write(&path, &text[..cut]).unwrap();
        expect_err(dir.path(), ErrorKind::CorruptFile, &["tokenizer.json"]);
    }
}

/// Message quality (crate/src/loader.rs `load_hf_dir` and crate/src/safetensors_dir.rs
/// `safetensors_files`): `std::fs::read_to_string(..)?` without context, so a non-UTF-8
/// tokenizer_config.json or index file fails with just "stream did not contain valid UTF-8",
/// not naming the file.
#[test]
fn unreadable_json_side_files_are_named_in_the_error() {
    let tiny = TinyModel::new(14);
    let dir = tempdir();
    tiny.write_hf_sharded(dir.path(), 2);
    std::fs::write(dir.path().join("tokenizer_config.json"), [0xffu8, 0xfe]).unwrap();
    expect_err(dir.path(), ErrorKind::CorruptFile, &["tokenizer_config.json"]);
    tiny.write_hf_sharded(dir.path(), 2);
    std::fs::write(dir.path().join("model.safetensors.index.json"), [0xffu8, 0xfe]).unwrap();
    expect_err(dir.path(), ErrorKind::CorruptFile, &["model.safetensors.index.json"]);
}
