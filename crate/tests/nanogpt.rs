//! nanoGPT checkpoints against a PyTorch GPT-2 forward: two random-weight `ckpt.pt` files in the
//! format nanoGPT's train.py writes (model, AdamW state, model_args, config), made with their
//! reference logits by scripts/nanogpt/make_fixtures.py. One has biases; the other has none and
//! carries torch.compile's `_orig_mod.` prefix. Their character vocabulary is the dataset's
//! meta.pkl, found where nanoGPT keeps it (data/<dataset>/ beside the out directory).

use std::path::{Path, PathBuf};

use kvengine::config::{Activation, Architecture};
use kvengine::{ErrorKind, KvType, LoadedModel, LogitsFor};

/// PyTorch and we both compute in f32 and differ in summation order only.
const TOLERANCE: f32 = 1e-4;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nanogpt")
}

struct Expected {
    text: String,
    ids: Vec<u32>,
    greedy_prompt: Vec<u32>,
    greedy: Vec<u32>,
    logits: Vec<f32>,
}

fn expected(run: &str) -> Expected {
    let dir = fixtures().join(run);
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    let ids = |k: &str| json[k].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect::<Vec<_>>();
    let bytes = std::fs::read(dir.join("logits.f32")).unwrap();
    Expected {
        text: json["text"].as_str().unwrap().to_owned(),
        ids: ids("ids"),
        greedy_prompt: ids("greedy_prompt_ids"),
        greedy: ids("greedy_ids"),
        logits: bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
    }
}

fn load(path: &Path) -> LoadedModel {
    kvengine::load(path, &mut |_| {}).unwrap_or_else(|e| panic!("load {}: {e}", path.display()))
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

fn argmax(row: &[f32]) -> u32 {
    (0..row.len()).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap() as u32
}

/// The whole text in one pass, then token by token in a fresh cache: both give PyTorch's logits
/// for every position, and greedy decoding from the prompt gives its tokens.
fn matches_pytorch(run: &str, bias: bool, n_heads: usize) {
    let e = expected(run);
    let m = load(&fixtures().join(run).join("ckpt.pt"));
    let c = &m.model.config;
    assert_eq!(c.architecture, Architecture::Gpt2);
    assert_eq!((c.n_layers, c.n_heads, c.hidden_size, c.context_length, c.vocab_size), (2, n_heads, 48, 64, 65));
    assert_eq!((c.variant.biases, c.variant.activation), (bias, Activation::GeluErf));
    assert_eq!(m.format, "nanogpt pt");
    assert_eq!(m.tokenizer.encode(&e.text, false, true).unwrap(), e.ids, "meta.pkl's stoi");
    assert_eq!(m.tokenizer.decode(&e.ids).unwrap(), e.text);

    let mut cache = m.model.new_cache_as(1, e.ids.len(), KvType::F32).unwrap();
    let whole = m.model.forward(std::slice::from_ref(&e.ids), &mut cache, LogitsFor::All, None).unwrap().logits;
    let whole_diff = max_abs_diff(&whole, &e.logits);
    assert!(whole_diff < TOLERANCE, "{run}: one pass differs from PyTorch by {whole_diff}");

    let mut cache = m.model.new_cache_as(1, 1, KvType::F32).unwrap();
    let stepped: Vec<f32> =
        e.ids.iter().flat_map(|&t| m.model.forward(&[vec![t]], &mut cache, LogitsFor::LastPerRow, None).unwrap().logits).collect();
    let stepped_diff = max_abs_diff(&stepped, &e.logits);
    assert!(stepped_diff < TOLERANCE, "{run}: cached decode differs from PyTorch by {stepped_diff}");
    assert!(max_abs_diff(&stepped, &whole) < TOLERANCE);

    let mut cache = m.model.new_cache_as(1, 1, KvType::F32).unwrap();
    let mut next = e.greedy_prompt.clone();
    let mut greedy = Vec::new();
    while greedy.len() < e.greedy.len() {
        let logits = m.model.forward(&[next], &mut cache, LogitsFor::LastPerRow, None).unwrap().logits;
        greedy.push(argmax(&logits));
        next = vec![*greedy.last().unwrap()];
    }
    assert_eq!(greedy, e.greedy, "{run}: greedy tokens");
    eprintln!(
        "{run}: max |ours - PyTorch| one pass {whole_diff:.2e}, cached decode {stepped_diff:.2e}; greedy {} tokens equal",
        greedy.len()
    );
}

#[test]
fn checkpoint_with_biases_matches_pytorch_in_one_pass_and_cached_decode() {
    matches_pytorch("out-bias", true, 4);
}

#[test]
fn compiled_checkpoint_without_biases_matches_pytorch_in_one_pass_and_cached_decode() {
    matches_pytorch("out-nobias", false, 6);
}

/// The loader's errors name what is wrong and what to do: no vocabulary beside the checkpoint,
/// a file that is not a torch archive, an archive without model_args.
#[test]
fn bad_checkpoints_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let lone = dir.path().join("ckpt.pt");
    std::fs::copy(fixtures().join("out-bias/ckpt.pt"), &lone).unwrap();
    let err = kvengine::load(&lone, &mut |_| {}).err().expect("no tokenizer beside it");
    assert_eq!(err.kind, ErrorKind::NotFound);
    assert!(err.message.contains("meta.pkl") && err.message.contains("tokenizer.json"), "{}", err.message);

    std::fs::write(&lone, b"not a zip at all").unwrap();
    let err = kvengine::load(&lone, &mut |_| {}).err().expect("not an archive");
    assert_eq!(err.kind, ErrorKind::CorruptFile);
    assert!(err.message.contains("nanoGPT"), "{}", err.message);

    // nanochat's checkpoint is a torch archive too, but a bare state dict.
    let nanochat = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nanochat/base_checkpoints/d4/model_000005.pt");
    std::fs::copy(nanochat, &lone).unwrap();
    let err = kvengine::load(&lone, &mut |_| {}).err().expect("no model_args");
    assert_eq!(err.kind, ErrorKind::CorruptFile);
    assert!(err.message.contains("model_args"), "{}", err.message);
}
