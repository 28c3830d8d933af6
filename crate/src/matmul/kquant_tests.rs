//! K-quant super-blocks and their panels: against candle's own decoding of the file's bytes,
//! against the definition of what the tiles compute, and back to the file's bytes.

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::Device;
use half::f16;

use super::kquants::{KQuant, SUBS, SUPER};
use super::tests::{noise, quantized, reference, reference_q8, worst_relative};
use super::*;

const KINDS: [KQuant; 3] = [KQuant::Q4K, KQuant::Q5K, KQuant::Q6K];

/// Taking a super-block apart and putting it back gives the file's bytes, and its values are
/// the ones candle's dequantizer reads from them.
#[test]
fn super_blocks_decode_as_candle_does_and_encode_back() {
    for kind in KINDS {
        let tensor = quantized(kind.dtype(), 3, 4 * SUPER);
        let bytes = tensor.data().expect("data");
        let widened = tensor.dequantize(&Device::Cpu).expect("dequantize").flatten_all().expect("flat").to_vec1::<f32>().expect("vec");
        for (block, want) in bytes.chunks_exact(kind.block_bytes()).zip(widened.chunks_exact(SUPER)) {
            let decoded = kind.decode(block);
            assert_eq!(kind.values(&decoded).as_slice(), want, "{kind:?}: values differ from candle's");
            let mut again = vec![0u8; kind.block_bytes()];
            kind.encode(&decoded, &mut again);
            assert_eq!(again, block, "{kind:?}: the re-encoded super-block differs");
        }
    }
}

/// What the tiles compute, in plain Rust and the same float operations: per super-block, the
/// integer sums of its sub-blocks (Q4_K/Q5_K: `scale · dot` and `min · Σa`; Q6_K: `scale₀ · dot₀ +
/// scale₁ · dot₁` over halves whose integers are biased by 32), then `sum · (d·dx)` added and
/// `mins · (dmin·dx)` taken off, each fused.
fn definition(kind: KQuant, file: &[u8], n: usize, acts: &QuantizedRows, m: usize) -> Vec<f32> {
    let (k, row_bytes) = (acts.k, kind.row_bytes(acts.k));
    let blocks = k / BLOCK;
    let mut out = vec![0.0f32; m * n];
    for r in 0..m {
        for col in 0..n {
            let mut acc = 0.0f32;
            for (sb, block) in file[col * row_bytes..(col + 1) * row_bytes].chunks_exact(kind.block_bytes()).enumerate() {
                let block = kind.decode(block);
                let (d, dmin) = (f16::from_bits(block.d).to_f32(), f16::from_bits(block.dmin).to_f32());
                let (mut dots, mut mins) = (0i32, 0i32);
                for s in 0..SUBS {
                    let b = sb * SUBS + s;
                    let a = &acts.values[r * k + b * BLOCK..][..BLOCK];
                    let q = &block.q[s * BLOCK..][..BLOCK];
                    let dot = |range: std::ops::Range<usize>| -> i32 { range.map(|i| q[i] as i32 * a[i] as i32).sum() };
                    let sum = |range: std::ops::Range<usize>| -> i32 { range.map(|i| a[i] as i32).sum() };
                    let [first, second] = block.sub[s];
                    if kind == KQuant::Q6K {
                        let (low, high) = (dot(0..16) - 32 * sum(0..16), dot(16..32) - 32 * sum(16..32));
                        dots += low * first as i8 as i32 + high * second as i8 as i32;
                    } else {
                        dots += dot(0..32) * first as i32;
                        mins += sum(0..32) * second as i32;
                    }
                }
                let dx = acts.scales[r * blocks + sb * SUBS];
                acc = (dots as f32).mul_add(d * dx, acc);
                if kind != KQuant::Q6K {
                    acc = (-(mins as f32)).mul_add(dmin * dx, acc);
                }
            }
            out[r * n + col] = acc;
        }
    }
    out
}

/// Every tile height, a last pair half empty, one and several super-blocks: the panels give the
/// definition's bits; candle's dequantized weights times the same rounded activations, and
/// candle's own K-quant product (its activations rounded as llama.cpp's Q8_K, as ours are), both
/// up to the order of float sums, which a misplaced value or scale would be far outside.
#[test]
fn kquant_panels_match_the_definition_bit_for_bit() {
    if !q8_panels() {
        eprintln!("skipped: K-quant panels need AVX2 and no AMX");
        return;
    }
    for kind in KINDS {
        for (n, k) in [(37, 2048), (16, 256), (5, 512)] {
            for m in [1, 2, 3, 5, 6, 7, 13, dense::DENSE_MIN_ROWS + 5] {
                let tensor = quantized(kind.dtype(), n, k);
                let x = noise(n as u64 * 7 + m as u64, m * k);
                let matrix = QuantMatrix::new(tensor.clone(), Activations::Q8).expect("K-quant panels");
                let ours = matrix.forward(&x, m).expect("forward");
                let acts = QuantizedRows::quantize_super(&x, k);
                let want = definition(kind, &tensor.data().expect("data"), n, &acts, m);
                assert!(ours == want, "{kind:?} {m}x{n}x{k}: the panels left the definition");
                let worst = worst_relative(&ours, &reference(&tensor, &acts.dequantize(), m, k));
                assert!(worst < 1e-4, "{kind:?} {m}x{n}x{k}: {worst} from the dequantized product");
                let worst = worst_relative(&ours, &reference_q8(tensor, &x, m, k));
                assert!(worst < 1e-4, "{kind:?} {m}x{n}x{k}: {worst} from candle's quantized product");
            }
        }
    }
}

/// The integer lanes at their largest, each format at its top integer (or 0) under its most
/// extreme scales, against activations of ±127: Q4_K and Q5_K fill an AVX2 i16 lane to 30480
/// and 31496 (`x86_kquant_avx2.rs`), and a Q6_K block's sum, −16 × 31 × 127 × 128 × 2, is just
/// inside 2²⁴. All stay exact.
#[test]
fn kquant_extremes_stay_exact() {
    if !q8_panels() {
        return;
    }
    let (n, k, m) = (16, SUPER, 2);
    for (kind, top, sub) in [(KQuant::Q4K, 15, [63, 63]), (KQuant::Q5K, 31, [63, 63]), (KQuant::Q6K, 63, [(-128i8) as u8; 2])] {
        let mut file = vec![0u8; n * kind.block_bytes()];
        for (col, out) in file.chunks_exact_mut(kind.block_bytes()).enumerate() {
            let q = [if col % 2 == 0 { top } else { 0 }; SUPER];
            let block = kquants::SuperBlock { d: f16::from_f32(0.5).to_bits(), dmin: 0, q, sub: [sub; SUBS] };
            kind.encode(&block, out);
        }
        let tensor =
            Arc::new(candle_core::quantized::ggml_file::qtensor_from_ggml(kind.dtype(), &file, vec![n, k], &Device::Cpu).expect("tensor"));
        let x: Vec<f32> = (0..m * k).map(|i| if (i / k) % 2 == 0 { 1.0 } else { -1.0 }).collect();
        let matrix = QuantMatrix::new(tensor.clone(), Activations::Q8).expect("panels");
        let ours = matrix.forward(&x, m).expect("forward");
        let acts = QuantizedRows::quantize_super(&x, k);
        assert!(ours == definition(kind, &file, n, &acts, m), "{kind:?}: left the definition");
        assert!(ours.iter().any(|&v| v.abs() > 1e5), "{kind:?}: the extremes did not reach large sums");
        assert!(worst_relative(&ours, &reference(&tensor, &acts.dequantize(), m, k)) < 1e-5, "{kind:?}: left candle's");
    }
}

/// Q8_0, Q4_K and Q6_K projections of one input in one call (a Q4_K_M file's q/k/v): each as
/// alone; and the panels give back the file's bytes, for the reference path.
#[test]
fn kquant_panels_share_a_call_and_give_back_the_files_bytes() {
    if !q8_panels() {
        return;
    }
    let (m, k) = (3, 512);
    let tensors: Vec<Arc<QTensor>> =
        [GgmlDType::Q8_0, GgmlDType::Q4K, GgmlDType::Q6K, GgmlDType::Q5K].iter().map(|&d| quantized(d, 40, k)).collect();
    let matrices: Vec<QuantMatrix> = tensors.iter().map(|t| QuantMatrix::new(t.clone(), Activations::Q8).expect("panels")).collect();
    let x = noise(5, m * k);
    let together = QuantMatrix::forward_many(&matrices.iter().collect::<Vec<_>>(), &x, &RowRuns::uniform(m)).expect("forward");
    for ((matrix, tensor), together) in matrices.iter().zip(&tensors).zip(together) {
        assert!(matrix.forward(&x, m).expect("alone") == together, "{:?}: differs in company", matrix.format);
        let file = tensor.data().expect("data");
        assert!(matrix.file_bytes().expect("unpacked") == file, "{:?}: unpacked bytes differ", matrix.format);
        assert!(matrix.file_tensor().expect("rebuilt").data().expect("data") == file);
    }
}

/// The AVX2 tile on every CPU that has AVX2, and the VNNI tile where there is one: each gives
/// the definition's bits (so the two tiles agree), whatever the tile height.
#[test]
fn both_tiles_give_the_definitions_bits() {
    use super::x86_kquant_panels::{KPanels, KRows, Tile};
    let tiles: &[Tile] = if vnni() { &[Tile::Avx2, Tile::Vnni] } else { &[Tile::Avx2] };
    for kind in KINDS {
        let (n, k) = (37, 2 * SUPER);
        let tensor = quantized(kind.dtype(), n, k);
        let file = tensor.data().expect("data");
        let panels = KPanels::pack(kind, &file, n, k);
        for m in [1, 2, 3, 4, 5, 9] {
            let x = noise(m as u64 + 11, m * k);
            let rows = KRows::new(&x, k, kind == KQuant::Q6K);
            let want = definition(kind, &file, n, &QuantizedRows::quantize_super(&x, k), m);
            for &tile in tiles {
                let mut out = vec![0.0f32; m * n];
                // SAFETY: `out` is this call's alone, and `tiles` holds only what the CPU runs.
                unsafe { panels.run_on(tile, 0, n, &rows, m, OutColumns::whole(&mut out, m, n)) };
                assert!(out == want, "{kind:?} {m}x{n}x{k} on {tile:?}: left the definition");
            }
        }
    }
}
