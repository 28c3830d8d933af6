use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};

use super::*;

pub(super) fn noise(seed: u64, n: usize) -> Vec<f32> {
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

pub(super) fn quantized(dtype: GgmlDType, n: usize, k: usize) -> Arc<QTensor> {
    let w = Tensor::from_vec(noise(n as u64 * 31 + k as u64, n * k), (n, k), &Device::Cpu).expect("tensor");
    Arc::new(QTensor::quantize(&w, dtype).expect("quantize"))
}

/// candle's f32 matmul over the same blocks widened by candle's own dequantizer.
pub(super) fn reference(tensor: &QTensor, x: &[f32], m: usize, k: usize) -> Vec<f32> {
    let x = Tensor::from_vec(x.to_vec(), (m, k), &Device::Cpu).expect("x");
    let widened = tensor.dequantize(&Device::Cpu).expect("dequantize");
    x.matmul(&widened.t().expect("t")).expect("matmul").flatten_all().expect("flat").to_vec1::<f32>().expect("vec")
}

/// candle's quantized matmul over the same blocks: it rounds the activations to Q8_0 blocks as
/// llama.cpp does and multiplies them in integer, with its own code.
pub(super) fn reference_q8(tensor: Arc<QTensor>, x: &[f32], m: usize, k: usize) -> Vec<f32> {
    let x = Tensor::from_vec(x.to_vec(), (m, k), &Device::Cpu).expect("x");
    let matmul = QMatMul::from_arc(tensor).expect("qmatmul");
    matmul.forward(&x).expect("matmul").flatten_all().expect("flat").to_vec1::<f32>().expect("vec")
}

pub(super) fn worst_relative(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len());
    got.iter().zip(want).map(|(a, b)| (a - b).abs() / (1.0 + b.abs())).fold(0.0f32, f32::max)
}

/// Both roads against the dequantized product: narrow shapes exercise the 2x2, 1x4 and single
/// column tiles, wide ones the f32 panels (no activation rounding on either side). F32 weights
/// against candle's own f32 matmul.
#[test]
fn kernels_match_the_dequantized_product_for_every_shape() {
    for dtype in [GgmlDType::Q8_0, GgmlDType::Q4_0, GgmlDType::F32] {
        for (m, n, k) in
            [(1, 13, 64), (7, 13, 96), (5, 64, 576), (8, 21, 2144), (33, 100, 128), (dense::DENSE_MIN_ROWS, 13, 64), (150, 300, 576)]
        {
            let tensor = quantized(dtype, n, k);
            let x = noise(m as u64, m * k);
            let want = reference(&tensor, &x, m, k);
            let got = QuantMatrix::new(tensor, Activations::F32).expect("supported format").forward(&x, m).expect("forward");
            let worst = worst_relative(&got, &want);
            assert!(worst < 1e-5, "{dtype:?} {m}x{n}x{k}: worst relative difference {worst} ({:?})", kernel());
        }
    }
}

/// With 8-bit activations, both roads against candle's quantized product, which rounds the
/// activations the same way: only the order of the float sums differs. One activation rounded
/// a step the other way (1/127 of its block's largest value) would move a result by ~1e-3.
#[test]
fn q8_kernels_match_candles_quantized_product() {
    for dtype in [GgmlDType::Q8_0, GgmlDType::Q4_0] {
        for (m, n, k) in [(1, 13, 64), (7, 13, 96), (5, 64, 576), (8, 21, 2144), (dense::DENSE_MIN_ROWS, 13, 64), (150, 300, 576)] {
            let tensor = quantized(dtype, n, k);
            let x = noise(m as u64 + 40, m * k);
            let want = reference_q8(tensor.clone(), &x, m, k);
            let got = QuantMatrix::new(tensor, Activations::Q8).expect("supported format").forward(&x, m).expect("forward");
            let worst = worst_relative(&got, &want);
            assert!(worst < 3e-5, "{dtype:?} {m}x{n}x{k}: worst relative difference {worst} ({:?})", kernel());
        }
    }
}

/// The SIMD kernels this CPU can run: each is tested, not only the one `kernel()` picks.
fn simd_kernels() -> Vec<Kernel> {
    #[allow(unused_mut)]
    let mut kernels = Vec::new();
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    {
        kernels.push(Kernel::Avx2);
        if std::arch::is_x86_feature_detected!("avx512f") {
            kernels.push(Kernel::Avx512);
        }
    }
    kernels
}

/// The kernels to test with `matrix`'s activations: with 8-bit ones, only those with a tile of
/// their own (VNNI); the others take them in panels (`q8_panels_match_the_definition_bit_for_bit`).
fn kernels_for(matrix: &QuantMatrix) -> Vec<Kernel> {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    let has_tile = |kernel: &Kernel| matrix.activations == Activations::F32 || (*kernel == Kernel::Avx512 && x86_vnni::available());
    #[cfg(not(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma")))]
    let has_tile = |_: &Kernel| matrix.activations == Activations::F32;
    simd_kernels().into_iter().filter(has_tile).collect()
}

/// `x` through one kernel, as f32 or rounded to 8 bits as `matrix` asks.
fn run_kernel(kernel: Kernel, matrix: &QuantMatrix, x: &[f32], m: usize) -> Vec<f32> {
    let data = matrix.file_bytes().expect("data");
    let Format::Blocks(format) = matrix.format else { panic!("the tiles read blocks of 32, not {:?}", matrix.format) };
    let row_bytes = format.row_bytes(matrix.k);
    let mut out = vec![0.0; m * matrix.n];
    let rounded = VnniRows::new(QuantizedRows::quantize(x, matrix.k, 1));
    let input = if matrix.activations == Activations::Q8 { Input::Vnni(&rounded) } else { Input::F32(x) };
    kernel.run(format, &data, row_bytes, input, m, &mut out);
    out
}

#[test]
fn simd_and_portable_kernels_agree() {
    let (m, n, k) = (6, 9, 160);
    let cases = [GgmlDType::Q8_0, GgmlDType::Q4_0].into_iter().flat_map(|d| [(d, Activations::F32), (d, Activations::Q8)]);
    for (dtype, activations) in cases.chain([(GgmlDType::F32, Activations::F32)]) {
        let matrix = QuantMatrix::new(quantized(dtype, n, k), activations).expect("supported format");
        let x = noise(9, m * k);
        let portable = run_kernel(Kernel::Portable, &matrix, &x, m);
        for kernel in kernels_for(&matrix) {
            for (a, b) in portable.iter().zip(&run_kernel(kernel, &matrix, &x, m)) {
                assert!((a - b).abs() <= 1e-4 * (1.0 + a.abs()), "{dtype:?} {activations:?} {kernel:?}: {a} vs {b}");
            }
        }
    }
}

/// F32 weights keep f32 activations whatever the model asks, and share a call with 8-bit
/// matrices (a file mixing the two) by each taking its own road.
#[test]
fn f32_weights_are_never_rounded_to_8_bits() {
    let (m, n, k) = (8, 40, 576);
    let (weights, blocks) = (quantized(GgmlDType::F32, n, k), quantized(GgmlDType::Q8_0, n, k));
    let x = noise(5, m * k);
    let f32_rows = QuantMatrix::new(weights.clone(), Activations::Q8).expect("supported");
    assert_eq!(f32_rows.activations, Activations::F32);
    let worst = worst_relative(&f32_rows.forward(&x, m).expect("forward"), &reference(&weights, &x, m, k));
    assert!(worst < 1e-5, "f32 weights asked for 8-bit activations: worst relative difference {worst}");
    let q8_rows = QuantMatrix::new(blocks, Activations::Q8).expect("supported");
    let together = QuantMatrix::forward_many(&[&f32_rows, &q8_rows], &x, &RowRuns::uniform(m)).expect("mixed call");
    assert!(together[0] == f32_rows.forward(&x, m).expect("alone") && together[1] == q8_rows.forward(&x, m).expect("alone"));
}

#[test]
fn each_sequence_keeps_its_road_in_a_batch() {
    let runs = RowRuns::for_sequences([3, 70, 64, 1, 2]);
    assert_eq!(runs.0, vec![(0..3, false), (3..137, true), (137..140, false)]);
    assert_eq!(runs.rows(), 140);
}

/// A prompt batched with others must give what it gives alone: the rows of a wide run come out
/// bit for bit the same whatever else shares the call, and so do the narrow ones.
#[test]
fn a_rows_output_does_not_depend_on_its_batch() {
    let (n, k) = (200, 576);
    let matrix = QuantMatrix::new(quantized(GgmlDType::Q8_0, n, k), Activations::F32).expect("supported");
    let x = noise(11, 150 * k);
    let alone_wide = matrix.forward(&x[..64 * k], 64).expect("wide alone");
    let alone_narrow = matrix.forward(&x[64 * k..67 * k], 3).expect("narrow alone");
    let batched = QuantMatrix::forward_many(&[&matrix], &x[..67 * k], &RowRuns::for_sequences([64, 3])).expect("batched").remove(0);
    assert!(batched[..64 * n] == alone_wide[..], "wide rows changed when batched");
    assert!(batched[64 * n..] == alone_narrow[..], "narrow rows changed when batched");
    let wider = matrix.forward(&x, 150).expect("wider");
    assert!(wider[..64 * n] == alone_wide[..], "wide rows changed with the number of rows");
}

/// Every tile shape runs each output's operations in the same order, so a row gives the same
/// bits alone as in a call of 15 (8-row tiles, then 4, 2 and 1), with columns at the edges;
/// at k = 2144 the 8- and 4-row tiles walk k in chunks (`tiled::chunk_blocks`) and a lone row
/// does not.
#[test]
fn tile_shapes_agree_bit_for_bit() {
    let shapes = [
        (GgmlDType::Q8_0, 576),
        (GgmlDType::Q4_0, 576),
        (GgmlDType::Q8_0, 2144),
        (GgmlDType::Q4_0, 2144),
        (GgmlDType::F32, 576),
        (GgmlDType::F32, 2144),
    ];
    for ((dtype, k), activations) in shapes.into_iter().flat_map(|s| [(s, Activations::F32), (s, Activations::Q8)]) {
        let (m, n) = (15, 37);
        let matrix = QuantMatrix::new(quantized(dtype, n, k), activations).expect("supported");
        let x = noise(3, m * k);
        for kernel in [Kernel::Portable].into_iter().chain(kernels_for(&matrix)) {
            let together = run_kernel(kernel, &matrix, &x, m);
            for (row, values) in x.chunks(k).enumerate() {
                let alone = run_kernel(kernel, &matrix, values, 1);
                assert!(
                    alone[..] == together[row * n..(row + 1) * n],
                    "{dtype:?} {activations:?} {kernel:?}: row {row} changed with its batch"
                );
            }
        }
    }
}

/// Where 8-bit activations run in panels (`x86_q8_panels.rs`, AVX2 or VNNI), every row count (narrow
/// and wide road, tiles of every height, one or two panels at the edge) computes what the
/// plain-Rust definition does, bit for bit; so do weights at the top nibble times activations
/// at ±127, where Q4_0's i16 sums come nearest to overflowing.
#[test]
fn q8_panels_match_the_definition_bit_for_bit() {
    if !q8_panels() {
        eprintln!("skipped: this CPU multiplies 8-bit activations without the panels ({:?}, VNNI {})", kernel(), vnni());
        return;
    }
    // Q4_0 at the ends of its i16 lanes, every value times ±127: `top`, one value −1 per block
    // sets the scale to 1/8 and +0.875 is then nibble 15 (w − 8 = 7); else all values +1 give
    // a scale of −1/8 and nibble 0 (w − 8 = −8).
    let extreme = |n: usize, k: usize, m: usize, top: bool| {
        let w: Vec<f32> = (0..n * k)
            .map(|i| {
                if !top {
                    1.0
                } else if i % BLOCK == 0 {
                    -1.0
                } else {
                    0.875
                }
            })
            .collect();
        let x: Vec<f32> = (0..m * k).map(|i| if (i / k).is_multiple_of(2) { 1.0 } else { -1.0 }).collect();
        (Arc::new(QTensor::quantize(&Tensor::from_vec(w, (n, k), &Device::Cpu).expect("w"), GgmlDType::Q4_0).expect("q")), x)
    };
    let shapes = [(GgmlDType::Q8_0, 37, 2144), (GgmlDType::Q4_0, 37, 2144), (GgmlDType::Q8_0, 8, 64), (GgmlDType::Q4_0, 21, 96)];
    for m in [1, 2, 3, 5, 7, 8, 13, dense::DENSE_MIN_ROWS + 5] {
        let mut cases: Vec<(Arc<QTensor>, Vec<f32>)> =
            shapes.iter().map(|&(dtype, n, k)| (quantized(dtype, n, k), noise(n as u64 + m as u64, m * k))).collect();
        cases.extend([extreme(19, 256, m, true), extreme(19, 256, m, false)]);
        for (tensor, x) in cases {
            let matrix = QuantMatrix::new(tensor, Activations::Q8).expect("supported format");
            let ours = matrix.forward(&x, m).expect("forward");
            let definition = run_kernel(Kernel::Portable, &matrix, &x, m);
            assert!(ours == definition, "{:?} {m}x{}x{}: the panels left the definition", matrix.format, matrix.n, matrix.k);
        }
    }
}

/// The panels are a matrix's only copy with 8-bit activations, so the reference path and the
/// definition read the file's blocks rebuilt from them: byte for byte what the file held.
#[test]
fn panels_give_back_the_files_blocks() {
    if !q8_panels() {
        eprintln!("skipped: this CPU multiplies 8-bit activations without the panels");
        return;
    }
    for (dtype, n, k) in [(GgmlDType::Q8_0, 37, 2144), (GgmlDType::Q4_0, 37, 2144), (GgmlDType::Q4_0, 8, 32)] {
        let tensor = quantized(dtype, n, k);
        let matrix = QuantMatrix::new(tensor.clone(), Activations::Q8).expect("supported format");
        assert!(matrix.has_panels());
        let file = tensor.data().expect("data");
        assert!(matrix.file_bytes().expect("unpacked") == file, "{dtype:?} {n}x{k}: the unpacked blocks differ from the file's");
        assert!(matrix.file_tensor().expect("rebuilt").data().expect("data") == file, "{dtype:?} {n}x{k}: the rebuilt tensor differs");
    }
}

/// Q5_0 kept in its 5 bits (`q5_0_panels`): every row count computes, bit for bit, what the
/// definition does on the same integers and scales widened to Q8_0 (`q5_0_as_q8_0`, itself
/// checked against candle's dequantizer), and about what candle's own Q5_0 product does; so do
/// the integers at both ends (fifth bits all set, w − 16 = 15, and all clear, −16, where the
/// i16 sums come nearest to overflowing) times activations at ±127; and the panels give back
/// the file's bytes.
#[test]
fn q5_0_panels_match_the_definition_bit_for_bit() {
    if !q5_0_panels() {
        eprintln!("skipped: Q5_0 is widened to Q8_0 on this CPU ({:?}, VNNI {})", kernel(), vnni());
        return;
    }
    let extreme = |n: usize, k: usize, m: usize, top: bool| {
        let block = [[0x00, 0x3c].as_slice(), &[if top { 0xff } else { 0 }; 4 + BLOCK / 2]].concat();
        let bytes = block.repeat(n * k / BLOCK);
        let tensor = candle_core::quantized::ggml_file::qtensor_from_ggml(GgmlDType::Q5_0, &bytes, vec![n, k], &Device::Cpu).expect("q5_0");
        let x: Vec<f32> = (0..m * k).map(|i| if (i / k).is_multiple_of(2) { 1.0 } else { -1.0 }).collect();
        (Arc::new(tensor), x)
    };
    for m in [1, 2, 3, 5, 7, 8, 13, dense::DENSE_MIN_ROWS + 5] {
        let mut cases: Vec<(Arc<QTensor>, Vec<f32>)> =
            [(37, 2144), (21, 96), (8, 32)].map(|(n, k)| (quantized(GgmlDType::Q5_0, n, k), noise(n as u64 + m as u64, m * k))).to_vec();
        cases.extend([extreme(19, 256, m, true), extreme(19, 256, m, false)]);
        for (tensor, x) in cases {
            let (n, k) = tensor.shape().dims2().expect("matrix");
            let matrix = QuantMatrix::new(tensor.clone(), Activations::Q8).expect("Q5_0 panels");
            assert!(
                matrix.has_panels() && matrix.file_bytes().expect("unpacked") == tensor.data().expect("data"),
                "{n}x{k}: unpacked blocks differ"
            );
            let ours = matrix.forward(&x, m).expect("forward");
            let widened = crate::weights::q5_0_as_q8_0(&tensor.data().expect("data")).expect("widened");
            let widened =
                candle_core::quantized::ggml_file::qtensor_from_ggml(GgmlDType::Q8_0, &widened, vec![n, k], &Device::Cpu).expect("q8_0");
            let definition = run_kernel(Kernel::Portable, &QuantMatrix::new(Arc::new(widened), Activations::Q8).expect("q8_0"), &x, m);
            assert!(ours == definition, "Q5_0 {m}x{n}x{k}: the panels left the definition");
            let worst = worst_relative(&ours, &reference_q8(tensor, &x, m, k));
            assert!(worst < 1e-4, "Q5_0 {m}x{n}x{k}: {worst} from candle's quantized product");
        }
    }
}

/// One call over Q4_0, Q5_0 and Q8_0 matrices of one input (their offsets shared) gives each
/// matrix's product alone.
#[test]
fn mixed_block_formats_share_one_call() {
    let (m, k) = (3, 576);
    let matrices: Vec<QuantMatrix> = [(GgmlDType::Q4_0, 40), (GgmlDType::Q5_0, 24), (GgmlDType::Q8_0, 16)]
        .map(|(dtype, n)| QuantMatrix::new(quantized(dtype, n, k), Activations::preferred()).expect("supported format"))
        .into_iter()
        .collect();
    let x = noise(5, m * k);
    let together = QuantMatrix::forward_many(&matrices.iter().collect::<Vec<_>>(), &x, &RowRuns::uniform(m)).expect("together");
    for (matrix, together) in matrices.iter().zip(together) {
        assert!(together == matrix.forward(&x, m).expect("alone"), "{:?}: differs in a shared call", matrix.format);
    }
}
