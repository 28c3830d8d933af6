//! Deterministic fuzzing of the nanoGPT checkpoint loader: the random `ckpt.pt` of
//! tests/fixtures/nanogpt (a torch zip archive: the pickle with model_args, config and the
//! optimizer's structure, then the tensor storages) and its dataset's meta.pkl, mutated three
//! ways: the pickle's bytes edited and the archive rebuilt around it (so the edit reaches the
//! unpickler instead of failing the zip's checksum), the archive's own bytes edited (zip headers,
//! central directory, storages), or meta.pkl edited. Each mutant is loaded with `kvengine::load`
//! under the rules of `fuzz/mod.rs`.
//!
//! Reproduce one case: `KVENGINE_FUZZ_ONLY=<iteration> cargo test --release
//! --no-default-features --test fuzz_nanogpt -- --nocapture` (with `KVENGINE_FUZZ_SEED` if the
//! failure used another seed). `KVENGINE_FUZZ_ITERS` scales the run.

mod common;
mod fuzz;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use common::*;
use fuzz::mutate::mutate_bytes;
use fuzz::{run_pristine, Run, Stats};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nanogpt")
}

/// The archive's members, in order.
fn members(archive: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(archive)).unwrap();
    (0..zip.len())
        .map(|i| {
            let mut member = zip.by_index(i).unwrap();
            let mut bytes = Vec::new();
            member.read_to_end(&mut bytes).unwrap();
            (member.name().unwrap().into_owned(), bytes)
        })
        .collect()
}

/// A torch-style archive: every member stored uncompressed.
fn archive(members: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let stored = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, bytes) in members {
        out.start_file(name.as_str(), stored).unwrap();
        out.write_all(bytes).unwrap();
    }
    out.finish().unwrap().into_inner()
}

fn write_case(dir: &Path, ckpt: &[u8], meta: &[u8]) -> usize {
    std::fs::write(dir.join("ckpt.pt"), ckpt).unwrap();
    std::fs::write(dir.join("meta.pkl"), meta).unwrap();
    ckpt.len() + meta.len()
}

#[test]
fn fuzz_nanogpt_checkpoints() {
    let run = Run::start(0x6e67_7074, |iters| iters.map(|n| n as usize / 4).unwrap_or(3_000));
    let ckpt = std::fs::read(fixtures().join("out-bias/ckpt.pt")).unwrap();
    let meta = std::fs::read(fixtures().join("data/shakespeare_char/meta.pkl")).unwrap();
    let parts = members(&ckpt);
    let pickle_at = parts.iter().position(|(n, _)| n.ends_with("/data.pkl")).expect("a data.pkl member");
    // Rebuilt by our writer, so a pickle mutant differs from the base in the pickle alone.
    let rebuilt = archive(&parts);
    let scratch = tempdir();
    let work = scratch.path();
    let path = work.join("ckpt.pt");

    let mut stats = Stats::default();
    for (name, base) in [("torch.save", &ckpt), ("rebuilt", &rebuilt)] {
        let size = write_case(work, base, &meta);
        run_pristine(&mut stats, name, &path, size);
    }
    assert_eq!(stats.loaded, 2, "pristine checkpoints must load: {:?}", stats.failures);
    assert_eq!(stats.forward_ok, 2);

    let stats = run.mutants("nanoGPT checkpoint fuzz", &path, |rng, it| match it % 3 {
        0 => {
            let mut edited = parts.clone();
            let pickle = &mut edited[pickle_at].1;
            let hot = pickle.len();
            let how = mutate_bytes(rng, pickle, hot);
            (format!("data.pkl: {how}"), write_case(work, &archive(&edited), &meta))
        }
        1 => {
            let mut bytes = ckpt.clone();
            let hot = bytes.len();
            let how = mutate_bytes(rng, &mut bytes, hot);
            (format!("archive: {how}"), write_case(work, &bytes, &meta))
        }
        _ => {
            let mut bytes = meta.clone();
            let hot = bytes.len();
            let how = mutate_bytes(rng, &mut bytes, hot);
            (format!("meta.pkl: {how}"), write_case(work, &ckpt, &bytes))
        }
    });
    assert!(run.only.is_some() || stats.loaded > 0, "no mutant loaded: the mutations are too destructive to exercise the later stages");
}
