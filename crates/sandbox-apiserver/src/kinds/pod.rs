//! Pod (`v1`), as kube-apiserver v1.33 stores it: the pod template's defaults plus
//! `SetDefaults_Pod`; generation 1 on create and +1 on a spec change; status reset to `Pending`
//! with its QoS class; the admission a default cluster runs on a new pod (ServiceAccount:
//! `serviceAccountName: default` and the `kube-api-access-<random>` projected volume mounted
//! in every container; DefaultTolerationSeconds; Priority (0, `PreemptLowerPriority`); ResourceQuota's `pods` and
//! `count/pods`); validation of the pod spec and of updates (only images, labels,
//! annotations and the few mutable fields may change); the `status` subresource; the field
//! selectors pods support; the `kubectl get pods` columns (READY, STATUS as `printPod` derives
//! it, RESTARTS, AGE, IP, NODE…); a DELETE answers with the pod.

use serde_json::{Map, Value, json};

use super::pod_template::{default_pod_spec, validate_pod_spec};
use super::resource_quota::{RESOURCE_QUOTA, exceeded_quota};
use super::table::{age, age_column, column, human_duration, name_column, st};
use super::validate::arr;
use super::{Admission, Generation, Kind, map_mut, map_mut_in, set_default};
use crate::model::ApiResource;
use crate::model::names::is_dns1123_label;
use crate::model::schema;
use crate::model::status::{FieldError, StatusBody};
use crate::model::time;

pub struct Pod;

pub static POD: Pod = Pod;

static API: ApiResource = ApiResource {
    group: "",
    version: "v1",
    api_version: "v1",
    resource: "pods",
    kind: "Pod",
    list_kind: "PodList",
    namespaced: true,
};

/// The field selectors the v1 Pod conversion accepts (`spec.host` aside).
const FIELD_LABELS: &[&str] = &[
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.podIPs",
    "status.nominatedNodeName",
];

/// Where the ServiceAccount admission mounts the token volume.
const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

impl Kind for Pod {
    fn api(&self) -> &'static ApiResource {
        &API
    }

    fn schema(&self) -> usize {
        schema::POD
    }

    fn generation(&self) -> Generation {
        Generation::Spec
    }

    fn default(&self, obj: &mut Value) {
        let Some(spec) = map_mut(obj, "spec") else {
            return;
        };
        default_pod_spec(spec);
        default_pod(spec);
    }

    fn prepare_create(&self, obj: &mut Value) {
        let qos = qos_class(obj.get("spec").unwrap_or(&Value::Null));
        if let Some(m) = obj.as_object_mut() {
            m.insert(
                "status".into(),
                json!({"phase": "Pending", "qosClass": qos}),
            );
        }
    }

    fn admit_create(&self, obj: &mut Value, _admission: &Admission<'_>) {
        let Some(spec) = map_mut(obj, "spec") else {
            return;
        };
        admit_service_account(spec);
        admit_default_tolerations(spec);
        // Priority: no PriorityClass exists, so priority 0 and the default preemption policy
        // (a pod naming a class would be refused; none of ours does).
        set_default(spec, "priority", json!(0));
        set_default(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
    }

    fn validate_admission(
        &self,
        obj: &Value,
        old: Option<&Value>,
        admission: &Admission<'_>,
    ) -> Result<(), StatusBody> {
        if old.is_some() {
            return Ok(());
        }
        let ns = st(obj, "/metadata/namespace");
        let quotas: Vec<&Value> = admission
            .objects
            .all(&RESOURCE_QUOTA)
            .into_iter()
            .filter(|q| st(q, "/metadata/namespace") == ns)
            .collect();
        if quotas.is_empty() {
            return Ok(());
        }
        let used = admission
            .objects
            .all(&POD)
            .into_iter()
            .filter(|p| st(p, "/metadata/namespace") == ns && !is_terminal(p))
            .count();
        match exceeded_quota(&quotas, used as i64) {
            Some(message) => Err(StatusBody::new(
                403,
                "Forbidden",
                format!(
                    "pods \"{}\" is forbidden: {message}",
                    st(obj, "/metadata/name")
                ),
                Some(json!({"name": st(obj, "/metadata/name"), "kind": "pods"})),
            )),
            None => Ok(()),
        }
    }

    fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let spec = obj.get("spec").unwrap_or(&Value::Null);
        let mut errs = validate_pod_spec(spec, "spec", false);
        if let Some(old) = old {
            errs.extend(validate_pod_update(
                spec,
                old.get("spec").unwrap_or(&Value::Null),
            ));
        }
        errs
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        let msgs = is_dns1123_label(st(obj, "/metadata/name"));
        if msgs.is_empty() {
            return Vec::new();
        }
        vec![format!(
            "metadata.name: this is used in the Pod's hostname, which can result in surprising behavior; a DNS label is recommended: [{}]",
            msgs.join(" ")
        )]
    }

    fn field_labels(&self) -> &'static [&'static str] {
        FIELD_LABELS
    }

    fn field_value(&self, obj: &Value, label: &str) -> Option<String> {
        Some(match label {
            "spec.hostNetwork" => obj
                .pointer("/spec/hostNetwork")
                .and_then(Value::as_bool)
                .unwrap_or(false)
                .to_string(),
            "status.podIP" => obj
                .pointer("/status/podIPs/0/ip")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            // Accepted by the conversion but not a selectable field: it matches "".
            "status.podIPs" => String::new(),
            other => {
                let ptr = format!("/{}", other.replace('.', "/"));
                st(obj, &ptr).to_string()
            }
        })
    }

    fn returns_deleted_object(&self) -> bool {
        true
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column(
                "Ready",
                "string",
                "",
                "The aggregate readiness state of this pod for accepting traffic.",
                0,
            ),
            column(
                "Status",
                "string",
                "",
                "The aggregate status of the containers in this pod.",
                0,
            ),
            column(
                "Restarts",
                "string",
                "",
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
                0,
            ),
            age_column(),
            column(
                "IP",
                "string",
                "",
                "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
                1,
            ),
            column(
                "Node",
                "string",
                "",
                "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename",
                1,
            ),
            column(
                "Nominated Node",
                "string",
                "",
                "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.",
                1,
            ),
            column(
                "Readiness Gates",
                "string",
                "",
                "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates",
                1,
            ),
        ]
    }

    fn table_cells(&self, obj: &Value, now: i64) -> Vec<Value> {
        let row = print_pod(obj, now);
        vec![
            json!(st(obj, "/metadata/name")),
            json!(row.ready),
            json!(row.reason),
            json!(row.restarts),
            json!(age(obj, now)),
            json!(none_if_empty(
                obj.pointer("/status/podIPs/0/ip")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            )),
            json!(none_if_empty(st(obj, "/spec/nodeName"))),
            json!(none_if_empty(st(obj, "/status/nominatedNodeName"))),
            json!(readiness_gates(obj)),
        ]
    }
}

fn none_if_empty(s: &str) -> String {
    if s.is_empty() {
        "<none>".into()
    } else {
        s.to_string()
    }
}

/// `SetDefaults_Pod`: requests default to limits, service links on.
fn default_pod(spec: &mut Map<String, Value>) {
    for list in ["containers", "initContainers"] {
        if let Some(Value::Array(cs)) = spec.get_mut(list) {
            for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                let Some(limits) = c
                    .get("resources")
                    .and_then(|r| r.get("limits"))
                    .and_then(Value::as_object)
                    .cloned()
                else {
                    continue;
                };
                let Some(res) = map_mut_in(c, "resources") else {
                    continue;
                };
                let Some(req) = map_mut_in(res, "requests") else {
                    continue;
                };
                for (k, v) in limits {
                    req.entry(k).or_insert(v);
                }
            }
        }
    }
    set_default(spec, "enableServiceLinks", json!(true));
}

/// The ServiceAccount admission plugin: the `default` account, and its token, the cluster's CA
/// and the namespace in a projected volume mounted read-only in every container.
fn admit_service_account(spec: &mut Map<String, Value>) {
    set_default(spec, "serviceAccountName", json!("default"));
    let account = spec
        .get("serviceAccountName")
        .cloned()
        .unwrap_or(json!("default"));
    spec.insert("serviceAccount".into(), account);
    if spec.get("automountServiceAccountToken") == Some(&json!(false)) {
        return;
    }
    let volume = format!("kube-api-access-{}", crate::model::names::random_suffix(5));
    let mut mounted = false;
    for list in ["initContainers", "containers"] {
        if let Some(Value::Array(cs)) = spec.get_mut(list) {
            for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                let has = c
                    .get("volumeMounts")
                    .and_then(Value::as_array)
                    .is_some_and(|ms| {
                        ms.iter().any(|m| {
                            m.get("mountPath").and_then(Value::as_str) == Some(TOKEN_MOUNT_PATH)
                        })
                    });
                if has {
                    continue;
                }
                let mounts = c.entry("volumeMounts").or_insert_with(|| json!([]));
                if let Some(ms) = mounts.as_array_mut() {
                    ms.push(
                        json!({"name": volume, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH}),
                    );
                    mounted = true;
                }
            }
        }
    }
    if !mounted {
        return;
    }
    let vols = spec.entry("volumes").or_insert_with(|| json!([]));
    if let Some(vs) = vols.as_array_mut() {
        vs.push(json!({
            "name": volume,
            "projected": {
                "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
                ],
                "defaultMode": 420,
            },
        }));
    }
}

/// DefaultTolerationSeconds: tolerate a not-ready or unreachable node for five minutes.
fn admit_default_tolerations(spec: &mut Map<String, Value>) {
    let tolerations: Vec<Value> = spec
        .get("tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let tolerates = |key: &str| {
        tolerations.iter().any(|t| {
            let k = t.get("key").and_then(Value::as_str).unwrap_or("");
            let e = t.get("effect").and_then(Value::as_str).unwrap_or("");
            (k == key || k.is_empty()) && (e == "NoExecute" || e.is_empty())
        })
    };
    let mut add = Vec::new();
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        if !tolerates(key) {
            add.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
        }
    }
    if add.is_empty() {
        return;
    }
    let list = spec.entry("tolerations").or_insert_with(|| json!([]));
    if let Some(a) = list.as_array_mut() {
        a.extend(add);
    }
}

/// `GetPodQOS`: BestEffort without any request or limit; Guaranteed when every container has
/// cpu and memory limits equal to its requests; Burstable otherwise.
pub fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = arr(spec, "containers")
        .iter()
        .chain(arr(spec, "initContainers"))
        .collect();
    let compute = |m: Option<&Map<String, Value>>| -> Vec<(String, String)> {
        m.into_iter()
            .flatten()
            .filter(|(k, _)| k.as_str() == "cpu" || k.as_str() == "memory")
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
            .collect()
    };
    let mut any = false;
    let mut guaranteed = true;
    for c in &containers {
        let req = compute(c.pointer("/resources/requests").and_then(Value::as_object));
        let lim = compute(c.pointer("/resources/limits").and_then(Value::as_object));
        let nonzero = |v: &Vec<(String, String)>| {
            v.iter()
                .any(|(_, q)| crate::model::quantity::to_f64(q).is_some_and(|x| x != 0.0))
        };
        if nonzero(&req) || nonzero(&lim) {
            any = true;
        }
        let has_both = ["cpu", "memory"]
            .iter()
            .all(|r| lim.iter().any(|(k, _)| k == r));
        let equal = req
            .iter()
            .all(|(k, v)| lim.iter().any(|(lk, lv)| lk == k && lv == v));
        if !has_both || !equal {
            guaranteed = false;
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// A pod whose phase is `Succeeded` or `Failed`.
pub fn is_terminal(pod: &Value) -> bool {
    matches!(st(pod, "/status/phase"), "Succeeded" | "Failed")
}

/// `ValidatePodUpdate`'s rule on the spec: only the images, `activeDeadlineSeconds`, added
/// tolerations and `terminationGracePeriodSeconds` may change. (The real message goes on
/// with a diff of the two specs; the sandbox stops after the rule.)
fn validate_pod_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let strip = |spec: &Value| {
        let mut s = spec.clone();
        for list in ["containers", "initContainers"] {
            if let Some(Value::Array(cs)) = s.get_mut(list) {
                for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                    c.remove("image");
                }
            }
        }
        if let Some(m) = s.as_object_mut() {
            m.remove("activeDeadlineSeconds");
            m.remove("terminationGracePeriodSeconds");
            m.remove("tolerations");
        }
        s
    };
    let old_tolerations = arr(old, "tolerations");
    let new_tolerations = arr(new, "tolerations");
    let tolerations_kept = old_tolerations.iter().all(|t| new_tolerations.contains(t));
    if strip(new) == strip(old) && tolerations_kept {
        return Vec::new();
    }
    vec![FieldError::forbidden(
        "spec",
        "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
    )]
}

/// What `printPod` shows in the READY, STATUS and RESTARTS columns.
pub struct PodRow {
    pub ready: String,
    pub reason: String,
    pub restarts: String,
}

/// `printPod`'s READY, STATUS and RESTARTS (`now`: unix seconds).
pub fn print_pod(pod: &Value, now: i64) -> PodRow {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let status = pod.get("status").unwrap_or(&Value::Null);
    let total = arr(spec, "containers").len()
        + arr(spec, "initContainers")
            .iter()
            .filter(|c| c.get("restartPolicy").and_then(Value::as_str) == Some("Always"))
            .count();
    let mut ready = 0;
    let mut restarts: i64 = 0;
    let mut last_restart: Option<i64> = None;
    let phase = st(status, "/phase");
    let mut reason = match st(status, "/reason") {
        "" => phase.to_string(),
        r => r.to_string(),
    };
    if arr(status, "conditions").iter().any(|c| {
        c.get("type").and_then(Value::as_str) == Some("PodScheduled")
            && c.get("reason").and_then(Value::as_str) == Some("SchedulingGated")
    }) {
        reason = "SchedulingGated".into();
    }
    let finished = |c: &Value| {
        c.pointer("/lastState/terminated/finishedAt")
            .and_then(Value::as_str)
            .and_then(time::parse_rfc3339)
    };
    let init_statuses = arr(status, "initContainerStatuses");
    let mut initializing = false;
    for (i, c) in init_statuses.iter().enumerate() {
        restarts += c.get("restartCount").and_then(Value::as_i64).unwrap_or(0);
        if let Some(t) = finished(c) {
            last_restart = Some(last_restart.map_or(t, |l| l.max(t)));
        }
        let terminated = c.pointer("/state/terminated");
        let waiting_reason = c
            .pointer("/state/waiting/reason")
            .and_then(Value::as_str)
            .unwrap_or("");
        match terminated {
            Some(t) if t.get("exitCode").and_then(Value::as_i64) == Some(0) => continue,
            Some(t) => {
                let r = t.get("reason").and_then(Value::as_str).unwrap_or("");
                reason = if r.is_empty() {
                    format!(
                        "Init:ExitCode:{}",
                        t.get("exitCode").and_then(Value::as_i64).unwrap_or(0)
                    )
                } else {
                    format!("Init:{r}")
                };
            }
            None if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" => {
                reason = format!("Init:{waiting_reason}");
            }
            None => reason = format!("Init:{i}/{}", arr(spec, "initContainers").len()),
        }
        initializing = true;
        break;
    }
    let initialized = arr(status, "conditions").iter().any(|c| {
        c.get("type").and_then(Value::as_str) == Some("Initialized")
            && c.get("status").and_then(Value::as_str) == Some("True")
    });
    if !initializing || initialized {
        restarts = 0;
        last_restart = None;
        let mut has_running = false;
        for c in arr(status, "containerStatuses").iter().rev() {
            restarts += c.get("restartCount").and_then(Value::as_i64).unwrap_or(0);
            if let Some(t) = finished(c) {
                last_restart = Some(last_restart.map_or(t, |l| l.max(t)));
            }
            let waiting = c
                .pointer("/state/waiting/reason")
                .and_then(Value::as_str)
                .unwrap_or("");
            let terminated = c.pointer("/state/terminated");
            if !waiting.is_empty() {
                reason = waiting.to_string();
            } else if let Some(t) = terminated {
                let r = t.get("reason").and_then(Value::as_str).unwrap_or("");
                reason = if r.is_empty() {
                    format!(
                        "ExitCode:{}",
                        t.get("exitCode").and_then(Value::as_i64).unwrap_or(0)
                    )
                } else {
                    r.to_string()
                };
            } else if c.get("ready") == Some(&json!(true)) && c.pointer("/state/running").is_some()
            {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            let pod_ready = arr(status, "conditions").iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Ready")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            });
            reason = if pod_ready { "Running" } else { "NotReady" }.into();
        }
    }
    let deleting = pod
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null());
    if deleting && st(status, "/reason") == "NodeLost" {
        reason = "Unknown".into();
    } else if deleting && !matches!(phase, "Succeeded" | "Failed") {
        reason = "Terminating".into();
    }
    let restarts = match last_restart {
        Some(t) if restarts != 0 => format!("{restarts} ({} ago)", human_duration(now - t)),
        _ => restarts.to_string(),
    };
    PodRow {
        ready: format!("{ready}/{total}"),
        reason,
        restarts,
    }
}

/// The READINESS GATES cell: true gates of all, `<none>` without any.
fn readiness_gates(pod: &Value) -> String {
    let gates = pod
        .pointer("/spec/readinessGates")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if gates.is_empty() {
        return "<none>".into();
    }
    let conditions = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let ok = gates
        .iter()
        .filter(|g| {
            let ty = g.get("conditionType");
            conditions
                .iter()
                .find(|c| c.get("type") == ty)
                .is_some_and(|c| c.get("status") == Some(&json!("True")))
        })
        .count();
    format!("{ok}/{}", gates.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_column_shows_the_waiting_reason_and_restarts_how_long_ago() {
        let now = 1_000_000;
        let finished = time::format_rfc3339(now - 5);
        let pod = json!({
            "spec": {"containers": [{"name": "app"}]},
            "status": {"phase": "Running", "containerStatuses": [{
                "name": "app", "ready": false, "restartCount": 3,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": finished}},
            }]},
        });
        let row = print_pod(&pod, now);
        assert_eq!(row.ready, "0/1");
        assert_eq!(row.reason, "CrashLoopBackOff");
        assert_eq!(row.restarts, "3 (5s ago)");
        let running = json!({
            "spec": {"containers": [{"name": "app"}]},
            "status": {"phase": "Running", "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0, "state": {"running": {}}}]},
        });
        let row = print_pod(&running, now);
        assert_eq!(
            (
                row.ready.as_str(),
                row.reason.as_str(),
                row.restarts.as_str()
            ),
            ("1/1", "Running", "0")
        );
    }

    #[test]
    fn qos_classes() {
        assert_eq!(
            qos_class(&json!({"containers": [{"name": "a"}]})),
            "BestEffort"
        );
        assert_eq!(
            qos_class(&json!({"containers": [{"resources": {"requests": {"cpu": "100"}}}]})),
            "Burstable"
        );
        assert_eq!(
            qos_class(
                &json!({"containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}}]})
            ),
            "Guaranteed"
        );
    }

    #[test]
    fn only_images_and_a_few_fields_of_a_pod_may_change() {
        let old = json!({"containers": [{"name": "a", "image": "x:1"}], "restartPolicy": "Always"});
        let image =
            json!({"containers": [{"name": "a", "image": "x:2"}], "restartPolicy": "Always"});
        assert!(validate_pod_update(&image, &old).is_empty());
        let policy =
            json!({"containers": [{"name": "a", "image": "x:1"}], "restartPolicy": "Never"});
        assert_eq!(validate_pod_update(&policy, &old).len(), 1);
    }
}
