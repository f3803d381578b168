//! The follower: each subject watched on its own, all at once, until each is done, one fails
//! or the time runs out ([`follow_in`], [`follow_observations`]).

use std::time::Duration;

use futures::future::BoxFuture;
use futures::{Stream, StreamExt};
use serde_json::Value;

use super::{Followed, PendingObject, Progress, Stop, Subject, WaitError, Waited};
use appupdate_kube::cluster::Cluster;
use appupdate_kube::watch::Observation;
use appupdate_model::plan::Kind;
use appupdate_model::rollout::{Explanation, Judge, RolloutState, rollout_state};
use appupdate_model::route_status::{RouteState, route_state};
use appupdate_model::text::Untrusted;

/// Where the followed objects are, for messages: the application's namespace and context.
#[derive(Clone, Debug)]
pub struct WaitTarget {
    pub namespace: String,
    /// The application: the Deployment's name.
    pub name: String,
    pub context: String,
}

impl WaitTarget {
    /// The Deployment of `app` in `cluster`'s namespace, through its context.
    pub fn of(cluster: &Cluster, app: &str) -> WaitTarget {
        WaitTarget {
            namespace: cluster.namespace().to_owned(),
            name: app.to_owned(),
            context: cluster.conn.context.clone(),
        }
    }

    /// `deployment.apps/web`, escaped.
    pub fn reference(&self) -> String {
        format!("deployment.apps/{}", Untrusted(&self.name))
    }

    fn described(&self) -> String {
        self.describe(&self.reference())
    }

    /// `<reference> in namespace "shop" (context "sandbox")`.
    fn describe(&self, reference: &str) -> String {
        format!(
            "{} in namespace {:?} (context {:?})",
            reference,
            Untrusted(&self.namespace),
            Untrusted(&self.context)
        )
    }

    /// The command that undoes the run: `kubectl appupdate web -n shop --context sandbox --undo`.
    fn undo(&self) -> String {
        format!(
            "kubectl appupdate {} -n {} --context {} --undo",
            self.name, self.namespace, self.context
        )
    }
}

/// Why a rollout is not done, from its new pods and their events: read only once something is
/// wrong (a rollout not complete after [`LOOK_AFTER`]), then every [`LOOK_EVERY`] while it
/// stays so, and once more when the wait ends without it.
pub trait Explain {
    fn explain<'a>(&'a self, deployment: &'a Value) -> BoxFuture<'a, Explanation>;
}

impl Explain for Cluster {
    fn explain<'a>(&'a self, deployment: &'a Value) -> BoxFuture<'a, Explanation> {
        Box::pin(async move {
            match self.rollout_evidence(deployment).await {
                Ok(evidence) => evidence.explain(deployment),
                Err(e) => e.explanation(),
            }
        })
    }
}

/// A healthy rollout that completes within this long costs no read of its pods.
pub const LOOK_AFTER: Duration = Duration::from_secs(5);
/// While a rollout stays incomplete, its pods are read again this often.
pub const LOOK_EVERY: Duration = Duration::from_secs(3);

async fn until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// What woke the follower.
enum Woken {
    Observed(Option<(usize, Observation)>),
    TimedOut,
    Look,
}

/// Where one subject of the wait stands.
#[derive(Default)]
struct Seen {
    /// Done (rollout complete, route taken up).
    done: bool,
    /// What it waits for, from the last object seen.
    last: Option<String>,
    /// The last problem since an object was seen.
    problem: Option<String>,
}

/// Consumes observations of the `subjects` (each tagged with its index) until every one is
/// done, one fails, or `timeout` (None: no bound) runs out. Pure apart from time: tests feed it
/// a stream of observations.
#[allow(clippy::too_many_arguments)]
pub async fn follow_observations<S>(
    observations: S,
    subjects: &[Subject],
    target: &WaitTarget,
    timeout: Option<Duration>,
    stop: Stop,
    explainer: &dyn Explain,
    progress: &mut dyn Progress,
) -> Result<Waited, WaitError>
where
    S: Stream<Item = (usize, Observation)>,
{
    let started = tokio::time::Instant::now();
    let deadline = timeout.map(|t| started + t);
    let mut look_at: Option<tokio::time::Instant> = None;
    let mut deployment: Option<Value> = None;
    let mut judge = Judge::new(stop.crash_restarts);
    let mut observations = std::pin::pin!(observations);
    let mut seen: Vec<Seen> = subjects.iter().map(|_| Seen::default()).collect();
    let mut rollout: Option<RolloutState> = None;
    let mut routes: Vec<Option<RouteState>> = subjects.iter().map(|_| None).collect();
    let described = |s: &Subject| match s {
        Subject::Rollout => target.described(),
        Subject::Route(r) => target.describe(&r.reference()),
    };
    let result = loop {
        if seen.iter().all(|s| s.done) {
            break Ok(());
        }
        let woken = tokio::select! {
            biased;
            next = observations.next() => Woken::Observed(next),
            () = until(deadline) => Woken::TimedOut,
            () = until(look_at) => Woken::Look,
        };
        let next = match woken {
            Woken::Observed(next) => next,
            Woken::TimedOut => {
                let why = match &deployment {
                    Some(d) if rollout.as_ref().is_none_or(|s| !s.is_complete()) => {
                        Some(explainer.explain(d).await)
                    }
                    _ => None,
                };
                break Err(timed_out(subjects, &seen, target, timeout, why));
            }
            Woken::Look => {
                look_at = Some(tokio::time::Instant::now() + LOOK_EVERY);
                let Some(d) = &deployment else { continue };
                let why = explainer.explain(d).await;
                if let Some(reason) = why.current() {
                    progress.reason(&reason);
                }
                if stop.fail_fast
                    && let Some(hopeless) = judge.observe(started.elapsed(), &why)
                {
                    break Err(WaitError::CannotSucceed {
                        target: target.described(),
                        kubectl_ref: format!("deployment/{}", target.name),
                        namespace: target.namespace.clone(),
                        after: started.elapsed(),
                        hopeless: hopeless.to_string(),
                        why: Box::new(why),
                    });
                }
                continue;
            }
        };
        let Some((i, observation)) = next else {
            let i = seen.iter().position(|s| !s.done).unwrap_or(0);
            let message = "the watch ended unexpectedly".to_owned();
            break Err(match subjects.get(i) {
                Some(Subject::Route(r)) => WaitError::RouteWatch {
                    target: target.describe(&r.reference()),
                    message,
                },
                _ => WaitError::Watch {
                    target: target.described(),
                    message,
                },
            });
        };
        let (Some(subject), Some(at)) = (subjects.get(i), seen.get_mut(i)) else {
            continue;
        };
        match observation {
            Observation::Gone => {
                break Err(match subject {
                    Subject::Rollout => WaitError::Deleted {
                        target: described(subject),
                    },
                    Subject::Route(_) => WaitError::RouteDeleted {
                        target: described(subject),
                    },
                });
            }
            Observation::Problem { message, fatal } => {
                if fatal {
                    break Err(match subject {
                        Subject::Rollout => WaitError::Watch {
                            target: described(subject),
                            message,
                        },
                        Subject::Route(_) => WaitError::RouteWatch {
                            target: described(subject),
                            message,
                        },
                    });
                }
                at.problem = Some(message);
            }
            // A completed rollout stays complete, as for `kubectl rollout status`.
            Observation::Object(_) if matches!(subject, Subject::Rollout) && at.done => {}
            Observation::Object(obj) => {
                at.problem = None;
                match subject {
                    Subject::Rollout => {
                        let state = rollout_state(&obj);
                        if state.is_complete() {
                            look_at = None;
                        } else if look_at.is_none() {
                            look_at = Some(started + LOOK_AFTER);
                        }
                        // A failure is said once, by the error; progress shows only the way there.
                        if !matches!(state, RolloutState::DeadlineExceeded { .. }) {
                            progress.update(&state);
                        }
                        match state {
                            RolloutState::DeadlineExceeded { .. } => {
                                let why = explainer.explain(&obj).await;
                                break Err(WaitError::Failed {
                                    target: target.described(),
                                    kubectl_ref: format!("deployment/{}", target.name),
                                    namespace: target.namespace.clone(),
                                    state: state.to_string(),
                                    why: Box::new(why),
                                });
                            }
                            state => {
                                at.done = state.is_complete();
                                at.last = Some(state.to_string());
                                rollout = Some(state);
                                deployment = Some(obj);
                            }
                        }
                    }
                    Subject::Route(route) => {
                        let Some(state) = route_state(route.kind, &obj) else {
                            at.done = true;
                            continue;
                        };
                        if let RouteState::Refused(refusal) = state {
                            break Err(WaitError::Refused {
                                target: described(subject),
                                refusal: Box::new(refusal),
                                undo: target.undo(),
                            });
                        }
                        progress.route(route, &state);
                        at.done = state.is_ready();
                        at.last = Some(match &state {
                            RouteState::Ready(what) | RouteState::Pending(what) => what.clone(),
                            RouteState::Refused(r) => r.to_string(),
                        });
                        if let Some(slot) = routes.get_mut(i) {
                            *slot = Some(state);
                        }
                    }
                }
            }
        }
    };
    let complete = rollout.as_ref().filter(|s| s.is_complete());
    match &result {
        Ok(()) => progress.finish(complete),
        Err(_) => progress.finish(rollout.as_ref()),
    }
    result.map(|()| Waited {
        rollout: complete.cloned(),
        routes: subjects
            .iter()
            .zip(routes)
            .filter_map(|(s, state)| match (s, state) {
                (Subject::Route(r), Some(state)) => Some((r.clone(), state)),
                _ => None,
            })
            .collect(),
    })
}

/// The timeout's error: the rollout's own when it alone was pending, else every pending object.
fn timed_out(
    subjects: &[Subject],
    seen: &[Seen],
    target: &WaitTarget,
    timeout: Option<Duration>,
    why: Option<Explanation>,
) -> WaitError {
    let why = Box::new(why.unwrap_or_default());
    let waiting_for = |s: &Seen| match (&s.last, &s.problem) {
        (Some(last), _) => last.clone(),
        (None, Some(problem)) => format!("no status seen yet ({problem})"),
        (None, None) => "no status seen yet".to_owned(),
    };
    let pending: Vec<(&Subject, &Seen)> =
        subjects.iter().zip(seen).filter(|(_, s)| !s.done).collect();
    if let [(Subject::Rollout, s)] = pending.as_slice() {
        return WaitError::Timeout {
            target: target.described(),
            kubectl_ref: format!("deployment/{}", target.name),
            namespace: target.namespace.clone(),
            after: timeout.unwrap_or_default(),
            last: waiting_for(s),
            why,
        };
    }
    WaitError::Pending {
        after: timeout.unwrap_or_default(),
        pending: pending
            .into_iter()
            .map(|(subject, s)| PendingObject {
                reference: match subject {
                    Subject::Rollout => target.reference(),
                    Subject::Route(r) => r.reference(),
                },
                rollout: matches!(subject, Subject::Rollout),
                waiting_for: waiting_for(s),
            })
            .collect(),
        namespace: target.namespace.clone(),
        context: target.context.clone(),
        undo: target.undo(),
        why,
    }
}

/// `--wait` in one cluster: follows `followed` (the rollout of `app`'s Deployment and the routes
/// written) in `cluster` until every one is done, one fails, or `wait_timeout` (zero: no bound)
/// runs out, telling `progress` as it goes. The run's one follower: a single cluster's and each
/// cluster's of a fleet; the caller decides what stops it (a signal) and how it is shown. Each
/// object is watched on its own ([`Cluster::watch_object`]), all at once, and the observations
/// are followed by [`follow_observations`].
pub async fn follow_in(
    cluster: &Cluster,
    app: &str,
    followed: &Followed,
    wait_timeout: Duration,
    stop: Stop,
    progress: &mut dyn Progress,
) -> Result<Waited, WaitError> {
    let target = WaitTarget::of(cluster, app);
    let subjects = followed.subjects();
    let streams = subjects.iter().enumerate().map(|(i, subject)| {
        let (kind, name) = match subject {
            Subject::Rollout => (Kind::Deployment, app),
            Subject::Route(r) => (r.kind, r.name.as_str()),
        };
        cluster.watch_object(kind, name).map(move |o| (i, o))
    });
    let observations = futures::stream::select_all(streams);
    let timeout = Some(wait_timeout).filter(|t| !t.is_zero());
    follow_observations(
        observations,
        &subjects,
        &target,
        timeout,
        stop,
        cluster,
        progress,
    )
    .await
}
