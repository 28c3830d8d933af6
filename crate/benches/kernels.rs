//! The Rust hot spots on their own: `cargo bench --no-default-features --bench kernels`.
//! Shapes are SmolLM2-135M's (hidden 576, 9 query / 3 KV heads of 64, MLP 1536) unless named.

use std::hint::black_box;
use std::sync::Arc;

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use kvengine::attention::{attend, AttentionShape, TokenSlot};
use kvengine::config::{Architecture, ModelConfig, RopeStyle};
use kvengine::matmul::{Activations, QuantMatrix};
use kvengine::rope::Rope;
use kvengine::{KvCache, KvType};

#[global_allocator]
static ALLOCATOR: kvengine::Allocator = kvengine::Allocator;

fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 7919 + seed * 104_729) % 2001) as f32 / 1000.0 - 1.0).collect()
}

fn config(n_layers: usize) -> ModelConfig {
    ModelConfig {
        architecture: Architecture::Llama,
        vocab_size: 49_152,
        hidden_size: 576,
        intermediate_size: 1536,
        n_layers,
        n_heads: 9,
        n_kv_heads: 3,
        head_dim: 64,
        rms_norm_eps: 1e-5,
        rope_theta: 100_000.0,
        rope_style: RopeStyle::HalfSplit,
        rope_freq_factors: Vec::new(),
        context_length: 8192,
        tie_word_embeddings: true,
        variant: Default::default(),
    }
}

/// Ours against candle's quantized matmul on the same weights: decode (1 row) and prefill rows.
fn matmul(c: &mut Criterion) {
    let (n, k) = (1536, 576);
    for dtype in [GgmlDType::Q8_0, GgmlDType::Q4_0] {
        let w = Tensor::from_vec(values(n * k, 1), (n, k), &Device::Cpu).expect("weights");
        let q = Arc::new(QTensor::quantize(&w, dtype).expect("quantize"));
        let ours = QuantMatrix::new(q.clone(), Activations::F32).expect("format with a kernel");
        let ours_q8 = QuantMatrix::new(q.clone(), Activations::Q8).expect("format with a kernel");
        let candle = QMatMul::from_arc(q).expect("qmatmul");
        let mut group = c.benchmark_group(format!("matmul_{dtype:?}_{n}x{k}"));
        for m in [1usize, 128] {
            let x = values(m * k, 2);
            let xt = Tensor::from_vec(x.clone(), (m, k), &Device::Cpu).expect("x");
            group.throughput(Throughput::Elements((m * n * k) as u64));
            group.bench_with_input(BenchmarkId::new("kvengine", m), &m, |b, &m| b.iter(|| ours.forward(black_box(&x), m).expect("ours")));
            group.bench_with_input(BenchmarkId::new("kvengine_q8", m), &m, |b, &m| {
                b.iter(|| ours_q8.forward(black_box(&x), m).expect("ours q8"))
            });
            group.bench_with_input(BenchmarkId::new("candle", m), &m, |b, _| b.iter(|| candle.forward(black_box(&xt)).expect("candle")));
        }
        group.finish();
    }
}

/// One layer's attention over a filled cache: decode at several context lengths, and a
/// 512-token prefill.
fn attention(c: &mut Criterion) {
    let cfg = config(1);
    let shape = AttentionShape { n_heads: cfg.n_heads, n_kv_heads: cfg.n_kv_heads, head_dim: cfg.head_dim, window: None };
    let width = cfg.n_kv_heads * cfg.head_dim;
    let mut group = c.benchmark_group("attention");
    for context in [512usize, 2048] {
        let mut cache = KvCache::new(&cfg, 1, context, KvType::F16).expect("cache");
        cache.write(0, 0, 0, &values(context * width, 3), &values(context * width, 4));
        let q = values(cfg.q_dim(), 5);
        let slots = [TokenSlot { row: 0, pos: context - 1 }];
        group.bench_function(BenchmarkId::new("decode", context), |b| b.iter(|| attend(&cache, 0, &slots, black_box(&q), &shape, None)));
    }
    // Eight samples of one 512-token prompt, 64 tokens into their own continuations: the
    // prompt's keys are shared, read once for all eight rows.
    let (prompt, own, rows) = (512, 64, 8);
    let mut cache = KvCache::new(&cfg, rows, prompt + own, KvType::F16).expect("cache");
    cache.write(0, 0, 0, &values(prompt * width, 3), &values(prompt * width, 4));
    cache.set_seqlen(0, prompt);
    for row in 0..rows {
        cache.copy_row(0, row).expect("copy");
        cache.write(0, row, prompt, &values(own * width, 10 + row), &values(own * width, 20 + row));
    }
    let q = values(rows * cfg.q_dim(), 5);
    let slots: Vec<TokenSlot> = (0..rows).map(|row| TokenSlot { row, pos: prompt + own - 1 }).collect();
    group.bench_function(BenchmarkId::new("decode_8_samples", prompt + own), |b| {
        b.iter(|| attend(&cache, 0, &slots, black_box(&q), &shape, None))
    });
    let mut cache = KvCache::new(&cfg, 1, prompt, KvType::F16).expect("cache");
    cache.write(0, 0, 0, &values(prompt * width, 3), &values(prompt * width, 4));
    let q = values(prompt * cfg.q_dim(), 5);
    let slots: Vec<TokenSlot> = (0..prompt).map(|pos| TokenSlot { row: 0, pos }).collect();
    group.bench_function(BenchmarkId::new("prefill", prompt), |b| b.iter(|| attend(&cache, 0, &slots, black_box(&q), &shape, None)));
    group.finish();
}

fn rope_and_norm(c: &mut Criterion) {
    let cfg = config(1);
    let rope = Rope::new(&cfg);
    let positions: Vec<usize> = (0..128).collect();
    let angles = rope.angles(&positions);
    let mut q = values(128 * cfg.q_dim(), 6);
    c.bench_function("rope_128_tokens", |b| b.iter(|| rope.apply(black_box(&mut q), cfg.n_heads, &angles)));
    let x = Tensor::from_vec(values(128 * cfg.hidden_size, 7), (128, cfg.hidden_size), &Device::Cpu).expect("x");
    let scale = Tensor::ones(cfg.hidden_size, candle_core::DType::F32, &Device::Cpu).expect("scale");
    c.bench_function("rms_norm_128_tokens", |b| b.iter(|| candle_nn::ops::rms_norm(black_box(&x), &scale, 1e-5).expect("norm")));
}

/// Appending one decode step's K/V to every layer, and fanning a 512-token row out to a sample.
fn cache_ops(c: &mut Criterion) {
    let cfg = config(30);
    let width = cfg.n_kv_heads * cfg.head_dim;
    let mut cache = KvCache::new(&cfg, 8, 1024, KvType::F16).expect("cache");
    let (k, v) = (values(width, 8), values(width, 9));
    c.bench_function("cache_append_30_layers", |b| {
        b.iter(|| (0..cfg.n_layers).for_each(|layer| cache.write(layer, 0, 600, black_box(&k), black_box(&v))))
    });
    for layer in 0..cfg.n_layers {
        cache.write(layer, 0, 0, &values(512 * width, layer), &values(512 * width, layer + 1));
    }
    cache.set_seqlen(0, 512);
    c.bench_function("cache_copy_row_512_positions", |b| b.iter(|| cache.copy_row(0, 5).expect("copy")));
}

criterion_group!(benches, matmul, attention, rope_and_norm, cache_ops);
criterion_main!(benches);
