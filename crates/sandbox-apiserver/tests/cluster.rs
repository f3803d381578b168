//! The cluster `Rollout::Auto` runs: ReplicaSets and pods for each pod template, the node's
//! kubelet and its failures (the same statuses and events as the reference cluster, checked
//! against its recordings by `conformance.rs`), quotas, the progress deadline, what the plugin
//! reads to explain a failed rollout. Every wait polls with a deadline.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{get, request, send_json};
use sandbox_apiserver::{Identity, KubeletTimings, Rollout, Sandbox, SandboxOptions};
use serde_json::{Value, json};

const NS: &str = "shop";
const WEB: &str = "/apis/apps/v1/namespaces/shop/deployments/web";

fn cluster(kubelet: KubeletTimings) -> Sandbox {
    let sb = Sandbox::start(SandboxOptions {
        rollout: Rollout::Auto {
            delay: Duration::from_millis(200),
        },
        kubelet,
        ..Default::default()
    })
    .unwrap();
    sb.seed_demo_app(NS, "web").unwrap();
    sb
}

/// Poll `probe` until it gives a value (10 s at most).
fn wait_for<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn condition<'a>(obj: &'a Value, ty: &str) -> &'a Value {
    obj["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == ty))
        .unwrap_or(&Value::Null)
}

fn rolled_out(sb: &Sandbox) -> Value {
    wait_for("the rollout to complete", || {
        let d = sb.get(WEB).unwrap();
        (condition(&d, "Progressing")["reason"] == "NewReplicaSetAvailable"
            && d["status"]["observedGeneration"] == d["metadata"]["generation"])
            .then_some(d)
    })
}

/// A strategic merge patch of the Deployment's one container, as a client sends it.
fn patch_container(sb: &Sandbox, container: Value) {
    let mut c = container;
    c["name"] = json!("app");
    let r = send_json(
        sb,
        "PATCH",
        WEB,
        "application/strategic-merge-patch+json",
        &json!({"spec": {"template": {"spec": {"containers": [c]}}}}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
}

/// The plugin's reads: the new ReplicaSet (the one with the Deployment's revision) among those
/// of the selector, then its pods by selector and pod-template-hash.
fn new_pods(sb: &Sandbox) -> (Value, Vec<Value>) {
    let d = sb.get(WEB).unwrap();
    let revision = d["metadata"]["annotations"]["deployment.kubernetes.io/revision"].clone();
    let rss = get(
        sb,
        "/apis/apps/v1/namespaces/shop/replicasets?labelSelector=app%3Dweb",
    )
    .json();
    let rs = rss["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|rs| rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == revision)
        .cloned()
        .unwrap_or(Value::Null);
    let hash = rs["metadata"]["labels"]["pod-template-hash"]
        .as_str()
        .unwrap_or("none")
        .to_string();
    let pods = get(
        sb,
        &format!(
            "/api/v1/namespaces/shop/pods?labelSelector=app%3Dweb%2Cpod-template-hash%3D{hash}"
        ),
    )
    .json();
    (rs, pods["items"].as_array().cloned().unwrap_or_default())
}

/// The first new pod once `pred` holds for it.
fn new_pod_when(sb: &Sandbox, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    wait_for(what, || new_pods(sb).1.into_iter().find(|p| pred(p)))
}

fn waiting_reason(pod: &Value) -> &str {
    pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
        .as_str()
        .unwrap_or("")
}

/// The events of a pod, as the plugin asks for them.
fn events_of(sb: &Sandbox, pod: &Value) -> Vec<Value> {
    let name = pod["metadata"]["name"].as_str().unwrap();
    get(
        sb,
        &format!("/api/v1/namespaces/shop/events?fieldSelector=involvedObject.kind%3DPod%2CinvolvedObject.name%3D{name}"),
    )
    .json()["items"]
        .as_array()
        .cloned()
        .unwrap()
}

fn has_event(events: &[Value], ty: &str, reason: &str, message_part: &str) -> bool {
    events.iter().any(|e| {
        e["type"] == ty
            && e["reason"] == reason
            && e["message"].as_str().unwrap_or("").contains(message_part)
    })
}

#[test]
fn a_healthy_rollout_replaces_the_old_replica_set_with_a_new_one_and_its_pods() {
    let sb = cluster(KubeletTimings::default());
    let first = rolled_out(&sb);
    assert_eq!(
        first["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        json!("1")
    );
    assert_eq!(
        first["metadata"]["generation"],
        json!(1),
        "written with the status"
    );
    patch_container(&sb, json!({"image": "registry.example.com/web:2.0"}));
    let d = rolled_out(&sb);
    assert_eq!(
        d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        json!("2")
    );
    for f in [
        "replicas",
        "updatedReplicas",
        "readyReplicas",
        "availableReplicas",
    ] {
        assert_eq!(d["status"][f], json!(2), "{f}");
    }
    let (rs, pods) = new_pods(&sb);
    let rs_name = rs["metadata"]["name"].as_str().unwrap();
    let hash = rs["metadata"]["labels"]["pod-template-hash"]
        .as_str()
        .unwrap();
    assert_eq!(rs_name, format!("web-{hash}"));
    assert_eq!(
        rs["spec"]["selector"]["matchLabels"]["pod-template-hash"],
        json!(hash)
    );
    assert_eq!(
        rs["metadata"]["ownerReferences"][0],
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": d["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true})
    );
    assert_eq!(rs["status"]["readyReplicas"], json!(2));
    assert_eq!(pods.len(), 2);
    for p in &pods {
        let name = p["metadata"]["name"].as_str().unwrap();
        let suffix = name.strip_prefix(&format!("{rs_name}-")).unwrap();
        assert_eq!(suffix.len(), 5, "{name}");
        assert_eq!(
            p["metadata"]["ownerReferences"][0]["uid"],
            rs["metadata"]["uid"]
        );
        assert_eq!(p["status"]["phase"], json!("Running"));
        assert_eq!(condition(p, "Ready")["status"], json!("True"));
        assert_eq!(p["spec"]["nodeName"], json!(sandbox_apiserver::NODE_NAME));
        assert_eq!(
            p["spec"]["containers"][0]["image"],
            json!("registry.example.com/web:2.0")
        );
    }
    let rss = sb.list("/apis/apps/v1/namespaces/shop/replicasets");
    assert_eq!(rss.len(), 2, "the old ReplicaSet is kept for history");
    let old = rss
        .iter()
        .find(|r| r["metadata"]["name"] != json!(rs_name))
        .unwrap();
    assert_eq!(old["spec"]["replicas"], json!(0));
    assert_eq!(
        sb.list("/api/v1/namespaces/shop/pods").len(),
        2,
        "the old pods are gone"
    );
    let events = sb.list("/api/v1/namespaces/shop/events");
    assert!(has_event(
        &events,
        "Normal",
        "ScalingReplicaSet",
        &format!("Scaled up replica set {rs_name} from 0 to 1")
    ));
    assert!(has_event(
        &events,
        "Normal",
        "SuccessfulCreate",
        &format!("Created pod: {rs_name}-")
    ));
    assert!(has_event(
        &events,
        "Normal",
        "Scheduled",
        "Successfully assigned shop/"
    ));
}

#[test]
fn an_image_that_cannot_be_pulled_is_err_image_pull_with_containerds_message() {
    let sb = cluster(KubeletTimings {
        pull_backoff_after: Duration::from_secs(3600),
        ..Default::default()
    });
    rolled_out(&sb);
    patch_container(&sb, json!({"image": "registry.example.com/web:notfound"}));
    let pod = new_pod_when(&sb, "ErrImagePull", |p| waiting_reason(p) == "ErrImagePull");
    let ref_ = "registry.example.com/web:notfound";
    let err = format!(
        "rpc error: code = NotFound desc = failed to pull and unpack image \"{ref_}\": failed to resolve reference \"{ref_}\": {ref_}: not found"
    );
    assert_eq!(
        pod["status"]["containerStatuses"][0]["state"]["waiting"]["message"],
        json!(err)
    );
    assert_eq!(pod["status"]["phase"], json!("Pending"));
    let events = events_of(&sb, &pod);
    assert!(has_event(
        &events,
        "Normal",
        "Pulling",
        "Pulling image \"registry.example.com/web:notfound\""
    ));
    assert!(has_event(
        &events,
        "Warning",
        "Failed",
        &format!("Failed to pull image \"{ref_}\": {err}")
    ));
    assert!(has_event(
        &events,
        "Warning",
        "Failed",
        "Error: ErrImagePull"
    ));
    assert!(!has_event(&events, "Normal", "BackOff", ""), "not yet");
    let kubelet = events.iter().find(|e| e["reason"] == "Pulling").unwrap();
    assert_eq!(
        kubelet["source"],
        json!({"component": "kubelet", "host": sandbox_apiserver::NODE_NAME})
    );
    assert_eq!(
        kubelet["involvedObject"]["fieldPath"],
        json!("spec.containers{app}")
    );
}

#[test]
fn an_image_still_not_pulled_goes_into_image_pull_back_off_and_the_rollout_never_completes() {
    let sb = cluster(KubeletTimings {
        pull_backoff_after: Duration::from_millis(100),
        ..Default::default()
    });
    rolled_out(&sb);
    patch_container(&sb, json!({"image": "registry.example.com/web:notfound"}));
    let pod = new_pod_when(&sb, "ImagePullBackOff", |p| {
        waiting_reason(p) == "ImagePullBackOff"
    });
    assert_eq!(
        pod["status"]["containerStatuses"][0]["state"]["waiting"]["message"],
        json!("Back-off pulling image \"registry.example.com/web:notfound\"")
    );
    let events = events_of(&sb, &pod);
    assert!(has_event(
        &events,
        "Normal",
        "BackOff",
        "Back-off pulling image"
    ));
    assert!(has_event(
        &events,
        "Warning",
        "Failed",
        "Error: ImagePullBackOff"
    ));
    let d = sb.get(WEB).unwrap();
    assert_eq!(
        condition(&d, "Progressing")["reason"],
        json!("ReplicaSetUpdated")
    );
    assert_eq!(d["status"]["updatedReplicas"], json!(1));
    assert_eq!(
        d["status"]["availableReplicas"],
        json!(2),
        "the old pods keep serving"
    );
    assert!(
        !sb.rollout_settled(),
        "the default 600 s deadline is still to come"
    );
}

#[test]
fn a_crashing_container_restarts_again_and_again_in_crash_loop_back_off() {
    let sb = cluster(KubeletTimings {
        restart_every: Duration::from_millis(100),
        ..Default::default()
    });
    rolled_out(&sb);
    patch_container(&sb, json!({"image": "registry.example.com/web:crash"}));
    let pod = new_pod_when(&sb, "three restarts", |p| {
        p["status"]["containerStatuses"][0]["restartCount"]
            .as_i64()
            .is_some_and(|n| n >= 3)
    });
    let cs = &pod["status"]["containerStatuses"][0];
    assert_eq!(pod["status"]["phase"], json!("Running"));
    assert_eq!(condition(&pod, "Ready")["status"], json!("False"));
    assert_eq!(cs["state"]["waiting"]["reason"], json!("CrashLoopBackOff"));
    let name = pod["metadata"]["name"].as_str().unwrap();
    let uid = pod["metadata"]["uid"].as_str().unwrap();
    assert!(
        cs["state"]["waiting"]["message"]
            .as_str()
            .unwrap()
            .ends_with(&format!(
                "restarting failed container=app pod={name}_shop({uid})"
            )),
        "{cs}"
    );
    assert_eq!(cs["lastState"]["terminated"]["exitCode"], json!(1));
    assert_eq!(cs["lastState"]["terminated"]["reason"], json!("Error"));
    let events = events_of(&sb, &pod);
    assert!(has_event(
        &events,
        "Normal",
        "Started",
        "Started container app"
    ));
    assert!(has_event(
        &events,
        "Warning",
        "BackOff",
        &format!("Back-off restarting failed container app in pod {name}_shop({uid})")
    ));
    // Each restart is one more status write; the event is posted once.
    let later = new_pod_when(&sb, "more restarts", |p| {
        p["status"]["containerStatuses"][0]["restartCount"].as_i64() > cs["restartCount"].as_i64()
    });
    assert_eq!(later["metadata"]["uid"], pod["metadata"]["uid"]);
    assert_eq!(
        events_of(&sb, &pod)
            .iter()
            .filter(|e| e["reason"] == "BackOff")
            .count(),
        1
    );
}

#[test]
fn a_missing_secret_is_create_container_config_error_until_it_is_optional() {
    let sb = cluster(KubeletTimings::default());
    rolled_out(&sb);
    patch_container(
        &sb,
        json!({"env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "web-credentials", "key": "token"}}}]}),
    );
    let pod = new_pod_when(&sb, "CreateContainerConfigError", |p| {
        waiting_reason(p) == "CreateContainerConfigError"
    });
    assert_eq!(
        pod["status"]["containerStatuses"][0]["state"]["waiting"]["message"],
        json!("secret \"web-credentials\" not found")
    );
    assert!(has_event(
        &events_of(&sb, &pod),
        "Warning",
        "Failed",
        "Error: secret \"web-credentials\" not found"
    ));
    // An optional reference does not stop the container: the rollout completes.
    patch_container(
        &sb,
        json!({"env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "web-credentials", "key": "token", "optional": true}}}]}),
    );
    rolled_out(&sb);
}

#[test]
fn a_missing_config_map_blocks_the_pods_until_it_is_created() {
    let sb = cluster(KubeletTimings::default());
    rolled_out(&sb);
    patch_container(
        &sb,
        json!({"envFrom": [{"configMapRef": {"name": "web-settings"}}]}),
    );
    let pod = new_pod_when(&sb, "CreateContainerConfigError", |p| {
        waiting_reason(p) == "CreateContainerConfigError"
    });
    assert_eq!(
        pod["status"]["containerStatuses"][0]["state"]["waiting"]["message"],
        json!("configmap \"web-settings\" not found")
    );
    sb.create(
        "/api/v1/namespaces/shop/configmaps",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web-settings"}, "data": {"a": "b"}}),
    )
    .unwrap();
    let d = rolled_out(&sb);
    assert_eq!(d["status"]["readyReplicas"], json!(2));
}

#[test]
fn a_pod_that_requests_more_cpu_than_the_node_has_stays_pending_and_unschedulable() {
    let sb = cluster(KubeletTimings::default());
    rolled_out(&sb);
    patch_container(&sb, json!({"resources": {"requests": {"cpu": "100"}}}));
    let msg = "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.";
    let pod = new_pod_when(&sb, "Unschedulable", |p| {
        condition(p, "PodScheduled")["reason"] == "Unschedulable"
    });
    assert_eq!(condition(&pod, "PodScheduled")["status"], json!("False"));
    assert_eq!(condition(&pod, "PodScheduled")["message"], json!(msg));
    assert_eq!(pod["status"]["phase"], json!("Pending"));
    assert!(pod["spec"].get("nodeName").is_none());
    let events = wait_for("FailedScheduling", || {
        let e = events_of(&sb, &pod);
        has_event(&e, "Warning", "FailedScheduling", msg).then_some(e)
    });
    let e = events
        .iter()
        .find(|e| e["reason"] == "FailedScheduling")
        .unwrap();
    assert_eq!(e["reportingComponent"], json!("default-scheduler"));
    assert_eq!(e["action"], json!("Scheduling"));
    assert_eq!(e["source"], json!({}));
    assert!(
        e["eventTime"].as_str().unwrap().len() == 27,
        "microseconds: {e}"
    );
}

#[test]
fn a_quota_that_the_new_pods_exceed_is_reported_as_replica_failure_until_it_is_raised() {
    let sb = cluster(KubeletTimings::default());
    rolled_out(&sb);
    sb.create(
        "/api/v1/namespaces/shop/resourcequotas",
        json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "pods"}, "spec": {"hard": {"pods": "2"}}}),
    )
    .unwrap();
    let quota = wait_for("the quota's status", || {
        let q = sb
            .get("/api/v1/namespaces/shop/resourcequotas/pods")
            .unwrap();
        (q["status"]["used"]["pods"] == "2").then_some(q)
    });
    assert_eq!(quota["status"]["hard"], json!({"pods": "2"}));
    patch_container(&sb, json!({"image": "registry.example.com/web:2.0"}));
    let d = wait_for("ReplicaFailure", || {
        let d = sb.get(WEB).unwrap();
        (condition(&d, "ReplicaFailure")["status"] == "True").then_some(d)
    });
    let failure = condition(&d, "ReplicaFailure");
    assert_eq!(failure["reason"], json!("FailedCreate"));
    let message = failure["message"].as_str().unwrap();
    assert!(message.starts_with("pods \"web-"), "{message}");
    assert!(
        message.ends_with("\" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=2, limited: pods=2"),
        "{message}"
    );
    assert_eq!(
        condition(&d, "Progressing")["reason"],
        json!("NewReplicaSetCreated")
    );
    let (rs, pods) = new_pods(&sb);
    assert!(pods.is_empty());
    assert_eq!(condition(&rs, "ReplicaFailure")["message"], json!(message));
    let rs_name = rs["metadata"]["name"].as_str().unwrap();
    let refused = get(
        &sb,
        &format!("/api/v1/namespaces/shop/events?fieldSelector=involvedObject.kind%3DReplicaSet%2CinvolvedObject.name%3D{rs_name}%2Creason%3DFailedCreate"),
    )
    .json();
    assert!(
        refused["items"][0]["message"]
            .as_str()
            .unwrap()
            .starts_with("Error creating: pods \"web-")
    );
    // A higher quota lets the rollout through, and the failure goes.
    sb.update("/api/v1/namespaces/shop/resourcequotas/pods", |q| {
        q["spec"]["hard"]["pods"] = json!("10");
    })
    .unwrap();
    let d = rolled_out(&sb);
    assert_eq!(condition(&d, "ReplicaFailure"), &Value::Null);
}

#[test]
fn a_failing_rollout_exceeds_its_progress_deadline() {
    let sb = cluster(KubeletTimings::default());
    rolled_out(&sb);
    sb.update(WEB, |d| {
        d["spec"]["progressDeadlineSeconds"] = json!(1);
        d["spec"]["template"]["spec"]["containers"][0]["image"] =
            json!("registry.example.com/web:stuck");
    })
    .unwrap();
    let d = wait_for("ProgressDeadlineExceeded", || {
        let d = sb.get(WEB).unwrap();
        (condition(&d, "Progressing")["reason"] == "ProgressDeadlineExceeded").then_some(d)
    });
    let (rs, pods) = new_pods(&sb);
    assert_eq!(condition(&d, "Progressing")["status"], json!("False"));
    assert_eq!(
        condition(&d, "Progressing")["message"],
        json!(format!(
            "ReplicaSet \"{}\" has timed out progressing.",
            rs["metadata"]["name"].as_str().unwrap()
        ))
    );
    assert_eq!(
        waiting_reason(&pods[0]),
        "ImagePullBackOff",
        "a stuck image never starts"
    );
    // Nothing is left to do: no restart, no deadline to come.
    wait_for("settled", || sb.rollout_settled().then_some(()));
}

#[test]
fn the_view_role_reads_pods_events_and_replica_sets_and_no_role_reads_none() {
    let sb = cluster(KubeletTimings::default());
    rolled_out(&sb);
    let ro = sb.token(Identity::ReadOnly);
    let no = sb.token(Identity::NoPerm);
    for path in [
        "/api/v1/namespaces/shop/pods?labelSelector=app%3Dweb",
        "/api/v1/namespaces/shop/events?fieldSelector=involvedObject.kind%3DPod",
        "/apis/apps/v1/namespaces/shop/replicasets?labelSelector=app%3Dweb",
    ] {
        assert_eq!(
            request(&sb, Some(&ro), "GET", path, &[], None).status,
            200,
            "{path}"
        );
        let r = request(&sb, Some(&no), "GET", path, &[], None);
        assert_eq!(r.status, 403, "{path}");
        assert_eq!(r.json()["reason"], json!("Forbidden"));
    }
    let r = request(
        &sb,
        Some(&ro),
        "POST",
        "/api/v1/namespaces/shop/events",
        &[("Content-Type", "application/json")],
        Some(br#"{"apiVersion":"v1","kind":"Event","metadata":{"name":"x"},"involvedObject":{"namespace":"shop"}}"#),
    );
    assert_eq!(r.status, 403, "view reads only");
}

#[test]
fn field_selectors_choose_pods_and_events_as_the_real_server_does() {
    let sb = cluster(KubeletTimings::default());
    rolled_out(&sb);
    let node = sandbox_apiserver::NODE_NAME;
    let pods = get(&sb, &format!("/api/v1/namespaces/shop/pods?fieldSelector=status.phase%3DRunning%2Cspec.nodeName%3D{node}")).json();
    assert_eq!(pods["items"].as_array().unwrap().len(), 2);
    let none = get(
        &sb,
        "/api/v1/namespaces/shop/pods?fieldSelector=status.phase%3DPending",
    )
    .json();
    assert_eq!(none["items"], json!([]));
    let scheduled = get(&sb, "/api/v1/namespaces/shop/events?fieldSelector=reason%3DScheduled%2Csource%3Ddefault-scheduler").json();
    assert_eq!(
        scheduled["items"].as_array().unwrap().len(),
        2,
        "the scheduler's source is its reporting controller"
    );
    let r = get(
        &sb,
        "/api/v1/namespaces/shop/pods?fieldSelector=spec.containers%3Dx",
    );
    assert_eq!(
        (r.status, r.json()["message"].clone()),
        (400, json!("field label not supported: spec.containers"))
    );
    let r = get(
        &sb,
        "/apis/apps/v1/namespaces/shop/replicasets?fieldSelector=status.replicas%3D1",
    );
    assert_eq!(r.status, 400);
}

#[test]
fn deleting_the_deployment_removes_its_replica_sets_and_pods() {
    let sb = cluster(KubeletTimings::default());
    rolled_out(&sb);
    sb.delete(WEB).unwrap();
    wait_for("the garbage collector", || {
        (sb.list("/apis/apps/v1/namespaces/shop/replicasets")
            .is_empty()
            && sb.list("/api/v1/namespaces/shop/pods").is_empty())
        .then_some(())
    });
}

#[test]
fn off_creates_no_replica_sets_or_pods() {
    let sb = Sandbox::start(SandboxOptions::default()).unwrap();
    sb.seed_demo_app(NS, "web").unwrap();
    wait_for("settled", || sb.rollout_settled().then_some(()));
    assert!(
        sb.list("/apis/apps/v1/namespaces/shop/replicasets")
            .is_empty()
    );
    assert!(sb.list("/api/v1/namespaces/shop/pods").is_empty());
}
