//! tiktoken's byte-level BPE, as nanochat encodes: split the text with the encoding's own
//! `pat_str` (fancy-regex, the engine tiktoken itself uses), then merge each piece's bytes by
//! rank, lowest first. A token's rank is its id; special tokens follow the ranks.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::path::Path;

use fancy_regex::Regex;

use super::pickle::{self, Value};
use crate::config::MAX_VOCAB;
use crate::error::{Error, Result};

pub struct TiktokenBpe {
    ranks: HashMap<Vec<u8>, u32>,
    /// (text, id), longest text first so overlapping names match greedily.
    specials: Vec<(String, u32)>,
    split: Regex,
}

impl TiktokenBpe {
    /// Reads `tokenizer.pkl` as upstream's `RustBPETokenizer.save` writes it.
    pub fn from_pickle_file(path: &Path) -> Result<Self> {
        let data = std::fs::read(path).map_err(|e| Error::from(e).context(format!("cannot read {}", path.display())))?;
        Self::from_pickle(&data).map_err(|e| {
            e.context(format!(
                "{} (expected nanochat's pickled tiktoken Encoding; re-save it with nanochat's tok_train.py)",
                path.display()
            ))
        })
    }

    pub fn from_pickle(data: &[u8]) -> Result<Self> {
        let root = pickle::load(data)?;
        let state = encoding_state(&root).ok_or_else(|| Error::corrupt("the pickle holds no tiktoken Encoding state"))?;
        let field = |name: &str| state.iter().find(|(k, _)| *k == &Value::Str(name.into())).map(|(_, v)| *v);
        let pat_str = match field("pat_str") {
            Some(Value::Str(s)) => s.clone(),
            _ => return Err(Error::corrupt("the Encoding has no pat_str string")),
        };
        let ranks = field("mergeable_ranks")
            .and_then(Value::as_dict)
            .ok_or_else(|| Error::corrupt("the Encoding has no mergeable_ranks dict"))?
            .map(|(k, v)| match (k, v) {
                (Value::Bytes(b), Value::Int(id)) => Ok((b.clone(), token_id(*id)?)),
                _ => Err(Error::corrupt("mergeable_ranks must map bytes to ints")),
            })
            .collect::<Result<HashMap<_, _>>>()?;
        let specials = match field("special_tokens").map(|v| (v, v.as_dict())) {
            Some((_, Some(items))) => items
                .map(|(k, v)| match (k, v) {
                    (Value::Str(s), Value::Int(id)) => Ok((s.clone(), token_id(*id)?)),
                    _ => Err(Error::corrupt("special_tokens must map strings to ints")),
                })
                .collect::<Result<Vec<_>>>()?,
            Some((Value::None, None)) | None => Vec::new(),
            Some(_) => return Err(Error::corrupt("special_tokens must be a dict")),
        };
        Self::new(&pat_str, ranks, specials)
    }

    pub fn new(pat_str: &str, ranks: HashMap<Vec<u8>, u32>, mut specials: Vec<(String, u32)>) -> Result<Self> {
        if let Some(b) = (0..=255u8).find(|b| !ranks.contains_key(&[*b][..])) {
            return Err(Error::corrupt(format!("mergeable_ranks lacks the single byte 0x{b:02x}, so some text could not be encoded")));
        }
        let mut seen = vec![false; ranks.len() + specials.len()];
        for &id in ranks.values().chain(specials.iter().map(|(_, id)| id)) {
            match seen.get_mut(id as usize) {
                Some(slot) if !*slot => *slot = true,
                _ => return Err(Error::corrupt(format!("token id {id} is repeated or leaves a gap in the vocabulary"))),
            }
        }
        let split = Regex::new(pat_str).map_err(|e| Error::corrupt(format!("pat_str is not a valid regex: {e}")))?;
        specials.sort_by_key(|(text, _)| Reverse(text.len()));
        Ok(Self { ranks, specials, split })
    }

    pub fn vocab_size(&self) -> usize {
        self.ranks.len() + self.specials.len()
    }

    pub fn special(&self, name: &str) -> Option<u32> {
        self.specials.iter().find(|(s, _)| s == name).map(|&(_, id)| id)
    }

    pub fn specials(&self) -> &[(String, u32)] {
        &self.specials
    }

    /// The bytes of every id; special tokens are their literal text, as tiktoken decodes them.
    pub fn token_bytes(&self) -> Vec<Vec<u8>> {
        let mut table = vec![Vec::new(); self.vocab_size()];
        for (bytes, &id) in &self.ranks {
            table[id as usize] = bytes.clone();
        }
        for (text, id) in &self.specials {
            table[*id as usize] = text.as_bytes().to_vec();
        }
        table
    }

    /// tiktoken's `encode_ordinary`: special-token text is plain text.
    pub fn encode_ordinary(&self, text: &str) -> Result<Vec<u32>> {
        let mut ids = Vec::new();
        for piece in self.split.find_iter(text) {
            let piece = piece.map_err(|e| Error::invalid(format!("cannot split the text into words: {e}")))?.as_str().as_bytes();
            match self.ranks.get(piece) {
                Some(&id) => ids.push(id),
                None => self.merge(piece, &mut ids),
            }
        }
        Ok(ids)
    }

    /// Special-token text becomes the special token; the rest is encoded as ordinary text.
    pub fn encode_with_specials(&self, text: &str) -> Result<Vec<u32>> {
        let mut ids = Vec::new();
        let mut rest = text;
        while let Some((at, name, id)) = self.next_special(rest) {
            ids.extend(self.encode_ordinary(&rest[..at])?);
            ids.push(id);
            rest = &rest[at + name.len()..];
        }
        ids.extend(self.encode_ordinary(rest)?);
        Ok(ids)
    }

    fn next_special<'s>(&'s self, text: &str) -> Option<(usize, &'s str, u32)> {
        self.specials
            .iter()
            .filter_map(|(name, id)| text.find(name.as_str()).map(|at| (at, name.as_str(), *id)))
            .min_by_key(|&(at, name, _)| (at, Reverse(name.len())))
    }

    /// tiktoken's `byte_pair_merge`: repeatedly merge the adjacent pair whose joined bytes have
    /// the lowest rank, leftmost on ties, until no joined pair is a token. tiktoken rescans all
    /// pairs after each merge (quadratic, so a long run of one character typed by a user could
    /// stall a request); a heap keyed by (rank, position) makes the same choices in n·log n.
    fn merge(&self, piece: &[u8], out: &mut Vec<u32>) {
        let n = piece.len();
        let rank_of = |bytes: &[u8]| self.ranks.get(bytes).copied().unwrap_or(u32::MAX);
        // Parts as a linked list over their start offsets; `next[i]` is where part i ends.
        let mut next: Vec<usize> = (1..=n).collect();
        let mut prev: Vec<Option<usize>> = (0..n).map(|i| i.checked_sub(1)).collect();
        let mut alive = vec![true; n];
        let mut heap = BinaryHeap::new();
        let push = |heap: &mut BinaryHeap<Reverse<(u32, usize, usize)>>, next: &[usize], i: usize| {
            if let Some(&end) = next.get(next[i]) {
                let rank = rank_of(&piece[i..end]);
                if rank != u32::MAX {
                    heap.push(Reverse((rank, i, end)));
                }
            }
        };
        for i in 0..n {
            push(&mut heap, &next, i);
        }
        while let Some(Reverse((_, i, end))) = heap.pop() {
            // Stale unless both parts are still exactly as when the pair was pushed.
            if !alive[i] || next[i] >= n || next[next[i]] != end {
                continue;
            }
            let j = next[i];
            alive[j] = false;
            next[i] = end;
            if end < n {
                prev[end] = Some(i);
            }
            push(&mut heap, &next, i);
            if let Some(p) = prev[i] {
                push(&mut heap, &next, p);
            }
        }
        // Every single byte has a rank, so every part left is a token.
        let mut i = 0;
        while i < n {
            out.push(rank_of(&piece[i..next[i]]));
            i = next[i];
        }
    }
}

fn token_id(id: i64) -> Result<u32> {
    u32::try_from(id).ok().filter(|&i| (i as usize) < MAX_VOCAB).ok_or_else(|| Error::corrupt(format!("token id {id} is out of range")))
}

/// The state dict of a pickled `tiktoken.core.Encoding` (or a bare state dict).
fn encoding_state(root: &Value) -> Option<Vec<(&Value, &Value)>> {
    if let Some(items) = root.as_dict() {
        return Some(items.collect());
    }
    match root {
        Value::Container(c) if c.kind == pickle::Kind::Object && c.items.len() == 3 => c.items[2].as_dict().map(Iterator::collect),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// tiktoken's own quadratic loop, transcribed: the oracle for the heap version.
    fn tiktoken_merge(ranks: &HashMap<Vec<u8>, u32>, piece: &[u8]) -> Vec<u32> {
        let rank_of = |bytes: &[u8]| ranks.get(bytes).copied().unwrap_or(u32::MAX);
        let mut parts: Vec<(usize, u32)> = (0..piece.len() - 1).map(|i| (i, rank_of(&piece[i..i + 2]))).collect();
        parts.push((piece.len() - 1, u32::MAX));
        parts.push((piece.len(), u32::MAX));
        let pair_rank =
            |parts: &[(usize, u32)], i: usize| if i + 3 < parts.len() { rank_of(&piece[parts[i].0..parts[i + 3].0]) } else { u32::MAX };
        loop {
            let (i, rank) =
                parts[..parts.len() - 1].iter().enumerate().fold((0, u32::MAX), |b, (i, &(_, r))| if r < b.1 { (i, r) } else { b });
            if rank == u32::MAX {
                break;
            }
            if i > 0 {
                parts[i - 1].1 = pair_rank(&parts, i - 1);
            }
            parts[i].1 = pair_rank(&parts, i);
            parts.remove(i + 1);
        }
        parts.windows(2).map(|w| rank_of(&piece[w[0].0..w[1].0])).collect()
    }

    /// A vocabulary over "ab" with overlapping merges, where the order of merges matters.
    #[test]
    fn heap_merge_makes_tiktokens_choices() {
        let mut ranks: HashMap<Vec<u8>, u32> = (0..=255u8).map(|b| (vec![b], b as u32)).collect();
        for (i, t) in ["aa", "ab", "ba", "bb", "aaa", "aab", "abab", "baa", "aaaa", "bab", "abb", "aabb"].iter().enumerate() {
            ranks.insert(t.as_bytes().to_vec(), 256 + i as u32);
        }
        let bpe = TiktokenBpe::new(r"\S+", ranks.clone(), vec![("<|bos|>".into(), 268)]).unwrap();
        let mut state = 12345u64;
        for len in 1..200 {
            let piece: Vec<u8> = (0..len)
                .map(|_| {
                    state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    if state >> 63 == 0 {
                        b'a'
                    } else {
                        b'b'
                    }
                })
                .collect();
            let mut got = Vec::new();
            bpe.merge(&piece, &mut got);
            assert_eq!(got, tiktoken_merge(&ranks, &piece), "{}", String::from_utf8_lossy(&piece));
        }
    }

    #[test]
    fn a_long_run_is_fast() {
        let ranks: HashMap<Vec<u8>, u32> = (0..=255u8).map(|b| (vec![b], b as u32)).chain([(b"aa".to_vec(), 256)]).collect();
        let bpe = TiktokenBpe::new(r"\S+", ranks, Vec::new()).unwrap();
        let start = std::time::Instant::now();
        assert_eq!(bpe.encode_ordinary(&"a".repeat(200_001)).unwrap().len(), 100_001);
        assert!(start.elapsed().as_secs_f64() < 2.0, "{:?}", start.elapsed());
    }
}
