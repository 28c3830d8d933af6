//! GPU speed (scripts/gpu-check.sh runs it): decode attention bandwidth of our kernel at B=16,
//! T=4096, and end-to-end decode tokens/s of the CUDA model at two model shapes with random
//! weights. One JSON object per line on stdout.

use std::time::Instant;

use candle_core::{DType, Device, Tensor};
use kvengine::cuda::kvattn::{self, KvAttnParams, KvAttnPlan};
use kvengine::cuda::model::CudaModel;
use kvengine::model::LogitsFor;

#[path = "../tests/common/random_weights.rs"]
mod random_weights;
use random_weights::{llama_1b_shape, smollm_shape, RandomWeights};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// H200 HBM3e peak.
const PEAK_GBPS: f64 = 4800.0;

/// Seconds per call of `f`, the mean of `iters` after `warmup`, with the device drained.
fn time(dev: &Device, warmup: usize, iters: usize, f: &mut dyn FnMut() -> Res<()>) -> Res<f64> {
    for _ in 0..warmup {
        f()?;
    }
    dev.synchronize()?;
    let start = Instant::now();
    for _ in 0..iters {
        f()?;
    }
    dev.synchronize()?;
    Ok(start.elapsed().as_secs_f64() / iters as f64)
}

fn attention(dev: &Device, name: &str, (h, hkv, d): (usize, usize, usize), batch: usize, len: usize) -> Res<()> {
    let dtype = DType::BF16;
    let k = Tensor::randn(0f32, 1.0, (1, batch, len, hkv, d), dev)?.to_dtype(dtype)?;
    let v = Tensor::randn(0f32, 1.0, (1, batch, len, hkv, d), dev)?.to_dtype(dtype)?;
    let q = Tensor::randn(0f32, 1.0, (batch, h, d), dev)?.to_dtype(dtype)?;
    // Every row decodes its last position, so each reads all `len` cached keys.
    let seqlens = vec![(len - 1) as i32; batch];
    let plan = KvAttnPlan::new(&seqlens, &vec![1; batch], len, h / hkv, dev)?;
    let params = KvAttnParams { n_heads: h, n_kv_heads: hkv, head_dim: d, window: None, num_splits: None };
    let secs = time(dev, 10, 100, &mut || {
        kvattn::attend(&q, &k, &v, 0, &plan, params)?;
        Ok(())
    })?;
    let bytes = 2.0 * (batch * len * hkv * d) as f64 * dtype.size_in_bytes() as f64;
    let gbps = bytes / secs / 1e9;
    println!(
        "{{\"bench\":\"decode_attention\",\"shape\":\"{name}\",\"B\":{batch},\"T\":{len},\"H\":{h},\"H_kv\":{hkv},\"D\":{d},\"dtype\":\"bf16\",\"us\":{:.1},\"GBps\":{gbps:.0},\"peak_share\":{:.3}}}",
        secs * 1e6,
        gbps / PEAK_GBPS
    );
    Ok(())
}

fn decode(dev: &Device, name: &str, cfg: kvengine::config::ModelConfig, batches: &[usize]) -> Res<()> {
    let (prompt, steps) = (128, 64);
    let model = CudaModel::load(&mut RandomWeights { cfg: cfg.clone(), f16: false }, cfg.clone(), dev, DType::BF16, &mut |_| {})?;
    for &batch in batches {
        let mut cache = model.new_cache(batch, prompt + steps + 16)?;
        let prompts: Vec<Vec<u32>> =
            (0..batch).map(|r| (0..prompt as u32).map(|i| (i * 31 + r as u32 * 7) % cfg.vocab_size as u32).collect()).collect();
        model.forward(&prompts, &mut cache, LogitsFor::LastPerRow, None)?;
        let next: Vec<Vec<u32>> = (0..batch).map(|r| vec![(r as u32 * 13) % cfg.vocab_size as u32]).collect();
        // Each step copies its logits to the host, as sampling does.
        let secs = time(dev, 3, steps - 3, &mut || {
            model.forward(&next, &mut cache, LogitsFor::LastPerRow, None)?;
            Ok(())
        })?;
        println!(
            "{{\"bench\":\"decode_e2e\",\"model\":\"{name}\",\"B\":{batch},\"prompt\":{prompt},\"dtype\":\"bf16\",\"ms_per_step\":{:.2},\"tokens_per_s\":{:.0}}}",
            secs * 1e3,
            batch as f64 / secs
        );
    }
    Ok(())
}

fn main() -> Res<()> {
    let dev = kvengine::placement::cuda_device().map_err(|e| e.message)?;
    for (name, shape) in [("smollm2-135m", (9, 3, 64)), ("llama-1b", (32, 8, 64)), ("d128", (32, 8, 128))] {
        attention(&dev, name, shape, 16, 4096)?;
    }
    decode(&dev, "smollm2-135m", smollm_shape(49_152), &[1, 16])?;
    decode(&dev, "llama-1b", llama_1b_shape(), &[1, 16])?;
    Ok(())
}
