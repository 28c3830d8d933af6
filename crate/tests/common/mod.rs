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

#![allow(dead_code)]

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{AddedToken, DecoderWrapper, PreTokenizerWrapper};

pub const CHATML_TEMPLATE: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

pub const BOS: &str = "<|endoftext|>";
pub const IM_START: &str = "<|im_start|>";
pub const IM_END: &str = "<|im_end|>";

/// Prompts that exercise merges, bytes outside ASCII, and special tokens.
pub const PROMPTS: &[&str] = &[
    "Hello world, the cat sat on the mat.",
    "<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n",
    "naïve café — 日本語 🙂 tabs\tand\nnewlines   spaces 12345",
    "the the the the other hello Hello HELLO",
];

/// SplitMix64: small, deterministic, good enough for weights and fuzzing.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, n); n must be positive.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
    /// Uniform in [-scale, scale).
    pub fn symmetric(&mut self, scale: f32) -> f32 {
        (self.unit() * 2.0 - 1.0) * scale
    }
    pub fn chance(&mut self, p: f32) -> bool {
        self.unit() < p
    }
}

#[derive(Debug, Clone)]
pub struct TinySpec {
    pub hidden: usize,
    pub n_layers: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub ffn: usize,
    pub context: usize,
    pub rms_eps: f32,
    pub rope_theta: f32,
    /// No separate `output.weight` / `lm_head.weight`: the embedding doubles as the LM head.
    pub tied: bool,
}

impl Default for TinySpec {
    fn default() -> Self {
        Self {
            hidden: 64,
            n_layers: 2,
            n_heads: 4,
            n_kv_heads: 2,
            head_dim: 16,
            ffn: 128,
            context: 512,
            rms_eps: 1e-5,
            rope_theta: 10_000.0,
            tied: false,
        }
    }
}

/// One tensor under its GGUF name, in Hugging Face layout, row-major.
#[derive(Clone)]
pub struct RawTensor {
    pub name: String,
    pub dims: Vec<usize>,
    pub data: Vec<f32>,
}

pub struct TinyModel {
    pub spec: TinySpec,
    /// Token strings in id order (byte-level unicode spelling).
    pub tokens: Vec<String>,
    /// llama.cpp token types: 1 normal, 3 control.
    pub token_types: Vec<i32>,
    pub merges: Vec<(String, String)>,
    pub bos_id: u32,
    pub eos_id: u32,
    pub tensors: Vec<RawTensor>,
}

/// GPT-2's reversible byte → printable-unicode map (same as the tokenizers crate's).
pub fn bytes_to_unicode() -> Vec<char> {
    let printable = |b: u8| (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b);
    let mut next = 256u32;
    (0..=255u8)
        .map(|b| {
            if printable(b) {
                b as char
            } else {
                let c = char::from_u32(next).unwrap();
                next += 1;
                c
            }
        })
        .collect()
}

const MERGES: &[(&str, &str)] = &[
    ("h", "e"),
    ("l", "l"),
    ("Ġ", "t"),
    ("Ġt", "he"),
    ("o", "r"),
    ("Ġ", "w"),
    ("Ġw", "or"),
    ("a", "t"),
    ("Ġ", "s"),
    ("Ġs", "at"),
    ("Ġ", "c"),
    ("Ġc", "at"),
    ("i", "n"),
    ("Ġ", "a"),
    ("e", "r"),
    ("Ġ", "o"),
    ("Ġo", "n"),
    ("H", "e"),
    ("He", "ll"),
    ("Hell", "o"),
    ("Ġ", "m"),
    ("Ġm", "at"),
    ("Ġ", "Ġ"),
];

impl TinyModel {
    pub fn new(seed: u64) -> Self {
        Self::with_spec(seed, TinySpec::default())
    }

    pub fn with_spec(seed: u64, spec: TinySpec) -> Self {
        let mut tokens: Vec<String> = bytes_to_unicode().into_iter().map(|c| c.to_string()).collect();
        let mut token_types = vec![1i32; tokens.len()];
        let mut merges = Vec::new();
        for (a, b) in MERGES {
            merges.push((a.to_string(), b.to_string()));
            let merged = format!("{a}{b}");
            assert!(!tokens.contains(&merged), "duplicate merge result {merged}");
            tokens.push(merged);
            token_types.push(1);
        }
        for special in [BOS, IM_START, IM_END] {
            tokens.push(special.to_string());
            token_types.push(3);
        }
        let bos_id = tokens.iter().position(|t| t == BOS).unwrap() as u32;
        let eos_id = tokens.iter().position(|t| t == IM_END).unwrap() as u32;

        let vocab = tokens.len();
        let s = &spec;
        let (h, qd, kvd, ff) = (s.hidden, s.n_heads * s.head_dim, s.n_kv_heads * s.head_dim, s.ffn);
        let mut rng = Rng::new(seed);
        let mut mat = |name: String, rows: usize, cols: usize, scale: f32| RawTensor {
            name,
            dims: vec![rows, cols],
            data: (0..rows * cols).map(|_| rng.symmetric(scale)).collect(),
        };
        let mut tensors = vec![mat("token_embd.weight".into(), vocab, h, 0.5)];
        for l in 0..s.n_layers {
            let p = format!("blk.{l}");
            tensors.push(mat(format!("{p}.attn_q.weight"), qd, h, 0.35));
            tensors.push(mat(format!("{p}.attn_k.weight"), kvd, h, 0.35));
            tensors.push(mat(format!("{p}.attn_v.weight"), kvd, h, 0.3));
            tensors.push(mat(format!("{p}.attn_output.weight"), h, qd, 0.2));
            tensors.push(mat(format!("{p}.ffn_gate.weight"), ff, h, 0.25));
            tensors.push(mat(format!("{p}.ffn_up.weight"), ff, h, 0.25));
            tensors.push(mat(format!("{p}.ffn_down.weight"), h, ff, 0.15));
        }
        if !s.tied {
            tensors.push(mat("output.weight".into(), vocab, h, 0.3));
        }
        let mut norm = |name: String| RawTensor { name, dims: vec![h], data: (0..h).map(|_| 1.0 + rng.symmetric(0.2)).collect() };
        for l in 0..s.n_layers {
            tensors.push(norm(format!("blk.{l}.attn_norm.weight")));
            tensors.push(norm(format!("blk.{l}.ffn_norm.weight")));
        }
        tensors.push(norm("output_norm.weight".into()));
        Self { spec, tokens, token_types, merges, bos_id, eos_id, tensors }
    }

    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }

    pub fn tensor(&self, name: &str) -> &RawTensor {
        self.tensors.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("no tensor {name}"))
    }

    // ---------------------------------------------------------------- GGUF

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
        let meta = self.gguf_metadata();
        let tensors = self.gguf_tensors(dtype);
        let m: Vec<(&str, &Value)> = meta.iter().map(|(k, v)| (k.as_str(), v)).collect();
        let t: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
        gguf_file::write(&mut cursor, &m, &t).unwrap();
        cursor.into_inner()
    }

    // ---------------------------------------------------------------- Hugging Face

    pub fn hf_config(&self) -> serde_json::Value {
        let s = &self.spec;
        serde_json::json!({
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "vocab_size": self.vocab_size(),
            "hidden_size": s.hidden,
            "intermediate_size": s.ffn,
            "num_hidden_layers": s.n_layers,
            "num_attention_heads": s.n_heads,
            "num_key_value_heads": s.n_kv_heads,
            "head_dim": s.head_dim,
            "rms_norm_eps": s.rms_eps as f64,
            "rope_theta": s.rope_theta as f64,
            "max_position_embeddings": s.context,
            "tie_word_embeddings": s.tied,
            "torch_dtype": "float32",
            "bos_token_id": self.bos_id,
            "eos_token_id": self.eos_id,
            "hidden_act": "silu"
        })
    }

    pub fn hf_tokenizer_config(&self) -> serde_json::Value {
        serde_json::json!({
            "bos_token": BOS,
            "eos_token": {"content": IM_END, "special": true},
            "add_bos_token": false,
            "chat_template": CHATML_TEMPLATE,
            "model_max_length": self.spec.context,
        })
    }

    /// Tensors under their Hugging Face names, in HF layout.
    pub fn hf_tensors(&self) -> Vec<(String, Vec<usize>, Vec<f32>)> {
        self.tensors.iter().map(|t| (hf_name(&t.name), t.dims.clone(), t.data.clone())).collect()
    }

    /// A byte-level BPE tokenizer equivalent to what kvengine builds from the GGUF metadata.
    pub fn hf_tokenizer(&self) -> tokenizers::Tokenizer {
        let vocab: tokenizers::models::bpe::Vocab = self.tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
        let bpe = BPE::builder().vocab_and_merges(vocab, self.merges.clone()).build().unwrap();
        let mut tok = tokenizers::Tokenizer::new(bpe);
        tok.with_pre_tokenizer(Some(PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, true))));
        tok.with_decoder(Some(DecoderWrapper::ByteLevel(ByteLevel::default())));
        let specials: Vec<AddedToken> = self
            .tokens
            .iter()
            .zip(&self.token_types)
            .filter(|(_, &ty)| ty == 3)
            .map(|(t, _)| AddedToken::from(t.clone(), true))
            .collect();
        tok.add_special_tokens(specials).unwrap();
        tok
    }

    /// config.json, tokenizer.json, tokenizer_config.json (everything but the weights).
    pub fn write_hf_side_files(&self, dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        write_json(&dir.join("config.json"), &self.hf_config());
        write_json(&dir.join("tokenizer_config.json"), &self.hf_tokenizer_config());
        self.hf_tokenizer().save(dir.join("tokenizer.json"), true).unwrap();
    }

    /// A single-file checkpoint: `model.safetensors`.
    pub fn write_hf_dir(&self, dir: &Path) {
        self.write_hf_side_files(dir);
        write_safetensors(&dir.join("model.safetensors"), &self.hf_tensors());
    }

    /// A sharded checkpoint: `model-0000i-of-0000n.safetensors` plus
    /// `model.safetensors.index.json`, tensors dealt round-robin so every shard holds some of
    /// each kind.
    pub fn write_hf_sharded(&self, dir: &Path, n_shards: usize) {
        self.write_hf_side_files(dir);
        let all = self.hf_tensors();
        let mut weight_map = serde_json::Map::new();
        let mut total = 0usize;
        for shard in 0..n_shards {
            let name = format!("model-{:05}-of-{:05}.safetensors", shard + 1, n_shards);
            let part: Vec<_> = all.iter().enumerate().filter(|(i, _)| i % n_shards == shard).map(|(_, t)| t.clone()).collect();
            for (tname, _, data) in &part {
                weight_map.insert(tname.clone(), serde_json::Value::String(name.clone()));
                total += data.len() * 4;
            }
            write_safetensors(&dir.join(&name), &part);
        }
        let index = serde_json::json!({ "metadata": { "total_size": total }, "weight_map": weight_map });
        write_json(&dir.join("model.safetensors.index.json"), &index);
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

/// GGUF tensor names to Hugging Face Llama names.
pub fn hf_name(gguf: &str) -> String {
    match gguf {
        "token_embd.weight" => return "model.embed_tokens.weight".into(),
        "output_norm.weight" => return "model.norm.weight".into(),
        "output.weight" => return "lm_head.weight".into(),
        _ => {}
    }
    let rest = gguf.strip_prefix("blk.").expect("block tensor");
    let (layer, tail) = rest.split_once('.').unwrap();
    let module = tail.strip_suffix(".weight").unwrap();
    let hf = match module {
        "attn_norm" => "input_layernorm",
        "ffn_norm" => "post_attention_layernorm",
        "attn_q" => "self_attn.q_proj",
        "attn_k" => "self_attn.k_proj",
        "attn_v" => "self_attn.v_proj",
        "attn_output" => "self_attn.o_proj",
        "ffn_gate" => "mlp.gate_proj",
        "ffn_up" => "mlp.up_proj",
        "ffn_down" => "mlp.down_proj",
        other => panic!("unknown module {other}"),
    };
    format!("model.layers.{layer}.{hf}.weight")
}

pub fn write_gguf_parts(path: &Path, metadata: &[(String, Value)], tensors: &[(String, QTensor)]) {
    let m: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let t: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut w = BufWriter::new(File::create(path).unwrap());
    gguf_file::write(&mut w, &m, &t).unwrap();
    w.flush().unwrap();
}

pub fn write_safetensors(path: &Path, tensors: &[(String, Vec<usize>, Vec<f32>)]) {
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .iter()
        .map(|(n, dims, data)| (n.clone(), dims.clone(), data.iter().flat_map(|x| x.to_le_bytes()).collect()))
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = bytes
        .iter()
        .map(|(n, dims, b)| (n.clone(), safetensors::tensor::TensorView::new(safetensors::Dtype::F32, dims.clone(), b).unwrap()))
        .collect();
    let mut info = HashMap::new();
    info.insert("format".to_string(), "pt".to_string());
    safetensors::serialize_to_file(views, Some(info), path).unwrap();
}

pub fn write_json(path: &Path, v: &serde_json::Value) {
    std::fs::write(path, serde_json::to_string_pretty(v).unwrap()).unwrap();
}

pub fn load(path: &Path) -> kvengine::Result<kvengine::LoadedModel> {
    kvengine::load(path, &mut |_| {})
}

pub fn load_ok(path: &Path) -> kvengine::LoadedModel {
    load(path).unwrap_or_else(|e| panic!("loading {} failed: {:?}: {}", path.display(), e.kind, e.message))
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
