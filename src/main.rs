fn main() {
    std::process::exit(kubectl_appupdate::main_with_args(std::env::args_os()));
}
