//! Loads the real default model, converted to F32 by our converter (scripts/prepare-test-models.mjs
//! makes it; `npm test` runs that first).
// Each test crate that includes this module uses part of it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::OnceLock;

use kvengine::LoadedModel;

pub fn model_path(kind: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../models/SmolLM2-135M-Instruct.{kind}.gguf"));
    assert!(path.exists(), "{} is missing: run `node scripts/prepare-test-models.mjs` (npm test does) before cargo test", path.display());
    path
}

pub fn f32_model() -> &'static LoadedModel {
    static MODEL: OnceLock<LoadedModel> = OnceLock::new();
    MODEL.get_or_init(|| kvengine::load(&model_path("F32"), &mut |_| {}).expect("load F32 model"))
}

pub fn argmax(v: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best as u32
}

pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

pub fn chat_prompt(m: &LoadedModel, user: &str) -> Vec<u32> {
    let text = format!("<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n");
    m.tokenizer.encode(&text, true, false).expect("encode")
}

/// The default model in Q8_0, multiplying by 8-bit activations (`Activations::Q8`).
pub fn q8_model() -> &'static LoadedModel {
    static MODEL: OnceLock<LoadedModel> = OnceLock::new();
    MODEL.get_or_init(|| {
        let placement =
            kvengine::Placement::Cpu(kvengine::matmul::MatmulOptions { activations: kvengine::matmul::Activations::Q8, quantize: None });
        kvengine::load_on(&model_path("Q8_0"), placement, &mut |_| {}).expect("load Q8_0 model with 8-bit activations")
    })
}
