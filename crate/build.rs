fn main() {
    // Only the Node addon needs N-API link arguments; `cargo test --no-default-features` must not.
    if std::env::var_os("CARGO_FEATURE_NODE").is_some() {
        napi_build::setup();
    }
}
