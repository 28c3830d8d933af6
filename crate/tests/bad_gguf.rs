//! Malformed GGUF files: each must come back as an `Err` with the right `ErrorKind` and a
//! message that says what is wrong, never as a panic.

mod common;

use candle_core::quantized::gguf_file::Value;
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use common::*;
use kvengine::ErrorKind;

/// Offset where GGUF tensor data starts in a file written by candle (32-byte aligned after the
/// tensor infos): found by locating the first tensor's bytes.
fn tensor_data_offset(bytes: &[u8], tiny: &TinyModel, first: &str) -> usize {
    let data: Vec<u8> = tiny.tensor(first).data.iter().take(8).flat_map(|x| x.to_le_bytes()).collect();
    bytes.windows(data.len()).position(|w| w == data.as_slice()).expect("first tensor's data")
}

#[test]
fn missing_path_is_not_found() {
    let dir = tempdir();
    let path = dir.path().join("does-not-exist.gguf");
    expect_err(&path, ErrorKind::NotFound, &["cannot open model", "does-not-exist.gguf"]);
}

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
        (3, "not a valid GGUF file"),                   // inside the magic
        (10, "not a valid GGUF file"),                  // inside the tensor count
        (24, "not a valid GGUF file"),                  // right after the counts
        (60, "not a valid GGUF file"),                  // inside the first metadata key/value
        (1500, "not a valid GGUF file"),                // inside the token list
        (data_start - 40, "not a valid GGUF file"),     // inside the tensor infos
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
    let path =
        write_gguf_with(dir.path(), "no-tokenizer.gguf", &tiny, |meta, _| meta.retain(|(k, _)| !k.starts_with("tokenizer.ggml.model")));
    expect_err(&path, ErrorKind::Unsupported, &["tokenizer model"]);
    let path = write_gguf_with(dir.path(), "no-tokens.gguf", &tiny, |meta, _| meta.retain(|(k, _)| k != "tokenizer.ggml.tokens"));
    expect_err(&path, ErrorKind::CorruptFile, &["tokenizer.ggml.tokens"]);
    let path =
        write_gguf_with(dir.path(), "bad-pre.gguf", &tiny, |meta, _| set_meta(meta, "tokenizer.ggml.pre", Value::String("klingon".into())));
    expect_err(&path, ErrorKind::Unsupported, &["pre-tokenizer 'klingon'"]);
    let path = write_gguf_with(dir.path(), "bad-template.gguf", &tiny, |meta, _| {
        set_meta(meta, "tokenizer.chat_template", Value::String("{% for %}".into()))
    });
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

/// A block format kvengine has no kernels for (IQ4_NL here, as llama-quantize writes it) is
/// named in an Unsupported error, not reported as a corrupt file.
#[test]
fn unsupported_tensor_type_is_named() {
    let tiny = TinyModel::with_spec(7, TinySpec { tied: true, ..TinySpec::default() });
    let mut bytes = tiny.gguf_bytes(GgmlDType::F32);
    // token_embd.weight's info: name, n_dims = 2, two u64 dims, then the u32 ggml type.
    let name = b"token_embd.weight";
    let at = bytes.windows(name.len()).position(|w| w == name).unwrap() + name.len() + 4 + 16;
    assert_eq!(u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()), 0, "F32 is ggml type 0");
    bytes[at..at + 4].copy_from_slice(&20u32.to_le_bytes());
    let dir = tempdir();
    let path = dir.path().join("iq4_nl.gguf");
    std::fs::write(&path, &bytes).unwrap();
    expect_err(&path, ErrorKind::Unsupported, &["IQ4_NL", "Q6_K"]);
}
