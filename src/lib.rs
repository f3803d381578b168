//! kubectl-appupdate: placeholder while the pipeline lands.
pub fn main_with_args<I: IntoIterator<Item = std::ffi::OsString>>(_args: I) -> i32 {
    0
}
