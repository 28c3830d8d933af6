//! Where a model runs: the CPU (our kernels) or, in a build with the `cuda` feature, a CUDA GPU.
//! Asking for CUDA where it cannot work is an `Unsupported` error, never a crash.

use candle_core::DType;

use crate::any_model::LanguageModel;
use crate::config::{Architecture, ModelConfig};
use crate::error::{Error, Result};
use crate::matmul::Activations;
use crate::model::Model;
use crate::unfused::Unfused;
use crate::weights::WeightSource;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Our kernels, multiplying Q8_0/Q4_0 weights by `activations`.
    Cpu { activations: Activations },
    /// The first CUDA device, computing in `dtype` (f32, f16 or bf16).
    Cuda { dtype: DType },
}

/// The one default, for Rust's `load` and the binding's `loadModel` alike, so tests run the road
/// users get: the CPU, with 8-bit activations where this CPU's kernels make them both faster
/// and independent of batching (`Activations::preferred`), else f32.
impl Default for Placement {
    fn default() -> Self {
        Self::Cpu { activations: Activations::preferred() }
    }
}

impl Placement {
    /// The CPU with f32 activations: the road whose logits match a reference's to float rounding.
    pub const CPU_F32: Self = Self::Cpu { activations: Activations::F32 };

    /// From the binding's strings: device "cpu" or "cuda", dtype "f32" | "f16" | "bf16" (CUDA
    /// only; bf16 when absent), activations "f32" | "q8" (CPU only; the default placement's when absent).
    pub fn parse(device: Option<&str>, dtype: Option<&str>, activations: Option<&str>) -> Result<Self> {
        match (device.unwrap_or("cpu"), dtype) {
            ("cpu", None) => {
                Ok(activations.map(Activations::parse).transpose()?.map_or_else(Self::default, |activations| Self::Cpu { activations }))
            }
            ("cpu", Some(_)) => Err(Error::invalid("dtype applies to device 'cuda' only; the CPU path keeps each weight's own format")),
            ("cuda", _) if activations.is_some() => {
                Err(Error::invalid("activations apply to device 'cpu' only; a CUDA model computes in its dtype"))
            }
            ("cuda", dtype) => {
                let dtype = match dtype.unwrap_or("bf16") {
                    "f32" => DType::F32,
                    "f16" => DType::F16,
                    "bf16" => DType::BF16,
                    other => return Err(Error::invalid(format!("dtype must be 'f32', 'f16' or 'bf16', got '{other}'"))),
                };
                Ok(Self::Cuda { dtype })
            }
            (other, _) => Err(Error::invalid(format!("device must be 'cpu' or 'cuda', got '{other}'"))),
        }
    }
}

/// The Llama/Qwen2 family on the chosen device.
pub(crate) fn load_llama(
    src: &mut dyn WeightSource,
    config: ModelConfig,
    placement: Placement,
    progress: &mut dyn FnMut(f64),
) -> Result<LanguageModel> {
    if matches!(config.architecture, Architecture::Phi3 | Architecture::Gpt2) {
        return load_llama_from(&mut Unfused::new(src, &config), config, placement, progress);
    }
    load_llama_from(src, config, placement, progress)
}

fn load_llama_from(
    src: &mut dyn WeightSource,
    config: ModelConfig,
    placement: Placement,
    progress: &mut dyn FnMut(f64),
) -> Result<LanguageModel> {
    match placement {
        Placement::Cpu { activations } => Ok(Model::load(src, config, activations, progress)?.into()),
        // The CUDA model runs Llama's block only, none of the variant's options (Gemma 3).
        Placement::Cuda { .. } if !config.variant.is_plain() => {
            Err(Error::unsupported(format!("{:?} models run on the CPU only; load with device 'cpu'", config.architecture)))
        }
        Placement::Cuda { dtype } => load_cuda(src, config, dtype, progress),
    }
}

/// nanochat's GPT runs on the CPU only.
pub(crate) fn check_nanochat(placement: Placement) -> Result<()> {
    match placement {
        Placement::Cpu { .. } => Ok(()),
        Placement::Cuda { .. } => Err(Error::unsupported("nanochat checkpoints run on the CPU only; load with device 'cpu'")),
    }
}

#[cfg(not(feature = "cuda"))]
fn load_cuda(_: &mut dyn WeightSource, _: ModelConfig, _: DType, _: &mut dyn FnMut(f64)) -> Result<LanguageModel> {
    Err(Error::unsupported(
        "this build of kvengine has no CUDA support: install the CUDA variant (the kvengine-linux-x64-gnu-cuda package) or build it with `npm run build:cuda`",
    ))
}

#[cfg(feature = "cuda")]
fn load_cuda(src: &mut dyn WeightSource, config: ModelConfig, dtype: DType, progress: &mut dyn FnMut(f64)) -> Result<LanguageModel> {
    let device = cuda_device()?;
    Ok(crate::cuda::model::CudaModel::load(src, config, &device, dtype, progress)?.into())
}

/// The first GPU. A missing driver or device is an error from candle; a panic deeper down (a
/// driver library that loads but misbehaves) is turned into the same error.
#[cfg(feature = "cuda")]
pub fn cuda_device() -> Result<candle_core::Device> {
    let no_gpu = |why: String| Error::unsupported(format!("no usable CUDA GPU ({why}); load with device 'cpu' or check the NVIDIA driver"));
    match std::panic::catch_unwind(|| candle_core::Device::new_cuda(0)) {
        Ok(Ok(device)) => Ok(device),
        Ok(Err(e)) => Err(no_gpu(crate::error::candle_message(&e))),
        Err(_) => Err(no_gpu("the CUDA driver failed to initialise".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn parses_devices_and_dtypes() {
        assert_eq!(Placement::parse(None, None, None).unwrap(), Placement::default());
        assert_eq!(Placement::parse(None, None, Some("f32")).unwrap(), Placement::CPU_F32);
        assert_eq!(Placement::parse(None, None, Some("q8")).unwrap(), Placement::Cpu { activations: Activations::Q8 });
        assert_eq!(Placement::parse(Some("cuda"), None, None).unwrap(), Placement::Cuda { dtype: DType::BF16 });
        assert_eq!(Placement::parse(Some("cuda"), Some("f16"), None).unwrap(), Placement::Cuda { dtype: DType::F16 });
        assert!(Placement::parse(Some("gpu"), None, None).is_err());
        assert!(Placement::parse(Some("cpu"), Some("f16"), None).is_err());
        assert!(Placement::parse(Some("cuda"), Some("f64"), None).is_err());
        assert!(Placement::parse(Some("cuda"), None, Some("q8")).is_err());
        assert!(Placement::parse(None, None, Some("int4")).is_err());
    }

    struct NoWeights;

    impl WeightSource for NoWeights {
        fn contains(&self, _: &str) -> bool {
            false
        }
        fn load(&mut self, name: &str) -> Result<crate::weights::Weight> {
            Err(Error::invalid(format!("no tensor {name}")))
        }
    }

    /// Refused before any weight is read, with the way to get a CUDA build in the message.
    #[cfg(not(feature = "cuda"))]
    #[test]
    fn cuda_without_the_feature_is_unsupported() {
        let cfg = crate::config::test_config(1, 2, 1, 4);
        match load_llama(&mut NoWeights, cfg, Placement::Cuda { dtype: DType::BF16 }, &mut |_| {}) {
            Ok(_) => panic!("a CPU-only build loaded a model for CUDA"),
            Err(e) => {
                assert_eq!(e.kind, ErrorKind::Unsupported);
                assert!(e.message.contains("npm run build:cuda"), "{}", e.message);
            }
        }
        assert!(check_nanochat(Placement::Cuda { dtype: DType::F32 }).is_err_and(|e| e.kind == ErrorKind::Unsupported));
    }
}
