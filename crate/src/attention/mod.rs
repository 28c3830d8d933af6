//! Causal attention of a packed batch of new tokens over the KV store.
//!
//! Tokens of all rows are packed one after another (no padding). Token `i` of a row that held
//! `p` positions before this pass sits at position `p + i` and sees cache positions `0..=p+i`
//! of its own row (or the last `window + 1` of them): the rectangular causal mask, which makes
//! prefill (many tokens), chunked prefill (many tokens after a prefix) and decode (one token)
//! the same code path.
//!
//! Work is cut into items (a block of one row's tokens × one KV head × a range of keys). Each
//! item returns unnormalised partial softmaxes, and partials over different key ranges of the
//! same queries are merged at the end (flash-decoding): at decode there are only a few heads per
//! row, so long contexts are split across threads by key range instead.
//!
//! A query's output does not depend on what else is in its pass: keys are cut into splits at
//! fixed positions (multiples of `SPLIT`), each split's partial is computed by the same kernels
//! whichever item holds it, with keys at the same places in their rows and lanes, and the
//! partials are merged in position order. So a prefill, a chunked prefill, a decode step, a
//! batch of other rows or a shared prompt all give a query the same bits, as the 8-bit matmuls
//! do (`matmul/x86_q8_panels.rs`): with `Activations::Q8` a forward pass is then the same
//! function of a row's tokens however it is batched.

mod kernels;

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use crate::kv_cache::{KvCache, KvElement, RowKv};

/// Where each packed token lives: its row and its absolute position in that row.
#[derive(Debug, Clone, Copy)]
pub struct TokenSlot {
    pub row: usize,
    pub pos: usize,
}

pub struct AttentionShape {
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    /// Sliding window: a query at position `p` sees keys `p - window ..= p`. `None` is full
    /// causal attention.
    pub window: Option<usize>,
}

impl AttentionShape {
    fn visible(&self, pos: usize) -> Range<usize> {
        self.window.map_or(0, |w| pos.saturating_sub(w))..pos + 1
    }
}

/// Consecutive tokens of one row attended together, so each cached key is loaded once for all
/// of them (and for every query head sharing its KV head) rather than once per token.
const QUERY_BLOCK: usize = 16;
/// Keys scored and summed per pass over the queries: 64 keys of a 128-wide head are 32 KiB, so
/// a chunk stays in L1 while every query of the item reads it.
const KEY_CHUNK: usize = 64;
/// Keys are cut at multiples of this many positions, for every query in every pass: the unit
/// of the merge, and of splitting a long context across threads (shorter pieces cost more to
/// merge than they gain).
const SPLIT: usize = 256;
/// How finely a pass's work is cut per thread: enough that stealing evens out the pieces, few
/// enough that merging their partials stays cheap.
const PIECES_PER_THREAD: usize = 4;

/// A unit of parallel work: some packed tokens against one KV head of one cache row, over a
/// range of key positions. Usually the tokens are a run of that row's own; for rows that share
/// a prefix they are every sharing row's tokens, against the prefix in its source row.
struct Item {
    tokens: Vec<usize>,
    row: usize,
    kv_head: usize,
    keys: Range<usize>,
}

impl Item {
    /// Roughly its work: tokens × keys (a causal block sees fewer, but blocks are short).
    fn cost(&self) -> usize {
        self.tokens.len() * self.keys.len()
    }
}

/// Per query of an item, over one split: the max score, the sum of `exp(score - max)`, and the
/// values weighted by those exponentials (not yet divided by the sum).
struct Partial {
    max: Vec<f32>,
    sum: Vec<f32>,
    out: Vec<f32>,
}

/// Rows of this pass whose caches begin with `len` positions of row `source`, `len` a multiple
/// of `SPLIT`: at decode after one prompt fanned out into samples, each key of the prompt is
/// then loaded once for all of them instead of once per row.
struct SharedGroup {
    source: usize,
    len: usize,
    tokens: Vec<usize>,
}

/// `q` is `(N, H, D)` with RoPE applied; the cache already holds this pass's K/V. Returns
/// `(N, H, D)`. Attention over a long prompt is the longest stretch of a layer, so remaining
/// items are skipped once `cancel` is set; the caller then discards the output.
pub fn attend(
    cache: &KvCache,
    layer: usize,
    slots: &[TokenSlot],
    q: &[f32],
    shape: &AttentionShape,
    cancel: Option<&AtomicBool>,
) -> Vec<f32> {
    attend_split_for(rayon::current_num_threads(), cache, layer, slots, q, shape, cancel)
}

/// `attend`, planned as if for `threads` threads (tests force key-range splits with it).
fn attend_split_for(
    threads: usize,
    cache: &KvCache,
    layer: usize,
    slots: &[TokenSlot],
    q: &[f32],
    shape: &AttentionShape,
    cancel: Option<&AtomicBool>,
) -> Vec<f32> {
    let groups = shared_groups(cache, slots, shape);
    let items = plan_items(slots, shape, threads, &groups);
    // Costliest first, one item per task: rayon's halving would otherwise hand one thread a
    // contiguous run holding every long item while the other finishes the short ones and waits.
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(items[i].cost()));
    let computed: Vec<Option<Vec<Partial>>> = order
        .par_iter()
        .with_max_len(1)
        .map(|&i| {
            if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                return None;
            }
            Some(attend_item(cache, layer, slots, q, shape, &items[i]))
        })
        .collect();
    let mut partials: Vec<Option<Vec<Partial>>> = items.iter().map(|_| None).collect();
    for (&i, done) in order.iter().zip(computed) {
        partials[i] = done;
    }
    let (h, d) = (shape.n_heads, shape.head_dim);
    let group = h / shape.n_kv_heads;
    let mut merged = Merged::new(slots.len() * h, d);
    // Items come in key order for each query (shared prefixes first), and so do their splits.
    for (item, partials) in items.iter().zip(&partials) {
        for partial in partials.iter().flatten() {
            for qi in 0..partial.max.len() {
                // Query qi is head `qi % group` of the item's KV head, for its token `qi / group`.
                let at = item.tokens[qi / group] * h + item.kv_head * group + qi % group;
                merged.add(at, partial.max[qi], partial.sum[qi], &partial.out[qi * d..(qi + 1) * d]);
            }
        }
    }
    merged.finish()
}

/// The groups of rows in this pass that share a prefix long enough to read once. A source row
/// that is itself in the pass joins its group: its own prefix is the shared one.
fn shared_groups(cache: &KvCache, slots: &[TokenSlot], shape: &AttentionShape) -> Vec<SharedGroup> {
    if shape.window.is_some() {
        return Vec::new();
    }
    // Rows not sharing start groups of their own with no length; those, and groups of a single
    // row, are dropped at the end.
    let mut groups: Vec<(SharedGroup, usize)> = Vec::new();
    let mut by_source = HashMap::new();
    let mut first = 0;
    while first < slots.len() {
        let row = slots[first].row;
        let end = first + slots[first..].iter().take_while(|s| s.row == row).count();
        let share = cache.shared_prefix(row).filter(|s| s.len >= SPLIT);
        let source = share.map_or(row, |s| s.source);
        let at = *by_source.entry(source).or_insert_with(|| {
            groups.push((SharedGroup { source, len: usize::MAX, tokens: Vec::new() }, 0));
            groups.len() - 1
        });
        let (group, rows) = &mut groups[at];
        group.len = group.len.min(share.map_or(usize::MAX, |s| s.len));
        group.tokens.extend(first..end);
        *rows += 1;
        first = end;
    }
    // Whole splits only: a split read half from the source and half from the row would be
    // two partials where a row alone has one.
    groups
        .into_iter()
        .filter(|(g, rows)| *rows > 1 && g.len != usize::MAX)
        .map(|(g, _)| SharedGroup { len: g.len / SPLIT * SPLIT, ..g })
        .collect()
}

/// Query blocks × KV heads (and shared prefixes × KV heads). A block costlier than a fair share
/// of the pass (its total over `PIECES_PER_THREAD` per thread) is cut at `SPLIT` boundaries into
/// pieces of about that share: at decode the few long items (a lone row's context, a prefix
/// shared by many rows) are most of the work, and whole they leave threads idle.
fn plan_items(slots: &[TokenSlot], shape: &AttentionShape, threads: usize, groups: &[SharedGroup]) -> Vec<Item> {
    // Each token's own keys start past the prefix its group reads for it.
    let mut shared_len = vec![0; slots.len()];
    let mut blocks: Vec<(Vec<usize>, usize, Range<usize>)> = Vec::new();
    for g in groups {
        g.tokens.iter().for_each(|&t| shared_len[t] = g.len);
        for tokens in g.tokens.chunks(QUERY_BLOCK) {
            blocks.push((tokens.to_vec(), g.source, 0..g.len));
        }
    }
    let mut first = 0;
    while first < slots.len() {
        let row = slots[first].row;
        let len = slots[first..].iter().take(QUERY_BLOCK).take_while(|s| s.row == row).count();
        let start = shape.visible(slots[first].pos).start.max(shared_len[first]);
        blocks.push(((first..first + len).collect(), row, start..slots[first + len - 1].pos + 1));
        first += len;
    }
    let total: usize = blocks.iter().map(|(tokens, _, keys)| tokens.len() * keys.len()).sum();
    let share = (total * shape.n_kv_heads).div_ceil(PIECES_PER_THREAD * threads).max(1);
    let mut items = Vec::new();
    for (tokens, row, keys) in blocks.into_iter().filter(|(_, _, keys)| !keys.is_empty()) {
        let splits = splits_of(&keys);
        let pieces = (tokens.len() * keys.len()).div_ceil(share).clamp(1, splits.len());
        let per_piece = splits.len().div_ceil(pieces);
        for kv_head in 0..shape.n_kv_heads {
            for piece in splits.chunks(per_piece) {
                items.push(Item { tokens: tokens.clone(), row, kv_head, keys: piece[0].start..piece[piece.len() - 1].end });
            }
        }
    }
    items
}

/// `keys` cut at multiples of `SPLIT`.
fn splits_of(keys: &Range<usize>) -> Vec<Range<usize>> {
    (keys.start / SPLIT..keys.end.div_ceil(SPLIT)).map(|s| (s * SPLIT).max(keys.start)..((s + 1) * SPLIT).min(keys.end)).collect()
}

/// The item's queries against its key range: one `Partial` over `len × group` queries per split.
fn attend_item(cache: &KvCache, layer: usize, slots: &[TokenSlot], q: &[f32], shape: &AttentionShape, item: &Item) -> Vec<Partial> {
    let (h, d, kvh) = (shape.n_heads, shape.head_dim, shape.n_kv_heads);
    let group = h / kvh;
    // Query qi: its vector and the keys it sees.
    let queries: Vec<(&[f32], Range<usize>)> = (0..item.tokens.len() * group)
        .map(|qi| {
            let token = item.tokens[qi / group];
            let at = (token * h + item.kv_head * group + qi % group) * d;
            (&q[at..at + d], shape.visible(slots[token].pos))
        })
        .collect();
    match cache.row(layer, item.row) {
        RowKv::F16(k, v) => attend_splits(&Heads::of(k, v, item.kv_head, shape), &queries, &item.keys),
        RowKv::F32(k, v) => attend_splits(&Heads::of(k, v, item.kv_head, shape), &queries, &item.keys),
    }
}

fn attend_splits<E: KvElement>(heads: &Heads<E>, queries: &[(&[f32], Range<usize>)], keys: &Range<usize>) -> Vec<Partial> {
    splits_of(keys)
        .into_iter()
        .map(|keys| {
            let seen: Vec<(&[f32], Range<usize>)> = queries.iter().map(|(query, seen)| (*query, overlap(seen, &keys))).collect();
            attend_split(heads, &seen, keys)
        })
        .collect()
}

/// The positions in both ranges (empty, never reversed, where they do not meet).
fn overlap(a: &Range<usize>, b: &Range<usize>) -> Range<usize> {
    let start = a.start.max(b.start);
    start..a.end.min(b.end).max(start)
}

/// One KV head of a cache row: position j's key at `keys[j * stride..][..d]`, likewise its value.
struct Heads<'a, E> {
    keys: &'a [E],
    values: &'a [E],
    stride: usize,
    d: usize,
    scale: f32,
}

impl<'a, E> Heads<'a, E> {
    fn of(k_row: &'a [E], v_row: &'a [E], kv_head: usize, shape: &AttentionShape) -> Self {
        let (d, stride) = (shape.head_dim, shape.n_kv_heads * shape.head_dim);
        Self { keys: &k_row[kv_head * d..], values: &v_row[kv_head * d..], stride, d, scale: 1.0 / (d as f32).sqrt() }
    }
}

/// The queries against the keys of one split. Scores sit in rows that start at the split's
/// first position, padded to whole vectors, and are visited in `KEY_CHUNK`s from there, so a
/// key's score, exponential and weight take the same lanes and order in every pass.
fn attend_split<E: KvElement>(heads: &Heads<E>, queries: &[(&[f32], Range<usize>)], keys: Range<usize>) -> Partial {
    let (d, stride) = (heads.d, heads.stride);
    let base = keys.start / SPLIT * SPLIT;
    let span = (keys.end - base).next_multiple_of(8);
    let chunks = |seen: &Range<usize>, lo: usize| overlap(seen, &(lo..lo + KEY_CHUNK));
    let pairs = pair_up(queries);

    // Scores, one row of `span` per query, -inf where a query sees no key. Each chunk's keys
    // are asked for a chunk ahead (the values after the last), since the hardware prefetcher
    // does not follow them: one head's vectors of consecutive positions lie a whole position
    // apart (2 KiB for 8 KV heads of 64), two to a page. A 1B layer's attention over 16
    // layers' caches, batch 1 at 577 keys, took 141 us without and 85 with.
    let mut scores = vec![f32::NEG_INFINITY; queries.len() * span];
    let chunk = |lo: usize| overlap(&keys, &(lo..lo + KEY_CHUNK));
    kernels::prefetch(heads.keys, stride, d, chunk(base));
    for lo in (base..keys.end).step_by(KEY_CHUNK) {
        let (ahead, next) = if lo + KEY_CHUNK < keys.end { (heads.keys, lo + KEY_CHUNK) } else { (heads.values, base) };
        kernels::prefetch(ahead, stride, d, chunk(next));
        for &(first, paired) in &pairs {
            let (query, seen) = &queries[first];
            let at = chunks(seen, lo);
            if at.is_empty() {
                continue;
            }
            let keys_from = &heads.keys[at.start * stride..];
            let (rows, at) = (&mut scores[first * span..], at.start - base..at.end - base);
            if paired {
                let (row0, row1) = rows.split_at_mut(span);
                kernels::scores_pair([query, queries[first + 1].0], keys_from, stride, heads.scale, [&mut row0[at.clone()], &mut row1[at]]);
            } else {
                kernels::scores(query, keys_from, stride, heads.scale, &mut rows[at]);
            }
        }
    }
    let (mut max, mut sum) = (Vec::with_capacity(queries.len()), Vec::with_capacity(queries.len()));
    for row in scores.chunks_exact_mut(span) {
        let (m, s) = kernels::exp_shifted(row);
        max.push(m);
        sum.push(s);
    }
    // Weighted values, again a chunk of keys at a time for every query.
    let mut out = vec![0.0f32; queries.len() * d];
    for lo in (base..keys.end).step_by(KEY_CHUNK) {
        kernels::prefetch(heads.values, stride, d, chunk(lo + KEY_CHUNK));
        for &(first, paired) in &pairs {
            let at = chunks(&queries[first].1, lo);
            if at.is_empty() {
                continue;
            }
            let values = &heads.values[at.start * stride..];
            let (row, at) = (&scores[first * span..], at.start - base..at.end - base);
            let o = &mut out[first * d..];
            if paired {
                let (o0, o1) = o.split_at_mut(d);
                kernels::accumulate_pair([&row[at.clone()], &row[span..][at]], values, stride, [o0, &mut o1[..d]]);
            } else {
                kernels::accumulate(&row[at], values, stride, &mut o[..d]);
            }
        }
    }
    Partial { max, sum, out }
}

/// The item's queries as `(first, paired)`: neighbours that see the same keys (a token's query
/// heads; every sample's at decode over a shared prompt) go through the paired kernels, which
/// load each key and value once for both; the rest one by one.
fn pair_up(queries: &[(&[f32], Range<usize>)]) -> Vec<(usize, bool)> {
    let mut pairs = Vec::with_capacity(queries.len().div_ceil(2));
    let mut first = 0;
    while first < queries.len() {
        let paired = queries.get(first + 1).is_some_and(|next| next.1 == queries[first].1);
        pairs.push((first, paired));
        first += if paired { 2 } else { 1 };
    }
    pairs
}

/// Each query's softmax-weighted values, combined from the partials over its key ranges as they
/// come: the running sums are rescaled whenever a partial brings a larger max.
struct Merged {
    max: Vec<f32>,
    sum: Vec<f32>,
    out: Vec<f32>,
    d: usize,
}

impl Merged {
    fn new(queries: usize, d: usize) -> Self {
        Self { max: vec![f32::NEG_INFINITY; queries], sum: vec![0.0; queries], out: vec![0.0; queries * d], d }
    }

    fn add(&mut self, query: usize, max: f32, sum: f32, out: &[f32]) {
        if max == f32::NEG_INFINITY {
            return;
        }
        let o = &mut self.out[query * self.d..(query + 1) * self.d];
        if self.max[query] == f32::NEG_INFINITY {
            o.copy_from_slice(out);
            (self.max[query], self.sum[query]) = (max, sum);
            return;
        }
        let top = self.max[query].max(max);
        let (old, new) = ((self.max[query] - top).exp(), (max - top).exp());
        for (m, &x) in o.iter_mut().zip(out) {
            *m = *m * old + x * new;
        }
        (self.max[query], self.sum[query]) = (top, self.sum[query] * old + sum * new);
    }

    /// Divides by the sums; a query that saw no key stays zero.
    fn finish(mut self) -> Vec<f32> {
        for (o, &total) in self.out.chunks_exact_mut(self.d).zip(&self.sum) {
            if total > 0.0 {
                o.iter_mut().for_each(|m| *m /= total);
            }
        }
        self.out
    }
}

#[cfg(test)]
mod tests;
