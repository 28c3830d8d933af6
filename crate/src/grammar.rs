//! Constrained decoding: a JSON schema, Lark grammar or regular expression compiled by
//! llguidance against the model's vocabulary, and per row a `Constraint` that says which tokens
//! may come next. A pass masks each constrained row's logits before anything is picked or
//! sampled from them (`LanguageModel::forward_picking`), so every sampler sees only tokens the
//! grammar allows.
//!
//! llguidance works from each token's bytes alone (`tokenize_is_canonical` is false): text the
//! grammar forces is not forced as tokens, the mask allows exactly the tokens that spell it, and
//! the model picks how. Special tokens are marked with the 0xFF byte llguidance expects, so
//! grammar text can never produce them; end-of-generation tokens are allowed once the grammar
//! is complete.

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{SimpleVob, TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};
use llguidance::{Matcher, ParserFactory};

use crate::error::{Error, Result};
use crate::tokenizer::Tokenizer;

/// What a generation's output must match.
#[derive(Debug, Clone, Copy)]
pub enum GrammarSpec<'a> {
    /// A JSON Schema (as JSON text). Written compactly (no whitespace between tokens) unless
    /// the schema sets llguidance's `x-guidance` options itself.
    JsonSchema(&'a str),
    /// A Lark grammar, in llguidance's dialect.
    Lark(&'a str),
    /// A regular expression the whole output matches.
    Regex(&'a str),
}

impl GrammarSpec<'_> {
    fn name(self) -> &'static str {
        match self {
            Self::JsonSchema(_) => "jsonSchema",
            Self::Lark(_) => "grammar",
            Self::Regex(_) => "regex",
        }
    }

    fn top_level(self) -> Result<TopLevelGrammar> {
        Ok(match self {
            Self::JsonSchema(text) => {
                let mut schema: serde_json::Value =
                    serde_json::from_str(text).map_err(|e| Error::invalid(format!("jsonSchema is not valid JSON: {e}")))?;
                let object = schema.as_object_mut().ok_or_else(|| Error::invalid("jsonSchema must be a JSON object"))?;
                // Flexible whitespace lets a model write spaces or newlines without end between
                // tokens, and small models do; compact JSON is what callers parse.
                object.entry("x-guidance").or_insert_with(|| serde_json::json!({ "whitespace_flexible": false }));
                TopLevelGrammar::from_json_schema(schema)
            }
            Self::Lark(text) => TopLevelGrammar::from_lark(text.to_owned()),
            Self::Regex(text) => TopLevelGrammar::from_regex(text),
        })
    }
}

/// The vocabulary as llguidance sees it, built once per model (a trie of every token's bytes
/// and a parser factory: a few hundred milliseconds on a 49k vocabulary).
pub struct GrammarCompiler {
    factory: ParserFactory,
    stop_tokens: Vec<u32>,
}

/// Token bytes only: llguidance never asks us to tokenize text (see the module comment).
struct BytesOnly {
    trie: TokTrie,
}

impl TokenizerEnv for BytesOnly {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }
    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        self.trie.greedy_tokenize(s)
    }
    fn tokenize_is_canonical(&self) -> bool {
        false
    }
}

impl GrammarCompiler {
    /// For a model whose logits are `vocab_size` wide (at least the tokenizer's vocabulary).
    pub fn new(tokenizer: &Tokenizer, vocab_size: usize) -> Result<Self> {
        let stop_tokens: Vec<u32> = tokenizer.eog_tokens.iter().copied().filter(|&t| (t as usize) < vocab_size).collect();
        let Some(&eos) = stop_tokens.first() else {
            return Err(Error::unsupported("constrained decoding needs an end-of-generation token, and this model's vocabulary has none"));
        };
        let mut words = tokenizer.token_bytes_table();
        words.resize(vocab_size, Vec::new());
        for id in tokenizer.special_ids().into_iter().chain(stop_tokens.iter().copied()) {
            if let Some(word) = words.get_mut(id as usize) {
                let name = tokenizer.token_text(id).unwrap_or_else(|| format!("<[{id}]>"));
                *word = [&[TokTrie::SPECIAL_TOKEN_MARKER], name.as_bytes()].concat();
            }
        }
        let info = TokRxInfo::new(vocab_size as u32, eos);
        let trie = TokTrie::from(&info, &words).with_eos_tokens(&stop_tokens);
        let env: TokEnv = Arc::new(BytesOnly { trie });
        let mut factory = ParserFactory::new_simple(&env).map_err(|e| Error::internal(format!("grammar setup failed: {e}")))?;
        factory.quiet();
        Ok(Self { factory, stop_tokens })
    }

    /// A fresh constraint at the start of `spec`; `INVALID_ARGUMENT` with llguidance's reason
    /// when it cannot be compiled.
    pub fn compile(&self, spec: GrammarSpec) -> Result<Constraint> {
        let parser = self.factory.create_parser(spec.top_level()?);
        let matcher = Matcher::new(parser);
        if let Some(reason) = matcher.get_error() {
            return Err(Error::invalid(format!("{} could not be compiled: {reason}", spec.name())));
        }
        Ok(Constraint { matcher, stop_tokens: self.stop_tokens.clone() })
    }
}

/// One row's place in its grammar.
pub struct Constraint {
    matcher: Matcher,
    stop_tokens: Vec<u32>,
}

impl Constraint {
    /// Sets every logit the grammar does not allow next to -inf. A complete grammar that cannot
    /// go on allows only the end-of-generation tokens.
    pub fn mask_logits(&mut self, logits: &mut [f32]) -> Result<()> {
        let allowed = self.allowed()?;
        for (words, chunk) in allowed.as_slice().iter().zip(logits.chunks_mut(32)) {
            if *words == u32::MAX {
                continue;
            }
            for (bit, logit) in chunk.iter_mut().enumerate() {
                if words & (1 << bit) == 0 {
                    *logit = f32::NEG_INFINITY;
                }
            }
        }
        Ok(())
    }

    fn allowed(&mut self) -> Result<SimpleVob> {
        // A stopped matcher errs on compute_mask and is then unusable; it only allows the end.
        self.matcher.compute_mask_or_eos().map_err(|e| self.failure("no next token fits the grammar", e))
    }

    /// Moves past `token`, which must be one the grammar allowed. An end-of-generation token
    /// after the grammar has stopped is taken as the end it is.
    pub fn consume(&mut self, token: u32) -> Result<()> {
        if self.matcher.is_stopped() && self.stop_tokens.contains(&token) {
            return Ok(());
        }
        self.matcher.consume_token(token).map_err(|e| self.failure(&format!("token {token} does not fit the grammar"), e))
    }

    /// Takes back the last `tokens` consumed (a rewound row).
    pub fn rollback(&mut self, tokens: usize) -> Result<()> {
        self.matcher.rollback(tokens).map_err(|e| self.failure("could not take tokens back", e))
    }

    /// Whether the grammar is complete and nothing may follow: the row is done.
    pub fn is_stopped(&self) -> bool {
        self.matcher.is_stopped()
    }

    /// An independent copy at the same place (one per sample of a prompt).
    pub fn fork(&self) -> Self {
        Self { matcher: self.matcher.deep_clone(), stop_tokens: self.stop_tokens.clone() }
    }

    fn failure(&self, what: &str, e: impl std::fmt::Display) -> Error {
        Error::invalid(format!("{what}: {}", self.matcher.get_error().unwrap_or_else(|| e.to_string())))
    }
}
