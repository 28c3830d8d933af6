//! nanochat's checkpoint layout. Upstream writes, under `$NANOCHAT_BASE_DIR`:
//!
//! ```text
//! tokenizer/tokenizer.pkl
//! {base,chatsft,chatrl}_checkpoints/<tag>/model_<step>.pt  (torch.save of the state_dict)
//! {base,chatsft,chatrl}_checkpoints/<tag>/meta_<step>.json
//! ```
//!
//! We accept the checkpoint directory (its highest step is used) or one `model_<step>.pt` /
//! `model_<step>.safetensors` file in it. The tokenizer is looked for in `tokenizer/` inside the
//! checkpoint directory first (a self-contained copy), then two levels up, where upstream keeps
//! it. Tensors are read without Python: the `.pt` zip through candle's unpickler, safetensors
//! directly; bf16 is widened to f32 and torch.compile's `_orig_mod.` prefix is dropped.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use safetensors::{Dtype, SafeTensors};

use crate::error::{Error, ErrorKind, Result, ResultExt};
use crate::weights::{Weight, WeightSource};

pub struct CheckpointFiles {
    pub weights: PathBuf,
    pub meta: PathBuf,
    pub tokenizer: PathBuf,
}

/// Whether `path` looks like a nanochat checkpoint: a `.pt` file, a `model_<step>.safetensors`
/// file, or a directory holding a `meta_<step>.json`.
pub fn is_checkpoint(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if path.is_dir() {
        return list_steps(path, "meta_", ".json").map(|s| !s.is_empty()).unwrap_or(false);
    }
    name.ends_with(".pt") || step_of(name, "model_", ".safetensors").is_some()
}

/// The weights, meta and tokenizer files `path` stands for.
pub fn locate(path: &Path) -> Result<CheckpointFiles> {
    let (dir, weights, step) = if path.is_dir() {
        let pick = |ext: &str| -> Result<Option<(PathBuf, String)>> {
            Ok(list_steps(path, "model_", ext)?.into_iter().max_by_key(|(n, _)| *n).map(|(_, s)| (path.join(format!("model_{s}{ext}")), s)))
        };
        let (weights, step) = match pick(".pt")? {
            Some(found) => found,
            None => pick(".safetensors")?.ok_or_else(|| {
                Error::new(ErrorKind::NotFound, format!("{} has no model_<step>.pt or model_<step>.safetensors", path.display()))
            })?,
        };
        (path.to_owned(), weights, step)
    } else {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let step = step_of(name, "model_", ".pt").or_else(|| step_of(name, "model_", ".safetensors")).ok_or_else(|| {
            Error::invalid(format!(
                "'{name}' is not named model_<step>.pt or model_<step>.safetensors, so its meta_<step>.json cannot be found"
            ))
        })?;
        let dir = path.parent().map(Path::to_owned).unwrap_or_default();
        (dir, path.to_owned(), step.to_owned())
    };
    let meta = dir.join(format!("meta_{step}.json"));
    if !meta.is_file() {
        return Err(Error::new(
            ErrorKind::NotFound,
            format!("{} is missing: nanochat writes it next to {}", meta.display(), weights.display()),
        ));
    }
    let candidates = [dir.join("tokenizer/tokenizer.pkl"), dir.join("../../tokenizer/tokenizer.pkl")];
    let tokenizer = candidates.iter().find(|p| p.is_file()).cloned().ok_or_else(|| {
        Error::new(
            ErrorKind::NotFound,
            format!(
                "no tokenizer.pkl at {} or {} (nanochat keeps it in $NANOCHAT_BASE_DIR/tokenizer/)",
                candidates[0].display(),
                candidates[1].display()
            ),
        )
    })?;
    Ok(CheckpointFiles { weights, meta, tokenizer })
}

/// `model_000123.pt` -> "000123" for prefix "model_" and suffix ".pt".
fn step_of<'a>(name: &'a str, prefix: &str, suffix: &str) -> Option<&'a str> {
    let step = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
    (!step.is_empty() && step.bytes().all(|b| b.is_ascii_digit())).then_some(step)
}

/// (numeric step, step as spelled) of every `<prefix><step><suffix>` file in `dir`.
fn list_steps(dir: &Path, prefix: &str, suffix: &str) -> Result<Vec<(u128, String)>> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::from(e).context(format!("cannot list {}", dir.display())))?;
    Ok(entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_owned();
            let step = step_of(&name, prefix, suffix)?;
            Some((step.parse().ok()?, step.to_owned()))
        })
        .collect())
}

/// Every tensor of a checkpoint by its (prefix-free) name, in f32.
pub struct TensorMap {
    path: PathBuf,
    tensors: HashMap<String, Tensor>,
}

impl TensorMap {
    pub fn read(path: &Path) -> Result<Self> {
        Self::read_state_dict(path, None)
    }

    /// The state dict of a `.pt` file (under `key` where the pickle is a dict holding it, as
    /// nanoGPT's `ckpt.pt` keeps it under "model"), or of a safetensors file.
    pub fn read_state_dict(path: &Path, key: Option<&str>) -> Result<Self> {
        let is_pt = path.extension().is_some_and(|e| e == "pt");
        let raw = if is_pt { read_pt(path, key) } else { read_safetensors(path) };
        let advice = if is_pt { "a torch.save'd state_dict" } else { "a safetensors file" };
        let raw =
            raw.map_err(|e| Error::corrupt(format!("{} is not a readable checkpoint ({}); expected {advice}", path.display(), e.message)))?;
        let mut tensors = HashMap::with_capacity(raw.len());
        for (name, t) in raw {
            let t = t.to_dtype(DType::F32).map_err(|e| Error::corrupt(format!("{}: tensor '{name}': {e}", path.display())))?;
            tensors.insert(name.strip_prefix("_orig_mod.").unwrap_or(&name).to_owned(), t);
        }
        Ok(Self { path: path.to_owned(), tensors })
    }

    /// A tensor that old checkpoints lack, filled with `value` (upstream patches the same way).
    pub fn load_or(&mut self, name: &str, len: usize, value: f32) -> Result<Vec<f32>> {
        let t = if self.contains(name) { self.load_checked(name, &[len])?.into_dense()? } else { Tensor::full(value, len, &Device::Cpu)? };
        Ok(t.to_vec1::<f32>()?)
    }

    /// Forgets the tensors a model has no use for by design (old buffers).
    pub fn drop_where(&mut self, unused: impl Fn(&str) -> bool) {
        self.tensors.retain(|name, _| !unused(name));
    }

    /// Upstream loads strictly: a tensor the model did not take means the checkpoint comes from
    /// another version of `model` with other parameters, which this code would silently mis-run.
    pub fn ensure_all_used(&self, model: &str) -> Result<()> {
        let mut left: Vec<&str> = self.tensors.keys().map(String::as_str).collect();
        if left.is_empty() {
            return Ok(());
        }
        left.sort_unstable();
        Err(Error::unsupported(format!("{} has tensors {model} does not use ({})", self.path.display(), left.join(", "))))
    }
}

impl WeightSource for TensorMap {
    fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    fn load(&mut self, name: &str) -> Result<Weight> {
        let t = self.tensors.remove(name).ok_or_else(|| Error::corrupt(format!("{} has no tensor '{name}'", self.path.display())))?;
        Ok(Weight::Dense(t))
    }
}

/// candle's unpickler can panic on malformed archives; a panic becomes an error here. torch
/// stores tensors uncompressed, so none can be larger than the file: checking that first keeps
/// a corrupted shape from requesting an impossible allocation.
fn read_pt(path: &Path, key: Option<&str>) -> Result<Vec<(String, Tensor)>> {
    let file_len = std::fs::metadata(path)?.len();
    let read = || -> candle_core::Result<Vec<(String, Tensor)>> {
        let pth = candle_core::pickle::PthTensors::new(path, key)?;
        let mut out = Vec::new();
        for (name, info) in pth.tensor_infos() {
            let bytes = info.layout.shape().dims().iter().try_fold(info.dtype.size_in_bytes() as u64, |acc, &d| acc.checked_mul(d as u64));
            if bytes.is_none_or(|b| b > file_len) {
                candle_core::bail!("tensor '{name}' of shape {:?} cannot fit in the file", info.layout.dims())
            }
            if let Some(t) = pth.get(name)? {
                out.push((name.clone(), t));
            }
        }
        Ok(out)
    };
    match catch_unwind(AssertUnwindSafe(read)) {
        Ok(r) => r.map_err(|e| Error::corrupt(crate::error::candle_message(&e))),
        Err(_) => Err(Error::corrupt("malformed PyTorch archive")),
    }
}

fn read_safetensors(path: &Path) -> Result<Vec<(String, Tensor)>> {
    let data = std::fs::read(path)?;
    let st = SafeTensors::deserialize(&data).or_kind(ErrorKind::CorruptFile, "invalid safetensors header")?;
    st.tensors()
        .into_iter()
        .map(|(name, view)| {
            let dtype = match view.dtype() {
                Dtype::F32 => DType::F32,
                Dtype::F16 => DType::F16,
                Dtype::BF16 => DType::BF16,
                other => return Err(Error::unsupported(format!("tensor '{name}' has dtype {other:?}; expected f32, f16 or bf16"))),
            };
            let t = Tensor::from_raw_buffer(view.data(), dtype, view.shape(), &Device::Cpu)
                .map_err(|e| Error::corrupt(format!("tensor '{name}': {e}")))?;
            Ok((name, t))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_parsed_from_names() {
        assert_eq!(step_of("model_000123.pt", "model_", ".pt"), Some("000123"));
        assert_eq!(step_of("model_.pt", "model_", ".pt"), None);
        assert_eq!(step_of("model_12a.pt", "model_", ".pt"), None);
        assert_eq!(step_of("optim_000001_rank0.pt", "model_", ".pt"), None);
    }
}
