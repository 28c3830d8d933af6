//! The tiny model as a GGUF file, plus helpers for writing deliberately edited GGUF files.

use std::fs::File;
use std::io::{BufWriter, Seek, Write};
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};

use super::{TinyModel, CHATML_TEMPLATE};

impl TinyModel {
    pub fn gguf_metadata(&self) -> Vec<(String, Value)> {
        let s = &self.spec;
        let u32v = |x: usize| Value::U32(x as u32);
        let strs = |v: Vec<String>| Value::Array(v.into_iter().map(Value::String).collect());
        vec![
            ("general.architecture".into(), Value::String("llama".into())),
            ("general.name".into(), Value::String("tiny-random-llama".into())),
            ("llama.context_length".into(), u32v(s.context)),
            ("llama.embedding_length".into(), u32v(s.hidden)),
            ("llama.block_count".into(), u32v(s.n_layers)),
            ("llama.feed_forward_length".into(), u32v(s.ffn)),
            ("llama.attention.head_count".into(), u32v(s.n_heads)),
            ("llama.attention.head_count_kv".into(), u32v(s.n_kv_heads)),
            ("llama.attention.layer_norm_rms_epsilon".into(), Value::F32(s.rms_eps)),
            ("llama.rope.freq_base".into(), Value::F32(s.rope_theta)),
            ("llama.rope.dimension_count".into(), u32v(s.head_dim)),
            ("llama.vocab_size".into(), u32v(self.vocab_size())),
            ("tokenizer.ggml.model".into(), Value::String("gpt2".into())),
            ("tokenizer.ggml.pre".into(), Value::String("gpt2".into())),
            ("tokenizer.ggml.tokens".into(), strs(self.tokens.clone())),
            ("tokenizer.ggml.token_type".into(), Value::Array(self.token_types.iter().map(|&t| Value::I32(t)).collect())),
            ("tokenizer.ggml.merges".into(), strs(self.merges.iter().map(|(a, b)| format!("{a} {b}")).collect())),
            ("tokenizer.ggml.bos_token_id".into(), Value::U32(self.bos_id)),
            ("tokenizer.ggml.eos_token_id".into(), Value::U32(self.eos_id)),
            ("tokenizer.ggml.add_bos_token".into(), Value::Bool(false)),
            ("tokenizer.chat_template".into(), Value::String(CHATML_TEMPLATE.into())),
        ]
    }

    /// The tensors as GGUF stores them: Q/K rows permuted for interleaved RoPE, matrices in
    /// `dtype` (1-D tensors always F32, as llama.cpp does).
    pub fn gguf_tensors(&self, dtype: GgmlDType) -> Vec<(String, QTensor)> {
        self.gguf_tensors_with(dtype, true)
    }

    /// `permute_qk = false` writes Hugging Face row order into the GGUF: a deliberately wrong
    /// file, used to show the equivalence tests would catch a RoPE convention mismatch.
    pub fn gguf_tensors_with(&self, dtype: GgmlDType, permute_qk: bool) -> Vec<(String, QTensor)> {
        self.tensors
            .iter()
            .map(|t| {
                let data = if permute_qk && t.name.ends_with("attn_q.weight") {
                    permute_rows(&t.data, self.spec.n_heads, t.dims[1])
                } else if permute_qk && t.name.ends_with("attn_k.weight") {
                    permute_rows(&t.data, self.spec.n_kv_heads, t.dims[1])
                } else {
                    t.data.clone()
                };
                let tensor = Tensor::from_vec(data, t.dims.as_slice(), &Device::Cpu).unwrap();
                let dt = if t.dims.len() < 2 { GgmlDType::F32 } else { dtype };
                (t.name.clone(), QTensor::quantize(&tensor, dt).unwrap())
            })
            .collect()
    }

    pub fn write_gguf(&self, path: &Path, dtype: GgmlDType) {
        write_gguf_parts(path, &self.gguf_metadata(), &self.gguf_tensors(dtype));
    }

    pub fn gguf_bytes(&self, dtype: GgmlDType) -> Vec<u8> {
        let mut cursor = std::io::Cursor::new(Vec::new());
        write_gguf_to(&mut cursor, &self.gguf_metadata(), &self.gguf_tensors(dtype));
        cursor.into_inner()
    }
}

/// llama.cpp `convert_hf_to_gguf.py`'s `permute(weights, n_head)`:
/// `reshape(n_head, 2, hd/2, in).swapaxes(1, 2).reshape(out, in)`.
pub fn permute_rows(data: &[f32], n_head: usize, cols: usize) -> Vec<f32> {
    let rows = data.len() / cols;
    let head_dim = rows / n_head;
    let half = head_dim / 2;
    let mut out = vec![0.0f32; data.len()];
    for h in 0..n_head {
        for i in 0..half {
            for j in 0..2 {
                // Output row (h, i, j) takes input row (h, j, i).
                let dst = h * head_dim + i * 2 + j;
                let src = h * head_dim + j * half + i;
                out[dst * cols..(dst + 1) * cols].copy_from_slice(&data[src * cols..(src + 1) * cols]);
            }
        }
    }
    out
}

/// candle's writer wants borrowed pairs; the tests keep owned ones so they can edit them.
fn write_gguf_to<W: Seek + Write>(w: &mut W, metadata: &[(String, Value)], tensors: &[(String, QTensor)]) {
    let m: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let t: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    gguf_file::write(w, &m, &t).unwrap();
}

pub fn write_gguf_parts(path: &Path, metadata: &[(String, Value)], tensors: &[(String, QTensor)]) {
    let mut w = BufWriter::new(File::create(path).unwrap());
    write_gguf_to(&mut w, metadata, tensors);
    w.flush().unwrap();
}

/// Replaces `key`'s value, or appends the key when the model does not have it.
pub fn set_meta(meta: &mut Vec<(String, Value)>, key: &str, value: Value) {
    match meta.iter_mut().find(|(k, _)| k == key) {
        Some(slot) => slot.1 = value,
        None => meta.push((key.to_string(), value)),
    }
}

/// Writes `tiny` as an F32 GGUF named `name` in `dir`, after `edit` has changed its metadata or
/// tensors.
pub fn write_gguf_with(
    dir: &Path,
    name: &str,
    tiny: &TinyModel,
    edit: impl FnOnce(&mut Vec<(String, Value)>, &mut Vec<(String, QTensor)>),
) -> PathBuf {
    let mut meta = tiny.gguf_metadata();
    let mut tensors = tiny.gguf_tensors(GgmlDType::F32);
    edit(&mut meta, &mut tensors);
    let path = dir.join(name);
    write_gguf_parts(&path, &meta, &tensors);
    path
}
