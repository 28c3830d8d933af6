//! The engine's addon is compiled for x86-64-v3 (candle picks its SIMD kernels at compile time),
//! so on an older CPU it can fault with SIGILL while it is still being loaded, before any check of
//! its own runs. This addon is compiled for plain x86-64 and asks the CPU itself (CPUID, which
//! emulators answer for the CPU they emulate, unlike /proc/cpuinfo), so the loader can refuse
//! with a clear error instead of dying.

use napi_derive::napi;

/// The x86-64-v3 features (beyond x86-64-v1) this CPU lacks; empty on a v3 CPU and on any
/// other architecture, whose addons have no such floor.
#[napi]
pub fn missing_cpu_features() -> Vec<String> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        let features = [
            ("cmpxchg16b", has!("cmpxchg16b")),
            ("popcnt", has!("popcnt")),
            ("sse3", has!("sse3")),
            ("ssse3", has!("ssse3")),
            ("sse4.1", has!("sse4.1")),
            ("sse4.2", has!("sse4.2")),
            ("avx", has!("avx")),
            ("avx2", has!("avx2")),
            ("bmi1", has!("bmi1")),
            ("bmi2", has!("bmi2")),
            ("f16c", has!("f16c")),
            ("fma", has!("fma")),
            ("lzcnt", has!("lzcnt")),
            ("movbe", has!("movbe")),
            ("xsave", has!("xsave")),
        ];
        features.iter().filter(|(_, present)| !present).map(|(name, _)| name.to_string()).collect()
    }
    #[cfg(not(target_arch = "x86_64"))]
    Vec::new()
}
