//! kubectl-appupdate's diff: a plan, or a fleet's combined plan, as the text people read before
//! they confirm — every value escaped, colour pinned by the caller ([`diff_render`]).
//!
//! Writes into an `impl Write`; no tokio, hyper or kube among the dependencies, and printing is
//! denied crate-wide.
#![deny(clippy::print_stdout, clippy::print_stderr, clippy::dbg_macro)]

pub mod diff_render;
pub mod view_yaml;
