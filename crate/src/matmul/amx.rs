//! The wide road for 8-bit activations on CPUs with AMX (Intel Sapphire Rapids and later):
//! `tdpbssd` multiplies a 16 × 32 tile of activation bytes by 32 × 16 weight bytes into 16 × 16
//! exact i32 block sums, 8192 multiply-adds in one instruction. A block's sums are scaled by
//! both scales into f32 accumulators with AVX-512, block after block, so each output adds its
//! blocks in order as the narrow tiles do. Weights are repacked per task into the layout the
//! tiles read (four consecutive values of a column side by side), as `dense.rs` widens its panels.

use std::arch::asm;
use std::arch::x86_64::*;
use std::cell::RefCell;
use std::sync::OnceLock;

use super::activations::{QuantizedRows, AMX_ROW_GROUP};
use super::formats::{WeightFormat, BLOCK};
use super::out_columns::OutColumns;

/// Output rows and columns per tile, and the tiles per step (2 × 2 accumulators).
const TILE: usize = 16;
const ROWS: usize = 2 * TILE;
const _: () = assert!(ROWS == AMX_ROW_GROUP, "quantize pads AMX activations to whole groups of rows");
const COLS: usize = 2 * TILE;

/// Whether the CPU has AMX-INT8 and Linux lets this process use the tile registers.
pub fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        // cpuid leaf 7 exists on every CPU this build runs on (it needs AVX2).
        let leaf7 = __cpuid_count(7, 0);
        let (tile, int8) = (leaf7.edx & (1 << 24) != 0, leaf7.edx & (1 << 25) != 0);
        tile && int8 && std::arch::is_x86_feature_detected!("avx512f") && request_tile_data()
    })
}

/// Asks Linux for the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM, XTILEDATA): without it
/// the first tile instruction faults.
fn request_tile_data() -> bool {
    const SYS_ARCH_PRCTL: usize = 158;
    const ARCH_REQ_XCOMP_PERM: usize = 0x1023;
    const XFEATURE_XTILEDATA: usize = 18;
    if !cfg!(target_os = "linux") {
        return false;
    }
    let result: isize;
    // SAFETY: a plain system call with integer arguments; it changes only this process's
    // permitted extended state.
    unsafe {
        asm!("syscall", inlateout("rax") SYS_ARCH_PRCTL as isize => result, in("rdi") ARCH_REQ_XCOMP_PERM, in("rsi") XFEATURE_XTILEDATA,
            lateout("rcx") _, lateout("r11") _, options(nostack));
    }
    result == 0
}

/// The tile shapes: tmm0/1 activations (16 rows × 32 bytes), tmm2/3 weights (8 rows of four
/// bytes for each of 16 columns), tmm4..7 the 16 × 16 i32 sums.
#[repr(C, align(64))]
struct TileConfig([u8; 64]);

impl TileConfig {
    fn new() -> Self {
        let mut cfg = [0u8; 64];
        cfg[0] = 1;
        let mut shape = |tile: usize, rows: u8, bytes: u16| {
            cfg[16 + 2 * tile..18 + 2 * tile].copy_from_slice(&bytes.to_le_bytes());
            cfg[48 + tile] = rows;
        };
        (0..2).for_each(|t| shape(t, TILE as u8, BLOCK as u16));
        (2..4).for_each(|t| shape(t, (BLOCK / 4) as u8, 64));
        (4..8).for_each(|t| shape(t, TILE as u8, 64));
        Self(cfg)
    }
}

/// Per thread: the repacked weights and their scales.
#[derive(Default)]
struct Scratch {
    weights: Vec<i8>,
    weight_scales: Vec<f32>,
}

/// `out` (`m × cols`) = `x` (`m × k`, 8-bit) · Wᵀ for the `cols` weight rows in `weights`.
///
/// # Safety
/// `available()` must have returned true, and no other thread may write `out`'s values.
pub unsafe fn run(format: WeightFormat, weights: &[u8], row_bytes: usize, x: &QuantizedRows, m: usize, out: OutColumns) {
    let cols = weights.len() / row_bytes;
    let k = format.row_values(row_bytes);
    let blocks = k / BLOCK;
    let m_pad = m.next_multiple_of(ROWS);
    // Tiles read whole groups of 32 rows: the rows past m are the zeros `quantize` pads with.
    assert!(
        x.k == k && x.values.len() >= m_pad * k && x.scales.len() >= m_pad * blocks && out.rows() >= m && out.cols() == cols,
        "AMX matmul operands out of range"
    );
    thread_local! {
        static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
    }
    SCRATCH.with_borrow_mut(|s| {
        let cols_pad = cols.next_multiple_of(COLS);
        repack(format, weights, row_bytes, cols, cols_pad, s);
        let cfg = TileConfig::new();
        asm!("ldtilecfg [{}]", in(reg) cfg.0.as_ptr(), options(nostack));
        for row in (0..m_pad).step_by(ROWS) {
            for col in (0..cols_pad).step_by(COLS) {
                let sums = step(s, x, blocks, row, col);
                let width = (cols - col).min(COLS);
                for (r, values) in sums.iter().enumerate().take((m - row).min(ROWS)) {
                    out.set_run(row + r, col, &values[..width]);
                }
            }
        }
        asm!("tilerelease", options(nostack));
    });
}

/// Block b of column c goes to the 512-byte tile `c / 16 · blocks + b`, whose row r holds
/// values 4r..4r+4 of each of its 16 columns side by side: a transpose of 4-byte groups, one
/// gather per tile row. Padding columns are zero with a zero scale.
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn repack(format: WeightFormat, weights: &[u8], row_bytes: usize, cols: usize, cols_pad: usize, s: &mut Scratch) {
    let (block_bytes, blocks) = (format.block_bytes(), row_bytes / format.block_bytes());
    s.weights.clear();
    s.weights.resize(cols_pad * blocks * BLOCK, 0);
    s.weight_scales.clear();
    s.weight_scales.resize(cols_pad * blocks, 0.0);
    let lanes = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    for group in 0..cols.div_ceil(TILE) {
        let present = (cols - group * TILE).min(TILE);
        let mask: __mmask16 = ((1u32 << present) - 1) as __mmask16;
        // Byte offset of each of the group's columns in `weights`.
        let columns =
            _mm512_mullo_epi32(_mm512_add_epi32(lanes, _mm512_set1_epi32((group * TILE) as i32)), _mm512_set1_epi32(row_bytes as i32));
        for b in 0..blocks {
            let tile = group * blocks + b;
            let at = _mm512_add_epi32(columns, _mm512_set1_epi32((b * block_bytes) as i32));
            let gather = |offset: usize| {
                let at = _mm512_add_epi32(at, _mm512_set1_epi32(offset as i32));
                _mm512_mask_i32gather_epi32::<1>(_mm512_setzero_si512(), mask, at, weights.as_ptr() as *const i32)
            };
            // The scale is the low half of the block's first four bytes.
            let halves = _mm512_cvtepi32_epi16(_mm512_and_si512(gather(0), _mm512_set1_epi32(0xffff)));
            _mm512_storeu_ps(s.weight_scales.as_mut_ptr().add(tile * TILE), _mm512_cvtph_ps(halves));
            let out = s.weights.as_mut_ptr().add(tile * TILE * BLOCK);
            for r in 0..BLOCK / 4 {
                let four = match format {
                    WeightFormat::Q8_0 => gather(2 + 4 * r),
                    // Bytes 4r'..4r'+4 hold values 4r'.. in their low nibbles and 16 + 4r'.. in
                    // their high ones.
                    WeightFormat::Q4_0 => {
                        let packed = gather(2 + 4 * (r % 4));
                        let nibbles = if r < 4 { packed } else { _mm512_srli_epi32::<4>(packed) };
                        _mm512_sub_epi8(_mm512_and_si512(nibbles, _mm512_set1_epi8(0x0f)), _mm512_set1_epi8(8))
                    }
                    WeightFormat::F32 => unreachable!("f32 weights take f32 activations (QuantMatrix::new)"),
                };
                // Padding columns: zero, not the −8 the Q4_0 offset leaves.
                _mm512_storeu_si512(out.add(r * 64) as *mut __m512i, _mm512_maskz_mov_epi32(mask, four));
            }
        }
    }
}

/// The 32 × 32 outputs from `row`, `col`: per block, four tile products, then each sum times
/// its two scales added to its accumulator.
#[target_feature(enable = "avx512f")]
unsafe fn step(s: &Scratch, x: &QuantizedRows, blocks: usize, row: usize, col: usize) -> [[f32; COLS]; ROWS] {
    let k = x.k;
    let mut acc = [[_mm512_setzero_ps(); 2]; ROWS];
    let mut sums = [[[0i32; TILE]; TILE]; 4];
    let (g0, g1) = (col / TILE, col / TILE + 1);
    for b in 0..blocks {
        let a0 = x.values.as_ptr().add(row * k + b * BLOCK);
        let a1 = a0.add(TILE * k);
        let w0 = s.weights.as_ptr().add((g0 * blocks + b) * TILE * BLOCK);
        let w1 = s.weights.as_ptr().add((g1 * blocks + b) * TILE * BLOCK);
        asm!(
            "tilezero tmm4", "tilezero tmm5", "tilezero tmm6", "tilezero tmm7",
            "tileloadd tmm0, [{a0} + {k}*1]", "tileloadd tmm1, [{a1} + {k}*1]",
            "tileloadd tmm2, [{w0} + {wide}*1]", "tileloadd tmm3, [{w1} + {wide}*1]",
            "tdpbssd tmm4, tmm0, tmm2", "tdpbssd tmm5, tmm0, tmm3", "tdpbssd tmm6, tmm1, tmm2", "tdpbssd tmm7, tmm1, tmm3",
            "tilestored [{c0} + {wide}*1], tmm4", "tilestored [{c1} + {wide}*1], tmm5",
            "tilestored [{c2} + {wide}*1], tmm6", "tilestored [{c3} + {wide}*1], tmm7",
            a0 = in(reg) a0, a1 = in(reg) a1, k = in(reg) k, w0 = in(reg) w0, w1 = in(reg) w1, wide = in(reg) 64usize,
            c0 = in(reg) sums[0].as_mut_ptr(), c1 = in(reg) sums[1].as_mut_ptr(), c2 = in(reg) sums[2].as_mut_ptr(), c3 = in(reg) sums[3].as_mut_ptr(),
            options(nostack),
        );
        let weight_scales = [g0, g1].map(|g| _mm512_loadu_ps(s.weight_scales.as_ptr().add((g * blocks + b) * TILE)));
        for (r, acc) in acc.iter_mut().enumerate() {
            let act_scale = _mm512_set1_ps(x.scales[(row + r) * blocks + b]);
            for (h, a) in acc.iter_mut().enumerate() {
                let tile = &sums[(r / TILE) * 2 + h][r % TILE];
                let dot = _mm512_cvtepi32_ps(_mm512_loadu_si512(tile.as_ptr() as *const __m512i));
                *a = _mm512_fmadd_ps(dot, _mm512_mul_ps(weight_scales[h], act_scale), *a);
            }
        }
    }
    let mut out = [[0.0f32; COLS]; ROWS];
    for (o, a) in out.iter_mut().zip(&acc) {
        _mm512_storeu_ps(o.as_mut_ptr(), a[0]);
        _mm512_storeu_ps(o.as_mut_ptr().add(TILE), a[1]);
    }
    out
}
