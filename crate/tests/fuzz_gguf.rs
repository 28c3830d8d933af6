//! Deterministic fuzzing of the GGUF loader: the tiny model's GGUF file (F32, Q8_0, Q5_0, Q4_K,
//! with tied embeddings, and relabelled as Qwen3, Phi-3, Gemma 3 and GPT-2 with their extra or
//! fused tensors), mutated (byte flips concentrated in the header, metadata and tensor infos,
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
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{DType, Device, Tensor};
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

/// The tiny model relabelled as another family: its `llama.*` keys under that family's name and
/// the tensors the family adds (QK norms, Gemma's post-norms, GPT-2's positions and biases) or
/// fuses (Phi-3's QKV and gate/up, GPT-2's QKV) or drops (GPT-2's gate),
/// so mutants reach each family's loading code. Weights stay the tiny model's: only loading and
/// one forward pass are judged here, not the logits.
fn family_base(m: &TinyModel, arch: &str) -> Vec<u8> {
    let mut meta: Vec<(String, Value)> = m
        .gguf_metadata()
        .into_iter()
        .map(|(k, v)| match k.strip_prefix("llama.") {
            Some(rest) => (format!("{arch}.{rest}"), v),
            None if k == "general.architecture" => (k, Value::String(arch.into())),
            None => (k, v),
        })
        .collect();
    if arch == "gemma3" {
        meta.push(("gemma3.attention.sliding_window".into(), Value::U32(4)));
    }
    let s = &m.spec;
    let ones = |n: usize| QTensor::quantize(&Tensor::ones(n, DType::F32, &Device::Cpu).unwrap(), GgmlDType::F32).unwrap();
    let mut tensors = m.gguf_tensors_with(GgmlDType::F32, false);
    let vector =
        |n: usize| QTensor::quantize(&(Tensor::ones(n, DType::F32, &Device::Cpu).unwrap() * 0.01).unwrap(), GgmlDType::F32).unwrap();
    if arch == "gpt2" {
        let table = Tensor::ones((s.context, s.hidden), DType::F32, &Device::Cpu).unwrap();
        tensors.push(("position_embd.weight".into(), QTensor::quantize(&(table * 0.01).unwrap(), GgmlDType::F32).unwrap()));
        tensors.push(("output_norm.bias".into(), vector(s.hidden)));
    }
    for layer in 0..s.n_layers {
        if arch == "phi3" {
            fuse(&mut tensors, layer, &["attn_q", "attn_k", "attn_v"], "attn_qkv");
            fuse(&mut tensors, layer, &["ffn_gate", "ffn_up"], "ffn_up");
        }
        if arch == "gpt2" {
            fuse(&mut tensors, layer, &["attn_q", "attn_k", "attn_v"], "attn_qkv");
            tensors.retain(|(n, _)| *n != format!("blk.{layer}.ffn_gate.weight"));
            let qkv = (s.n_heads + 2 * s.n_kv_heads) * s.head_dim;
            let biases = [("attn_qkv", qkv), ("attn_output", s.hidden), ("ffn_up", s.ffn), ("ffn_down", s.hidden)];
            let norms = [("attn_norm", s.hidden), ("ffn_norm", s.hidden)];
            tensors.extend(biases.iter().chain(&norms).map(|&(name, n)| (format!("blk.{layer}.{name}.bias"), vector(n))));
        }
        let norms: &[(&str, usize)] = match arch {
            "qwen3" => &[("attn_q_norm", s.head_dim), ("attn_k_norm", s.head_dim)],
            "gemma3" => {
                &[("attn_q_norm", s.head_dim), ("attn_k_norm", s.head_dim), ("post_attention_norm", s.hidden), ("post_ffw_norm", s.hidden)]
            }
            _ => &[],
        };
        tensors.extend(norms.iter().map(|&(name, n)| (format!("blk.{layer}.{name}.weight"), ones(n))));
    }
    let dir = tempdir();
    let p = dir.path().join("family.gguf");
    write_gguf_parts(&p, &meta, &tensors);
    std::fs::read(&p).unwrap()
}

/// Replaces layer `layer`'s `parts` by one matrix `out` holding their rows in order (Phi-3's layout).
fn fuse(tensors: &mut Vec<(String, QTensor)>, layer: usize, parts: &[&str], out: &str) {
    let rows: Vec<Tensor> = parts
        .iter()
        .map(|part| {
            let name = format!("blk.{layer}.{part}.weight");
            let at = tensors.iter().position(|(n, _)| *n == name).unwrap_or_else(|| panic!("no {name}"));
            tensors.remove(at).1.dequantize(&Device::Cpu).unwrap()
        })
        .collect();
    let fused = QTensor::quantize(&Tensor::cat(&rows, 0).unwrap(), GgmlDType::F32).unwrap();
    tensors.push((format!("blk.{layer}.{out}.weight"), fused));
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
        ("q5_0".into(), gguf_base(&tiny, GgmlDType::Q5_0)),
        (
            "q4_k".into(),
            gguf_base(&TinyModel::with_spec(44, TinySpec { hidden: 256, head_dim: 64, ffn: 256, ..TinySpec::default() }), GgmlDType::Q4K),
        ),
        ("qwen3".into(), family_base(&tiny, "qwen3")),
        ("phi3".into(), family_base(&tiny, "phi3")),
        ("gemma3".into(), family_base(&tied, "gemma3")),
        ("gpt2".into(), family_base(&tiny, "gpt2")),
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
