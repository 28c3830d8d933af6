//! The SentencePiece tokenizer built from real GGUF metadata (no weights needed) against llama.cpp
//! on the same files: the real Gemma 3 270M GGUF, and llama.cpp's own vocab-only GGUFs of LLaMA's
//! 32k vocabulary (Llama 2, Mistral 7B, TinyLlama), also as our GGUF writer copies it into a
//! random-weight model, and Phi-3's. The fixtures
//! (scripts/make-spm-fixtures.ts) hold node-llama-cpp's ids and detokenized text for a corpus of
//! code, CJK, emoji, RTL scripts, whitespace runs, long words, digits and control-token
//! look-alikes with specials on and off.
//!
//! The GGUFs come from `node scripts/fetch-gemma.mjs` and `node scripts/fetch-vocabs.mjs` (npm
//! test's pretest runs both); the tests fail, rather than skip, without them so that CI cannot
//! pass by not looking.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Instant;

use candle_core::quantized::gguf_file::Value as Meta;
use kvengine::error::ErrorKind;
use kvengine::gguf::GgufFile;
use kvengine::tokenizer::Tokenizer;
use serde_json::Value;

fn model_file(name: &str, fetcher: &str) -> PathBuf {
    let dir = std::env::var_os("KVENGINE_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models"));
    let path = dir.join(name);
    assert!(path.exists(), "{} is missing: run `node scripts/{fetcher}` (npm test's pretest does)", path.display());
    path
}

fn gemma_path() -> PathBuf {
    model_file("gemma-3-270m-q4_k_m.gguf", "fetch-gemma.mjs")
}

/// Built once: every test shares the 262k-piece vocabulary.
fn tokenizer() -> &'static Tokenizer {
    static TOK: OnceLock<Tokenizer> = OnceLock::new();
    TOK.get_or_init(|| {
        let t0 = Instant::now();
        let gguf = GgufFile::open(&gemma_path()).unwrap();
        let t1 = Instant::now();
        let tok = Tokenizer::from_gguf(&gguf).unwrap();
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        eprintln!(
            "Gemma 3 GGUF header read in {:.0} ms; tokenizer ({} pieces) built from its metadata in {:.0} ms",
            ms(t1 - t0),
            tok.vocab_size(),
            ms(t1.elapsed())
        );
        tok
    })
}

fn fixture_named(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn fixture() -> Value {
    fixture_named("gemma3-tokenizer.json")
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

#[test]
fn encode_matches_llama_cpp_on_the_corpus() {
    encode_matches(tokenizer(), &fixture());
}

fn encode_matches(tok: &Tokenizer, fx: &Value) {
    let cases = fx["cases"].as_array().unwrap();
    assert!(cases.len() >= 50);
    let (mut agree, mut tokens) = (0, 0);
    let t0 = Instant::now();
    for case in cases {
        let (text, special) = (case["text"].as_str().unwrap(), case["special"].as_bool().unwrap());
        let expected = ids(&case["ids"]);
        let got = tok.encode(text, special, false).unwrap();
        tokens += expected.len();
        if got == expected {
            agree += 1;
        } else {
            eprintln!("differs on {text:?} (special {special}):\n  ours      {got:?}\n  llama.cpp {expected:?}");
        }
    }
    eprintln!("{agree}/{} corpus texts ({tokens} tokens) identical to llama.cpp, encoded in {:?}", cases.len(), t0.elapsed());
    assert_eq!(agree, cases.len());
}

#[test]
fn decoding_matches_llama_cpp_detokenize() {
    decode_matches(tokenizer(), &fixture());
}

fn decode_matches(tok: &Tokenizer, fx: &Value) {
    let (bytes, offsets) = tok.byte_table();
    for case in fx["cases"].as_array().unwrap() {
        let ids = ids(&case["ids"]);
        let expected = case["detokenized"].as_str().unwrap();
        assert_eq!(tok.decode(&ids).unwrap(), expected, "{:?}", case["text"]);
        // The streaming side reads the same bytes from the table. A vocabulary that prefixes a
        // space when encoding (LLaMA's, Phi-3's) drops it again when decoding a whole text, as
        // llama.cpp's detokenize does; a stream of pieces keeps it, as its token_to_piece does.
        let streamed: Vec<u8> =
            ids.iter().flat_map(|&i| &bytes[offsets[i as usize] as usize..offsets[i as usize + 1] as usize]).copied().collect();
        let streamed = String::from_utf8(streamed).unwrap();
        assert!(streamed == expected || streamed.strip_prefix(' ') == Some(expected), "{:?}: streamed {streamed:?}", case["text"]);
    }
}

#[test]
fn bos_eos_and_turn_tokens_follow_the_gguf() {
    let tok = tokenizer();
    let fx = fixture();
    assert_eq!(tok.bos_token, fx["bos"].as_u64().map(|x| x as u32));
    assert_eq!(tok.eos_token, fx["eos"].as_u64().map(|x| x as u32));
    assert_eq!(tok.add_bos, fx["addBos"].as_bool().unwrap());
    assert_eq!(tok.token_text(2).as_deref(), Some("<bos>"));
    let end_of_turn = tok.special_token("<end_of_turn>").unwrap();
    assert!(tok.eog_tokens.contains(&1) && tok.eog_tokens.contains(&end_of_turn), "{:?}", tok.eog_tokens);
    // Gemma's chat template writes <bos> itself; asking for BOS as well must not double it.
    let turn = "<bos><start_of_turn>user\nhi<end_of_turn>\n";
    let with_bos = tok.encode(turn, true, true).unwrap();
    assert_eq!(with_bos, tok.encode(turn, true, false).unwrap());
    assert_eq!(with_bos.iter().filter(|&&i| i == 2).count(), 1);
    assert_eq!(tok.encode("hi", false, true).unwrap()[0], 2);
}

#[test]
fn out_of_range_ids_are_errors() {
    let tok = tokenizer();
    let err = tok.decode(&[9259, 262_144]).unwrap_err();
    assert!(err.to_string().contains("out of range"), "{err}");
}

#[test]
fn malformed_sentencepiece_metadata_gives_typed_errors() {
    let mut gguf = GgufFile::open(&gemma_path()).unwrap();
    let pristine = gguf.content.metadata.clone();
    let mut expect = |change: &dyn Fn(&mut std::collections::HashMap<String, Meta>), kind: ErrorKind, what: &str| {
        gguf.content.metadata = pristine.clone();
        change(&mut gguf.content.metadata);
        let err = Tokenizer::from_gguf(&gguf).err().unwrap_or_else(|| panic!("accepted: {what}"));
        assert_eq!(err.kind, kind, "{what}: {err}");
        assert!(err.to_string().contains(what), "{err}");
    };
    expect(&|m| drop(m.remove("tokenizer.ggml.tokens")), ErrorKind::CorruptFile, "tokenizer.ggml.tokens");
    expect(
        &|m| drop(m.insert("tokenizer.ggml.scores".into(), Meta::Array(vec![Meta::String("x".into())]))),
        ErrorKind::CorruptFile,
        "tokenizer.ggml.scores",
    );
    expect(
        &|m| drop(m.insert("tokenizer.ggml.token_type".into(), Meta::Array(vec![Meta::I32(1)]))),
        ErrorKind::CorruptFile,
        "token_type (1)",
    );
    expect(&|m| drop(m.insert("tokenizer.ggml.scores".into(), Meta::F32(0.0))), ErrorKind::CorruptFile, "must be an array");
    expect(&|m| drop(m.insert("tokenizer.ggml.model".into(), Meta::String("bert".into()))), ErrorKind::Unsupported, "'bert'");
    // An out-of-range BOS id is no BOS rather than an id that would index past the vocabulary.
    gguf.content.metadata = pristine;
    gguf.content.metadata.insert("tokenizer.ggml.bos_token_id".into(), Meta::U32(1 << 30));
    let tok = Tokenizer::from_gguf(&gguf).unwrap();
    assert_eq!(tok.bos_token, None);
    assert_eq!(tok.encode("hi", false, true).unwrap(), tokenizer().encode("hi", false, false).unwrap());
}

/// A GGUF's vocabulary checked against a fixture of llama.cpp's: ids, the detokenized text, and
/// BOS/EOS. `file` is under models/, made by `scripts/{made_by}`.
fn vocab_matches(file: &str, made_by: &str, fixture_name: &str) {
    let gguf = GgufFile::open(&model_file(file, made_by)).unwrap();
    let tok = Tokenizer::from_gguf(&gguf).unwrap();
    let fx = fixture_named(fixture_name);
    encode_matches(&tok, &fx);
    decode_matches(&tok, &fx);
    assert_eq!(tok.bos_token, fx["bos"].as_u64().map(|x| x as u32));
    assert_eq!(tok.eos_token, fx["eos"].as_u64().map(|x| x as u32));
    assert_eq!(tok.add_bos, fx["addBos"].as_bool().unwrap());
}

#[test]
fn llama_sentencepiece_32k_matches_llama_cpp() {
    vocab_matches("vocab/ggml-vocab-llama-spm.gguf", "fetch-vocabs.mjs", "llama-spm-tokenizer.json");
}

/// The same vocabulary as our GGUF writer copied it into a random-weight TinyLlama-shaped model
/// (scripts/archModels.ts; its logits are checked against llama.cpp in architectures.spec.ts).
#[test]
fn llama_sentencepiece_written_by_our_gguf_writer_matches_llama_cpp() {
    vocab_matches("random-tinyllama.F32.gguf", "prepare-test-models.mjs", "llama-spm-tokenizer.json");
}

#[test]
fn phi3_sentencepiece_matches_llama_cpp() {
    vocab_matches("vocab/ggml-vocab-phi-3.gguf", "fetch-vocabs.mjs", "phi3-tokenizer.json");
}
