//! Tokenizers from GGUF metadata (byte-level BPE, the `gpt2` family, and SentencePiece, the
//! `llama` family such as Gemma), from `tokenizer.json`, or from nanochat's pickled tiktoken
//! encoding.
//!
//! Encoding goes through Hugging Face `tokenizers`, for GGUF SentencePiece vocabularies through
//! llama.cpp's SPM algorithm (spm.rs), or for nanochat through a rank-based BPE identical to
//! tiktoken's (crate::nanochat::tiktoken). Decoding is ours: every id maps to the exact
//! bytes it stands for, so text can be assembled incrementally and only whole UTF-8 characters
//! are ever emitted, however a character is split across tokens.

use std::collections::HashMap;
use std::path::Path;

use candle_core::quantized::gguf_file::Value;
use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{AddedToken, DecoderWrapper, PreTokenizerWrapper, SplitDelimiterBehavior};

use crate::error::{Error, ErrorKind, Result, ResultExt};
use crate::gguf::GgufFile;
use crate::nanochat::tiktoken::TiktokenBpe;

mod spm;
use spm::SpmVocab;

/// llama.cpp's pre-tokenizer regexes for the `tokenizer.ggml.pre` names we support.
const LLAMA3_SPLIT: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Token names that end a turn in the chat formats we know, besides the declared EOS.
const END_OF_TURN_NAMES: &[&str] = &["<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<|endoftext|>", "<|end|>", "<end_of_turn>", "</s>"];

enum Encoder {
    Hf {
        /// Treats special-token text in the input as special tokens (for rendered chat templates).
        with_specials: Box<tokenizers::Tokenizer>,
        /// Treats everything as plain text, so a user typing `<|im_start|>` cannot forge a turn.
        plain: Box<tokenizers::Tokenizer>,
    },
    Tiktoken(TiktokenBpe),
    Spm(Box<SpmVocab>),
    /// One token per character (nanoGPT's character-level datasets).
    Chars(HashMap<char, u32>),
}

pub struct Tokenizer {
    encoder: Encoder,
    token_bytes: Vec<Vec<u8>>,
    pub bos_token: Option<u32>,
    pub eos_token: Option<u32>,
    pub add_bos: bool,
    /// Tokens that end generation: EOS plus known end-of-turn tokens present in the vocabulary.
    pub eog_tokens: Vec<u32>,
}

impl Tokenizer {
    pub fn from_gguf(gguf: &GgufFile) -> Result<Self> {
        match gguf.meta_str("tokenizer.ggml.model").unwrap_or("") {
            "gpt2" => Self::from_gguf_bpe(gguf),
            "llama" => Self::from_gguf_spm(gguf),
            model => Err(Error::unsupported(format!(
                "GGUF tokenizer model '{model}' is not supported yet (only byte-level BPE, 'gpt2', and \
                 SentencePiece, 'llama'); load the model's Hugging Face directory with its tokenizer.json instead"
            ))),
        }
    }

    /// SentencePiece pieces, scores and types. Defaults where keys are absent are llama.cpp's for
    /// this tokenizer model: BOS 1, EOS 2, BOS added, a space prefixed.
    fn from_gguf_spm(gguf: &GgufFile) -> Result<Self> {
        let tokens = string_array(gguf, "tokenizer.ggml.tokens")?;
        let scores = number_array(gguf, "tokenizer.ggml.scores", |v| v.to_f32().ok())?;
        let types = number_array(gguf, "tokenizer.ggml.token_type", |v| v.to_i32().ok())?;
        let flag = |key: &str, default: bool| match gguf.meta(key) {
            Some(Value::Bool(b)) => *b,
            _ => default,
        };
        let vocab = SpmVocab::new(tokens, scores, types, flag("tokenizer.ggml.add_space_prefix", true))?;
        let n = vocab.len() as u32;
        let id = |key: &str, default: u32| match gguf.meta(key) {
            Some(v) => v.to_u32().ok().filter(|&i| i < n),
            None => Some(default).filter(|&i| i < n),
        };
        let (bos, eos) = (id("tokenizer.ggml.bos_token_id", 1), id("tokenizer.ggml.eos_token_id", 2));
        let add_bos = flag("tokenizer.ggml.add_bos_token", true);
        let token_bytes = (0..n).map(|i| vocab.token_bytes(i)).collect();
        let eog_tokens = end_of_generation(eos, |name| vocab.id(name));
        Ok(Self { encoder: Encoder::Spm(Box::new(vocab)), token_bytes, bos_token: bos, eos_token: eos, add_bos, eog_tokens })
    }

    fn from_gguf_bpe(gguf: &GgufFile) -> Result<Self> {
        let tokens = string_array(gguf, "tokenizer.ggml.tokens")?;
        let merges = string_array(gguf, "tokenizer.ggml.merges")?
            .into_iter()
            .map(|m| m.split_once(' ').map(|(a, b)| (a.to_owned(), b.to_owned())))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| Error::corrupt("tokenizer.ggml.merges has an entry without a space"))?;
        let types = match gguf.meta("tokenizer.ggml.token_type") {
            Some(Value::Array(v)) => v.iter().map(|x| x.to_i32().unwrap_or(1)).collect(),
            _ => vec![1; tokens.len()],
        };
        let vocab: tokenizers::models::bpe::Vocab = tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
        let bpe =
            BPE::builder().vocab_and_merges(vocab, merges).build().or_kind(ErrorKind::CorruptFile, "invalid BPE vocabulary in GGUF")?;
        let mut tok = tokenizers::Tokenizer::new(bpe);
        let pre = gguf.meta_str("tokenizer.ggml.pre").unwrap_or("default");
        tok.with_pre_tokenizer(Some(pre_tokenizer(pre)?));
        tok.with_decoder(Some(DecoderWrapper::ByteLevel(ByteLevel::default())));
        // llama.cpp treats control (3) and user-defined (4) tokens as atomic in the input.
        let specials: Vec<AddedToken> =
            tokens.iter().zip(&types).filter(|(_, &ty)| ty == 3 || ty == 4).map(|(t, _)| AddedToken::from(t.clone(), true)).collect();
        tok.add_special_tokens(specials).or_kind(ErrorKind::CorruptFile, "invalid special tokens in GGUF")?;
        let id = |key: &str| gguf.meta(key).and_then(|v| v.to_u32().ok()).filter(|&i| (i as usize) < tokens.len());
        let add_bos = matches!(gguf.meta("tokenizer.ggml.add_bos_token"), Some(Value::Bool(true)));
        Self::assemble(tok, id("tokenizer.ggml.bos_token_id"), id("tokenizer.ggml.eos_token_id"), add_bos)
    }

    /// `tokenizer.json` plus the BOS/EOS names from `tokenizer_config.json` when present.
    pub fn from_hf_dir(dir: &Path, config: &serde_json::Value) -> Result<Self> {
        let path = dir.join("tokenizer.json");
        if !path.exists() {
            return Err(Error::new(ErrorKind::NotFound, format!("{} is missing", path.display())));
        }
        let invalid = |why: String| Error::corrupt(format!("invalid {}: {why}", path.display()));
        let json: serde_json::Value =
            serde_json::from_str(&crate::safetensors_dir::read_text(&path)?).map_err(|e| invalid(e.to_string()))?;
        // tokenizers panics on some malformed sections instead of returning an error.
        let tok = std::panic::catch_unwind(|| serde_json::from_value::<tokenizers::Tokenizer>(json))
            .map_err(|_| invalid("malformed tokenizer definition".into()))?
            .map_err(|e| invalid(e.to_string()))?;
        let id = |key: &str| token_name(config.get(key)).and_then(|name| tok.token_to_id(&name));
        let (bos, eos) = (id("bos_token"), id("eos_token"));
        let add_bos = config.get("add_bos_token").and_then(|v| v.as_bool()).unwrap_or(false);
        Self::assemble(tok, bos, eos, add_bos)
    }

    fn assemble(with_specials: tokenizers::Tokenizer, bos_token: Option<u32>, eos_token: Option<u32>, add_bos: bool) -> Result<Self> {
        let mut plain = with_specials.clone();
        plain.set_encode_special_tokens(true);
        let token_bytes = token_byte_table(&with_specials);
        let eog_tokens = end_of_generation(eos_token, |name| with_specials.token_to_id(name));
        let encoder = Encoder::Hf { with_specials: Box::new(with_specials), plain: Box::new(plain) };
        Ok(Self { encoder, token_bytes, bos_token, eos_token, add_bos, eog_tokens })
    }

    /// nanochat's tokenizer: documents start with `<|bos|>`; generation ends at
    /// `<|assistant_end|>` or `<|bos|>`, as upstream's engine stops.
    pub fn from_tiktoken(bpe: TiktokenBpe) -> Result<Self> {
        let need = |name: &str| bpe.special(name).ok_or_else(|| Error::corrupt(format!("the nanochat tokenizer has no {name} token")));
        let (bos, end) = (need("<|bos|>")?, need("<|assistant_end|>")?);
        let token_bytes = bpe.token_bytes();
        Ok(Self {
            encoder: Encoder::Tiktoken(bpe),
            token_bytes,
            bos_token: Some(bos),
            eos_token: Some(end),
            add_bos: true,
            eog_tokens: vec![end, bos],
        })
    }

    /// A character-level vocabulary: token `i` is the one character `pieces[i]`. It has no
    /// BOS or EOS, as nanoGPT's character models have none.
    pub fn from_chars(pieces: Vec<String>) -> Result<Self> {
        let mut ids = HashMap::with_capacity(pieces.len());
        for (id, piece) in pieces.iter().enumerate() {
            let mut chars = piece.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) if ids.insert(c, id as u32).is_none() => {}
                _ => return Err(Error::corrupt(format!("character vocabulary entry {id} is {piece:?}, not one distinct character"))),
            }
        }
        let token_bytes = pieces.into_iter().map(String::into_bytes).collect();
        Ok(Self { encoder: Encoder::Chars(ids), token_bytes, bos_token: None, eos_token: None, add_bos: false, eog_tokens: Vec::new() })
    }

    /// The id of a special token by its text, e.g. `<|user_start|>`.
    pub fn special_token(&self, name: &str) -> Option<u32> {
        match &self.encoder {
            Encoder::Hf { with_specials, .. } => with_specials.token_to_id(name),
            Encoder::Tiktoken(bpe) => bpe.special(name),
            Encoder::Spm(vocab) => vocab.id(name),
            Encoder::Chars(_) => None,
        }
    }

    pub fn vocab_size(&self) -> usize {
        self.token_bytes.len()
    }

    /// Every token's bytes, by id.
    pub fn token_bytes_table(&self) -> Vec<Vec<u8>> {
        self.token_bytes.clone()
    }

    /// Tokens that stand for a role or a boundary rather than text (added special tokens,
    /// control pieces, tiktoken's specials), with BOS and the end-of-generation tokens: what
    /// constrained decoding keeps grammar text from producing.
    pub fn special_ids(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = match &self.encoder {
            Encoder::Hf { with_specials, .. } => {
                with_specials.get_added_tokens_decoder().into_iter().filter(|(_, t)| t.special).map(|(id, _)| id).collect()
            }
            Encoder::Tiktoken(bpe) => bpe.specials().iter().map(|(_, id)| *id).collect(),
            Encoder::Spm(vocab) => vocab.special_ids().to_vec(),
            Encoder::Chars(_) => Vec::new(),
        };
        ids.extend(self.bos_token.iter().chain(&self.eog_tokens));
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// `special`: parse special-token text (as a rendered chat template needs); otherwise all
    /// input is plain text. `add_bos`: prepend BOS when the model has one, unless the text
    /// already starts with it (chat templates such as Gemma's write `{{ bos_token }}` themselves,
    /// and a doubled BOS is a prompt the model never saw in training).
    pub fn encode(&self, text: &str, special: bool, add_bos: bool) -> Result<Vec<u32>> {
        let mut ids = Vec::new();
        if add_bos {
            ids.extend(self.bos_token);
        }
        let start = ids.len();
        match &self.encoder {
            Encoder::Hf { with_specials, plain } => {
                let tok = if special { with_specials } else { plain };
                let enc = tok.encode(text, false).map_err(|e| Error::invalid(format!("cannot tokenize input: {e}")))?;
                ids.extend_from_slice(enc.get_ids());
            }
            Encoder::Tiktoken(bpe) if special => ids.extend(bpe.encode_with_specials(text)?),
            Encoder::Tiktoken(bpe) => ids.extend(bpe.encode_ordinary(text)?),
            Encoder::Spm(vocab) => ids.extend(vocab.encode(text, special)?),
            Encoder::Chars(vocab) => {
                for c in text.chars() {
                    let id = vocab.get(&c).ok_or_else(|| {
                        Error::invalid(format!("{c:?} is not in this model's {}-character vocabulary", self.token_bytes.len()))
                    })?;
                    ids.push(*id);
                }
            }
        }
        if start == 1 && ids.get(1) == ids.first() {
            ids.remove(0);
        }
        Ok(ids)
    }

    /// The exact bytes the ids stand for; may end inside a UTF-8 character.
    pub fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        for &id in ids {
            let bytes = self.token_bytes.get(id as usize).ok_or_else(|| {
                Error::invalid(format!("token id {id} is out of range: the vocabulary has {} tokens", self.token_bytes.len()))
            })?;
            out.extend_from_slice(bytes);
        }
        Ok(out)
    }

    /// Every token's bytes laid end to end, and where each starts (one offset more than
    /// tokens): for a caller that decodes without asking again per token.
    pub fn byte_table(&self) -> (Vec<u8>, Vec<u32>) {
        let mut offsets = Vec::with_capacity(self.token_bytes.len() + 1);
        let mut bytes = Vec::new();
        offsets.push(0);
        for token in &self.token_bytes {
            bytes.extend_from_slice(token);
            offsets.push(bytes.len() as u32);
        }
        (bytes, offsets)
    }

    /// Whole-text decoding. For a SentencePiece vocabulary that prefixes a space when encoding,
    /// the first token's leading space is that prefix and is dropped, as llama.cpp's detokenize does.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        let mut bytes = self.decode_bytes(ids)?;
        let first_starts_with_space = ids.first().and_then(|&id| self.token_bytes.get(id as usize)?.first()) == Some(&b' ');
        if matches!(&self.encoder, Encoder::Spm(v) if v.add_space_prefix()) && first_starts_with_space {
            bytes.remove(0);
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    pub fn token_text(&self, id: u32) -> Option<String> {
        match &self.encoder {
            Encoder::Hf { with_specials, .. } => with_specials.id_to_token(id),
            Encoder::Tiktoken(_) | Encoder::Chars(_) => self.token_bytes.get(id as usize).map(|b| String::from_utf8_lossy(b).into_owned()),
            Encoder::Spm(vocab) => vocab.piece(id).map(str::to_owned),
        }
    }
}

/// Tokens that end generation: EOS plus the known end-of-turn tokens the vocabulary has.
fn end_of_generation(eos: Option<u32>, lookup: impl Fn(&str) -> Option<u32>) -> Vec<u32> {
    let mut eog: Vec<u32> = eos.into_iter().collect();
    for id in END_OF_TURN_NAMES.iter().filter_map(|name| lookup(name)) {
        if !eog.contains(&id) {
            eog.push(id);
        }
    }
    eog
}

fn pre_tokenizer(pre: &str) -> Result<PreTokenizerWrapper> {
    let byte_level = |use_regex| PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, use_regex));
    let split = |re: &str| -> Result<PreTokenizerWrapper> {
        let s = Split::new(SplitPattern::Regex(re.to_owned()), SplitDelimiterBehavior::Isolated, false)
            .or_kind(ErrorKind::Internal, "pre-tokenizer regex")?;
        Ok(PreTokenizerWrapper::Split(s))
    };
    Ok(match pre {
        "default" | "gpt2" | "gpt-2" => byte_level(true),
        "smollm" => PreTokenizerWrapper::Sequence(Sequence::new(vec![PreTokenizerWrapper::Digits(Digits::new(true)), byte_level(true)])),
        "llama3" | "llama-bpe" | "llama-v3" | "smaug-bpe" => {
            PreTokenizerWrapper::Sequence(Sequence::new(vec![split(LLAMA3_SPLIT)?, byte_level(false)]))
        }
        "qwen2" => PreTokenizerWrapper::Sequence(Sequence::new(vec![split(QWEN2_SPLIT)?, byte_level(false)])),
        other => {
            return Err(Error::unsupported(format!(
                "GGUF pre-tokenizer '{other}' is not supported (known: default, gpt2, smollm, llama-bpe, qwen2)"
            )))
        }
    })
}

fn string_array(gguf: &GgufFile, key: &str) -> Result<Vec<String>> {
    match gguf.meta(key) {
        Some(Value::Array(items)) => {
            items.iter().map(|v| v.to_string().cloned().map_err(|_| Error::corrupt(format!("'{key}' must hold strings")))).collect()
        }
        _ => Err(Error::corrupt(format!("GGUF metadata is missing the string array '{key}'"))),
    }
}

/// A numeric array, one entry per token; empty when the key is absent (it is optional in GGUF).
fn number_array<T>(gguf: &GgufFile, key: &str, convert: impl Fn(&Value) -> Option<T>) -> Result<Vec<T>> {
    match gguf.meta(key) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => {
            items.iter().map(|v| convert(v).ok_or_else(|| Error::corrupt(format!("'{key}' holds a value of the wrong type")))).collect()
        }
        Some(_) => Err(Error::corrupt(format!("GGUF metadata '{key}' must be an array"))),
    }
}

/// `"<s>"` or `{"content": "<s>", ...}` as tokenizer_config.json spells special tokens.
fn token_name(v: Option<&serde_json::Value>) -> Option<String> {
    match v? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Object(o) => o.get("content")?.as_str().map(str::to_owned),
        _ => None,
    }
}

/// Bytes per id. Added (special) tokens are their literal text; byte-level BPE pieces are mapped
/// back through GPT-2's byte↔unicode table; SentencePiece pieces turn `▁` into a space and
/// `<0xNN>` into that byte.
fn token_byte_table(tok: &tokenizers::Tokenizer) -> Vec<Vec<u8>> {
    let added = tok.get_added_tokens_decoder();
    let byte_level = matches!(tok.get_decoder(), Some(DecoderWrapper::ByteLevel(_)));
    let unicode_to_byte: HashMap<char, u8> = gpt2_bytes_to_unicode().into_iter().map(|(b, c)| (c, b)).collect();
    let size = tok.get_vocab_size(true);
    (0..size as u32)
        .map(|id| {
            if let Some(t) = added.get(&id) {
                return t.content.as_bytes().to_vec();
            }
            let Some(piece) = tok.id_to_token(id) else { return Vec::new() };
            if byte_level {
                let mapped: Option<Vec<u8>> = piece.chars().map(|c| unicode_to_byte.get(&c).copied()).collect();
                return mapped.unwrap_or_else(|| piece.into_bytes());
            }
            if let Some(b) = spm::parse_byte_piece(&piece) {
                return vec![b];
            }
            piece.replace('\u{2581}', " ").into_bytes()
        })
        .collect()
}

/// GPT-2's reversible map from bytes to printable unicode characters.
fn gpt2_bytes_to_unicode() -> Vec<(u8, char)> {
    let printable = |b: u8| (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b);
    let mut next = 256u32;
    (0..=255u8)
        .map(|b| {
            if printable(b) {
                (b, b as char)
            } else {
                let c = char::from_u32(next).unwrap_or('?');
                next += 1;
                (b, c)
            }
        })
        .collect()
}
