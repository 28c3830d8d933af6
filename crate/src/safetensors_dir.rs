//! Hugging Face checkpoint directories: `config.json` plus one or more `*.safetensors` files
//! (with or without `model.safetensors.index.json`). Tensors are memory-mapped and widened to f32.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use memmap2::Mmap;
use safetensors::{Dtype, SafeTensors};

use crate::config::{HfConfig, ModelConfig};
use crate::error::{Error, ErrorKind, Result, ResultExt};
use crate::weights::{Weight, WeightSource};

pub struct SafetensorsDir {
    pub dir: PathBuf,
    files: Vec<(PathBuf, Mmap)>,
    /// Tensor name → index into `files`.
    index: HashMap<String, usize>,
}

impl SafetensorsDir {
    pub fn open(dir: &Path) -> Result<Self> {
        let mut names = safetensors_files(dir)?;
        names.sort();
        let mut files = Vec::new();
        let mut index = HashMap::new();
        for name in names {
            let path = dir.join(&name);
            let file = File::open(&path).map_err(|e| Error::from(e).context(format!("cannot open {}", path.display())))?;
            // SAFETY: the mapping is read-only; like every mmap-based loader we assume the file is
            // not truncated underneath us while the model is alive.
            let mmap = unsafe { Mmap::map(&file) }.or_kind(ErrorKind::Internal, format!("cannot map {}", path.display()))?;
            let st = SafeTensors::deserialize(&mmap)
                .or_kind(ErrorKind::CorruptFile, format!("{} is not a valid safetensors file", path.display()))?;
            for tensor_name in st.names() {
                index.insert(tensor_name.to_string(), files.len());
            }
            files.push((path, mmap));
        }
        Ok(Self { dir: dir.to_owned(), files, index })
    }

    pub fn config(&self) -> Result<ModelConfig> {
        let path = self.dir.join("config.json");
        let text = read_text(&path)?;
        let hf: HfConfig = serde_json::from_str(&text).or_kind(ErrorKind::CorruptFile, format!("invalid {}", path.display()))?;
        let mut cfg = hf.resolve()?;
        // Checkpoints that tie embeddings often say so only by omitting lm_head.
        cfg.tie_word_embeddings |= !self.index.contains_key("lm_head.weight");
        Ok(cfg)
    }
}

/// The shard list: from the index when there is one (only names inside `dir`), else every
/// `*.safetensors` file in the directory.
fn safetensors_files(dir: &Path) -> Result<Vec<String>> {
    let index_path = dir.join("model.safetensors.index.json");
    if index_path.exists() {
        let text = read_text(&index_path)?;
        let json: serde_json::Value =
            serde_json::from_str(&text).or_kind(ErrorKind::CorruptFile, format!("invalid {}", index_path.display()))?;
        let map = json
            .get("weight_map")
            .and_then(|m| m.as_object())
            .ok_or_else(|| Error::corrupt(format!("{} has no 'weight_map' object", index_path.display())))?;
        let mut names: Vec<String> = Vec::new();
        for shard in map.values() {
            let shard = shard.as_str().ok_or_else(|| Error::corrupt(format!("{}: shard names must be strings", index_path.display())))?;
            let plain_name = !shard.contains(['/', '\\', '\0']) && !shard.starts_with('.') && shard.ends_with(".safetensors");
            if !plain_name {
                return Err(Error::corrupt(format!(
                    "{}: shard '{shard}' must be a .safetensors file in the same directory",
                    index_path.display()
                )));
            }
            if !names.iter().any(|n| n == shard) {
                names.push(shard.to_owned());
            }
        }
        if names.is_empty() {
            return Err(Error::corrupt(format!("{} lists no shards", index_path.display())));
        }
        return Ok(names);
    }
    let names: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".safetensors"))
        .collect();
    if names.is_empty() {
        return Err(Error::new(ErrorKind::NotFound, format!("no .safetensors files in {}", dir.display())));
    }
    Ok(names)
}

/// GGUF tensor names (what the model asks for) to Hugging Face Llama/Qwen2 names.
fn hf_name(gguf: &str) -> String {
    let fixed = match gguf {
        "token_embd.weight" => Some("model.embed_tokens.weight"),
        "output_norm.weight" => Some("model.norm.weight"),
        "output.weight" => Some("lm_head.weight"),
        _ => None,
    };
    if let Some(name) = fixed {
        return name.to_owned();
    }
    let Some(rest) = gguf.strip_prefix("blk.") else { return gguf.to_owned() };
    let Some((layer, tail)) = rest.split_once('.') else { return gguf.to_owned() };
    let (module, suffix) = tail.rsplit_once('.').unwrap_or((tail, "weight"));
    let hf_module = match module {
        "attn_norm" => "input_layernorm",
        "ffn_norm" => "post_attention_layernorm",
        "attn_q" => "self_attn.q_proj",
        "attn_k" => "self_attn.k_proj",
        "attn_v" => "self_attn.v_proj",
        "attn_output" => "self_attn.o_proj",
        "attn_q_norm" => "self_attn.q_norm",
        "attn_k_norm" => "self_attn.k_norm",
        "ffn_gate" => "mlp.gate_proj",
        "ffn_up" => "mlp.up_proj",
        "ffn_down" => "mlp.down_proj",
        other => other,
    };
    format!("model.layers.{layer}.{hf_module}.{suffix}")
}

impl WeightSource for SafetensorsDir {
    fn contains(&self, name: &str) -> bool {
        self.index.contains_key(&hf_name(name))
    }

    fn file_name_of(&self, name: &str) -> String {
        hf_name(name)
    }

    fn load(&mut self, name: &str) -> Result<Weight> {
        let hf = hf_name(name);
        let file =
            *self.index.get(&hf).ok_or_else(|| Error::corrupt(format!("checkpoint in {} has no tensor '{hf}'", self.dir.display())))?;
        let (path, mmap) = &self.files[file];
        let st = SafeTensors::deserialize(mmap).or_kind(ErrorKind::CorruptFile, path.display())?;
        let view = st.tensor(&hf).or_kind(ErrorKind::CorruptFile, format!("{}: tensor '{hf}'", path.display()))?;
        let dtype = match view.dtype() {
            Dtype::F32 => DType::F32,
            Dtype::F16 => DType::F16,
            Dtype::BF16 => DType::BF16,
            other => return Err(Error::unsupported(format!("tensor '{hf}' has dtype {other:?}; expected f32, f16 or bf16"))),
        };
        let t = Tensor::from_raw_buffer(view.data(), dtype, view.shape(), &Device::Cpu)
            .map_err(|e| Error::corrupt(format!("{}: tensor '{hf}': {e}", path.display())))?;
        Ok(Weight::Dense(t.to_dtype(DType::F32)?))
    }
}

/// Reads a UTF-8 text file, naming the file in any error.
pub fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| Error::from(e).context(format!("cannot read {}", path.display())))
}
