//! The block formats the 8-bit panels (`x86_q8_panels.rs`) hold, and how a file block's bytes
//! are laid out in them.

use super::formats::{Format, WeightFormat, BLOCK, Q5_0_BLOCK_BYTES};
use super::x86_q8_panels::GROUP;

/// The block formats the panels hold, each at the file's bits per value: 32 values and an f16
/// scale per block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PanelFormat {
    Q8_0,
    Q4_0,
    /// Only off the VNNI road (`super::q5_0_panels`): its tile is the AVX2 one.
    Q5_0,
}

impl PanelFormat {
    /// The panels' format for a matrix of `format`, where the panels take it on this CPU.
    pub(super) fn of(format: Format) -> Option<Self> {
        match format {
            Format::Blocks(WeightFormat::Q8_0) => Some(Self::Q8_0),
            Format::Blocks(WeightFormat::Q4_0) => Some(Self::Q4_0),
            Format::Q5_0 if super::q5_0_panels() => Some(Self::Q5_0),
            _ => None,
        }
    }

    pub(super) const fn file_block_bytes(self) -> usize {
        match self {
            Self::Q8_0 => WeightFormat::Q8_0.block_bytes(),
            Self::Q4_0 => WeightFormat::Q4_0.block_bytes(),
            Self::Q5_0 => Q5_0_BLOCK_BYTES,
        }
    }

    /// A file block's bytes after its scale, in the panels' order (`Q8Panels`): Q8_0's values
    /// and Q4_0's nibbles as the file has them; Q5_0's nibbles, then its fifth bits as one more
    /// group, where byte j's bit i is value 4i + j's and bit 4 + i value 16 + 4i + j's: the two
    /// values byte j of nibble group i holds. The first `body_bytes` of the array.
    pub(super) fn panel_body(self, block: &[u8]) -> [u8; BLOCK] {
        let mut body = [0u8; BLOCK];
        if self != Self::Q5_0 {
            body[..self.body_bytes()].copy_from_slice(&block[2..]);
            return body;
        }
        let fifth = u32::from_le_bytes([block[2], block[3], block[4], block[5]]);
        let bit = |value: usize| ((fifth >> value) & 1) as u8;
        body[..BLOCK / 2].copy_from_slice(&block[6..]);
        for j in 0..GROUP {
            body[BLOCK / 2 + j] = (0..GROUP).map(|i| bit(4 * i + j) << i | bit(16 + 4 * i + j) << (4 + i)).sum();
        }
        body
    }

    /// Bytes of a block after its scale.
    pub(super) const fn body_bytes(self) -> usize {
        self.file_block_bytes() - 2
    }

    /// `panel_body` undone into `block`, whose scale is already there.
    pub(super) fn file_body(self, body: &[u8], block: &mut [u8]) {
        if self != Self::Q5_0 {
            return block[2..].copy_from_slice(body);
        }
        let (nibbles, group) = body.split_at(BLOCK / 2);
        let mut fifth = 0u32;
        for (j, &byte) in group.iter().enumerate() {
            for i in 0..GROUP {
                fifth |= u32::from(byte >> i & 1) << (4 * i + j) | u32::from(byte >> (4 + i) & 1) << (16 + 4 * i + j);
            }
        }
        block[2..6].copy_from_slice(&fifth.to_le_bytes());
        block[6..].copy_from_slice(nibbles);
    }
}
