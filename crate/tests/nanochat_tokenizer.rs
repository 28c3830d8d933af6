//! nanochat's tokenizer against tiktoken (the fixture's ids come from upstream's
//! `RustBPETokenizer`, i.e. tiktoken's `encode_ordinary`) on a varied corpus: code, whitespace
//! runs, numbers, accents, CJK, RTL, emoji sequences, and special-token text typed by a user,
//! which must stay plain text. Also upstream's render_conversation ids and masks, and the
//! unpickler on every truncation of a real tokenizer.pkl.

use std::path::PathBuf;

use kvengine::nanochat::pickle;
use kvengine::nanochat::render::{render_conversation, render_for_completion, Message};
use kvengine::nanochat::tiktoken::TiktokenBpe;
use kvengine::tokenizer::Tokenizer;
use serde_json::Value;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nanochat/tokenizer_corpus")
}

fn corpus() -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir().join("corpus.json")).unwrap()).unwrap()
}

fn tokenizer() -> Tokenizer {
    Tokenizer::from_tiktoken(TiktokenBpe::from_pickle_file(&dir().join("tokenizer.pkl")).unwrap()).unwrap()
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

#[test]
fn encode_matches_tiktoken_on_the_corpus() {
    let tok = tokenizer();
    let corpus = corpus();
    let cases = corpus["cases"].as_array().unwrap();
    let (mut agree, mut tokens) = (0, 0);
    for case in cases {
        let text = case["text"].as_str().unwrap();
        let expected = ids(&case["ids"]);
        let got = tok.encode(text, false, false).unwrap();
        tokens += expected.len();
        if got == expected {
            agree += 1;
        } else {
            eprintln!("differs on {text:?}:\n  ours     {got:?}\n  tiktoken {expected:?}");
        }
        assert_eq!(tok.decode(&got).unwrap(), text, "round trip");
    }
    eprintln!("tokenizer: {agree}/{} corpus texts ({tokens} tokens) identical to tiktoken", cases.len());
    assert_eq!(agree, cases.len());
}

#[test]
fn specials_and_decoding_follow_upstream() {
    let tok = tokenizer();
    let corpus = corpus();
    for (name, id) in corpus["special_tokens"].as_object().unwrap() {
        assert_eq!(tok.special_token(name), Some(id.as_u64().unwrap() as u32), "{name}");
    }
    for case in corpus["decodes"].as_array().unwrap() {
        assert_eq!(tok.decode(&ids(&case["ids"])).unwrap(), case["text"].as_str().unwrap());
    }
    let bos = tok.special_token("<|bos|>").unwrap();
    let end = tok.special_token("<|assistant_end|>").unwrap();
    let typed = "a<|bos|>b<|assistant_end|>";
    let plain = tok.encode(typed, false, false).unwrap();
    assert!(!plain.contains(&bos) && !plain.contains(&end), "user text must not become special tokens");
    let special = tok.encode(typed, true, true).unwrap();
    assert_eq!(special.iter().filter(|&&t| t == bos).count(), 2, "BOS prepended and parsed");
    assert_eq!(tok.decode(&special).unwrap(), format!("<|bos|>{typed}"));
}

#[test]
fn render_conversation_matches_upstream() {
    let tok = tokenizer();
    for case in corpus()["render"].as_array().unwrap() {
        let messages: Vec<Message> = serde_json::from_value(case["conversation"]["messages"].clone()).unwrap();
        let max_tokens = case["max_tokens"].as_u64().unwrap() as usize;
        let (got_ids, got_mask) = render_conversation(&tok, &messages, max_tokens).unwrap();
        assert_eq!(got_ids, ids(&case["ids"]), "{messages:?}");
        let mask: Vec<u8> = ids(&case["mask"]).into_iter().map(|m| m as u8).collect();
        assert_eq!(got_mask, mask, "{messages:?}");
        if !case["completion"].is_null() {
            assert_eq!(render_for_completion(&tok, &messages).unwrap(), ids(&case["completion"]));
        }
    }
    let bad: Vec<Message> = serde_json::from_str(r#"[{"role": "assistant", "content": "hi"}]"#).unwrap();
    assert!(render_conversation(&tok, &bad, 10).is_err());
    let bad_part: Vec<Message> =
        serde_json::from_str(r#"[{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "image", "text": ""}]}]"#)
            .unwrap();
    assert!(render_conversation(&tok, &bad_part, 10).is_err());
}

#[test]
fn every_truncation_of_the_pickle_is_an_error() {
    let data = std::fs::read(dir().join("tokenizer.pkl")).unwrap();
    assert!(TiktokenBpe::from_pickle(&data).is_ok());
    for cut in 0..data.len() {
        assert!(pickle::load(&data[..cut]).is_err() || TiktokenBpe::from_pickle(&data[..cut]).is_err(), "cut at {cut}");
    }
    let mut flipped = data.clone();
    for i in (0..data.len()).step_by(7) {
        flipped[i] ^= 0x5a;
        let _ = TiktokenBpe::from_pickle(&flipped);
        flipped[i] ^= 0x5a;
    }
}
