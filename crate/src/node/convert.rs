use std::path::PathBuf;

use napi::bindgen_prelude::AsyncTask;
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi::{Env, Task};
use napi_derive::napi;

use super::model::ProgressFn;
use super::{caught, task_error};

pub struct ConvertTask {
    input: PathBuf,
    output: PathBuf,
    target: String,
    progress: Option<ProgressFn>,
}

impl Task for ConvertTask {
    /// As `LoadTask`'s: the engine's result, rejected with its code by `resolve`.
    type Output = crate::Result<()>;
    type JsValue = ();

    fn compute(&mut self) -> napi::Result<Self::Output> {
        let progress = self.progress.take();
        Ok(caught(|| {
            let target = crate::convert::parse_target(&self.target)?;
            crate::convert::convert_gguf(&self.input, &self.output, target, &mut |f| {
                if let Some(p) = &progress {
                    p.call(f, ThreadsafeFunctionCallMode::NonBlocking);
                }
            })
        }))
    }

    fn resolve(&mut self, env: Env, out: Self::Output) -> napi::Result<()> {
        out.map_err(|e| task_error(&env, e))
    }
}

/// Re-encodes a GGUF file's weights as f32, f16, q8_0, q4_0 or q4_k, off the JS thread.
#[napi(ts_return_type = "Promise<void>")]
pub fn convert_gguf(
    input: String,
    output: String,
    target: String,
    #[napi(ts_arg_type = "(fraction: number) => void")] progress: Option<ProgressFn>,
) -> AsyncTask<ConvertTask> {
    AsyncTask::new(ConvertTask { input: input.into(), output: output.into(), target, progress })
}
