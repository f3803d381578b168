//! kubectl-appupdate's model, the bottom of its pure crates: what an object change is (kinds,
//! field changes, writes and the bases they are conditional on, views and their YAML, the order
//! of writes, the approved-diff guard), the names and values the plugin accepts (object names,
//! route styles and route flags, the endpoints file with its injection guard), the routes in
//! the plugin's own terms (what records keep), the report of what happened, where a rollout stands, the `-o json`
//! document, what `--verify-url`'s answers mean, and how a value from outside is escaped for a
//! terminal.
//!
//! Nothing here talks to the cluster, the terminal or the environment: no tokio, hyper or kube
//! among the dependencies, and printing is denied crate-wide.
#![deny(clippy::print_stdout, clippy::print_stderr, clippy::dbg_macro)]

pub mod compact_json;
pub mod cosign;
pub mod endpoints_file;
pub mod image;
pub mod intent;
pub mod kuberc;
pub mod list_items;
pub mod names;
pub mod output;
pub mod owners;
pub mod plan;
pub mod refs;
pub mod report;
pub mod rollout;
pub mod route_status;
pub mod route_style;
pub mod text;
pub mod verify;
pub mod view_parts;
