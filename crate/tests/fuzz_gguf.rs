//! Deterministic fuzzing of the GGUF loader: the tiny model's GGUF file (F32, Q8_0, and with tied
//! embeddings), mutated (byte flips concentrated in the header, metadata and tensor infos,
//! count/length/dim/offset fields set to extreme values, truncations, duplicated and deleted
//! regions), then loaded with `kvengine::load`. The rules every mutant must follow are in
//! `fuzz/mod.rs`.
//!
//! Reproduce one case: `KVENGINE_FUZZ_ONLY=<iteration> cargo test --release
//! --no-default-features --test fuzz_gguf -- --nocapture` (with `KVENGINE_FUZZ_SEED` if the
//! failure used another seed). `KVENGINE_FUZZ_ITERS` scales the run.

mod common;
mod fuzz;

use candle_core::quantized::gguf_file::Value;
use candle_core::quantized::GgmlDType;
use common::*;
use fuzz::gguf_layout::{walk_gguf, GgufLayout};
use fuzz::mutate::mutate_gguf;
use fuzz::{run_pristine, Run, Stats};

/// The model as GGUF bytes, with an explicit general.alignment so that field is fuzzed too.
fn gguf_base(m: &TinyModel, dtype: GgmlDType) -> Vec<u8> {
    let mut meta = m.gguf_metadata();
    meta.insert(1, ("general.alignment".to_string(), Value::U32(32)));
    let dir = tempdir();
    let p = dir.path().join("base.gguf");
    write_gguf_parts(&p, &meta, &m.gguf_tensors(dtype));
    std::fs::read(&p).unwrap()
}

#[test]
fn fuzz_gguf_headers() {
    let run = Run::start(0x6775_6666, |iters| iters.unwrap_or(12_000) as usize);
    let tiny = TinyModel::new(42);
    let tied = TinyModel::with_spec(43, TinySpec { tied: true, ..TinySpec::default() });
    let bases: Vec<(String, Vec<u8>)> = vec![
        ("f32".into(), gguf_base(&tiny, GgmlDType::F32)),
        ("q8_0".into(), gguf_base(&tiny, GgmlDType::Q8_0)),
        ("f32-tied".into(), gguf_base(&tied, GgmlDType::F32)),
    ];
    let layouts: Vec<GgufLayout> = bases.iter().map(|(_, b)| walk_gguf(b)).collect();
    for ((name, b), l) in bases.iter().zip(&layouts) {
        eprintln!("base {name}: {} bytes, header+metadata+tensor infos {} bytes, {} numeric fields", b.len(), l.data_start, l.fields.len());
    }
    let dir = tempdir();
    let path = dir.path().join("mutant.gguf");

    let mut stats = Stats::default();
    for (name, b) in &bases {
        std::fs::write(&path, b).unwrap();
        run_pristine(&mut stats, name, &path, b.len());
    }
    assert_eq!(stats.loaded, bases.len(), "pristine bases must load: {:?}", stats.failures);
    assert_eq!(stats.forward_ok, bases.len());

    let stats = run.mutants("GGUF fuzz", &path, |rng, it| {
        let which = it % bases.len();
        let (base_name, base) = &bases[which];
        let (bytes, what) = mutate_gguf(rng, base, &layouts[which]);
        std::fs::write(&path, &bytes).unwrap();
        (format!("base {base_name}; {what}"), bytes.len())
    });
    assert!(run.only.is_some() || stats.loaded > 0, "no mutant loaded: the mutations are too destructive to exercise the later stages");
    assert!(run.only.is_some() || stats.errors.values().sum::<usize>() > run.iterations / 2);
}
