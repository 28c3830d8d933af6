//! Opens whatever the user pointed at (a `.gguf` file, a Hugging Face directory, or a nanochat
//! checkpoint directory or `.pt` file, or a nanoGPT `ckpt.pt`) and returns the model together with its tokenizer and
//! chat template.

use std::path::Path;

use crate::any_model::LanguageModel;
use crate::chat_template::{ChatTemplate, GEMMA_TURNS};
use crate::config::{Architecture, ModelConfig};
use crate::error::{Error, ErrorKind, Result, ResultExt};
use crate::gguf::GgufFile;
use crate::matmul::MatmulOptions;
use crate::nanochat::checkpoint::{self, TensorMap};
use crate::nanochat::tiktoken::TiktokenBpe;
use crate::nanochat::NanochatModel;
use crate::placement::{load_llama, Placement};
use crate::safetensors_dir::SafetensorsDir;
use crate::tokenizer::Tokenizer;

pub struct LoadedModel {
    pub model: LanguageModel,
    pub tokenizer: Tokenizer,
    pub chat_template: Option<ChatTemplate>,
    /// Free-form description of the weights' formats, e.g. "gguf q4_1".
    pub format: String,
}

pub fn load(path: &Path, progress: &mut dyn FnMut(f64)) -> Result<LoadedModel> {
    load_on(path, Placement::default(), progress)
}

/// `load`, with the model placed on the given device.
pub fn load_on(path: &Path, placement: Placement, progress: &mut dyn FnMut(f64)) -> Result<LoadedModel> {
    crate::cpu_features::check()?;
    crate::memory::prefer_mmap_for_large_buffers();
    let meta = std::fs::metadata(path).map_err(|e| {
        Error::from(e).context(format!(
            "cannot open model '{}' (expected a .gguf file, a Hugging Face model directory or a nanochat checkpoint)",
            path.display()
        ))
    })?;
    if crate::nanogpt::claims(path) {
        load_nanogpt(path, placement, progress)
    } else if checkpoint::is_checkpoint(path) {
        load_nanochat(path, crate::placement::check_nanochat(placement)?, progress)
    } else if meta.is_dir() {
        load_hf_dir(path, placement, progress)
    } else {
        load_gguf(path, placement, progress)
    }
}

fn load_gguf(path: &Path, placement: Placement, progress: &mut dyn FnMut(f64)) -> Result<LoadedModel> {
    let mut file = GgufFile::open(path)?;
    let config = file.config()?;
    let tokenizer = Tokenizer::from_gguf(&file)?;
    let name = |id: Option<u32>| id.and_then(|i| tokenizer.token_text(i)).unwrap_or_default();
    let builtin = (config.architecture == Architecture::Gemma3).then_some(GEMMA_TURNS);
    let chat_template = match file.meta_str("tokenizer.chat_template").or(builtin) {
        Some(src) => Some(ChatTemplate::new(src, name(tokenizer.bos_token), name(tokenizer.eos_token))?),
        None => None,
    };
    let format = weight_format(&file);
    check_vocab(&config, &tokenizer)?;
    let model = load_llama(&mut file, config, placement, progress)?;
    Ok(LoadedModel { model, tokenizer, chat_template, format })
}

fn load_hf_dir(dir: &Path, placement: Placement, progress: &mut dyn FnMut(f64)) -> Result<LoadedModel> {
    let mut weights = SafetensorsDir::open(dir)?;
    let config = weights.config()?;
    let tok_config_path = dir.join("tokenizer_config.json");
    let tok_config: serde_json::Value = if tok_config_path.exists() {
        let text = crate::safetensors_dir::read_text(&tok_config_path)?;
        serde_json::from_str(&text).or_kind(ErrorKind::CorruptFile, format!("invalid {}", tok_config_path.display()))?
    } else {
        serde_json::Value::Null
    };
    let tokenizer = Tokenizer::from_hf_dir(dir, &tok_config)?;
    let name = |id: Option<u32>| id.and_then(|i| tokenizer.token_text(i)).unwrap_or_default();
    let chat_template = match hf_chat_template(&tok_config) {
        Some(src) => Some(ChatTemplate::new(&src, name(tokenizer.bos_token), name(tokenizer.eos_token))?),
        None => None,
    };
    check_vocab(&config, &tokenizer)?;
    let model = load_llama(&mut weights, config, placement, progress)?;
    Ok(LoadedModel { model, tokenizer, chat_template, format: "safetensors".into() })
}

/// nanochat has no chat template: its format is rendered to ids (crate::nanochat::render).
fn load_nanochat(path: &Path, options: MatmulOptions, progress: &mut dyn FnMut(f64)) -> Result<LoadedModel> {
    let files = checkpoint::locate(path)?;
    let text = crate::safetensors_dir::read_text(&files.meta)?;
    let meta: crate::nanochat::config::Meta = serde_json::from_str(&text)
        .or_kind(ErrorKind::CorruptFile, format!("invalid {} (expected nanochat's meta with a model_config)", files.meta.display()))?;
    let config = meta.model_config.resolve()?;
    let tokenizer = Tokenizer::from_tiktoken(TiktokenBpe::from_pickle_file(&files.tokenizer)?)?;
    let mut tensors = TensorMap::read(&files.weights)?;
    let model = NanochatModel::load(&mut tensors, config, options, progress)?;
    check_vocab(&model.config.base, &tokenizer)?;
    let format = if files.weights.extension().is_some_and(|e| e == "pt") { "nanochat pt" } else { "nanochat safetensors" };
    Ok(LoadedModel { model: model.into(), tokenizer, chat_template: None, format: format.into() })
}

/// A nanoGPT `ckpt.pt`: a base model with no chat template.
fn load_nanogpt(path: &Path, placement: Placement, progress: &mut dyn FnMut(f64)) -> Result<LoadedModel> {
    let header = crate::nanogpt::Header::read(path)?;
    let tokenizer = crate::nanogpt::tokenizer(path, header.dataset.as_deref())?;
    check_vocab(&header.config, &tokenizer)?;
    let mut weights = crate::nanogpt::NanoGptWeights::read(path)?;
    let model = load_llama(&mut weights, header.config, placement, progress)?;
    weights.ensure_all_used()?;
    Ok(LoadedModel { model, tokenizer, chat_template: None, format: "nanogpt pt".into() })
}

/// `chat_template` is either a string or a list of named templates; we take "default".
fn hf_chat_template(config: &serde_json::Value) -> Option<String> {
    match config.get("chat_template")? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Array(list) => list
            .iter()
            .find(|t| t.get("name").and_then(|n| n.as_str()) == Some("default"))
            .and_then(|t| t.get("template")?.as_str().map(str::to_owned)),
        _ => None,
    }
}

fn weight_format(file: &GgufFile) -> String {
    let mut kinds: Vec<String> = file.tensor_dtypes().into_iter().map(|(_, d)| format!("{d:?}").to_lowercase()).collect();
    kinds.sort();
    kinds.dedup();
    format!("gguf {}", kinds.join("+"))
}

/// A tokenizer that can emit ids past the embedding table would crash the forward pass later.
fn check_vocab(config: &ModelConfig, tokenizer: &Tokenizer) -> Result<()> {
    if tokenizer.vocab_size() > config.vocab_size {
        return Err(Error::corrupt(format!(
            "the tokenizer has {} tokens but the embedding table only {}",
            tokenizer.vocab_size(),
            config.vocab_size
        )));
    }
    Ok(())
}
