//! Controllers: clients of the store that act on its events, as the controller manager of a
//! real cluster would. Only the Deployment rollout simulation exists ([`rollout`]); the
//! recorded cluster ran none, so it is off by default.
//!
//! Uses [`crate::store`], [`crate::kinds`] and [`crate::model`].

pub mod rollout;
