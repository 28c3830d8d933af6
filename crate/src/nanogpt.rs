//! karpathy/nanoGPT's checkpoints: the `ckpt.pt` its train.py writes, a `torch.save` of
//! `{model: state_dict, optimizer, model_args, iter_num, best_val_loss, config}`. The model is
//! GPT-2's block (`BlockVariant::gpt2`) with PyTorch's exact erf GELU; its tensors are served
//! under the GGUF names the Llama-family model asks for, so the same forward pass runs it.
//!
//! The tokenizer is the dataset's: character-level datasets keep `meta.pkl` (`itos`/`stoi`) at
//! `data/<dataset>/meta.pkl` beside the `out*` directories; GPT-2 BPE ones need GPT-2's
//! `tokenizer.json` placed next to the checkpoint (nanoGPT fetches it through tiktoken at run
//! time, which we cannot).

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use crate::config::{Activation, Architecture, BlockVariant, ModelConfig, RopeStyle};
use crate::error::{Error, ErrorKind, Result};
use crate::nanochat::checkpoint::TensorMap;
use crate::nanochat::pickle::{self, Value};
use crate::tokenizer::Tokenizer;
use crate::weights::{Weight, WeightSource};

/// nanoGPT's LayerNorm epsilon (fixed in its model code, not stored in the checkpoint).
const LAYER_NORM_EPS: f32 = 1e-5;
/// The pickle of a checkpoint holds no tensor data, only their descriptions and the optimizer's
/// structure; a larger one is not a checkpoint.
const MAX_PICKLE_BYTES: u64 = 64 << 20;

/// Whether `path` is for this module: a `.pt` file that is not a nanochat `model_<step>.pt`.
pub fn claims(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    path.is_file() && name.ends_with(".pt") && !name.starts_with("model_")
}

/// What the checkpoint says about itself besides its tensors.
pub struct Header {
    pub config: ModelConfig,
    /// `config['dataset']` of the training run, which names the tokenizer's directory.
    pub dataset: Option<String>,
}

impl Header {
    pub fn read(path: &Path) -> Result<Self> {
        let not_ours = |why: String| {
            Error::corrupt(format!(
                "{} is not a nanoGPT checkpoint ({why}); expected the ckpt.pt nanoGPT's train.py writes",
                path.display()
            ))
        };
        let top = read_pickles(path).map_err(|e| not_ours(e.message))?;
        let args =
            field(&top, "model_args").filter(|v| v.as_dict().is_some()).ok_or_else(|| not_ours("it has no model_args dict".into()))?;
        let dataset = match field(&top, "config").and_then(|c| field(c, "dataset")) {
            Some(Value::Str(name)) => Some(name.clone()),
            _ => None,
        };
        Ok(Self { config: resolve(args).map_err(|e| not_ours(e.message))?, dataset })
    }
}

/// The value under the string key `key` of a pickled dict.
fn field<'v>(dict: &'v Value, key: &str) -> Option<&'v Value> {
    dict.as_dict()?.find(|(k, _)| matches!(k, Value::Str(s) if s == key)).map(|(_, v)| v)
}

/// `model_args` as the runtime config.
fn resolve(args: &Value) -> Result<ModelConfig> {
    let size = |key: &str| -> Result<usize> {
        match field(args, key) {
            Some(Value::Int(n)) => usize::try_from(*n).map_err(|_| Error::corrupt(format!("model_args['{key}'] is {n}"))),
            _ => Err(Error::corrupt(format!("model_args has no integer '{key}'"))),
        }
    };
    let (n_embd, n_head) = (size("n_embd")?, size("n_head")?);
    if n_head == 0 || !n_embd.is_multiple_of(n_head) {
        return Err(Error::corrupt(format!("model_args n_embd {n_embd} is not a multiple of n_head {n_head}")));
    }
    // nanoGPT's default, for checkpoints from before it became an argument.
    let bias = match field(args, "bias") {
        Some(Value::Bool(b)) => *b,
        None => true,
        Some(_) => return Err(Error::corrupt("model_args['bias'] is not a bool")),
    };
    let config = ModelConfig {
        architecture: Architecture::Gpt2,
        vocab_size: size("vocab_size")?,
        hidden_size: n_embd,
        intermediate_size: n_embd.saturating_mul(4),
        n_layers: size("n_layer")?,
        n_heads: n_head,
        n_kv_heads: n_head,
        head_dim: n_embd / n_head,
        rms_norm_eps: LAYER_NORM_EPS,
        rope_theta: 10_000.0,
        rope_style: RopeStyle::HalfSplit,
        rope_freq_factors: Vec::new(),
        context_length: size("block_size")?,
        tie_word_embeddings: true,
        variant: BlockVariant::gpt2(Activation::GeluErf, bias),
    };
    config.validate()?;
    Ok(config)
}

/// The top-level object of the archive's `data.pkl`. Every `data.pkl` the archive holds goes
/// through our own unpickler, which bounds what it allocates by the pickle's size: candle's, which
/// reads the tensors afterwards, trusts length fields (one flipped byte asked it for 4 GB), so it
/// only ever sees pickles ours accepted.
fn read_pickles(path: &Path) -> Result<Value> {
    let file = std::fs::File::open(path)?;
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(|e| Error::corrupt(format!("not a zip archive: {e}")))?;
    let names: Vec<String> = zip
        .file_names()
        .filter_map(|n| n.map(|n| n.ends_with("data.pkl").then(|| n.into_owned())).transpose())
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| Error::corrupt(format!("a member's name: {e}")))?;
    let mut top = None;
    for name in names {
        let member = zip.by_name(&name).map_err(|e| Error::corrupt(format!("cannot read {name}: {e}")))?;
        if member.size() > MAX_PICKLE_BYTES {
            return Err(Error::corrupt(format!("{name} is {} bytes", member.size())));
        }
        let mut bytes = Vec::with_capacity(member.size() as usize);
        member.take(MAX_PICKLE_BYTES).read_to_end(&mut bytes).map_err(|e| Error::corrupt(format!("cannot read {name}: {e}")))?;
        let value = pickle::load(&bytes)?;
        top.get_or_insert(value);
    }
    top.ok_or_else(|| Error::corrupt("the archive has no data.pkl"))
}

/// The state dict under the GGUF names the model asks for.
pub struct NanoGptWeights {
    tensors: TensorMap,
}

impl NanoGptWeights {
    pub fn read(path: &Path) -> Result<Self> {
        let mut tensors = TensorMap::read_state_dict(path, Some("model"))?;
        // Checkpoints from before PyTorch 2 keep each layer's causal mask as a buffer.
        tensors.drop_where(|name| name.ends_with(".attn.bias") && !name.contains("c_attn"));
        Ok(Self { tensors })
    }

    /// nanoGPT loads strictly; so do we, since a tensor left over means a model we would mis-run.
    pub fn ensure_all_used(&self) -> Result<()> {
        self.tensors.ensure_all_used("this nanoGPT model (GPT-2's block)")
    }
}

/// `blk.3.attn_qkv.bias` -> `transformer.h.3.attn.c_attn.bias`.
fn state_dict_name(gguf: &str) -> Option<String> {
    let (tensor, kind) = gguf.rsplit_once('.')?;
    let top = match tensor {
        "token_embd" => Some("transformer.wte"),
        "position_embd" => Some("transformer.wpe"),
        "output_norm" => Some("transformer.ln_f"),
        "output" => Some("lm_head"),
        _ => None,
    };
    if let Some(top) = top {
        return Some(format!("{top}.{kind}"));
    }
    let (layer, part) = tensor.strip_prefix("blk.")?.split_once('.')?;
    let part = match part {
        "attn_norm" => "ln_1",
        "attn_qkv" => "attn.c_attn",
        "attn_output" => "attn.c_proj",
        "ffn_norm" => "ln_2",
        "ffn_up" => "mlp.c_fc",
        "ffn_down" => "mlp.c_proj",
        _ => return None,
    };
    Some(format!("transformer.h.{layer}.{part}.{kind}"))
}

impl WeightSource for NanoGptWeights {
    fn contains(&self, name: &str) -> bool {
        state_dict_name(name).is_some_and(|n| self.tensors.contains(&n))
    }

    fn load(&mut self, name: &str) -> Result<Weight> {
        let mapped = state_dict_name(name).ok_or_else(|| Error::new(ErrorKind::Internal, format!("no nanoGPT name for '{name}'")))?;
        self.tensors.load(&mapped)
    }

    fn file_name_of(&self, name: &str) -> String {
        state_dict_name(name).unwrap_or_else(|| name.to_owned())
    }
}

/// The dataset's tokenizer: `meta.pkl` next to the checkpoint or at nanoGPT's
/// `data/<dataset>/meta.pkl`, else a `tokenizer.json` next to the checkpoint.
pub fn tokenizer(path: &Path, dataset: Option<&str>) -> Result<Tokenizer> {
    let dir = path.parent().map(Path::to_owned).unwrap_or_default();
    let mut metas = vec![dir.join("meta.pkl")];
    metas.extend(dataset.map(|d| dir.join("..").join("data").join(d).join("meta.pkl")));
    if let Some(meta) = metas.iter().find(|p| p.is_file()) {
        return char_tokenizer(meta);
    }
    if dir.join("tokenizer.json").is_file() {
        return Tokenizer::from_hf_dir(&dir, &serde_json::Value::Null);
    }
    let looked: Vec<String> = metas.iter().chain([&dir.join("tokenizer.json")]).map(|p| p.display().to_string()).collect();
    Err(Error::new(
        ErrorKind::NotFound,
        format!(
            "no tokenizer for the nanoGPT checkpoint {} (looked for {}): a character-level run keeps its dataset's meta.pkl; \
             for GPT-2's BPE, put GPT-2's tokenizer.json next to the checkpoint",
            path.display(),
            looked.join(", ")
        ),
    ))
}

/// `meta.pkl` as nanoGPT's prepare.py writes it: `{vocab_size, itos: {id: char}, stoi}`.
fn char_tokenizer(meta: &Path) -> Result<Tokenizer> {
    let bad = |why: &str| Error::corrupt(format!("{} is not nanoGPT's character vocabulary: {why}", meta.display()));
    let data = std::fs::read(meta)?;
    let value = pickle::load(&data)?;
    let itos = value
        .as_dict()
        .and_then(|mut d| d.find(|(k, _)| **k == Value::Str("itos".into())).map(|(_, v)| v))
        .ok_or_else(|| bad("no 'itos' entry"))?;
    let mut pieces: HashMap<i64, String> = HashMap::new();
    for (id, piece) in itos.as_dict().ok_or_else(|| bad("'itos' is not a dict"))? {
        match (id, piece) {
            (Value::Int(id), Value::Str(piece)) => pieces.insert(*id, piece.clone()),
            _ => return Err(bad("'itos' maps something other than an int to a str")),
        };
    }
    let ordered: Option<Vec<String>> = (0..pieces.len() as i64).map(|i| pieces.remove(&i)).collect();
    Tokenizer::from_chars(ordered.ok_or_else(|| bad("its ids are not 0..n"))?)
}
