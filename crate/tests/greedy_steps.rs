//! Greedy passes run back to back in one call (`forward_greedy_steps`, the binding's
//! `greedySteps`) against one pass per call feeding the same top candidates, and their rewind
//! when a later pass fails.

mod common;
mod smollm;

use candle_core::quantized::GgmlDType;
use kvengine::{ErrorKind, LogitsFor};

/// Two rows of different lengths, 12 passes: the same candidates, to the bit, and the same cache.
#[test]
fn greedy_steps_equal_one_pass_per_call() {
    let m = smollm::q8_model();
    let prompts = vec![smollm::chat_prompt(m, "Count from one to ten."), smollm::chat_prompt(m, "Name three rivers in France, please.")];
    let (steps, per_row) = (12, 3);
    let mut stepped = m.model.new_cache(2, 128).unwrap();
    let mut burst = m.model.new_cache(2, 128).unwrap();
    let (_, first) = m.model.forward_picking(&prompts, &mut stepped, LogitsFor::LastPerRow, None, per_row, &mut []).unwrap();
    m.model.forward(&prompts, &mut burst, LogitsFor::LastPerRow, None).unwrap();
    let mut next: Vec<Vec<u32>> = first.unwrap().ids.chunks(per_row).map(|c| vec![c[0]]).collect();

    let bursts = m.model.forward_greedy_steps(&next, &mut burst, steps, None, per_row).unwrap();
    assert_eq!(bursts.len(), steps);
    for (step, got) in bursts.iter().enumerate() {
        let (_, want) = m.model.forward_picking(&next, &mut stepped, LogitsFor::LastPerRow, None, per_row, &mut []).unwrap();
        let want = want.unwrap();
        assert_eq!(got.ids, want.ids, "step {step}: candidates differ");
        assert!(got.logits == want.logits, "step {step}: candidate logits differ");
        next = want.ids.chunks(per_row).map(|c| vec![c[0]]).collect();
    }
    assert_eq!(burst.seqlens(), stepped.seqlens());
}

/// A burst whose fifth pass would run past the context fails as a single pass would, and every
/// row is back where it was before the call.
#[test]
fn a_failed_burst_rewinds_every_row() {
    let tiny = common::TinyModel::new(11);
    let dir = common::tempdir();
    let path = dir.path().join("m.gguf");
    tiny.write_gguf(&path, GgmlDType::F32);
    let m = common::load_ok(&path);
    let ctx = m.model.config.context_length;
    let mut cache = m.model.new_cache(2, ctx).unwrap();
    m.model.forward(&[vec![1; ctx - 4], vec![2, 3, 4]], &mut cache, LogitsFor::LastPerRow, None).unwrap();
    let before = cache.seqlens().to_vec();
    let err = m.model.forward_greedy_steps(&[vec![5], vec![6]], &mut cache, 6, None, 1).unwrap_err();
    assert_eq!(err.kind, ErrorKind::ContextOverflow, "{err}");
    assert_eq!(cache.seqlens(), before.as_slice());
    // Four passes fit exactly, and the cache then holds them.
    m.model.forward_greedy_steps(&[vec![5], vec![6]], &mut cache, 4, None, 1).unwrap();
    assert_eq!(cache.seqlens(), &[before[0] + 4, before[1] + 4]);
}
