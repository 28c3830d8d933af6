//! The op's CPU semantics (append + masked attention per row) against the engine's own attention
//! path (`crate::attention` over `KvCache`), on the same random data.

use candle_core::{DType, Device, Tensor};

use super::*;
use crate::attention::{self, AttentionShape, TokenSlot};
use crate::config::test_config;
use crate::kv_cache::{KvCache, KvType, RowKv};

/// Deterministic values in [-1, 1) that differ everywhere.
fn noise(seed: usize, n: usize) -> Vec<f32> {
    (0..n).map(|i| ((((i * 7919) ^ (seed * 104_729)) % 1000) as f32 / 500.0) - 1.0).collect()
}

struct Case {
    heads: usize,
    kv_heads: usize,
    dim: usize,
    /// Per row: positions already cached, new tokens.
    rows: Vec<(usize, usize)>,
}

/// Fills both stores with the same prefix, appends the same new tokens through each path, and
/// compares attention outputs and the caches' contents.
fn check(case: &Case, window: Option<usize>, layer: usize, dtype: DType, tol: f32) {
    let (h, hkv, d) = (case.heads, case.kv_heads, case.dim);
    let (n_layers, batch, capacity) = (2, case.rows.len(), 64);
    let width = hkv * d;
    let mut cache = KvCache::new(&test_config(n_layers, h, hkv, d), batch, capacity, KvType::F32).expect("cache");
    let capacity = cache.capacity();
    let mut k_host = vec![0.0f32; n_layers * batch * capacity * width];
    let mut v_host = k_host.clone();
    for (row, &(before, _)) in case.rows.iter().enumerate() {
        for l in 0..n_layers {
            let (k, v) = (noise(row * 10 + l, before * width), noise(row * 10 + l + 5, before * width));
            cache.write(l, row, 0, &k, &v);
            let at = (l * batch + row) * capacity * width;
            k_host[at..at + k.len()].copy_from_slice(&k);
            v_host[at..at + v.len()].copy_from_slice(&v);
        }
        cache.set_seqlen(row, before);
    }
    let shape5 = (n_layers, batch, capacity, hkv, d);
    let k_cache = Tensor::from_vec(k_host, shape5, &Device::Cpu).and_then(|t| t.to_dtype(dtype)).expect("k");
    let v_cache = Tensor::from_vec(v_host, shape5, &Device::Cpu).and_then(|t| t.to_dtype(dtype)).expect("v");

    let new_lens: Vec<usize> = case.rows.iter().map(|&(_, n)| n).collect();
    let plan = KvAttnPlan::new(cache.seqlens(), &new_lens, capacity, h / hkv, &Device::Cpu).expect("plan");
    let n = plan.n_tokens();
    let (k_new, v_new, q) = (noise(101, n * width), noise(102, n * width), noise(103, n * h * d));

    // The engine's path: write through KvCache, attend over packed slots.
    let mut first = 0;
    for (row, &(before, len)) in case.rows.iter().enumerate() {
        cache.write(layer, row, before, &k_new[first * width..(first + len) * width], &v_new[first * width..(first + len) * width]);
        first += len;
    }
    let slots: Vec<TokenSlot> = plan.rows.iter().zip(&plan.pos).map(|(&r, &p)| TokenSlot { row: r as usize, pos: p as usize }).collect();
    let want = attention::attend(&cache, layer, &slots, &q, &AttentionShape { n_heads: h, n_kv_heads: hkv, head_dim: d, window }, None);

    // The op's path.
    let t = |x: &[f32], dims: &[usize]| Tensor::from_slice(x, dims, &Device::Cpu).and_then(|t| t.to_dtype(dtype)).expect("tensor");
    append(&k_cache, &v_cache, layer, &t(&k_new, &[n, hkv, d]), &t(&v_new, &[n, hkv, d]), &plan).expect("append");
    let params = KvAttnParams { n_heads: h, n_kv_heads: hkv, head_dim: d, window, num_splits: None };
    let got = attend(&t(&q, &[n, h, d]), &k_cache, &v_cache, layer, &plan, params).expect("attend");
    let got = got.to_dtype(DType::F32).and_then(|g| g.flatten_all()).and_then(|g| g.to_vec1::<f32>()).expect("out");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!((g - w).abs() <= tol, "{dtype:?} window {window:?} token {} head {}: {g} vs {w}", i / (h * d), i / d % h);
    }

    // Both stores now hold the same K/V in every layer.
    let k_all = k_cache.to_dtype(DType::F32).and_then(|t| t.flatten_all()).and_then(|t| t.to_vec1::<f32>()).expect("k");
    for l in 0..n_layers {
        for (row, &(before, len)) in case.rows.iter().enumerate() {
            let RowKv::F32(k_row, _) = cache.row(l, row) else { panic!("an f32 cache gave a row of another type") };
            let at = (l * batch + row) * capacity * width;
            for (i, (a, b)) in k_all[at..at + (before + len) * width].iter().zip(k_row).enumerate() {
                assert!((a - b).abs() <= tol, "layer {l} row {row} element {i}: {a} vs {b}");
            }
        }
    }
}

#[test]
fn decode_prefill_and_ragged_rows_match_the_engine() {
    // Row 0 decodes, row 1 prefills in a chunk after a prefix, row 2 is idle, row 3 prefills
    // from empty: one call, four shapes of work.
    let ragged = Case { heads: 8, kv_heads: 2, dim: 16, rows: vec![(30, 1), (19, 21), (7, 0), (0, 5)] };
    for window in [None, Some(0), Some(4), Some(100)] {
        check(&ragged, window, 1, DType::F32, 1e-5);
    }
}

#[test]
fn decode_batch_without_gqa_and_with_wide_groups() {
    let mha = Case { heads: 4, kv_heads: 4, dim: 8, rows: vec![(12, 1), (3, 1), (40, 1)] };
    check(&mha, None, 0, DType::F32, 1e-5);
    // A group of 32 query heads is split across two tiles.
    let wide = Case { heads: 32, kv_heads: 1, dim: 8, rows: vec![(9, 3), (0, 2)] };
    check(&wide, Some(6), 0, DType::F32, 1e-5);
}

#[test]
fn half_precision_caches_round_once() {
    let case = Case { heads: 4, kv_heads: 2, dim: 32, rows: vec![(10, 1), (5, 6)] };
    check(&case, None, 1, DType::F16, 4e-3);
    check(&case, Some(3), 0, DType::BF16, 3e-2);
}

#[test]
fn tiles_cover_every_query_once() {
    let rows = [0u32, 0, 0, 1, 2, 2, 2, 2, 2];
    for group in [1, 3, 4, 16, 40] {
        let tiles = plan_tiles(&rows, group);
        let mut seen = vec![0u32; rows.len() * group];
        for t in tiles.chunks_exact(4) {
            let [first, len, g0, ng] = [t[0], t[1], t[2], t[3]].map(|x| x as usize);
            assert!(len * ng <= TILE_QUERIES && rows[first..first + len].iter().all(|&r| r == rows[first]));
            for tok in first..first + len {
                for g in g0..g0 + ng {
                    seen[tok * group + g] += 1;
                }
            }
        }
        assert!(seen.iter().all(|&c| c == 1), "group {group}: {seen:?}");
    }
}

#[test]
fn mismatched_shapes_are_errors() {
    let plan = KvAttnPlan::new(&[3, 0], &[1, 2], 8, 2, &Device::Cpu).expect("plan");
    let cache = Tensor::zeros((1, 2, 8, 1, 4), DType::F32, &Device::Cpu).expect("cache");
    let q = Tensor::zeros((3, 2, 4), DType::F32, &Device::Cpu).expect("q");
    let params = KvAttnParams { n_heads: 2, n_kv_heads: 1, head_dim: 4, window: None, num_splits: None };
    assert!(attend(&q, &cache, &cache, 1, &plan, params).is_err(), "layer out of range");
    assert!(append(&cache, &cache, 0, &q, &q, &plan).is_err(), "new K/V with the wrong head count");
    assert!(KvAttnPlan::new(&[7], &[2], 8, 1, &Device::Cpu).is_err(), "past the capacity");
}
