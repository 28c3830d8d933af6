//! Throughput of our quantized matmul alone, for tuning the tile kernels:
//! `cargo run --release --no-default-features --example matmul_speed -- [n] [k] [m] [q8] [Q8_0|Q4_0|Q4K|Q5K|Q6K] [nogemm]`
//! (`q8`: activations rounded to 8 bits, as llama.cpp multiplies them; a format name: that one
//! only (K-quants run with `q8` only); `nogemm`: without candle's f32 gemm for comparison). GB/s
//! counts the file's bytes of the matrix, read once per call.
use std::sync::Arc;
use std::time::Instant;

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use kvengine::matmul::{Activations, QuantMatrix};

#[global_allocator]
static ALLOCATOR: kvengine::Allocator = kvengine::Allocator;

fn main() -> kvengine::Result<()> {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|s| s.parse().ok()).collect();
    let (n, k, m) = (args.first().copied().unwrap_or(1536), args.get(1).copied().unwrap_or(576), args.get(2).copied().unwrap_or(1));
    let activations = if std::env::args().any(|a| a == "q8") { Activations::Q8 } else { Activations::F32 };
    let w: Vec<f32> = (0..n * k).map(|i| ((i * 7919) % 2001) as f32 / 1000.0 - 1.0).collect();
    let x: Vec<f32> = (0..m * k).map(|i| ((i * 104_729) % 2001) as f32 / 1000.0 - 1.0).collect();
    let named: Vec<GgmlDType> = [GgmlDType::Q8_0, GgmlDType::Q4_0, GgmlDType::Q4K, GgmlDType::Q5K, GgmlDType::Q6K]
        .into_iter()
        .filter(|d| std::env::args().any(|a| a == format!("{d:?}")))
        .collect();
    let dtypes = if named.is_empty() { vec![GgmlDType::Q8_0, GgmlDType::Q4_0] } else { named };
    for dtype in dtypes {
        let q = Arc::new(QTensor::quantize(&Tensor::from_vec(w.clone(), (n, k), &Device::Cpu)?, dtype)?);
        let bytes = q.storage_size_in_bytes();
        let Some(ours) = QuantMatrix::new(q, activations) else { continue };
        ours.forward(&x, m)?;
        let reps = (2e10 / (n * k * m) as f64).clamp(3.0, 20_000.0) as usize;
        // The fastest call, not the mean: on a shared VM the mean moves by tens of percent
        // between runs, and a tile's own speed is what its quickest calls show.
        let mut s = f64::INFINITY;
        for _ in 0..reps {
            let t = Instant::now();
            std::hint::black_box(ours.forward(std::hint::black_box(&x), m)?);
            s = s.min(t.elapsed().as_secs_f64());
        }
        let (gmacs, gbs) = ((n * k * m) as f64 / s / 1e9, bytes as f64 / s / 1e9);
        println!("{dtype:?} {activations:?} {n}x{k} m={m}: {:.1} us, {gmacs:.2} GMAC/s, {gbs:.1} GB/s of the file's weights", s * 1e6);
    }
    if std::env::args().any(|a| a == "nogemm") {
        return Ok(());
    }
    let wt = Tensor::from_vec(w.clone(), (n, k), &Device::Cpu)?;
    let xt = Tensor::from_vec(x.clone(), (m, k), &Device::Cpu)?;
    let reps = (2e10 / (n * k * m) as f64).clamp(3.0, 20_000.0) as usize;
    let t = Instant::now();
    for _ in 0..reps {
        std::hint::black_box(xt.matmul(&wt.t()?)?);
    }
    let s = t.elapsed().as_secs_f64() / reps as f64;
    println!("F32 gemm {n}x{k} m={m}: {:.1} us, {:.2} GMAC/s", s * 1e6, (n * k * m) as f64 / s / 1e9);
    Ok(())
}
