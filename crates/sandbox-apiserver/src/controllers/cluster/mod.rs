//! The cluster behind `Rollout::Auto`: the deployment and ReplicaSet controllers, a scheduler,
//! one node's kubelet and the quota controller, as kube-controller-manager, kube-scheduler and
//! the reference cluster's stand-in kubelet (`shared/tools/build-realk8s.sh`,
//! `fake-kubelet.py`) behave — with the same objects, pod statuses and Event wording, recorded
//! in `tests/fixtures/rollout-failures/`.
//!
//! * [`deployment`]: one ReplicaSet per pod template (`<deployment>-<pod-template-hash>`,
//!   revision annotations, owner reference), the rolling update (and Recreate) as
//!   `rolloutRolling` computes it, the Deployment's status and conditions as
//!   `syncRolloutStatus` writes them (ReplicaFailure copied from the ReplicaSet, the progress
//!   deadline).
//! * [`replica_set`]: pods from the template (`<replicaset>-<5 random>`), scaled down
//!   unhealthiest first, the ReplicaSet's status, `FailedCreate` with the ReplicaFailure
//!   condition when admission refuses a pod (an exceeded ResourceQuota).
//! * [`kubelet`]: the scheduler binds pods to node `sandbox-node-1` (cpu 64), or reports them
//!   unschedulable; the kubelet starts them after the delay — Running and Ready, except the
//!   failures the stand-in kubelet simulates: an image whose name contains `notfound`
//!   (ErrImagePull, then ImagePullBackOff), `crash` (CrashLoopBackOff, a restart every
//!   [`KubeletTimings::restart_every`]), `stuck` (ImagePullBackOff for ever), and a container
//!   whose environment needs a Secret or ConfigMap that does not exist
//!   (CreateContainerConfigError).
//! * [`quota`]: `status.hard` and `status.used` (`pods`, `count/pods`) of ResourceQuotas.
//! * [`events`]: core/v1 Events as client-go's recorder posts them, and the scheduler's
//!   `events.k8s.io/v1` ones as core/v1 shows them.
//!
//! Time is compressed so that a healthy rollout writes the Deployment's status twice, as the
//! simpler simulation before it did: a new generation is acted on after `delay / 2` (the new
//! ReplicaSet and its first pods, bound at once), the kubelet starts pods `delay / 2` after they
//! were bound, and once one pod of a ReplicaSet has started, the pods created for it later start
//! at once; all the controllers run to a fixed point in one pass, and each Deployment's status
//! is written once at the end of the pass (the intermediate statuses the real controller would
//! have written are computed, and judged against, in between).

mod deployment;
mod events;
mod kubelet;
mod quota;
mod replica_set;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::kinds::{self, Kind};
use crate::store::{FieldValidation, Selectors, State, WriteCtx};

pub use deployment::template_hash;
pub use kubelet::{NODE_IP, NODE_NAME, SCHEDULER_INSTANCE};

/// How the simulated kubelet paces the failures that repeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KubeletTimings {
    /// A crash-looping container restarts this often (the stand-in kubelet: 2 s).
    pub restart_every: Duration,
    /// An image that cannot be pulled is reported `ErrImagePull` for this long after the pod
    /// started, then `ImagePullBackOff` (the stand-in kubelet: 1.5 s).
    pub pull_backoff_after: Duration,
}

impl Default for KubeletTimings {
    fn default() -> Self {
        KubeletTimings {
            restart_every: Duration::from_secs(2),
            pull_backoff_after: Duration::from_millis(1500),
        }
    }
}

/// What the simulation remembers between passes (what a real component keeps in memory).
#[derive(Default)]
pub struct Cluster {
    /// When each Deployment generation was first seen: it is acted on `delay / 2` later.
    generation_seen: HashMap<(String, String, i64), Instant>,
    /// When each pod (uid) was bound to the node.
    bound_at: HashMap<String, Instant>,
    /// When the kubelet started each pod (uid).
    started_at: HashMap<String, Instant>,
    /// ReplicaSets (uid) one of whose pods has started: later pods start at once.
    proven: HashSet<String>,
    /// Events already posted for a pod: (uid, reason, message).
    posted: HashSet<(String, String, String)>,
    /// Pod creations refused per ReplicaSet (uid): attempts so far, the next try, and the
    /// aggregated FailedCreate event once there are ten.
    refused: HashMap<String, Refused>,
    /// The status the deployment controller last wrote, per Deployment (uid).
    written: HashMap<String, Value>,
    /// Pod IPs handed out.
    next_ip: u32,
    ips: HashMap<String, String>,
    recorder: events::Recorder,
}

#[derive(Debug, Clone)]
struct Refused {
    attempts: u32,
    retry_at: Instant,
    combined: Option<String>,
}

/// The simulation's clock and timings for one pass.
#[derive(Debug, Clone, Copy)]
pub struct Pass {
    pub now: Instant,
    pub delay: Duration,
    pub kubelet: KubeletTimings,
}

impl Pass {
    /// How long after a change (a Deployment generation) or a binding the next step comes.
    fn half_delay(&self) -> Duration {
        self.delay / 2
    }
}

/// The earliest of the times something will be due.
#[derive(Debug, Default)]
struct Due(Option<Instant>);

impl Due {
    fn at(&mut self, t: Instant) {
        self.0 = Some(self.0.map_or(t, |d| d.min(t)));
    }
}

impl Cluster {
    /// Run every controller until nothing changes, then write the Deployments' statuses.
    /// Returns when the next timed step is due (`None`: nothing is waiting for time).
    pub fn sync(&mut self, st: &mut State, pass: &Pass) -> Option<Instant> {
        let mut due = Due::default();
        let mut staged = deployment::Staged::default();
        for _ in 0..64 {
            let mut changed = false;
            changed |= deployment::sync_all(self, st, pass, &mut staged, &mut due);
            changed |= replica_set::sync_all(self, st, pass, &mut due);
            changed |= kubelet::schedule_all(self, st, pass);
            changed |= kubelet::run_all(self, st, pass, &mut due);
            changed |= quota::sync_all(st);
            changed |= collect_garbage(st);
            if !changed {
                break;
            }
        }
        deployment::write_statuses(self, st, &staged);
        deployment::deadlines(st, pass, &mut due);
        self.forget_gone(st);
        due.0
    }

    /// Drop what is remembered about pods and ReplicaSets that no longer exist.
    fn forget_gone(&mut self, st: &State) {
        let pods: HashSet<String> = list(st, &kinds::POD, None)
            .iter()
            .map(|p| uid(p).to_string())
            .collect();
        let rss: HashSet<String> = list(st, &kinds::REPLICA_SET, None)
            .iter()
            .map(|r| uid(r).to_string())
            .collect();
        self.bound_at.retain(|k, _| pods.contains(k));
        self.started_at.retain(|k, _| pods.contains(k));
        self.ips.retain(|k, _| pods.contains(k));
        self.posted
            .retain(|(k, _, _)| pods.contains(k) || rss.contains(k));
        self.proven.retain(|k| rss.contains(k));
        self.refused.retain(|k, _| rss.contains(k));
        let deployments: HashSet<String> = list(st, &kinds::DEPLOYMENT, None)
            .iter()
            .map(|d| uid(d).to_string())
            .collect();
        self.written.retain(|k, _| deployments.contains(k));
    }
}

/// The garbage collector, for what this simulation creates: ReplicaSets whose Deployment and
/// pods whose ReplicaSet is gone are deleted.
fn collect_garbage(st: &mut State) -> bool {
    let mut changed = false;
    for (child, parent) in [
        (
            &kinds::REPLICA_SET as &'static dyn Kind,
            &kinds::DEPLOYMENT as &'static dyn Kind,
        ),
        (&kinds::POD, &kinds::REPLICA_SET),
    ] {
        let owners: HashSet<String> = list(st, parent, None)
            .iter()
            .map(|o| uid(o).to_string())
            .collect();
        for obj in list(st, child, None) {
            let Some(owner) = controller_of(&obj) else {
                continue;
            };
            if owner.get("kind").and_then(Value::as_str) != Some(parent.api().kind) {
                continue;
            }
            let owner_uid = owner.get("uid").and_then(Value::as_str).unwrap_or("");
            if !owners.contains(owner_uid) {
                let _ = st.delete_now(child, ns(&obj), name(&obj));
                changed = true;
            }
        }
    }
    changed
}

/// The owner reference with `controller: true`.
fn controller_of(obj: &Value) -> Option<&Value> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|r| r.get("controller") == Some(&Value::Bool(true)))
}

/// Is `obj` controlled by the object with uid `owner`?
fn controlled_by(obj: &Value, owner: &str) -> bool {
    controller_of(obj)
        .and_then(|r| r.get("uid"))
        .and_then(Value::as_str)
        == Some(owner)
}

/// Every stored object of `k` (in `ns`, or everywhere), as stored.
fn list(st: &State, k: &'static dyn Kind, ns: Option<&str>) -> Vec<Value> {
    st.select(k, ns, &Selectors::default())
        .into_iter()
        .cloned()
        .collect()
}

fn name(obj: &Value) -> &str {
    text(obj, "/metadata/name")
}

fn ns(obj: &Value) -> &str {
    text(obj, "/metadata/namespace")
}

fn uid(obj: &Value) -> &str {
    text(obj, "/metadata/uid")
}

fn text<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

fn int(obj: &Value, ptr: &str) -> i64 {
    obj.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

fn deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}

/// How a component writes: as its field manager, validated leniently (its bodies are its own).
fn as_manager(manager: &str) -> WriteCtx {
    WriteCtx {
        manager: manager.into(),
        dry_run: false,
        field_validation: FieldValidation::Ignore,
        inject_conflict: false,
        skip_webhooks: false,
    }
}

/// A condition of `status.conditions` by type.
fn condition<'a>(obj: &'a Value, ty: &str) -> Option<&'a Value> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ty))
}

/// A pod whose Ready condition is True.
fn pod_ready(pod: &Value) -> bool {
    condition(pod, "Ready").and_then(|c| c.get("status")) == Some(&Value::from("True"))
}

/// A pod that counts for its ReplicaSet: not Succeeded or Failed, not being deleted.
fn pod_active(pod: &Value) -> bool {
    !kinds::is_terminal(pod) && !deleting(pod)
}

/// Seconds since the epoch, with a fraction.
fn wall_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}
