//! The KV store: K and V each laid out `(n_layers, B, T, H_kv, D)`, the layout of the FA3
//! `flash_attn_with_kvcache` call nanochat uses, with an int32 length per row. Rows grow
//! independently; only the heads the model actually computes (H_kv, not the GQA-expanded H)
//! are stored, as f16 or f32 elements (`element.rs` says when each).
//!
//! Models that smear (nanochat mixes the previous token's embedding into each token) also need
//! what came before a row's new tokens. Such a model makes its caches `recording_tokens`, and
//! they keep each row's token ids; the pre-smear embedding of the last one is recomputed from its
//! id, so truncating a row keeps it exact (the token before the new end is still known) where a
//! stored embedding would be lost.

mod element;
mod planes;
mod shared_prefix;
mod view;

pub use element::{KvElement, KvType};
use planes::Planes;
pub use planes::RowKv;
pub use shared_prefix::SharedPrefix;
use shared_prefix::SharedPrefixes;
pub use view::KvCacheView;

use crate::config::ModelConfig;
use crate::error::{Error, ErrorKind, Result};

/// Capacity grows in whole steps of this many positions, as in nanochat's cache.
pub const GROWTH_STEP: usize = 1024;

/// Where K and V live.
enum Store {
    /// On the host, read by our CPU attention.
    Host(Planes),
    /// On a CUDA device, read by the kvattn kernel.
    #[cfg(feature = "cuda")]
    Device(crate::cuda::store::DeviceKv),
}

pub struct KvCache {
    n_layers: usize,
    batch: usize,
    capacity: usize,
    n_kv_heads: usize,
    head_dim: usize,
    max_len: usize,
    store: Store,
    seqlens: Vec<i32>,
    /// Per row, the ids of its cached positions, for a cache made `recording_tokens`. Trimmed
    /// with the row, copied with it, cleared when it is reset.
    history: Option<Vec<Vec<u32>>>,
    shared: SharedPrefixes,
}

impl KvCache {
    /// A cache for `batch` rows with room for exactly `capacity` positions each. Every page is
    /// resident from the start, so rounding up to the growth step here made 8 samples of
    /// 512 + 128 tokens hold 1024 positions a row (189 MB of K/V on SmolLM2 instead of 118).
    /// Growth beyond it goes in whole steps.
    pub fn new(cfg: &ModelConfig, batch: usize, capacity: usize, kv_type: KvType) -> Result<Self> {
        if batch == 0 || batch > 4096 {
            return Err(Error::invalid(format!("batch size must be in 1..=4096, got {batch}")));
        }
        let capacity = capacity.max(1);
        let elems = checked_elems(&[cfg.n_layers, batch, capacity, cfg.n_kv_heads, cfg.head_dim])?;
        Ok(Self {
            n_layers: cfg.n_layers,
            batch,
            capacity,
            n_kv_heads: cfg.n_kv_heads,
            head_dim: cfg.head_dim,
            max_len: cfg.context_length,
            store: Store::Host(Planes::zeroed(kv_type, elems)?),
            seqlens: vec![0; batch],
            history: None,
            shared: SharedPrefixes::new(batch),
        })
    }

    /// This cache, keeping each row's token ids from now on (the extension smearing models need).
    pub fn recording_tokens(mut self) -> Self {
        self.history = Some(vec![Vec::new(); self.batch]);
        self
    }

    /// A cache whose K/V live on a CUDA device, in `dtype`.
    #[cfg(feature = "cuda")]
    pub fn on_device(
        cfg: &ModelConfig,
        batch: usize,
        capacity: usize,
        dtype: candle_core::DType,
        device: &candle_core::Device,
    ) -> Result<Self> {
        // Zero layers sizes the host buffers to nothing before the device store replaces them.
        let mut cache = Self::new(&ModelConfig { n_layers: 0, ..cfg.clone() }, batch, capacity, KvType::F32)?;
        cache.n_layers = cfg.n_layers;
        checked_elems(&[cfg.n_layers, batch, cache.capacity, cfg.n_kv_heads, cfg.head_dim])?;
        let dims = (cfg.n_layers, batch, cache.capacity, cfg.n_kv_heads, cfg.head_dim);
        cache.store = Store::Device(crate::cuda::store::DeviceKv::zeros(dims, dtype, device)?);
        Ok(cache)
    }

    /// The GPU store, for a cache made by `on_device`.
    #[cfg(feature = "cuda")]
    pub fn device_store(&self) -> Option<&crate::cuda::store::DeviceKv> {
        match &self.store {
            Store::Device(d) => Some(d),
            Store::Host(_) => None,
        }
    }

    /// Whether K/V live off the host (models check they were given a cache of their kind).
    pub fn is_on_device(&self) -> bool {
        !matches!(self.store, Store::Host(_))
    }

    pub fn batch(&self) -> usize {
        self.batch
    }
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    pub fn n_layers(&self) -> usize {
        self.n_layers
    }
    pub fn seqlens(&self) -> &[i32] {
        &self.seqlens
    }
    pub fn seqlen(&self, row: usize) -> usize {
        self.seqlens[row] as usize
    }
    /// The model's context window: no row may hold more positions.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Bytes held by K and V: 2·L·B·T·H_kv·D·sizeof(element).
    pub fn size_bytes(&self) -> usize {
        match &self.store {
            Store::Host(planes) => planes.size_bytes(),
            #[cfg(feature = "cuda")]
            Store::Device(d) => d.size_bytes(),
        }
    }

    /// The element type of a host store; a device store, which keeps its model's dtype, says f32.
    pub fn kv_type(&self) -> KvType {
        match &self.store {
            Store::Host(planes) => planes.kv_type(),
            #[cfg(feature = "cuda")]
            Store::Device(_) => KvType::F32,
        }
    }

    /// Forgets every row's contents; memory stays allocated for reuse.
    pub fn reset(&mut self) {
        self.seqlens.iter_mut().for_each(|s| *s = 0);
        self.history.iter_mut().flatten().for_each(Vec::clear);
        self.shared.clear();
    }

    pub fn reset_row(&mut self, row: usize) -> Result<()> {
        self.truncate_row(row, 0)
    }

    /// Sets a row's length back (never forward): drops positions `len..` from that row.
    pub fn truncate_row(&mut self, row: usize, len: usize) -> Result<()> {
        self.check_row(row)?;
        if len > self.seqlen(row) {
            return Err(Error::invalid(format!("cannot truncate row {row} to {len}: it holds only {} positions", self.seqlen(row))));
        }
        self.seqlens[row] = len as i32;
        if let Some(history) = &mut self.history {
            history[row].truncate(len);
        }
        self.shared.changed(row, len);
        Ok(())
    }

    /// Copies row `src` (its K/V up to its length, and the length) into row `dst` in every layer.
    /// This is how one prefill fans out into many samples.
    pub fn copy_row(&mut self, src: usize, dst: usize) -> Result<()> {
        self.check_row(src)?;
        self.check_row(dst)?;
        if src == dst {
            return Ok(());
        }
        self.shared.copied(src, dst, self.seqlen(src));
        let len = self.seqlen(src) * self.n_kv_heads * self.head_dim;
        let spans: Vec<(usize, usize)> = (0..self.n_layers).map(|layer| (self.offset(layer, src, 0), self.offset(layer, dst, 0))).collect();
        match &mut self.store {
            Store::Host(planes) => spans.into_iter().for_each(|(from, to)| planes.copy_within(from, len, to)),
            #[cfg(feature = "cuda")]
            Store::Device(d) => d.copy_row(src, dst)?,
        }
        self.seqlens[dst] = self.seqlens[src];
        if let Some(history) = &mut self.history {
            history[dst] = history[src].clone();
        }
        Ok(())
    }

    /// Makes room for `needed` positions in every row, growing T in whole steps and keeping what
    /// each row already holds.
    pub fn ensure_capacity(&mut self, needed: usize) -> Result<()> {
        if needed > self.max_len {
            return Err(Error::new(
                ErrorKind::ContextOverflow,
                format!("{needed} positions exceed the model's context of {} tokens", self.max_len),
            ));
        }
        if needed <= self.capacity {
            return Ok(());
        }
        let capacity = round_capacity(needed, self.max_len);
        let elems = checked_elems(&[self.n_layers, self.batch, capacity, self.n_kv_heads, self.head_dim])?;
        self.store = match &self.store {
            Store::Host(planes) => Store::Host(planes.regrown(elems, &self.moves_to(capacity))?),
            #[cfg(feature = "cuda")]
            Store::Device(d) => Store::Device(d.grown(capacity)?),
        };
        self.capacity = capacity;
        Ok(())
    }

    /// Where each (layer, row)'s valid positions go in a host store of `capacity` positions:
    /// (from, length, to) in elements.
    fn moves_to(&self, capacity: usize) -> Vec<(usize, usize, usize)> {
        let row_stride = self.n_kv_heads * self.head_dim;
        (0..self.n_layers)
            .flat_map(|layer| (0..self.batch).map(move |row| (layer, row)))
            .map(|(layer, row)| {
                (self.offset(layer, row, 0), self.seqlen(row) * row_stride, (layer * self.batch + row) * capacity * row_stride)
            })
            .collect()
    }

    /// Writes K/V for `n` consecutive positions of one row, starting at `pos`, rounded to the
    /// element type. The row length is not advanced here: the model commits lengths only once
    /// every layer has succeeded.
    pub fn write(&mut self, layer: usize, row: usize, pos: usize, k: &[f32], v: &[f32]) {
        self.shared.changed(row, pos);
        let at = self.offset(layer, row, pos);
        self.host_mut().write(at, k, v);
    }

    /// K and V of one row in one layer, `(T, H_kv, D)` flattened, the first `len` positions valid.
    pub fn row(&self, layer: usize, row: usize) -> RowKv<'_> {
        let at = self.offset(layer, row, 0);
        self.host().span(at, self.capacity * self.n_kv_heads * self.head_dim)
    }

    pub fn set_seqlen(&mut self, row: usize, len: usize) {
        self.seqlens[row] = len as i32;
    }

    /// The positions this row holds in common with another row (from `copy_row`), if any.
    pub fn shared_prefix(&self, row: usize) -> Option<SharedPrefix> {
        self.shared.get(row)
    }

    /// The recorded ids of a row's cached positions, for a cache made `recording_tokens`.
    pub fn history(&self, row: usize) -> Option<&[u32]> {
        self.history.as_ref().map(|h| h[row].as_slice())
    }

    /// Appends the ids of positions just committed to a row, where the cache records them.
    pub(crate) fn record(&mut self, row: usize, tokens: &[u32]) {
        if let Some(history) = &mut self.history {
            history[row].extend_from_slice(tokens);
        }
    }

    // The host planes, for the CPU models' reads and writes. `LanguageModel`'s forward refuses a
    // cache of the other kind before a pass, so a device store here is a bug.
    fn host(&self) -> &Planes {
        match &self.store {
            Store::Host(planes) => planes,
            #[cfg(feature = "cuda")]
            Store::Device(_) => panic!("a CPU model was handed a GPU cache"),
        }
    }

    fn host_mut(&mut self) -> &mut Planes {
        match &mut self.store {
            Store::Host(planes) => planes,
            #[cfg(feature = "cuda")]
            Store::Device(_) => panic!("a CPU model was handed a GPU cache"),
        }
    }

    fn offset(&self, layer: usize, row: usize, pos: usize) -> usize {
        (((layer * self.batch + row) * self.capacity) + pos) * self.n_kv_heads * self.head_dim
    }

    fn check_row(&self, row: usize) -> Result<()> {
        if row >= self.batch {
            return Err(Error::invalid(format!("row {row} is out of range for a cache of {} rows", self.batch)));
        }
        Ok(())
    }
}

fn round_capacity(needed: usize, max_len: usize) -> usize {
    needed.div_ceil(GROWTH_STEP).saturating_mul(GROWTH_STEP).min(max_len.max(needed))
}

fn checked_elems(dims: &[usize]) -> Result<usize> {
    let elems = dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    match elems {
        Some(n) if n <= isize::MAX as usize / 8 => Ok(n),
        _ => Err(Error::invalid(format!("a KV cache of shape {dims:?} is too large to allocate"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_config;

    fn config(n_layers: usize, n_kv_heads: usize, head_dim: usize) -> ModelConfig {
        test_config(n_layers, n_kv_heads * 2, n_kv_heads, head_dim)
    }

    /// A value that depends on where it was written, so a misplaced copy shows up: an integer
    /// below 2048, which f16 holds exactly.
    fn stamp(layer: usize, row: usize, pos: usize, i: usize) -> f32 {
        ((layer * 1_000_003 + row * 10_007 + pos * 101 + i * 7) % 2048) as f32
    }

    fn fill(cache: &mut KvCache, row: usize, from: usize, to: usize) {
        let width = cache.n_kv_heads * cache.head_dim;
        for layer in 0..cache.n_layers {
            for pos in from..to {
                let k: Vec<f32> = (0..width).map(|i| stamp(layer, row, pos, i)).collect();
                let v: Vec<f32> = k.iter().map(|x| -x).collect();
                cache.write(layer, row, pos, &k, &v);
            }
        }
        cache.set_seqlen(row, to);
    }

    fn check(cache: &KvCache, row: usize, as_row: usize) {
        let width = cache.n_kv_heads * cache.head_dim;
        for layer in 0..cache.n_layers {
            let (k, v) = cache.row(layer, row).widened();
            for pos in 0..cache.seqlen(row) {
                for i in 0..width {
                    assert_eq!(k[pos * width + i], stamp(layer, as_row, pos, i), "k layer {layer} row {row} pos {pos}");
                    assert_eq!(v[pos * width + i], -stamp(layer, as_row, pos, i), "v layer {layer} row {row} pos {pos}");
                }
            }
        }
    }

    const BOTH: [KvType; 2] = [KvType::F16, KvType::F32];

    #[test]
    fn size_matches_formula() {
        let cfg = config(3, 2, 4);
        for (kv_type, bytes) in BOTH.into_iter().zip([2, 4]) {
            let cache = KvCache::new(&cfg, 5, 100, kv_type).unwrap();
            assert_eq!(cache.capacity(), 100, "a new cache holds what was asked");
            assert_eq!(cache.size_bytes(), 2 * 3 * 5 * 100 * 2 * 4 * bytes);
            assert_eq!(cache.kv_type(), kv_type);
        }
    }

    #[test]
    fn growth_keeps_every_row_intact() {
        let cfg = config(2, 2, 4);
        for kv_type in BOTH {
            let mut cache = KvCache::new(&cfg, 3, 1000, kv_type).unwrap();
            fill(&mut cache, 0, 0, 1000);
            fill(&mut cache, 2, 0, 17);
            let bytes = cache.size_bytes();
            cache.ensure_capacity(1500).unwrap();
            assert_eq!(cache.capacity(), 2048, "growth goes in whole steps");
            assert_eq!(cache.size_bytes() * 1000, bytes * 2048);
            fill(&mut cache, 1, 0, 1500);
            check(&cache, 0, 0);
            check(&cache, 1, 1);
            check(&cache, 2, 2);
            assert_eq!(cache.seqlens(), &[1000, 1500, 17]);
        }
    }

    #[test]
    fn copy_row_replicates_contents_and_length() {
        let cfg = config(2, 1, 8);
        for kv_type in BOTH {
            let mut cache = KvCache::new(&cfg, 4, 16, kv_type).unwrap();
            fill(&mut cache, 0, 0, 9);
            for dst in 1..4 {
                cache.copy_row(0, dst).unwrap();
                check(&cache, dst, 0);
            }
            assert_eq!(cache.seqlens(), &[9, 9, 9, 9]);
            assert!(cache.copy_row(0, 4).is_err());
        }
    }

    #[test]
    fn history_follows_copy_truncate_and_reset() {
        let cfg = config(1, 1, 2);
        let mut plain = KvCache::new(&cfg, 3, 16, KvType::F16).unwrap();
        plain.record(0, &[7]);
        assert_eq!(plain.history(0), None, "only a cache made recording_tokens keeps ids");
        let mut cache = plain.recording_tokens();
        fill(&mut cache, 0, 0, 4);
        cache.record(0, &[7, 8, 9, 10]);
        cache.copy_row(0, 1).unwrap();
        assert_eq!(cache.history(1), Some(&[7, 8, 9, 10][..]));
        cache.truncate_row(1, 2).unwrap();
        assert_eq!(cache.history(1), Some(&[7, 8][..]));
        assert_eq!(cache.history(0), Some(&[7, 8, 9, 10][..]));
        cache.reset_row(0).unwrap();
        assert_eq!(cache.history(0), Some(&[][..]));
        cache.reset();
        assert_eq!(cache.history(1), Some(&[][..]));
    }

    #[test]
    fn overflowing_the_context_is_an_error() {
        let cfg = config(1, 1, 2);
        let mut cache = KvCache::new(&cfg, 1, 1, KvType::F16).unwrap();
        let err = cache.ensure_capacity(8193).unwrap_err();
        assert_eq!(err.kind, ErrorKind::ContextOverflow);
        assert!(KvCache::new(&cfg, 0, 1, KvType::F16).is_err());
    }
}
