//! Deployment rollout simulation: a controller that watches Deployments like the real
//! deployment controller and writes their status through the status subresource (manager
//! `kube-controller-manager`), bumping the resourceVersion and emitting MODIFIED events.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::Rollout;
use crate::kinds;
use crate::server::Shared;
use crate::timefmt;

/// The pod-template-hash a ReplicaSet of this template would get.
fn template_hash(obj: &Value) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let text = obj
        .pointer("/spec/template")
        .map(Value::to_string)
        .unwrap_or_default();
    // FNV-1a, then the safe alphabet, like rand.SafeEncodeString(fmt.Sprint(hash)).
    let mut h: u32 = 0x811c_9dc5;
    for b in text.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h.to_string()
        .bytes()
        .map(|d| char::from(ALPHABET[d as usize % ALPHABET.len()]))
        .collect()
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Phase {
    /// Half-way through an automatic rollout.
    Progressing,
    Complete,
    Stuck,
    DeadlineExceeded,
}

fn condition(
    ty: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: &str,
    previous: Option<&Value>,
) -> Value {
    // lastTransitionTime only moves when the condition's status changes.
    let transition = match previous {
        Some(p) if p.get("status").and_then(Value::as_str) == Some(status) => {
            p.get("lastTransitionTime").cloned().unwrap_or(json!(now))
        }
        _ => json!(now),
    };
    json!({"type": ty, "status": status, "lastUpdateTime": now, "lastTransitionTime": transition, "reason": reason, "message": message})
}

fn status_for(obj: &Value, phase: Phase) -> Value {
    let generation = obj
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let replicas = obj
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let rs = format!("{name}-{}", template_hash(obj));
    let now = timefmt::now_rfc3339();
    let prev = |ty: &str| {
        obj.pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| {
                cs.iter()
                    .find(|c| c.get("type").and_then(Value::as_str) == Some(ty))
            })
            .cloned()
    };
    let (updated, available, total) = match phase {
        Phase::Complete => (replicas, replicas, replicas),
        Phase::Progressing => {
            let updated = if replicas == 0 { 0 } else { (replicas + 1) / 2 };
            (
                updated,
                replicas - updated / 2,
                replicas + i64::from(replicas > 0),
            )
        }
        Phase::Stuck | Phase::DeadlineExceeded => {
            let updated = i64::from(replicas > 0);
            (updated, (replicas - 1).max(0), replicas + updated)
        }
    };
    let ready = available;
    let unavailable = (total - available).max(0);
    let available_cond = if available >= replicas
        || (replicas > 0 && available >= replicas - (replicas / 4).max(0))
    {
        condition(
            "Available",
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
            &now,
            prev("Available").as_ref(),
        )
    } else {
        condition(
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
            &now,
            prev("Available").as_ref(),
        )
    };
    let progressing = match phase {
        Phase::Complete => condition(
            "Progressing",
            "True",
            "NewReplicaSetAvailable",
            &format!("ReplicaSet \"{rs}\" has successfully progressed."),
            &now,
            prev("Progressing").as_ref(),
        ),
        Phase::Progressing | Phase::Stuck => condition(
            "Progressing",
            "True",
            "ReplicaSetUpdated",
            &format!("ReplicaSet \"{rs}\" is progressing."),
            &now,
            prev("Progressing").as_ref(),
        ),
        Phase::DeadlineExceeded => condition(
            "Progressing",
            "False",
            "ProgressDeadlineExceeded",
            &format!("ReplicaSet \"{rs}\" has timed out progressing."),
            &now,
            prev("Progressing").as_ref(),
        ),
    };
    json!({
        "observedGeneration": generation,
        "replicas": total,
        "updatedReplicas": updated,
        "readyReplicas": ready,
        "availableReplicas": available,
        "unavailableReplicas": unavailable,
        "conditions": [available_cond, progressing],
    })
}

/// Write `phase` for the Deployment if it is still at `generation`.
fn write_status(shared: &Shared, ns: &str, name: &str, generation: i64, phase: Phase) {
    let Some(k) = kinds::by_kind("Deployment") else {
        return;
    };
    let mut st = shared.state.lock();
    let Some(obj) = st.get_object(k, ns, name).cloned() else {
        return;
    };
    if obj.pointer("/metadata/generation").and_then(Value::as_i64) != Some(generation) {
        return;
    }
    let status = status_for(&obj, phase);
    let _ = st.system_update(k, ns, name, "kube-controller-manager", "status", &mut |o| {
        if let Some(m) = o.as_object_mut() {
            m.insert("status".into(), status.clone());
        }
    });
}

fn needs_rollout(obj: &Value, mode: Rollout) -> bool {
    let generation = obj
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let observed = obj
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let replicas = obj
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let status_replicas = obj
        .pointer("/status/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let updated = obj
        .pointer("/status/updatedReplicas")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let reason = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Progressing"))
        })
        .and_then(|c| c.get("reason"))
        .and_then(Value::as_str)
        .unwrap_or("");
    match mode {
        Rollout::Off => false,
        Rollout::Auto { .. } => {
            observed != generation
                || updated != replicas
                || status_replicas != replicas
                || reason != "NewReplicaSetAvailable"
        }
        Rollout::Stuck => observed != generation || reason != "ReplicaSetUpdated",
        Rollout::ProgressDeadlineExceeded => {
            observed != generation || reason != "ProgressDeadlineExceeded"
        }
    }
}

/// Schedule the status progression of one Deployment generation.
fn schedule(shared: &Arc<Shared>, ns: String, name: String, generation: i64, mode: Rollout) {
    let shared = shared.clone();
    tokio::spawn(async move {
        match mode {
            Rollout::Off => {}
            Rollout::Auto { delay } => {
                tokio::time::sleep(delay / 2).await;
                write_status(&shared, &ns, &name, generation, Phase::Progressing);
                tokio::time::sleep(delay - delay / 2).await;
                write_status(&shared, &ns, &name, generation, Phase::Complete);
            }
            Rollout::Stuck => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                write_status(&shared, &ns, &name, generation, Phase::Stuck);
            }
            Rollout::ProgressDeadlineExceeded => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                write_status(&shared, &ns, &name, generation, Phase::DeadlineExceeded);
            }
        }
    });
}

/// The controller loop: runs for the life of the sandbox.
pub async fn run(shared: Arc<Shared>) {
    let mut rx = shared.state.lock().events.subscribe();
    let mut scheduled: HashMap<(String, String), (i64, RolloutKey)> = HashMap::new();
    let mut shutdown = shared.shutdown.clone();
    let kick_all =
        |shared: &Arc<Shared>, scheduled: &mut HashMap<(String, String), (i64, RolloutKey)>| {
            let mode = *shared.rollout.lock();
            let Some(k) = kinds::by_kind("Deployment") else {
                return;
            };
            let objs: Vec<Value> = {
                let st = shared.state.lock();
                st.select(k, None, &crate::store::Selectors::default())
                    .into_iter()
                    .cloned()
                    .collect()
            };
            for o in objs {
                consider(shared, &o, mode, scheduled);
            }
        };
    kick_all(&shared, &mut scheduled);
    loop {
        tokio::select! {
            _ = crate::server::stopped(&mut shutdown) => return,
            _ = shared.rollout_changed.notified() => {
                scheduled.clear();
                kick_all(&shared, &mut scheduled);
            }
            ev = rx.recv() => match ev {
                Ok(ev) => {
                    if ev.kind.kind != "Deployment" {
                        continue;
                    }
                    if ev.event_type == "DELETED" {
                        scheduled.remove(&(ev.namespace.clone(), ev.name.clone()));
                        continue;
                    }
                    let mode = *shared.rollout.lock();
                    consider(&shared, &ev.object, mode, &mut scheduled);
                }
                Err(broadcast::error::RecvError::Lagged(_)) => kick_all(&shared, &mut scheduled),
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }
}

/// Identifies the mode a generation was scheduled under.
#[derive(Clone, Copy, PartialEq, Debug)]
struct RolloutKey(u8);

fn mode_key(mode: Rollout) -> RolloutKey {
    RolloutKey(match mode {
        Rollout::Off => 0,
        Rollout::Auto { .. } => 1,
        Rollout::Stuck => 2,
        Rollout::ProgressDeadlineExceeded => 3,
    })
}

fn consider(
    shared: &Arc<Shared>,
    obj: &Value,
    mode: Rollout,
    scheduled: &mut HashMap<(String, String), (i64, RolloutKey)>,
) {
    if !needs_rollout(obj, mode) {
        return;
    }
    let ns = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let generation = obj
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let key = (ns.clone(), name.clone());
    if scheduled.get(&key) == Some(&(generation, mode_key(mode))) {
        return;
    }
    scheduled.insert(key, (generation, mode_key(mode)));
    schedule(shared, ns, name, generation, mode);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_status_matches_spec() {
        let d = json!({"metadata": {"name": "web", "generation": 3}, "spec": {"replicas": 2, "template": {}}});
        let s = status_for(&d, Phase::Complete);
        assert_eq!(s["observedGeneration"], json!(3));
        assert_eq!(s["updatedReplicas"], json!(2));
        assert_eq!(s["availableReplicas"], json!(2));
        assert_eq!(
            s["conditions"][1]["reason"],
            json!("NewReplicaSetAvailable")
        );
        let s = status_for(&d, Phase::DeadlineExceeded);
        assert_eq!(s["conditions"][1]["status"], json!("False"));
        assert_ne!(s["updatedReplicas"], json!(2));
    }
}
