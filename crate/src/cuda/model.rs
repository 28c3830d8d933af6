//! The Llama/Qwen2 transformer on a CUDA device: candle's tensor ops (cuBLAS matmuls, its RMSNorm
//! and RoPE kernels) for everything but attention, which is our KV-cache kernel over the GPU
//! store. Weights are dequantized on the host once at load and kept in the compute dtype.

use std::sync::atomic::AtomicBool;

use candle_core::{DType, Device, Tensor};

use crate::config::{ModelConfig, RopeStyle};
use crate::cuda::kvattn::{self, KvAttnParams, KvAttnPlan};
use crate::error::{Error, Result};
use crate::forward::{check_cancel, ForwardOutput, LogitsFor, ModelStats, PassPlan};
use crate::kv_cache::KvCache;
use crate::model::{Block, BlockLoader};
use crate::weights::WeightSource;

struct Linear {
    /// `(out, in)`, as stored.
    weight: Tensor,
    bias: Option<Tensor>,
}

impl Linear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = x.matmul(&self.weight.t()?)?;
        Ok(match &self.bias {
            Some(b) => y.broadcast_add(b)?,
            None => y,
        })
    }
}

pub struct CudaModel {
    pub config: ModelConfig,
    device: Device,
    dtype: DType,
    embed: Tensor,
    blocks: Vec<Block<Linear>>,
    norm: Tensor,
    lm_head: Tensor,
    /// cos and sin of every position's angles, `(context, D/2)`, gathered per token each pass.
    rope_cos: Tensor,
    rope_sin: Tensor,
    pub stats: ModelStats,
}

/// The tensors a pass shares across layers.
struct Pass {
    plan: KvAttnPlan,
    cos: Tensor,
    sin: Tensor,
}

impl CudaModel {
    pub fn load(
        src: &mut dyn WeightSource,
        config: ModelConfig,
        device: &Device,
        dtype: DType,
        progress: &mut dyn FnMut(f64),
    ) -> Result<Self> {
        if !matches!(dtype, DType::F32 | DType::F16 | DType::BF16) {
            return Err(Error::unsupported(format!("the CUDA model computes in f32, f16 or bf16, not {dtype:?}")));
        }
        let get = |src: &mut dyn WeightSource, name: &str, dims: &[usize]| -> Result<Tensor> {
            Ok(src.load_checked(name, dims)?.into_dense()?.to_dtype(dtype)?.to_device(device)?)
        };
        let h = config.hidden_size;
        let embed = get(src, "token_embd.weight", &[config.vocab_size, h])?;
        let mut blocks = Vec::with_capacity(config.n_layers);
        let mut with = BlockLoader {
            linear: &mut |src, name, out, inp, with_bias| {
                let weight = get(src, &format!("{name}.weight"), &[out, inp])?;
                let bias = if with_bias { Some(get(src, &format!("{name}.bias"), &[out])?) } else { None };
                Ok(Linear { weight, bias })
            },
            norm: &mut |src, name, dim| get(src, name, &[dim]),
        };
        for layer in 0..config.n_layers {
            blocks.push(Block::load(src, &config, layer, &mut with)?);
            progress((layer + 1) as f64 / (config.n_layers + 1) as f64);
        }
        let norm = get(src, "output_norm.weight", &[h])?;
        let lm_head = if src.contains("output.weight") { get(src, "output.weight", &[config.vocab_size, h])? } else { embed.clone() };
        let (rope_cos, rope_sin) = rope_tables(&config, device, dtype)?;
        progress(1.0);
        Ok(Self { config, device: device.clone(), dtype, embed, blocks, norm, lm_head, rope_cos, rope_sin, stats: ModelStats::default() })
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn new_cache(&self, batch: usize, capacity: usize) -> Result<KvCache> {
        KvCache::on_device(&self.config, batch, capacity, self.dtype, &self.device)
    }

    /// Same contract as `Model::forward`: row lengths advance only if the whole pass succeeds.
    pub fn forward(&self, batch: &[Vec<u32>], cache: &mut KvCache, which: LogitsFor, cancel: Option<&AtomicBool>) -> Result<ForwardOutput> {
        if !cache.is_on_device() {
            return Err(Error::invalid("this cache was created for a different model"));
        }
        let step = PassPlan::new(batch, cache, &self.config)?;
        let n = step.n_tokens();
        if n == 0 {
            return Ok(ForwardOutput::empty(self.config.vocab_size));
        }
        let store = cache.device_store().ok_or_else(|| Error::invalid("this KV cache lives on the CPU; create it from the CUDA model"))?;
        self.stats.count_pass(n);

        let new_lens: Vec<usize> = batch.iter().map(Vec::len).collect();
        let group = self.config.n_heads / self.config.n_kv_heads;
        let plan = KvAttnPlan::new(cache.seqlens(), &new_lens, cache.capacity(), group, &self.device)?;
        let pos = Tensor::new(plan.pos.as_slice(), &self.device)?;
        let half = self.config.head_dim / 2;
        let cos = self.rope_cos.index_select(&pos, 0)?.reshape((n, 1, half))?;
        let sin = self.rope_sin.index_select(&pos, 0)?.reshape((n, 1, half))?;
        let pass = Pass { plan, cos, sin };

        let mut x = self.embed.index_select(&Tensor::new(step.ids.as_slice(), &self.device)?, 0)?;
        for (layer, block) in self.blocks.iter().enumerate() {
            check_cancel(cancel)?;
            x = self.block_forward(block, layer, &x, &pass, (&store.k, &store.v))?;
        }
        let (picked, rows) = step.logit_positions(which);
        let x = if picked.len() == n { x } else { x.index_select(&Tensor::new(picked.as_slice(), &self.device)?, 0)? };
        let x = candle_nn::ops::rms_norm(&x, &self.norm, self.config.rms_norm_eps)?;
        let logits = x.matmul(&self.lm_head.t()?)?.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
        step.commit(cache);
        Ok(ForwardOutput { logits, rows, vocab_size: self.config.vocab_size })
    }

    fn block_forward(
        &self,
        b: &Block<Linear>,
        layer: usize,
        x: &Tensor,
        pass: &Pass,
        (k_cache, v_cache): (&Tensor, &Tensor),
    ) -> Result<Tensor> {
        let cfg = &self.config;
        let (n, eps) = (x.dim(0)?, cfg.rms_norm_eps);
        let h = candle_nn::ops::rms_norm(x, &b.attn_norm, eps)?;
        // Each token is its own rope "batch" of one position, so rows at different lengths rotate
        // by their own angles.
        let rope = |y: Tensor, heads: usize| -> Result<Tensor> {
            let y = y.reshape((n, heads, 1, cfg.head_dim))?;
            let y = match cfg.rope_style {
                RopeStyle::Interleaved => candle_nn::rotary_emb::rope_i(&y, &pass.cos, &pass.sin)?,
                RopeStyle::HalfSplit => candle_nn::rotary_emb::rope(&y, &pass.cos, &pass.sin)?,
            };
            Ok(y.reshape((n, heads, cfg.head_dim))?)
        };
        let q = rope(b.q.forward(&h)?, cfg.n_heads)?;
        let k = rope(b.k.forward(&h)?, cfg.n_kv_heads)?;
        let v = b.v.forward(&h)?.reshape((n, cfg.n_kv_heads, cfg.head_dim))?;
        kvattn::append(k_cache, v_cache, layer, &k, &v, &pass.plan)?;
        let params =
            KvAttnParams { n_heads: cfg.n_heads, n_kv_heads: cfg.n_kv_heads, head_dim: cfg.head_dim, window: None, num_splits: None };
        let attn = kvattn::attend(&q, k_cache, v_cache, layer, &pass.plan, params)?.reshape((n, cfg.q_dim()))?;
        let x = (x + b.o.forward(&attn)?)?;
        let h = candle_nn::ops::rms_norm(&x, &b.ffn_norm, eps)?;
        // The CUDA model runs plain variants only, which always have a gate.
        let gate = b.gate.as_ref().ok_or_else(|| Error::unsupported("a gate-less MLP on CUDA"))?;
        let mlp = (candle_nn::ops::silu(&gate.forward(&h)?)? * b.up.forward(&h)?)?;
        Ok((x + b.down.forward(&mlp)?)?)
    }
}

/// The angles the CPU path uses (`crate::rope`), for every position of the context.
fn rope_tables(cfg: &ModelConfig, device: &Device, dtype: DType) -> Result<(Tensor, Tensor)> {
    let rope = crate::rope::Rope::new(cfg);
    let positions: Vec<usize> = (0..cfg.context_length).collect();
    let (cos, sin) = rope.angles(&positions).into_tables();
    let shape = (cfg.context_length, cfg.head_dim / 2);
    let table = |v: Vec<f32>| -> Result<Tensor> { Ok(Tensor::from_vec(v, shape, &Device::Cpu)?.to_dtype(dtype)?.to_device(device)?) };
    Ok((table(cos)?, table(sin)?))
}
