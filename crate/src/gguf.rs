//! GGUF files: metadata into a `ModelConfig`, tensors kept quantized.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::quantized::GgmlDType;
use candle_core::Device;

use crate::config::{Activation, Architecture, BlockVariant, ModelConfig, RopeStyle, MAX_CONTEXT, MAX_WIDTH};
use crate::error::{candle_message, Error, Result};
use crate::weights::{Weight, WeightSource};

pub struct GgufFile {
    pub path: PathBuf,
    pub content: Content,
    reader: BufReader<File>,
}

impl GgufFile {
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| Error::from(e).context(format!("cannot open {}", path.display())))?;
        let file_len = file.metadata()?.len();
        let mut reader = BufReader::new(file);
        let invalid = |why: String| Error::corrupt(format!("{} is not a valid GGUF file: {why}", path.display()));
        // candle's parser divides by `general.alignment` unchecked; a zero there must not panic.
        let parsed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Content::read(&mut reader)))
            .map_err(|_| invalid("its header is malformed (e.g. general.alignment = 0)".into()))?;
        let content = parsed.map_err(|e| {
            let why = candle_message(&e);
            match unsupported_type(&why) {
                Some(name) => Error::unsupported(format!(
                    "{} holds tensors of type {name}, which kvengine cannot run; it runs F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q2_K..Q6_K: pick another quantization of the model",
                    path.display()
                )),
                None => invalid(why),
            }
        })?;
        check_tensor_extents(&content, file_len).map_err(invalid)?;
        Ok(Self { path: path.to_owned(), content, reader })
    }

    pub fn meta(&self, key: &str) -> Option<&Value> {
        self.content.metadata.get(key)
    }

    pub fn meta_str(&self, key: &str) -> Option<&str> {
        self.meta(key).and_then(|v| v.to_string().ok()).map(String::as_str)
    }

    fn meta_usize(&self, key: &str) -> Result<Option<usize>> {
        let Some(v) = self.meta(key) else { return Ok(None) };
        let n = match v {
            Value::U8(x) => *x as u64,
            Value::U16(x) => *x as u64,
            Value::U32(x) => *x as u64,
            Value::U64(x) => *x,
            Value::I8(x) if *x >= 0 => *x as u64,
            Value::I16(x) if *x >= 0 => *x as u64,
            Value::I32(x) if *x >= 0 => *x as u64,
            Value::I64(x) if *x >= 0 => *x as u64,
            other => return Err(Error::corrupt(format!("metadata '{key}' should be a non-negative integer, got {other:?}"))),
        };
        usize::try_from(n).map(Some).map_err(|_| Error::corrupt(format!("metadata '{key}' is too large: {n}")))
    }

    fn meta_f32(&self, key: &str) -> Result<Option<f32>> {
        match self.meta(key) {
            None => Ok(None),
            Some(Value::F32(x)) => Ok(Some(*x)),
            Some(Value::F64(x)) => Ok(Some(*x as f32)),
            Some(other) => Err(Error::corrupt(format!("metadata '{key}' should be a float, got {other:?}"))),
        }
    }

    fn required(&self, key: &str, max: usize) -> Result<usize> {
        let n = self.meta_usize(key)?.ok_or_else(|| Error::corrupt(format!("GGUF metadata is missing '{key}'")))?;
        if n == 0 || n > max {
            return Err(Error::corrupt(format!("metadata '{key}' = {n} is out of range (1..={max})")));
        }
        Ok(n)
    }

    pub fn config(&mut self) -> Result<ModelConfig> {
        let arch_name = self
            .meta_str("general.architecture")
            .ok_or_else(|| Error::corrupt("GGUF metadata is missing 'general.architecture'"))?
            .to_owned();
        let architecture = Architecture::parse(&arch_name)?;
        let key = |k: &str| format!("{arch_name}.{k}");
        let hidden_size = self.required(&key("embedding_length"), MAX_WIDTH)?;
        let n_heads = self.required(&key("attention.head_count"), MAX_WIDTH)?;
        let n_kv_heads = self.meta_usize(&key("attention.head_count_kv"))?.unwrap_or(n_heads);
        let head_dim = self.meta_usize(&key("attention.key_length"))?.unwrap_or(hidden_size / n_heads);
        let vocab_size = match self.content.tensor_infos.get("token_embd.weight") {
            Some(info) => info.shape.dims().first().copied().unwrap_or(0),
            None => return Err(Error::corrupt("GGUF file has no 'token_embd.weight' tensor")),
        };
        let rope_freq_factors = if self.contains("rope_freqs.weight") {
            let t = self.load("rope_freqs.weight")?.into_dense()?;
            t.flatten_all()?.to_vec1::<f32>()?
        } else {
            Vec::new()
        };
        let n_layers = self.required(&key("block_count"), 1024)?;
        let variant = match architecture {
            Architecture::Gemma3 => {
                let window = self.required(&key("attention.sliding_window"), MAX_CONTEXT)?;
                BlockVariant::gemma3(hidden_size, n_layers, n_heads, head_dim, window)?
            }
            Architecture::Qwen3 => BlockVariant::qwen3(),
            // Phi-3 GGUFs name a sliding window that llama.cpp does not apply (the converters
            // fill it wrongly); we attend as llama.cpp does. LongRoPE's per-layer factors (the
            // 128k models) we cannot apply, so refuse them.
            Architecture::Phi3 if self.contains("rope_factors_long.weight") => {
                return Err(Error::unsupported("Phi-3 models with LongRoPE (128k context) are not supported; use a 4k-context Phi-3"));
            }
            Architecture::Gpt2 => BlockVariant::gpt2(Activation::GeluTanh, true),
            Architecture::Llama | Architecture::Qwen2 | Architecture::Phi3 | Architecture::Nanochat => BlockVariant::default(),
        };
        // GPT-2's LayerNorm has its own epsilon key.
        let eps_key = if variant.layer_norm { "attention.layer_norm_epsilon" } else { "attention.layer_norm_rms_epsilon" };
        let cfg = ModelConfig {
            architecture,
            vocab_size,
            hidden_size,
            intermediate_size: self.required(&key("feed_forward_length"), MAX_WIDTH * 8)?,
            n_layers,
            n_heads,
            n_kv_heads,
            head_dim,
            rms_norm_eps: self.meta_f32(&key(eps_key))?.unwrap_or(1e-5),
            rope_theta: self.meta_f32(&key("rope.freq_base"))?.unwrap_or(10_000.0),
            rope_style: match architecture {
                Architecture::Llama => RopeStyle::Interleaved,
                // llama.cpp rotates Qwen and Gemma 3 NeoX-style.
                // GPT-2 has no RoPE; the style is never used.
                Architecture::Qwen2
                | Architecture::Qwen3
                | Architecture::Phi3
                | Architecture::Nanochat
                | Architecture::Gemma3
                | Architecture::Gpt2 => RopeStyle::HalfSplit,
            },
            rope_freq_factors,
            context_length: self.required(&key("context_length"), MAX_CONTEXT)?,
            tie_word_embeddings: !self.contains("output.weight"),
            variant,
        };
        cfg.validate()?;
        // After validation, so that a corrupt head size is reported as such.
        if let Some(rotated) = self.meta_usize(&key("rope.dimension_count"))? {
            if rotated != cfg.head_dim {
                return Err(Error::unsupported(format!(
                    "partial rotary embeddings ({rotated} of {} dimensions per head) are not supported",
                    cfg.head_dim
                )));
            }
        }
        Ok(cfg)
    }

    /// Each tensor's block format, for reporting what a file holds.
    pub fn tensor_dtypes(&self) -> Vec<(String, GgmlDType)> {
        let mut v: Vec<_> = self.content.tensor_infos.iter().map(|(n, i)| (n.clone(), i.ggml_dtype)).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }
}

/// candle reads only the block formats it has kernels for and names any other by its ggml type
/// id; this names the known ones (llama.cpp's `ggml_type`), so the user learns which format it is.
fn unsupported_type(candle_error: &str) -> Option<String> {
    let id: u32 = candle_error.strip_prefix("unknown dtype for tensor ")?.trim().parse().ok()?;
    const NAMES: [(u32, &str); 18] = [
        (16, "IQ2_XXS"),
        (17, "IQ2_XS"),
        (18, "IQ3_XXS"),
        (19, "IQ1_S"),
        (20, "IQ4_NL"),
        (21, "IQ3_S"),
        (22, "IQ2_S"),
        (23, "IQ4_XS"),
        (24, "I8"),
        (25, "I16"),
        (26, "I32"),
        (27, "I64"),
        (28, "F64"),
        (29, "IQ1_M"),
        (34, "TQ1_0"),
        (35, "TQ2_0"),
        (39, "MXFP4"),
        (40, "NVFP4"),
    ];
    Some(NAMES.iter().find(|(n, _)| *n == id).map_or_else(|| format!("ggml type {id}"), |(_, name)| format!("{name} (ggml type {id})")))
}

impl WeightSource for GgufFile {
    fn contains(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    fn load(&mut self, name: &str) -> Result<Weight> {
        if !self.contains(name) {
            return Err(Error::corrupt(format!("GGUF file has no tensor '{name}'")));
        }
        let q = self
            .content
            .tensor(&mut self.reader, name, &Device::Cpu)
            .map_err(|e| Error::corrupt(format!("cannot read tensor '{name}' from {}: {}", self.path.display(), candle_message(&e))))?;
        Ok(match q.dtype() {
            // F32 stays in candle's blocks, which our kernels read as they are (`for_kernels`).
            GgmlDType::F16 | GgmlDType::BF16 => Weight::Dense(q.dequantize(&Device::Cpu)?),
            _ => Weight::Quantized(Arc::new(q)),
        })
    }
}

/// Every tensor must fit inside the file, computed with checked arithmetic: candle multiplies the
/// dims unchecked, so a wrapped product could otherwise pass for a small tensor.
fn check_tensor_extents(content: &Content, file_len: u64) -> std::result::Result<(), String> {
    for (name, info) in &content.tensor_infos {
        let dtype = info.ggml_dtype;
        let elems = info.shape.dims().iter().try_fold(1u64, |acc, &d| acc.checked_mul(d as u64));
        let bytes = elems
            .filter(|e| e % dtype.block_size() as u64 == 0)
            .and_then(|e| (e / dtype.block_size() as u64).checked_mul(dtype.type_size() as u64));
        let end = bytes.and_then(|b| b.checked_add(info.offset)).and_then(|b| b.checked_add(content.tensor_data_offset));
        match end {
            Some(end) if end <= file_len => {}
            _ => return Err(format!("tensor '{name}' with shape {:?} does not fit in the file", info.shape.dims())),
        }
    }
    Ok(())
}
