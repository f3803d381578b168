//! Links the plugin's executables as position-dependent on linux/amd64 with glibc: the loader
//! then has no relocations to apply to the binary at start-up (13 600 of them, and the
//! 250 KB of pages they write) — `--version` 1.28 → 1.05 ms of CPU, 268 → 209 page faults —
//! and the file is 320 KB smaller. kubectl and other Go binaries are linked the same way. The
//! cost: the executable's own code is not placed at a random address (shared libraries, the
//! stack and the heap still are). Other targets (the static musl release builds) keep
//! rustc's default.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("CARGO_CFG_TARGET_OS") == "linux"
        && var("CARGO_CFG_TARGET_ARCH") == "x86_64"
        && var("CARGO_CFG_TARGET_ENV") == "gnu"
    {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
