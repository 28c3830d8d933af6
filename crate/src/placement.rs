//! Where a model runs: the CPU (our kernels) or, in a build with the `cuda` feature, a CUDA GPU.
//! Asking for CUDA where it cannot work is an `Unsupported` error, never a crash.

use candle_core::DType;

use crate::any_model::LanguageModel;
use crate::config::{Architecture, ModelConfig};
use crate::error::{Error, Result};
use crate::matmul::{Activations, MatmulOptions};
use crate::model::Model;
use crate::unfused::Unfused;
use crate::weights::{Quantize, WeightSource};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Our kernels, multiplying Q8_0/Q4_0 weights by `options.activations`, full-precision
    /// matrices quantized first to `options.quantize` where given.
    Cpu(MatmulOptions),
    /// The first CUDA device, computing in `dtype` (f32, f16 or bf16).
    Cuda { dtype: DType },
}

/// The one default, for Rust's `load` and the binding's `loadModel` alike, so tests run the road
/// users get: the CPU, with 8-bit activations where this CPU's kernels make them both faster
/// and independent of batching (`Activations::preferred`), else f32.
impl Default for Placement {
    fn default() -> Self {
        Self::Cpu(MatmulOptions { activations: Activations::preferred(), quantize: None })
    }
}

impl Placement {
    /// The CPU with f32 activations: the road whose logits match a reference's to float rounding.
    pub const CPU_F32: Self = Self::Cpu(MatmulOptions { activations: Activations::F32, quantize: None });

    /// From the binding's strings: device "cpu" or "cuda", dtype "f32" | "f16" | "bf16" (CUDA
    /// only; bf16 when absent), activations "f32" | "q8" (CPU only; the default placement's when
    /// absent), quantize "q8_0" | "q4_0" (CPU only).
    pub fn parse(device: Option<&str>, dtype: Option<&str>, activations: Option<&str>, quantize: Option<&str>) -> Result<Self> {
        match (device.unwrap_or("cpu"), dtype) {
            ("cpu", None) => {
                let preferred = Activations::preferred();
                let activations = activations.map(Activations::parse).transpose()?.unwrap_or(preferred);
                Ok(Self::Cpu(MatmulOptions { activations, quantize: quantize.map(Quantize::parse).transpose()? }))
            }
            ("cpu", Some(_)) => Err(Error::invalid("dtype applies to device 'cuda' only; the CPU path keeps each weight's own format")),
            ("cuda", _) if activations.is_some() => {
                Err(Error::invalid("activations apply to device 'cpu' only; a CUDA model computes in its dtype"))
            }
            ("cuda", _) if quantize.is_some() => {
                Err(Error::invalid("quantize applies to device 'cpu' only; a CUDA model converts its weights to its dtype"))
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
        Placement::Cpu(options) => Ok(Model::load(src, config, options, progress)?.into()),
        // The CUDA model runs Llama's block only, none of the variant's options (Gemma 3).
        Placement::Cuda { .. } if !config.variant.is_plain() => {
            Err(Error::unsupported(format!("{:?} models run on the CPU only; load with device 'cpu'", config.architecture)))
        }
        Placement::Cuda { dtype } => load_cuda(src, config, dtype, progress),
    }
}

/// nanochat's GPT runs on the CPU only: how its projections multiply there.
pub(crate) fn check_nanochat(placement: Placement) -> Result<MatmulOptions> {
    match placement {
        Placement::Cpu(options) => Ok(options),
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
        let cpu = |activations, quantize| Placement::Cpu(MatmulOptions { activations, quantize });
        assert_eq!(Placement::parse(None, None, None, None).unwrap(), Placement::default());
        assert_eq!(Placement::parse(None, None, Some("f32"), None).unwrap(), Placement::CPU_F32);
        assert_eq!(Placement::parse(None, None, Some("q8"), None).unwrap(), cpu(Activations::Q8, None));
        assert_eq!(Placement::parse(None, None, Some("f32"), Some("q4_0")).unwrap(), cpu(Activations::F32, Some(Quantize::Q4_0)));
        assert_eq!(Placement::parse(None, None, None, Some("q8_0")).unwrap(), cpu(Activations::preferred(), Some(Quantize::Q8_0)));
        assert_eq!(Placement::parse(Some("cuda"), None, None, None).unwrap(), Placement::Cuda { dtype: DType::BF16 });
        assert_eq!(Placement::parse(Some("cuda"), Some("f16"), None, None).unwrap(), Placement::Cuda { dtype: DType::F16 });
        assert!(Placement::parse(Some("gpu"), None, None, None).is_err());
        assert!(Placement::parse(Some("cpu"), Some("f16"), None, None).is_err());
        assert!(Placement::parse(Some("cuda"), Some("f64"), None, None).is_err());
        assert!(Placement::parse(Some("cuda"), None, Some("q8"), None).is_err());
        assert!(Placement::parse(Some("cuda"), None, None, Some("q8_0")).is_err());
        assert!(Placement::parse(None, None, Some("int4"), None).is_err());
        assert!(Placement::parse(None, None, None, Some("q4_k")).is_err());
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
