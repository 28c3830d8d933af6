//! Grammar constraints for JavaScript: compiled off the JS thread, one per generated row, and
//! attached to a cache's rows (`NativeKvCache::set_constraint`) so each pass masks those rows'
//! logits before anything is picked from them.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use napi::{Env, Task};
use napi_derive::napi;

use super::{caught, guarded, task_error, Result};
use crate::grammar::{Constraint, GrammarCompiler, GrammarSpec};
use crate::LoadedModel;

pub(crate) type SharedConstraint = Arc<Mutex<Constraint>>;

/// A model's grammar compiler, built by the first grammar compiled for it.
pub(crate) type CompilerSlot = Arc<OnceLock<crate::Result<GrammarCompiler>>>;

/// One row's place in its grammar.
#[napi]
pub struct NativeConstraint {
    pub(crate) inner: SharedConstraint,
}

impl NativeConstraint {
    fn lock(&self) -> MutexGuard<'_, Constraint> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[napi]
impl NativeConstraint {
    /// Moves past a token the row took; INVALID_ARGUMENT when the grammar does not allow it.
    #[napi]
    pub fn consume(&self, token: u32) -> Result<()> {
        guarded(|| self.lock().consume(token))
    }

    /// Takes back the last `tokens` consumed.
    #[napi]
    pub fn rollback(&self, tokens: u32) -> Result<()> {
        guarded(|| self.lock().rollback(tokens as usize))
    }

    /// The grammar is complete and nothing may follow.
    #[napi(getter)]
    pub fn stopped(&self) -> bool {
        self.lock().is_stopped()
    }

    /// An independent copy at the same place.
    #[napi]
    pub fn fork(&self) -> NativeConstraint {
        NativeConstraint { inner: Arc::new(Mutex::new(self.lock().fork())) }
    }
}

pub struct CompileTask {
    pub(crate) model: Arc<LoadedModel>,
    pub(crate) compiler: CompilerSlot,
    pub(crate) kind: String,
    pub(crate) text: String,
}

impl Task for CompileTask {
    /// As `LoadTask`'s: the engine's result, rejected with its code by `resolve`.
    type Output = crate::Result<Constraint>;
    type JsValue = NativeConstraint;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        Ok(caught(|| {
            let spec = match self.kind.as_str() {
                "jsonSchema" => GrammarSpec::JsonSchema(&self.text),
                "grammar" => GrammarSpec::Lark(&self.text),
                "regex" => GrammarSpec::Regex(&self.text),
                other => return Err(crate::Error::invalid(format!("a grammar is 'jsonSchema', 'grammar' or 'regex', got '{other}'"))),
            };
            let model = &self.model;
            let compiler = self.compiler.get_or_init(|| GrammarCompiler::new(&model.tokenizer, model.model.config.vocab_size));
            compiler.as_ref().map_err(Clone::clone)?.compile(spec)
        }))
    }

    fn resolve(&mut self, env: Env, out: Self::Output) -> napi::Result<NativeConstraint> {
        let constraint = out.map_err(|e| task_error(&env, e))?;
        Ok(NativeConstraint { inner: Arc::new(Mutex::new(constraint)) })
    }
}
