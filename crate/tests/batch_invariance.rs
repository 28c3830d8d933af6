//! With 8-bit activations, where the matmuls run in panels (every SIMD CPU but AMX ones), a
//! row's logits are a function of its own tokens alone, to the bit: both matmul roads compute
//! the plain definition, and attention cuts every query's keys at the same positions. So one
//! prefill, a prefill in chunks, token-by-token decode, a ragged batch and samples fanned out
//! from one prefilled prompt all give the same logits, on the real SmolLM2 weights in Q8_0.

mod smollm;

use kvengine::{LanguageModel, LogitsFor};
use smollm::{argmax, chat_prompt, q8_model};

/// Whether this CPU runs the invariant kernels; elsewhere the tests say so and pass.
fn panels() -> bool {
    let on = kvengine::matmul::q8_panels();
    if !on {
        eprintln!("skipped: 8-bit activations do not run in panels here ({:?})", kvengine::matmul::kernel());
    }
    on
}

/// A prompt past one attention split (256 positions) and the wide road's 64 rows.
fn long_prompt(m: &kvengine::LoadedModel) -> Vec<u32> {
    let prompt = chat_prompt(m, &"Tell me about the rivers, hills and towns of the north, one by one. ".repeat(24));
    assert!(prompt.len() > 300, "prompt of {} tokens", prompt.len());
    prompt
}

fn forward(model: &LanguageModel, rows: &[Vec<u32>], cache: &mut kvengine::KvCache, logits: LogitsFor) -> Vec<f32> {
    model.forward(rows, cache, logits, None).expect("forward").logits
}

#[test]
fn chunked_prefill_and_decode_give_one_passs_logits_bit_for_bit() {
    if !panels() {
        return;
    }
    let m = q8_model();
    let vocab = m.model.config.vocab_size;
    let prompt = long_prompt(m);
    let mut whole = m.model.new_cache(1, 512).unwrap();
    let all = forward(&m.model, std::slice::from_ref(&prompt), &mut whole, LogitsFor::All);
    let mut chunked = m.model.new_cache(1, 512).unwrap();
    let mut pieces = Vec::new();
    for chunk in prompt.chunks(100).flat_map(|c| c.chunks(if c.len() == 100 { 70 } else { 7 })) {
        pieces.extend(forward(&m.model, &[chunk.to_vec()], &mut chunked, LogitsFor::All));
    }
    assert!(pieces == all, "a prefill in chunks of 70 and 7 changed the logits");
    // Greedy decode, one token a step, against the logits of one pass over what it produced.
    let mut cache = m.model.new_cache(1, 512).unwrap();
    let mut logits = forward(&m.model, std::slice::from_ref(&prompt), &mut cache, LogitsFor::LastPerRow);
    let mut seq = prompt.clone();
    let mut stepped = Vec::new();
    for _ in 0..24 {
        stepped.push(logits.clone());
        seq.push(argmax(&logits));
        logits = forward(&m.model, &[vec![*seq.last().unwrap()]], &mut cache, LogitsFor::LastPerRow);
    }
    let once = forward(&m.model, &[seq.clone()], &mut m.model.new_cache(1, 512).unwrap(), LogitsFor::All);
    for (step, logits) in stepped.iter().enumerate() {
        let pos = prompt.len() - 1 + step;
        assert!(logits[..] == once[pos * vocab..(pos + 1) * vocab], "decode step {step} differs from one pass");
    }
}

#[test]
fn batched_and_fanned_out_rows_give_each_rows_own_logits_bit_for_bit() {
    if !panels() {
        return;
    }
    let m = q8_model();
    let vocab = m.model.config.vocab_size;
    let prompts = [long_prompt(m), chat_prompt(m, "Hi!"), m.tokenizer.encode("def quicksort(xs):", false, false).unwrap()];
    // Each row alone: its prompt, then 16 tokens of its own (fixed, so every run feeds the same).
    let own = |row: usize| -> Vec<u32> { (0..16).map(|i| (row as u32 * 97 + i * 31 + 5) % vocab as u32).collect() };
    let run = |rows: &[(usize, &[u32])], fan_out: bool| -> Vec<Vec<Vec<f32>>> {
        let mut cache = m.model.new_cache(rows.len(), 512).unwrap();
        if fan_out {
            let first: Vec<Vec<u32>> = (0..rows.len()).map(|r| if r == 0 { rows[0].1.to_vec() } else { Vec::new() }).collect();
            forward(&m.model, &first, &mut cache, LogitsFor::LastPerRow);
            (1..rows.len()).for_each(|r| cache.copy_row(0, r).unwrap());
        } else {
            forward(&m.model, &rows.iter().map(|(_, p)| p.to_vec()).collect::<Vec<_>>(), &mut cache, LogitsFor::LastPerRow);
        }
        let mut steps = vec![Vec::new(); rows.len()];
        for i in 0..16 {
            let tokens: Vec<Vec<u32>> = rows.iter().map(|&(row, _)| vec![own(row)[i]]).collect();
            let logits = forward(&m.model, &tokens, &mut cache, LogitsFor::LastPerRow);
            logits.chunks_exact(vocab).zip(&mut steps).for_each(|(l, s)| s.push(l.to_vec()));
        }
        steps
    };
    let alone: Vec<Vec<Vec<f32>>> = prompts.iter().enumerate().map(|(row, p)| run(&[(row, p)], false).remove(0)).collect();
    let together = run(&prompts.iter().enumerate().map(|(row, p)| (row, p.as_slice())).collect::<Vec<_>>(), false);
    for (row, (a, b)) in alone.iter().zip(&together).enumerate() {
        assert!(a == b, "row {row}: batched with the others, its logits changed");
    }
    // The long prompt prefilled once and copied into four rows that then read it together.
    let fanned = run(&(0..4).map(|row| (row, prompts[0].as_slice())).collect::<Vec<_>>(), true);
    for (row, steps) in fanned.iter().enumerate() {
        let want = run(&[(row, &prompts[0])], false).remove(0);
        assert!(*steps == want, "fanned-out row {row}: its logits differ from the prompt decoded alone");
    }
}
