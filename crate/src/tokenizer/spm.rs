//! SentencePiece vocabularies as GGUF stores them (`tokenizer.ggml.model = llama`): pieces,
//! scores and token types, tokenized the way llama.cpp's SPM tokenizer does, which is the
//! reference our fixtures come from.
//!
//! Why not Hugging Face `tokenizers`' BPE with merges derived from the scores: llama.cpp (a)
//! merges by the score of the merged piece, over every piece in the vocabulary including control
//! and byte pieces, (b) always splits user-defined pieces out of the input (Gemma's `\n\n`, tab
//! runs, HTML tags), control pieces only when asked, longest piece first over the whole text, and
//! (c) prefixes a space after every special piece when `add_space_prefix` is set. Matching all
//! three through `tokenizers`' added tokens and a derived merge list (millions of pairs for a
//! 262k vocabulary) would cost load time and still differ at the edges, while the merge itself
//! is a few dozen lines.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use crate::error::{Error, Result};

/// GGUF `tokenizer.ggml.token_type` values (llama.cpp's `llama_token_type`).
pub const TYPE_NORMAL: i32 = 1;
pub const TYPE_UNKNOWN: i32 = 2;
pub const TYPE_CONTROL: i32 = 3;
pub const TYPE_USER_DEFINED: i32 = 4;
pub const TYPE_UNUSED: i32 = 5;
pub const TYPE_BYTE: i32 = 6;

/// SentencePiece's word-boundary mark, which stands for a space inside pieces.
const SPACE_MARK: char = '\u{2581}';

pub struct SpmVocab {
    pieces: Vec<String>,
    scores: Vec<f32>,
    types: Vec<i32>,
    /// Piece text to id; for a text that occurs twice the later id wins, as in llama.cpp.
    by_text: HashMap<String, u32>,
    /// Unknown, control and user-defined ids, longest text first: the order llama.cpp splits
    /// them out of the input in.
    specials: Vec<u32>,
    add_space_prefix: bool,
}

/// A stretch of the input still to be tokenized, or a special piece already split out.
enum Fragment {
    Text(usize, usize),
    Token(u32),
}

impl SpmVocab {
    /// `scores`/`types` may be empty (GGUF makes both optional): 0.0 and normal, as llama.cpp
    /// assumes. Otherwise they must have one entry per piece.
    pub fn new(mut pieces: Vec<String>, scores: Vec<f32>, types: Vec<i32>, add_space_prefix: bool) -> Result<Self> {
        let n = pieces.len();
        if n == 0 || n > u32::MAX as usize {
            return Err(Error::corrupt(format!("SentencePiece vocabulary with {n} pieces")));
        }
        let scores = if scores.is_empty() { vec![0.0; n] } else { scores };
        let types = if types.is_empty() { vec![TYPE_NORMAL; n] } else { types };
        if scores.len() != n || types.len() != n {
            return Err(Error::corrupt(format!(
                "tokenizer.ggml.scores ({}) / token_type ({}) do not match the {n} tokens",
                scores.len(),
                types.len()
            )));
        }
        let mut by_text = HashMap::with_capacity(n);
        for (id, piece) in pieces.iter_mut().enumerate() {
            // llama.cpp's name for an empty piece, so it cannot match (or loop on) empty input.
            if piece.is_empty() {
                *piece = format!("[EMPTY_{id}]");
            }
            by_text.insert(piece.clone(), id as u32);
        }
        let is_special = |t: i32| matches!(t, TYPE_UNKNOWN | TYPE_CONTROL | TYPE_USER_DEFINED);
        let mut specials: Vec<u32> = (0..n as u32).filter(|&id| is_special(types[id as usize])).collect();
        specials.sort_by(|&a, &b| pieces[b as usize].len().cmp(&pieces[a as usize].len()).then(a.cmp(&b)));
        Ok(Self { pieces, scores, types, by_text, specials, add_space_prefix })
    }

    pub fn len(&self) -> usize {
        self.pieces.len()
    }

    /// Unknown, control and user-defined pieces.
    pub fn special_ids(&self) -> &[u32] {
        &self.specials
    }

    pub fn piece(&self, id: u32) -> Option<&str> {
        self.pieces.get(id as usize).map(String::as_str)
    }

    pub fn id(&self, text: &str) -> Option<u32> {
        self.by_text.get(text).copied()
    }

    /// The bytes a token stands for in decoded text, as llama.cpp's `token_to_piece` with
    /// specials rendered: `▁` is a space in normal pieces, `<0xNN>` is that byte, control and
    /// user-defined pieces are their literal text, unused pieces are nothing.
    pub fn token_bytes(&self, id: u32) -> Vec<u8> {
        let piece = &self.pieces[id as usize];
        match self.types[id as usize] {
            TYPE_BYTE => parse_byte_piece(piece).map_or_else(|| piece.as_bytes().to_vec(), |b| vec![b]),
            TYPE_UNKNOWN | TYPE_CONTROL | TYPE_USER_DEFINED => piece.as_bytes().to_vec(),
            TYPE_UNUSED => Vec::new(),
            _ => piece.replace(SPACE_MARK, " ").into_bytes(),
        }
    }

    /// Whether decoded text should lose the space the encoder put in front (llama.cpp's
    /// detokenize strips it from the first token when `add_space_prefix` is set).
    pub fn add_space_prefix(&self) -> bool {
        self.add_space_prefix
    }

    /// llama.cpp's SPM `tokenize` without BOS/EOS: `special` lets control pieces in the text
    /// become their ids; user-defined pieces always do.
    pub fn encode(&self, text: &str, special: bool) -> Result<Vec<u32>> {
        let mut out = Vec::new();
        // llama.cpp puts a space in front of the first text and of every text after a special piece.
        let mut prev_special = true;
        for fragment in self.partition(text, special) {
            match fragment {
                Fragment::Token(id) => {
                    out.push(id);
                    prev_special = true;
                }
                Fragment::Text(start, end) => {
                    let mut piece = String::with_capacity(end - start + 3);
                    if self.add_space_prefix && prev_special {
                        piece.push(' ');
                    }
                    piece.push_str(&text[start..end]);
                    self.merge(&piece.replace(' ', "\u{2581}"), &mut out)?;
                    prev_special = false;
                }
            }
        }
        Ok(out)
    }

    /// Splits special pieces out of the text: each piece in turn, longest first, at every
    /// non-overlapping occurrence in what is still plain text (llama.cpp's `tokenizer_st_partition`).
    fn partition(&self, text: &str, special: bool) -> Vec<Fragment> {
        let mut fragments = if text.is_empty() { Vec::new() } else { vec![Fragment::Text(0, text.len())] };
        let pairs = BytePairs::of(text);
        for &id in &self.specials {
            if !special && self.types[id as usize] != TYPE_USER_DEFINED {
                continue;
            }
            let needle = self.pieces[id as usize].as_str();
            if !pairs.may_contain(needle) || !text.contains(needle) {
                continue;
            }
            let mut next = Vec::with_capacity(fragments.len() + 2);
            for fragment in fragments {
                match fragment {
                    Fragment::Text(mut start, end) => {
                        while let Some(at) = text[start..end].find(needle) {
                            if at > 0 {
                                next.push(Fragment::Text(start, start + at));
                            }
                            next.push(Fragment::Token(id));
                            start += at + needle.len();
                        }
                        if start < end {
                            next.push(Fragment::Text(start, end));
                        }
                    }
                    token => next.push(token),
                }
            }
            fragments = next;
        }
        fragments
    }

    /// SentencePiece BPE: start from single characters and repeatedly merge the adjacent pair
    /// whose joined text is the highest-scoring piece (the leftmost on a tie). What cannot be
    /// reached from a piece falls back to its UTF-8 bytes as `<0xNN>` pieces.
    fn merge(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        // Symbols are adjacent byte ranges of `text`, so any pair joins into a slice of it.
        let mut symbols: Vec<Symbol> = text
            .char_indices()
            .enumerate()
            .map(|(i, (start, c))| Symbol { start, len: c.len_utf8(), prev: i.checked_sub(1), next: Some(i + 1) })
            .collect();
        let Some(last) = symbols.last_mut() else { return Ok(()) };
        last.next = None;
        let mut queue = BinaryHeap::new();
        for i in 1..symbols.len() {
            self.push_pair(text, &symbols, i - 1, i, &mut queue);
        }
        while let Some(pair) = queue.pop() {
            let (left, right) = (&symbols[pair.left], &symbols[pair.right]);
            // Stale: one side has merged with something else since the pair was queued.
            if left.len == 0 || right.len == 0 || left.len + right.len != pair.len {
                continue;
            }
            let right = pair.right;
            symbols[pair.left].len = pair.len;
            symbols[pair.left].next = symbols[right].next;
            symbols[right].len = 0;
            if let Some(after) = symbols[right].next {
                symbols[after].prev = Some(pair.left);
                self.push_pair(text, &symbols, pair.left, after, &mut queue);
            }
            if let Some(before) = symbols[pair.left].prev {
                self.push_pair(text, &symbols, before, pair.left, &mut queue);
            }
        }
        let mut at = Some(0);
        while let Some(i) = at {
            let s = &symbols[i];
            self.emit(&text[s.start..s.start + s.len], out)?;
            at = s.next;
        }
        Ok(())
    }

    fn push_pair(&self, text: &str, symbols: &[Symbol], left: usize, right: usize, queue: &mut BinaryHeap<Pair>) {
        let (l, r) = (&symbols[left], &symbols[right]);
        let len = l.len + r.len;
        if let Some(&id) = self.by_text.get(&text[l.start..l.start + len]) {
            queue.push(Pair { score: self.scores[id as usize], left, right, len });
        }
    }

    /// A merged symbol is always a piece (only pairs that form one merge); a lone character may
    /// not be, and then goes out as bytes, or as a one-byte piece when there is no byte piece.
    fn emit(&self, symbol: &str, out: &mut Vec<u32>) -> Result<()> {
        if let Some(&id) = self.by_text.get(symbol) {
            out.push(id);
            return Ok(());
        }
        for &b in symbol.as_bytes() {
            let id = self.by_text.get(format!("<0x{b:02X}>").as_str()).or_else(|| self.by_text.get(&(b as char).to_string()));
            out.push(*id.ok_or_else(|| {
                Error::invalid(format!("cannot tokenize input: {symbol:?} is not in the vocabulary and it has no byte piece for 0x{b:02X}"))
            })?);
        }
        Ok(())
    }
}

/// `<0xNN>` → the byte NN.
pub fn parse_byte_piece(piece: &str) -> Option<u8> {
    let hex = piece.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// Which byte pairs a text holds. Gemma has over 6,000 control pieces (`<unused123>`, ...); a
/// search of the whole text for each made a 18 kB chat prompt take 38 ms to split, while a piece
/// with a pair the text lacks can be ruled out at once.
struct BytePairs {
    bytes: [bool; 256],
    pairs: Vec<u64>,
}

impl BytePairs {
    fn of(text: &str) -> Self {
        let mut set = Self { bytes: [false; 256], pairs: vec![0; 65536 / 64] };
        let b = text.as_bytes();
        for (i, &x) in b.iter().enumerate() {
            set.bytes[x as usize] = true;
            if let Some(&y) = b.get(i + 1) {
                let k = (x as usize) << 8 | y as usize;
                set.pairs[k / 64] |= 1 << (k % 64);
            }
        }
        set
    }

    /// False only when `needle` cannot occur in the text.
    fn may_contain(&self, needle: &str) -> bool {
        let b = needle.as_bytes();
        b.iter().all(|&x| self.bytes[x as usize])
            && b.windows(2).all(|w| {
                let k = (w[0] as usize) << 8 | w[1] as usize;
                self.pairs[k / 64] & (1 << (k % 64)) != 0
            })
    }
}

struct Symbol {
    start: usize,
    /// Bytes; 0 once merged into the symbol on its left.
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

/// A candidate merge of the symbols at `left` and `right` (neighbours when queued) into `len` bytes.
struct Pair {
    score: f32,
    left: usize,
    right: usize,
    len: usize,
}

impl Ord for Pair {
    /// Max-heap order: the higher score first, then the leftmost pair.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score.total_cmp(&other.score).then(other.left.cmp(&self.left))
    }
}

impl PartialOrd for Pair {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Pair {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Pair {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    /// `<unk>`, `<s>`, `</s>`, a user-defined `\n\n`, the 256 byte pieces, then `extra` (normal).
    fn vocab(extra: &[(&str, f32)], add_space_prefix: bool, with_bytes: bool) -> SpmVocab {
        let mut pieces = vec!["<unk>".to_owned(), "<s>".into(), "</s>".into(), "\n\n".into()];
        let mut types = vec![TYPE_UNKNOWN, TYPE_CONTROL, TYPE_CONTROL, TYPE_USER_DEFINED];
        if with_bytes {
            pieces.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
            types.extend([TYPE_BYTE; 256]);
        }
        let mut scores = vec![0.0; pieces.len()];
        for (piece, score) in extra {
            pieces.push(piece.to_string());
            scores.push(*score);
            types.push(TYPE_NORMAL);
        }
        SpmVocab::new(pieces, scores, types, add_space_prefix).unwrap()
    }

    fn texts(v: &SpmVocab, ids: &[u32]) -> Vec<String> {
        ids.iter().map(|&i| v.piece(i).unwrap().to_owned()).collect()
    }

    const ABC: &[(&str, f32)] =
        &[("a", -1.0), ("b", -1.0), ("c", -1.0), ("ab", -3.0), ("bc", -2.0), ("\u{2581}", -1.0), ("\u{2581}a", -2.5)];

    #[test]
    fn the_best_scoring_merge_goes_first_and_ties_go_left() {
        let v = vocab(ABC, false, true);
        // bc (-2) beats ab (-3), and abc is no piece.
        assert_eq!(texts(&v, &v.encode("abc", false).unwrap()), ["a", "bc"]);
        let v = vocab(&[("a", -1.0), ("aa", -2.0)], false, true);
        assert_eq!(texts(&v, &v.encode("aaa", false).unwrap()), ["aa", "a"]);
    }

    #[test]
    fn characters_outside_the_vocabulary_fall_back_to_bytes() {
        let v = vocab(ABC, false, true);
        assert_eq!(texts(&v, &v.encode("aé", false).unwrap()), ["a", "<0xC3>", "<0xA9>"]);
        let decoded: Vec<u8> = v.encode("aé", false).unwrap().iter().flat_map(|&i| v.token_bytes(i)).collect();
        assert_eq!(decoded, "aé".as_bytes());
        let err = vocab(ABC, false, false).encode("aé", false).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidArgument);
    }

    #[test]
    fn a_space_is_prefixed_to_text_at_the_start_and_after_specials() {
        let v = vocab(ABC, true, true);
        assert_eq!(texts(&v, &v.encode("a", false).unwrap()), ["\u{2581}a"]);
        assert_eq!(texts(&v, &v.encode("<s>a", true).unwrap()), ["<s>", "\u{2581}a"]);
        assert_eq!(texts(&v, &v.encode("a\n\nb", false).unwrap()), ["\u{2581}a", "\n\n", "\u{2581}", "b"]);
        assert!(v.encode("", false).unwrap().is_empty());
        assert_eq!(v.token_bytes(v.id("\u{2581}a").unwrap()), b" a");
    }

    #[test]
    fn control_pieces_need_special_and_user_defined_ones_do_not() {
        let v = vocab(ABC, false, true);
        assert_eq!(v.encode("a</s>", true).unwrap(), [v.id("a").unwrap(), 2]);
        assert!(!v.encode("a</s>", false).unwrap().contains(&2));
        assert_eq!(v.encode("\n\n", false).unwrap(), [3]);
    }

    #[test]
    fn malformed_vocabularies_are_corrupt_file_errors() {
        let err = SpmVocab::new(vec!["a".into(), "b".into()], vec![0.0], vec![], false).err().unwrap();
        assert_eq!(err.kind, ErrorKind::CorruptFile);
        assert_eq!(SpmVocab::new(vec![], vec![], vec![], false).err().unwrap().kind, ErrorKind::CorruptFile);
        // An empty piece gets llama.cpp's placeholder name and never matches input.
        let v = SpmVocab::new(vec!["".into(), "a".into()], vec![], vec![], false).unwrap();
        assert_eq!(v.piece(0), Some("[EMPTY_0]"));
        assert_eq!(v.encode("a", false).unwrap(), [1]);
    }
}
