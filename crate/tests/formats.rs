//! The same tiny random Llama written as GGUF (F32, Q8_0), as a Hugging Face directory and as a
//! sharded Hugging Face directory: every loader must produce the same model. Equal logits at every
//! position prove that the safetensors path, the Q/K row permutation and the two RoPE pairings
//! (interleaved for GGUF, half-split for HF) agree.

mod common;

use std::sync::OnceLock;

use candle_core::quantized::GgmlDType;
use common::*;
use kvengine::chat_template::ChatMessage;
use kvengine::config::RopeStyle;
use kvengine::{KvType, LoadedModel, LogitsFor};

/// Tight enough to need exact K/V: these compare against other implementations, so the caches
/// hold f32 (f16 rounding alone moves logits by ~1e-2; see kv_cache/element.rs).
const TOLERANCE: f32 = 1e-4;

struct Fixture {
    tiny: TinyModel,
    gguf: LoadedModel,
    gguf_q8: LoadedModel,
    hf: LoadedModel,
    hf_sharded: LoadedModel,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let tiny = TinyModel::new(0x5EED);
        // Loaded models keep no file open or mapped, so the files can go (a static is never
        // dropped, so the temp dir would otherwise outlive the test run).
        let files = write_all(&tiny);
        let fixture = Fixture {
            gguf: load_ok(&files.gguf),
            gguf_q8: load_ok(&files.gguf_q8),
            hf: load_ok(&files.hf),
            hf_sharded: load_ok(&files.hf_sharded),
            tiny,
        };
        drop(files);
        fixture
    })
}

/// Logits for every position of `ids`, from a fresh cache.
fn all_logits(m: &LoadedModel, ids: &[u32]) -> Vec<f32> {
    let mut cache = m.model.new_cache_as(1, ids.len(), KvType::F32).unwrap();
    let out = m.model.forward(&[ids.to_vec()], &mut cache, LogitsFor::All, None).unwrap();
    assert_eq!(out.vocab_size, m.model.config.vocab_size);
    assert_eq!(out.logits.len(), ids.len() * out.vocab_size);
    assert_eq!(out.rows, vec![0u32; ids.len()]);
    assert_eq!(cache.seqlens(), &[ids.len() as i32]);
    out.logits
}

fn std_dev(v: &[f32]) -> f32 {
    let mean = v.iter().sum::<f32>() / v.len() as f32;
    (v.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / v.len() as f32).sqrt()
}

#[test]
fn configs_agree_across_formats() {
    let f = fixture();
    let (g, h, s) = (&f.gguf.model.config, &f.hf.model.config, &f.hf_sharded.model.config);
    for c in [g, h, s] {
        assert_eq!(c.vocab_size, f.tiny.vocab_size());
        assert_eq!(c.hidden_size, 64);
        assert_eq!(c.intermediate_size, 128);
        assert_eq!(c.n_layers, 2);
        assert_eq!(c.n_heads, 4);
        assert_eq!(c.n_kv_heads, 2);
        assert_eq!(c.head_dim, 16);
        assert_eq!(c.context_length, 512);
        assert_eq!(c.rms_norm_eps, 1e-5);
        assert_eq!(c.rope_theta, 10_000.0);
        assert!(!c.tie_word_embeddings);
        assert!(c.rope_freq_factors.is_empty());
    }
    assert_eq!(g.rope_style, RopeStyle::Interleaved);
    assert_eq!(h.rope_style, RopeStyle::HalfSplit);
    assert_eq!(s.rope_style, RopeStyle::HalfSplit);
    assert_eq!(f.gguf.format, "gguf f32");
    assert_eq!(f.gguf_q8.format, "gguf f32+q8_0");
    assert_eq!(f.hf.format, "safetensors");
    assert_eq!(f.hf_sharded.format, "safetensors");
}

#[test]
fn tokenizers_encode_identically() {
    let f = fixture();
    let sources = [("gguf", &f.gguf), ("hf", &f.hf), ("hf-sharded", &f.hf_sharded)];
    let reference = f.tiny.hf_tokenizer();
    for text in PROMPTS {
        for special in [true, false] {
            let expected = f.gguf.tokenizer.encode(text, special, false).unwrap();
            assert!(!expected.is_empty());
            for (name, m) in &sources {
                let ids = m.tokenizer.encode(text, special, false).unwrap();
                assert_eq!(ids, expected, "{name} encodes {text:?} (special={special}) differently");
                // Byte-exact round trip through kvengine's own decoder.
                assert_eq!(m.tokenizer.decode(&ids).unwrap(), *text, "{name} does not round-trip {text:?}");
            }
            if special {
                // The same as the tokenizers crate gives for the equivalent tokenizer.json.
                let enc = reference.encode(*text, false).unwrap();
                assert_eq!(enc.get_ids(), expected.as_slice(), "reference tokenizer disagrees on {text:?}");
            }
        }
    }
    // Merges really apply, and special tokens are atomic only when asked for.
    let hello = f.gguf.tokenizer.encode("Hello the cat", true, false).unwrap();
    assert_eq!(hello.len(), 3, "merges Hello/Ġthe/Ġcat: {hello:?}");
    let im_start = f.tiny.tokens.iter().position(|t| t == IM_START).unwrap() as u32;
    for (name, m) in &sources {
        assert_eq!(m.tokenizer.encode(IM_START, true, false).unwrap(), vec![im_start], "{name}");
        let plain = m.tokenizer.encode(IM_START, false, false).unwrap();
        assert!(!plain.contains(&im_start) && plain.len() > 1, "{name}: plain text must not forge a special token");
        assert_eq!(m.tokenizer.bos_token, Some(f.tiny.bos_id), "{name} bos");
        assert_eq!(m.tokenizer.eos_token, Some(f.tiny.eos_id), "{name} eos");
        assert!(!m.tokenizer.add_bos, "{name} add_bos");
        assert_eq!(m.tokenizer.vocab_size(), f.tiny.vocab_size(), "{name} vocab");
        assert_eq!(m.tokenizer.eog_tokens, f.gguf.tokenizer.eog_tokens, "{name} end-of-generation tokens");
        assert_eq!(m.tokenizer.encode("Hi", true, true).unwrap()[0], f.tiny.bos_id, "{name}: add_bos prepends BOS");
    }
    assert_eq!(f.gguf.tokenizer.eog_tokens, vec![f.tiny.eos_id, f.tiny.bos_id], "EOS first, then <|endoftext|>");
}

#[test]
fn chat_templates_render_chatml() {
    let f = fixture();
    let messages = vec![ChatMessage::new("system", "You are terse."), ChatMessage::new("user", "Hello the cat")];
    let expected = "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHello the cat<|im_end|>\n<|im_start|>assistant\n";
    for (name, m) in [("gguf", &f.gguf), ("hf", &f.hf), ("hf-sharded", &f.hf_sharded)] {
        let t = m.chat_template.as_ref().unwrap_or_else(|| panic!("{name} has no chat template"));
        assert_eq!(t.render(&messages, true, None).unwrap(), expected, "{name}");
        assert_eq!(t.render(&messages, false, None).unwrap(), &expected[..expected.len() - "<|im_start|>assistant\n".len()], "{name}");
        let bad = [ChatMessage::new("wizard", "x")];
        assert_eq!(t.render(&bad, true, None).unwrap_err().kind, kvengine::ErrorKind::InvalidArgument);
    }
    // The rendered prompt tokenizes with the control tokens atomic, identically everywhere.
    let text = f.gguf.chat_template.as_ref().unwrap().render(&messages, true, None).unwrap();
    let ids = f.gguf.tokenizer.encode(&text, true, false).unwrap();
    assert_eq!(ids, f.hf.tokenizer.encode(&text, true, false).unwrap());
    let count = |id: u32| ids.iter().filter(|&&x| x == id).count();
    let im_start = f.tiny.tokens.iter().position(|t| t == IM_START).unwrap() as u32;
    assert_eq!(count(im_start), 3);
    assert_eq!(count(f.tiny.eos_id), 2);
}

#[test]
fn logits_agree_across_gguf_hf_and_sharded_hf() {
    let f = fixture();
    let vocab = f.tiny.vocab_size();
    let mut worst = 0.0f32;
    for text in PROMPTS {
        let ids = f.gguf.tokenizer.encode(text, true, false).unwrap();
        let g = all_logits(&f.gguf, &ids);
        let h = all_logits(&f.hf, &ids);
        let s = all_logits(&f.hf_sharded, &ids);
        // Not vacuous: logits differ across the vocabulary and across positions.
        for pos in 0..ids.len() {
            let row = &g[pos * vocab..(pos + 1) * vocab];
            assert!(row.iter().all(|x| x.is_finite()));
            assert!(std_dev(row) > 0.1, "position {pos} logits are nearly constant: std {}", std_dev(row));
        }
        if ids.len() > 1 {
            assert!(max_abs_diff(&g[..vocab], &g[vocab..2 * vocab]) > 0.1, "positions 0 and 1 give the same logits");
        }
        let d_h = max_abs_diff(&g, &h);
        let d_s = max_abs_diff(&h, &s);
        worst = worst.max(d_h).max(d_s);
        assert!(d_h < TOLERANCE, "GGUF vs HF logits differ by {d_h} on {text:?}");
        assert!(d_s < TOLERANCE, "HF vs sharded HF logits differ by {d_s} on {text:?}");
        // The cache-free reference path (candle's own rope_i / rope kernels) agrees too.
        let r_g = f.gguf.model.forward_reference(&ids).unwrap();
        let r_h = f.hf.model.forward_reference(&ids).unwrap();
        assert!(max_abs_diff(&g, &r_g) < TOLERANCE, "GGUF cached vs reference: {}", max_abs_diff(&g, &r_g));
        assert!(max_abs_diff(&h, &r_h) < TOLERANCE, "HF cached vs reference: {}", max_abs_diff(&h, &r_h));
    }
    eprintln!("max |logit difference| across formats: {worst:e}");
}

/// Q8_0 weights are an approximation: close to F32, not equal.
#[test]
fn q8_0_gguf_is_close_to_f32() {
    let f = fixture();
    let vocab = f.tiny.vocab_size();
    let ids = f.gguf.tokenizer.encode(PROMPTS[0], true, false).unwrap();
    let a = all_logits(&f.gguf, &ids);
    let b = all_logits(&f.gguf_q8, &ids);
    let scale = a.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    let diff = max_abs_diff(&a, &b);
    eprintln!("q8_0 vs f32: max diff {diff:e}, max |logit| {scale}");
    assert!(diff > 0.0, "Q8_0 should not be bit-identical to F32");
    assert!(diff < 0.05 * scale, "Q8_0 logits differ by {diff} (max |logit| {scale})");
    let same = (0..ids.len()).filter(|&p| argmax(&a[p * vocab..(p + 1) * vocab]) == argmax(&b[p * vocab..(p + 1) * vocab])).count();
    assert!(same * 10 >= ids.len() * 8, "greedy tokens agree at only {same}/{} positions", ids.len());
}

/// Without llama.cpp's Q/K permutation the GGUF model is a different function: proves the
/// equivalence test above is sensitive to the RoPE convention, not passing by accident.
#[test]
fn missing_qk_permutation_is_detected() {
    let f = fixture();
    let dir = tempdir();
    let path = dir.path().join("unpermuted.gguf");
    write_gguf_parts(&path, &f.tiny.gguf_metadata(), &f.tiny.gguf_tensors_with(GgmlDType::F32, false));
    let wrong = load_ok(&path);
    let ids = f.gguf.tokenizer.encode(PROMPTS[0], true, false).unwrap();
    let diff = max_abs_diff(&all_logits(&wrong, &ids), &all_logits(&f.hf, &ids));
    assert!(diff > 1e-2, "un-permuted Q/K rows gave the same logits (diff {diff}): the test cannot see RoPE mistakes");
    // Position 0 has no rotation, so its logits must still agree.
    let vocab = f.tiny.vocab_size();
    let first = max_abs_diff(&all_logits(&wrong, &ids)[..vocab], &all_logits(&f.hf, &ids)[..vocab]);
    assert!(first < TOLERANCE, "position 0 should be unaffected by RoPE, diff {first}");
}

/// Tied embeddings: no output.weight in the GGUF, no lm_head.weight in the HF checkpoint.
#[test]
fn tied_embeddings_agree_across_formats() {
    let tiny = TinyModel::with_spec(7, TinySpec { tied: true, ..TinySpec::default() });
    let files = write_all(&tiny);
    let (g, h, s) = (load_ok(&files.gguf), load_ok(&files.hf), load_ok(&files.hf_sharded));
    for m in [&g, &h, &s] {
        assert!(m.model.config.tie_word_embeddings);
    }
    for text in PROMPTS {
        let ids = g.tokenizer.encode(text, true, false).unwrap();
        let lg = all_logits(&g, &ids);
        let d1 = max_abs_diff(&lg, &all_logits(&h, &ids));
        let d2 = max_abs_diff(&lg, &all_logits(&s, &ids));
        assert!(d1 < TOLERANCE && d2 < TOLERANCE, "tied: GGUF vs HF {d1}, vs sharded {d2}");
    }
}

/// Chunked prefill and batched rows give the same logits on the safetensors-loaded model as on
/// the GGUF one (the cache path is format independent).
#[test]
fn batched_ragged_rows_agree_across_formats() {
    let f = fixture();
    let rows: Vec<Vec<u32>> = PROMPTS.iter().map(|t| f.gguf.tokenizer.encode(t, true, false).unwrap()).collect();
    let run = |m: &LoadedModel| {
        let mut cache = m.model.new_cache_as(rows.len(), 64, KvType::F32).unwrap();
        let first: Vec<Vec<u32>> = rows.iter().map(|r| r[..r.len() / 2].to_vec()).collect();
        let second: Vec<Vec<u32>> = rows.iter().map(|r| r[r.len() / 2..].to_vec()).collect();
        m.model.forward(&first, &mut cache, LogitsFor::LastPerRow, None).unwrap();
        let out = m.model.forward(&second, &mut cache, LogitsFor::LastPerRow, None).unwrap();
        assert_eq!(cache.seqlens().iter().map(|&x| x as usize).collect::<Vec<_>>(), rows.iter().map(|r| r.len()).collect::<Vec<_>>());
        out.logits
    };
    let g = run(&f.gguf);
    let h = run(&f.hf);
    assert!(max_abs_diff(&g, &h) < TOLERANCE, "batched GGUF vs HF: {}", max_abs_diff(&g, &h));
    // And equal to each row's own single-sequence last-position logits.
    let vocab = f.tiny.vocab_size();
    for (i, r) in rows.iter().enumerate() {
        let solo = all_logits(&f.hf, r);
        let last = &solo[(r.len() - 1) * vocab..];
        let d = max_abs_diff(&g[i * vocab..(i + 1) * vocab], last);
        assert!(d < TOLERANCE, "row {i}: batched vs solo differ by {d}");
    }
}
