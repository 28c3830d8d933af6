//! The KV-cached fast path against the cache-free reference path (model/reference.rs), on the
//! real SmolLM2 weights in F32.

mod smollm;

use kvengine::{KvType, LogitsFor};
use smollm::{argmax, chat_prompt, f32_model, max_abs_diff};

const TOLERANCE: f32 = 1e-4;
/// An f16 store against the cache-free reference (which keeps K and V in f32): the rounding
/// moves SmolLM2's logits by up to ~1.3e-2 over 128 steps, while a cache bookkeeping error (a
/// wrong position, a stale or overwritten row) moves them by whole units.
const F16_TOLERANCE: f32 = 3e-2;

/// 128 greedy steps through the cache, each step's logits compared with recomputing the whole
/// sequence without a cache. Because the model is causal, one reference pass over the final
/// sequence yields exactly the logits a from-scratch recompute would give at every step.
#[test]
fn cached_decode_equals_recompute_for_128_steps() {
    cached_decode_against_recompute(KvType::F32, TOLERANCE);
}

/// The same with the default f16 store: the greedy tokens still agree at every step.
#[test]
fn f16_cached_decode_stays_close_to_recompute_for_128_steps() {
    cached_decode_against_recompute(KvType::F16, F16_TOLERANCE);
}

fn cached_decode_against_recompute(kv_type: KvType, tolerance: f32) {
    let m = f32_model();
    let vocab = m.model.config.vocab_size;
    let prompt = chat_prompt(m, "Write a short poem about the sea.");
    let mut cache = m.model.new_cache_as(1, 64, kv_type).unwrap();
    let mut out = m.model.forward(std::slice::from_ref(&prompt), &mut cache, LogitsFor::LastPerRow, None).unwrap();
    let mut seq = prompt.clone();
    let mut cached_logits = Vec::new();
    for _ in 0..128 {
        cached_logits.push(out.logits.clone());
        let next = argmax(&out.logits);
        seq.push(next);
        out = m.model.forward(&[vec![next]], &mut cache, LogitsFor::LastPerRow, None).unwrap();
    }
    assert_eq!(cache.seqlen(0), seq.len());
    assert!(cache.capacity() >= seq.len(), "cache grew past its initial 64 positions");
    let reference = m.model.forward_reference(&seq).unwrap();
    let mut worst = 0.0f32;
    for (step, logits) in cached_logits.iter().enumerate() {
        let pos = prompt.len() - 1 + step;
        let expected = &reference[pos * vocab..(pos + 1) * vocab];
        let diff = max_abs_diff(logits, expected);
        worst = worst.max(diff);
        assert!(diff < tolerance, "{kv_type:?} step {step}: cached logits differ from recompute by {diff}");
        assert_eq!(argmax(logits), argmax(expected), "{kv_type:?} step {step}: greedy token differs");
    }
    eprintln!("{kv_type:?} store: max |cached - recompute| over 128 steps: {worst:e}");
}

/// Prefill in chunks (with logits for every position) equals one prefill of the whole prompt.
#[test]
fn chunked_prefill_equals_single_prefill() {
    let m = f32_model();
    let prompt = chat_prompt(m, "List three prime numbers and explain why each is prime.");
    let mut whole = m.model.new_cache(1, 256).unwrap();
    let all = m.model.forward(std::slice::from_ref(&prompt), &mut whole, LogitsFor::All, None).unwrap();
    let mut chunked = m.model.new_cache(1, 256).unwrap();
    let mut pieces = Vec::new();
    for chunk in prompt.chunks(7) {
        pieces.extend(m.model.forward(&[chunk.to_vec()], &mut chunked, LogitsFor::All, None).unwrap().logits);
    }
    let diff = max_abs_diff(&all.logits, &pieces);
    assert!(diff < TOLERANCE, "chunked prefill differs by {diff}");
    assert_eq!(whole.seqlens(), chunked.seqlens());
}

/// Rows of different prompt lengths decoded together give the same greedy tokens (and logits)
/// as each decoded alone.
#[test]
fn ragged_batch_equals_rows_alone() {
    let m = f32_model();
    let prompts = [
        chat_prompt(m, "Hi!"),
        chat_prompt(m, "Explain in detail how a bicycle stays upright while moving forward."),
        m.tokenizer.encode("def quicksort(xs):", false, false).unwrap(),
    ];
    let steps = 24;
    let alone: Vec<(Vec<u32>, Vec<Vec<f32>>)> = prompts.iter().map(|p| greedy(m, std::slice::from_ref(p), steps).remove(0)).collect();
    let together = greedy(m, &prompts, steps);
    for (row, ((tokens, logits), (tokens_b, logits_b))) in alone.iter().zip(&together).enumerate() {
        assert_eq!(tokens, tokens_b, "row {row}: batched greedy tokens differ from alone");
        for (step, (a, b)) in logits.iter().zip(logits_b).enumerate() {
            let diff = max_abs_diff(a, b);
            assert!(diff < TOLERANCE, "row {row} step {step}: logits differ by {diff}");
        }
    }
}

/// Greedy decoding of several rows in one batch; returns each row's tokens and logits per step.
fn greedy(m: &kvengine::LoadedModel, prompts: &[Vec<u32>], steps: usize) -> Vec<(Vec<u32>, Vec<Vec<f32>>)> {
    let vocab = m.model.config.vocab_size;
    let mut cache = m.model.new_cache(prompts.len(), 128).unwrap();
    let mut out = m.model.forward(prompts, &mut cache, LogitsFor::LastPerRow, None).unwrap();
    let mut rows: Vec<(Vec<u32>, Vec<Vec<f32>>)> = vec![(Vec::new(), Vec::new()); prompts.len()];
    for _ in 0..steps {
        let mut next = Vec::new();
        for (i, &row) in out.rows.iter().enumerate() {
            let logits = out.logits[i * vocab..(i + 1) * vocab].to_vec();
            let token = argmax(&logits);
            rows[row as usize].0.push(token);
            rows[row as usize].1.push(logits);
            next.push(vec![token]);
        }
        out = m.model.forward(&next, &mut cache, LogitsFor::LastPerRow, None).unwrap();
    }
    rows
}

/// Growing the store past its first 1024 positions (forced by a long second row) keeps the
/// first row intact: its decode continues exactly as the reference says.
#[test]
fn growth_keeps_earlier_rows_intact() {
    let m = f32_model();
    let vocab = m.model.config.vocab_size;
    let prompt = chat_prompt(m, "Name three rivers in Europe.");
    let filler = m.tokenizer.encode(&" the river flows".repeat(400), false, false).unwrap();
    assert!(filler.len() > 1024);
    let mut cache = m.model.new_cache_as(2, 1, KvType::F32).unwrap();
    assert_eq!(cache.capacity(), 1);
    let mut out = m.model.forward(&[prompt.clone(), vec![]], &mut cache, LogitsFor::LastPerRow, None).unwrap();
    assert_eq!(cache.capacity(), 1024, "the prompt grew it by one step");
    let mut seq = prompt.clone();
    for _ in 0..4 {
        seq.push(argmax(&out.logits));
        out = m.model.forward(&[vec![*seq.last().unwrap()], vec![]], &mut cache, LogitsFor::LastPerRow, None).unwrap();
    }
    m.model.forward(&[vec![], filler.clone()], &mut cache, LogitsFor::LastPerRow, None).unwrap();
    assert_eq!(cache.capacity(), 2048, "the long row forced another growth step");
    let mut cached = Vec::new();
    for _ in 0..8 {
        cached.push(out.logits.clone());
        seq.push(argmax(&out.logits));
        out = m.model.forward(&[vec![*seq.last().unwrap()], vec![]], &mut cache, LogitsFor::LastPerRow, None).unwrap();
    }
    let reference = m.model.forward_reference(&seq).unwrap();
    for (step, logits) in cached.iter().enumerate() {
        let pos = prompt.len() + 3 + step;
        let diff = max_abs_diff(logits, &reference[pos * vocab..(pos + 1) * vocab]);
        assert!(diff < TOLERANCE, "after growth, step {step} differs from the reference by {diff}");
    }
}
