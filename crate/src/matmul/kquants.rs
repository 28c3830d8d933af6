//! GGUF's K-quant super-blocks (Q4_K, Q5_K, Q6_K: 256 values, what a Q4_K_M or Q5_K_M file
//! holds), taken apart into what the 8-bit panels multiply (`x86_kquant_panels.rs`) and put
//! back together byte for byte (the reference path rebuilds the file's tensor from the panels).
//!
//! Every value is `d · scale · q − dmin · min` over sub-blocks of 32 (Q4_K, Q5_K: unsigned
//! 6-bit `scale` and `min` per sub-block, `q` of 4 or 5 bits), or `d · scale · (q − 32)` over
//! sub-blocks of 16 (Q6_K: signed 8-bit scales, 6-bit `q`). Keeping those integers as they are,
//! not widened to one f16 scale per 32 values, keeps every weight exactly the file's.

use candle_core::quantized::GgmlDType;

/// Values per super-block.
pub const SUPER: usize = 256;
/// Sub-blocks of 32 per super-block: the 8-bit activations' blocks.
pub const SUBS: usize = SUPER / 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KQuant {
    Q4K,
    Q5K,
    Q6K,
}

/// One super-block, its integers unpacked: `q` in value order, and per sub-block of 32 the
/// `scale` and `min` (Q4_K, Q5_K) or the two signed scales of its halves of 16 (Q6_K, as u8 bits).
#[derive(Debug, Clone, PartialEq)]
pub struct SuperBlock {
    pub d: u16,
    pub dmin: u16,
    pub q: [u8; SUPER],
    pub sub: [[u8; 2]; SUBS],
}

impl KQuant {
    pub fn of(dtype: GgmlDType) -> Option<Self> {
        match dtype {
            GgmlDType::Q4K => Some(Self::Q4K),
            GgmlDType::Q5K => Some(Self::Q5K),
            GgmlDType::Q6K => Some(Self::Q6K),
            _ => None,
        }
    }

    pub fn dtype(self) -> GgmlDType {
        match self {
            Self::Q4K => GgmlDType::Q4K,
            Self::Q5K => GgmlDType::Q5K,
            Self::Q6K => GgmlDType::Q6K,
        }
    }

    pub const fn block_bytes(self) -> usize {
        match self {
            Self::Q4K => 4 + 12 + SUPER / 2,
            Self::Q5K => 4 + 12 + SUPER / 8 + SUPER / 2,
            Self::Q6K => SUPER / 2 + SUPER / 4 + 16 + 2,
        }
    }

    pub const fn row_bytes(self, k: usize) -> usize {
        k / SUPER * self.block_bytes()
    }

    pub fn decode(self, b: &[u8]) -> SuperBlock {
        let half = |at: usize| u16::from_le_bytes([b[at], b[at + 1]]);
        let mut out = SuperBlock { d: 0, dmin: 0, q: [0; SUPER], sub: [[0; 2]; SUBS] };
        match self {
            Self::Q4K | Self::Q5K => {
                (out.d, out.dmin) = (half(0), half(2));
                let scales = &b[4..16];
                for (j, sub) in out.sub.iter_mut().enumerate() {
                    *sub = scale_min(scales, j);
                }
                let (high, low) = if self == Self::Q5K { (&b[16..48], &b[48..]) } else { (&[][..], &b[16..]) };
                // 64 values per 32 bytes: the low nibbles are sub-block 2j, the high ones 2j + 1;
                // Q5_K's fifth bits of sub-block s are bit s of each of its 32 `high` bytes.
                for (i, q) in out.q.iter_mut().enumerate() {
                    let (sub, l) = (i / 32, i % 32);
                    let byte = low[sub / 2 * 32 + l];
                    let nibble = if sub % 2 == 0 { byte & 0x0f } else { byte >> 4 };
                    *q = nibble | high.get(l).map_or(0, |h| (h >> sub & 1) << 4);
                }
            }
            Self::Q6K => {
                let (low, high, scales) = (&b[..128], &b[128..192], &b[192..208]);
                out.d = half(208);
                for (s, sub) in out.sub.iter_mut().enumerate() {
                    *sub = [scales[2 * s], scales[2 * s + 1]];
                }
                for (i, q) in out.q.iter_mut().enumerate() {
                    let pos = Q6Position::of(i);
                    let nibble = if pos.high_nibble { low[pos.low] >> 4 } else { low[pos.low] & 0x0f };
                    *q = nibble | ((high[pos.high] >> pos.shift) & 3) << 4;
                }
            }
        }
        out
    }

    pub fn encode(self, s: &SuperBlock, b: &mut [u8]) {
        b.fill(0);
        match self {
            Self::Q4K | Self::Q5K => {
                b[0..2].copy_from_slice(&s.d.to_le_bytes());
                b[2..4].copy_from_slice(&s.dmin.to_le_bytes());
                for (j, &[scale, min]) in s.sub.iter().enumerate() {
                    let scales = &mut b[4..16];
                    if j < 4 {
                        scales[j] |= scale & 63;
                        scales[j + 4] |= min & 63;
                    } else {
                        scales[j + 4] |= (scale & 0x0f) | (min & 0x0f) << 4;
                        scales[j - 4] |= (scale >> 4) << 6;
                        scales[j] |= (min >> 4) << 6;
                    }
                }
                let (high_at, low_at) = if self == Self::Q5K { (16, 48) } else { (16, 16) };
                for (i, &q) in s.q.iter().enumerate() {
                    let (sub, l) = (i / 32, i % 32);
                    b[low_at + sub / 2 * 32 + l] |= (q & 0x0f) << if sub % 2 == 0 { 0 } else { 4 };
                    if self == Self::Q5K {
                        b[high_at + l] |= (q >> 4 & 1) << sub;
                    }
                }
            }
            Self::Q6K => {
                b[208..210].copy_from_slice(&s.d.to_le_bytes());
                for (sub, &[a, c]) in s.sub.iter().enumerate() {
                    b[192 + 2 * sub] = a;
                    b[193 + 2 * sub] = c;
                }
                for (i, &q) in s.q.iter().enumerate() {
                    let pos = Q6Position::of(i);
                    b[pos.low] |= (q & 0x0f) << if pos.high_nibble { 4 } else { 0 };
                    b[128 + pos.high] |= (q >> 4 & 3) << pos.shift;
                }
            }
        }
    }

    /// The super-block's 256 weights, for tests against candle's dequantizer.
    #[cfg(test)]
    pub fn values(self, s: &SuperBlock) -> [f32; SUPER] {
        let (d, dmin) = (half::f16::from_bits(s.d).to_f32(), half::f16::from_bits(s.dmin).to_f32());
        std::array::from_fn(|i| {
            let [a, c] = s.sub[i / 32];
            match self {
                Self::Q6K => d * (if i % 32 < 16 { a } else { c } as i8 as f32) * (s.q[i] as i32 - 32) as f32,
                _ => d * a as f32 * s.q[i] as f32 - dmin * c as f32,
            }
        })
    }
}

/// Sub-block `j`'s 6-bit scale and min, from Q4_K/Q5_K's 12 packed bytes: the first four
/// sub-blocks' in the low six bits of bytes 0..4 and 4..8, the last four's low bits in the
/// nibbles of bytes 8..12 and their top two bits in the spare bits of bytes 0..8.
fn scale_min(q: &[u8], j: usize) -> [u8; 2] {
    if j < 4 {
        [q[j] & 63, q[j + 4] & 63]
    } else {
        [(q[j + 4] & 0x0f) | (q[j - 4] >> 6) << 4, (q[j + 4] >> 4) | (q[j] >> 6) << 4]
    }
}

/// Where Q6_K keeps value `i`'s bits: each half of 128 values has 64 bytes of nibbles and 32 of
/// top-bit pairs; within a half, value `32·g + l` takes the low (g even) or high nibble of byte
/// `l` (g < 2) or `32 + l`, and bits `2g..2g+2` of top-bit byte `l`.
struct Q6Position {
    low: usize,
    high_nibble: bool,
    high: usize,
    shift: u8,
}

impl Q6Position {
    fn of(i: usize) -> Self {
        let (half, g, l) = (i / 128, i % 128 / 32, i % 32);
        let low = half * 64 + if g % 2 == 0 { l } else { 32 + l };
        Self { low, high_nibble: g >= 2, high: half * 32 + l, shift: 2 * g as u8 }
    }
}
