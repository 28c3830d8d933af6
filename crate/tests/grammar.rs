//! Constrained decoding in the engine (grammar.rs, `forward_picking`'s constraints), on the real
//! default model: greedy decoding under a JSON schema yields JSON that serde reads and that meets
//! the schema's bounds, two rows with different grammars share one batch, and the mask allows
//! exactly the tokens whose text fits (an oracle written from the token texts, not llguidance).

mod smollm;

use kvengine::grammar::{Constraint, GrammarCompiler, GrammarSpec};
use kvengine::{LoadedModel, LogitsFor};
use smollm::{argmax, chat_prompt, q8_model};

fn compiler(m: &LoadedModel) -> GrammarCompiler {
    GrammarCompiler::new(&m.tokenizer, m.model.config.vocab_size).expect("grammar compiler")
}

/// Greedy decoding of every row under its constraint until each has stopped (or `limit` tokens).
fn decode(m: &LoadedModel, prompts: &[Vec<u32>], constraints: &mut [Constraint], limit: usize) -> Vec<Vec<u32>> {
    let mut cache = m.model.new_cache(prompts.len(), 512).unwrap();
    let mut fed = prompts.to_vec();
    let mut out = vec![Vec::new(); prompts.len()];
    for _ in 0..limit {
        let mut rows: Vec<Option<&mut Constraint>> = constraints.iter_mut().map(Some).collect();
        let (logits, _) = m.model.forward_picking(&fed, &mut cache, LogitsFor::LastPerRow, None, 0, &mut rows).unwrap();
        let vocab = logits.vocab_size;
        for (chunk, &row) in logits.logits.chunks(vocab).zip(&logits.rows) {
            let row = row as usize;
            let token = argmax(chunk);
            assert!(chunk[token as usize].is_finite(), "row {row} had no allowed token");
            constraints[row].consume(token).unwrap();
            out[row].push(token);
            fed[row] = if constraints[row].is_stopped() || m.tokenizer.eog_tokens.contains(&token) { Vec::new() } else { vec![token] };
        }
        if fed.iter().all(Vec::is_empty) {
            break;
        }
    }
    out
}

#[test]
fn greedy_json_under_a_schema_parses_and_meets_its_bounds() {
    let m = q8_model();
    let schema = r#"{"type":"object","properties":{"name":{"type":"string","maxLength":16},"age":{"type":"integer","minimum":18,"maximum":99},"pet":{"enum":["cat","dog"]}},"required":["name","age","pet"],"additionalProperties":false}"#;
    let c = compiler(m);
    let prompt = chat_prompt(m, "Give me a person as JSON.");
    let mut constraints = vec![c.compile(GrammarSpec::JsonSchema(schema)).unwrap()];
    let tokens = decode(m, &[prompt], &mut constraints, 120).remove(0);
    let text = m.tokenizer.decode(&tokens).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text:?} is not JSON: {e}"));
    let age = value["age"].as_i64().expect("an integer age");
    assert!((18..=99).contains(&age), "{text}");
    assert!(value["name"].as_str().is_some_and(|n| n.chars().count() <= 16), "{text}");
    assert!(["cat", "dog"].contains(&value["pet"].as_str().unwrap_or("")), "{text}");
    assert_eq!(value.as_object().map(|o| o.len()), Some(3), "{text}");
}

#[test]
fn rows_with_different_grammars_share_a_batch() {
    let m = q8_model();
    let c = compiler(m);
    let prompt = chat_prompt(m, "Say something.");
    let mut constraints =
        vec![c.compile(GrammarSpec::Regex("[0-9]{3}-[0-9]{4}")).unwrap(), c.compile(GrammarSpec::Lark(r#"start: "yes" | "no""#)).unwrap()];
    let texts: Vec<String> =
        decode(m, &[prompt.clone(), prompt], &mut constraints, 40).iter().map(|t| m.tokenizer.decode(t).unwrap()).collect();
    assert!(
        texts[0].len() == 8 && texts[0].chars().enumerate().all(|(i, ch)| if i == 3 { ch == '-' } else { ch.is_ascii_digit() }),
        "{texts:?}"
    );
    assert!(texts[1] == "yes" || texts[1] == "no", "{texts:?}");
}

#[test]
fn the_mask_allows_exactly_the_tokens_that_fit_and_leaves_their_logits() {
    let m = q8_model();
    let prompt = chat_prompt(m, "Pick a letter.");
    let mut free = m.model.new_cache(1, 64).unwrap();
    let want = m.model.forward(std::slice::from_ref(&prompt), &mut free, LogitsFor::LastPerRow, None).unwrap();
    let mut constraint = compiler(m).compile(GrammarSpec::Regex("[a-f]+")).unwrap();
    let mut masked = m.model.new_cache(1, 64).unwrap();
    let (got, _) = m.model.forward_picking(&[prompt], &mut masked, LogitsFor::LastPerRow, None, 0, &mut [Some(&mut constraint)]).unwrap();
    let mut allowed = 0;
    for id in 0..want.vocab_size as u32 {
        let fits = m.tokenizer.eog_tokens.iter().all(|&e| e != id)
            && m.tokenizer.decode_bytes(&[id]).is_ok_and(|b| !b.is_empty() && b.iter().all(|c| (b'a'..=b'f').contains(c)));
        let (g, w) = (got.logits[id as usize], want.logits[id as usize]);
        if fits {
            allowed += 1;
            assert_eq!(g.to_bits(), w.to_bits(), "token {id} fits but its logit moved");
        } else {
            assert_eq!(g, f32::NEG_INFINITY, "token {id} ({:?}) does not fit but was allowed", m.tokenizer.token_text(id));
        }
    }
    assert!(allowed >= 6, "only {allowed} tokens allowed");
    // A special token is never grammar text, even under a grammar that accepts any text
    // (which its name would spell).
    let mut any = compiler(m).compile(GrammarSpec::Regex("(.|\n)*")).unwrap();
    let mut logits = want.logits.clone();
    any.mask_logits(&mut logits).unwrap();
    let im_start = m.tokenizer.special_token("<|im_start|>").expect("ChatML's start token");
    assert_eq!(logits[im_start as usize], f32::NEG_INFINITY, "a special token was allowed as text");
}

#[test]
fn a_schema_llguidance_cannot_compile_is_an_invalid_argument_with_its_reason() {
    let m = q8_model();
    let c = compiler(m);
    for (spec, needle) in [
        (GrammarSpec::JsonSchema(r#"{"type":"foo"}"#), "foo"),
        (GrammarSpec::JsonSchema("[1,2]"), "JSON object"),
        (GrammarSpec::Regex("(abc"), "regex"),
        (GrammarSpec::Lark("start: nothing"), "nothing"),
    ] {
        let err = c.compile(spec).err().unwrap_or_else(|| panic!("{spec:?} compiled"));
        assert_eq!(err.kind, kvengine::ErrorKind::InvalidArgument, "{spec:?}: {}", err.message);
        assert!(err.message.contains(needle), "{spec:?}: {}", err.message);
    }
}
