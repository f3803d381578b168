//! `--wait`: after the writes, follow the Deployment's rollout until it completes, fails or
//! `--timeout` runs out.
//!
//! The last step of a run that changed (or re-asserted) an image. The decision is
//! `kubectl rollout status`'s, as a pure function of the live object ([`rollout_state`]): the
//! controller has observed the current generation, no Progressing condition says
//! `ProgressDeadlineExceeded`, every desired replica is updated, no old replica is left, and every
//! updated replica is available. [`follow`] watches the one Deployment (a list+watch with
//! `fieldSelector=metadata.name=<app>`, resumed after dropped connections) and reports each new
//! state to a [`Progress`]: an indicatif bar on a terminal, or one plain line per change
//! otherwise — always on stderr, stdout stays for the plan and the report.

use std::fmt;
use std::io::Write;
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::Value;

use crate::describe::{Target, describe_kube_error};
use crate::text::Untrusted;

/// Where a rollout stands, as `kubectl rollout status` sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RolloutState {
    /// The controller has not yet observed the latest spec.
    NotObserved { generation: i64, observed: i64 },
    /// Fewer updated replicas than desired.
    Updating { updated: i64, desired: i64 },
    /// Old replicas are still running.
    OldPending {
        old: i64,
        updated: i64,
        desired: i64,
    },
    /// Updated replicas are not all available yet.
    Unavailable { available: i64, updated: i64 },
    /// Done: every replica updated and available.
    Complete { replicas: i64 },
    /// Progressing=False with reason ProgressDeadlineExceeded.
    DeadlineExceeded { message: String },
}

impl RolloutState {
    pub fn is_complete(&self) -> bool {
        matches!(self, RolloutState::Complete { .. })
    }

    /// (done, total) for a progress bar: updated replicas of the desired count.
    fn progress(&self) -> Option<(u64, u64)> {
        let clamp = |v: i64| u64::try_from(v.max(0)).unwrap_or(0);
        match *self {
            RolloutState::Updating { updated, desired }
            | RolloutState::OldPending {
                updated, desired, ..
            } => Some((clamp(updated.min(desired)), clamp(desired))),
            RolloutState::Unavailable { available, updated } => {
                Some((clamp(available.min(updated)), clamp(updated)))
            }
            RolloutState::Complete { replicas } => Some((clamp(replicas), clamp(replicas))),
            RolloutState::NotObserved { .. } | RolloutState::DeadlineExceeded { .. } => None,
        }
    }
}

impl fmt::Display for RolloutState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = |n: i64| if n == 1 { "" } else { "s" };
        match self {
            RolloutState::NotObserved {
                generation,
                observed,
            } => write!(
                f,
                "waiting for the controller to observe generation {generation} (observed {observed})"
            ),
            RolloutState::Updating { updated, desired } => write!(
                f,
                "{updated} of {desired} new replica{} updated",
                plural(*desired)
            ),
            RolloutState::OldPending { old, .. } => {
                write!(f, "{old} old replica{} pending termination", plural(*old))
            }
            RolloutState::Unavailable { available, updated } => write!(
                f,
                "{available} of {updated} updated replica{} available",
                plural(*updated)
            ),
            RolloutState::Complete { replicas } => write!(
                f,
                "successfully rolled out ({replicas} replica{} updated and available)",
                plural(*replicas)
            ),
            RolloutState::DeadlineExceeded { message } => {
                write!(f, "exceeded its progress deadline")?;
                if !message.is_empty() {
                    write!(f, " ({message})")?;
                }
                Ok(())
            }
        }
    }
}

fn int(obj: &Value, pointer: &str) -> Option<i64> {
    obj.pointer(pointer).and_then(Value::as_i64)
}

/// kubectl's `DeploymentStatusViewer.Status`, over the raw object.
pub fn rollout_state(deployment: &Value) -> RolloutState {
    let generation = int(deployment, "/metadata/generation").unwrap_or(0);
    let observed = int(deployment, "/status/observedGeneration").unwrap_or(0);
    if generation > observed {
        return RolloutState::NotObserved {
            generation,
            observed,
        };
    }
    let progressing = deployment
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Progressing"))
        });
    if let Some(c) = progressing
        && c.get("reason").and_then(Value::as_str) == Some("ProgressDeadlineExceeded")
    {
        let message = c
            .get("message")
            .and_then(Value::as_str)
            .map(crate::describe::one_line)
            .unwrap_or_default();
        return RolloutState::DeadlineExceeded { message };
    }
    // An absent spec.replicas defaults to 1 on the server; kubectl skips the check without it.
    let desired = int(deployment, "/spec/replicas");
    let replicas = int(deployment, "/status/replicas").unwrap_or(0);
    let updated = int(deployment, "/status/updatedReplicas").unwrap_or(0);
    let available = int(deployment, "/status/availableReplicas").unwrap_or(0);
    if let Some(desired) = desired
        && updated < desired
    {
        return RolloutState::Updating { updated, desired };
    }
    if replicas > updated {
        return RolloutState::OldPending {
            old: replicas - updated,
            updated,
            desired: desired.unwrap_or(updated),
        };
    }
    if available < updated {
        return RolloutState::Unavailable { available, updated };
    }
    RolloutState::Complete { replicas: updated }
}

/// Why the wait ended without a completed rollout. The writes have landed in every case.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WaitError {
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

/// What the watch delivered: the object, its absence, or a problem.
#[derive(Clone, Debug, PartialEq)]
pub enum Observation {
    Object(Value),
    /// Not found when listed, or deleted.
    Gone,
    /// A failed request. `fatal` problems (401, 403, 404 on the watch itself) end the wait; the
    /// others are retried with backoff and reported if the time runs out.
    Problem {
        message: String,
        fatal: bool,
    },
}

/// Receives each new rollout state.
pub trait Progress {
    fn update(&mut self, state: &RolloutState);
    /// The wait ended; `state` is the last state seen (complete or not).
    fn finish(&mut self, state: Option<&RolloutState>);
}

/// One plain line per change of state, for logs and pipelines.
pub struct Lines<W: Write> {
    out: W,
    reference: String,
    color: bool,
    last: Option<String>,
}

impl<W: Write> Lines<W> {
    pub fn new(out: W, reference: &str, color: bool) -> Self {
        Lines {
            out,
            reference: reference.to_owned(),
            color,
            last: None,
        }
    }

    pub fn into_inner(self) -> W {
        self.out
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
        // Progress is best effort: a closed stderr must not fail a run whose writes landed.
        let _ = writeln!(self.out, "{line}");
        let _ = self.out.flush();
        self.last = Some(text);
    }

    fn finish(&mut self, _state: Option<&RolloutState>) {}
}

/// An indicatif bar on the terminal (stderr): updated replicas of the desired count; the last
/// line goes to `out` once the bar is cleared. Its texts (the reference, the rollout state)
/// are escaped: indicatif draws them as they are.
pub struct Bar {
    bar: indicatif::ProgressBar,
    reference: String,
    color: bool,
    out: Box<dyn Write + Send>,
}

impl Bar {
    pub fn new(reference: &str, color: bool, out: Box<dyn Write + Send>) -> Self {
        let template = if color {
            "{spinner:.cyan} {prefix} [{bar:24.cyan/blue}] {pos}/{len} {msg}"
        } else {
            "{spinner} {prefix} [{bar:24}] {pos}/{len} {msg}"
        };
        let style = indicatif::ProgressStyle::with_template(template)
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> ");
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(0),
            indicatif::ProgressDrawTarget::stderr(),
        )
        .with_style(style)
        .with_prefix(format!("rollout of {}", Untrusted(reference)));
        bar.enable_steady_tick(Duration::from_millis(120));
        Bar {
            bar,
            reference: reference.to_owned(),
            color,
            out,
        }
    }
}

impl Progress for Bar {
    fn update(&mut self, state: &RolloutState) {
        if let Some((done, total)) = state.progress() {
            self.bar.set_length(total);
            self.bar.set_position(done);
        }
        self.bar
            .set_message(Untrusted(state.to_string()).to_string());
    }

    fn finish(&mut self, state: Option<&RolloutState>) {
        self.bar.finish_and_clear();
        if let Some(state @ RolloutState::Complete { .. }) = state {
            let line = format!("{} {state}", Untrusted(&self.reference));
            let line = if self.color {
                console::style(line).green().force_styling(true).to_string()
            } else {
                line
            };
            let _ = writeln!(self.out, "{line}");
            let _ = self.out.flush();
        }
    }
}

/// The followed object, for messages.
#[derive(Clone, Debug)]
pub struct WaitTarget {
    pub namespace: String,
    pub name: String,
    pub context: String,
    /// The user impersonated with `--as`.
    pub as_user: Option<String>,
}

impl WaitTarget {
    /// `deployment.apps/web`, escaped.
    pub fn reference(&self) -> String {
        format!("deployment.apps/{}", Untrusted(&self.name))
    }

    fn described(&self) -> String {
        format!(
            "{} in namespace {:?} (context {:?})",
            self.reference(),
            Untrusted(&self.namespace),
            Untrusted(&self.context)
        )
    }
}

/// Consumes observations until the rollout completes, fails, or `timeout` (None: no bound)
/// runs out. Pure apart from time: tests feed it a stream of observations.
pub async fn follow_observations<S>(
    observations: S,
    target: &WaitTarget,
    timeout: Option<Duration>,
    progress: &mut dyn Progress,
) -> Result<RolloutState, WaitError>
where
    S: Stream<Item = Observation>,
{
    let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
    let mut observations = std::pin::pin!(observations);
    let mut last: Option<RolloutState> = None;
    let mut last_problem: Option<String> = None;
    let result = loop {
        let next = match deadline {
            Some(at) => match tokio::time::timeout_at(at, observations.next()).await {
                Ok(next) => next,
                Err(_) => {
                    let waiting_for = match (&last, &last_problem) {
                        (Some(state), _) => state.to_string(),
                        (None, Some(problem)) => format!("no status seen yet ({problem})"),
                        (None, None) => "no status seen yet".to_owned(),
                    };
                    break Err(WaitError::Timeout {
                        target: target.described(),
                        kubectl_ref: format!("deployment/{}", target.name),
                        namespace: target.namespace.clone(),
                        after: timeout.unwrap_or_default(),
                        last: waiting_for,
                    });
                }
            },
            None => observations.next().await,
        };
        match next {
            None => {
                break Err(WaitError::Watch {
                    target: target.described(),
                    message: "the watch ended unexpectedly".into(),
                });
            }
            Some(Observation::Gone) => {
                break Err(WaitError::Deleted {
                    target: target.described(),
                });
            }
            Some(Observation::Problem { message, fatal }) => {
                if fatal {
                    break Err(WaitError::Watch {
                        target: target.described(),
                        message,
                    });
                }
                last_problem = Some(message);
            }
            Some(Observation::Object(obj)) => {
                last_problem = None;
                let state = rollout_state(&obj);
                // A failure is said once, by the error; progress shows only the way there.
                if !matches!(state, RolloutState::DeadlineExceeded { .. }) {
                    progress.update(&state);
                }
                match state {
                    RolloutState::Complete { .. } => break Ok(state),
                    RolloutState::DeadlineExceeded { .. } => {
                        break Err(WaitError::Failed {
                            target: target.described(),
                            kubectl_ref: format!("deployment/{}", target.name),
                            namespace: target.namespace.clone(),
                            state: state.to_string(),
                        });
                    }
                    other => last = Some(other),
                }
            }
        }
    };
    match &result {
        Ok(state) => progress.finish(Some(state)),
        Err(_) => progress.finish(last.as_ref()),
    }
    result
}

/// Seconds the server keeps one watch request open: below `--request-timeout` (the client's read
/// timeout) so an idle watch is closed by the server, not cut by the client.
fn watch_timeout_secs(request_timeout: Option<Duration>) -> u32 {
    let cap = 290u64;
    let secs = match request_timeout {
        Some(t) => t.as_secs().saturating_sub(1).clamp(1, cap),
        None => cap,
    };
    u32::try_from(secs).unwrap_or(290)
}

fn observation_of_error(err: &watcher::Error, target: &WaitTarget) -> Observation {
    let kube_target = Target {
        reference: target.reference(),
        namespace: target.namespace.clone(),
        context: target.context.clone(),
        as_user: target.as_user.clone(),
    };
    match err {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => {
            let fatal = matches!(e, kube::Error::Api(s) if matches!(s.code, 401 | 403 | 404));
            let verb = if matches!(err, watcher::Error::InitialListFailed(_)) {
                "list"
            } else {
                "watch"
            };
            Observation::Problem {
                message: describe_kube_error(e, verb, &kube_target),
                fatal,
            }
        }
        watcher::Error::WatchError(status) => Observation::Problem {
            message: format!(
                "the watch reported {} {}",
                status.code,
                crate::describe::one_line(&status.message)
            ),
            fatal: false,
        },
        watcher::Error::NoResourceVersion => Observation::Problem {
            message: "the server sent no resourceVersion to resume the watch from".into(),
            fatal: true,
        },
    }
}

/// Watches the Deployment `target` and follows its rollout (see [`follow_observations`]).
pub async fn follow(
    client: kube::Client,
    target: &WaitTarget,
    timeout: Option<Duration>,
    request_timeout: Option<Duration>,
    progress: &mut dyn Progress,
) -> Result<RolloutState, WaitError> {
    let gvk = GroupVersionKind::gvk("apps", "v1", "Deployment");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "deployments");
    let api: Api<DynamicObject> = Api::namespaced_with(client, &target.namespace, &resource);
    let config = watcher::Config::default()
        .fields(&format!("metadata.name={}", target.name))
        .timeout(watch_timeout_secs(request_timeout));
    let events = watcher::watcher(api, config).default_backoff();
    // Track whether the object appeared in each (re)list, like kube's `watch_object`.
    let observations = events
        .scan(false, |seen, event| {
            let out = match event {
                Ok(Event::Init) => {
                    *seen = false;
                    None
                }
                Ok(Event::InitApply(obj)) => {
                    *seen = true;
                    Some(to_observation(&obj))
                }
                Ok(Event::Apply(obj)) => Some(to_observation(&obj)),
                Ok(Event::Delete(_)) => Some(Observation::Gone),
                Ok(Event::InitDone) => (!*seen).then_some(Observation::Gone),
                Err(e) => Some(observation_of_error(&e, target)),
            };
            futures::future::ready(Some(out))
        })
        .filter_map(futures::future::ready);
    follow_observations(observations, target, timeout, progress).await
}

fn to_observation(obj: &DynamicObject) -> Observation {
    match serde_json::to_value(obj) {
        Ok(v) => Observation::Object(v),
        Err(e) => Observation::Problem {
            message: format!("cannot read the Deployment: {e}"),
            fatal: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
            as_user: None,
        }
    }

    #[test]
    fn an_unobserved_generation_is_not_done_even_when_replicas_look_complete() {
        let d = deployment(
            3,
            2,
            json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}),
        );
        assert_eq!(
            rollout_state(&d),
            RolloutState::NotObserved {
                generation: 3,
                observed: 2
            }
        );
    }

    #[test]
    fn the_checks_come_in_kubectls_order() {
        let st = |s: Value| rollout_state(&deployment(2, 3, s));
        assert_eq!(
            st(
                json!({"observedGeneration": 2, "replicas": 4, "updatedReplicas": 1, "availableReplicas": 3})
            ),
            RolloutState::Updating {
                updated: 1,
                desired: 3
            }
        );
        assert_eq!(
            st(
                json!({"observedGeneration": 2, "replicas": 4, "updatedReplicas": 3, "availableReplicas": 3})
            ),
            RolloutState::OldPending {
                old: 1,
                updated: 3,
                desired: 3
            }
        );
        assert_eq!(
            st(
                json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 2})
            ),
            RolloutState::Unavailable {
                available: 2,
                updated: 3
            }
        );
        assert_eq!(
            st(
                json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 3})
            ),
            RolloutState::Complete { replicas: 3 }
        );
    }

    #[test]
    fn progress_deadline_exceeded_is_a_failure_once_observed() {
        let cond = json!([{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
                           "message": "ReplicaSet \"web-1\" has timed out progressing."}]);
        let d = deployment(
            2,
            2,
            json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 1, "conditions": cond}),
        );
        let state = rollout_state(&d);
        assert_eq!(
            state.to_string(),
            "exceeded its progress deadline (ReplicaSet \"web-1\" has timed out progressing.)"
        );
        // A deadline from the previous generation does not count before the new one is seen.
        let d = deployment(
            3,
            2,
            json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 1, "conditions": cond}),
        );
        assert!(matches!(
            rollout_state(&d),
            RolloutState::NotObserved { .. }
        ));
    }

    #[test]
    fn states_read_as_sentences() {
        assert_eq!(
            RolloutState::Updating {
                updated: 1,
                desired: 2
            }
            .to_string(),
            "1 of 2 new replicas updated"
        );
        assert_eq!(
            RolloutState::OldPending {
                old: 1,
                updated: 2,
                desired: 2
            }
            .to_string(),
            "1 old replica pending termination"
        );
        assert_eq!(
            RolloutState::Complete { replicas: 1 }.to_string(),
            "successfully rolled out (1 replica updated and available)"
        );
    }

    #[test]
    fn durations_print_like_go() {
        assert_eq!(format_duration(Duration::from_secs(300)), "5m0s");
        assert_eq!(format_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_duration(Duration::from_secs(3661)), "1h1m1s");
    }

    #[test]
    fn the_watch_timeout_stays_below_the_request_timeout() {
        assert_eq!(watch_timeout_secs(None), 290);
        assert_eq!(watch_timeout_secs(Some(Duration::from_secs(10))), 9);
        assert_eq!(watch_timeout_secs(Some(Duration::from_millis(500))), 1);
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
        let stream = futures::stream::iter(obs).chain(futures::stream::pending());
        let r = rt.block_on(follow_observations(stream, &target(), timeout, &mut lines));
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
}
