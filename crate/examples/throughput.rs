//! Prefill and decode speed of the Rust core alone, for profiling without Node:
//! `cargo run --release --no-default-features --example throughput -- <model> [prompt_len] [decode_len] [batch] [f32|q8]`

use std::path::PathBuf;
use std::time::Instant;

use kvengine::LogitsFor;

#[global_allocator]
static ALLOCATOR: kvengine::Allocator = kvengine::Allocator;

fn main() -> kvengine::Result<()> {
    // On a pool thread, as the Node binding runs its passes (`pass_queue.rs`): from outside the
    // pool every parallel region would also pay to wake this thread when it ends.
    rayon::scope(|_| measure())
}

fn measure() -> kvengine::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let path = PathBuf::from(args.get(1).map(String::as_str).unwrap_or("models/SmolLM2-135M-Instruct.Q8_0.gguf"));
    let arg = |i: usize, default: usize| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(default);
    let (prompt_len, decode_len, batch) = (arg(2, 512), arg(3, 128), arg(4, 1));
    let placement = kvengine::Placement::parse(None, None, args.get(5).map(String::as_str), None)?;
    let loaded = kvengine::load_on(&path, placement, &mut |_| {})?;
    let model = &loaded.model;
    let vocab = model.config.vocab_size as u32;
    // Any fixed token sequence measures the same work; a simple congruence avoids repeats.
    let prompt: Vec<u32> = (0..prompt_len as u32).map(|i| (i * 7919 + 13) % vocab).collect();
    let mut cache = model.new_cache(batch, prompt_len + decode_len)?;
    let mut prefill: Vec<Vec<u32>> = vec![Vec::new(); batch];
    prefill[0] = prompt;
    // The benchmarks time a prefill after a warm-up, when the allocator already holds the
    // pass's buffers; a first pass also pays for faulting them in.
    model.forward(&prefill, &mut model.new_cache(batch, prompt_len)?, LogitsFor::LastPerRow, None)?;
    let t0 = Instant::now();
    model.forward(&prefill, &mut cache, LogitsFor::LastPerRow, None)?;
    let prefill_s = t0.elapsed().as_secs_f64();
    for row in 1..batch {
        cache.copy_row(0, row)?;
    }
    let t1 = Instant::now();
    for step in 0..decode_len as u32 {
        let tokens: Vec<Vec<u32>> = (0..batch as u32).map(|r| vec![(step * 31 + r) % vocab]).collect();
        model.forward(&tokens, &mut cache, LogitsFor::LastPerRow, None)?;
    }
    let decode_s = t1.elapsed().as_secs_f64();
    println!(
        "prefill {prompt_len}: {:.1} tok/s ({:.1} ms) | decode {decode_len} x batch {batch}: {:.1} steps/s, {:.1} tok/s",
        prompt_len as f64 / prefill_s,
        prefill_s * 1e3,
        decode_len as f64 / decode_s,
        (decode_len * batch) as f64 / decode_s
    );
    Ok(())
}
