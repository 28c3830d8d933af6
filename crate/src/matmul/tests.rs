use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};

use super::*;

fn noise(seed: u64, n: usize) -> Vec<f32> {
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn quantized(dtype: GgmlDType, n: usize, k: usize) -> Arc<QTensor> {
    let w = Tensor::from_vec(noise(n as u64 * 31 + k as u64, n * k), (n, k), &Device::Cpu).expect("tensor");
    Arc::new(QTensor::quantize(&w, dtype).expect("quantize"))
}

/// Our kernels against candle's quantized matmul on the same blocks (candle also quantizes the
/// activations to Q8_0 for these formats, so the two compute the same sums in other orders).
#[test]
fn kernels_match_candle_for_every_tile_shape() {
    for dtype in [GgmlDType::Q8_0, GgmlDType::Q4_0] {
        // 7 rows and 13 columns exercise the 4x4, 4x1, 1x4 and 1x1 tiles.
        for (m, n, k) in [(1, 13, 64), (7, 13, 96), (5, 64, 576), (33, 100, 128)] {
            let tensor = quantized(dtype, n, k);
            let x = noise(m as u64, m * k);
            let want = QMatMul::from_arc(tensor.clone())
                .expect("qmatmul")
                .forward(&Tensor::from_vec(x.clone(), (m, k), &Device::Cpu).expect("x"))
                .expect("candle forward")
                .flatten_all()
                .expect("flatten")
                .to_vec1::<f32>()
                .expect("vec");
            let ours = QuantMatrix::new(tensor).expect("supported format");
            let got = ours.forward(&x, m).expect("forward");
            let worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs() / (1.0 + b.abs())).fold(0.0f32, f32::max);
            assert!(worst < 1e-4, "{dtype:?} {m}x{n}x{k}: worst relative difference {worst} ({:?})", kernel());
        }
    }
}

#[test]
fn simd_and_portable_kernels_agree() {
    let (m, n, k) = (6, 9, 160);
    for dtype in [GgmlDType::Q8_0, GgmlDType::Q4_0] {
        let tensor = quantized(dtype, n, k);
        let ours = QuantMatrix::new(tensor.clone()).expect("supported format");
        let data = tensor.data().expect("data");
        let mut acts = QuantizedActivations::default();
        acts.quantize_into(&noise(9, m * k), m, k);
        let row_bytes = k / BLOCK * ours.format.block_bytes();
        let mut portable_out = vec![0.0; m * n];
        Kernel::Portable.run(ours.format, &data, row_bytes, &acts, &mut portable_out);
        let mut simd_out = vec![0.0; m * n];
        kernel().run(ours.format, &data, row_bytes, &acts, &mut simd_out);
        for (a, b) in portable_out.iter().zip(&simd_out) {
            assert!((a - b).abs() <= 1e-4 * (1.0 + a.abs()), "{dtype:?}: {a} vs {b}");
        }
    }
}

/// Wide batches go through f32: they must match candle's f32 matmul over the same blocks
/// widened by candle's own dequantizer (no activation rounding on either side).
#[test]
fn wide_batches_match_the_dequantized_product() {
    for dtype in [GgmlDType::Q8_0, GgmlDType::Q4_0] {
        for (m, n, k) in [(dense::DENSE_MIN_ROWS, 13, 64), (150, 300, 576)] {
            let tensor = quantized(dtype, n, k);
            let x = Tensor::from_vec(noise(m as u64, m * k), (m, k), &Device::Cpu).expect("x");
            let widened = tensor.dequantize(&Device::Cpu).expect("dequantize");
            let want = x.matmul(&widened.t().expect("t")).expect("matmul").flatten_all().expect("flat").to_vec1::<f32>().expect("vec");
            let got = QuantMatrix::new(tensor).expect("supported").forward(&x.flatten_all().expect("flat").to_vec1().expect("vec"), m).expect("forward");
            let worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs() / (1.0 + b.abs())).fold(0.0f32, f32::max);
            assert!(worst < 1e-5, "{dtype:?} {m}x{n}x{k}: worst relative difference {worst}");
        }
    }
}
