//! Mutators for the files of a Hugging Face checkpoint directory: JSON-aware edits of
//! config.json, the tokenizer files and the shard index, and safetensors header edits that keep
//! the length prefix consistent so the edit reaches the JSON parser.

use super::mutate::{extreme_value, mutate_bytes};
use crate::common::Rng;

/// The config.json fields kvengine reads, which are the ones worth setting to extreme values.
const CONFIG_KEYS: &[&str] = &[
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "rms_norm_eps",
    "rope_theta",
    "max_position_embeddings",
    "tie_word_embeddings",
    "model_type",
    "architectures",
];

/// Shard names that are empty, escape the directory, name a non-shard file, or do not exist.
const INDEX_SHARDS: &[&str] = &[
    "",
    ".",
    "..",
    "../model-00001-of-00002.safetensors",
    "/dev/zero",
    "model-00001-of-00002.safetensors/",
    "model-00001-of-00002.safetensors\u{0}",
    "config.json",
    "tokenizer.json",
    "model.safetensors.index.json",
    "missing.safetensors",
    "model-00002-of-00002.safetensors",
    "C:\\x.safetensors",
    "~/x.safetensors",
    "ÿ.safetensors",
];

pub const SPECIAL_NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "3",
    "15",
    "16",
    "17",
    "31",
    "32",
    "63",
    "64",
    "65",
    "127",
    "128",
    "282",
    "511",
    "512",
    "513",
    "4096",
    "1048576",
    "2147483647",
    "2147483648",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "1e309",
    "-0",
    "0.5",
    "1e-45",
    "3.4e38",
    "null",
    "true",
    "\"64\"",
    "[]",
    "{}",
];

pub fn special_json(rng: &mut Rng) -> serde_json::Value {
    let s = SPECIAL_NUMBERS[rng.below(SPECIAL_NUMBERS.len())];
    serde_json::from_str(s).unwrap_or_else(|_| serde_json::Value::String(s.to_string()))
}

/// Structural edits of a JSON object: set a (possibly nested) value to something extreme,
/// remove or add keys.
pub fn mutate_json_value(rng: &mut Rng, v: &mut serde_json::Value, extra_keys: &[&str]) -> String {
    let Some(obj) = v.as_object_mut() else { return "not-an-object".into() };
    let keys: Vec<String> = obj.keys().cloned().collect();
    match rng.below(10) {
        0 if !keys.is_empty() => {
            let k = &keys[rng.below(keys.len())];
            obj.remove(k);
            format!("remove {k}")
        }
        1 => {
            let k = extra_keys[rng.below(extra_keys.len())];
            obj.insert(k.to_string(), special_json(rng));
            format!("add {k}")
        }
        2 => {
            obj.insert(
                "rope_scaling".into(),
                serde_json::json!({
                    "rope_type": if rng.chance(0.8) { "llama3" } else { "linear" },
                    "factor": special_json(rng),
                    "low_freq_factor": if rng.chance(0.5) { special_json(rng) } else { 1.0.into() },
                    "high_freq_factor": if rng.chance(0.5) { special_json(rng) } else { 4.0.into() },
                    "original_max_position_embeddings": special_json(rng),
                }),
            );
            "rope_scaling".into()
        }
        _ if !keys.is_empty() => {
            let k = keys[rng.below(keys.len())].clone();
            let slot = obj.get_mut(&k).unwrap();
            match slot {
                serde_json::Value::Object(inner) if !inner.is_empty() => {
                    let ik: Vec<String> = inner.keys().cloned().collect();
                    let ik = &ik[rng.below(ik.len())];
                    inner.insert(ik.clone(), special_json(rng));
                    format!("{k}.{ik}")
                }
                _ => {
                    *slot = special_json(rng);
                    format!("set {k}")
                }
            }
        }
        _ => "noop".into(),
    }
}

/// One edit of the file `name` of a checkpoint directory, and its description. Safetensors files
/// get header edits: the length prefix, digits in the JSON (shapes, offsets), dtypes.
pub fn mutate_hf_file(rng: &mut Rng, name: &str, bytes: &[u8]) -> (Vec<u8>, String) {
    if name.ends_with(".safetensors") {
        if bytes.len() >= 8
            && (u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize).checked_add(8).is_some_and(|end| end <= bytes.len())
        {
            mutate_safetensors(rng, bytes)
        } else {
            mutate_text(rng, bytes)
        }
    } else if rng.chance(0.3) {
        mutate_text(rng, bytes)
    } else {
        match serde_json::from_slice::<serde_json::Value>(bytes) {
            Ok(mut v) => {
                let how = match name {
                    "model.safetensors.index.json" => mutate_index(rng, &mut v),
                    "config.json" => mutate_json_value(rng, &mut v, CONFIG_KEYS),
                    "tokenizer_config.json" => {
                        mutate_json_value(rng, &mut v, &["bos_token", "eos_token", "chat_template", "add_bos_token"])
                    }
                    _ => mutate_json_value(rng, &mut v, &["model", "pre_tokenizer", "decoder", "added_tokens", "normalizer"]),
                };
                (serde_json::to_vec(&v).unwrap(), how)
            }
            Err(_) => mutate_text(rng, bytes),
        }
    }
}

fn mutate_index(rng: &mut Rng, v: &mut serde_json::Value) -> String {
    match rng.below(4) {
        0 => {
            let shard = INDEX_SHARDS[rng.below(INDEX_SHARDS.len())];
            set_random_shard(rng, v, |_| shard.into());
            format!("shard {shard:?}")
        }
        1 => {
            set_random_shard(rng, v, special_json);
            "shard value".into()
        }
        _ => mutate_json_value(rng, v, &["weight_map", "metadata"]),
    }
}

/// Points one tensor of the index's weight map at `value` (drawn after the tensor is chosen).
fn set_random_shard(rng: &mut Rng, v: &mut serde_json::Value, value: impl FnOnce(&mut Rng) -> serde_json::Value) {
    if let Some(map) = v.get_mut("weight_map").and_then(|m| m.as_object_mut()) {
        let keys: Vec<String> = map.keys().cloned().collect();
        if !keys.is_empty() {
            let key = keys[rng.below(keys.len())].clone();
            let value = value(rng);
            map.insert(key, value);
        }
    }
}

/// A safetensors file with `header` as its JSON header, the length prefix matching it.
fn with_header(header: &str, data: &[u8]) -> Vec<u8> {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// Safetensors header edits: the length prefix, digits in the JSON (shapes, offsets), dtype
/// names, raw flips; the data is kept and the prefix fixed up unless that is the mutation.
fn mutate_safetensors(rng: &mut Rng, file: &[u8]) -> (Vec<u8>, String) {
    let n = u64::from_le_bytes(file[..8].try_into().unwrap()) as usize;
    let header = String::from_utf8_lossy(&file[8..8 + n]).into_owned();
    let data = &file[8 + n..];
    match rng.below(6) {
        0 => {
            let mut out = file.to_vec();
            let v = extreme_value(rng, n as u64, file.len());
            out[..8].copy_from_slice(&v.to_le_bytes());
            (out, format!("header length {v:#x}"))
        }
        1 | 2 => match replace_digit_run(rng, &header, file.len()) {
            Some((text, what)) => (with_header(&text, data), what),
            None => mutate_text_from(rng, file, 8 + n),
        },
        3 => {
            let (text, what) = replace_dtype(rng, &header);
            (with_header(&text, data), what)
        }
        _ => mutate_text_from(rng, file, 8 + n),
    }
}

/// Byte offsets of every run of ASCII digits in `text`.
fn digit_runs(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut runs = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() {
            let s = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            runs.push((s, i));
        } else {
            i += 1;
        }
    }
    runs
}

/// Replaces one run of digits in the header (a shape or an offset) with an extreme number;
/// `None` if the header has no digits.
fn replace_digit_run(rng: &mut Rng, text: &str, file_len: usize) -> Option<(String, String)> {
    let runs = digit_runs(text);
    if runs.is_empty() {
        return None;
    }
    let (s, e) = runs[rng.below(runs.len())];
    let orig: u64 = text[s..e].parse().unwrap_or(0);
    let replacement = match rng.below(3) {
        0 => SPECIAL_NUMBERS[rng.below(SPECIAL_NUMBERS.len())].to_string(),
        1 => extreme_value(rng, orig, file_len).to_string(),
        _ => (orig as i64 + rng.below(9) as i64 - 4).to_string(),
    };
    let new_text = format!("{}{}{}", &text[..s], replacement, &text[e..]);
    Some((new_text, format!("header digits {}->{replacement}", &text[s..e])))
}

/// Changes the dtype of one F32 tensor to another (or an unknown) name.
fn replace_dtype(rng: &mut Rng, text: &str) -> (String, String) {
    let dtypes = ["F16", "BF16", "F64", "I64", "I8", "U8", "BOOL", "F8_E4M3", "F4", "XX", ""];
    let to = dtypes[rng.below(dtypes.len())];
    let count = text.matches("\"F32\"").count();
    let nth = rng.below(count.max(1));
    let mut idx = 0;
    let new_text: String = text
        .split("\"F32\"")
        .enumerate()
        .map(|(i, part)| {
            if i == 0 {
                part.to_string()
            } else {
                idx += 1;
                format!("\"{}\"{part}", if idx - 1 == nth { to } else { "F32" })
            }
        })
        .collect();
    (new_text, format!("dtype F32->{to}"))
}

/// A byte-level edit anywhere in the file, concentrated in its first `hot` bytes.
fn mutate_text_from(rng: &mut Rng, file: &[u8], hot: usize) -> (Vec<u8>, String) {
    let mut b = file.to_vec();
    let what = mutate_bytes(rng, &mut b, hot);
    (b, format!("bytes {what}"))
}

fn mutate_text(rng: &mut Rng, text: &[u8]) -> (Vec<u8>, String) {
    mutate_text_from(rng, text, text.len())
}
