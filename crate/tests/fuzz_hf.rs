//! Deterministic fuzzing of the Hugging Face directory loader: the tiny model as a single-file
//! and as a two-shard checkpoint, mutated (JSON-aware edits of config.json, the tokenizer files
//! and the shard index, safetensors header edits, byte flips, truncations), then loaded with
//! `kvengine::load`. The rules every mutant must follow are in `fuzz/mod.rs`.
//!
//! Reproduce one case: `KVENGINE_FUZZ_ONLY=<iteration> cargo test --release
//! --no-default-features --test fuzz_hf -- --nocapture` (with `KVENGINE_FUZZ_SEED` if the
//! failure used another seed). `KVENGINE_FUZZ_ITERS` scales the run.

mod common;
mod fuzz;

use std::path::Path;

use common::*;
use fuzz::mutate_hf::mutate_hf_file;
use fuzz::{run_pristine, Run, Stats};

/// A checkpoint directory's files as (name, bytes), sorted by name so iterations are
/// reproducible whatever order the file system lists them in.
fn read_dir(d: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
        .collect();
    v.sort();
    v
}

/// Replaces `dir` with exactly `files` and returns their total size.
fn write_dir(dir: &Path, files: &[(String, Vec<u8>)]) -> usize {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    files.iter().map(|(_, b)| b.len()).sum::<usize>()
}

/// Which file to mutate: the weights most often, then config.json, the index (when there is
/// one) and, rarely, the tokenizer files.
fn pick_target(rng: &mut Rng, files: &[(String, Vec<u8>)]) -> usize {
    let position = |name: &str| files.iter().position(|f| f.0 == name);
    let roll = rng.below(100);
    if roll < 45 {
        let names: Vec<usize> = (0..files.len()).filter(|&i| files[i].0.ends_with(".safetensors")).collect();
        names[rng.below(names.len())]
    } else if roll < 65 && position("model.safetensors.index.json").is_some() {
        position("model.safetensors.index.json").unwrap()
    } else if roll < 94 {
        position("config.json").unwrap()
    } else if roll < 97 {
        position("tokenizer_config.json").unwrap()
    } else {
        position("tokenizer.json").unwrap()
    }
}

/// One or two edits of the base directory's files, and their description.
fn mutate_dir(rng: &mut Rng, base: &[(String, Vec<u8>)]) -> (Vec<(String, Vec<u8>)>, String) {
    let mut files = base.to_vec();
    let mut what = Vec::new();
    for _ in 0..1 + rng.below(2) {
        let target = pick_target(rng, &files);
        let (name, bytes) = files[target].clone();
        let (new_bytes, how) = mutate_hf_file(rng, &name, &bytes);
        files[target].1 = new_bytes;
        what.push(format!("{name}: {how}"));
    }
    (files, what.join("; "))
}

#[test]
fn fuzz_hf_dir_headers() {
    let run = Run::start(0x6866_6666, |iters| iters.map(|n| n as usize * 2 / 3).unwrap_or(8_000));
    let tiny = TinyModel::new(44);
    let scratch = tempdir();
    let single = scratch.path().join("single");
    let sharded = scratch.path().join("sharded");
    tiny.write_hf_dir(&single);
    tiny.write_hf_sharded(&sharded, 2);
    let bases = [("single", read_dir(&single)), ("sharded", read_dir(&sharded))];
    let work = scratch.path().join("work");

    let mut stats = Stats::default();
    for (name, files) in &bases {
        let size = write_dir(&work, files);
        run_pristine(&mut stats, name, &work, size);
    }
    assert_eq!(stats.loaded, 2, "pristine HF dirs must load: {:?}", stats.failures);

    let stats = run.mutants("HF directory fuzz", &work, |rng, it| {
        let (base_name, base) = &bases[it % 2];
        let (files, what) = mutate_dir(rng, base);
        (format!("base {base_name}; {what}"), write_dir(&work, &files))
    });
    assert!(run.only.is_some() || stats.loaded > 0, "no mutant loaded");
}
