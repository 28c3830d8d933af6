//! Deterministic fuzzing of the loaders: the tiny model's GGUF file and Hugging Face directory,
//! mutated (byte flips concentrated in the headers, length/count/dim fields set to extreme
//! values, truncations, duplicated and deleted regions, JSON-aware edits of config.json, the
//! shard index and the safetensors header), then loaded with `kvengine::load`.
//!
//! Every load must return `Ok` or `Err`: a panic fails the test with the seed and iteration. A
//! counting global allocator checks that no load allocates far beyond the size of its input.
//! When a mutant loads, one forward pass on a short prompt must also return `Ok` or `Err`.
//!
//! Reproduce one case: `KVENGINE_FUZZ_ONLY=<iteration> cargo test --release
//! --no-default-features --test fuzz_headers -- --nocapture` (with `KVENGINE_FUZZ_SEED` if the
//! failure used another seed). `KVENGINE_FUZZ_ITERS` scales the run.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use candle_core::quantized::gguf_file::Value;
use candle_core::quantized::GgmlDType;
use common::*;
use kvengine::{ErrorKind, LogitsFor};

// ------------------------------------------------------------------------------ allocator

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// The iteration in progress, for the message printed before an allocation that will abort.
static ITERATION: AtomicUsize = AtomicUsize::new(usize::MAX);
const HUGE_REQUEST: usize = 16 << 30;

fn grew(n: usize) {
    let now = CURRENT.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

/// Writes "<prefix><n>\n" to stderr without allocating.
fn note_huge(size: usize) {
    let mut buf = [0u8; 96];
    let prefix = b"fuzz_headers: allocation request of ";
    buf[..prefix.len()].copy_from_slice(prefix);
    let mut len = prefix.len();
    for n in [size, ITERATION.load(Ordering::Relaxed)] {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        let mut n = n;
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let d = &digits[i..];
        buf[len..len + d.len()].copy_from_slice(d);
        len += d.len();
        let sep: &[u8] = if len < 70 { b" bytes, iteration " } else { b"\n" };
        let sep = &sep[..sep.len().min(buf.len() - len)];
        buf[len..len + sep.len()].copy_from_slice(sep);
        len += sep.len();
    }
    let _ = std::io::stderr().write_all(&buf[..len]);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() >= HUGE_REQUEST {
            note_huge(layout.size());
        }
        let p = System.alloc(layout);
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() >= HUGE_REQUEST {
            note_huge(layout.size());
        }
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size >= HUGE_REQUEST {
            note_huge(new_size);
        }
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                CURRENT.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The two fuzz tests share the allocation counters, so they take turns.
static SERIAL: Mutex<()> = Mutex::new(());

// ------------------------------------------------------------------------------ harness

fn env_u64(key: &str) -> Option<u64> {
    let v = std::env::var(key).ok()?;
    let v = v.trim();
    match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

thread_local! {
    /// Set while kvengine code runs under `guarded`; other panics print as usual.
    static GUARDED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `catch_unwind` with the panic recorded quietly in `LAST_PANIC`.
fn guarded<T>(f: impl FnOnce() -> T) -> std::thread::Result<T> {
    GUARDED.with(|g| g.set(true));
    let r = catch_unwind(AssertUnwindSafe(f));
    GUARDED.with(|g| g.set(false));
    r
}

/// Where the last panic happened and what it said (the hook runs before unwinding).
static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

fn install_quiet_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let msg = info
                .payload()
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| info.payload().downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "<non-string panic>".into());
            let loc = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
            // Panics of the fuzz loop itself (assertions, harness bugs) still print normally.
            if !GUARDED.with(|g| g.get()) {
                default(info);
            } else {
                *LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("{msg} at {loc}"));
            }
        }));
    });
}

#[derive(Default)]
struct Stats {
    iterations: usize,
    loaded: usize,
    errors: BTreeMap<&'static str, usize>,
    /// First error message seen per (kind, first words), to eyeball that messages make sense.
    samples: BTreeMap<String, String>,
    forward_ok: usize,
    forward_err: BTreeMap<&'static str, usize>,
    max_growth_ratio: f64,
    max_growth: usize,
    failures: Vec<String>,
}

/// The first line of a message (candle appends a backtrace when RUST_BACKTRACE is set), escaped.
fn first_line(message: &str) -> String {
    message.lines().next().unwrap_or("").chars().take(200).flat_map(char::escape_debug).collect()
}

fn kind_name(k: ErrorKind) -> &'static str {
    k.code()
}

impl Stats {
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
}

/// Loads `path` (input of `input_bytes`), checks the rules, and records the outcome.
fn run_case(stats: &mut Stats, tag: &str, path: &Path, input_bytes: usize) {
    stats.iterations += 1;
    *LAST_PANIC.lock().unwrap() = None;
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let result = guarded(|| kvengine::load(path, &mut |_| {}));
    let growth = PEAK.load(Ordering::Relaxed).saturating_sub(base);
    let limit = 32 * input_bytes + (64 << 20);
    stats.max_growth = stats.max_growth.max(growth);
    stats.max_growth_ratio = stats.max_growth_ratio.max(growth as f64 / input_bytes.max(1) as f64);
    if growth > limit {
        stats.failures.push(format!("{tag}: load allocated {growth} bytes for a {input_bytes}-byte input (limit {limit})"));
    }
    let loaded = match result {
        Err(_) => {
            let what = LAST_PANIC.lock().unwrap().take().unwrap_or_default();
            stats.failures.push(format!("{tag}: load PANICKED: {what}"));
            return;
        }
        Ok(Err(e)) => {
            *stats.errors.entry(kind_name(e.kind)).or_default() += 1;
            if e.message.trim().is_empty() {
                stats.failures.push(format!("{tag}: {:?} error with an empty message", e.kind));
            }
            // One sample message per kind and opening words. INTERNAL is not a failure by
            // itself, but malformed input should be reported as such, so those carry the case.
            let line = first_line(&e.message);
            let words: String = line.split_whitespace().filter(|w| !w.contains('/')).take(3).collect::<Vec<_>>().join(" ");
            let key = format!("{} / {}", kind_name(e.kind), words.chars().filter(|c| !c.is_ascii_digit()).collect::<String>());
            let sample = if e.kind == ErrorKind::Internal { format!("{line}  <- {tag}") } else { line };
            stats.samples.entry(key).or_insert(sample);
            return;
        }
        Ok(Ok(m)) => m,
    };
    stats.loaded += 1;
    // A loaded model cannot hold more weights than its file had bytes (even at 2 bits each).
    let c = &loaded.model.config;
    let implied = c.vocab_size.checked_mul(c.hidden_size).and_then(|n| n.checked_add(c.n_layers.checked_mul(c.hidden_size)?));
    if implied.map_or(true, |n| n / 4 > input_bytes) {
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
        Err(_) => {
            let what = LAST_PANIC.lock().unwrap().take().unwrap_or_default();
            stats.failures.push(format!("{tag}: forward on a loaded mutant PANICKED: {what}"));
        }
        Ok(Ok(n)) => {
            if n != c.vocab_size {
                stats.failures.push(format!("{tag}: forward returned {n} logits for a vocabulary of {}", c.vocab_size));
            }
            stats.forward_ok += 1;
        }
        Ok(Err(e)) => *stats.forward_err.entry(kind_name(e.kind)).or_default() += 1,
    }
}

fn finish(stats: &Stats, what: &str, started: Instant) {
    stats.report(what, started.elapsed().as_secs_f64());
    if !stats.failures.is_empty() {
        for f in stats.failures.iter().take(30) {
            eprintln!("FAILURE {f}");
        }
        panic!("{what}: {} failing cases (first: {})", stats.failures.len(), stats.failures[0]);
    }
}

// ------------------------------------------------------------------------------ GGUF layout

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldKind {
    Count,
    StrLen,
    ValueType,
    ArrayLen,
    Scalar,
    NDims,
    Dim,
    DType,
    TensorOffset,
}

const FIELD_KINDS: &[FieldKind] = &[
    FieldKind::Count,
    FieldKind::StrLen,
    FieldKind::ValueType,
    FieldKind::ArrayLen,
    FieldKind::Scalar,
    FieldKind::NDims,
    FieldKind::Dim,
    FieldKind::DType,
    FieldKind::TensorOffset,
];

#[derive(Debug, Clone, Copy)]
struct Field {
    at: usize,
    width: usize,
    kind: FieldKind,
}

/// Every numeric field of a (valid, version 2/3) GGUF file, and where the tensor data starts.
struct GgufLayout {
    fields: Vec<Field>,
    data_start: usize,
}

fn walk_gguf(b: &[u8]) -> GgufLayout {
    let mut fields = Vec::new();
    let u32_at = |p: usize| u32::from_le_bytes(b[p..p + 4].try_into().unwrap());
    let u64_at = |p: usize| u64::from_le_bytes(b[p..p + 8].try_into().unwrap());
    let mut p = 8;
    fields.push(Field { at: 4, width: 4, kind: FieldKind::Scalar }); // version
    let n_tensors = u64_at(p) as usize;
    fields.push(Field { at: p, width: 8, kind: FieldKind::Count });
    let n_kv = u64_at(p + 8) as usize;
    fields.push(Field { at: p + 8, width: 8, kind: FieldKind::Count });
    p += 16;
    fn string(b: &[u8], p: &mut usize, fields: &mut Vec<Field>) {
        let len = u64::from_le_bytes(b[*p..*p + 8].try_into().unwrap()) as usize;
        fields.push(Field { at: *p, width: 8, kind: FieldKind::StrLen });
        *p += 8 + len;
    }
    fn value(b: &[u8], p: &mut usize, ty: u32, fields: &mut Vec<Field>) {
        let scalar = |w: usize, p: &mut usize, fields: &mut Vec<Field>| {
            fields.push(Field { at: *p, width: w, kind: FieldKind::Scalar });
            *p += w;
        };
        match ty {
            0 | 1 | 7 => scalar(1, p, fields),
            2 | 3 => scalar(2, p, fields),
            4 | 5 | 6 => scalar(4, p, fields),
            10 | 11 | 12 => scalar(8, p, fields),
            8 => string(b, p, fields),
            9 => {
                let elem = u32::from_le_bytes(b[*p..*p + 4].try_into().unwrap());
                fields.push(Field { at: *p, width: 4, kind: FieldKind::ValueType });
                let n = u64::from_le_bytes(b[*p + 4..*p + 12].try_into().unwrap()) as usize;
                fields.push(Field { at: *p + 4, width: 8, kind: FieldKind::ArrayLen });
                *p += 12;
                for _ in 0..n {
                    value(b, p, elem, fields);
                }
            }
            other => panic!("unexpected GGUF value type {other}"),
        }
    }
    for _ in 0..n_kv {
        string(b, &mut p, &mut fields);
        let ty = u32_at(p);
        fields.push(Field { at: p, width: 4, kind: FieldKind::ValueType });
        p += 4;
        value(b, &mut p, ty, &mut fields);
    }
    for _ in 0..n_tensors {
        string(b, &mut p, &mut fields);
        let nd = u32_at(p) as usize;
        fields.push(Field { at: p, width: 4, kind: FieldKind::NDims });
        p += 4;
        for _ in 0..nd {
            fields.push(Field { at: p, width: 8, kind: FieldKind::Dim });
            p += 8;
        }
        fields.push(Field { at: p, width: 4, kind: FieldKind::DType });
        fields.push(Field { at: p + 4, width: 8, kind: FieldKind::TensorOffset });
        p += 12;
    }
    GgufLayout { fields, data_start: p.div_ceil(32) * 32 }
}

fn read_uint(b: &[u8], f: &Field) -> u64 {
    let mut v = [0u8; 8];
    v[..f.width].copy_from_slice(&b[f.at..f.at + f.width]);
    u64::from_le_bytes(v)
}

fn write_uint(b: &mut [u8], f: &Field, v: u64) {
    if f.at + f.width <= b.len() {
        b[f.at..f.at + f.width].copy_from_slice(&v.to_le_bytes()[..f.width]);
    }
}

fn extreme_value(rng: &mut Rng, orig: u64, file_len: usize) -> u64 {
    let specials = [
        0u64,
        1,
        2,
        3,
        4,
        13,
        31,
        32,
        33,
        255,
        0xFFFF,
        0x7FFF_FFFF,
        0xFFFF_FFFF,
        1 << 32,
        1 << 40,
        1 << 58,
        1 << 62,
        1 << 63,
        u64::MAX,
        u64::MAX - 1,
        file_len as u64,
        file_len as u64 - 1,
        file_len as u64 + 1,
    ];
    match rng.below(6) {
        0 | 1 => specials[rng.below(specials.len())],
        2 => orig.wrapping_add(1 + rng.below(4) as u64),
        3 => orig.wrapping_sub(1 + rng.below(4) as u64),
        // Values whose product with the other dims wraps around to the real size.
        4 => orig.wrapping_add(1u64 << (56 + rng.below(8))),
        _ => rng.next_u64() >> rng.below(64),
    }
}

/// Position biased toward the first `hot` bytes (header, metadata, tensor infos).
fn biased_pos(rng: &mut Rng, len: usize, hot: usize) -> usize {
    if len == 0 {
        return 0;
    }
    if rng.chance(0.8) {
        rng.below(hot.clamp(1, len))
    } else {
        rng.below(len)
    }
}

fn mutate_bytes(rng: &mut Rng, b: &mut Vec<u8>, hot: usize) -> &'static str {
    match rng.below(7) {
        0 | 1 => {
            for _ in 0..1 + rng.below(8) {
                if b.is_empty() {
                    break;
                }
                let at = biased_pos(rng, b.len(), hot);
                b[at] ^= 1 + rng.below(255) as u8;
            }
            "flip"
        }
        2 => {
            let at = if rng.chance(0.7) { rng.below(hot.clamp(1, b.len().max(1))) } else { rng.below(b.len().max(1)) };
            b.truncate(at);
            "truncate"
        }
        3 => {
            // Duplicate a region: insert a copy of it somewhere else.
            if b.is_empty() {
                return "noop";
            }
            let from = biased_pos(rng, b.len(), hot);
            let len = (1 + rng.below(256)).min(b.len() - from);
            let chunk = b[from..from + len].to_vec();
            let to = biased_pos(rng, b.len(), hot);
            b.splice(to..to, chunk);
            "duplicate"
        }
        4 => {
            if b.is_empty() {
                return "noop";
            }
            let from = biased_pos(rng, b.len(), hot);
            let len = (1 + rng.below(64)).min(b.len() - from);
            b.drain(from..from + len);
            "delete"
        }
        5 => {
            // Overwrite a region with a copy of another.
            if b.len() < 2 {
                return "noop";
            }
            let from = biased_pos(rng, b.len(), hot);
            let to = biased_pos(rng, b.len(), hot);
            let len = (1 + rng.below(128)).min(b.len() - from).min(b.len() - to);
            let chunk = b[from..from + len].to_vec();
            b[to..to + len].copy_from_slice(&chunk);
            "overwrite"
        }
        _ => {
            if b.is_empty() {
                return "noop";
            }
            let at = biased_pos(rng, b.len(), hot);
            let len = (1 + rng.below(16)).min(b.len() - at);
            let fill = if rng.chance(0.5) { 0x00 } else { 0xFF };
            b[at..at + len].iter_mut().for_each(|x| *x = fill);
            "splat"
        }
    }
}

fn mutate_gguf(rng: &mut Rng, base: &[u8], layout: &GgufLayout) -> (Vec<u8>, String) {
    let mut b = base.to_vec();
    let mut what = Vec::new();
    let hot = layout.data_start + 64;
    for _ in 0..1 + rng.below(3) {
        if rng.chance(0.45) {
            let kind = FIELD_KINDS[rng.below(FIELD_KINDS.len())];
            let candidates: Vec<&Field> = layout.fields.iter().filter(|f| f.kind == kind).collect();
            let f = *candidates[rng.below(candidates.len())];
            if f.at + f.width > b.len() {
                continue;
            }
            let orig = read_uint(&b, &f);
            let v = extreme_value(rng, orig, base.len());
            write_uint(&mut b, &f, v);
            what.push(format!("{kind:?}@{}={v:#x}", f.at));
        } else {
            what.push(mutate_bytes(rng, &mut b, hot).to_string());
        }
    }
    (b, what.join(","))
}

// ------------------------------------------------------------------------------ GGUF fuzz

#[test]
fn fuzz_gguf_headers() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    install_quiet_panic_hook();
    let seed = env_u64("KVENGINE_FUZZ_SEED").unwrap_or(0x6775_6666);
    let iterations = env_u64("KVENGINE_FUZZ_ITERS").unwrap_or(12_000) as usize;
    let only = env_u64("KVENGINE_FUZZ_ONLY").map(|x| x as usize);

    let tiny = TinyModel::new(42);
    let tied = TinyModel::with_spec(43, TinySpec { tied: true, ..TinySpec::default() });
    // Bases: F32 and Q8_0, each with an explicit general.alignment so that field is fuzzed too.
    let make = |m: &TinyModel, dtype: GgmlDType| {
        let mut meta = m.gguf_metadata();
        meta.insert(1, ("general.alignment".to_string(), Value::U32(32)));
        let dir = tempdir();
        let p = dir.path().join("base.gguf");
        write_gguf_parts(&p, &meta, &m.gguf_tensors(dtype));
        std::fs::read(&p).unwrap()
    };
    let bases: Vec<(String, Vec<u8>)> = vec![
        ("f32".into(), make(&tiny, GgmlDType::F32)),
        ("q8_0".into(), make(&tiny, GgmlDType::Q8_0)),
        ("f32-tied".into(), make(&tied, GgmlDType::F32)),
    ];
    let layouts: Vec<GgufLayout> = bases.iter().map(|(_, b)| walk_gguf(b)).collect();
    for ((name, b), l) in bases.iter().zip(&layouts) {
        eprintln!("base {name}: {} bytes, header+metadata+tensor infos {} bytes, {} numeric fields", b.len(), l.data_start, l.fields.len());
    }
    let dir = tempdir();
    let path = dir.path().join("mutant.gguf");

    // The pristine files load (sanity for the harness).
    let mut stats = Stats::default();
    for (name, b) in &bases {
        std::fs::write(&path, b).unwrap();
        ITERATION.store(0, Ordering::Relaxed);
        run_case(&mut stats, &format!("pristine {name}"), &path, b.len());
    }
    assert_eq!(stats.loaded, bases.len(), "pristine bases must load: {:?}", stats.failures);
    assert_eq!(stats.forward_ok, bases.len());

    let mut stats = Stats::default();
    let started = Instant::now();
    for it in 0..iterations {
        if only.is_some_and(|o| o != it) {
            continue;
        }
        let mut rng = Rng::new(seed ^ (it as u64).wrapping_mul(0xA24B_AED4_963E_E407));
        let which = it % bases.len();
        let (base_name, base) = &bases[which];
        let (bytes, what) = mutate_gguf(&mut rng, base, &layouts[which]);
        let tag = format!("seed {seed:#x} iteration {it} (base {base_name}; {what})");
        if only.is_some() {
            eprintln!("running {tag}");
        }
        ITERATION.store(it, Ordering::Relaxed);
        std::fs::write(&path, &bytes).unwrap();
        run_case(&mut stats, &tag, &path, bytes.len());
    }
    ITERATION.store(usize::MAX, Ordering::Relaxed);
    finish(&stats, "GGUF fuzz", started);
    assert!(only.is_some() || stats.loaded > 0, "no mutant loaded: the mutations are too destructive to exercise the later stages");
    assert!(only.is_some() || stats.errors.values().sum::<usize>() > iterations / 2);
}

// ------------------------------------------------------------------------------ HF fuzz

const SPECIAL_NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "3",
    "15",
    "16",
    "17",
    "31",
    "32",
    "63",
    "64",
    "65",
    "127",
    "128",
    "282",
    "511",
    "512",
    "513",
    "4096",
    "1048576",
    "2147483647",
    "2147483648",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "1e309",
    "-0",
    "0.5",
    "1e-45",
    "3.4e38",
    "null",
    "true",
    "\"64\"",
    "[]",
    "{}",
];

fn special_json(rng: &mut Rng) -> serde_json::Value {
    let s = SPECIAL_NUMBERS[rng.below(SPECIAL_NUMBERS.len())];
    serde_json::from_str(s).unwrap_or_else(|_| serde_json::Value::String(s.to_string()))
}

/// Structural edits of a JSON object: set a (possibly nested) value to something extreme,
/// remove or add keys.
fn mutate_json_value(rng: &mut Rng, v: &mut serde_json::Value, extra_keys: &[&str]) -> String {
    let Some(obj) = v.as_object_mut() else { return "not-an-object".into() };
    let keys: Vec<String> = obj.keys().cloned().collect();
    match rng.below(10) {
        0 if !keys.is_empty() => {
            let k = &keys[rng.below(keys.len())];
            obj.remove(k);
            format!("remove {k}")
        }
        1 => {
            let k = extra_keys[rng.below(extra_keys.len())];
            obj.insert(k.to_string(), special_json(rng));
            format!("add {k}")
        }
        2 => {
            obj.insert(
                "rope_scaling".into(),
                serde_json::json!({
                    "rope_type": if rng.chance(0.8) { "llama3" } else { "linear" },
                    "factor": special_json(rng),
                    "low_freq_factor": if rng.chance(0.5) { special_json(rng) } else { 1.0.into() },
                    "high_freq_factor": if rng.chance(0.5) { special_json(rng) } else { 4.0.into() },
                    "original_max_position_embeddings": special_json(rng),
                }),
            );
            "rope_scaling".into()
        }
        _ if !keys.is_empty() => {
            let k = keys[rng.below(keys.len())].clone();
            let slot = obj.get_mut(&k).unwrap();
            match slot {
                serde_json::Value::Object(inner) if !inner.is_empty() => {
                    let ik: Vec<String> = inner.keys().cloned().collect();
                    let ik = &ik[rng.below(ik.len())];
                    inner.insert(ik.clone(), special_json(rng));
                    format!("{k}.{ik}")
                }
                _ => {
                    *slot = special_json(rng);
                    format!("set {k}")
                }
            }
        }
        _ => "noop".into(),
    }
}

/// Safetensors header edits: the length prefix, digits in the JSON (shapes, offsets), dtype
/// names, raw flips; the data is kept and the prefix fixed up unless that is the mutation.
fn mutate_safetensors(rng: &mut Rng, file: &[u8]) -> (Vec<u8>, String) {
    let n = u64::from_le_bytes(file[..8].try_into().unwrap()) as usize;
    let header = &file[8..8 + n];
    let data = &file[8 + n..];
    match rng.below(6) {
        0 => {
            let mut out = file.to_vec();
            let v = extreme_value(rng, n as u64, file.len());
            out[..8].copy_from_slice(&v.to_le_bytes());
            (out, format!("header length {v:#x}"))
        }
        1 | 2 => {
            // Replace one run of digits in the header with an extreme number.
            let text = String::from_utf8_lossy(header).into_owned();
            let runs: Vec<(usize, usize)> = {
                let bytes = text.as_bytes();
                let mut v = Vec::new();
                let mut i = 0;
                while i < bytes.len() {
                    if bytes[i].is_ascii_digit() {
                        let s = i;
                        while i < bytes.len() && bytes[i].is_ascii_digit() {
                            i += 1;
                        }
                        v.push((s, i));
                    } else {
                        i += 1;
                    }
                }
                v
            };
            if runs.is_empty() {
                let mut out = file.to_vec();
                let what = mutate_bytes(rng, &mut out, 8 + n);
                return (out, format!("bytes {what}"));
            }
            let (s, e) = runs[rng.below(runs.len())];
            let orig: u64 = text[s..e].parse().unwrap_or(0);
            let replacement = match rng.below(3) {
                0 => SPECIAL_NUMBERS[rng.below(SPECIAL_NUMBERS.len())].to_string(),
                1 => extreme_value(rng, orig, file.len()).to_string(),
                _ => (orig as i64 + rng.below(9) as i64 - 4).to_string(),
            };
            let new_text = format!("{}{}{}", &text[..s], replacement, &text[e..]);
            let mut out = (new_text.len() as u64).to_le_bytes().to_vec();
            out.extend_from_slice(new_text.as_bytes());
            out.extend_from_slice(data);
            (out, format!("header digits {}->{replacement}", &text[s..e]))
        }
        3 => {
            let text = String::from_utf8_lossy(header).into_owned();
            let dtypes = ["F16", "BF16", "F64", "I64", "I8", "U8", "BOOL", "F8_E4M3", "F4", "XX", ""];
            let to = dtypes[rng.below(dtypes.len())];
            let count = text.matches("\"F32\"").count();
            let nth = rng.below(count.max(1));
            let mut idx = 0;
            let new_text: String = text
                .split("\"F32\"")
                .enumerate()
                .map(|(i, part)| {
                    if i == 0 {
                        part.to_string()
                    } else {
                        idx += 1;
                        format!("\"{}\"{part}", if idx - 1 == nth { to } else { "F32" })
                    }
                })
                .collect();
            let mut out = (new_text.len() as u64).to_le_bytes().to_vec();
            out.extend_from_slice(new_text.as_bytes());
            out.extend_from_slice(data);
            (out, format!("dtype F32->{to}"))
        }
        _ => {
            let mut out = file.to_vec();
            let what = mutate_bytes(rng, &mut out, 8 + n);
            (out, format!("bytes {what}"))
        }
    }
}

fn mutate_text(rng: &mut Rng, text: &[u8]) -> (Vec<u8>, String) {
    let mut b = text.to_vec();
    let what = mutate_bytes(rng, &mut b, text.len());
    (b, format!("bytes {what}"))
}

#[test]
fn fuzz_hf_dir_headers() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    install_quiet_panic_hook();
    let seed = env_u64("KVENGINE_FUZZ_SEED").unwrap_or(0x6866_6666);
    let iterations = env_u64("KVENGINE_FUZZ_ITERS").map(|n| n as usize * 2 / 3).unwrap_or(8_000);
    let only = env_u64("KVENGINE_FUZZ_ONLY").map(|x| x as usize);

    let tiny = TinyModel::new(44);
    let scratch = tempdir();
    let single = scratch.path().join("single");
    let sharded = scratch.path().join("sharded");
    tiny.write_hf_dir(&single);
    tiny.write_hf_sharded(&sharded, 2);
    let read_dir = |d: &Path| -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap())
            .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
            .collect();
        v.sort();
        v
    };
    let bases = [("single", read_dir(&single)), ("sharded", read_dir(&sharded))];
    let work = scratch.path().join("work");

    let write_dir = |files: &[(String, Vec<u8>)]| {
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir_all(&work).unwrap();
        for (name, bytes) in files {
            std::fs::write(work.join(name), bytes).unwrap();
        }
        files.iter().map(|(_, b)| b.len()).sum::<usize>()
    };

    let mut stats = Stats::default();
    for (name, files) in &bases {
        let size = write_dir(files);
        ITERATION.store(0, Ordering::Relaxed);
        run_case(&mut stats, &format!("pristine {name}"), &work, size);
    }
    assert_eq!(stats.loaded, 2, "pristine HF dirs must load: {:?}", stats.failures);

    let config_keys = [
        "vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "rms_norm_eps",
        "rope_theta",
        "max_position_embeddings",
        "tie_word_embeddings",
        "model_type",
        "architectures",
    ];
    let index_shards = [
        "",
        ".",
        "..",
        "../model-00001-of-00002.safetensors",
        "/dev/zero",
        "model-00001-of-00002.safetensors/",
        "model-00001-of-00002.safetensors\u{0}",
        "config.json",
        "tokenizer.json",
        "model.safetensors.index.json",
        "missing.safetensors",
        "model-00002-of-00002.safetensors",
        "C:\\x.safetensors",
        "~/x.safetensors",
        "ÿ.safetensors",
    ];

    let mut stats = Stats::default();
    let started = Instant::now();
    for it in 0..iterations {
        if only.is_some_and(|o| o != it) {
            continue;
        }
        let mut rng = Rng::new(seed ^ (it as u64).wrapping_mul(0xA24B_AED4_963E_E407));
        let (base_name, base) = &bases[it % 2];
        let mut files = base.clone();
        let mut what = Vec::new();
        for _ in 0..1 + rng.below(2) {
            let roll = rng.below(100);
            let target = if roll < 45 {
                let names: Vec<usize> = (0..files.len()).filter(|&i| files[i].0.ends_with(".safetensors")).collect();
                names[rng.below(names.len())]
            } else if roll < 65 && files.iter().any(|f| f.0 == "model.safetensors.index.json") {
                files.iter().position(|f| f.0 == "model.safetensors.index.json").unwrap()
            } else if roll < 94 {
                files.iter().position(|f| f.0 == "config.json").unwrap()
            } else if roll < 97 {
                files.iter().position(|f| f.0 == "tokenizer_config.json").unwrap()
            } else {
                files.iter().position(|f| f.0 == "tokenizer.json").unwrap()
            };
            let (name, bytes) = files[target].clone();
            let (new_bytes, how) = if name.ends_with(".safetensors") {
                if bytes.len() >= 8 && (u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize).checked_add(8).is_some_and(|end| end <= bytes.len()) {
                    mutate_safetensors(&mut rng, &bytes)
                } else {
                    mutate_text(&mut rng, &bytes)
                }
            } else if rng.chance(0.3) {
                mutate_text(&mut rng, &bytes)
            } else {
                match serde_json::from_slice::<serde_json::Value>(&bytes) {
                    Ok(mut v) => {
                        let how = if name == "model.safetensors.index.json" {
                            match rng.below(4) {
                                0 => {
                                    let shard = index_shards[rng.below(index_shards.len())];
                                    if let Some(map) = v.get_mut("weight_map").and_then(|m| m.as_object_mut()) {
                                        let keys: Vec<String> = map.keys().cloned().collect();
                                        if !keys.is_empty() {
                                            map.insert(keys[rng.below(keys.len())].clone(), shard.into());
                                        }
                                    }
                                    format!("shard {shard:?}")
                                }
                                1 => {
                                    if let Some(map) = v.get_mut("weight_map").and_then(|m| m.as_object_mut()) {
                                        let keys: Vec<String> = map.keys().cloned().collect();
                                        if !keys.is_empty() {
                                            map.insert(keys[rng.below(keys.len())].clone(), special_json(&mut rng));
                                        }
                                    }
                                    "shard value".into()
                                }
                                _ => mutate_json_value(&mut rng, &mut v, &["weight_map", "metadata"]),
                            }
                        } else if name == "config.json" {
                            mutate_json_value(&mut rng, &mut v, &config_keys)
                        } else if name == "tokenizer_config.json" {
                            mutate_json_value(&mut rng, &mut v, &["bos_token", "eos_token", "chat_template", "add_bos_token"])
                        } else {
                            mutate_json_value(&mut rng, &mut v, &["model", "pre_tokenizer", "decoder", "added_tokens", "normalizer"])
                        };
                        (serde_json::to_vec(&v).unwrap(), how)
                    }
                    Err(_) => mutate_text(&mut rng, &bytes),
                }
            };
            files[target].1 = new_bytes;
            what.push(format!("{name}: {how}"));
        }
        let tag = format!("seed {seed:#x} iteration {it} (base {base_name}; {})", what.join("; "));
        if only.is_some() {
            eprintln!("running {tag}");
        }
        ITERATION.store(it, Ordering::Relaxed);
        let size = write_dir(&files);
        run_case(&mut stats, &tag, &work, size);
    }
    ITERATION.store(usize::MAX, Ordering::Relaxed);
    finish(&stats, "HF directory fuzz", started);
    assert!(only.is_some() || stats.loaded > 0, "no mutant loaded");
}
