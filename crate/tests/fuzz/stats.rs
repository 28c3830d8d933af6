//! What a fuzz run saw, printed at the end so a passing run still shows which error paths the
//! mutants reached.

use std::collections::BTreeMap;
use std::time::Instant;

use kvengine::ErrorKind;

#[derive(Default)]
pub struct Stats {
    pub iterations: usize,
    pub loaded: usize,
    pub errors: BTreeMap<&'static str, usize>,
    /// First error message seen per (kind, first words), to eyeball that messages make sense.
    pub samples: BTreeMap<String, String>,
    pub forward_ok: usize,
    pub forward_err: BTreeMap<&'static str, usize>,
    pub max_growth_ratio: f64,
    pub max_growth: usize,
    pub failures: Vec<String>,
}

/// The first line of a message (candle appends a backtrace when RUST_BACKTRACE is set), escaped.
fn first_line(message: &str) -> String {
    message.lines().next().unwrap_or("").chars().take(200).flat_map(char::escape_debug).collect()
}

impl Stats {
    /// Counts a load error, and fails the case if the error has no message.
    pub fn record_load_error(&mut self, tag: &str, e: &kvengine::Error) {
        *self.errors.entry(e.kind.code()).or_default() += 1;
        if e.message.trim().is_empty() {
            self.failures.push(format!("{tag}: {:?} error with an empty message", e.kind));
        }
        // One sample message per kind and opening words. INTERNAL is not a failure by
        // itself, but malformed input should be reported as such, so those carry the case.
        let line = first_line(&e.message);
        let words: String = line.split_whitespace().filter(|w| !w.contains('/')).take(3).collect::<Vec<_>>().join(" ");
        let key = format!("{} / {}", e.kind.code(), words.chars().filter(|c| !c.is_ascii_digit()).collect::<String>());
        let sample = if e.kind == ErrorKind::Internal { format!("{line}  <- {tag}") } else { line };
        self.samples.entry(key).or_insert(sample);
    }

    fn report(&self, what: &str, elapsed: f64) {
        eprintln!("\n== {what}: {} iterations in {elapsed:.1}s", self.iterations);
        eprintln!("   loaded OK: {} (forward: {} ok, errors {:?})", self.loaded, self.forward_ok, self.forward_err);
        eprintln!("   load errors: {} {:?}", self.errors.values().sum::<usize>(), self.errors);
        eprintln!(
            "   peak allocation growth during a load: {:.1} MiB (worst ratio to input size {:.2})",
            self.max_growth as f64 / (1 << 20) as f64,
            self.max_growth_ratio
        );
        for (k, v) in self.samples.iter().take(40) {
            eprintln!("   sample [{k}]: {v}");
        }
    }

    /// Prints the report, then fails the test if any case failed.
    pub fn finish(&self, what: &str, started: Instant) {
        self.report(what, started.elapsed().as_secs_f64());
        if !self.failures.is_empty() {
            for f in self.failures.iter().take(30) {
                eprintln!("FAILURE {f}");
            }
            panic!("{what}: {} failing cases (first: {})", self.failures.len(), self.failures[0]);
        }
    }
}
