//! Format-blind byte mutations, and the GGUF mutator that mixes them with aimed field edits.

use super::gguf_layout::{read_uint, write_uint, Field, GgufLayout, FIELD_KINDS};
use crate::common::Rng;

/// A replacement for a numeric field: boundary values, near misses of the original, and values
/// that break size arithmetic.
pub fn extreme_value(rng: &mut Rng, orig: u64, file_len: usize) -> u64 {
    let specials = [
        0u64,
        1,
        2,
        3,
        4,
        13,
        31,
        32,
        33,
        255,
        0xFFFF,
        0x7FFF_FFFF,
        0xFFFF_FFFF,
        1 << 32,
        1 << 40,
        1 << 58,
        1 << 62,
        1 << 63,
        u64::MAX,
        u64::MAX - 1,
        file_len as u64,
        file_len as u64 - 1,
        file_len as u64 + 1,
    ];
    match rng.below(6) {
        0 | 1 => specials[rng.below(specials.len())],
        2 => orig.wrapping_add(1 + rng.below(4) as u64),
        3 => orig.wrapping_sub(1 + rng.below(4) as u64),
        // Values whose product with the other dims wraps around to the real size.
        4 => orig.wrapping_add(1u64 << (56 + rng.below(8))),
        _ => rng.next_u64() >> rng.below(64),
    }
}

/// Position biased toward the first `hot` bytes (header, metadata, tensor infos).
pub fn biased_pos(rng: &mut Rng, len: usize, hot: usize) -> usize {
    if len == 0 {
        return 0;
    }
    if rng.chance(0.8) {
        rng.below(hot.clamp(1, len))
    } else {
        rng.below(len)
    }
}

/// Applies one random byte-level edit, mostly within the first `hot` bytes, and names it.
pub fn mutate_bytes(rng: &mut Rng, b: &mut Vec<u8>, hot: usize) -> &'static str {
    match rng.below(7) {
        0 | 1 => {
            for _ in 0..1 + rng.below(8) {
                if b.is_empty() {
                    break;
                }
                let at = biased_pos(rng, b.len(), hot);
                b[at] ^= 1 + rng.below(255) as u8;
            }
            "flip"
        }
        2 => {
            let at = if rng.chance(0.7) { rng.below(hot.clamp(1, b.len().max(1))) } else { rng.below(b.len().max(1)) };
            b.truncate(at);
            "truncate"
        }
        3 => {
            // Duplicate a region: insert a copy of it somewhere else.
            if b.is_empty() {
                return "noop";
            }
            let from = biased_pos(rng, b.len(), hot);
            let len = (1 + rng.below(256)).min(b.len() - from);
            let chunk = b[from..from + len].to_vec();
            let to = biased_pos(rng, b.len(), hot);
            b.splice(to..to, chunk);
            "duplicate"
        }
        4 => {
            if b.is_empty() {
                return "noop";
            }
            let from = biased_pos(rng, b.len(), hot);
            let len = (1 + rng.below(64)).min(b.len() - from);
            b.drain(from..from + len);
            "delete"
        }
        5 => {
            // Overwrite a region with a copy of another.
            if b.len() < 2 {
                return "noop";
            }
            let from = biased_pos(rng, b.len(), hot);
            let to = biased_pos(rng, b.len(), hot);
            let len = (1 + rng.below(128)).min(b.len() - from).min(b.len() - to);
            let chunk = b[from..from + len].to_vec();
            b[to..to + len].copy_from_slice(&chunk);
            "overwrite"
        }
        _ => {
            if b.is_empty() {
                return "noop";
            }
            let at = biased_pos(rng, b.len(), hot);
            let len = (1 + rng.below(16)).min(b.len() - at);
            let fill = if rng.chance(0.5) { 0x00 } else { 0xFF };
            b[at..at + len].iter_mut().for_each(|x| *x = fill);
            "splat"
        }
    }
}

/// One to three edits, each either an extreme value in a header field or a byte-level edit.
pub fn mutate_gguf(rng: &mut Rng, base: &[u8], layout: &GgufLayout) -> (Vec<u8>, String) {
    let mut b = base.to_vec();
    let mut what = Vec::new();
    let hot = layout.data_start + 64;
    for _ in 0..1 + rng.below(3) {
        if rng.chance(0.45) {
            let kind = FIELD_KINDS[rng.below(FIELD_KINDS.len())];
            let candidates: Vec<&Field> = layout.fields.iter().filter(|f| f.kind == kind).collect();
            let f = *candidates[rng.below(candidates.len())];
            if f.at + f.width > b.len() {
                continue;
            }
            let orig = read_uint(&b, &f);
            let v = extreme_value(rng, orig, base.len());
            write_uint(&mut b, &f, v);
            what.push(format!("{kind:?}@{}={v:#x}", f.at));
        } else {
            what.push(mutate_bytes(rng, &mut b, hot).to_string());
        }
    }
    (b, what.join(","))
}
