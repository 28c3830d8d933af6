//! Walks the output in register tiles: each SIMD kernel picks tile shapes that fit its vector
//! registers (so a batch of 8 widens each weight block once per step), with single columns at
//! the edges. When a tile's activation rows outgrow L1 (8 rows of k = 2048 are 64 KB), the
//! inner dimension is walked in chunks, each chunk of activations passed over every column
//! while it is still in L1; each output's partial sums wait in memory between chunks, so it
//! runs the same operations in the same order either way.

use std::marker::PhantomData;

use super::activations::VnniRows;
use super::formats::{WeightFormat, BLOCK};
use super::out_columns::OutColumns;

/// Pointers into one tile's inputs: `NR` weight rows (block-encoded, `row_stride` bytes apart)
/// and `MR` activation rows, all at the tile's first block.
pub struct Tile<const MR: usize, const NR: usize, A> {
    pub weights: [*const u8; NR],
    pub acts: [A; MR],
    pub row_stride: usize,
}

/// Activation rows as the tiles read them: f32 values, or 8-bit blocks as the VNNI tile reads them.
pub trait ActRows: Sync {
    /// Where one row's block begins.
    type At: Copy;
    /// Bytes of one row's block, for sizing chunks of k to L1.
    const BLOCK_BYTES: usize;
    /// Whether `m` rows of `k` values are all there.
    fn holds(&self, m: usize, k: usize) -> bool;
    /// Row `row` (of `k` values) at block `block`.
    fn at(&self, row: usize, k: usize, block: usize) -> Self::At;
}

impl ActRows for [f32] {
    type At = *const f32;
    const BLOCK_BYTES: usize = BLOCK * size_of::<f32>();
    fn holds(&self, m: usize, k: usize) -> bool {
        self.len() >= m * k
    }
    fn at(&self, row: usize, k: usize, block: usize) -> *const f32 {
        self[row * k + block * BLOCK..].as_ptr()
    }
}

/// A row of activations at one block, as the VNNI kernel reads it (see `VnniRows`).
#[derive(Clone, Copy)]
pub struct VnniAt {
    pub values: *const i8,
    pub biased: *const u8,
    pub lane_scales: *const f32,
    pub q4_offsets: *const i32,
}

impl ActRows for VnniRows {
    type At = VnniAt;
    const BLOCK_BYTES: usize = 2 * BLOCK + 2 * 8 * size_of::<f32>();
    fn holds(&self, m: usize, k: usize) -> bool {
        let lanes = m * k / BLOCK * 8;
        self.rows.holds(m, k) && self.biased.len() >= m * k && self.lane_scales.len() >= lanes && self.q4_offsets.len() >= lanes
    }
    fn at(&self, row: usize, k: usize, block: usize) -> VnniAt {
        let (value, lane) = (row * k + block * BLOCK, (row * k / BLOCK + block) * 8);
        VnniAt {
            values: self.rows.values[value..].as_ptr(),
            biased: self.biased[value..].as_ptr(),
            lane_scales: self.lane_scales[lane..].as_ptr(),
            q4_offsets: self.q4_offsets[lane..].as_ptr(),
        }
    }
}

/// A SIMD register-tile kernel.
pub trait TileKernel: Sized {
    /// One output's running sum as the kernel holds it in a vector register.
    type Lanes: Copy + Default;
    /// The activations it multiplies.
    type Acts: ActRows + ?Sized;
    /// Blocks it takes per step: chunks of k are whole steps, so an output's sequence of
    /// operations does not depend on where a chunk ends.
    const BLOCKS_PER_STEP: usize = 1;

    /// Sweeps the rows from `row` with the widest tile that fits `rows_left`; returns the rows done.
    fn sweep_widest(ctx: &Context<Self>, rows_left: usize, row: usize, out: OutColumns) -> usize;

    /// Adds activation row j · weight row i over `blocks` blocks to `acc[j][i]`.
    ///
    /// # Safety
    /// Every weight pointer must start `blocks` whole blocks of `format` and every activation
    /// pointer `blocks × 32` values, and the CPU must have the kernel's instruction set.
    unsafe fn tile<const MR: usize, const NR: usize>(
        format: WeightFormat,
        tile: &Tile<MR, NR, ActAt<Self>>,
        blocks: usize,
        acc: &mut [[Self::Lanes; NR]; MR],
    );

    /// The finished output: the lanes of a running sum added up.
    ///
    /// # Safety
    /// The CPU must have the kernel's instruction set.
    unsafe fn total(lanes: &Self::Lanes) -> f32;
}

/// Where a kernel's activation rows begin at a block.
pub type ActAt<K> = <<K as TileKernel>::Acts as ActRows>::At;

/// `out` (`m × cols`) = `x` (`m × k`) · Wᵀ for the `cols` weight rows in `weights`.
///
/// # Safety
/// No other thread may write `out`'s values during the call.
pub unsafe fn run<K: TileKernel>(
    format: WeightFormat,
    weights: &[u8],
    row_bytes: usize,
    cols: usize,
    x: &K::Acts,
    m: usize,
    out: OutColumns,
) {
    let k = format.row_values(row_bytes);
    assert!(x.holds(m, k) && weights.len() >= cols * row_bytes && out.rows() >= m && out.cols() >= cols, "matmul operands out of range");
    let ctx = Context { format, weights, row_bytes, cols, x, k, kernel: PhantomData::<K> };
    let mut row = 0;
    while row < m {
        row += K::sweep_widest(&ctx, m - row, row, out);
    }
}

/// Blocks of the inner dimension per chunk for a tile of `rows` activation rows: the rows'
/// chunk must stay in L1 beside the weights streaming through; `blocks` in one chunk when it fits.
fn chunk_blocks(rows: usize, block_bytes: usize, blocks: usize) -> usize {
    const L1_SHARE: usize = 20 * 1024;
    let fits = (L1_SHARE / (rows * block_bytes)).max(1);
    // At least 1: with k = 0 there is one empty chunk, not a zero step.
    blocks.div_ceil(blocks.div_ceil(fits).max(1)).max(1)
}

pub struct Context<'a, K: TileKernel> {
    format: WeightFormat,
    weights: &'a [u8],
    row_bytes: usize,
    cols: usize,
    x: &'a K::Acts,
    k: usize,
    kernel: PhantomData<K>,
}

impl<K: TileKernel> Context<'_, K> {
    /// `MR` activation rows against every weight row, `NR` at a time, single rows at the edge;
    /// returns the rows done. Every tile's partial sums are kept across the chunks of k; when k
    /// fits in one chunk this is a single pass.
    pub fn sweep<const MR: usize, const NR: usize>(&self, row: usize, out: OutColumns) -> usize {
        let blocks = self.k / BLOCK;
        let full = self.cols / NR * NR;
        let chunk = chunk_blocks(MR, K::Acts::BLOCK_BYTES, blocks).next_multiple_of(K::BLOCKS_PER_STEP);
        if chunk >= blocks {
            // One pass: each tile's sums go from zero to the output without waiting in memory
            // (at batch 8, zeroing and rereading every tile's sums was ~3% of a decode step).
            self.single_pass::<MR, NR>(row, 0, full, out);
            self.single_pass::<MR, 1>(row, full, self.cols, out);
            return MR;
        }
        let mut tiles = vec![[[K::Lanes::default(); NR]; MR]; full / NR];
        let mut edges = vec![[[K::Lanes::default(); 1]; MR]; self.cols - full];
        for start in (0..blocks).step_by(chunk) {
            let range = start..(start + chunk).min(blocks);
            self.pass(row, 0, range.clone(), &mut tiles);
            self.pass(row, full, range, &mut edges);
        }
        self.store(row, 0, &tiles, out);
        self.store(row, full, &edges, out);
        MR
    }

    /// Tiles of width `W` over columns `first..last`, each over the whole of k and stored at once.
    fn single_pass<const MR: usize, const W: usize>(&self, row: usize, first: usize, last: usize, out: OutColumns) {
        for col in (first..last).step_by(W) {
            let mut acc = [[[K::Lanes::default(); W]; MR]];
            self.tile(row, col, 0..self.k / BLOCK, &mut acc[0]);
            self.store(row, col, &acc, out);
        }
    }

    /// One chunk of k for consecutive tiles of width `W` from column `first`.
    fn pass<const MR: usize, const W: usize>(
        &self,
        row: usize,
        first: usize,
        blocks: std::ops::Range<usize>,
        accs: &mut [[[K::Lanes; W]; MR]],
    ) {
        for (t, acc) in accs.iter_mut().enumerate() {
            self.tile(row, first + t * W, blocks.clone(), acc);
        }
    }

    fn tile<const MR: usize, const NR: usize>(
        &self,
        row: usize,
        col: usize,
        blocks: std::ops::Range<usize>,
        acc: &mut [[K::Lanes; NR]; MR],
    ) {
        let block_bytes = self.format.block_bytes();
        let tile_ptrs = Tile::<MR, NR, ActAt<K>> {
            weights: std::array::from_fn(|i| self.weights[(col + i) * self.row_bytes + blocks.start * block_bytes..].as_ptr()),
            acts: std::array::from_fn(|j| self.x.at(row + j, self.k, blocks.start)),
            row_stride: self.row_bytes,
        };
        // SAFETY: every weight pointer starts a block of a row of `row_bytes` (whole blocks) and
        // every activation pointer the same block of a row of `k` values (and its scales), inside the inputs
        // (asserted in `run`), with `blocks.len()` blocks left in each; the kernel was chosen for
        // this CPU by `matmul::kernel`.
        unsafe { K::tile(self.format, &tile_ptrs, blocks.len(), acc) };
    }

    /// The finished sums of consecutive tiles of width `W` from column `first`.
    fn store<const MR: usize, const W: usize>(&self, row: usize, first: usize, accs: &[[[K::Lanes; W]; MR]], out: OutColumns) {
        for (t, acc) in accs.iter().enumerate() {
            for (j, lanes) in acc.iter().enumerate() {
                for (i, lanes) in lanes.iter().enumerate() {
                    // SAFETY: the kernel runs on this CPU (as in `tile`), and `out` is this
                    // call's alone (`run`'s contract).
                    unsafe { out.set(row + j, first + t * W + i, K::total(lanes)) };
                }
            }
        }
    }
}
