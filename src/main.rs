/// mimalloc instead of the system allocator: planning a large application allocates millions of
/// small values (JSON trees, strings), and glibc's malloc spent about half of the CPU time in
/// malloc, free and the consolidation of freed chunks (docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(kubectl_appupdate::main_with_args(std::env::args_os()));
}
