//! Deployment rollout simulation, in one of four modes ([`Rollout`]). `Auto` runs the cluster
//! of [`super::cluster`] — ReplicaSets, pods, a node and its kubelet, Events, quotas — which
//! writes the Deployments' status as the real deployment controller does; `Stuck` and
//! `ProgressDeadlineExceeded` only write a status that never completes (no ReplicaSets, no
//! pods); `Off` does nothing, like the controller-less reference cluster. Writes go through
//! the store as the components' field managers (`kube-controller-manager`, `kubelet`…),
//! bumping the resourceVersion and emitting watch events.
//!
//! [`Controller::settled`] tells when it has nothing left to do, so a test can wait for that
//! instead of sleeping.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{broadcast, watch};

use super::cluster::{Cluster, KubeletTimings, Pass, template_hash};
use crate::kinds::{self, DEPLOYMENT};
use crate::model::time;
use crate::store::{Selectors, Store};

/// Deployment rollout simulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rollout {
    /// Status is never touched (the recorded cluster had no controllers).
    Off,
    /// A cluster that runs what it is given: a new generation is acted on after `delay / 2`
    /// (new ReplicaSet, its first pods), whose pods start `delay / 2` after they were bound —
    /// Running and Ready, so the rollout completes after `delay`, unless they fail as a real
    /// node would make them fail (see [`super::cluster`]: images containing `notfound`,
    /// `crash` or `stuck`, a missing Secret or ConfigMap, more cpu than the node's 64, an
    /// exceeded ResourceQuota); a failing rollout never completes and, after its
    /// `progressDeadlineSeconds`, is reported ProgressDeadlineExceeded.
    Auto { delay: Duration },
    /// observedGeneration advances, but updated/available replicas never reach spec.replicas.
    Stuck,
    /// Like `Stuck`, with Progressing=False reason ProgressDeadlineExceeded.
    ProgressDeadlineExceeded,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Phase {
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
    let rs = format!(
        "{name}-{}",
        template_hash(obj.pointer("/spec/template").unwrap_or(&Value::Null), 0)
    );
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
    let updated = i64::from(replicas > 0);
    let (available, total) = ((replicas - 1).max(0), replicas + updated);
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
        Phase::Stuck => condition(
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
    kubelet: Mutex<KubeletTimings>,
    progress: Mutex<Progress>,
}

/// How far the controller has got (updated under the store's lock where it writes, so that
/// [`Controller::settled`] sees a consistent picture).
#[derive(Default)]
struct Progress {
    /// Status progressions scheduled and not finished (`Stuck`, `ProgressDeadlineExceeded`).
    in_flight: u64,
    /// The revision of the last store event handled (0: not subscribed yet).
    seen_rv: u64,
    /// Mode changes requested, and the last one applied.
    mode_version: u64,
    applied_version: u64,
    /// `Auto`: a change seen that the cluster has not synced yet.
    sync_pending: bool,
    /// `Auto`: the cluster waits for a time to act again (a pod to start, a restart, a
    /// progress deadline).
    timer_pending: bool,
}

impl Controller {
    pub fn new(mode: Rollout, kubelet: KubeletTimings) -> Arc<Controller> {
        Arc::new(Controller {
            mode: watch::channel(mode).0,
            kubelet: Mutex::new(kubelet),
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

    /// How the simulated kubelet paces repeated failures.
    pub fn kubelet(&self) -> KubeletTimings {
        *self.kubelet.lock()
    }

    /// Change the kubelet's pacing (applies from the next step).
    pub fn set_kubelet(&self, timings: KubeletTimings) {
        *self.kubelet.lock() = timings;
    }

    /// Nothing left to do: every store change so far has been considered, the last mode change
    /// applied, and no status write is scheduled. In `Auto` mode, nothing waits for time
    /// either: a crash-looping pod or a progress deadline still to come keeps it unsettled.
    pub fn settled(&self, store: &Store) -> bool {
        let st = store.write();
        let last = st.history.last().map_or(0, |e| e.rv);
        let p = self.progress.lock();
        p.in_flight == 0
            && !p.sync_pending
            && !p.timer_pending
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
        // Auto runs the cluster, which looks at everything at every change.
        Rollout::Off | Rollout::Auto { .. } => false,
        Rollout::Stuck => observed != generation || reason != "ReplicaSetUpdated",
        Rollout::ProgressDeadlineExceeded => {
            observed != generation || reason != "ProgressDeadlineExceeded"
        }
    }
}

/// Schedule the status progression of one Deployment generation (`Stuck`,
/// `ProgressDeadlineExceeded`).
fn schedule(
    store: &Arc<Store>,
    controller: &Arc<Controller>,
    ns: String,
    name: String,
    generation: i64,
    mode: Rollout,
) {
    let phase = match mode {
        Rollout::Stuck => Phase::Stuck,
        Rollout::ProgressDeadlineExceeded => Phase::DeadlineExceeded,
        Rollout::Off | Rollout::Auto { .. } => return,
    };
    controller.progress.lock().in_flight += 1;
    let store = store.clone();
    let controller = controller.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        write_status(&store, &ns, &name, generation, phase);
        // Under the store's lock: no one sees the last write without this.
        let _st = store.write();
        controller.progress.lock().in_flight -= 1;
    });
}

/// What the loop remembers: the generation (and mode) each Deployment was scheduled for.
type Scheduled = HashMap<(String, String), (i64, RolloutKey)>;

/// One pass of the `Auto` cluster, under the store's lock: when it wants to act again.
fn sync_cluster(
    store: &Store,
    controller: &Controller,
    cluster: &mut Cluster,
    delay: Duration,
) -> Option<Instant> {
    let mut st = store.write();
    let pass = Pass {
        now: Instant::now(),
        delay,
        kubelet: controller.kubelet(),
    };
    let next = cluster.sync(&mut st, &pass);
    let mut p = controller.progress.lock();
    p.sync_pending = false;
    p.timer_pending = next.is_some();
    next
}

/// The controller loop: runs until `shutdown`.
pub async fn run(
    store: Arc<Store>,
    controller: Arc<Controller>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut rx = {
        let st = store.write();
        let mut p = controller.progress.lock();
        p.seen_rv = st.history.last().map_or(0, |e| e.rv).max(1);
        p.sync_pending = true;
        st.events.subscribe()
    };
    let mut mode_rx = controller.mode.subscribe();
    let mut scheduled: Scheduled = HashMap::new();
    let mut cluster = Cluster::default();
    let mut next: Option<Instant> = None;
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
        let mut p = controller.progress.lock();
        p.applied_version = version;
        // Only Auto syncs the cluster; the other modes have nothing pending there.
        if !matches!(mode, Rollout::Auto { .. }) {
            p.sync_pending = false;
            p.timer_pending = false;
        }
    };
    kick_all(&mut scheduled);
    loop {
        let auto = match controller.mode() {
            Rollout::Auto { delay } => Some(delay),
            _ => None,
        };
        if let Some(delay) = auto
            && controller.progress.lock().sync_pending
        {
            next = sync_cluster(&store, &controller, &mut cluster, delay);
        }
        let timer = async {
            match (auto, next) {
                (Some(_), Some(at)) => tokio::time::sleep_until(at.into()).await,
                _ => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = shutdown.wait_for(|stop| *stop) => return,
            changed = mode_rx.changed() => {
                if changed.is_err() {
                    return;
                }
                scheduled.clear();
                controller.progress.lock().sync_pending = true;
                kick_all(&mut scheduled);
            }
            _ = timer => {
                controller.progress.lock().sync_pending = true;
            }
            ev = rx.recv() => match ev {
                Ok(ev) => {
                    // Take every change already there, so that a burst (the cluster's own
                    // writes) is one pass.
                    let mut batch = vec![ev];
                    while let Ok(more) = rx.try_recv() {
                        batch.push(more);
                    }
                    let mode = controller.mode();
                    for ev in batch {
                        if kinds::same(ev.kind, &DEPLOYMENT) {
                            if ev.event_type == "DELETED" {
                                scheduled.remove(&(ev.namespace.clone(), ev.name.clone()));
                            } else {
                                consider(&store, &controller, &ev.object, mode, &mut scheduled);
                            }
                        }
                        let mut p = controller.progress.lock();
                        // The cluster's own Events change nothing it acts on.
                        if matches!(mode, Rollout::Auto { .. })
                            && !kinds::same(ev.kind, &kinds::EVENT)
                        {
                            p.sync_pending = true;
                        }
                        p.seen_rv = p.seen_rv.max(ev.rv);
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let last = store.write().history.last().map_or(0, |e| e.rv);
                    kick_all(&mut scheduled);
                    let mut p = controller.progress.lock();
                    p.sync_pending = matches!(controller.mode(), Rollout::Auto { .. });
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
    fn a_stuck_status_never_reaches_spec_and_the_deadline_says_so() {
        let d = json!({"metadata": {"name": "web", "generation": 3}, "spec": {"replicas": 2, "template": {}}});
        let s = status_for(&d, Phase::Stuck);
        assert_eq!(s["observedGeneration"], json!(3));
        assert_eq!(s["updatedReplicas"], json!(1));
        assert_eq!(s["conditions"][1]["reason"], json!("ReplicaSetUpdated"));
        let s = status_for(&d, Phase::DeadlineExceeded);
        assert_eq!(s["conditions"][1]["status"], json!("False"));
        assert_ne!(s["updatedReplicas"], json!(2));
    }
}
