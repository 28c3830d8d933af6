//! The semantics of the KV-cache attention operation, written as plainly as possible: the CPU
//! implementation of the op, and what the CUDA kernel is checked against. Deliberately shares no
//! code with `crate::attention`, so the two check each other.
//!
//! A layer slab is `(B, T, H_kv, D)` row-major. New token `i` belongs to row `rows[i]` at absolute
//! position `pos[i]`; it is written to `slab[rows[i], pos[i]]` and, as a query, sees the keys
//! `max(0, pos[i] - window) ..= pos[i]` of its own row.

#[derive(Debug, Clone, Copy)]
pub struct SlabDims {
    pub batch: usize,
    pub capacity: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
}

impl SlabDims {
    pub fn len(&self) -> usize {
        self.batch * self.capacity * self.n_kv_heads * self.head_dim
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn at(&self, row: usize, pos: usize, kv_head: usize) -> usize {
        ((row * self.capacity + pos) * self.n_kv_heads + kv_head) * self.head_dim
    }
}

/// Copies `new` `(N, H_kv, D)` into the slab at each token's (row, position).
pub fn append<T: Copy>(slab: &mut [T], new: &[T], rows: &[u32], pos: &[u32], dims: SlabDims) {
    let width = dims.n_kv_heads * dims.head_dim;
    for (i, (&row, &p)) in rows.iter().zip(pos).enumerate() {
        let at = dims.at(row as usize, p as usize, 0);
        slab[at..at + width].copy_from_slice(&new[i * width..(i + 1) * width]);
    }
}

/// Attention of `q` `(N, H, D)` over the slabs; returns `(N, H, D)`. Query head `h` reads KV head
/// `h / (H / H_kv)`. Sums run in f64 so the reference's own rounding is negligible next to any
/// kernel's.
#[allow(clippy::too_many_arguments)] // the kernel's own parameters, one for one, so tests call both alike
pub fn attend(
    k: &[f32],
    v: &[f32],
    q: &[f32],
    rows: &[u32],
    pos: &[u32],
    n_heads: usize,
    window: Option<usize>,
    dims: SlabDims,
) -> Vec<f32> {
    let d = dims.head_dim;
    let group = n_heads / dims.n_kv_heads;
    let scale = 1.0 / (d as f64).sqrt();
    let mut out = vec![0.0f32; rows.len() * n_heads * d];
    for (i, (&row, &p)) in rows.iter().zip(pos).enumerate() {
        let (row, p) = (row as usize, p as usize);
        let first = window.map_or(0, |w| p.saturating_sub(w));
        for head in 0..n_heads {
            let query = &q[(i * n_heads + head) * d..][..d];
            let kv_head = head / group;
            let scores: Vec<f64> = (first..=p)
                .map(|j| {
                    let key = &k[dims.at(row, j, kv_head)..][..d];
                    query.iter().zip(key).map(|(&a, &b)| a as f64 * b as f64).sum::<f64>() * scale
                })
                .collect();
            let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let total: f64 = weights.iter().sum();
            let o = &mut out[(i * n_heads + head) * d..][..d];
            for (e, slot) in o.iter_mut().enumerate() {
                let sum: f64 = (first..=p).zip(&weights).map(|(j, w)| w * v[dims.at(row, j, kv_head) + e] as f64).sum();
                *slot = (sum / total) as f32;
            }
        }
    }
    out
}
