//! The VNNI road's tile for both panels of a pair (`x86_q8_panels.rs`), in 512-bit vectors.

use std::arch::x86_64::*;

use super::formats::BLOCK;
use super::x86_q8_panels::{prefetch_next_tile, Panel, PanelFormat, Q8Panels, Rows, Totals, COLS, GROUP, GROUP_BYTES, PAIR};

/// `tiles_vnni` for a pair of panels, in 512-bit vectors (`tile_pair`).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn tiles_vnni_pair<const Q4: bool>(panel: &Panel, rows: &Rows, count: usize, totals: &mut Totals) {
    match count {
        8.. => tile_pair::<8, Q4>(panel, rows, totals),
        7 => tile_pair::<7, Q4>(panel, rows, totals),
        6 => tile_pair::<6, Q4>(panel, rows, totals),
        5 => tile_pair::<5, Q4>(panel, rows, totals),
        4 => tile_pair::<4, Q4>(panel, rows, totals),
        3 => tile_pair::<3, Q4>(panel, rows, totals),
        2 => tile_pair::<2, Q4>(panel, rows, totals),
        _ => tile_pair::<1, Q4>(panel, rows, totals),
    }
}

/// `tile` on the VNNI road for both panels of a pair, in 512-bit vectors: a group of the pair
/// is one vector (`PanelAt`), so each row's four activation bytes are broadcast from memory
/// inside its `vpdpbusd` (one instruction per row and group, where the 256-bit tile spent a
/// broadcast and two), and a row's sums and totals take one register each. The same integer
/// dots and the same two roundings per block as `tile`, so the same bits.
#[inline(always)]
unsafe fn tile_pair<const R: usize, const Q4: bool>(panel: &Panel, rows: &Rows, totals: &mut Totals) {
    let blocks = panel.blocks;
    let block_bytes = Q8Panels::block_bytes(if Q4 { PanelFormat::Q4_0 } else { PanelFormat::Q8_0 });
    let (acts, scales, offsets) = rows.starts::<R>(blocks, true);
    let nibble = _mm512_set1_epi8(0x0f);
    let bias = if Q4 { -8 } else { -128 };
    let mut acc = [_mm512_setzero_ps(); R];
    let ahead = PAIR * blocks * block_bytes;
    for b in 0..blocks {
        let base = panel.values.add(b * PAIR * block_bytes);
        prefetch_next_tile::<R>(base, PAIR * block_bytes, ahead);
        let mut dots = [_mm512_setzero_si512(); R];
        for r in 0..R {
            dots[r] = _mm512_set1_epi32(bias * *offsets[r].add(b));
        }
        let group = |i: usize| _mm512_loadu_si512(base.add(i * PAIR * GROUP_BYTES).cast());
        let four = |r: usize, at: usize| _mm512_set1_epi32(acts[r].add(b * BLOCK + at).cast::<i32>().read_unaligned());
        if Q4 {
            for i in 0..BLOCK / 2 / GROUP {
                let packed = group(i);
                let (low, high) = (_mm512_and_si512(packed, nibble), _mm512_and_si512(_mm512_srli_epi16::<4>(packed), nibble));
                for r in 0..R {
                    dots[r] = _mm512_dpbusd_epi32(dots[r], low, four(r, i * GROUP));
                }
                for r in 0..R {
                    dots[r] = _mm512_dpbusd_epi32(dots[r], high, four(r, BLOCK / 2 + i * GROUP));
                }
            }
        } else {
            for i in 0..BLOCK / GROUP {
                let w = group(i);
                for r in 0..R {
                    dots[r] = _mm512_dpbusd_epi32(dots[r], w, four(r, i * GROUP));
                }
            }
        }
        let weight_scales = _mm512_cvtph_ps(_mm256_loadu_si256(panel.scales.add(b * PAIR * COLS).cast()));
        for r in 0..R {
            let scale = _mm512_mul_ps(weight_scales, _mm512_set1_ps(*scales[r].add(b)));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots[r]), scale, acc[r]);
        }
    }
    for r in 0..R {
        _mm512_storeu_ps(totals[r].as_mut_ptr(), acc[r]);
    }
}
