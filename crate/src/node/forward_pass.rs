//! One forward pass as the binding runs it: `NativeModel.forward`'s options checked into a
//! `ForwardPass`, run on the compute pool, and its results written into the caller's arrays.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use napi::bindgen_prelude::{Float32Array, Uint32Array};
use napi_derive::napi;

use super::kv_cache::SharedCache;
use super::{guarded, Result};
use crate::candidates::Candidates;
use crate::error::{Error, ErrorKind};
use crate::kv_cache::KvCache;
use crate::loader::LoadedModel;
use crate::model::LogitsFor;

/// `forward`'s options, validated by src/Model.ts, which alone calls it.
#[napi(object, object_to_js = false)]
pub struct NativeForwardOptions {
    /// Logits for every new token, not only each row's last.
    pub all_logits: bool,
    /// Whether logits come back at all (into `logitsInto` when given).
    pub logits: bool,
    pub logits_into: Option<Float32Array>,
    /// How many of each logits row's highest tokens to pick, into the two arrays below.
    pub candidates: Option<u32>,
    pub candidate_ids: Option<Uint32Array>,
    pub candidate_logits: Option<Float32Array>,
    /// Greedy passes run back to back (1 when absent).
    pub steps: Option<u32>,
}

/// One forward pass as the binding runs it, from its arguments to the promise's value. Results
/// go into the caller's arrays where it gives them: a decode step then makes no JS object but
/// its promise (each typed array made per step cost ~12 µs on the JS thread, its caches cold
/// after the pass).
pub(super) struct ForwardPass {
    model: Arc<LoadedModel>,
    cache: Arc<SharedCache>,
    tokens: Vec<Vec<u32>>,
    which: LogitsFor,
    cancel: Option<Arc<AtomicBool>>,
    logits: LogitsOut,
    candidates: Option<CandidatesInto>,
    /// Greedy passes run back to back, each feeding the last one's top candidates (1: one pass).
    steps: usize,
}

/// Where a pass's logits go.
enum LogitsOut {
    /// A buffer the caller reuses across steps: no fresh array per step for V8 to collect.
    Into(Float32Array),
    Fresh,
    /// Nowhere: the caller samples from candidates alone.
    Dropped,
}

/// Each logits row's highest `per_row` tokens, written into the caller's arrays.
struct CandidatesInto {
    per_row: usize,
    ids: Uint32Array,
    logits: Float32Array,
}

impl CandidatesInto {
    /// Copies one pass's candidates in at element `at`; returns where the next pass's go.
    fn write(&mut self, at: usize, picked: &Candidates) -> usize {
        let end = at + picked.ids.len();
        // SAFETY: the JS side holds these arrays until the promise settles and does not touch
        // them meanwhile; `check_buffers` sized them for every pass of the call.
        unsafe {
            self.ids.as_mut()[at..end].copy_from_slice(&picked.ids);
            self.logits.as_mut()[at..end].copy_from_slice(&picked.logits);
        }
        end
    }
}

impl ForwardPass {
    /// The pass `options` ask for, checked: every combination the options cannot mean is an
    /// error here, before anything runs.
    pub(super) fn new(
        model: Arc<LoadedModel>,
        cache: Arc<SharedCache>,
        tokens: Vec<Vec<u32>>,
        cancel: Option<Arc<AtomicBool>>,
        options: NativeForwardOptions,
    ) -> crate::Result<Self> {
        let NativeForwardOptions { all_logits, logits, logits_into, candidates, candidate_ids, candidate_logits, steps } = options;
        let steps = steps.unwrap_or(1).max(1) as usize;
        if steps > 1 && (candidates.unwrap_or(0) == 0 || logits || all_logits) {
            return Err(Error::invalid("steps > 1 decodes greedily from candidates: ask for candidates, with logits and allLogits off"));
        }
        let candidates = match (candidates, candidate_ids, candidate_logits) {
            (None | Some(0), None, None) => None,
            (Some(n), Some(ids), Some(logits)) => {
                Some(CandidatesInto { per_row: (n as usize).min(model.model.config.vocab_size), ids, logits })
            }
            _ => return Err(Error::invalid("candidates needs both candidateIds and candidateLogits arrays")),
        };
        let logits = match (logits_into, logits) {
            (Some(into), true) => LogitsOut::Into(into),
            (None, true) => LogitsOut::Fresh,
            (None, false) => LogitsOut::Dropped,
            (Some(_), false) => return Err(Error::invalid("logitsInto needs logits")),
        };
        let which = if all_logits { LogitsFor::All } else { LogitsFor::LastPerRow };
        Ok(Self { model, cache, tokens, which, cancel, logits, candidates, steps })
    }

    /// Checked before the pass, so a buffer that is too small costs nothing and changes nothing.
    fn check_buffers(&self) -> crate::Result<()> {
        let rows = match self.which {
            LogitsFor::All => self.tokens.iter().map(Vec::len).sum(),
            LogitsFor::LastPerRow => self.tokens.iter().filter(|t| !t.is_empty()).count(),
        };
        if let LogitsOut::Into(into) = &self.logits {
            let needed = rows.saturating_mul(self.model.model.config.vocab_size);
            if into.len() < needed {
                return Err(Error::invalid(format!(
                    "logitsInto holds {} floats but this pass returns {needed} ({rows} rows × the vocabulary); size it rows × vocabSize",
                    into.len()
                )));
            }
        }
        if let Some(c) = &self.candidates {
            let needed = rows.saturating_mul(c.per_row).saturating_mul(self.steps);
            if c.ids.len() < needed || c.logits.len() < needed {
                return Err(Error::invalid(format!(
                    "the candidate arrays hold {} ids and {} logits but this call picks {needed} ({rows} rows × {} × {} steps); size them rows × candidates × steps",
                    c.ids.len(),
                    c.logits.len(),
                    c.per_row,
                    self.steps
                )));
            }
        }
        Ok(())
    }

    /// The pass itself, on a pool thread; returns the logits unless they went into a buffer.
    pub(super) fn run(&mut self) -> Result<Vec<f32>> {
        let shared = self.cache.clone();
        shared.with(|cache| self.run_on(cache))
    }

    /// The pass, with the cache's lock held.
    fn run_on(&mut self, cache: &mut KvCache) -> Result<Vec<f32>> {
        if self.cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed)) {
            return Err(super::to_napi(Error::new(ErrorKind::Aborted, "the forward pass was cancelled")));
        }
        self.check_buffers().map_err(super::to_napi)?;
        let per_row = self.candidates.as_ref().map_or(0, |c| c.per_row);
        let constraints = self.cache.constraints();
        if self.steps > 1 && constraints.iter().any(Option::is_some) {
            return Err(super::to_napi(Error::invalid("a cache with constrained rows decodes one pass per call: steps must be 1")));
        }
        if self.steps > 1 {
            let passes =
                guarded(|| self.model.model.forward_greedy_steps(&self.tokens, cache, self.steps, self.cancel.as_deref(), per_row))?;
            if let Some(into) = &mut self.candidates {
                passes.iter().fold(0, |at, picked| into.write(at, picked));
            }
            return Ok(Vec::new());
        }
        let mut locked: Vec<_> = constraints.iter().map(|c| c.as_ref().map(|c| c.lock().unwrap_or_else(|p| p.into_inner()))).collect();
        let mut rows: Vec<_> = locked.iter_mut().map(|g| g.as_deref_mut()).collect();
        let (out, picked) =
            guarded(|| self.model.model.forward_picking(&self.tokens, cache, self.which, self.cancel.as_deref(), per_row, &mut rows))?;
        if let (Some(into), Some(picked)) = (&mut self.candidates, picked) {
            into.write(0, &picked);
        }
        // SAFETY: the JS side holds this array until the promise settles and does not touch it
        // meanwhile; its length was checked above.
        if let LogitsOut::Into(buffer) = &mut self.logits {
            unsafe { buffer.as_mut()[..out.logits.len()].copy_from_slice(&out.logits) };
        }
        Ok(out.logits)
    }

    /// The promise's value, on the JS thread (where the caller's arrays are also let go).
    pub(super) fn result(self, logits: Vec<f32>) -> Option<Float32Array> {
        match self.logits {
            LogitsOut::Into(buffer) => Some(buffer),
            LogitsOut::Fresh => Some(Float32Array::new(logits)),
            LogitsOut::Dropped => None,
        }
    }
}
