//! Controllers: clients of the store that act on its events, as the controller manager, the
//! scheduler and a kubelet of a real cluster would. [`rollout`] chooses what runs (the
//! recorded cluster ran nothing, so by default nothing does); [`cluster`] is what `Auto` runs:
//! Deployments, ReplicaSets, pods, a node, Events and quotas.
//!
//! Uses [`crate::store`], [`crate::kinds`] and [`crate::model`].

pub mod cluster;
pub mod rollout;
