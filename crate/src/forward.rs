//! What every model's forward pass shares, whatever its layers: the checks of a batch against
//! the cache, where each row's new tokens go (`PassPlan`), which positions get logits, the
//! cancellation flag, the counters, and the commit of row lengths once the whole pass succeeded
//! (so an error or a cancellation leaves the cache as it was).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::attention::TokenSlot;
use crate::config::ModelConfig;
use crate::error::{Error, ErrorKind, Result};
use crate::kv_cache::KvCache;

/// Which positions get logits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogitsFor {
    /// The last new token of each row that received tokens: what sampling needs.
    LastPerRow,
    /// Every new token (for scoring and equivalence tests).
    All,
}

pub struct ForwardOutput {
    /// `(rows.len(), vocab)` row-major.
    pub logits: Vec<f32>,
    /// The cache row each logits row belongs to.
    pub rows: Vec<u32>,
    pub vocab_size: usize,
}

impl ForwardOutput {
    pub fn empty(vocab_size: usize) -> Self {
        Self { logits: Vec::new(), rows: Vec::new(), vocab_size }
    }
}

/// Counters that let tests and benchmarks see what the model actually did.
#[derive(Debug, Default)]
pub struct ModelStats {
    pub forward_calls: AtomicU64,
    pub tokens_processed: AtomicU64,
    /// Wall time spent inside `forward`, in nanoseconds.
    pub forward_nanos: AtomicU64,
}

impl ModelStats {
    pub fn count_pass(&self, tokens: usize) {
        self.forward_calls.fetch_add(1, Ordering::Relaxed);
        self.tokens_processed.fetch_add(tokens as u64, Ordering::Relaxed);
    }
}

/// One row's new tokens in a pass: packed from `start` in the batch, `len` of them, after the
/// `before` positions the row already held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub row: usize,
    pub start: usize,
    pub len: usize,
    pub before: usize,
}

impl Span {
    /// The span's part of a packed per-token array `width` values wide per token.
    pub fn of(&self, width: usize) -> std::ops::Range<usize> {
        self.start * width..(self.start + self.len) * width
    }
}

/// Where a pass's tokens go: every row with new tokens (`spans`), and each token's row and
/// position in packed order (`slots`), with the cache grown to hold them.
pub struct PassPlan {
    pub spans: Vec<Span>,
    pub slots: Vec<TokenSlot>,
    /// The new tokens, packed row after row.
    pub ids: Vec<u32>,
}

impl PassPlan {
    /// Checks the batch against the cache and the model (one token list per cache row, ids in
    /// the vocabulary, no row past the context) and grows the cache to fit.
    pub fn new(batch: &[Vec<u32>], cache: &mut KvCache, config: &ModelConfig) -> Result<Self> {
        if batch.len() != cache.batch() {
            return Err(Error::invalid(format!("got token lists for {} rows but the cache has {} rows", batch.len(), cache.batch())));
        }
        if cache.n_layers() != config.n_layers {
            return Err(Error::invalid("this cache was created for a different model"));
        }
        let (mut spans, mut slots, mut needed) = (Vec::new(), Vec::new(), 0);
        for (row, tokens) in batch.iter().enumerate() {
            if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= config.vocab_size) {
                return Err(Error::invalid(format!(
                    "token id {bad} in row {row} is out of range: the vocabulary has {} tokens",
                    config.vocab_size
                )));
            }
            if tokens.is_empty() {
                continue;
            }
            let before = cache.seqlen(row);
            let after = before + tokens.len();
            if after > config.context_length {
                return Err(Error::new(
                    ErrorKind::ContextOverflow,
                    format!(
                        "row {row} would hold {after} tokens ({before} cached + {} new) but the model's context is {} tokens; shorten the prompt or lower maxTokens",
                        tokens.len(),
                        config.context_length
                    ),
                ));
            }
            spans.push(Span { row, start: slots.len(), len: tokens.len(), before });
            slots.extend((before..after).map(|pos| TokenSlot { row, pos }));
            needed = needed.max(after);
        }
        cache.ensure_capacity(needed)?;
        Ok(Self { spans, slots, ids: batch.iter().flatten().copied().collect() })
    }

    pub fn n_tokens(&self) -> usize {
        self.slots.len()
    }

    pub fn positions(&self) -> Vec<usize> {
        self.slots.iter().map(|s| s.pos).collect()
    }

    /// The packed indices that get logits, and the cache row of each.
    pub fn logit_positions(&self, which: LogitsFor) -> (Vec<u32>, Vec<u32>) {
        let picked: Vec<u32> = match which {
            LogitsFor::All => (0..self.n_tokens() as u32).collect(),
            LogitsFor::LastPerRow => self.spans.iter().map(|s| (s.start + s.len - 1) as u32).collect(),
        };
        let rows = picked.iter().map(|&i| self.slots[i as usize].row as u32).collect();
        (picked, rows)
    }

    /// Writes layer `layer`'s new K and V (packed per token, `kv_dim` wide) into their rows.
    pub fn write_kv(&self, cache: &mut KvCache, layer: usize, k: &[f32], v: &[f32], kv_dim: usize) {
        for span in &self.spans {
            cache.write(layer, span.row, span.before, &k[span.of(kv_dim)], &v[span.of(kv_dim)]);
        }
    }

    /// Advances every fed row past its new tokens: the last act of a pass that succeeded.
    pub fn commit(&self, cache: &mut KvCache) {
        for s in &self.spans {
            cache.set_seqlen(s.row, s.before + s.len);
        }
    }
}

/// An `Aborted` error once the caller has raised the flag (checked between layers).
pub fn check_cancel(cancel: Option<&AtomicBool>) -> Result<()> {
    match cancel {
        Some(c) if c.load(Ordering::Relaxed) => Err(Error::new(ErrorKind::Aborted, "the forward pass was cancelled")),
        _ => Ok(()),
    }
}
