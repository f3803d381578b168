// mimalloc on Linux: a large application's plan is millions of small JSON values, which glibc's
// and musl's malloc are slow at (Cargo.toml, docs/performance.md). macOS and Windows keep theirs.
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // As Go programs do: a fleet has a connection per cluster (crates/appupdate-shell/src/open_files.rs).
    appupdate_shell::open_files::raise();
    std::process::exit(appupdate_shell::main_with_args(std::env::args_os()));
}
