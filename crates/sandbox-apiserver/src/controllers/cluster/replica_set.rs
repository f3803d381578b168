//! The ReplicaSet controller: as many active pods as `spec.replicas` (created from the
//! template as `<replicaset>-<5 random>`, deleted unhealthiest first), the status counts, and
//! — when admission refuses a pod (an exceeded ResourceQuota) — the `FailedCreate` event, the
//! ReplicaFailure condition and retries with a growing back-off.

use std::time::Duration;

use serde_json::{Value, json};

use super::events::Source;
use super::{
    Cluster, Due, Pass, Refused, as_manager, controlled_by, int, list, name, ns, pod_active,
    pod_ready, text, uid,
};
use crate::kinds;
use crate::model::time;
use crate::store::State;

const CONTROLLER: Source<'static> = Source {
    component: "replicaset-controller",
    host: "",
    manager: "kube-controller-manager",
};

/// The recorder posts nine similar events (same object, reason, differing messages) one by one;
/// from the tenth, they are folded into one `(combined from similar events)` event whose count
/// grows (as recorded, `tests/data/rollout-failures/quota-exceeded.json`).
const SIMILAR_EVENTS: u32 = 9;

pub(super) fn sync_all(cl: &mut Cluster, st: &mut State, pass: &Pass, due: &mut Due) -> bool {
    let mut changed = false;
    for rs in list(st, &kinds::REPLICA_SET, None) {
        if super::deleting(&rs) {
            continue;
        }
        changed |= sync_one(cl, st, &rs, pass, due);
    }
    changed
}

fn sync_one(cl: &mut Cluster, st: &mut State, rs: &Value, pass: &Pass, due: &mut Due) -> bool {
    let rs_uid = uid(rs).to_string();
    let pods: Vec<Value> = list(st, &kinds::POD, Some(ns(rs)))
        .into_iter()
        .filter(|p| controlled_by(p, &rs_uid) && pod_active(p))
        .collect();
    let want = int(rs, "/spec/replicas");
    let diff = pods.len() as i64 - want;
    let mut changed = false;
    let mut refusal: Option<String> = None;
    if diff < 0 {
        let waiting = cl
            .refused
            .get(&rs_uid)
            .is_some_and(|r| pass.now < r.retry_at);
        if waiting {
            if let Some(r) = cl.refused.get(&rs_uid) {
                due.at(r.retry_at);
            }
            refusal = super::condition(rs, "ReplicaFailure")
                .and_then(|c| c.get("message"))
                .and_then(Value::as_str)
                .map(str::to_string);
        } else {
            for _ in 0..(-diff) {
                match create_pod(st, rs) {
                    Ok(pod_name) => {
                        cl.recorder.post(
                            st,
                            rs,
                            "apps/v1",
                            "ReplicaSet",
                            CONTROLLER,
                            "Normal",
                            "SuccessfulCreate",
                            &format!("Created pod: {pod_name}"),
                            None,
                        );
                        cl.refused.remove(&rs_uid);
                        changed = true;
                    }
                    Err(message) => {
                        refuse(cl, st, rs, &message, pass, due);
                        refusal = Some(message);
                        changed = true;
                        break;
                    }
                }
            }
        }
    } else if diff > 0 {
        let mut ranked = pods.clone();
        ranked.sort_by_key(deletion_rank);
        for pod in ranked.iter().take(diff as usize) {
            if st.delete_now(&kinds::POD, ns(pod), name(pod)).is_ok() {
                cl.recorder.post(
                    st,
                    rs,
                    "apps/v1",
                    "ReplicaSet",
                    CONTROLLER,
                    "Normal",
                    "SuccessfulDelete",
                    &format!("Deleted pod: {}", name(pod)),
                    None,
                );
                changed = true;
            }
        }
    }
    changed |= write_status(st, rs, refusal.as_deref());
    changed
}

/// Record a refused creation: the event (folded after ten), and when to try again.
fn refuse(cl: &mut Cluster, st: &mut State, rs: &Value, err: &str, pass: &Pass, due: &mut Due) {
    let rs_uid = uid(rs).to_string();
    let entry = cl.refused.entry(rs_uid).or_insert(Refused {
        attempts: 0,
        retry_at: pass.now,
        combined: None,
    });
    entry.attempts += 1;
    let attempts = entry.attempts;
    // The rate limiter's back-off: 5 ms doubling, here from 50 ms to at most 10 s.
    let backoff = Duration::from_millis(50)
        .saturating_mul(1 << (attempts - 1).min(10))
        .min(Duration::from_secs(10));
    entry.retry_at = pass.now + backoff;
    due.at(entry.retry_at);
    let message = format!("Error creating: {err}");
    if attempts <= SIMILAR_EVENTS {
        cl.recorder.post(
            st,
            rs,
            "apps/v1",
            "ReplicaSet",
            CONTROLLER,
            "Warning",
            "FailedCreate",
            &message,
            None,
        );
        return;
    }
    let combined = format!("(combined from similar events): {message}");
    match cl.refused.get(uid(rs)).and_then(|r| r.combined.clone()) {
        Some(event) => cl
            .recorder
            .again(st, ns(rs), &event, &combined, CONTROLLER.manager),
        None => {
            let event = cl.recorder.post(
                st,
                rs,
                "apps/v1",
                "ReplicaSet",
                CONTROLLER,
                "Warning",
                "FailedCreate",
                &combined,
                None,
            );
            if let Some(r) = cl.refused.get_mut(uid(rs)) {
                r.combined = event;
            }
        }
    }
}

/// `ActivePods` order: unscheduled before scheduled, pending before running, not ready before
/// ready, more restarts before fewer, newer before older.
fn deletion_rank(pod: &Value) -> (bool, u8, bool, i64, std::cmp::Reverse<String>) {
    let phase = match text(pod, "/status/phase") {
        "Pending" => 0,
        "Unknown" => 1,
        _ => 2,
    };
    let restarts: i64 = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .map(|cs| cs.iter().map(|c| int(c, "/restartCount")).sum())
        .unwrap_or(0);
    (
        !text(pod, "/spec/nodeName").is_empty(),
        phase,
        pod_ready(pod),
        -restarts,
        std::cmp::Reverse(text(pod, "/metadata/creationTimestamp").to_string()),
    )
}

/// Create one pod from the template (`GetPodFromTemplate`). `Err`: the refusal's message.
fn create_pod(st: &mut State, rs: &Value) -> Result<String, String> {
    let template = rs.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let mut meta = json!({
        "generateName": format!("{}-", name(rs)),
        "namespace": ns(rs),
        "ownerReferences": [{
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name(rs), "uid": uid(rs),
            "controller": true, "blockOwnerDeletion": true,
        }],
    });
    for field in ["labels", "annotations", "finalizers"] {
        if let Some(v) = template.pointer(&format!("/metadata/{field}")) {
            meta[field] = v.clone();
        }
    }
    let body = json!({
        "metadata": meta,
        "spec": template.get("spec").cloned().unwrap_or(json!({})),
    });
    let bytes = serde_json::to_vec(&body).map_err(|e| e.to_string())?;
    match st.create(&kinds::POD, ns(rs), &bytes, &as_manager(CONTROLLER.manager)) {
        Ok(out) => Ok(text(&out.body, "/metadata/name").to_string()),
        Err(e) => Err(e.message),
    }
}

/// The ReplicaSet's status from its pods (`calculateStatus`), written when it changed.
fn write_status(st: &mut State, rs: &Value, refusal: Option<&str>) -> bool {
    let rs_uid = uid(rs);
    let pods: Vec<Value> = list(st, &kinds::POD, Some(ns(rs)))
        .into_iter()
        .filter(|p| controlled_by(p, rs_uid) && pod_active(p))
        .collect();
    let template_labels = rs
        .pointer("/spec/template/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let fully_labeled = pods
        .iter()
        .filter(|p| {
            template_labels.iter().all(|(k, v)| {
                p.pointer(&format!("/metadata/labels/{}", k.replace('/', "~1"))) == Some(v)
            })
        })
        .count();
    let min_ready = int(rs, "/spec/minReadySeconds");
    let now = time::now_secs();
    let ready = pods.iter().filter(|p| pod_ready(p)).count();
    let available = pods
        .iter()
        .filter(|p| {
            pod_ready(p)
                && (min_ready == 0
                    || super::condition(p, "Ready")
                        .and_then(|c| c.get("lastTransitionTime"))
                        .and_then(Value::as_str)
                        .and_then(time::parse_rfc3339)
                        .is_some_and(|t| t + min_ready <= now))
        })
        .count();
    let mut conditions: Vec<Value> = rs
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let has_failure = conditions.iter().any(|c| c["type"] == "ReplicaFailure");
    match refusal {
        Some(message) if !has_failure => conditions.push(json!({
            "type": "ReplicaFailure", "status": "True", "lastTransitionTime": time::now_rfc3339(),
            "reason": "FailedCreate", "message": message,
        })),
        None if has_failure => conditions.retain(|c| c["type"] != "ReplicaFailure"),
        _ => {}
    }
    let mut status = json!({
        "replicas": pods.len(),
        "fullyLabeledReplicas": fully_labeled,
        "readyReplicas": ready,
        "availableReplicas": available,
        "observedGeneration": int(rs, "/metadata/generation"),
    });
    if !conditions.is_empty() {
        status["conditions"] = Value::Array(conditions);
    }
    let current = rs.get("status").cloned().unwrap_or(json!({}));
    let normalized = |s: &Value| {
        let mut s = s.clone();
        if let Some(m) = s.as_object_mut() {
            m.retain(|_, v| !(v == &json!(0) || v.is_null()));
        }
        s
    };
    if normalized(&status) == normalized(&current) {
        return false;
    }
    st.system_update(
        &kinds::REPLICA_SET,
        ns(rs),
        name(rs),
        CONTROLLER.manager,
        "status",
        &mut |r| r["status"] = status.clone(),
    )
    .is_ok()
}
