fn main() {
    // Only the Node addon needs N-API link arguments; `cargo test --no-default-features` must not.
    if std::env::var_os("CARGO_FEATURE_NODE").is_some() {
        napi_build::setup();
    }
    if std::env::var_os("CARGO_FEATURE_CUDA").is_some() {
        if let Err(e) = compile_kernels() {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}

/// Compiles src/cuda/kvattn.cu to PTX for the compute capability in CUDA_COMPUTE_CAP (default
/// 90, Hopper); the driver JIT-compiles it once per process when the module loads.
fn compile_kernels() -> Result<(), String> {
    const SRC: &str = "src/cuda/kvattn.cu";
    println!("cargo::rerun-if-changed={SRC}");
    for var in ["NVCC", "CUDA_HOME", "CUDA_COMPUTE_CAP"] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    let nvcc = std::env::var("NVCC")
        .ok()
        .or_else(|| std::env::var("CUDA_HOME").ok().map(|h| format!("{h}/bin/nvcc")))
        .unwrap_or_else(|| "nvcc".into());
    let cap = std::env::var("CUDA_COMPUTE_CAP").unwrap_or_else(|_| "90".into());
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").map_err(|e| e.to_string())?).join("kvattn.ptx");
    let status = std::process::Command::new(&nvcc)
        .args(["-ptx", "-O3", "-std=c++17", &format!("-arch=compute_{cap}"), SRC, "-o"])
        .arg(&out)
        .status()
        .map_err(|e| format!("cannot run {nvcc} (set CUDA_HOME or NVCC; `npm run build:cuda` sets both): {e}"))?;
    if !status.success() {
        return Err(format!("{nvcc} failed on {SRC}: {status}"));
    }
    Ok(())
}
