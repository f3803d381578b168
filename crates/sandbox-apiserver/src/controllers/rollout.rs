//! Deployment rollout simulation: a controller that watches Deployments like the real
//! deployment controller and writes their status through the status subresource (manager
//! `kube-controller-manager`), bumping the resourceVersion and emitting MODIFIED events.
//!
//! [`Controller::settled`] tells when it has nothing left to do, so a test can wait for that
//! instead of sleeping.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{broadcast, watch};

use crate::kinds::{self, DEPLOYMENT};
use crate::model::time;
use crate::store::{Selectors, Store};

/// Deployment rollout simulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rollout {
    /// Status is never touched (the recorded cluster had no controllers).
    Off,
    /// After a spec change, the status advances in two steps and completes after `delay`.
    Auto { delay: Duration },
    /// observedGeneration advances, but updated/available replicas never reach spec.replicas.
    Stuck,
    /// Like `Stuck`, with Progressing=False reason ProgressDeadlineExceeded.
    ProgressDeadlineExceeded,
}

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
    let now = time::now_rfc3339();
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

/// The controller's mode and progress, shared with the handle and the control surface.
pub struct Controller {
    mode: watch::Sender<Rollout>,
    progress: Mutex<Progress>,
}

/// How far the controller has got (updated under the store's lock where it writes, so that
/// [`Controller::settled`] sees a consistent picture).
#[derive(Default)]
struct Progress {
    /// Status progressions scheduled and not finished.
    in_flight: u64,
    /// The revision of the last store event handled (0: not subscribed yet).
    seen_rv: u64,
    /// Mode changes requested, and the last one applied.
    mode_version: u64,
    applied_version: u64,
}

impl Controller {
    pub fn new(mode: Rollout) -> Arc<Controller> {
        Arc::new(Controller {
            mode: watch::channel(mode).0,
            progress: Mutex::new(Progress::default()),
        })
    }

    /// The current mode.
    pub fn mode(&self) -> Rollout {
        *self.mode.borrow()
    }

    /// Switch the mode; existing Deployments are considered again.
    pub fn set_mode(&self, mode: Rollout) {
        self.progress.lock().mode_version += 1;
        self.mode.send_replace(mode);
    }

    /// Nothing left to do: every store change so far has been considered, the last mode change
    /// applied, and no status write is scheduled.
    pub fn settled(&self, store: &Store) -> bool {
        let st = store.write();
        let last = st.history.last().map_or(0, |e| e.rv);
        let p = self.progress.lock();
        p.in_flight == 0
            && p.applied_version == p.mode_version
            && p.seen_rv >= last
            && p.seen_rv > 0
    }
}

/// Write `phase` for the Deployment if it is still at `generation`.
fn write_status(store: &Store, ns: &str, name: &str, generation: i64, phase: Phase) {
    let k = &DEPLOYMENT;
    let mut st = store.write();
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
fn schedule(
    store: &Arc<Store>,
    controller: &Arc<Controller>,
    ns: String,
    name: String,
    generation: i64,
    mode: Rollout,
) {
    controller.progress.lock().in_flight += 1;
    let store = store.clone();
    let controller = controller.clone();
    tokio::spawn(async move {
        match mode {
            Rollout::Off => {}
            Rollout::Auto { delay } => {
                tokio::time::sleep(delay / 2).await;
                write_status(&store, &ns, &name, generation, Phase::Progressing);
                tokio::time::sleep(delay - delay / 2).await;
                write_status(&store, &ns, &name, generation, Phase::Complete);
            }
            Rollout::Stuck => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                write_status(&store, &ns, &name, generation, Phase::Stuck);
            }
            Rollout::ProgressDeadlineExceeded => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                write_status(&store, &ns, &name, generation, Phase::DeadlineExceeded);
            }
        }
        // Under the store's lock: no one sees the last write without this.
        let _st = store.write();
        controller.progress.lock().in_flight -= 1;
    });
}

/// What the loop remembers: the generation (and mode) each Deployment was scheduled for.
type Scheduled = HashMap<(String, String), (i64, RolloutKey)>;

/// The controller loop: runs until `shutdown`.
pub async fn run(
    store: Arc<Store>,
    controller: Arc<Controller>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut rx = {
        let st = store.write();
        controller.progress.lock().seen_rv = st.history.last().map_or(0, |e| e.rv).max(1);
        st.events.subscribe()
    };
    let mut mode_rx = controller.mode.subscribe();
    let mut scheduled: Scheduled = HashMap::new();
    let kick_all = |scheduled: &mut Scheduled| {
        let version = controller.progress.lock().mode_version;
        let mode = controller.mode();
        let objs: Vec<Value> = {
            let st = store.write();
            st.select(&DEPLOYMENT, None, &Selectors::default())
                .into_iter()
                .cloned()
                .collect()
        };
        for o in objs {
            consider(&store, &controller, &o, mode, scheduled);
        }
        controller.progress.lock().applied_version = version;
    };
    kick_all(&mut scheduled);
    loop {
        tokio::select! {
            _ = shutdown.wait_for(|stop| *stop) => return,
            changed = mode_rx.changed() => {
                if changed.is_err() {
                    return;
                }
                scheduled.clear();
                kick_all(&mut scheduled);
            }
            ev = rx.recv() => match ev {
                Ok(ev) => {
                    if kinds::same(ev.kind, &DEPLOYMENT) {
                        if ev.event_type == "DELETED" {
                            scheduled.remove(&(ev.namespace.clone(), ev.name.clone()));
                        } else {
                            let mode = controller.mode();
                            consider(&store, &controller, &ev.object, mode, &mut scheduled);
                        }
                    }
                    let mut p = controller.progress.lock();
                    p.seen_rv = p.seen_rv.max(ev.rv);
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let last = store.write().history.last().map_or(0, |e| e.rv);
                    kick_all(&mut scheduled);
                    let mut p = controller.progress.lock();
                    p.seen_rv = p.seen_rv.max(last);
                }
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
    store: &Arc<Store>,
    controller: &Arc<Controller>,
    obj: &Value,
    mode: Rollout,
    scheduled: &mut Scheduled,
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
    schedule(store, controller, ns, name, generation, mode);
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
