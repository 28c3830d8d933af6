//! Re-encodes a GGUF file's weights into another block format. The default model ships as Q4_1,
//! which candle only runs on its scalar path; Q8_0 / Q4_0 / Q4_K have SIMD kernels, and F32 is
//! the exact-arithmetic reference the golden tests compare llama.cpp against.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::Device;

use crate::error::{Error, ErrorKind, Result, ResultExt};
use crate::gguf::GgufFile;

pub fn parse_target(name: &str) -> Result<GgmlDType> {
    Ok(match name.to_ascii_lowercase().as_str() {
        "f32" => GgmlDType::F32,
        "f16" => GgmlDType::F16,
        "q8_0" => GgmlDType::Q8_0,
        "q4_0" => GgmlDType::Q4_0,
        "q4_k" => GgmlDType::Q4K,
        other => return Err(Error::invalid(format!("unknown target type '{other}': use f32, f16, q8_0, q4_0 or q4_k"))),
    })
}

/// llama.cpp's `general.file_type` code for a whole-file type, so tools that read it agree.
fn file_type_code(dtype: GgmlDType) -> u32 {
    match dtype {
        GgmlDType::F32 => 0,
        GgmlDType::F16 => 1,
        GgmlDType::Q4_0 => 2,
        GgmlDType::Q8_0 => 7,
        GgmlDType::Q4K => 15,
        _ => 0,
    }
}

/// Writes `output` with every matrix in `target` (1-D tensors such as norms stay F32). Matrices
/// whose rows do not divide into the target's blocks fall back to the nearest finer format, as
/// llama.cpp's quantizer does. `progress` receives the fraction of tensors done.
pub fn convert_gguf(input: &Path, output: &Path, target: GgmlDType, progress: &mut dyn FnMut(f64)) -> Result<()> {
    let file = GgufFile::open(input)?;
    let mut reader = std::io::BufReader::new(File::open(input)?);
    let mut names: Vec<(&String, u64)> = file.content.tensor_infos.iter().map(|(n, i)| (n, i.offset)).collect();
    names.sort_by_key(|&(_, offset)| offset);
    let mut tensors: Vec<(String, QTensor)> = Vec::with_capacity(names.len());
    for (i, (name, _)) in names.iter().enumerate() {
        let q = file
            .content
            .tensor(&mut reader, name, &Device::Cpu)
            .map_err(|e| Error::corrupt(format!("cannot read tensor '{name}': {e}")))?;
        tensors.push(((*name).clone(), requantize(&q, target)?));
        progress((i + 1) as f64 / names.len() as f64);
    }
    let file_type = Value::U32(file_type_code(target));
    // candle writes with the default 32-byte alignment, so a copied alignment key would lie.
    let mut metadata: Vec<(&str, &Value)> = file
        .content
        .metadata
        .iter()
        .filter(|(k, _)| k.as_str() != "general.alignment" && k.as_str() != "general.file_type")
        .map(|(k, v)| (k.as_str(), v))
        .chain(std::iter::once(("general.file_type", &file_type)))
        .collect();
    // candle keeps metadata in a HashMap, whose order changes from run to run; sorted keys make a
    // conversion byte-identical on every machine, so files derived from it can be pinned by hash.
    metadata.sort_by_key(|&(key, _)| key);
    let tensor_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let tmp = output.with_extension("gguf.partial");
    let mut w = BufWriter::new(File::create(&tmp).map_err(|e| Error::from(e).context(format!("cannot create {}", tmp.display())))?);
    gguf_file::write(&mut w, &metadata, &tensor_refs).or_kind(ErrorKind::Internal, "writing GGUF")?;
    w.flush()?;
    drop(w);
    std::fs::rename(&tmp, output)?;
    Ok(())
}

fn requantize(q: &QTensor, target: GgmlDType) -> Result<QTensor> {
    let dims = q.shape().dims();
    let row = dims.last().copied().unwrap_or(0);
    let dtype = if dims.len() < 2 {
        GgmlDType::F32
    } else if row % target.block_size() == 0 {
        target
    } else if row % GgmlDType::Q8_0.block_size() == 0 && target != GgmlDType::F32 && target != GgmlDType::F16 {
        // K-quants need 256-wide rows; SmolLM2's 576 is not, so those rows use Q8_0 or Q4_0.
        if target == GgmlDType::Q4K {
            GgmlDType::Q4_0
        } else {
            GgmlDType::Q8_0
        }
    } else {
        GgmlDType::F32
    };
    Ok(QTensor::quantize(&q.dequantize(&Device::Cpu)?, dtype)?)
}
