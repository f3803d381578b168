//! kubectl-appupdate's planning, over [`appupdate_model`]: the updaters ([`updaters`]: the
//! closed set, and the Deployment's and HPA's), the route styles ([`routes`]), the planner that turns requested updates and
//! the live objects ([`live`]) into a plan ([`planner`]), history records ([`history`]) and
//! their undo ([`undo`]), saved plans ([`plan_file`]) and a fleet's combined plan
//! ([`fleet_plan`]).
//!
//! Data in, data out: no tokio, hyper or kube among the dependencies, and printing is denied
//! crate-wide. The plugin (the `kubectl-appupdate` crate) reads, asks and writes around it.
#![deny(clippy::print_stdout, clippy::print_stderr, clippy::dbg_macro)]

pub mod applied;
pub mod fleet_plan;
pub mod history;
pub mod live;
pub mod plan_file;
pub mod planner;
pub mod routes;
pub mod undo;
pub mod updaters;
