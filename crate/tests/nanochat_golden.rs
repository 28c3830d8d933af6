//! nanochat against upstream's own PyTorch forward (fp32, CPU, SDPA), on a tiny random-weight
//! checkpoint written in upstream's format by scripts/nanochat/make_fixtures.py: GQA, value
//! embeddings, smear, backout, lambdas, and a 128 window below the 192-token test sequence.
//! Also: the cached path against our own cache-free reference where upstream has no
//! counterpart (ragged rows, truncation, old checkpoints), and bad checkpoints.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use kvengine::{ErrorKind, KvType, LoadedModel, LogitsFor};

/// Tight enough to need exact K/V: upstream keeps them in f32, so the caches here do too
/// (f16 rounding alone moves logits by ~1e-2; see kv_cache/element.rs).
const TOLERANCE: f32 = 1e-4;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nanochat")
}

fn checkpoint_dir() -> PathBuf {
    fixtures().join("base_checkpoints/d4")
}

struct Expected {
    ids: Vec<u32>,
    chunks: Vec<usize>,
    vocab: usize,
    windows: Vec<usize>,
}

fn expected() -> &'static Expected {
    static E: OnceLock<Expected> = OnceLock::new();
    E.get_or_init(|| {
        let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(fixtures().join("expected.json")).unwrap()).unwrap();
        let list = |k: &str| json[k].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect::<Vec<_>>();
        Expected {
            ids: list("ids").into_iter().map(|v| v as u32).collect(),
            chunks: list("chunks").into_iter().map(|v| v as usize).collect(),
            vocab: json["vocab_size"].as_u64().unwrap() as usize,
            windows: list("window_sizes").into_iter().map(|v| v as usize).collect(),
        }
    })
}

fn upstream_logits(name: &str) -> Vec<f32> {
    let bytes = std::fs::read(fixtures().join(format!("logits_{name}.f32"))).unwrap();
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

fn load(path: &Path) -> LoadedModel {
    kvengine::load(path, &mut |_| {}).unwrap_or_else(|e| panic!("load {}: {e}", path.display()))
}

fn full(m: &LoadedModel, ids: &[u32]) -> Vec<f32> {
    let mut cache = m.model.new_cache_as(1, ids.len(), KvType::F32).unwrap();
    m.model.forward(&[ids.to_vec()], &mut cache, LogitsFor::All, None).unwrap().logits
}

fn decode(m: &LoadedModel, ids: &[u32]) -> Vec<f32> {
    let mut cache = m.model.new_cache_as(1, 1, KvType::F32).unwrap();
    ids.iter().flat_map(|&t| m.model.forward(&[vec![t]], &mut cache, LogitsFor::LastPerRow, None).unwrap().logits).collect()
}

fn chunked(m: &LoadedModel, ids: &[u32], chunks: &[usize]) -> Vec<f32> {
    let mut cache = m.model.new_cache_as(1, 16, KvType::F32).unwrap();
    let mut at = 0;
    let mut out = Vec::new();
    for &n in chunks {
        out.extend(m.model.forward(&[ids[at..at + n].to_vec()], &mut cache, LogitsFor::All, None).unwrap().logits);
        at += n;
    }
    out
}

/// The checkpoint directory, its .pt file and its safetensors copy all match upstream's full
/// forward, token-by-token decode and chunked prefill, and our reference path.
#[test]
fn matches_upstream_logits() {
    let e = expected();
    let (up_full, up_decode, up_chunked) = (upstream_logits("full"), upstream_logits("decode"), upstream_logits("chunked"));
    let paths = [checkpoint_dir(), checkpoint_dir().join("model_000005.pt"), checkpoint_dir().join("model_000005.safetensors")];
    for path in paths {
        let m = load(&path);
        assert_eq!(m.model.config.vocab_size, e.vocab);
        assert_eq!(m.tokenizer.vocab_size(), e.vocab);
        let figures = [
            ("full", max_abs_diff(&full(&m, &e.ids), &up_full)),
            ("reference", max_abs_diff(&m.model.forward_reference(&e.ids).unwrap(), &up_full)),
            ("decode", max_abs_diff(&decode(&m, &e.ids), &up_decode)),
            ("chunked", max_abs_diff(&chunked(&m, &e.ids, &e.chunks), &up_chunked)),
        ];
        eprintln!("{} ({}): max |kvengine - upstream| {figures:?}", path.display(), m.format);
        for (what, diff) in figures {
            assert!(diff < TOLERANCE, "{}: {what} logits differ from upstream by {diff}", path.display());
        }
    }
}

#[test]
fn windows_and_config_follow_upstream() {
    let m = load(&checkpoint_dir());
    let kvengine::any_model::Implementation::Nanochat(n) = &m.model.implementation else { panic!("not a nanochat model") };
    assert_eq!(n.config.windows, expected().windows);
    assert_eq!(n.config.padded_vocab, 320);
    assert_eq!(m.model.config.context_length, 2560);
    let t = &m.tokenizer;
    assert_eq!((t.bos_token, t.eos_token), (Some(291), Some(295)));
    assert_eq!(t.eog_tokens, vec![295, 291]);
}

/// Rows of different lengths, fed in uneven chunks in one batch, each equal the reference.
#[test]
fn ragged_rows_equal_the_reference() {
    let m = load(&checkpoint_dir());
    let ids = &expected().ids;
    let rows: [&[u32]; 3] = [&ids[..192], &ids[40..180], &ids[100..103]];
    let vocab = expected().vocab;
    let mut cache = m.model.new_cache_as(3, 8, KvType::F32).unwrap();
    let mut got: Vec<Vec<f32>> = vec![Vec::new(); 3];
    let mut at = [0usize; 3];
    for step in [5usize, 1, 60, 1, 1, 70, 100] {
        let batch: Vec<Vec<u32>> = rows.iter().zip(&at).map(|(r, &a)| r[a.min(r.len())..(a + step).min(r.len())].to_vec()).collect();
        let out = m.model.forward(&batch, &mut cache, LogitsFor::All, None).unwrap();
        let mut offset = 0;
        for (row, tokens) in batch.iter().enumerate() {
            got[row].extend_from_slice(&out.logits[offset..offset + tokens.len() * vocab]);
            offset += tokens.len() * vocab;
            at[row] += tokens.len();
        }
    }
    for (row, tokens) in rows.iter().enumerate() {
        assert_eq!(cache.seqlen(row), tokens.len());
        let diff = max_abs_diff(&got[row], &m.model.forward_reference(tokens).unwrap());
        assert!(diff < TOLERANCE, "row {row}: batched logits differ from the reference by {diff}");
    }
}

/// Truncating a row and continuing smears from the token now last, as a fresh run would.
#[test]
fn truncate_then_continue_equals_the_reference() {
    let m = load(&checkpoint_dir());
    let ids = &expected().ids;
    let vocab = expected().vocab;
    let mut cache = m.model.new_cache_as(2, 8, KvType::F32).unwrap();
    m.model.forward(&[ids[..150].to_vec(), vec![]], &mut cache, LogitsFor::LastPerRow, None).unwrap();
    cache.copy_row(0, 1).unwrap();
    cache.truncate_row(1, 90).unwrap();
    let out = m.model.forward(&[vec![], ids[90..140].to_vec()], &mut cache, LogitsFor::All, None).unwrap();
    let reference = m.model.forward_reference(&ids[..140]).unwrap();
    let diff = max_abs_diff(&out.logits, &reference[90 * vocab..]);
    assert!(diff < TOLERANCE, "continuing a truncated row differs from the reference by {diff}");
}

/// A checkpoint from before sliding windows and the lambdas: full-context layers, resid 1, x0 0.
#[test]
fn old_checkpoints_are_patched_as_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("chatsft_checkpoints/d4");
    std::fs::create_dir_all(&ckpt).unwrap();
    std::fs::create_dir_all(dir.path().join("tokenizer")).unwrap();
    std::fs::copy(fixtures().join("tokenizer/tokenizer.pkl"), dir.path().join("tokenizer/tokenizer.pkl")).unwrap();
    let mut tensors = candle_core::safetensors::load(checkpoint_dir().join("model_000005.safetensors"), &candle_core::Device::Cpu).unwrap();
    tensors.retain(|k, _| !k.ends_with("resid_lambdas") && !k.ends_with("x0_lambdas"));
    candle_core::safetensors::save(&tensors, ckpt.join("model_000100.safetensors")).unwrap();
    let meta = r#"{"step": 100, "model_config": {"sequence_len": 256, "vocab_size": 300, "n_layer": 4, "n_head": 4, "n_kv_head": 2, "n_embd": 32}}"#;
    std::fs::write(ckpt.join("meta_000100.json"), meta).unwrap();
    let m = load(&ckpt);
    let kvengine::any_model::Implementation::Nanochat(n) = &m.model.implementation else { panic!("not a nanochat model") };
    assert_eq!(n.config.windows, vec![256; 4]);
    let mut extra = tensors.clone();
    extra.insert(
        "transformer.h.0.attn.new_gate.weight".into(),
        candle_core::Tensor::zeros(4, candle_core::DType::F32, &candle_core::Device::Cpu).unwrap(),
    );
    let newer = dir.path().join("newer.safetensors");
    candle_core::safetensors::save(&extra, &newer).unwrap();
    std::fs::rename(&newer, ckpt.join("model_000200.safetensors")).unwrap();
    std::fs::copy(ckpt.join("meta_000100.json"), ckpt.join("meta_000200.json")).unwrap();
    let err = kvengine::load(&ckpt, &mut |_| {}).err().expect("unknown tensors are refused");
    assert_eq!(err.kind, ErrorKind::Unsupported, "{}", err.message);
    assert!(err.message.contains("new_gate"), "{}", err.message);
    let ids = &expected().ids;
    let diff = max_abs_diff(&decode(&m, ids), &m.model.forward_reference(ids).unwrap());
    assert!(diff < TOLERANCE, "patched model: decode differs from the reference by {diff}");
    assert!(max_abs_diff(&full(&m, ids), &upstream_logits("full")) > 1e-2, "the lambdas made no difference");
}

#[test]
fn bad_checkpoints_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("base_checkpoints/d4");
    std::fs::create_dir_all(dir.path().join("tokenizer")).unwrap();
    std::fs::create_dir_all(&ckpt).unwrap();
    std::fs::copy(fixtures().join("tokenizer/tokenizer.pkl"), dir.path().join("tokenizer/tokenizer.pkl")).unwrap();
    std::fs::copy(checkpoint_dir().join("meta_000005.json"), ckpt.join("meta_000005.json")).unwrap();
    let pt = std::fs::read(checkpoint_dir().join("model_000005.pt")).unwrap();
    let kind = |path: &Path| kvengine::load(path, &mut |_| {}).err().map(|e| (e.kind, e.message));

    let (k, msg) = kind(&ckpt).unwrap();
    assert_eq!(k, ErrorKind::NotFound, "{msg}");
    for cut in [0, 100, pt.len() / 2, pt.len() - 30] {
        std::fs::write(ckpt.join("model_000005.pt"), &pt[..cut]).unwrap();
        let (k, msg) = kind(&ckpt).unwrap();
        assert_eq!(k, ErrorKind::CorruptFile, "cut at {cut}: {msg}");
    }
    std::fs::write(ckpt.join("model_000005.pt"), &pt).unwrap();
    std::fs::write(dir.path().join("tokenizer/tokenizer.pkl"), b"\x80\x04not a pickle").unwrap();
    let (k, msg) = kind(&ckpt).unwrap();
    assert_eq!(k, ErrorKind::CorruptFile, "{msg}");
    std::fs::remove_file(dir.path().join("tokenizer/tokenizer.pkl")).unwrap();
    let (k, msg) = kind(&ckpt).unwrap();
    assert_eq!(k, ErrorKind::NotFound, "{msg}");
    std::fs::copy(fixtures().join("tokenizer/tokenizer.pkl"), dir.path().join("tokenizer/tokenizer.pkl")).unwrap();
    std::fs::write(ckpt.join("meta_000005.json"), b"{\"model_config\": {}}").unwrap();
    let (k, msg) = kind(&ckpt.join("model_000005.pt")).unwrap();
    assert_eq!(k, ErrorKind::CorruptFile, "{msg}");
}

/// Flipped bytes across the .pt archive (zip headers, the pickled state dict, tensor data)
/// either load or fail with an error; none may panic or abort.
#[test]
fn flipped_bytes_in_the_pt_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("base_checkpoints/d4");
    std::fs::create_dir_all(dir.path().join("tokenizer")).unwrap();
    std::fs::create_dir_all(&ckpt).unwrap();
    std::fs::copy(fixtures().join("tokenizer/tokenizer.pkl"), dir.path().join("tokenizer/tokenizer.pkl")).unwrap();
    std::fs::copy(checkpoint_dir().join("meta_000005.json"), ckpt.join("meta_000005.json")).unwrap();
    let pt = std::fs::read(checkpoint_dir().join("model_000005.pt")).unwrap();
    let (mut loaded, mut failed) = (0, 0);
    for i in (0..pt.len()).step_by(pt.len() / 300) {
        let mut bad = pt.clone();
        bad[i] ^= 0xa5;
        std::fs::write(ckpt.join("model_000005.pt"), &bad).unwrap();
        match kvengine::load(&ckpt, &mut |_| {}) {
            Ok(_) => loaded += 1,
            Err(e) => {
                assert!(matches!(e.kind, ErrorKind::CorruptFile | ErrorKind::Unsupported), "byte {i}: {:?} {}", e.kind, e.message);
                failed += 1;
            }
        }
    }
    eprintln!("flipped .pt bytes: {loaded} loaded, {failed} rejected");
}

/// Past sequence_len (256) the last layer's L window is finite too, as upstream's: 300 tokens
/// through the cache equal the reference, whose mask applies each layer's window.
#[test]
fn decode_past_sequence_len_slides_every_layer() {
    let m = load(&checkpoint_dir());
    let ids: Vec<u32> = expected().ids.iter().chain(&expected().ids).copied().take(300).collect();
    let mut cache = m.model.new_cache_as(1, 64, KvType::F32).unwrap();
    let prefill = m.model.forward(&[ids[..200].to_vec()], &mut cache, LogitsFor::All, None).unwrap().logits;
    let rest: Vec<f32> =
        ids[200..].iter().flat_map(|&t| m.model.forward(&[vec![t]], &mut cache, LogitsFor::LastPerRow, None).unwrap().logits).collect();
    let reference = m.model.forward_reference(&ids).unwrap();
    let diff = max_abs_diff(&[prefill, rest].concat(), &reference);
    assert!(diff < TOLERANCE, "300 tokens: cached differs from the reference by {diff}");
}

/// Greedy continuation of `prompt` for `steps` tokens.
fn greedy(m: &LoadedModel, prompt: &[u32], steps: usize) -> Vec<u32> {
    let mut cache = m.model.new_cache_as(1, prompt.len() + steps, KvType::F32).unwrap();
    let mut next = prompt.to_vec();
    let mut out = Vec::new();
    for _ in 0..steps {
        let logits = m.model.forward(&[next], &mut cache, LogitsFor::LastPerRow, None).unwrap().logits;
        let top = logits.iter().enumerate().fold((0, f32::MIN), |best, (i, &v)| if v > best.1 { (i, v) } else { best }).0 as u32;
        out.push(top);
        next = vec![top];
    }
    out
}

/// `quantize: 'q8_0'`: the projections in Q8_0 blocks on our integer kernels. The logits stay
/// within the weights' rounding of upstream's (on this 32-wide model each block is a whole row,
/// the coarsest case: ~0.4% per weight) and greedy decoding starts out the same (random weights
/// leave near-ties that rounding may flip later), with f32 or 8-bit activations.
#[test]
fn quantized_projections_stay_close_to_upstream() {
    use kvengine::matmul::{Activations, MatmulOptions};
    use kvengine::weights::Quantize;
    let e = expected();
    let exact = load(&checkpoint_dir());
    let want = greedy(&exact, &e.ids[..16], 64);
    for activations in [Activations::F32, Activations::Q8] {
        let placement = kvengine::Placement::Cpu(MatmulOptions { activations, quantize: Some(Quantize::Q8_0) });
        let m = kvengine::load_on(&checkpoint_dir(), placement, &mut |_| {}).unwrap();
        let logits = full(&m, &e.ids);
        let to_upstream = max_abs_diff(&logits, &upstream_logits("full"));
        let tokens = greedy(&m, &e.ids[..16], 64);
        let agree = tokens.iter().zip(&want).take_while(|(a, b)| a == b).count();
        eprintln!("q8_0 weights, {activations:?} activations: max |logits - upstream| {to_upstream}; greedy agrees for {agree}/64");
        assert!(to_upstream < 0.15, "{activations:?}: logits differ from upstream by {to_upstream} of a ±15 range");
        assert!(agree >= 16, "{activations:?}: greedy tokens agree for only {agree}");
    }
}
