//! Applies an approved plan safely.
//!
//! 1. Preflight: every change is sent once with `dryRun=All`, concurrently. Anything the server
//!    rejects (invalid, forbidden, quota) stops the run with nothing written. A run that writes
//!    one object skips it ([`unchecked`]): its write is that check ([`crate::writing`]). An
//!    HTTPRoute the cluster cannot store with its ExternalAuth filter (the filter type refused,
//!    or its settings pruned: the Gateway API's standard channel) is [`Outcome::Unsupported`],
//!    which ends the run as bad input does ([`appupdate_plan::routes::external_auth`]), and so
//!    is always dry-run ([`needs_dry_run`]).
//! 2. Writes, in the rounds of [`write_order`](appupdate_model::plan::write_order): everything that waits for nothing first (the
//!    Deployment, the HPA, route creates, routes that gain or keep their paths); a route that
//!    stops serving a path only in a round after the write that serves it elsewhere — so a path
//!    that is served before and after the run is served throughout. Writes within a round run
//!    concurrently; a failure stops the later rounds.
//!
//! Every write is conditional: patches carry the `metadata.resourceVersion` the change was
//! computed from, deletes carry uid and resourceVersion preconditions. On a conflict the object
//! is re-read, its updater re-plans against the fresh object, and [`recheck`] (the approved-diff
//! guard) decides: proceed with the fresh patch, stop because someone else already did it, or
//! trip because a field this run changes no longer holds the value the user was shown.

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use serde_json::Value;

use appupdate_kube::cluster::{Cluster, RequestError};
use appupdate_kube::describe::Target;
use appupdate_model::plan::{Action, Base, Kind, ObjectChange, Recheck, Write, recheck};
use appupdate_model::report::{Interruption, Outcome, Report};
use appupdate_model::text::Untrusted;
use appupdate_plan::applied;
use appupdate_plan::routes::{self, IDENTIFIER_LABEL, external_auth};
use appupdate_plan::updaters::{Plan, Planned};

/// Retry bounds: client-go's `DefaultRetry` is 5 tries from 10 ms.
#[derive(Clone, Copy, Debug)]
pub struct ApplyOptions {
    /// Attempts per request when the server reports a conflict (≥ 1).
    pub tries: u32,
    /// Delay before the first retry; doubled each time, capped at one second, with jitter.
    pub initial_backoff: Duration,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        ApplyOptions {
            tries: 5,
            initial_backoff: Duration::from_millis(10),
        }
    }
}

/// The first signal received while applying; checked before every request is started, and
/// awaited by what waits on something else (a rollout) so that it stops at once.
#[derive(Clone, Debug)]
pub struct InterruptFlag(Arc<tokio::sync::watch::Sender<Option<Interruption>>>);

impl Default for InterruptFlag {
    fn default() -> Self {
        InterruptFlag(Arc::new(tokio::sync::watch::Sender::new(None)))
    }
}

impl InterruptFlag {
    /// Records `which`; `false` when a signal was already recorded (the first one stays).
    pub fn raise(&self, which: Interruption) -> bool {
        self.0.send_if_modified(|current| {
            if current.is_some() {
                false
            } else {
                *current = Some(which);
                true
            }
        })
    }

    pub fn get(&self) -> Option<Interruption> {
        *self.0.borrow()
    }

    /// Resolves once a signal has been recorded (at once if one already was).
    pub async fn raised(&self) -> Interruption {
        let mut rx = self.0.subscribe();
        match rx.wait_for(Option::is_some).await {
            Ok(v) => v.unwrap_or(Interruption::Sigint),
            // The sender lives in `self`: it cannot be dropped while this waits.
            Err(_) => std::future::pending().await,
        }
    }
}

pub(crate) fn backoff(opts: &ApplyOptions, attempt: u32) -> Duration {
    let base = opts
        .initial_backoff
        .saturating_mul(1u32 << attempt.saturating_sub(1).min(10))
        .min(Duration::from_secs(1));
    // ±10 % jitter without a random number generator: the clock's low bits suffice.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let jitter = f64::from(nanos % 2001) / 10000.0 - 0.1;
    base.mul_f64(1.0 + jitter)
}

/// What the request loop ended with for one object.
enum Step {
    /// Sent successfully; the change as finally sent (it may have been re-planned).
    Sent(Arc<ObjectChange>),
    Done(Outcome),
}

struct Applier<'a> {
    cluster: &'a Cluster,
    app: &'a str,
    opts: ApplyOptions,
    interrupt: &'a InterruptFlag,
}

impl Applier<'_> {
    fn target(&self, change: &ObjectChange) -> Target {
        Target {
            reference: change.reference(),
            namespace: change.namespace.clone(),
            context: self.cluster.conn.context.clone(),
            as_user: self.cluster.conn.as_user.clone(),
        }
    }

    /// The failure in one line; a refusal of this route style's annotations by ingress-nginx
    /// also names the styles that avoid them.
    fn describe(&self, err: &RequestError, verb: &str, change: &ObjectChange) -> String {
        let mut message = err.describe(verb, &self.target(change));
        if let Some(hint) = change
            .route
            .as_ref()
            .and_then(|r| routes::refusal_hint(r.style, &message))
        {
            message.push_str(hint);
        }
        message
    }

    /// When the dry run of an HTTPRoute's create or patch shows that the cluster has no
    /// ExternalAuth filter — the server refused the filter type, or stored the route without
    /// the filter's settings — the line that says so and what to do instead.
    fn missing_filter(
        &self,
        change: &ObjectChange,
        answer: Result<&Value, &RequestError>,
    ) -> Option<String> {
        if !needs_dry_run(change) {
            return None;
        }
        let how = match answer {
            Err(e) => format!(
                "the server's dry run refused it: Unsupported value \"ExternalAuth\" at {}",
                Untrusted(external_auth::refuses_external_auth(e.causes())?)
            ),
            Ok(stored) if external_auth::dropped_external_auth(stored) => {
                "the server's dry run dropped its externalAuth settings as an unknown field".into()
            }
            Ok(_) => return None,
        };
        Some(external_auth::missing_filter(
            &self.cluster.conn.context,
            &how,
        ))
    }

    async fn send(&self, change: &ObjectChange, dry_run: bool) -> Result<Value, RequestError> {
        match &change.write {
            Some(Write::Patch {
                base,
                patch_type,
                body,
            }) => {
                self.cluster
                    .patch(change.kind, &change.name, *patch_type, body, base, dry_run)
                    .await
            }
            Some(Write::Create { body }) => self.cluster.create(change.kind, body, dry_run).await,
            Some(Write::Delete { base }) => {
                self.cluster
                    .delete(change.kind, &change.name, base, dry_run)
                    .await
            }
            None => Ok(Value::Null),
        }
    }

    /// A route that already exists under the name we want to create is ours only when it
    /// carries this app's label and the same identifier.
    fn is_managed_sibling(&self, live: &Value, approved: &ObjectChange) -> bool {
        let labels = &live["metadata"]["labels"];
        let identifier = approved.route.as_ref().map(|i| i.identifier.as_str());
        labels["app"].as_str() == Some(self.app)
            && labels[IDENTIFIER_LABEL].as_str().is_some()
            && labels[IDENTIFIER_LABEL].as_str() == identifier
    }

    /// Sends `current` (dry run or real), handling conflicts by re-reading and re-checking
    /// against `approved`, at most `opts.tries` times.
    async fn drive(&self, planned: &Planned, current: Arc<ObjectChange>, dry_run: bool) -> Step {
        let approved = &planned.change;
        let verb = match approved.action() {
            Action::Create => "create",
            Action::Delete => "delete",
            _ => "patch",
        };
        let mut change = current;
        let mut attempt = 1;
        loop {
            if let Some(_signal) = self.interrupt.get() {
                return Step::Done(Outcome::NotAttempted);
            }
            let err = match self.send(&change, dry_run).await {
                Ok(answer) => {
                    if dry_run && let Some(message) = self.missing_filter(&change, Ok(&answer)) {
                        return Step::Done(Outcome::Unsupported { message });
                    }
                    return Step::Sent(change);
                }
                Err(e) => e,
            };
            let retryable = match change.action() {
                Action::Update => err.is_conflict() || err.is_not_found(),
                Action::Create => err.is_already_exists(),
                Action::Delete => err.is_conflict() || err.is_not_found(),
                Action::Unchanged => false,
            };
            if !retryable {
                if dry_run && let Some(message) = self.missing_filter(&change, Err(&err)) {
                    return Step::Done(Outcome::Unsupported { message });
                }
                let verb = match change.action() {
                    Action::Create => "create",
                    Action::Delete => "delete",
                    _ => verb,
                };
                let message = self.describe(&err, verb, &change);
                // A real write that got no answer may have landed; an error answer means it
                // did not.
                return Step::Done(if !dry_run && err.may_have_landed() {
                    Outcome::Unknown { message }
                } else {
                    Outcome::Failed { message }
                });
            }
            if change.action() == Action::Delete && err.is_not_found() {
                return Step::Done(Outcome::AlreadyDone);
            }
            if attempt >= self.opts.tries {
                return Step::Done(Outcome::Failed {
                    message: format!(
                        "{}: still conflicting after {} attempt{}; someone keeps changing it — run again to see the new state, or raise --retries",
                        change.reference(),
                        attempt,
                        if attempt == 1 { "" } else { "s" }
                    ),
                });
            }
            if !err.is_already_exists() {
                tokio::time::sleep(backoff(&self.opts, attempt)).await;
            }
            attempt += 1;

            // Re-read and re-plan.
            let live = match self.cluster.get(change.kind, &change.name).await {
                Ok(live) => live,
                Err(e) => {
                    return Step::Done(Outcome::Failed {
                        message: self.describe(&e, "get", &change),
                    });
                }
            };
            if approved.action() == Action::Create
                && let Some(existing) = &live
                && !self.is_managed_sibling(existing, approved)
            {
                return Step::Done(Outcome::Failed {
                    message: format!(
                        "{} already exists and is not one of {}'s managed {} (labels app={} and {IDENTIFIER_LABEL}); rename or remove it",
                        change.reference(),
                        self.app,
                        change.kind.plural_title(),
                        self.app
                    ),
                });
            }
            let fresh = match applied::replan(planned, live.as_ref()) {
                Ok(f) => f,
                Err(e) => {
                    return Step::Done(Outcome::Tripped {
                        reason: format!("the live object changed since the plan was shown: {e}"),
                        fresh: None,
                    });
                }
            };
            // A create that met an existing managed sibling becomes a conditional update to
            // exactly the approved desired state (the user saw the whole object).
            let verdict = if approved.action() == Action::Create && fresh.action() == Action::Update
            {
                Recheck::Proceed(fresh)
            } else {
                recheck(approved, fresh)
            };
            match verdict {
                Recheck::Proceed(f) => change = Arc::new(f),
                Recheck::AlreadyDone => return Step::Done(Outcome::AlreadyDone),
                Recheck::Tripped(f) => {
                    let reason = guard_reason(approved, &f);
                    return Step::Done(Outcome::Tripped {
                        reason,
                        fresh: Some(Box::new(f)),
                    });
                }
            }
        }
    }
}

/// Says, in one line, what moved under us.
pub(crate) fn guard_reason(approved: &ObjectChange, fresh: &ObjectChange) -> String {
    if approved.action() != fresh.action() {
        return match (approved.action(), fresh.action()) {
            (Action::Update, Action::Create) => {
                "it was deleted after the plan was shown; nothing was written".into()
            }
            (a, f) => format!(
                "it changed after the plan was shown (planned to {a}, now it would be {f}); nothing was written"
            ),
        };
    }
    if approved.action() == Action::Delete
        && approved.write.as_ref().and_then(Write::base).map(Base::uid)
            != fresh.write.as_ref().and_then(Write::base).map(Base::uid)
    {
        return "it was deleted and re-created after the plan was shown; the new object was left alone".into();
    }
    let moved: Vec<String> = fresh
        .fields
        .iter()
        .filter(|f| !approved.fields.contains(f))
        .map(|f| {
            match approved.fields.iter().find(|a| a.path == f.path) {
                Some(shown) => format!(
                    "{} is now {} (the plan showed {})",
                    Untrusted(&f.path),
                    display(f.before().as_deref()),
                    display(shown.before().as_deref())
                ),
                // Someone changed a part this run owns but was going to leave as it was.
                None => format!(
                    "{} is now {}, and the plan left it as it was",
                    Untrusted(&f.path),
                    display(f.before().as_deref())
                ),
            }
        })
        .collect();
    if moved.is_empty() {
        "its changed fields moved after the plan was shown; nothing was written".into()
    } else {
        format!("{}; nothing was written", moved.join(", "))
    }
}

fn display(v: Option<&Value>) -> String {
    match v {
        None => "absent".into(),
        Some(Value::String(s)) => format!("{:?}", Untrusted(s)),
        Some(Value::Object(_)) | Some(Value::Array(_)) => "different".into(),
        Some(other) => other.to_string(),
    }
}

/// The outcome of the dry run of every change of a plan: the changes to write (as they were
/// last sent, possibly re-planned after a conflict) and what is already decided.
#[derive(Debug)]
pub struct Preflighted {
    outcomes: Vec<Option<Outcome>>,
    to_send: Vec<Option<Arc<ObjectChange>>>,
}

impl Preflighted {
    /// Changes left to write.
    pub fn writes(&self) -> usize {
        self.to_send.iter().filter(|c| c.is_some()).count()
    }
}

/// Whether only the server's dry run can tell that `change` must not be written: an
/// HTTPRoute's create or patch, which a cluster without the ExternalAuth filter may store
/// without the filter's settings ([`Applier::missing_filter`]) — written for real, the route
/// would serve its scoped paths unguarded. Any other change is refused by its write as by its
/// dry run, with nothing written.
pub fn needs_dry_run(change: &ObjectChange) -> bool {
    change.kind == Kind::HttpRoute
        && matches!(
            change.write,
            Some(Write::Create { .. } | Write::Patch { .. })
        )
}

/// Every change of `plan` to write as planned, without a dry run: for a run whose one write
/// is its own check ([`crate::writing`]).
pub fn unchecked(plan: &Plan) -> Preflighted {
    let n = plan.objects.len();
    let mut outcomes: Vec<Option<Outcome>> = vec![None; n];
    let mut to_send: Vec<Option<Arc<ObjectChange>>> = vec![None; n];
    for (i, p) in plan.objects.iter().enumerate() {
        if p.change.is_change() {
            to_send[i] = Some(Arc::clone(&p.change));
        } else {
            outcomes[i] = Some(Outcome::Unchanged);
        }
    }
    Preflighted { outcomes, to_send }
}

/// Sends every change once with `dryRun=All`, all at once: `Ok` when the server would take
/// them all, `Err` with the report (nothing written) when it refuses one, the guard trips on
/// one, or a signal came.
pub async fn preflight(
    cluster: &Cluster,
    plan: &Plan,
    opts: ApplyOptions,
    interrupt: &InterruptFlag,
) -> Result<Preflighted, Report> {
    let applier = &Applier {
        cluster,
        app: &plan.app,
        opts,
        interrupt,
    };
    let Preflighted {
        mut outcomes,
        mut to_send,
    } = unchecked(plan);

    // Each change moves into its request and comes back (possibly re-planned) with the
    // result: no copies.
    let preflight = join_all(plan.objects.iter().enumerate().filter_map(|(i, p)| {
        to_send[i]
            .take()
            .map(|c| async move { (i, applier.drive(p, c, true).await) })
    }))
    .await;
    let mut preflight_ok = true;
    for (i, step) in preflight {
        match step {
            Step::Sent(c) => to_send[i] = Some(c),
            Step::Done(Outcome::AlreadyDone) => {
                to_send[i] = None;
                outcomes[i] = Some(Outcome::AlreadyDone);
            }
            Step::Done(o) => {
                preflight_ok = false;
                to_send[i] = None;
                outcomes[i] = Some(o);
            }
        }
    }
    let interrupted = interrupt.get();
    if !preflight_ok || interrupted.is_some() {
        return Err(finish(plan, outcomes, !preflight_ok, interrupted));
    }
    Ok(Preflighted { outcomes, to_send })
}

/// Writes what [`preflight`] passed, round by round ([`write_order`](appupdate_model::plan::write_order)); a failure stops the
/// later rounds, a signal stops new requests.
pub async fn write(
    cluster: &Cluster,
    plan: &Plan,
    ready: Preflighted,
    opts: ApplyOptions,
    interrupt: &InterruptFlag,
) -> Report {
    let no_companion = |_: &Report, _: Settled| std::future::ready(());
    write_with(cluster, plan, ready, opts, interrupt, no_companion)
        .await
        .0
}

/// What the last write round did, once its writes are done: the report the run ends with
/// (`None` while they are still in flight). A companion still at work then may stop what the
/// round made needless (a record's retries, when nothing was written).
pub type Settled = tokio::sync::watch::Receiver<Option<Report>>;

/// [`write()`], and `companion` sent together with the last write round: it is called with the
/// report the run would end with if every write of that round lands (the writes before it have
/// all landed by then) and with what the round did once it is done ([`Settled`]), and its future
/// runs concurrently with the round's writes. `None` when the last round never started (an
/// earlier round failed, a signal came, or nothing was left to write). This is how a run's
/// history record costs no round of its own.
pub async fn write_with<F, Fut>(
    cluster: &Cluster,
    plan: &Plan,
    ready: Preflighted,
    opts: ApplyOptions,
    interrupt: &InterruptFlag,
    companion: F,
) -> (Report, Option<Fut::Output>)
where
    F: FnOnce(&Report, Settled) -> Fut,
    Fut: std::future::Future,
{
    let applier = &Applier {
        cluster,
        app: &plan.app,
        opts,
        interrupt,
    };
    let n = plan.objects.len();
    let Preflighted {
        mut outcomes,
        mut to_send,
    } = ready;
    let report_interrupt = interrupt.get();
    // 2. Writes, round by round.
    let order = plan.write_order();
    let rounds: Vec<Vec<usize>> = (0..order.round_count())
        .map(|phase| {
            (0..n)
                .filter(|&i| to_send[i].is_some() && order.rounds[i] == Some(phase))
                .collect()
        })
        .filter(|round: &Vec<usize>| !round.is_empty())
        .collect();
    let mut companion = Some(companion);
    let mut companion_output = None;
    for (r, round) in rounds.iter().enumerate() {
        if interrupt.get().is_some() {
            break;
        }
        let writes = join_all(round.iter().map(|&i| {
            let p = &plan.objects[i];
            let c = to_send[i].take();
            async move {
                match c {
                    Some(c) => (i, applier.drive(p, c, false).await),
                    None => (i, Step::Done(Outcome::NotAttempted)),
                }
            }
        }));
        let results = match companion.take().filter(|_| r + 1 == rounds.len()) {
            Some(companion) => {
                let mut expected = outcomes.clone();
                for &i in round {
                    expected[i] = Some(Outcome::Applied);
                }
                let expected = finish(plan, expected, false, None);
                let (settled, watching) = tokio::sync::watch::channel(None);
                let before = &outcomes;
                let writes = async move {
                    let results = writes.await;
                    let mut done = before.clone();
                    for (i, step) in &results {
                        done[*i] = Some(match step {
                            Step::Sent(_) => Outcome::Applied,
                            Step::Done(o) => o.clone(),
                        });
                    }
                    settled.send_replace(Some(finish(plan, done, false, None)));
                    results
                };
                let (results, out) = futures::join!(writes, companion(&expected, watching));
                companion_output = Some(out);
                results
            }
            None => writes.await,
        };
        let mut round_ok = true;
        for (i, step) in results {
            to_send[i] = None;
            outcomes[i] = Some(match step {
                Step::Sent(_) => Outcome::Applied,
                Step::Done(o) => {
                    if !matches!(o, Outcome::AlreadyDone) {
                        round_ok = false;
                    }
                    o
                }
            });
        }
        if !round_ok {
            break;
        }
    }
    let report_interrupt = report_interrupt.or(interrupt.get());
    (
        finish(plan, outcomes, false, report_interrupt),
        companion_output,
    )
}

fn finish(
    plan: &Plan,
    outcomes: Vec<Option<Outcome>>,
    stopped_in_preflight: bool,
    interrupted: Option<Interruption>,
) -> Report {
    let entries = plan
        .objects
        .iter()
        .zip(outcomes)
        .map(|(p, o)| (Arc::clone(&p.change), o.unwrap_or(Outcome::NotAttempted)))
        .collect();
    Report {
        entries,
        stopped_in_preflight,
        interrupted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_the_initial_delay_with_small_jitter() {
        let o = ApplyOptions::default();
        for (attempt, ms) in [(1, 10.0), (2, 20.0), (3, 40.0), (4, 80.0)] {
            let d = backoff(&o, attempt).as_secs_f64() * 1000.0;
            assert!(
                d >= ms * 0.89 && d <= ms * 1.11,
                "attempt {attempt}: {d} ms"
            );
        }
        assert!(backoff(&o, 30) <= Duration::from_millis(1100));
    }
}
