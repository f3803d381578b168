//! `--wait` for the Deployment: where its rollout stands, as `kubectl rollout status` sees it
//! ([`rollout_state`]) — a pure function of the live object, as
//! [`crate::route_status::route_state`] is for a route. The controller has observed the current
//! generation, no Progressing condition says `ProgressDeadlineExceeded`, every desired replica
//! is updated, no old replica is left, and every updated replica is available. The plugin's
//! `wait` does the watching and calls [`rollout_state`] on every version of the Deployment it
//! sees.
//!
//! When a rollout does not complete, [`explain()`] says why from the new ReplicaSet's pods and
//! events (found with [`replica_set`]'s selectors), and [`judge`] decides whether it still
//! can.

pub mod explain;
pub mod judge;
pub mod replica_set;

pub use explain::{Explanation, explain};
pub use judge::{Hopeless, Judge};

use std::fmt;

use serde_json::Value;

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
    pub fn progress(&self) -> Option<(u64, u64)> {
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
            .map(crate::text::one_line)
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

/// One object of `tests/data/rollout-failures` (a list's whole `…List`), by its file name
/// without `.json`; built in (the crate reads no files).
#[cfg(test)]
pub(crate) fn fixture(name: &str) -> Value {
    macro_rules! files {
        ($($file:literal),* $(,)?) => {
            match name {
                $($file => include_str!(concat!("../tests/data/rollout-failures/", $file, ".json")),)*
                other => panic!("no fixture {other}"),
            }
        };
    }
    let text = files![
        "deployment-quota",
        "events-image-not-found",
        "events-unschedulable",
        "pod-config-error",
        "pod-crash-loop-oom",
        "pod-err-image-pull",
        "pod-image-pull-backoff",
        "pod-image-pull-backoff-before-1.32",
        "pod-init-crash",
        "pod-unschedulable",
    ];
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// What an autoscaler says it cannot do, after its bounds changed: each of its
/// `ScalingActive` and `AbleToScale` conditions that is `False`, as
/// `ScalingActive=False (FailedGetResourceMetric): <message>` (escaped). A warning, not a
/// failure: the bounds were written, and the autoscaler may recover on its own.
pub fn autoscaler_trouble(hpa: &Value) -> Vec<String> {
    hpa.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| {
            matches!(
                c.get("type").and_then(Value::as_str),
                Some("ScalingActive" | "AbleToScale")
            ) && c.get("status").and_then(Value::as_str) == Some("False")
        })
        .map(|c| {
            let field = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or_default();
            let mut line = format!("{}=False", crate::text::Untrusted(field("type")));
            if !field("reason").is_empty() {
                line.push_str(&format!(" ({})", crate::text::Untrusted(field("reason"))));
            }
            if !field("message").is_empty() {
                line.push_str(&format!(
                    ": {}",
                    crate::text::Untrusted(crate::text::one_line(field("message")))
                ));
            }
            line
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_autoscaler_that_cannot_scale_is_named_with_its_reason() {
        let hpa = serde_json::json!({"status": {"conditions": [
            {"type": "AbleToScale", "status": "True", "reason": "SucceededGetScale"},
            {"type": "ScalingActive", "status": "False", "reason": "FailedGetResourceMetric",
             "message": "the HPA was unable to compute the replica count: failed to get cpu utilization\u{1b}[31m"}
        ]}});
        let lines = super::autoscaler_trouble(&hpa);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0]
                .starts_with("ScalingActive=False (FailedGetResourceMetric): the HPA was unable"),
            "{lines:?}"
        );
        assert!(!lines[0].contains('\u{1b}'), "escaped: {lines:?}");
        assert!(super::autoscaler_trouble(&serde_json::json!({})).is_empty());
    }

    use super::*;
    use serde_json::json;

    fn deployment(generation: i64, replicas: i64, status: Value) -> Value {
        json!({
            "metadata": {"name": "web", "generation": generation},
            "spec": {"replicas": replicas},
            "status": status,
        })
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
}
