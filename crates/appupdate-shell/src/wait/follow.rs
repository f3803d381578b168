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
use appupdate_model::route_status::{RouteRef, RouteState, route_state};
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
/// done, one fails, or `timeout` (None: no bound) runs out, looking at the rollout's pods
/// through `explainer` once it is late. Pure apart from time: tests feed it a stream of
/// observations and scripted explanations.
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
    let mut f = Following {
        subjects,
        target,
        stop,
        explainer,
        started: tokio::time::Instant::now(),
        look_at: None,
        deployment: None,
        judge: Judge::new(stop.crash_restarts),
        seen: subjects.iter().map(|_| Seen::default()).collect(),
        rollout: None,
        routes: subjects.iter().map(|_| None).collect(),
    };
    let deadline = timeout.map(|t| f.started + t);
    let mut observations = std::pin::pin!(observations);
    let result = loop {
        if f.seen.iter().all(|s| s.done) {
            break Ok(());
        }
        let woken = tokio::select! {
            biased;
            next = observations.next() => Woken::Observed(next),
            () = until(deadline) => Woken::TimedOut,
            () = until(f.look_at) => Woken::Look,
        };
        let ended = match woken {
            Woken::Observed(Some((i, observation))) => f.observed(i, observation, progress).await,
            Woken::Observed(None) => Some(f.watch_ended()),
            Woken::TimedOut => Some(f.timed_out(timeout).await),
            Woken::Look => f.look(progress).await,
        };
        if let Some(e) = ended {
            break Err(e);
        }
    };
    f.finish(result, progress)
}

/// The follower's state: where each subject stands, and the rollout's pods once looked at.
struct Following<'a> {
    subjects: &'a [Subject],
    target: &'a WaitTarget,
    stop: Stop,
    explainer: &'a dyn Explain,
    started: tokio::time::Instant,
    /// When to look at the rollout's pods next (`None`: it is not late).
    look_at: Option<tokio::time::Instant>,
    /// The Deployment as last seen.
    deployment: Option<Value>,
    judge: Judge,
    seen: Vec<Seen>,
    rollout: Option<RolloutState>,
    routes: Vec<Option<RouteState>>,
}

impl Following<'_> {
    fn described(&self, s: &Subject) -> String {
        match s {
            Subject::Rollout => self.target.described(),
            Subject::Route(r) => self.target.describe(&r.reference()),
        }
    }

    /// A look at the late rollout's pods: the reason shown, and the end of the wait when the
    /// rollout cannot succeed (`--fail-fast`).
    async fn look(&mut self, progress: &mut dyn Progress) -> Option<WaitError> {
        self.look_at = Some(tokio::time::Instant::now() + LOOK_EVERY);
        let d = self.deployment.as_ref()?;
        let why = self.explainer.explain(d).await;
        if let Some(reason) = why.current() {
            progress.reason(&reason);
        }
        if !self.stop.fail_fast {
            return None;
        }
        let hopeless = self.judge.observe(self.started.elapsed(), &why)?;
        Some(WaitError::CannotSucceed {
            target: self.target.described(),
            kubectl_ref: format!("deployment/{}", self.target.name),
            namespace: self.target.namespace.clone(),
            after: self.started.elapsed(),
            hopeless: hopeless.to_string(),
            why: Box::new(why),
        })
    }

    /// `--timeout` ran out: what was pending, and why the rollout was, from its pods.
    async fn timed_out(&self, timeout: Option<Duration>) -> WaitError {
        let why = match &self.deployment {
            Some(d) if self.rollout.as_ref().is_none_or(|s| !s.is_complete()) => {
                Some(self.explainer.explain(d).await)
            }
            _ => None,
        };
        timed_out(self.subjects, &self.seen, self.target, timeout, why)
    }

    fn watch_ended(&self) -> WaitError {
        let i = self.seen.iter().position(|s| !s.done).unwrap_or(0);
        let message = "the watch ended unexpectedly".to_owned();
        match self.subjects.get(i) {
            Some(Subject::Route(r)) => WaitError::RouteWatch {
                target: self.target.describe(&r.reference()),
                message,
            },
            _ => WaitError::Watch {
                target: self.target.described(),
                message,
            },
        }
    }

    /// The `i`th subject's new observation; the error that ends the wait, if it does.
    async fn observed(
        &mut self,
        i: usize,
        observation: Observation,
        progress: &mut dyn Progress,
    ) -> Option<WaitError> {
        let subject = self.subjects.get(i)?.clone();
        let done = self.seen.get(i)?.done;
        match observation {
            Observation::Gone => Some(match subject {
                Subject::Rollout => WaitError::Deleted {
                    target: self.described(&subject),
                },
                Subject::Route(_) => WaitError::RouteDeleted {
                    target: self.described(&subject),
                },
            }),
            Observation::Problem { message, fatal } if fatal => Some(match subject {
                Subject::Rollout => WaitError::Watch {
                    target: self.described(&subject),
                    message,
                },
                Subject::Route(_) => WaitError::RouteWatch {
                    target: self.described(&subject),
                    message,
                },
            }),
            Observation::Problem { message, .. } => {
                self.seen[i].problem = Some(message);
                None
            }
            // A completed rollout stays complete, as for `kubectl rollout status`.
            Observation::Object(_) if matches!(subject, Subject::Rollout) && done => None,
            Observation::Object(obj) => {
                self.seen[i].problem = None;
                match &subject {
                    Subject::Rollout => self.rollout_seen(i, obj, progress).await,
                    Subject::Route(route) => self.route_seen(i, route, &obj, progress),
                }
            }
        }
    }

    async fn rollout_seen(
        &mut self,
        i: usize,
        obj: Value,
        progress: &mut dyn Progress,
    ) -> Option<WaitError> {
        let state = rollout_state(&obj);
        if state.is_complete() {
            self.look_at = None;
        } else if self.look_at.is_none() {
            self.look_at = Some(self.started + LOOK_AFTER);
        }
        if let RolloutState::DeadlineExceeded { .. } = state {
            // A failure is said once, by the error; progress shows only the way there.
            let why = self.explainer.explain(&obj).await;
            return Some(WaitError::Failed {
                target: self.target.described(),
                kubectl_ref: format!("deployment/{}", self.target.name),
                namespace: self.target.namespace.clone(),
                state: state.to_string(),
                why: Box::new(why),
            });
        }
        progress.update(&state);
        self.seen[i].done = state.is_complete();
        self.seen[i].last = Some(state.to_string());
        self.rollout = Some(state);
        self.deployment = Some(obj);
        None
    }

    fn route_seen(
        &mut self,
        i: usize,
        route: &RouteRef,
        obj: &Value,
        progress: &mut dyn Progress,
    ) -> Option<WaitError> {
        let Some(state) = route_state(route.kind, obj) else {
            self.seen[i].done = true;
            return None;
        };
        if let RouteState::Refused(refusal) = state {
            return Some(WaitError::Refused {
                target: self.target.describe(&route.reference()),
                refusal: Box::new(refusal),
                undo: self.target.undo(),
            });
        }
        progress.route(route, &state);
        self.seen[i].done = state.is_ready();
        self.seen[i].last = Some(match &state {
            RouteState::Ready(what) | RouteState::Pending(what) => what.clone(),
            RouteState::Refused(r) => r.to_string(),
        });
        self.routes[i] = Some(state);
        None
    }

    /// The end: progress finished, and what was followed when everything was done.
    fn finish(
        self,
        result: Result<(), WaitError>,
        progress: &mut dyn Progress,
    ) -> Result<Waited, WaitError> {
        let complete = self.rollout.as_ref().filter(|s| s.is_complete());
        match &result {
            Ok(()) => progress.finish(complete),
            Err(_) => progress.finish(self.rollout.as_ref()),
        }
        result.map(|()| Waited {
            rollout: complete.cloned(),
            routes: self
                .subjects
                .iter()
                .zip(self.routes)
                .filter_map(|(s, state)| match (s, state) {
                    (Subject::Route(r), Some(state)) => Some((r.clone(), state)),
                    _ => None,
                })
                .collect(),
        })
    }
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
