//! `--wait`: after the writes, follow the Deployment's rollout and the routes the run wrote
//! until each is done, one fails, or `--timeout` runs out.
//!
//! The last step of a run. What it follows ([`Followed`]): the rollout when the run was given
//! an image (or wrote the Deployment), and every route (HTTPRoute, Ingress) the run created or
//! updated — not the ones it deleted. The decisions are pure functions of the live objects: the
//! rollout is `kubectl rollout status`'s ([`rollout_state`](appupdate_model::rollout::rollout_state), in [`appupdate_model::rollout`]); a
//! route is taken up when its controllers say so in its status ([`route_state`](appupdate_model::route_status::route_state), in
//! [`appupdate_model::route_status`]). [`follow_in`] watches each object on its own
//! ([`appupdate_kube::watch`]: a list+watch with `fieldSelector=metadata.name=<name>`, resumed
//! after dropped connections), all at once, and reports each new state to a [`Progress`]: indicatif bars on a terminal, or one plain line per
//! change otherwise — always on stderr, stdout stays for the plan and the report. A refusal (a
//! route's `False` condition) or a rollout past its deadline ends the wait at once.
//!
//! This module says what is followed ([`Followed`]) and what came of it ([`Waited`]); beside it,
//! `follow` is the follower, `progress` what it shows, `error` why a wait ended early.

mod error;
mod follow;
mod progress;

use appupdate_model::plan::{Action, Kind};
use appupdate_model::report::{Outcome, Report};
use appupdate_model::rollout::RolloutState;
use appupdate_model::route_status::{RouteRef, RouteState};
use appupdate_model::text::Untrusted;
use appupdate_plan::updaters::Plan;

pub use self::error::{PendingObject, WaitError, format_duration};
#[cfg(test)]
use self::follow::{LOOK_AFTER, LOOK_EVERY};
pub use self::follow::{WaitTarget, follow_in};

/// What ends a wait before `--timeout`, besides a refusal or the progress deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stop {
    /// `--fail-fast`: as soon as the rollout cannot succeed without someone acting.
    pub fail_fast: bool,
    /// `--crash-restarts`.
    pub crash_restarts: u32,
}

impl Stop {
    pub fn of(follow: &crate::settings::Follow) -> Stop {
        Stop {
            fail_fast: follow.fail_fast,
            crash_restarts: follow.crash_restarts,
        }
    }
}
pub use self::progress::{Bar, Lines, Progress};

/// One object `--wait` follows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    /// The Deployment's rollout ([`rollout_state`](appupdate_model::rollout::rollout_state)).
    Rollout,
    /// A route the run wrote ([`route_state`](appupdate_model::route_status::route_state)).
    Route(RouteRef),
}

/// What `--wait` follows in one cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Followed {
    /// The Deployment's rollout.
    pub rollout: bool,
    /// The routes, in the order of the plan.
    pub routes: Vec<RouteRef>,
}

impl Followed {
    /// After the writes of `report`: the rollout when the run was given an image (`image`) or
    /// wrote the Deployment, and every route it created or updated (or found already as
    /// planned). Deleted routes are not followed.
    pub fn after_writes(report: &Report, image: bool) -> Followed {
        let written = |o: &Outcome| matches!(o, Outcome::Applied | Outcome::AlreadyDone);
        let rollout = image
            || report.entries.iter().any(|(c, o)| {
                c.kind == Kind::Deployment && c.action() != Action::Unchanged && written(o)
            });
        let routes = report
            .entries
            .iter()
            .filter(|(c, o)| {
                matches!(c.action(), Action::Create | Action::Update)
                    && written(o)
                    && appupdate_model::route_status::state_function(c.kind).is_some()
            })
            .map(|(c, _)| RouteRef {
                kind: c.kind,
                name: c.name.clone(),
            })
            .collect();
        Followed { rollout, routes }
    }

    /// A run with nothing to write (a re-run after a timeout): the rollout when the run was
    /// given an image, and the application's routes the plan keeps as they are.
    pub fn without_writes(plan: &Plan, image: bool) -> Followed {
        let routes = plan
            .changes()
            .filter(|c| {
                c.action() == Action::Unchanged
                    && c.route.is_some()
                    && appupdate_model::route_status::state_function(c.kind).is_some()
            })
            .map(|c| RouteRef {
                kind: c.kind,
                name: c.name.clone(),
            })
            .collect();
        Followed {
            rollout: image,
            routes,
        }
    }

    pub fn is_empty(&self) -> bool {
        !self.rollout && self.routes.is_empty()
    }

    /// The rollout first, then the routes.
    pub fn subjects(&self) -> Vec<Subject> {
        self.rollout
            .then_some(Subject::Rollout)
            .into_iter()
            .chain(self.routes.iter().cloned().map(Subject::Route))
            .collect()
    }
}

/// How the wait ended when everything it followed was done.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waited {
    /// The completed rollout, when it was followed.
    pub rollout: Option<RolloutState>,
    /// Each route and what took it up.
    pub routes: Vec<(RouteRef, RouteState)>,
}

impl Waited {
    /// One line per object, escaped: `deployment.apps/web successfully rolled out (…)`,
    /// `httproute.gateway.networking.k8s.io/web-x accepted by Gateway gateways/public`.
    pub fn lines(&self, app: &str) -> Vec<String> {
        self.rollout
            .iter()
            .map(|state| {
                format!(
                    "deployment.apps/{} {}",
                    Untrusted(app),
                    Untrusted(state.to_string())
                )
            })
            .chain(
                self.routes
                    .iter()
                    .map(|(route, state)| format!("{} {state}", route.reference())),
            )
            .collect()
    }
}

impl Waited {
    /// In a few words, unescaped: `successfully rolled out (2 replicas updated and
    /// available); 2 routes taken up`.
    pub fn summary(&self) -> String {
        let routes = match self.routes.len() {
            0 => None,
            1 => Some("1 route taken up".to_owned()),
            n => Some(format!("{n} routes taken up")),
        };
        self.rollout
            .as_ref()
            .map(RolloutState::to_string)
            .into_iter()
            .chain(routes)
            .collect::<Vec<_>>()
            .join("; ")
    }
}

#[cfg(test)]
mod tests;
