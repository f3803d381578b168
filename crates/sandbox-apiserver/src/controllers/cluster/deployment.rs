//! The deployment controller (`pkg/controller/deployment` of v1.33): the new ReplicaSet of the
//! pod template (`getNewReplicaSet`), the rolling update (`reconcileNewReplicaSet`,
//! `reconcileOldReplicaSets`) or Recreate, the cleanup of old ReplicaSets beyond
//! `revisionHistoryLimit`, and the status with its conditions (`calculateStatus`,
//! `syncRolloutStatus`: Available, Progressing — NewReplicaSetCreated, ReplicaSetUpdated,
//! NewReplicaSetAvailable, ProgressDeadlineExceeded — and the ReplicaSets' ReplicaFailure).
//!
//! Each sync's status is staged ([`Staged`]) and compared with the previous one, as the real
//! controller compares with the status it wrote last; the staged statuses are written once, at
//! the end of the pass ([`write_statuses`]).

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::events::Source;
use super::{
    Cluster, Due, Pass, as_manager, controlled_by, deleting, int, list, name, ns, text, uid,
    wall_now,
};
use crate::kinds::{self, Kind};
use crate::model::{schema, time};
use crate::store::State;

const CONTROLLER: Source<'static> = Source {
    component: "deployment-controller",
    host: "",
    manager: "kube-controller-manager",
};

const REVISION: &str = "deployment.kubernetes.io/revision";
const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
const DESIRED: &str = "deployment.kubernetes.io/desired-replicas";
const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
const HASH_LABEL: &str = "pod-template-hash";

/// The Deployments as the controller last wrote them in this pass (annotations and status).
#[derive(Default)]
pub(super) struct Staged {
    objs: HashMap<(String, String), Value>,
}

/// The pod-template-hash of a template: FNV-1a of its JSON and the collision count, in the
/// alphabet of `rand.SafeEncodeString` (the real one hashes Go's dump of the struct, which the
/// sandbox cannot reproduce; tests map the names).
pub fn template_hash(template: &Value, collisions: i64) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut text = template.to_string();
    if collisions > 0 {
        text.push_str(&collisions.to_string());
    }
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

pub(super) fn sync_all(
    cl: &mut Cluster,
    st: &mut State,
    pass: &Pass,
    staged: &mut Staged,
    due: &mut Due,
) -> bool {
    let mut changed = false;
    for stored in list(st, &kinds::DEPLOYMENT, None) {
        if deleting(&stored) {
            continue;
        }
        let key = (ns(&stored).to_string(), name(&stored).to_string());
        let d = match staged.objs.get(&key) {
            Some(d) => d.clone(),
            None => as_last_written(cl, stored),
        };
        let generation = int(&d, "/metadata/generation");
        if int(&d, "/status/observedGeneration") != generation {
            let first = *cl
                .generation_seen
                .entry((key.0.clone(), key.1.clone(), generation))
                .or_insert(pass.now);
            let at = first + pass.half_delay();
            if pass.now < at {
                due.at(at);
                continue;
            }
        }
        let (next, wrote) = sync_deployment(cl, st, d.clone());
        changed |= wrote;
        let next = normalized(&next);
        if next != normalized(&d) {
            staged.objs.insert(key, next);
            changed = true;
        }
    }
    changed
}

fn normalized(d: &Value) -> Value {
    schema::normalize(kinds::DEPLOYMENT.schema(), d)
}

/// The Deployment with the status this controller last wrote: like the real controller, it
/// judges progress against its own last status. (A status written by someone else — a test
/// making a rollout regress — stands until the controller has something new to say.)
fn as_last_written(cl: &Cluster, mut stored: Value) -> Value {
    if let Some(status) = cl.written.get(uid(&stored)) {
        stored["status"] = status.clone();
    }
    stored
}

/// Write every staged Deployment whose annotations or status differ from what this controller
/// last wrote (or, the first time, from the stored one).
pub(super) fn write_statuses(cl: &mut Cluster, st: &mut State, staged: &Staged) {
    for ((namespace, dname), d) in &staged.objs {
        let Some(stored) = st.get_object(&kinds::DEPLOYMENT, namespace, dname).cloned() else {
            continue;
        };
        let annotations = d.pointer("/metadata/annotations").cloned();
        let status = normalized(d).get("status").cloned().unwrap_or(json!({}));
        let last = as_last_written(cl, stored.clone());
        if stored.pointer("/metadata/annotations").cloned() == annotations
            && normalized(&last).get("status") == Some(&status)
        {
            continue;
        }
        cl.written.insert(uid(&stored).to_string(), status.clone());
        let _ = st.system_status_update(
            &kinds::DEPLOYMENT,
            namespace,
            dname,
            CONTROLLER.manager,
            &mut |o| {
                o["status"] = status.clone();
                match &annotations {
                    Some(a) => o["metadata"]["annotations"] = a.clone(),
                    None => {
                        if let Some(m) = o["metadata"].as_object_mut() {
                            m.remove("annotations");
                        }
                    }
                }
            },
        );
    }
}

/// When the progress deadline of a rollout that is neither complete nor timed out passes.
pub(super) fn deadlines(st: &State, pass: &Pass, due: &mut Due) {
    for d in list(st, &kinds::DEPLOYMENT, None) {
        let Some(pds) = progress_deadline(&d) else {
            continue;
        };
        let Some(cond) = condition(&d, "Progressing") else {
            continue;
        };
        let reason = cond.get("reason").and_then(Value::as_str).unwrap_or("");
        if reason == "NewReplicaSetAvailable" || reason == "ProgressDeadlineExceeded" {
            continue;
        }
        let status = d.get("status").cloned().unwrap_or(json!({}));
        if complete(&d, &status) {
            continue;
        }
        let Some(from) = cond
            .get("lastUpdateTime")
            .and_then(Value::as_str)
            .and_then(time::parse_rfc3339)
        else {
            continue;
        };
        // As the controller requeues: a second after the deadline.
        let remaining = (from + pds + 1) as f64 - wall_now();
        due.at(pass.now + Duration::from_secs_f64(remaining.max(0.0)));
    }
}

// ---------------------------------------------------------------------------------------------
// One sync of one Deployment.

/// A Deployment's rollout parameters.
struct Spec {
    replicas: i64,
    rolling: bool,
    surge: i64,
    unavailable: i64,
    min_ready: i64,
    history_limit: Option<i64>,
}

fn spec_of(d: &Value) -> Spec {
    let replicas = d
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let rolling = text(d, "/spec/strategy/type") != "Recreate";
    let (surge, unavailable) = if rolling {
        fenceposts(
            d.pointer("/spec/strategy/rollingUpdate/maxSurge"),
            d.pointer("/spec/strategy/rollingUpdate/maxUnavailable"),
            replicas,
        )
    } else {
        (0, 0)
    };
    Spec {
        replicas,
        rolling,
        surge,
        unavailable: if !rolling || replicas == 0 {
            0
        } else {
            unavailable.min(replicas)
        },
        min_ready: int(d, "/spec/minReadySeconds"),
        history_limit: d
            .pointer("/spec/revisionHistoryLimit")
            .and_then(Value::as_i64),
    }
}

/// `GetScaledValueFromIntOrPercent`.
fn scaled(v: Option<&Value>, total: i64, round_up: bool) -> i64 {
    match v {
        Some(Value::String(s)) => {
            let n: f64 = s.trim_end_matches('%').parse().unwrap_or(0.0);
            let x = n * total as f64 / 100.0;
            (if round_up { x.ceil() } else { x.floor() }) as i64
        }
        Some(other) => other.as_i64().unwrap_or(0),
        None => 0,
    }
}

/// `ResolveFenceposts`: surge rounded up, unavailable down, never both zero.
fn fenceposts(surge: Option<&Value>, unavailable: Option<&Value>, desired: i64) -> (i64, i64) {
    let s = scaled(surge, desired, true);
    let u = scaled(unavailable, desired, false);
    if s == 0 && u == 0 { (0, 1) } else { (s, u) }
}

fn progress_deadline(d: &Value) -> Option<i64> {
    d.pointer("/spec/progressDeadlineSeconds")
        .and_then(Value::as_i64)
        .filter(|p| *p != i64::from(i32::MAX))
}

fn condition<'a>(d: &'a Value, ty: &str) -> Option<&'a Value> {
    d.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ty))
}

fn revision(rs: &Value) -> i64 {
    rs.pointer("/metadata/annotations")
        .and_then(|a| a.get(REVISION))
        .and_then(Value::as_str)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// The template without the pod-template-hash label (`EqualIgnoreHash`).
fn without_hash(template: &Value) -> Value {
    let mut t = template.clone();
    if let Some(labels) = t
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.remove(HASH_LABEL);
        if labels.is_empty()
            && let Some(m) = t.pointer_mut("/metadata").and_then(Value::as_object_mut)
        {
            m.remove("labels");
        }
    }
    t
}

/// The controller's ReplicaSets, oldest first.
fn replica_sets(st: &State, d: &Value) -> Vec<Value> {
    let mut rss: Vec<Value> = list(st, &kinds::REPLICA_SET, Some(ns(d)))
        .into_iter()
        .filter(|rs| controlled_by(rs, uid(d)) && !deleting(rs))
        .collect();
    rss.sort_by(|a, b| {
        (text(a, "/metadata/creationTimestamp"), name(a))
            .cmp(&(text(b, "/metadata/creationTimestamp"), name(b)))
    });
    rss
}

/// Sync one Deployment: ReplicaSets created and scaled (in the store), the Deployment's
/// annotations and status returned. `true`: something was written.
fn sync_deployment(cl: &mut Cluster, st: &mut State, mut d: Value) -> (Value, bool) {
    let spec = spec_of(&d);
    let mut wrote = false;
    let paused = d.pointer("/spec/paused") == Some(&json!(true));
    let rss = replica_sets(st, &d);
    let template = without_hash(d.pointer("/spec/template").unwrap_or(&Value::Null));
    let new_pos = rss.iter().position(|rs| {
        without_hash(rs.pointer("/spec/template").unwrap_or(&Value::Null)) == template
    });
    let olds: Vec<Value> = rss
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != new_pos)
        .map(|(_, rs)| rs.clone())
        .collect();
    let new_revision = olds.iter().map(revision).max().unwrap_or(0) + 1;
    let mut new_rs = new_pos.map(|i| rss[i].clone());
    if !paused {
        match &new_rs {
            Some(rs) => {
                wrote |= sync_new_annotations(st, &d, rs, new_revision, &spec);
                let rev = st
                    .get_object(&kinds::REPLICA_SET, ns(rs), name(rs))
                    .map(|r| revision(r).to_string())
                    .unwrap_or_default();
                set_revision(&mut d, &rev);
                if progress_deadline(&d).is_some() && condition(&d, "Progressing").is_none() {
                    set_condition(
                        &mut d,
                        new_condition(
                            "Progressing",
                            "True",
                            "FoundNewReplicaSet",
                            &format!("Found new replica set \"{}\"", name(rs)),
                        ),
                    );
                }
            }
            None if spec.rolling
                || olds.iter().all(|rs| {
                    int(rs, "/spec/replicas") == 0 && int(rs, "/status/replicas") == 0
                }) =>
            {
                let count = if spec.rolling {
                    new_rs_replicas(&spec, &olds, 0)
                } else {
                    spec.replicas
                };
                if let Some(rs) = create_new(cl, st, &d, &spec, new_revision, count) {
                    wrote = true;
                    set_revision(&mut d, &new_revision.to_string());
                    if progress_deadline(&d).is_some() {
                        set_condition(
                            &mut d,
                            new_condition(
                                "Progressing",
                                "True",
                                "NewReplicaSetCreated",
                                &format!("Created new replica set \"{}\"", name(&rs)),
                            ),
                        );
                    }
                    new_rs = Some(rs);
                }
            }
            None => {}
        }
        wrote |= if spec.rolling {
            rolling(cl, st, &d, &spec, new_rs.as_ref(), &olds)
        } else {
            recreate(cl, st, &d, &spec, new_rs.as_ref(), &olds)
        };
    }
    // The status, from the ReplicaSets as they are now.
    let rss = replica_sets(st, &d);
    let new_rs = new_rs.and_then(|n| rss.iter().find(|rs| uid(rs) == uid(&n)).cloned());
    if !paused && complete(&d, d.get("status").unwrap_or(&Value::Null)) {
        wrote |= cleanup(st, &d, &spec, &rss, new_rs.as_ref());
    }
    let status = rollout_status(&d, &spec, &rss, new_rs.as_ref());
    d["status"] = status;
    (d, wrote)
}

fn set_revision(d: &mut Value, revision: &str) {
    if !d
        .pointer("/metadata/annotations")
        .is_some_and(Value::is_object)
    {
        d["metadata"]["annotations"] = json!({});
    }
    d["metadata"]["annotations"][REVISION] = json!(revision);
}

/// `SetNewReplicaSetAnnotations` on the existing new ReplicaSet (and `minReadySeconds`).
fn sync_new_annotations(
    st: &mut State,
    d: &Value,
    rs: &Value,
    new_revision: i64,
    spec: &Spec,
) -> bool {
    let mut annotations = rs
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut changed = copy_annotations(d, &mut annotations);
    let old = revision(rs);
    if old < new_revision {
        annotations.insert(REVISION.into(), json!(new_revision.to_string()));
        if old > 0 {
            let history = annotations
                .get(REVISION_HISTORY)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let history = if history.is_empty() {
                old.to_string()
            } else {
                format!("{history},{old}")
            };
            annotations.insert(REVISION_HISTORY.into(), json!(history));
        }
        changed = true;
    }
    let min_ready_changed = int(rs, "/spec/minReadySeconds") != spec.min_ready;
    if !changed && !min_ready_changed {
        return false;
    }
    st.system_update(
        &kinds::REPLICA_SET,
        ns(rs),
        name(rs),
        CONTROLLER.manager,
        "",
        &mut |r| {
            r["metadata"]["annotations"] = Value::Object(annotations.clone());
            r["spec"]["minReadySeconds"] = json!(spec.min_ready);
        },
    )
    .is_ok()
}

/// `copyDeploymentAnnotationsToReplicaSet`.
fn copy_annotations(d: &Value, into: &mut Map<String, Value>) -> bool {
    let mut changed = false;
    let skip = [
        "kubectl.kubernetes.io/last-applied-configuration",
        REVISION,
        REVISION_HISTORY,
        DESIRED,
        MAX_REPLICAS,
        "deprecated.deployment.rollback.to",
    ];
    if let Some(a) = d
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
    {
        for (k, v) in a {
            if skip.contains(&k.as_str()) || into.get(k) == Some(v) {
                continue;
            }
            into.insert(k.clone(), v.clone());
            changed = true;
        }
    }
    changed
}

/// `NewRSNewReplicas` for a rolling update.
fn new_rs_replicas(spec: &Spec, all_others: &[Value], new_current: i64) -> i64 {
    let current: i64 = all_others
        .iter()
        .map(|rs| int(rs, "/spec/replicas"))
        .sum::<i64>()
        + new_current;
    let max_total = spec.replicas + spec.surge;
    if current >= max_total {
        return new_current;
    }
    let up = (max_total - current).min(spec.replicas - new_current);
    new_current + up
}

/// Create the new ReplicaSet (`getNewReplicaSet`), with the event.
fn create_new(
    cl: &mut Cluster,
    st: &mut State,
    d: &Value,
    spec: &Spec,
    revision: i64,
    replicas: i64,
) -> Option<Value> {
    let collisions = int(d, "/status/collisionCount");
    let template = d.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let hash = template_hash(&template, collisions);
    let mut template = template;
    template["metadata"]["labels"][HASH_LABEL] = json!(hash);
    let mut selector = d.pointer("/spec/selector").cloned().unwrap_or(json!({}));
    selector["matchLabels"][HASH_LABEL] = json!(hash);
    let mut annotations = Map::new();
    copy_annotations(d, &mut annotations);
    annotations.insert(REVISION.into(), json!(revision.to_string()));
    annotations.insert(DESIRED.into(), json!(spec.replicas.to_string()));
    annotations.insert(
        MAX_REPLICAS.into(),
        json!((spec.replicas + spec.surge).to_string()),
    );
    let rs_name = format!("{}-{hash}", name(d));
    let body = json!({
        "metadata": {
            "name": rs_name,
            "namespace": ns(d),
            "labels": template["metadata"]["labels"].clone(),
            "annotations": annotations,
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "Deployment", "name": name(d), "uid": uid(d),
                "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": {
            "replicas": replicas,
            "minReadySeconds": spec.min_ready,
            "selector": selector,
            "template": template,
        },
    });
    let bytes = serde_json::to_vec(&body).ok()?;
    let created = st
        .create(
            &kinds::REPLICA_SET,
            ns(d),
            &bytes,
            &as_manager(CONTROLLER.manager),
        )
        .ok()?;
    if replicas > 0 {
        deployment_event(
            cl,
            st,
            d,
            &format!("Scaled up replica set {rs_name} from 0 to {replicas}"),
        );
    }
    st.get_object(&kinds::REPLICA_SET, ns(d), &rs_name)
        .cloned()
        .or(Some(created.body))
}

fn deployment_event(cl: &mut Cluster, st: &mut State, d: &Value, message: &str) {
    // The event names the Deployment as stored (the staged copy has the same identity).
    let stored = st
        .get_object(&kinds::DEPLOYMENT, ns(d), name(d))
        .cloned()
        .unwrap_or_else(|| d.clone());
    cl.recorder.post(
        st,
        &stored,
        "apps/v1",
        "Deployment",
        CONTROLLER,
        "Normal",
        "ScalingReplicaSet",
        message,
        None,
    );
}

/// `scaleReplicaSetAndRecordEvent`: the size and the replica annotations.
fn scale(cl: &mut Cluster, st: &mut State, d: &Value, spec: &Spec, rs: &Value, to: i64) -> bool {
    let from = int(rs, "/spec/replicas");
    let desired = spec.replicas.to_string();
    let max = (spec.replicas + spec.surge).to_string();
    let annotation = |k: &str| {
        rs.pointer("/metadata/annotations")
            .and_then(|a| a.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    if from == to && annotation(DESIRED) == desired && annotation(MAX_REPLICAS) == max {
        return false;
    }
    let ok = st
        .system_update(
            &kinds::REPLICA_SET,
            ns(rs),
            name(rs),
            CONTROLLER.manager,
            "",
            &mut |r| {
                r["spec"]["replicas"] = json!(to);
                if !r
                    .pointer("/metadata/annotations")
                    .is_some_and(Value::is_object)
                {
                    r["metadata"]["annotations"] = json!({});
                }
                r["metadata"]["annotations"][DESIRED] = json!(desired);
                r["metadata"]["annotations"][MAX_REPLICAS] = json!(max);
            },
        )
        .is_ok();
    if ok && from != to {
        let way = if from < to { "up" } else { "down" };
        deployment_event(
            cl,
            st,
            d,
            &format!("Scaled {way} replica set {} from {from} to {to}", name(rs)),
        );
    }
    ok
}

/// `rolloutRolling`: scale the new ReplicaSet up, or the old ones down, if it can.
fn rolling(
    cl: &mut Cluster,
    st: &mut State,
    d: &Value,
    spec: &Spec,
    new_rs: Option<&Value>,
    olds: &[Value],
) -> bool {
    let Some(new_rs) = new_rs else {
        return false;
    };
    let new_rs = st
        .get_object(&kinds::REPLICA_SET, ns(new_rs), name(new_rs))
        .cloned()
        .unwrap_or_else(|| new_rs.clone());
    // reconcileNewReplicaSet
    let current = int(&new_rs, "/spec/replicas");
    if current != spec.replicas {
        let to = if current > spec.replicas {
            spec.replicas
        } else {
            new_rs_replicas(spec, olds, current)
        };
        if to != current {
            return scale(cl, st, d, spec, &new_rs, to);
        }
    }
    // reconcileOldReplicaSets
    let old_count: i64 = olds.iter().map(|rs| int(rs, "/spec/replicas")).sum();
    if old_count == 0 {
        return false;
    }
    let all_count = old_count + int(&new_rs, "/spec/replicas");
    let min_available = spec.replicas - spec.unavailable;
    let new_unavailable =
        int(&new_rs, "/spec/replicas") - int(&new_rs, "/status/availableReplicas");
    let max_scaled_down = all_count - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return false;
    }
    let mut wrote = false;
    // cleanupUnhealthyReplicas
    let mut olds: Vec<Value> = olds.to_vec();
    let mut cleaned = 0;
    for rs in olds.iter_mut() {
        if cleaned >= max_scaled_down {
            break;
        }
        let replicas = int(rs, "/spec/replicas");
        let available = int(rs, "/status/availableReplicas");
        if replicas == 0 || replicas == available {
            continue;
        }
        let down = (max_scaled_down - cleaned).min(replicas - available);
        if scale(cl, st, d, spec, rs, replicas - down) {
            wrote = true;
            cleaned += down;
            if let Some(now) = st.get_object(&kinds::REPLICA_SET, ns(rs), name(rs)) {
                *rs = now.clone();
            }
        }
    }
    // scaleDownOldReplicaSetsForRollingUpdate
    let available: i64 = olds
        .iter()
        .chain(std::iter::once(&new_rs))
        .map(|rs| int(rs, "/status/availableReplicas"))
        .sum();
    if available <= min_available {
        return wrote;
    }
    let total = available - min_available;
    let mut done = 0;
    for rs in &olds {
        if done >= total {
            break;
        }
        let replicas = int(rs, "/spec/replicas");
        if replicas == 0 {
            continue;
        }
        let down = replicas.min(total - done);
        if scale(cl, st, d, spec, rs, replicas - down) {
            wrote = true;
            done += down;
        }
    }
    wrote
}

/// `rolloutRecreate`: the old ReplicaSets down to zero, then — once their pods are gone — the
/// new one up.
fn recreate(
    cl: &mut Cluster,
    st: &mut State,
    d: &Value,
    spec: &Spec,
    new_rs: Option<&Value>,
    olds: &[Value],
) -> bool {
    let mut wrote = false;
    for rs in olds {
        if int(rs, "/spec/replicas") != 0 {
            wrote |= scale(cl, st, d, spec, rs, 0);
        }
    }
    if wrote || olds.iter().any(|rs| int(rs, "/status/replicas") > 0) {
        return wrote;
    }
    match new_rs {
        Some(rs) if int(rs, "/spec/replicas") != spec.replicas => {
            scale(cl, st, d, spec, rs, spec.replicas)
        }
        _ => false,
    }
}

/// `cleanupDeployment`: old ReplicaSets beyond the revision history limit, oldest revision
/// first, once they have no pods.
fn cleanup(st: &mut State, d: &Value, spec: &Spec, rss: &[Value], new_rs: Option<&Value>) -> bool {
    let Some(limit) = spec.history_limit else {
        return false;
    };
    let mut olds: Vec<&Value> = rss
        .iter()
        .filter(|rs| new_rs.is_none_or(|n| uid(n) != uid(rs)))
        .collect();
    let diff = olds.len() as i64 - limit;
    if diff <= 0 {
        return false;
    }
    olds.sort_by_key(|rs| revision(rs));
    let mut wrote = false;
    for rs in olds.into_iter().take(diff as usize) {
        if int(rs, "/status/replicas") != 0
            || int(rs, "/spec/replicas") != 0
            || int(rs, "/metadata/generation") > int(rs, "/status/observedGeneration")
        {
            continue;
        }
        wrote |= st.delete_now(&kinds::REPLICA_SET, ns(d), name(rs)).is_ok();
    }
    wrote
}

/// `NewDeploymentCondition`.
fn new_condition(ty: &str, status: &str, reason: &str, message: &str) -> Value {
    let now = time::now_rfc3339();
    json!({"type": ty, "status": status, "lastUpdateTime": now, "lastTransitionTime": now, "reason": reason, "message": message})
}

/// `SetDeploymentCondition` on `d.status`: nothing when the status and reason are the same;
/// the transition time kept when the status is.
fn set_condition(d: &mut Value, mut cond: Value) {
    let conditions = d
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let set = set_in(conditions, &mut cond);
    if !d.get("status").is_some_and(Value::is_object) {
        d["status"] = json!({});
    }
    d["status"]["conditions"] = Value::Array(set);
}

fn set_in(conditions: Vec<Value>, cond: &mut Value) -> Vec<Value> {
    let ty = cond["type"].clone();
    if let Some(current) = conditions.iter().find(|c| c["type"] == ty) {
        if current["status"] == cond["status"] && current["reason"] == cond["reason"] {
            return conditions;
        }
        if current["status"] == cond["status"] {
            cond["lastTransitionTime"] = current["lastTransitionTime"].clone();
        }
    }
    let mut out: Vec<Value> = conditions.into_iter().filter(|c| c["type"] != ty).collect();
    out.push(cond.clone());
    out
}

/// `DeploymentComplete`.
fn complete(d: &Value, status: &Value) -> bool {
    let replicas = d
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    int(status, "/updatedReplicas") == replicas
        && int(status, "/replicas") == replicas
        && int(status, "/availableReplicas") == replicas
        && int(status, "/observedGeneration") >= int(d, "/metadata/generation")
}

/// `calculateStatus` then `syncRolloutStatus`: the status to write.
fn rollout_status(d: &Value, spec: &Spec, rss: &[Value], new_rs: Option<&Value>) -> Value {
    let sum = |ptr: &str| rss.iter().map(|rs| int(rs, ptr)).sum::<i64>();
    let available = sum("/status/availableReplicas");
    let total = sum("/spec/replicas");
    let old = d.get("status").cloned().unwrap_or(json!({}));
    let mut status = json!({
        "observedGeneration": int(d, "/metadata/generation"),
        "replicas": sum("/status/replicas"),
        "updatedReplicas": new_rs.map_or(0, |n| int(n, "/status/replicas")),
        "readyReplicas": sum("/status/readyReplicas"),
        "availableReplicas": available,
        "unavailableReplicas": (total - available).max(0),
    });
    if let Some(c) = old.get("collisionCount") {
        status["collisionCount"] = c.clone();
    }
    let mut conditions: Vec<Value> = old
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut available_cond = if available >= spec.replicas - spec.unavailable {
        new_condition(
            "Available",
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
        )
    } else {
        new_condition(
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        )
    };
    conditions = set_in(conditions, &mut available_cond);
    let deadline = progress_deadline(d);
    if deadline.is_none() {
        conditions.retain(|c| c["type"] != "Progressing");
    }
    let current = old
        .get("conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Progressing"))
        .cloned();
    let reason_of = |c: &Option<Value>| {
        c.as_ref()
            .and_then(|c| c.get("reason"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let is_complete = int(&status, "/replicas") == int(&status, "/updatedReplicas")
        && reason_of(&current) == "NewReplicaSetAvailable";
    if let Some(pds) = deadline
        && !is_complete
    {
        let rs_name = new_rs.map(|n| name(n).to_string());
        let msg = |what: &str| match &rs_name {
            Some(n) => format!("ReplicaSet \"{n}\" {what}"),
            None => format!("Deployment \"{}\" {what}", name(d)),
        };
        let probe = json!({"spec": d.get("spec"), "metadata": d.get("metadata"), "status": status});
        if complete(&probe, &status) {
            let mut c = new_condition(
                "Progressing",
                "True",
                "NewReplicaSetAvailable",
                &msg("has successfully progressed."),
            );
            conditions = set_in(conditions, &mut c);
        } else if progressing(&old, &status) {
            let mut c = new_condition(
                "Progressing",
                "True",
                "ReplicaSetUpdated",
                &msg("is progressing."),
            );
            if let Some(cur) = &current {
                if cur["status"] == "True" {
                    c["lastTransitionTime"] = cur["lastTransitionTime"].clone();
                }
                conditions.retain(|x| x["type"] != "Progressing");
            }
            conditions = set_in(conditions, &mut c);
        } else if timed_out(&conditions, pds) {
            let mut c = new_condition(
                "Progressing",
                "False",
                "ProgressDeadlineExceeded",
                &msg("has timed out progressing."),
            );
            conditions = set_in(conditions, &mut c);
        }
    }
    let failure = new_rs
        .and_then(replica_failure)
        .or_else(|| rss.iter().find_map(replica_failure));
    match failure {
        Some(mut f) => conditions = set_in(conditions, &mut f),
        None => conditions.retain(|c| c["type"] != "ReplicaFailure"),
    }
    if !conditions.is_empty() {
        status["conditions"] = Value::Array(conditions);
    }
    status
}

/// `DeploymentProgressing`: more updated, ready or available pods, or fewer old ones.
fn progressing(old: &Value, new: &Value) -> bool {
    let n = |s: &Value, f: &str| int(s, &format!("/{f}"));
    let old_olds = n(old, "replicas") - n(old, "updatedReplicas");
    let new_olds = n(new, "replicas") - n(new, "updatedReplicas");
    n(new, "updatedReplicas") > n(old, "updatedReplicas")
        || new_olds < old_olds
        || n(new, "readyReplicas") > n(old, "readyReplicas")
        || n(new, "availableReplicas") > n(old, "availableReplicas")
}

/// `DeploymentTimedOut`.
fn timed_out(conditions: &[Value], pds: i64) -> bool {
    let Some(c) = conditions.iter().find(|c| c["type"] == "Progressing") else {
        return false;
    };
    match c["reason"].as_str() {
        Some("NewReplicaSetAvailable") => false,
        Some("ProgressDeadlineExceeded") => true,
        _ => c["lastUpdateTime"]
            .as_str()
            .and_then(time::parse_rfc3339)
            .is_some_and(|from| ((from + pds) as f64) < wall_now()),
    }
}

/// A ReplicaSet's ReplicaFailure condition as a Deployment condition.
fn replica_failure(rs: &Value) -> Option<Value> {
    let c = rs
        .pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c["type"] == "ReplicaFailure")?;
    Some(json!({
        "type": "ReplicaFailure",
        "status": c["status"],
        "lastUpdateTime": c["lastTransitionTime"],
        "lastTransitionTime": c["lastTransitionTime"],
        "reason": c["reason"],
        "message": c["message"],
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fenceposts_round_surge_up_and_unavailability_down() {
        assert_eq!(
            fenceposts(Some(&json!("25%")), Some(&json!("25%")), 1),
            (1, 0)
        );
        assert_eq!(
            fenceposts(Some(&json!("25%")), Some(&json!("25%")), 10),
            (3, 2)
        );
        assert_eq!(fenceposts(Some(&json!(0)), Some(&json!("10%")), 2), (0, 1));
    }

    #[test]
    fn a_new_replica_set_starts_with_the_surge() {
        let spec = Spec {
            replicas: 2,
            rolling: true,
            surge: 1,
            unavailable: 0,
            min_ready: 0,
            history_limit: Some(10),
        };
        let old = json!({"spec": {"replicas": 2}});
        assert_eq!(new_rs_replicas(&spec, &[old], 0), 1);
        assert_eq!(new_rs_replicas(&spec, &[], 0), 2);
    }

    #[test]
    fn a_condition_keeps_its_transition_time_while_its_status_holds() {
        let mut d = json!({"status": {"conditions": [{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable", "lastTransitionTime": "2020-01-01T00:00:00Z"}]}});
        set_condition(
            &mut d,
            new_condition(
                "Progressing",
                "True",
                "NewReplicaSetCreated",
                "Created new replica set \"web-1\"",
            ),
        );
        let c = &d["status"]["conditions"][0];
        assert_eq!(c["reason"], json!("NewReplicaSetCreated"));
        assert_eq!(c["lastTransitionTime"], json!("2020-01-01T00:00:00Z"));
    }
}
