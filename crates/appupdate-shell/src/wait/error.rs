//! Why a wait ended without everything done ([`WaitError`]), and the durations it names.

use std::time::Duration;

use appupdate_model::rollout::Explanation;
use appupdate_model::route_status::Refusal;
use appupdate_model::text::Untrusted;

/// Why the wait ended without everything done. The writes have landed in every case.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WaitError {
    /// Only the rollout was still pending.
    #[error(
        "timed out after {after} waiting for the rollout of {target}: {last}; the changes were applied, the rollout may still finish (kubectl rollout status {kubectl} -n {ns}){why}",
        after = format_duration(*.after),
        target = Untrusted(.target),
        last = Untrusted(.last),
        kubectl = Untrusted(.kubectl_ref),
        ns = Untrusted(.namespace),
        why = because(.why)
    )]
    Timeout {
        target: String,
        kubectl_ref: String,
        namespace: String,
        after: Duration,
        /// What it was still waiting for.
        last: String,
        /// Why, from the new pods (empty when nothing was read).
        why: Box<Explanation>,
    },
    #[error(
        "the rollout of {target} failed: {state}; the changes were applied (kubectl rollout status {kubectl} -n {ns}){why}",
        target = Untrusted(.target),
        state = Untrusted(.state),
        kubectl = Untrusted(.kubectl_ref),
        ns = Untrusted(.namespace),
        why = because(.why)
    )]
    Failed {
        target: String,
        kubectl_ref: String,
        namespace: String,
        state: String,
        why: Box<Explanation>,
    },
    /// `--fail-fast`: the rollout cannot succeed without someone acting.
    #[error(
        "the rollout of {target} cannot succeed without someone acting: {hopeless}; stopped waiting after {after} (--fail-fast=false waits until --timeout); the changes were applied (kubectl rollout status {kubectl} -n {ns}){why}",
        target = Untrusted(.target),
        hopeless = .hopeless,
        after = format_duration(*.after),
        kubectl = Untrusted(.kubectl_ref),
        ns = Untrusted(.namespace),
        why = because(.why)
    )]
    CannotSucceed {
        target: String,
        kubectl_ref: String,
        namespace: String,
        after: Duration,
        /// Which rule ended the wait, escaped.
        hopeless: String,
        why: Box<Explanation>,
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
        "timed out after {after} waiting for {pending} in namespace {ns:?} (context {ctx:?}); the changes were applied and may still be taken up (kubectl get -n {ns_arg} -o yaml {refs} shows their status), or undo them with {undo}{why}",
        after = format_duration(*.after),
        pending = pending_list(.pending),
        refs = pending_refs(.pending),
        ns = Untrusted(.namespace),
        ns_arg = Untrusted(.namespace),
        ctx = Untrusted(.context),
        undo = Untrusted(.undo),
        why = because(.why)
    )]
    Pending {
        after: Duration,
        /// Each object still pending.
        pending: Vec<PendingObject>,
        namespace: String,
        context: String,
        undo: String,
        why: Box<Explanation>,
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
                | WaitError::CannotSucceed { .. }
                | WaitError::Deleted { .. }
                | WaitError::Watch { .. }
        )
    }
}

impl WaitError {
    /// Why the rollout did not complete, from its new pods, when they were read.
    pub fn explanation(&self) -> Option<&Explanation> {
        match self {
            WaitError::Timeout { why, .. }
            | WaitError::Failed { why, .. }
            | WaitError::CannotSucceed { why, .. }
            | WaitError::Pending { why, .. } => Some(why.as_ref()).filter(|w| !w.is_empty()),
            _ => None,
        }
    }
}

/// The explanation's lines, each on its own indented line after the message (escaped by
/// [`Explanation::lines`]); nothing when nothing was read.
fn because(why: &Explanation) -> String {
    why.lines()
        .iter()
        .map(|line| format!("\n  {line}"))
        .collect()
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
