//! kubectl-appupdate's pure core: everything between the flags and the cluster that takes data
//! and returns data (or writes into an `impl Write`). Parsing ([`endpoints_file`], [`names`]),
//! the route styles ([`routes`]), planning ([`planner`], [`updaters`], [`plan`]), what a change
//! looks like ([`diff_render`], [`view_yaml`], [`output`], [`fleet_plan`], [`report`]), saved
//! plans ([`plan_file`]), history records and undo ([`history`], [`intent`], [`undo`]), the
//! judgement of route status ([`route_status`]) and the live objects as data ([`live`]).
//!
//! Nothing here talks to the cluster, the terminal or the environment: the crate has no
//! tokio, hyper or kube among its dependencies, and printing is denied crate-wide. The plugin
//! (the `kubectl-appupdate` crate) reads, asks and writes around it.
#![deny(clippy::print_stdout, clippy::print_stderr, clippy::dbg_macro)]

pub mod compact_json;
pub mod diff_render;
pub mod endpoints_file;
pub mod fleet_plan;
pub mod history;
pub mod intent;
pub mod live;
pub mod names;
pub mod output;
pub mod plan;
pub mod plan_file;
pub mod planner;
pub mod refs;
pub mod report;
pub mod route_status;
pub mod route_style;
pub mod routes;
pub mod text;
pub mod undo;
pub mod updaters;
pub mod view_yaml;
