//! Greedy generation from the command line, without Node:
//! `cargo run --release --no-default-features --example generate -- <model> "<prompt>" [tokens]`

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use kvengine::LogitsFor;

fn main() -> kvengine::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let path = PathBuf::from(args.get(1).map(String::as_str).unwrap_or("models/SmolLM2-135M-Instruct.Q4_1.gguf"));
    let prompt = args.get(2).cloned().unwrap_or_else(|| "The capital of France is".into());
    let n: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(32);
    let loaded = kvengine::load(&path, &mut |_| {})?;
    let (model, tok) = (&loaded.model, &loaded.tokenizer);
    eprintln!("{} layers, format {}", model.config.n_layers, loaded.format);
    let ids = tok.encode(&prompt, false, tok.add_bos)?;
    let mut cache = model.new_cache(1, ids.len() + n)?;
    let t0 = Instant::now();
    let mut out = model.forward(std::slice::from_ref(&ids), &mut cache, LogitsFor::LastPerRow, None)?;
    let prefill = t0.elapsed();
    print!("{prompt}");
    let t1 = Instant::now();
    for _ in 0..n {
        let next = argmax(&out.logits);
        print!("{}", tok.decode(&[next])?);
        std::io::stdout().flush().ok();
        out = model.forward(&[vec![next]], &mut cache, LogitsFor::LastPerRow, None)?;
    }
    println!();
    eprintln!("prefill {} tokens in {:?}; decode {:.1} tok/s", ids.len(), prefill, n as f64 / t1.elapsed().as_secs_f64());
    Ok(())
}

fn argmax(v: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best as u32
}
