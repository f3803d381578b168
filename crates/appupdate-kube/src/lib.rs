//! kubectl-appupdate's connection to a cluster, as kubectl makes it: which kubeconfig, context,
//! user and namespace ([`selection`], [`kube_context`]: kubectl's selection rules and
//! credentials), which proxy ([`proxy`]: kubectl's rules) and the TCP leg through it
//! ([`proxy_connector`]), one HTTP/2 connection per cluster ([`transport`]), opened and closed in sessions that bound how
//! many are open at once ([`connections`]), the cluster client
//! that sends every request ([`cluster`]), watches an object ([`watch`]) and reads what explains
//! a rollout that goes wrong ([`evidence`]), and how a failure of any of them is worded
//! ([`describe`]); `--verify-url`'s requests to the routing layer, over
//! the same connector without credentials ([`probe`]); and every file the plugin reads, each
//! within a bound ([`files`]).
//!
//! It reads the files and the network it is pointed at, and nothing else: no terminal, no
//! environment (the plugin's `settings` reads that once and passes it in).
#![deny(clippy::print_stdout, clippy::print_stderr, clippy::dbg_macro)]

pub mod cluster;
pub mod connections;
pub mod credential_policy;
pub mod describe;
pub mod evidence;
pub mod files;
pub mod kube_context;
pub mod probe;
pub mod proxy;
pub mod proxy_connector;
pub mod registry;
pub mod selection;
pub mod transport;
pub mod watch;
