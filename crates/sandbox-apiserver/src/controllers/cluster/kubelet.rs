//! The node: kube-scheduler binding pods to `sandbox-node-1` (or reporting them unschedulable
//! when they request more cpu than its 64), and a kubelet that starts them — with the pod
//! statuses and Events of the reference cluster's stand-in kubelet (`fake-kubelet.py` of
//! `shared/tools/build-realk8s.sh`), which are those a real kubelet with containerd reports.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::events::Source;
use super::{Cluster, Due, Pass, as_manager, controller_of, deleting, list, name, ns, text, uid};
use crate::kinds::{self, Subresource};
use crate::model::{quantity, time};
use crate::store::State;

/// The node every pod is bound to.
pub const NODE_NAME: &str = "sandbox-node-1";
/// The node's address: the pods' `hostIP`.
pub const NODE_IP: &str = "10.200.0.1";
/// The scheduler's `reportingInstance` (`default-scheduler-<host name>`).
pub const SCHEDULER_INSTANCE: &str = "default-scheduler-sandbox";
/// The node's allocatable cpu, in millicores.
const NODE_CPU_MILLI: f64 = 64_000.0;

const KUBELET: Source<'static> = Source {
    component: "kubelet",
    host: NODE_NAME,
    manager: "kubelet",
};

/// What the scheduler says of a pod that requests more cpu than the node has.
const INSUFFICIENT_CPU: &str = "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.";

/// Bind every pending pod the default scheduler handles, or report it unschedulable.
pub(super) fn schedule_all(cl: &mut Cluster, st: &mut State, pass: &Pass) -> bool {
    let mut changed = false;
    for pod in list(st, &kinds::POD, None) {
        let spec = pod.get("spec").unwrap_or(&Value::Null);
        let scheduler = match text(spec, "/schedulerName") {
            "" => "default-scheduler",
            s => s,
        };
        if !text(spec, "/nodeName").is_empty()
            || deleting(&pod)
            || kinds::is_terminal(&pod)
            || scheduler != "default-scheduler"
            || spec
                .get("schedulingGates")
                .and_then(Value::as_array)
                .is_some_and(|g| !g.is_empty())
        {
            continue;
        }
        if requested_cpu_milli(spec) > NODE_CPU_MILLI {
            changed |= report_unschedulable(cl, st, &pod);
            continue;
        }
        let now = time::now_rfc3339();
        let bound = st.untracked_update(&kinds::POD, ns(&pod), name(&pod), &mut |p| {
            p["spec"]["nodeName"] = json!(NODE_NAME);
            let scheduled = json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now});
            match p
                .pointer_mut("/status/conditions")
                .and_then(Value::as_array_mut)
            {
                Some(cs) => match cs.iter_mut().find(|c| c["type"] == "PodScheduled") {
                    Some(c) => *c = scheduled,
                    None => cs.push(scheduled),
                },
                None => p["status"]["conditions"] = json!([scheduled]),
            }
        });
        if bound.is_err() {
            continue;
        }
        changed = true;
        cl.bound_at.insert(uid(&pod).to_string(), pass.now);
        let message = format!(
            "Successfully assigned {}/{} to {NODE_NAME}",
            ns(&pod),
            name(&pod)
        );
        cl.recorder
            .scheduler(st, &pod, "Normal", "Scheduled", "Binding", &message);
    }
    changed
}

/// PodScheduled=False, Unschedulable (once), and the FailedScheduling event (once).
fn report_unschedulable(cl: &mut Cluster, st: &mut State, pod: &Value) -> bool {
    let mut changed = false;
    let reported = super::condition(pod, "PodScheduled")
        .and_then(|c| c.get("reason"))
        .and_then(Value::as_str)
        == Some("Unschedulable");
    if !reported {
        let patch = json!({"status": {"conditions": [{
            "type": "PodScheduled", "status": "False", "lastProbeTime": null,
            "lastTransitionTime": time::now_rfc3339(), "reason": "Unschedulable",
            "message": INSUFFICIENT_CPU,
        }]}});
        changed |= patch_status(st, pod, "kube-scheduler", &patch);
    }
    let key = (
        uid(pod).to_string(),
        "FailedScheduling".to_string(),
        INSUFFICIENT_CPU.to_string(),
    );
    if !cl.posted.contains(&key) {
        cl.recorder.scheduler(
            st,
            pod,
            "Warning",
            "FailedScheduling",
            "Scheduling",
            INSUFFICIENT_CPU,
        );
        cl.posted.insert(key);
        changed = true;
    }
    changed
}

/// A strategic merge patch of a pod's status, as `manager`.
fn patch_status(st: &mut State, pod: &Value, manager: &str, patch: &Value) -> bool {
    let before = text(pod, "/metadata/resourceVersion").to_string();
    let Ok(body) = serde_json::to_vec(patch) else {
        return false;
    };
    match st.update_subresource(
        &kinds::POD,
        ns(pod),
        name(pod),
        Subresource::Status,
        Some("application/strategic-merge-patch+json"),
        &body,
        &as_manager(manager),
    ) {
        Ok(out) => text(&out.body, "/metadata/resourceVersion") != before,
        Err(_) => false,
    }
}

/// The cpu the pod's containers request (a limit stands for a missing request), in millicores.
fn requested_cpu_milli(spec: &Value) -> f64 {
    spec.get("containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            let q = c
                .pointer("/resources/requests/cpu")
                .or_else(|| c.pointer("/resources/limits/cpu"))
                .and_then(Value::as_str)
                .unwrap_or("0");
            quantity::to_f64(q).unwrap_or(0.0) * 1000.0
        })
        .sum()
}

/// Start the pods bound to the node whose time has come, and keep reporting the failing ones.
pub(super) fn run_all(cl: &mut Cluster, st: &mut State, pass: &Pass, due: &mut Due) -> bool {
    let mut changed = false;
    for pod in list(st, &kinds::POD, None) {
        if text(&pod, "/spec/nodeName") != NODE_NAME || deleting(&pod) || kinds::is_terminal(&pod) {
            continue;
        }
        let pod_uid = uid(&pod).to_string();
        let owner = controller_of(&pod)
            .and_then(|r| r.get("uid"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let bound = *cl.bound_at.entry(pod_uid.clone()).or_insert(pass.now);
        let start_at = if cl.proven.contains(&owner) {
            bound
        } else {
            bound + pass.half_delay()
        };
        if pass.now < start_at {
            due.at(start_at);
            continue;
        }
        let started = *cl.started_at.entry(pod_uid).or_insert(pass.now);
        if !owner.is_empty() {
            cl.proven.insert(owner);
        }
        changed |= sync_pod(cl, st, &pod, started, pass, due);
    }
    changed
}

/// `conds` entry as the stand-in writes it.
fn cond(ty: &str, status: &str, t: &str, reason: Option<&str>, message: Option<&str>) -> Value {
    let mut c =
        json!({"type": ty, "status": status, "lastProbeTime": null, "lastTransitionTime": t});
    if let Some(r) = reason {
        c["reason"] = json!(r);
    }
    if let Some(m) = message {
        c["message"] = json!(m);
    }
    c
}

/// One pod's status, as `sync_pod` of the stand-in kubelet writes it.
fn sync_pod(
    cl: &mut Cluster,
    st: &mut State,
    pod: &Value,
    started: std::time::Instant,
    pass: &Pass,
    due: &mut Due,
) -> bool {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let status = pod.get("status").unwrap_or(&Value::Null);
    let phase = text(status, "/phase");
    let t = time::now_rfc3339();
    let condition_true =
        |ty: &str| super::condition(pod, ty).and_then(|c| c.get("status")) == Some(&json!("True"));
    let start_time = match text(status, "/startTime") {
        "" => t.clone(),
        s => s.to_string(),
    };
    let mut patch = json!({"hostIP": NODE_IP, "startTime": start_time});
    let mut new_conds = Vec::new();
    if !condition_true("PodScheduled") {
        new_conds.push(cond("PodScheduled", "True", &t, None, None));
    }
    if !condition_true("Initialized") {
        new_conds.push(cond("Initialized", "True", &t, None, None));
    }
    let init_statuses: Vec<Value> = containers(spec, "initContainers")
        .iter()
        .map(|c| {
            let image = text(c, "/image");
            let cid = format!("containerd://{}", fake_hex(&[uid(pod), "init", text(c, "/name")]));
            json!({
                "name": text(c, "/name"), "image": image, "imageID": image_id(image), "containerID": cid,
                "ready": true, "started": false, "restartCount": 0, "lastState": {},
                "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": start_time, "finishedAt": t, "containerID": cid}},
            })
        })
        .collect();
    let names: Vec<&str> = containers(spec, "containers")
        .iter()
        .map(|c| text(c, "/name"))
        .collect();
    let unready = format!("containers with unready status: [{}]", names.join(" "));
    let stuck = containers(spec, "initContainers")
        .iter()
        .chain(containers(spec, "containers").iter())
        .any(|c| text(c, "/image").contains("stuck"));
    let failing = if stuck {
        None
    } else {
        failing(cl, st, pod, started, pass, due)
    };
    let what = if let Some((fphase, statuses)) = failing {
        new_conds.push(cond(
            "Ready",
            "False",
            &t,
            Some("ContainersNotReady"),
            Some(&unready),
        ));
        new_conds.push(cond(
            "ContainersReady",
            "False",
            &t,
            Some("ContainersNotReady"),
            Some(&unready),
        ));
        let strip = |cs: &[Value]| -> Vec<Value> {
            cs.iter()
                .map(|c| {
                    let mut c = c.clone();
                    if let Some(m) = c.as_object_mut() {
                        m.remove("lastState");
                        m.remove("state");
                    }
                    c
                })
                .collect()
        };
        let reasons = |cs: &[Value]| -> Vec<String> {
            cs.iter()
                .map(|c| {
                    c.get("state")
                        .and_then(Value::as_object)
                        .and_then(|s| s.values().next())
                        .and_then(|v| v.get("reason"))
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                })
                .collect()
        };
        let was: Vec<Value> = status
            .get("containerStatuses")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if phase == fphase
            && strip(&statuses) == strip(&was)
            && reasons(&statuses) == reasons(&was)
            && new_conds.len() == 2
        {
            return false;
        }
        let ip = cl.pod_ip(uid(pod));
        patch["phase"] = json!(fphase);
        patch["conditions"] = Value::Array(new_conds);
        patch["containerStatuses"] = Value::Array(statuses);
        patch["podIP"] = json!(ip);
        patch["podIPs"] = json!([{"ip": ip}]);
        "failing"
    } else if stuck {
        if !phase.is_empty() && phase != "Pending" {
            return false;
        }
        let cs = status
            .get("containerStatuses")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if !cs.is_empty() && cs.iter().all(|c| c.pointer("/state/waiting").is_some()) {
            return false;
        }
        new_conds.push(cond(
            "Ready",
            "False",
            &t,
            Some("ContainersNotReady"),
            Some(&unready),
        ));
        new_conds.push(cond(
            "ContainersReady",
            "False",
            &t,
            Some("ContainersNotReady"),
            Some(&unready),
        ));
        let statuses: Vec<Value> = containers(spec, "containers")
            .iter()
            .map(|c| {
                let image = text(c, "/image");
                json!({
                    "name": text(c, "/name"), "image": image, "imageID": "", "ready": false,
                    "started": false, "restartCount": 0, "lastState": {},
                    "state": {"waiting": {"reason": "ImagePullBackOff", "message": format!("Back-off pulling image \"{image}\"")}},
                })
            })
            .collect();
        let ip = cl.pod_ip(uid(pod));
        patch["phase"] = json!("Pending");
        patch["conditions"] = Value::Array(new_conds);
        patch["containerStatuses"] = Value::Array(statuses);
        patch["podIP"] = json!(ip);
        patch["podIPs"] = json!([{"ip": ip}]);
        "stuck"
    } else {
        if phase == "Running" && condition_true("Ready") {
            return false;
        }
        new_conds.push(cond("Ready", "True", &t, None, None));
        new_conds.push(cond("ContainersReady", "True", &t, None, None));
        let statuses: Vec<Value> = containers(spec, "containers")
            .iter()
            .map(|c| {
                let image = text(c, "/image");
                json!({
                    "name": text(c, "/name"), "image": image, "imageID": image_id(image),
                    "containerID": format!("containerd://{}", fake_hex(&[uid(pod), text(c, "/name")])),
                    "ready": true, "started": true, "restartCount": 0, "lastState": {},
                    "state": {"running": {"startedAt": t}},
                })
            })
            .collect();
        let ip = match text(status, "/podIP") {
            "" => cl.pod_ip(uid(pod)),
            ip => ip.to_string(),
        };
        patch["phase"] = json!("Running");
        patch["conditions"] = Value::Array(new_conds);
        patch["containerStatuses"] = Value::Array(statuses);
        patch["podIP"] = json!(ip);
        patch["podIPs"] = json!([{"ip": ip}]);
        "running"
    };
    let _ = what;
    if !init_statuses.is_empty() {
        patch["initContainerStatuses"] = Value::Array(init_statuses);
    }
    patch_status(
        st,
        pod,
        KUBELET.manager,
        &json!({"metadata": {"uid": uid(pod)}, "status": patch}),
    )
}

fn containers<'a>(spec: &'a Value, list: &str) -> &'a [Value] {
    spec.get(list)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// The containers' statuses of a pod that cannot run, with the events the kubelet posts
/// (each once per pod), or `None` when every container can.
fn failing(
    cl: &mut Cluster,
    st: &mut State,
    pod: &Value,
    started: std::time::Instant,
    pass: &Pass,
    due: &mut Due,
) -> Option<(&'static str, Vec<Value>)> {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let t = time::now_rfc3339();
    let mut out = Vec::new();
    let mut failed = false;
    let mut phase = "Pending";
    for c in containers(spec, "containers") {
        let cname = text(c, "/name");
        let image = text(c, "/image");
        let field = format!("spec.containers{{{cname}}}");
        let base = json!({"name": cname, "image": image, "imageID": "", "ready": false, "started": false, "restartCount": 0, "lastState": {}});
        let with = |extra: Value| {
            let mut v = base.clone();
            if let (Some(m), Value::Object(e)) = (v.as_object_mut(), extra) {
                m.extend(e);
            }
            v
        };
        if image.contains("notfound") {
            let reference = full_image(image);
            let err = format!(
                "rpc error: code = NotFound desc = failed to pull and unpack image \"{reference}\": failed to resolve reference \"{reference}\": {reference}: not found"
            );
            let backoff_at = started + pass.kubelet.pull_backoff_after;
            let backoff = pass.now >= backoff_at;
            if !backoff {
                due.at(backoff_at);
            }
            let back_off = format!("Back-off pulling image \"{image}\"");
            let state = if backoff {
                json!({"waiting": {"reason": "ImagePullBackOff", "message": back_off}})
            } else {
                json!({"waiting": {"reason": "ErrImagePull", "message": err}})
            };
            cl.kubelet_event(
                st,
                pod,
                "Normal",
                "Pulling",
                &format!("Pulling image \"{image}\""),
                &field,
            );
            cl.kubelet_event(
                st,
                pod,
                "Warning",
                "Failed",
                &format!("Failed to pull image \"{image}\": {err}"),
                &field,
            );
            cl.kubelet_event(st, pod, "Warning", "Failed", "Error: ErrImagePull", &field);
            if backoff {
                cl.kubelet_event(st, pod, "Normal", "BackOff", &back_off, &field);
                cl.kubelet_event(
                    st,
                    pod,
                    "Warning",
                    "Failed",
                    "Error: ImagePullBackOff",
                    &field,
                );
            }
            out.push(with(json!({"state": state})));
            failed = true;
        } else if image.contains("crash") {
            phase = "Running";
            let every = pass
                .kubelet
                .restart_every
                .max(std::time::Duration::from_millis(1));
            let elapsed = pass.now.saturating_duration_since(started);
            let n = 1 + (elapsed.as_nanos() / every.as_nanos()) as u32;
            due.at(started + every * n);
            let cid = format!(
                "containerd://{}",
                fake_hex(&[uid(pod), cname, &n.to_string()])
            );
            let back_off = 10u64.saturating_mul(1 << (n - 1).min(20)).min(300);
            out.push(with(json!({
                "imageID": image_id(image), "containerID": cid, "restartCount": n,
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": t, "finishedAt": t, "containerID": cid}},
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": format!("back-off {back_off}s restarting failed container={cname} pod={}_{}({})", name(pod), ns(pod), uid(pod))}},
            })));
            cl.kubelet_event(
                st,
                pod,
                "Normal",
                "Started",
                &format!("Started container {cname}"),
                &field,
            );
            cl.kubelet_event(
                st,
                pod,
                "Warning",
                "BackOff",
                &format!(
                    "Back-off restarting failed container {cname} in pod {}_{}({})",
                    name(pod),
                    ns(pod),
                    uid(pod)
                ),
                &field,
            );
            failed = true;
        } else if let Some(msg) = missing_config(st, ns(pod), c) {
            out.push(with(json!({
                "imageID": image_id(image),
                "state": {"waiting": {"reason": "CreateContainerConfigError", "message": msg}},
            })));
            cl.kubelet_event(
                st,
                pod,
                "Warning",
                "Failed",
                &format!("Error: {msg}"),
                &field,
            );
            failed = true;
        } else {
            out.push(with(json!({
                "imageID": image_id(image),
                "containerID": format!("containerd://{}", fake_hex(&[uid(pod), cname])),
                "started": true,
                "state": {"running": {"startedAt": t}},
            })));
        }
    }
    failed.then_some((phase, out))
}

impl Cluster {
    /// Post a kubelet event about a container of `pod`, once per reason and message.
    fn kubelet_event(
        &mut self,
        st: &mut State,
        pod: &Value,
        ev_type: &str,
        reason: &str,
        message: &str,
        field: &str,
    ) {
        let key = (
            uid(pod).to_string(),
            reason.to_string(),
            message.to_string(),
        );
        if self.posted.contains(&key) {
            return;
        }
        self.posted.insert(key);
        self.recorder.post(
            st,
            pod,
            "v1",
            "Pod",
            KUBELET,
            ev_type,
            reason,
            message,
            Some(field),
        );
    }

    /// The pod's address: `10.244.<n / 250>.<n % 250 + 2>`, handed out in order.
    fn pod_ip(&mut self, pod_uid: &str) -> String {
        if let Some(ip) = self.ips.get(pod_uid) {
            return ip.clone();
        }
        let n = self.next_ip;
        self.next_ip = (self.next_ip + 1) % 64_000;
        let ip = format!("10.244.{}.{}", n / 250, n % 250 + 2);
        self.ips.insert(pod_uid.to_string(), ip.clone());
        ip
    }
}

/// The kubelet's CreateContainerConfigError message for a container whose environment needs
/// a Secret or ConfigMap (not optional) that does not exist. The sandbox serves no Secrets:
/// every Secret is missing.
fn missing_config(st: &State, namespace: &str, c: &Value) -> Option<String> {
    let missing = |kind: &str, name: &str| match kind {
        "secret" => true,
        _ => st.get_object(&kinds::CONFIG_MAP, namespace, name).is_none(),
    };
    let optional = |r: &Value| r.get("optional") == Some(&json!(true));
    for e in containers(c, "env") {
        for (key, kind) in [("secretKeyRef", "secret"), ("configMapKeyRef", "configmap")] {
            if let Some(r) = e.pointer(&format!("/valueFrom/{key}")) {
                let n = text(r, "/name");
                if !optional(r) && missing(kind, n) {
                    return Some(format!("{kind} \"{n}\" not found"));
                }
            }
        }
    }
    for e in containers(c, "envFrom") {
        for (key, kind) in [("secretRef", "secret"), ("configMapRef", "configmap")] {
            if let Some(r) = e.get(key) {
                let n = text(r, "/name");
                if !optional(r) && missing(kind, n) {
                    return Some(format!("{kind} \"{n}\" not found"));
                }
            }
        }
    }
    None
}

/// `docker.io/library/nginx:1` for `nginx:1`, as containerd names an image in messages.
fn full_image(image: &str) -> String {
    let first = image.split('/').next().unwrap_or("");
    if !image.contains('/') {
        format!("docker.io/library/{image}")
    } else if !first.contains('.') && !first.contains(':') && first != "localhost" {
        format!("docker.io/{image}")
    } else {
        image.to_string()
    }
}

/// The hex SHA-256 of the parts joined by `/` (the stand-in's made-up ids).
fn fake_hex(parts: &[&str]) -> String {
    let digest = Sha256::digest(parts.join("/").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// `registry.example.com/web@sha256:…`: the repository and a digest made up from the image.
fn image_id(image: &str) -> String {
    let repo = image.split('@').next().unwrap_or(image);
    let last = repo.rsplit('/').next().unwrap_or(repo);
    let repo = match last.split_once(':') {
        Some((bare, _)) => format!("{}{bare}", &repo[..repo.len() - last.len()]),
        None => repo.to_string(),
    };
    format!("{repo}@sha256:{}", fake_hex(&["image", image]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_names_as_containerd_writes_them() {
        assert_eq!(full_image("nginx:1"), "docker.io/library/nginx:1");
        assert_eq!(full_image("acme/web:1"), "docker.io/acme/web:1");
        assert_eq!(
            full_image("registry.example.com/web:notfound"),
            "registry.example.com/web:notfound"
        );
    }

    #[test]
    fn image_ids_are_the_stand_in_kubelets() {
        // Recorded from the reference cluster (tests/fixtures/rollout-failures/).
        assert_eq!(
            image_id("registry.example.com/web:1.0"),
            "registry.example.com/web@sha256:3279931db70fefc1932a7475a0b6c47e77fa823982228c24a4300d50236793b7"
        );
        assert_eq!(
            image_id("registry.example.com/web:crash"),
            "registry.example.com/web@sha256:c5cefe6017ef375a6a62ef9abf137d40e14f8b9cae5179f9d9eb3368faa1e30b"
        );
    }

    #[test]
    fn requested_cpu_counts_limits_for_missing_requests() {
        let spec = json!({"containers": [{"resources": {"requests": {"cpu": "100"}}}, {"resources": {"limits": {"cpu": "500m"}}}]});
        assert_eq!(requested_cpu_milli(&spec), 100_500.0);
    }
}
