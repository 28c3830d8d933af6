//! candle compiles its SIMD kernels in or out with `#[cfg(target_feature)]`, and our build sets
//! `target-cpu=x86-64-v3`. Running that binary on an older CPU dies with SIGILL somewhere deep in
//! a matmul; checking up front turns that into an error the user can act on. From Node, the probe
//! addon (crate/cpu_probe) asks first, before this binary is even loaded; this check covers Rust
//! users of the crate.

use crate::error::{Error, Result};

pub fn check() -> Result<()> {
    #[cfg(target_arch = "x86_64")]
    {
        let mut missing = Vec::new();
        if cfg!(target_feature = "avx2") && !std::arch::is_x86_feature_detected!("avx2") {
            missing.push("avx2");
        }
        if cfg!(target_feature = "fma") && !std::arch::is_x86_feature_detected!("fma") {
            missing.push("fma");
        }
        if cfg!(target_feature = "f16c") && !std::arch::is_x86_feature_detected!("f16c") {
            missing.push("f16c");
        }
        if !missing.is_empty() {
            return Err(Error::unsupported(format!(
                "this kvengine binary was built for x86-64-v3 CPUs but this CPU lacks {}; \
                 build the crate with RUSTFLAGS=\"-C target-cpu=native\" for this CPU",
                missing.join(", ")
            )));
        }
    }
    Ok(())
}
