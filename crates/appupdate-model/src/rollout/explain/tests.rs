use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::rollout::fixture;

fn items(name: &str) -> Vec<Value> {
    match fixture(name).get_mut("items").map(Value::take) {
        Some(Value::Array(items)) => items,
        _ => panic!("{name} has no items"),
    }
}

fn no_deployment() -> Value {
    json!({"metadata": {"name": "web"}})
}

/// A pod of the new ReplicaSet whose only container waits for `reason`.
fn waiting(name: &str, reason: &str, message: &str) -> Value {
    json!({
        "metadata": {"name": name, "uid": format!("uid-{name}")},
        "status": {
            "phase": "Pending",
            "containerStatuses": [{
                "name": "web", "ready": false, "restartCount": 0, "image": "nginx:1.27",
                "state": {"waiting": {"reason": reason, "message": message}}, "lastState": {}
            }]
        }
    })
}

fn warning(pod: &str, reason: &str, message: &str, count: u64, last: &str) -> Value {
    json!({
        "involvedObject": {"kind": "Pod", "name": pod, "uid": format!("uid-{pod}"),
                           "fieldPath": "spec.containers{web}"},
        "type": "Warning", "reason": reason, "message": message, "count": count,
        "firstTimestamp": "2025-06-02T09:00:00Z", "lastTimestamp": last, "eventTime": null
    })
}

const NOT_FOUND: &str = "rpc error: code = NotFound desc = failed to pull and unpack image \"docker.io/library/nginx:notfound\": failed to resolve reference \"docker.io/library/nginx:notfound\": docker.io/library/nginx:notfound: not found";

#[test]
fn an_image_that_does_not_exist_is_explained_by_pod_container_and_the_kubelets_own_message() {
    let e = explain(
        &no_deployment(),
        &[fixture("pod-err-image-pull")],
        &items("events-image-not-found"),
    );
    assert_eq!(
        e.pods,
        vec![PodReason {
            pod: "web-7d9c5b8f4-x2kqz".into(),
            container: Some("web".into()),
            reason: "ErrImagePull".into(),
            message: NOT_FOUND.into(),
            ..PodReason::default()
        }]
    );
    // Only the Warning that says something: not the Normal events, not the `Error: …` echoes.
    assert_eq!(
        e.events,
        vec![PodEvent {
            pod: "web-7d9c5b8f4-x2kqz".into(),
            container: Some("web".into()),
            reason: "Failed".into(),
            message: format!("Failed to pull image \"nginx:notfound\": {NOT_FOUND}"),
            count: 3,
        }]
    );
    assert_eq!(
        e.lines(),
        vec![
            format!("pod web-7d9c5b8f4-x2kqz container web: ErrImagePull: {NOT_FOUND}"),
            format!(
                "event Failed (x3) on web-7d9c5b8f4-x2kqz: Failed to pull image \"nginx:notfound\": {NOT_FOUND}"
            ),
        ]
    );
    assert_eq!(
        e.current().as_deref(),
        Some("web-7d9c5b8f4-x2kqz: ErrImagePull")
    );
}

#[test]
fn a_crash_loop_shows_the_last_termination_its_exit_code_and_the_restarts() {
    let e = explain(&no_deployment(), &[fixture("pod-crash-loop-oom")], &[]);
    assert_eq!(
        e.pods,
        vec![PodReason {
            pod: "web-7d9c5b8f4-h4m2p".into(),
            container: Some("web".into()),
            reason: "CrashLoopBackOff".into(),
            message: "back-off 40s restarting failed container=web pod=web-7d9c5b8f4-h4m2p_shop(7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f)".into(),
            exit_code: Some(137),
            last_reason: Some("OOMKilled".into()),
            restarts: Some(4),
            ..PodReason::default()
        }]
    );
    assert_eq!(
        e.lines(),
        vec![
            "pod web-7d9c5b8f4-h4m2p container web: CrashLoopBackOff (last OOMKilled, exit 137; 4 restarts): back-off 40s restarting failed container=web pod=web-7d9c5b8f4-h4m2p_shop(7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f)"
        ]
    );
    assert_eq!(
        e.current().as_deref(),
        Some("web-7d9c5b8f4-h4m2p: CrashLoopBackOff (4 restarts)")
    );
}

#[test]
fn init_containers_are_explained_as_such() {
    let e = explain(&no_deployment(), &[fixture("pod-init-crash")], &[]);
    assert_eq!(
        e.lines(),
        vec![
            "pod web-7d9c5b8f4-m5n6b init container migrate: CrashLoopBackOff (last Error, exit 1; 2 restarts): back-off 20s restarting failed container=migrate pod=web-7d9c5b8f4-m5n6b_shop(2b3c4d5e-6f7a-4b8c-9d0e-1f2a3b4c5d6e)",
            "pod web-7d9c5b8f4-m5n6b container web: PodInitializing",
        ]
    );
    assert!(e.pods[0].init_container && !e.pods[1].init_container);
    // The failing init container is what the progress line shows, not the waiting app.
    assert_eq!(
        e.current().as_deref(),
        Some("web-7d9c5b8f4-m5n6b: CrashLoopBackOff (2 restarts)")
    );
}

#[test]
fn a_missing_secret_is_the_kubelets_configuration_error() {
    let e = explain(&no_deployment(), &[fixture("pod-config-error")], &[]);
    assert_eq!(
        e.lines(),
        vec![
            "pod web-7d9c5b8f4-q8w3e container web: CreateContainerConfigError: secret \"db-creds\" not found"
        ]
    );
}

#[test]
fn an_unschedulable_pod_carries_the_schedulers_condition_and_its_event() {
    let e = explain(
        &no_deployment(),
        &[fixture("pod-unschedulable")],
        &items("events-unschedulable"),
    );
    let message = "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.";
    assert_eq!(
        e.pods,
        vec![PodReason {
            pod: "web-7d9c5b8f4-z9y8x".into(),
            reason: "Unschedulable".into(),
            message: message.into(),
            ..PodReason::default()
        }]
    );
    // Written through events.k8s.io: no `count`, the series counts.
    assert_eq!(
        e.events,
        vec![PodEvent {
            pod: "web-7d9c5b8f4-z9y8x".into(),
            container: None,
            reason: "FailedScheduling".into(),
            message: message.into(),
            count: 5,
        }]
    );
    assert_eq!(
        e.lines(),
        vec![
            format!("pod web-7d9c5b8f4-z9y8x: Unschedulable: {message}"),
            format!("event FailedScheduling (x5) on web-7d9c5b8f4-z9y8x: {message}"),
        ]
    );
}

#[test]
fn an_exceeded_quota_is_the_deployments_replica_failure() {
    let e = explain(&fixture("deployment-quota"), &[], &[]);
    assert_eq!(
        e.replica_failure,
        Some(ReplicaFailure {
            reason: "FailedCreate".into(),
            message: "pods \"web-7d9c5b8f4-b6kd2\" is forbidden: exceeded quota: compute, requested: requests.cpu=2, used: requests.cpu=4, limited: requests.cpu=5".into(),
        })
    );
    assert_eq!(
        e.lines(),
        vec![
            "deployment: ReplicaFailure FailedCreate: pods \"web-7d9c5b8f4-b6kd2\" is forbidden: exceeded quota: compute, requested: requests.cpu=2, used: requests.cpu=4, limited: requests.cpu=5"
        ]
    );
    assert_eq!(e.current().as_deref(), Some("deployment: FailedCreate"));
    // A condition that no longer holds says nothing.
    let mut d = fixture("deployment-quota");
    d["status"]["conditions"][2]["status"] = json!("False");
    assert_eq!(explain(&d, &[], &[]), Explanation::default());
}

#[test]
fn the_three_most_serious_pods_are_named_and_the_rest_counted() {
    let pods = vec![
        waiting("web-e", "ContainerCreating", ""),
        waiting(
            "web-d",
            "ImagePullBackOff",
            "Back-off pulling image \"nginx:x\"",
        ),
        json!({"metadata": {"name": "web-a"}, "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes"}]}}),
        waiting("web-c", "ErrImagePull", "not found"),
        waiting("web-b", "ContainerCreating", ""),
    ];
    let e = explain(&no_deployment(), &pods, &[]);
    let named: Vec<(&str, &str)> = e
        .pods
        .iter()
        .map(|p| (p.pod.as_str(), p.reason.as_str()))
        .collect();
    assert_eq!(
        named,
        [
            ("web-c", "ErrImagePull"),
            ("web-d", "ImagePullBackOff"),
            ("web-a", "Unschedulable")
        ]
    );
    assert_eq!(e.more_pods, 2);
    assert_eq!(e.lines()[3], "2 more pods");
    let named: Vec<&str> = explained_pods(&pods)
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str())
        .collect();
    assert_eq!(named, ["web-c", "web-d", "web-a"]);
}

#[test]
fn healthy_and_terminating_pods_are_not_explained() {
    let healthy = json!({"metadata": {"name": "web-ok"}, "status": {"phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [{"name": "web", "ready": true, "restartCount": 0,
                               "state": {"running": {"startedAt": "2025-06-02T09:00:00Z"}}}]}});
    let mut leaving = waiting("web-old", "CrashLoopBackOff", "back-off");
    leaving["metadata"]["deletionTimestamp"] = json!("2025-06-02T09:20:00Z");
    let done_init = json!({"metadata": {"name": "web-init"}, "status": {"phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}],
        "initContainerStatuses": [{"name": "migrate", "ready": true, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
        "containerStatuses": [{"name": "web", "ready": true, "restartCount": 0,
                               "state": {"running": {}}}]}});
    assert_eq!(
        explain(&no_deployment(), &[healthy, leaving, done_init], &[]),
        Explanation::default()
    );
}

#[test]
fn a_pod_that_runs_but_is_not_ready_is_explained_by_its_ready_condition_or_last_crash() {
    let unready = json!({"metadata": {"name": "web-r"}, "status": {"phase": "Running",
        "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady",
                        "message": "containers with unready status: [web]"}],
        "containerStatuses": [{"name": "web", "ready": false, "restartCount": 0,
                               "state": {"running": {}}}]}});
    let restarted = json!({"metadata": {"name": "web-s"}, "status": {"phase": "Running",
        "containerStatuses": [{"name": "web", "ready": false, "restartCount": 1,
            "state": {"running": {}},
            "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]}});
    let e = explain(&no_deployment(), &[unready, restarted], &[]);
    assert_eq!(
        e.lines(),
        vec![
            "pod web-s container web: OOMKilled (exit 137; 1 restart)",
            "pod web-r: ContainersNotReady: containers with unready status: [web]",
        ]
    );
}

#[test]
fn a_failed_pod_is_explained_by_its_phase_reason() {
    let evicted = json!({"metadata": {"name": "web-ev"}, "status": {"phase": "Failed",
        "reason": "Evicted", "message": "The node was low on resource: memory."}});
    assert_eq!(
        explain(&no_deployment(), &[evicted], &[]).lines(),
        vec!["pod web-ev: Evicted: The node was low on resource: memory."]
    );
}

#[test]
fn events_are_the_newest_warnings_of_the_named_pods_each_said_once() {
    let pods = [waiting(
        "web-a",
        "ImagePullBackOff",
        "Back-off pulling image \"x\"",
    )];
    let mut scheduler = warning("web-a", "FailedScheduling", "0/1 nodes", 0, "");
    scheduler["lastTimestamp"] = Value::Null;
    scheduler["eventTime"] = json!("2025-06-02T09:10:00.000001Z");
    scheduler["series"] = json!({"count": 2, "lastObservedTime": "2025-06-02T09:12:00.500000Z"});
    let mut earlier_pod = warning(
        "web-a",
        "Failed",
        "from an earlier pod",
        1,
        "2025-06-02T09:30:00Z",
    );
    earlier_pod["involvedObject"]["uid"] = json!("uid-of-another-web-a");
    let mut normal = warning(
        "web-a",
        "Pulling",
        "Pulling image",
        1,
        "2025-06-02T09:40:00Z",
    );
    normal["type"] = json!("Normal");
    let events = [
        warning("web-a", "Failed", "pull failed", 2, "2025-06-02T09:11:00Z"),
        warning(
            "web-a",
            "Unhealthy",
            "Readiness probe failed",
            1,
            "2025-06-02T09:12:00Z",
        ),
        scheduler,
        // The same reason and message in a second Event object: said once, counted together.
        warning("web-a", "Failed", "pull failed", 3, "2025-06-02T09:13:00Z"),
        warning("web-a", "FailedMount", "oldest", 1, "2025-06-02T09:01:00Z"),
        warning("web-b", "Failed", "another pod", 1, "2025-06-02T09:50:00Z"),
        earlier_pod,
        normal,
    ];
    let e = explain(&no_deployment(), &pods, &events);
    let got: Vec<(&str, u64)> = e
        .events
        .iter()
        .map(|e| (e.message.as_str(), e.count))
        .collect();
    // 09:12:00.5 (the series) is after 09:12:00.
    assert_eq!(
        got,
        [
            ("pull failed", 5),
            ("0/1 nodes", 2),
            ("Readiness probe failed", 1)
        ]
    );
}

#[test]
fn times_order_as_times_whatever_their_precision() {
    assert!(time_key("2025-06-02T09:12:00.5Z") > time_key("2025-06-02T09:12:00Z"));
    assert!(time_key("2025-06-02T09:12:00.000001Z") > time_key("2025-06-02T09:12:00Z"));
    assert!(time_key("2025-06-02T09:12:01Z") > time_key("2025-06-02T09:12:00.999999Z"));
    assert_eq!(
        time_key("2025-06-02T09:12:00.100Z"),
        time_key("2025-06-02T09:12:00.1Z")
    );
    assert_eq!(time_key("not a time"), None);
    assert_eq!(time_key(""), None);
}

#[test]
fn in_json_the_reasons_are_camel_case_data_without_empty_fields() {
    let mut e = explain(
        &fixture("deployment-quota"),
        &[fixture("pod-crash-loop-oom"), fixture("pod-unschedulable")],
        &items("events-unschedulable"),
    );
    e.more_pods = 1;
    let doc = serde_json::to_value(&e).unwrap_or_default();
    assert_eq!(
        doc,
        json!({
            "pods": [
                {"pod": "web-7d9c5b8f4-h4m2p", "container": "web", "reason": "CrashLoopBackOff",
                 "message": "back-off 40s restarting failed container=web pod=web-7d9c5b8f4-h4m2p_shop(7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f)",
                 "exitCode": 137, "lastReason": "OOMKilled", "restarts": 4},
                {"pod": "web-7d9c5b8f4-z9y8x", "reason": "Unschedulable",
                 "message": "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."}
            ],
            "morePods": 1,
            "replicaFailure": {"reason": "FailedCreate",
                "message": "pods \"web-7d9c5b8f4-b6kd2\" is forbidden: exceeded quota: compute, requested: requests.cpu=2, used: requests.cpu=4, limited: requests.cpu=5"},
            "events": [
                {"pod": "web-7d9c5b8f4-z9y8x", "reason": "FailedScheduling",
                 "message": "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.",
                 "count": 5}
            ]
        })
    );
    assert_eq!(
        serde_json::to_value(Explanation::default()).unwrap_or_default(),
        json!({})
    );
}

#[test]
fn reasons_that_cannot_be_read_are_said_so() {
    let e = Explanation::unreadable("forbidden");
    assert_eq!(e.lines(), vec!["reasons not readable: forbidden"]);
    assert_eq!(
        e.current().as_deref(),
        Some("reasons not readable: forbidden")
    );
    assert_eq!(
        serde_json::to_value(&e).unwrap_or_default(),
        json!({"unreadable": "forbidden"})
    );
    assert!(!e.is_empty() && Explanation::default().is_empty());
}

#[test]
fn cluster_text_is_escaped_in_lines_and_kept_exactly_in_the_data() {
    let hostile = "pull failed\u{1b}]0;owned\u{7}\n\u{202e}denied";
    let pod = waiting("web-\u{1b}[2J", "ErrImagePull\u{9b}", hostile);
    let events = [warning(
        "web-\u{1b}[2J",
        "Failed\u{7}",
        hostile,
        1,
        "2025-06-02T09:00:00Z",
    )];
    let e = explain(&no_deployment(), &[pod], &events);
    assert_eq!(e.pods[0].message, hostile);
    assert_eq!(e.events[0].message, hostile);
    assert_eq!(
        e.lines(),
        vec![
            "pod web-\\e[2J container web: ErrImagePull\\u{9b}: pull failed\\e]0;owned\\x07 \\u{202e}denied",
            "event Failed\\x07 on web-\\e[2J: pull failed\\e]0;owned\\x07 \\u{202e}denied",
        ]
    );
    assert_eq!(
        e.current().as_deref(),
        Some("web-\\e[2J: ErrImagePull\\u{9b}")
    );
}

#[test]
fn a_long_message_is_shortened_in_lines_only() {
    let long = "x".repeat(5000);
    let e = explain(
        &no_deployment(),
        &[waiting("web-a", "CreateContainerConfigError", &long)],
        &[],
    );
    assert_eq!(e.pods[0].message.len(), 5000);
    let line = &e.lines()[0];
    assert!(line.ends_with('…'), "{line}");
    assert!(line.chars().count() < 1100, "{}", line.len());
}

/// Any JSON value, a few levels deep, with any strings.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(any::<String>(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A pod in the kubelet's shape with any strings and numbers where the kubelet writes them.
fn any_pod() -> impl Strategy<Value = Value> {
    (
        any::<String>(),
        any::<String>(),
        any::<String>(),
        any::<String>(),
        any::<i64>(),
        any::<i64>(),
        any::<bool>(),
        any_json(),
    )
        .prop_map(|(name, reason, message, phase, exit, restarts, init, odd)| {
            let status = json!({
                "name": reason, "ready": false, "restartCount": restarts,
                "state": {"waiting": {"reason": reason, "message": message}},
                "lastState": {"terminated": {"exitCode": exit, "reason": message}}
            });
            let key = if init {
                "initContainerStatuses"
            } else {
                "containerStatuses"
            };
            json!({
                "metadata": {"name": name, "uid": phase},
                "status": {
                    "phase": phase,
                    "conditions": [{"type": "PodScheduled", "status": "False", "reason": reason, "message": message},
                                   {"type": "Ready", "status": "False", "reason": message}],
                    key: [status, odd],
                }
            })
        })
}

fn any_event() -> impl Strategy<Value = Value> {
    (
        any::<String>(),
        any::<String>(),
        any::<String>(),
        any::<String>(),
        any::<u64>(),
        any_json(),
    )
        .prop_map(|(pod, reason, message, time, count, odd)| {
            json!({
                "involvedObject": {"kind": "Pod", "name": pod, "fieldPath": time},
                "type": "Warning", "reason": reason, "message": message, "count": count,
                "lastTimestamp": time, "eventTime": odd, "series": {"lastObservedTime": message}
            })
        })
}

proptest! {
    /// Whatever the pods and events hold, explaining them does not panic, its lines are
    /// printable, and its JSON reads back as the same explanation.
    #[test]
    fn any_pods_and_events_explain_without_panic_and_round_trip(
        pods in proptest::collection::vec(prop_oneof![any_pod(), any_json()], 0..6),
        events in proptest::collection::vec(prop_oneof![any_event(), any_json()], 0..8),
        deployment in any_json(),
    ) {
        // Events about the pods that are there, too.
        let mut events = events;
        for p in &pods {
            if let Some(name) = p.pointer("/metadata/name").and_then(Value::as_str) {
                events.push(warning(name, name, name, 2, name));
            }
        }
        let e = explain(&deployment, &pods, &events);
        for line in e.lines().iter().chain(e.current().iter()) {
            prop_assert!(!line.chars().any(crate::text::is_escaped), "{line:?}");
        }
        let text = serde_json::to_string(&e).map_err(|err| TestCaseError::fail(err.to_string()))?;
        let back: Explanation = serde_json::from_str(&text).map_err(|err| TestCaseError::fail(err.to_string()))?;
        prop_assert_eq!(back, e);
    }
}
