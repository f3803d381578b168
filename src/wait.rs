//! `--wait`: after the writes, follow the Deployment's rollout and the routes the run wrote
//! until each is done, one fails, or `--timeout` runs out.
//!
//! The last step of a run. What it follows ([`Followed`]): the rollout when the run was given
//! an image (or wrote the Deployment), and every route (HTTPRoute, Ingress) the run created or
//! updated — not the ones it deleted. The decisions are pure functions of the live objects: the
//! rollout is `kubectl rollout status`'s ([`rollout_state`], in [`appupdate_model::rollout`]); a
//! route is taken up when its controllers say so in its status ([`route_state`], in
//! [`appupdate_model::route_status`]). [`follow_in`] watches each object on its own
//! ([`appupdate_kube::watch`]: a list+watch with `fieldSelector=metadata.name=<name>`, resumed
//! after dropped connections), all at once, and reports each new state to a [`Progress`]: indicatif bars on a terminal, or one plain line per
//! change otherwise — always on stderr, stdout stays for the plan and the report. A refusal (a
//! route's `False` condition) or a rollout past its deadline ends the wait at once.

use std::io::Write;
use std::time::Duration;

use futures::{Stream, StreamExt};

use appupdate_kube::cluster::Cluster;
pub use appupdate_kube::watch::Observation;
use appupdate_model::plan::{Action, Kind};
use appupdate_model::report::{Outcome, Report};
use appupdate_model::rollout::{RolloutState, rollout_state};
use appupdate_model::route_status::{Refusal, RouteRef, RouteState, route_state};
use appupdate_model::text::Untrusted;
use appupdate_plan::updaters::Plan;

/// Why the wait ended without everything done. The writes have landed in every case.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WaitError {
    /// Only the rollout was still pending.
    #[error(
        "timed out after {after} waiting for the rollout of {target}: {last}; the changes were applied, the rollout may still finish (kubectl rollout status {kubectl} -n {ns})",
        after = format_duration(*.after),
        target = Untrusted(.target),
        last = Untrusted(.last),
        kubectl = Untrusted(.kubectl_ref),
        ns = Untrusted(.namespace)
    )]
    Timeout {
        target: String,
        kubectl_ref: String,
        namespace: String,
        after: Duration,
        /// What it was still waiting for.
        last: String,
    },
    #[error(
        "the rollout of {target} failed: {state}; the changes were applied (kubectl rollout status {kubectl} -n {ns})",
        target = Untrusted(.target),
        state = Untrusted(.state),
        kubectl = Untrusted(.kubectl_ref),
        ns = Untrusted(.namespace)
    )]
    Failed {
        target: String,
        kubectl_ref: String,
        namespace: String,
        state: String,
    },
    #[error(
        "{} was deleted while waiting for its rollout; the changes had been applied",
        Untrusted(.target)
    )]
    Deleted { target: String },
    #[error(
        "cannot follow the rollout of {}: {}; the changes were applied",
        Untrusted(.target),
        Untrusted(.message)
    )]
    Watch { target: String, message: String },
    /// A route's controller set one of the conditions it needs to `False`.
    #[error(
        "{target} was refused: {refusal}; the changes were applied but it does not serve them: fix what it says, or undo them with {undo}",
        target = Untrusted(.target),
        undo = Untrusted(.undo)
    )]
    Refused {
        /// The route, its namespace and context.
        target: String,
        refusal: Box<Refusal>,
        /// The command that undoes the run.
        undo: String,
    },
    /// Routes (and maybe the rollout) were still pending.
    #[error(
        "timed out after {after} waiting for {pending} in namespace {ns:?} (context {ctx:?}); the changes were applied and may still be taken up (kubectl get -n {ns_arg} -o yaml {refs} shows their status), or undo them with {undo}",
        after = format_duration(*.after),
        pending = pending_list(.pending),
        refs = pending_refs(.pending),
        ns = Untrusted(.namespace),
        ns_arg = Untrusted(.namespace),
        ctx = Untrusted(.context),
        undo = Untrusted(.undo)
    )]
    Pending {
        after: Duration,
        /// Each object still pending.
        pending: Vec<PendingObject>,
        namespace: String,
        context: String,
        undo: String,
    },
    #[error(
        "{} was deleted while waiting for it to be taken up; the changes had been applied",
        Untrusted(.target)
    )]
    RouteDeleted { target: String },
    #[error(
        "cannot follow {}: {}; the changes were applied",
        Untrusted(.target),
        Untrusted(.message)
    )]
    RouteWatch { target: String, message: String },
}

impl WaitError {
    /// Whether the rollout alone is concerned (else a route is, or a route among others).
    pub fn is_rollout(&self) -> bool {
        matches!(
            self,
            WaitError::Timeout { .. }
                | WaitError::Failed { .. }
                | WaitError::Deleted { .. }
                | WaitError::Watch { .. }
        )
    }
}

/// An object the wait was still waiting for when the time ran out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingObject {
    /// `httproute.gateway.networking.k8s.io/web-x`, escaped.
    pub reference: String,
    /// The Deployment's rollout, not a route.
    pub rollout: bool,
    /// What it waited for.
    pub waiting_for: String,
}

/// The references of the pending routes, for `kubectl get`:
/// `httproute.gateway.networking.k8s.io/web-x ingress.networking.k8s.io/web-y`.
fn pending_refs(pending: &[PendingObject]) -> String {
    pending
        .iter()
        .filter(|p| !p.rollout)
        .map(|p| Untrusted(&p.reference).to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `httproute.gateway.networking.k8s.io/web-x (Gateway gateways/public has not reported on it
/// yet), the rollout of deployment.apps/web (1 of 2 new replicas updated)`, escaped.
fn pending_list(pending: &[PendingObject]) -> String {
    pending
        .iter()
        .map(|p| {
            let what = Untrusted(&p.waiting_for);
            let reference = Untrusted(&p.reference);
            if p.rollout {
                format!("the rollout of {reference} ({what})")
            } else {
                format!("{reference} ({what})")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `5m0s`, `1m30s`, `45s`, `1.5s` — Go's duration style, as kubectl prints timeouts.
pub fn format_duration(d: Duration) -> String {
    let total = d.as_secs();
    let (h, m, s) = (total / 3600, (total % 3600) / 60, total % 60);
    let millis = d.subsec_millis();
    let secs = if millis == 0 {
        format!("{s}s")
    } else {
        format!("{s}.{}s", format!("{millis:03}").trim_end_matches('0'))
    };
    if h > 0 {
        format!("{h}h{m}m{secs}")
    } else if m > 0 {
        format!("{m}m{secs}")
    } else {
        secs
    }
}

/// One object `--wait` follows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    /// The Deployment's rollout ([`rollout_state`]).
    Rollout,
    /// A route the run wrote ([`route_state`]).
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

/// Receives each new state of what is followed.
pub trait Progress {
    fn update(&mut self, state: &RolloutState);
    /// A route's new state; never a refusal (the error says that, once).
    fn route(&mut self, route: &RouteRef, state: &RouteState);
    /// The wait ended; `state` is the last rollout state seen (complete or not).
    fn finish(&mut self, state: Option<&RolloutState>);
}

/// A route's line: `<reference> accepted by …` once taken up, else `Waiting for <reference>: …`.
fn route_line(route: &RouteRef, state: &RouteState, color: bool) -> String {
    if state.is_ready() {
        let line = format!("{} {state}", route.reference());
        if color {
            console::style(line).green().force_styling(true).to_string()
        } else {
            line
        }
    } else {
        format!("Waiting for {}: {state}", route.reference())
    }
}

/// One plain line per change of state, for logs and pipelines.
pub struct Lines<W: Write> {
    out: W,
    reference: String,
    color: bool,
    last: Option<String>,
    /// The last line of each route.
    last_route: Vec<(RouteRef, String)>,
}

impl<W: Write> Lines<W> {
    pub fn new(out: W, reference: &str, color: bool) -> Self {
        Lines {
            out,
            reference: reference.to_owned(),
            color,
            last: None,
            last_route: Vec::new(),
        }
    }

    #[cfg(test)]
    pub fn into_inner(self) -> W {
        self.out
    }

    fn write_line(&mut self, line: &str) {
        // Progress is best effort: a closed stderr must not fail a run whose writes landed.
        let _ = writeln!(self.out, "{line}");
        let _ = self.out.flush();
    }
}

impl<W: Write> Progress for Lines<W> {
    fn update(&mut self, state: &RolloutState) {
        let text = Untrusted(state.to_string()).to_string();
        if self.last.as_deref() == Some(text.as_str()) {
            return;
        }
        let reference = Untrusted(&self.reference);
        let line = if state.is_complete() {
            let line = format!("{reference} {text}");
            if self.color {
                console::style(line).green().force_styling(true).to_string()
            } else {
                line
            }
        } else {
            format!("Waiting for the rollout of {reference}: {text}")
        };
        self.write_line(&line);
        self.last = Some(text);
    }

    fn route(&mut self, route: &RouteRef, state: &RouteState) {
        let line = route_line(route, state, self.color);
        match self.last_route.iter_mut().find(|(r, _)| r == route) {
            Some((_, last)) if *last == line => return,
            Some((_, last)) => *last = line.clone(),
            None => self.last_route.push((route.clone(), line.clone())),
        }
        self.write_line(&line);
    }

    fn finish(&mut self, _state: Option<&RolloutState>) {}
}

/// indicatif on the terminal (stderr): a bar for the rollout (updated replicas of the desired
/// count) and a spinner per route; the last lines go to `out` once they are cleared. Their
/// texts (the references, the states) are escaped: indicatif draws them as they are.
pub struct Bar {
    multi: indicatif::MultiProgress,
    rollout: Option<indicatif::ProgressBar>,
    /// Each route's spinner and, once taken up, its last line.
    routes: Vec<(RouteRef, indicatif::ProgressBar, Option<String>)>,
    reference: String,
    color: bool,
    out: Box<dyn Write + Send>,
}

impl Bar {
    /// Bars for what `followed` holds; `reference` names the Deployment.
    pub fn new(
        reference: &str,
        followed: &Followed,
        color: bool,
        out: Box<dyn Write + Send>,
    ) -> Self {
        let multi =
            indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::stderr());
        let template = if color {
            "{spinner:.cyan} {prefix} [{bar:24.cyan/blue}] {pos}/{len} {msg}"
        } else {
            "{spinner} {prefix} [{bar:24}] {pos}/{len} {msg}"
        };
        let style = indicatif::ProgressStyle::with_template(template)
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> ");
        let rollout = followed.rollout.then(|| {
            let bar = multi.add(
                indicatif::ProgressBar::new(0)
                    .with_style(style)
                    .with_prefix(format!("rollout of {}", Untrusted(reference))),
            );
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        let spinner_template = if color {
            "{spinner:.cyan} {prefix} {msg}"
        } else {
            "{spinner} {prefix} {msg}"
        };
        let spinner = indicatif::ProgressStyle::with_template(spinner_template)
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner());
        let routes = followed
            .routes
            .iter()
            .map(|route| {
                let bar = multi.add(
                    indicatif::ProgressBar::new_spinner()
                        .with_style(spinner.clone())
                        .with_prefix(route.reference())
                        .with_message("waiting for its status"),
                );
                bar.enable_steady_tick(Duration::from_millis(120));
                (route.clone(), bar, None)
            })
            .collect();
        Bar {
            multi,
            rollout,
            routes,
            reference: reference.to_owned(),
            color,
            out,
        }
    }
}

impl Progress for Bar {
    fn update(&mut self, state: &RolloutState) {
        let Some(bar) = &self.rollout else { return };
        if let Some((done, total)) = state.progress() {
            bar.set_length(total);
            bar.set_position(done);
        }
        bar.set_message(Untrusted(state.to_string()).to_string());
    }

    fn route(&mut self, route: &RouteRef, state: &RouteState) {
        let color = self.color;
        if let Some((_, bar, ready)) = self.routes.iter_mut().find(|(r, ..)| r == route) {
            bar.set_message(state.to_string());
            if state.is_ready() {
                bar.finish();
                *ready = Some(route_line(route, state, color));
            } else {
                *ready = None;
            }
        }
    }

    fn finish(&mut self, state: Option<&RolloutState>) {
        if let Some(bar) = &self.rollout {
            bar.finish_and_clear();
        }
        for (_, bar, _) in &self.routes {
            bar.finish_and_clear();
        }
        let _ = self.multi.clear();
        let mut lines = Vec::new();
        if let Some(state @ RolloutState::Complete { .. }) = state {
            let line = format!("{} {state}", Untrusted(&self.reference));
            lines.push(if self.color {
                console::style(line).green().force_styling(true).to_string()
            } else {
                line
            });
        }
        lines.extend(self.routes.iter().filter_map(|(_, _, ready)| ready.clone()));
        for line in lines {
            let _ = writeln!(self.out, "{line}");
        }
        let _ = self.out.flush();
    }
}

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
pub async fn follow_observations<S>(
    observations: S,
    subjects: &[Subject],
    target: &WaitTarget,
    timeout: Option<Duration>,
    progress: &mut dyn Progress,
) -> Result<Waited, WaitError>
where
    S: Stream<Item = (usize, Observation)>,
{
    let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
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
        let next = match deadline {
            Some(at) => match tokio::time::timeout_at(at, observations.next()).await {
                Ok(next) => next,
                Err(_) => break Err(timed_out(subjects, &seen, target, timeout)),
            },
            None => observations.next().await,
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
                        // A failure is said once, by the error; progress shows only the way there.
                        if !matches!(state, RolloutState::DeadlineExceeded { .. }) {
                            progress.update(&state);
                        }
                        match state {
                            RolloutState::DeadlineExceeded { .. } => {
                                break Err(WaitError::Failed {
                                    target: target.described(),
                                    kubectl_ref: format!("deployment/{}", target.name),
                                    namespace: target.namespace.clone(),
                                    state: state.to_string(),
                                });
                            }
                            state => {
                                at.done = state.is_complete();
                                at.last = Some(state.to_string());
                                rollout = Some(state);
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
) -> WaitError {
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
    follow_observations(observations, &subjects, &target, timeout, progress).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use appupdate_model::plan::ObjectChange;
    use serde_json::{Value, json};

    fn deployment(generation: i64, replicas: i64, status: Value) -> Value {
        json!({
            "metadata": {"name": "web", "generation": generation},
            "spec": {"replicas": replicas},
            "status": status,
        })
    }

    fn target() -> WaitTarget {
        WaitTarget {
            namespace: "shop".into(),
            name: "web".into(),
            context: "sandbox".into(),
        }
    }

    #[test]
    fn durations_print_like_go() {
        assert_eq!(format_duration(Duration::from_secs(300)), "5m0s");
        assert_eq!(format_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_duration(Duration::from_secs(3661)), "1h1m1s");
    }

    fn run(
        obs: Vec<Observation>,
        timeout: Option<Duration>,
    ) -> (Result<RolloutState, WaitError>, String) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        let mut lines = Lines::new(Vec::new(), "deployment.apps/web", false);
        // After the given observations the stream stays open and silent, like an idle watch.
        let stream = futures::stream::iter(obs)
            .map(|o| (0, o))
            .chain(futures::stream::pending());
        let r = rt.block_on(follow_observations(
            stream,
            &[Subject::Rollout],
            &target(),
            timeout,
            &mut lines,
        ));
        let r = r.map(|waited| waited.rollout.expect("a complete rollout"));
        (r, String::from_utf8(lines.into_inner()).unwrap())
    }

    #[test]
    fn plain_lines_follow_each_change_and_end_on_completion() {
        let o = |g, s| Observation::Object(deployment(g, 2, s));
        let (r, text) = run(
            vec![
                o(
                    2,
                    json!({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}),
                ),
                o(
                    2,
                    json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 1, "availableReplicas": 2}),
                ),
                o(
                    2,
                    json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 1, "availableReplicas": 2}),
                ),
                o(
                    2,
                    json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}),
                ),
            ],
            Some(Duration::from_secs(60)),
        );
        assert_eq!(r, Ok(RolloutState::Complete { replicas: 2 }));
        assert_eq!(
            text,
            "Waiting for the rollout of deployment.apps/web: waiting for the controller to observe generation 2 (observed 1)\n\
             Waiting for the rollout of deployment.apps/web: 1 of 2 new replicas updated\n\
             deployment.apps/web successfully rolled out (2 replicas updated and available)\n"
        );
    }

    #[test]
    fn a_stalled_rollout_times_out_naming_the_object_and_what_it_waited_for() {
        let (r, _) = run(
            vec![Observation::Object(deployment(
                2,
                2,
                json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 1, "availableReplicas": 1}),
            ))],
            Some(Duration::from_secs(300)),
        );
        assert_eq!(
            r.unwrap_err().to_string(),
            "timed out after 5m0s waiting for the rollout of deployment.apps/web in namespace \"shop\" \
             (context \"sandbox\"): 1 of 2 new replicas updated; the changes were applied, the rollout \
             may still finish (kubectl rollout status deployment/web -n shop)"
        );
    }

    #[test]
    fn transient_problems_are_retried_and_fatal_ones_end_the_wait() {
        let (r, _) = run(
            vec![
                Observation::Problem {
                    message: "connection refused".into(),
                    fatal: false,
                },
                Observation::Object(deployment(
                    1,
                    1,
                    json!({"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}),
                )),
            ],
            None,
        );
        assert!(r.is_ok());
        let (r, _) = run(
            vec![Observation::Problem {
                message: "forbidden".into(),
                fatal: true,
            }],
            None,
        );
        assert!(matches!(r, Err(WaitError::Watch { .. })));
        let (r, _) = run(vec![Observation::Gone], None);
        assert!(matches!(r, Err(WaitError::Deleted { .. })));
    }

    fn route_ref(kind: Kind, name: &str) -> RouteRef {
        RouteRef {
            kind,
            name: name.into(),
        }
    }

    fn http_route(conditions: Value) -> Value {
        json!({
            "metadata": {"name": "web-a", "namespace": "shop", "generation": 1},
            "spec": {"parentRefs": [{"name": "public", "namespace": "gateways"}]},
            "status": {"parents": [{"parentRef": {"name": "public", "namespace": "gateways"},
                                    "controllerName": "example.com/gw", "conditions": conditions}]},
        })
    }

    fn cond(kind: &str, status: &str, reason: &str, message: &str) -> Value {
        json!({"type": kind, "status": status, "reason": reason, "message": message,
               "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1})
    }

    fn complete_deployment() -> Value {
        deployment(
            1,
            1,
            json!({"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}),
        )
    }

    /// Follows the rollout (subject 0), the HTTPRoute `web-a` (1) and the Ingress `web-b` (2).
    fn run_all(
        obs: Vec<(usize, Observation)>,
        timeout: Option<Duration>,
    ) -> (Result<Waited, WaitError>, String) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        let followed = Followed {
            rollout: true,
            routes: vec![
                route_ref(Kind::HttpRoute, "web-a"),
                route_ref(Kind::Ingress, "web-b"),
            ],
        };
        let mut lines = Lines::new(Vec::new(), "deployment.apps/web", false);
        let stream = futures::stream::iter(obs).chain(futures::stream::pending());
        let r = rt.block_on(follow_observations(
            stream,
            &followed.subjects(),
            &target(),
            timeout,
            &mut lines,
        ));
        (r, String::from_utf8(lines.into_inner()).unwrap())
    }

    #[test]
    fn the_wait_ends_once_the_rollout_and_every_route_are_done() {
        let accepted = http_route(json!([
            cond("Accepted", "True", "Accepted", ""),
            cond("ResolvedRefs", "True", "ResolvedRefs", "")
        ]));
        let addressed = json!({"metadata": {"name": "web-b"},
                               "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}}});
        let mut unreported = http_route(json!([]));
        unreported["status"] = json!({});
        let (r, text) = run_all(
            vec![
                (1, Observation::Object(unreported)),
                (0, Observation::Object(complete_deployment())),
                (1, Observation::Object(accepted)),
                (
                    2,
                    Observation::Object(json!({"metadata": {"name": "web-b"}})),
                ),
                (2, Observation::Object(addressed)),
            ],
            Some(Duration::from_secs(60)),
        );
        let waited = r.unwrap();
        assert_eq!(
            text,
            "Waiting for httproute.gateway.networking.k8s.io/web-a: Gateway gateways/public has not reported on it yet\n\
             deployment.apps/web successfully rolled out (1 replica updated and available)\n\
             httproute.gateway.networking.k8s.io/web-a accepted by Gateway gateways/public\n\
             Waiting for ingress.networking.k8s.io/web-b: no address from its Ingress controller yet\n\
             ingress.networking.k8s.io/web-b has an address: 203.0.113.7\n"
        );
        assert_eq!(
            waited.lines("web"),
            [
                "deployment.apps/web successfully rolled out (1 replica updated and available)",
                "httproute.gateway.networking.k8s.io/web-a accepted by Gateway gateways/public",
                "ingress.networking.k8s.io/web-b has an address: 203.0.113.7",
            ]
        );
        assert_eq!(
            waited.summary(),
            "successfully rolled out (1 replica updated and available); 2 routes taken up"
        );
    }

    #[test]
    fn a_refused_route_ends_the_wait_at_once_naming_parent_reason_and_message() {
        let refused = http_route(json!([
            cond("Accepted", "True", "Accepted", ""),
            cond(
                "ResolvedRefs",
                "False",
                "BackendNotFound",
                "Service \"web\" not found\u{1b}[2J"
            )
        ]));
        // No timeout: the refusal ends it, not the clock.
        let (r, text) = run_all(vec![(1, Observation::Object(refused))], None);
        let err = r.unwrap_err();
        assert!(!err.is_rollout());
        assert_eq!(
            err.to_string(),
            "httproute.gateway.networking.k8s.io/web-a in namespace \"shop\" (context \"sandbox\") was refused: \
             Gateway gateways/public set ResolvedRefs=False (BackendNotFound: \"Service \\\"web\\\" not found\\e[2J\"); \
             the changes were applied but it does not serve them: fix what it says, or undo them with \
             kubectl appupdate web -n shop --context sandbox --undo"
        );
        // Said once, by the error.
        assert!(!text.contains("BackendNotFound"), "{text}");
    }

    #[test]
    fn a_timeout_names_every_object_still_pending_and_what_it_waits_for() {
        let mut unreported = http_route(json!([]));
        unreported["status"] = json!({});
        let (r, _) = run_all(
            vec![
                (0, Observation::Object(complete_deployment())),
                (1, Observation::Object(unreported)),
            ],
            Some(Duration::from_secs(2)),
        );
        assert_eq!(
            r.unwrap_err().to_string(),
            "timed out after 2s waiting for httproute.gateway.networking.k8s.io/web-a (Gateway gateways/public \
             has not reported on it yet), ingress.networking.k8s.io/web-b (no status seen yet) in namespace \"shop\" \
             (context \"sandbox\"); the changes were applied and may still be taken up (kubectl get -n shop -o yaml \
             httproute.gateway.networking.k8s.io/web-a ingress.networking.k8s.io/web-b shows their status), or \
             undo them with kubectl appupdate web -n shop --context sandbox --undo"
        );
        // The rollout alone pending: its own message, as without routes.
        let accepted = http_route(json!([
            cond("Accepted", "True", "Accepted", ""),
            cond("ResolvedRefs", "True", "ResolvedRefs", "")
        ]));
        let addressed = json!({"metadata": {"name": "web-b"},
                               "status": {"loadBalancer": {"ingress": [{"hostname": "lb"}]}}});
        let (r, _) = run_all(
            vec![
                (1, Observation::Object(accepted)),
                (2, Observation::Object(addressed)),
            ],
            Some(Duration::from_secs(2)),
        );
        let err = r.unwrap_err();
        assert!(matches!(err, WaitError::Timeout { .. }), "{err}");
        assert!(err.is_rollout());
    }

    #[test]
    fn a_route_deleted_or_unwatchable_ends_the_wait_naming_it() {
        let (r, _) = run_all(vec![(2, Observation::Gone)], None);
        assert_eq!(
            r.unwrap_err().to_string(),
            "ingress.networking.k8s.io/web-b in namespace \"shop\" (context \"sandbox\") was deleted while \
             waiting for it to be taken up; the changes had been applied"
        );
        let (r, _) = run_all(
            vec![(
                1,
                Observation::Problem {
                    message: "forbidden".into(),
                    fatal: true,
                },
            )],
            None,
        );
        assert!(matches!(r, Err(WaitError::RouteWatch { .. })));
    }

    fn report(entries: Vec<(Kind, &str, Action, Outcome)>) -> Report {
        Report {
            entries: entries
                .into_iter()
                .map(|(kind, name, action, outcome)| {
                    let mut c = ObjectChange::sample(name, action);
                    c.kind = kind;
                    (std::sync::Arc::new(c), outcome)
                })
                .collect(),
            stopped_in_preflight: false,
            interrupted: None,
        }
    }

    #[test]
    fn the_routes_written_are_followed_and_deleted_ones_are_not() {
        let r = report(vec![
            (
                Kind::HorizontalPodAutoscaler,
                "web",
                Action::Update,
                Outcome::Applied,
            ),
            (Kind::HttpRoute, "web-new", Action::Create, Outcome::Applied),
            (
                Kind::HttpRoute,
                "web-upd",
                Action::Update,
                Outcome::AlreadyDone,
            ),
            (
                Kind::HttpRoute,
                "web-same",
                Action::Unchanged,
                Outcome::Unchanged,
            ),
            (Kind::Ingress, "web-old", Action::Delete, Outcome::Applied),
            (Kind::Ingress, "web-ing", Action::Update, Outcome::Applied),
        ]);
        assert_eq!(
            Followed::after_writes(&r, false),
            Followed {
                rollout: false,
                routes: vec![
                    route_ref(Kind::HttpRoute, "web-new"),
                    route_ref(Kind::HttpRoute, "web-upd"),
                    route_ref(Kind::Ingress, "web-ing"),
                ],
            }
        );
        // --image: the rollout too, even when the image was already set.
        assert!(Followed::after_writes(&r, true).rollout);
        // An undo that wrote the Deployment.
        let undo = report(vec![(
            Kind::Deployment,
            "web",
            Action::Update,
            Outcome::Applied,
        )]);
        assert!(Followed::after_writes(&undo, false).rollout);
        // Bounds only: nothing to follow.
        let bounds = report(vec![(
            Kind::HorizontalPodAutoscaler,
            "web",
            Action::Update,
            Outcome::Applied,
        )]);
        assert!(Followed::after_writes(&bounds, false).is_empty());
    }
}
