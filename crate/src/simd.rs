//! Small f32 vector kernels for the attention and norm paths. They are written over fixed-width
//! lanes so the compiler turns them into SIMD for the `target-cpu` in `.cargo/config.toml`
//! without reassociating anything it was not told it may.

const LANES: usize = 16;

/// Independent per-lane accumulators: the sum order is fixed, so results do not depend on the
/// instruction set, and the loop vectorises.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; LANES];
    let (a_chunks, b_chunks) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (a_tail, b_tail) = (a_chunks.remainder(), b_chunks.remainder());
    for (x, y) in a_chunks.zip(b_chunks) {
        for i in 0..LANES {
            acc[i] += x[i] * y[i];
        }
    }
    let mut sum = acc.iter().sum::<f32>();
    for (x, y) in a_tail.iter().zip(b_tail) {
        sum += x * y;
    }
    sum
}

/// `y += alpha * x`
#[inline]
pub fn axpy(alpha: f32, x: &[f32], y: &mut [f32]) {
    for (yi, &xi) in y.iter_mut().zip(x) {
        *yi += alpha * xi;
    }
}

/// `e^x` to about 2 ulp for the range softmax uses (x <= 0), branch-free so a slice of them
/// vectorises: x = n·ln2 + r with |r| <= ln2/2, e^r by its degree-6 Taylor polynomial, and 2^n
/// put straight into the exponent bits.
#[inline(always)]
fn exp_approx(x: f32) -> f32 {
    const LOG2_E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Below this e^x is under f32's smallest normal; flushing to zero is what softmax wants.
    let x = x.max(-87.0);
    let n = (x * LOG2_E).round();
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
    p * scale
}

/// Softmax over a row that may hold `-inf` for masked positions (they become exactly 0).
pub fn softmax_in_place(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if max == f32::NEG_INFINITY {
        return;
    }
    let mut sum = 0.0f32;
    for x in row.iter_mut() {
        let e = if *x == f32::NEG_INFINITY { 0.0 } else { exp_approx(*x - max) };
        *x = e;
        sum += e;
    }
    let inv = 1.0 / sum;
    row.iter_mut().for_each(|x| *x *= inv);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_approx_matches_std_exp() {
        let mut worst = 0.0f32;
        for i in 0..=87_000 {
            let x = -(i as f32) / 1000.0;
            let (got, want) = (exp_approx(x), x.exp());
            if want > f32::MIN_POSITIVE {
                worst = worst.max(((got - want) / want).abs());
            }
        }
        assert!(worst < 1e-6, "worst relative error {worst}");
    }

    #[test]
    fn softmax_zeroes_masked_positions_and_sums_to_one() {
        let mut row = [1.0, f32::NEG_INFINITY, 3.0, -2.0];
        softmax_in_place(&mut row);
        assert_eq!(row[1], 0.0);
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        let z = 1.0f32.exp() + 3.0f32.exp() + (-2.0f32).exp();
        assert!((row[2] - 3.0f32.exp() / z).abs() < 1e-6);
    }

    #[test]
    fn dot_handles_tails() {
        let a: Vec<f32> = (0..37).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..37).map(|i| 1.0 - i as f32 * 0.01).collect();
        let want: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - want).abs() < 1e-3);
    }
}
