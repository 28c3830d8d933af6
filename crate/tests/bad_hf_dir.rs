//! Malformed Hugging Face checkpoint directories (safetensors, shard index, config.json, tokenizer
//! files): each must come back as an `Err` with the right `ErrorKind` and a message that says what
//! is wrong, never as a panic.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};

use common::*;
use kvengine::ErrorKind;

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
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> =
        vec![("model.norm.weight".into(), safetensors::tensor::TensorView::new(safetensors::Dtype::I32, vec![64], &ints).unwrap())];
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
