//! The harness shared by the loader fuzz tests (`fuzz_gguf`, `fuzz_hf`): a counting global
//! allocator, quiet panic capture, per-run statistics, the check applied to every mutant, and
//! the mutators.
//!
//! Every load must return `Ok` or `Err`: a panic fails the test with the seed and iteration. No
//! load may allocate far beyond the size of its input. When a mutant loads, one forward pass on
//! a short prompt must also return `Ok` or `Err`.
//!
//! Environment: `KVENGINE_FUZZ_SEED` replaces a test's seed, `KVENGINE_FUZZ_ITERS` scales the
//! run, `KVENGINE_FUZZ_ONLY=<iteration>` runs one case and prints what it mutated.

// Each fuzz binary uses the mutators of its own format only.
#![allow(dead_code)]

mod alloc;
pub mod gguf_layout;
pub mod mutate;
pub mod mutate_hf;
mod panics;
mod stats;

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use kvengine::LogitsFor;

use crate::common::Rng;
use alloc::{with_peak_growth, ITERATION};
use panics::{clear_last_panic, guarded, install_quiet_panic_hook, take_last_panic};
pub use stats::Stats;

/// Tests in one binary share the allocation counters, so they take turns.
static SERIAL: Mutex<()> = Mutex::new(());

fn env_u64(key: &str) -> Option<u64> {
    let v = std::env::var(key).ok()?;
    let v = v.trim();
    match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

/// One fuzz test's run, holding the allocation counters for as long as it lives.
pub struct Run {
    pub seed: u64,
    pub iterations: usize,
    /// Set by `KVENGINE_FUZZ_ONLY`: the run is a reproduction, not a full fuzz.
    pub only: Option<usize>,
    _serial: MutexGuard<'static, ()>,
}

impl Run {
    /// `iterations` maps `KVENGINE_FUZZ_ITERS` (if set) to this test's iteration count.
    pub fn start(default_seed: u64, iterations: impl FnOnce(Option<u64>) -> usize) -> Self {
        let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        install_quiet_panic_hook();
        Self {
            seed: env_u64("KVENGINE_FUZZ_SEED").unwrap_or(default_seed),
            iterations: iterations(env_u64("KVENGINE_FUZZ_ITERS")),
            only: env_u64("KVENGINE_FUZZ_ONLY").map(|x| x as usize),
            _serial: serial,
        }
    }

    /// Runs every selected iteration and fails the test if any case failed. `case` builds the
    /// iteration's mutant from its own Rng, writes it to `path`, and returns a description of
    /// it and its size in bytes.
    pub fn mutants(&self, what: &str, path: &Path, mut case: impl FnMut(&mut Rng, usize) -> (String, usize)) -> Stats {
        let mut stats = Stats::default();
        let started = Instant::now();
        for it in 0..self.iterations {
            if self.only.is_some_and(|o| o != it) {
                continue;
            }
            let mut rng = Rng::new(self.seed ^ (it as u64).wrapping_mul(0xA24B_AED4_963E_E407));
            ITERATION.store(it, Ordering::Relaxed);
            let (description, size) = case(&mut rng, it);
            let tag = format!("seed {:#x} iteration {it} ({description})", self.seed);
            if self.only.is_some() {
                eprintln!("running {tag}");
            }
            run_case(&mut stats, &tag, path, size);
        }
        ITERATION.store(usize::MAX, Ordering::Relaxed);
        stats.finish(what, started);
        stats
    }
}

/// An unmutated base goes through the same checks, to show the harness itself is sound.
pub fn run_pristine(stats: &mut Stats, name: &str, path: &Path, input_bytes: usize) {
    ITERATION.store(0, Ordering::Relaxed);
    run_case(stats, &format!("pristine {name}"), path, input_bytes);
}

/// Loads `path` (input of `input_bytes`), checks the rules, and records the outcome.
fn run_case(stats: &mut Stats, tag: &str, path: &Path, input_bytes: usize) {
    stats.iterations += 1;
    clear_last_panic();
    let (result, growth) = with_peak_growth(|| guarded(|| kvengine::load(path, &mut |_| {})));
    let limit = 32 * input_bytes + (64 << 20);
    stats.max_growth = stats.max_growth.max(growth);
    stats.max_growth_ratio = stats.max_growth_ratio.max(growth as f64 / input_bytes.max(1) as f64);
    if growth > limit {
        stats.failures.push(format!("{tag}: load allocated {growth} bytes for a {input_bytes}-byte input (limit {limit})"));
    }
    match result {
        Err(_) => stats.failures.push(format!("{tag}: load PANICKED: {}", take_last_panic())),
        Ok(Err(e)) => stats.record_load_error(tag, &e),
        Ok(Ok(loaded)) => {
            stats.loaded += 1;
            check_loaded(stats, tag, &loaded, input_bytes);
        }
    }
}

/// A mutant that loads must be one a forward pass can safely run on.
fn check_loaded(stats: &mut Stats, tag: &str, loaded: &kvengine::LoadedModel, input_bytes: usize) {
    // A loaded model cannot hold more weights than its file had bytes (even at 2 bits each).
    let c = &loaded.model.config;
    let implied = c.vocab_size.checked_mul(c.hidden_size).and_then(|n| n.checked_add(c.n_layers.checked_mul(c.hidden_size)?));
    if implied.is_none_or(|n| n / 4 > input_bytes) {
        stats.failures.push(format!(
            "{tag}: loaded a model whose config (vocab {}, hidden {}, layers {}) implies more weights than the {input_bytes}-byte input holds; a forward pass would allocate for it",
            c.vocab_size, c.hidden_size, c.n_layers
        ));
        return;
    }
    let fwd = guarded(|| -> kvengine::Result<usize> {
        let mut ids = loaded.tokenizer.encode("Hello the cat", true, false)?;
        if ids.is_empty() {
            ids.push(0);
        }
        let mut cache = loaded.model.new_cache(1, ids.len())?;
        let out = loaded.model.forward(&[ids], &mut cache, LogitsFor::LastPerRow, None)?;
        Ok(out.logits.len())
    });
    match fwd {
        Err(_) => stats.failures.push(format!("{tag}: forward on a loaded mutant PANICKED: {}", take_last_panic())),
        Ok(Ok(n)) => {
            if n != c.vocab_size {
                stats.failures.push(format!("{tag}: forward returned {n} logits for a vocabulary of {}", c.vocab_size));
            }
            stats.forward_ok += 1;
        }
        Ok(Err(e)) => *stats.forward_err.entry(e.kind.code()).or_default() += 1,
    }
}
