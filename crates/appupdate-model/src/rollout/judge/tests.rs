use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;
use crate::rollout::explain::{PodEvent, explain};
use crate::rollout::fixture;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Runtimes' answers for an image that does not exist, as the kubelet shows them (its
/// `rpc error: code = … desc =` prefix, and on 1.32 and later the back-off's wrapping).
const NOT_FOUND: &[(&str, &str)] = &[
    (
        "containerd",
        "rpc error: code = NotFound desc = failed to pull and unpack image \"docker.io/library/nginx:notfound\": failed to resolve reference \"docker.io/library/nginx:notfound\": docker.io/library/nginx:notfound: not found",
    ),
    (
        "containerd",
        "Back-off pulling image \"nginx:notfound\": ErrImagePull: rpc error: code = NotFound desc = failed to pull and unpack image \"docker.io/library/nginx:notfound\": failed to resolve reference \"docker.io/library/nginx:notfound\": docker.io/library/nginx:notfound: not found",
    ),
    (
        "containerd",
        "Failed to pull image \"registry.example.com/shop/web:2.0\": rpc error: code = NotFound desc = failed to pull and unpack image \"registry.example.com/shop/web:2.0\": failed to resolve image: registry.example.com/shop/web:2.0: not found",
    ),
    (
        "containerd",
        "rpc error: code = Unknown desc = failed to pull and unpack image \"docker.io/acme/doesnotexist:1.0\": failed to resolve reference \"docker.io/acme/doesnotexist:1.0\": pull access denied, repository does not exist or may require authorization: server message: insufficient_scope: authorization failed",
    ),
    (
        "CRI-O",
        "rpc error: code = Unknown desc = initializing source docker://nginx:notfound: reading manifest notfound in docker.io/library/nginx: manifest unknown",
    ),
    (
        "CRI-O",
        "rpc error: code = Unknown desc = Error reading manifest latest in registry.example.com/team/app: manifest unknown: manifest unknown",
    ),
    (
        "CRI-O",
        "rpc error: code = Unknown desc = reading manifest latest in docker.io/acme/doesnotexist: requested access to the resource is denied",
    ),
    (
        "Docker",
        "rpc error: code = Unknown desc = Error response from daemon: pull access denied for acme/doesnotexist, repository does not exist or may require 'docker login': denied: requested access to the resource is denied",
    ),
    (
        "Docker",
        "rpc error: code = Unknown desc = Error response from daemon: manifest for nginx:notfound not found: manifest unknown: manifest unknown",
    ),
];

/// Failures a registry or the network recovers from, and the back-off without a cause.
const TRANSIENT: &[&str] = &[
    "rpc error: code = Unknown desc = failed to pull and unpack image \"docker.io/library/nginx:1.27\": failed to resolve reference \"docker.io/library/nginx:1.27\": failed to do request: Head \"https://registry-1.docker.io/v2/library/nginx/manifests/1.27\": dial tcp: lookup registry-1.docker.io on 10.96.0.10:53: read udp 10.244.0.5:43210->10.96.0.10:53: i/o timeout",
    "rpc error: code = Unknown desc = failed to pull and unpack image \"docker.io/library/nginx:1.27\": failed to copy: httpReadSeeker: failed open: unexpected status code https://registry-1.docker.io/v2/library/nginx/manifests/sha256:6784fb0834aa7dbbe12e3d7471e69c290df3e6ba810dc38b34ae33d3c1c05f7d: 429 Too Many Requests - Server message: toomanyrequests: You have reached your pull rate limit. You may increase the limit by authenticating and upgrading: https://www.docker.com/increase-rate-limit",
    "rpc error: code = Unknown desc = failed to pull and unpack image \"registry.internal:5000/web:2\": failed to resolve reference \"registry.internal:5000/web:2\": failed to do request: Head \"https://registry.internal:5000/v2/web/manifests/2\": dial tcp 10.0.0.9:5000: connect: connection refused",
    "rpc error: code = DeadlineExceeded desc = failed to pull and unpack image \"registry.internal/web:2\": failed to copy: httpReadSeeker: failed open: failed to do request: Get \"https://registry.internal/v2/web/blobs/sha256:0d1e2f\": context deadline exceeded",
    "Back-off pulling image \"nginx:1.27\"",
    "Back-off pulling image \"nginx:1.27\": ErrImagePull: rpc error: code = Unknown desc = failed to pull and unpack image \"docker.io/library/nginx:1.27\": failed to resolve reference \"docker.io/library/nginx:1.27\": failed to do request: Head \"https://registry-1.docker.io/v2/library/nginx/manifests/1.27\": net/http: TLS handshake timeout",
    "image pull failed for registry.internal/web:2 because the registry is unavailable",
    "rpc error: code = Unknown desc = pinging container registry registry.internal: Get \"https://registry.internal/v2/\": dial tcp: lookup registry.internal: no such host",
    "rpc error: code = Unknown desc = failed to pull and unpack image \"registry.internal/web:2\": failed to resolve reference \"registry.internal/web:2\": failed to authorize: failed to fetch oauth token: unexpected status from GET request to https://auth.internal/token: 503 Service Unavailable",
];

#[test]
fn each_runtimes_not_found_wording_is_recognised_as_its_own() {
    for (runtime, message) in NOT_FOUND {
        let found = image_not_found(message).map(|p| p.runtime);
        assert_eq!(found, Some(*runtime), "{message}");
    }
}

#[test]
fn transient_pull_failures_match_no_pattern() {
    for message in TRANSIENT {
        assert_eq!(image_not_found(message), None, "{message}");
    }
}

fn pulling(pod: &str, reason: &str, message: &str) -> Value {
    json!({
        "metadata": {"name": pod},
        "status": {"phase": "Pending", "containerStatuses": [{
            "name": "web", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": reason, "message": message}}}]}
    })
}

fn observe(judge: &mut Judge, at: u64, pods: &[Value], events: &[Value]) -> Option<Hopeless> {
    judge.observe(secs(at), &explain(&json!({}), pods, events))
}

#[test]
fn an_image_that_does_not_exist_stops_on_the_second_observation_not_the_first() {
    for (runtime, message) in NOT_FOUND {
        let mut judge = Judge::default();
        let pods = [pulling("web-a", "ErrImagePull", message)];
        assert_eq!(observe(&mut judge, 1, &pods, &[]), None, "{message}");
        let verdict = observe(&mut judge, 3, &pods, &[]);
        assert!(
            matches!(&verdict, Some(Hopeless::ImageNotFound { runtime: r, container, .. })
                if r == runtime && container == "web"),
            "{verdict:?}"
        );
    }
}

#[test]
fn the_two_observations_may_see_different_pods_of_the_same_container() {
    let (_, message) = NOT_FOUND[0];
    let mut judge = Judge::default();
    assert_eq!(
        observe(
            &mut judge,
            1,
            &[pulling("web-a", "ErrImagePull", message)],
            &[]
        ),
        None
    );
    assert!(
        observe(
            &mut judge,
            2,
            &[pulling("web-b", "ImagePullBackOff", message)],
            &[]
        )
        .is_some()
    );
}

#[test]
fn a_transient_back_off_never_stops_however_long_it_lasts() {
    for message in TRANSIENT {
        let mut judge = Judge::default();
        for at in 0..200 {
            for reason in ["ErrImagePull", "ImagePullBackOff"] {
                let pods = [pulling("web-a", reason, message)];
                assert_eq!(observe(&mut judge, at, &pods, &[]), None, "{message}");
            }
        }
    }
}

#[test]
fn before_kubernetes_1_32_the_back_off_is_read_with_the_pods_failed_event() {
    let pods = [fixture("pod-image-pull-backoff-before-1.32")];
    let events = match fixture("events-image-not-found")
        .get_mut("items")
        .map(Value::take)
    {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    };
    // Without the event, `Back-off pulling image "nginx:notfound"` says nothing.
    let mut judge = Judge::default();
    for at in 0..5 {
        assert_eq!(observe(&mut judge, at, &pods, &[]), None);
    }
    let mut judge = Judge::default();
    assert_eq!(observe(&mut judge, 1, &pods, &events), None);
    let verdict = observe(&mut judge, 2, &pods, &events);
    assert!(
        matches!(&verdict, Some(Hopeless::ImageNotFound { runtime: "containerd", pod, message, .. })
            if pod == "web-7d9c5b8f4-x2kqz" && message.starts_with("Failed to pull image \"nginx:notfound\"")),
        "{verdict:?}"
    );
    assert_eq!(
        verdict.map(|v| v.to_string()).as_deref(),
        Some(
            "the image of container web (pod web-7d9c5b8f4-x2kqz) cannot be pulled: the registry has no such repository or tag (containerd's wording, seen twice)"
        )
    );
}

#[test]
fn the_recorded_pull_failures_stop_on_their_second_observation() {
    for name in ["pod-err-image-pull", "pod-image-pull-backoff"] {
        let pods = [fixture(name)];
        let mut judge = Judge::default();
        assert_eq!(observe(&mut judge, 1, &pods, &[]), None, "{name}");
        assert!(observe(&mut judge, 2, &pods, &[]).is_some(), "{name}");
    }
}

#[test]
fn a_not_found_event_counts_only_while_the_container_still_fails_to_pull() {
    let (_, message) = NOT_FOUND[0];
    let event = PodEvent {
        pod: "web-a".into(),
        container: Some("web".into()),
        reason: "Failed".into(),
        message: format!("Failed to pull image \"nginx:x\": {message}"),
        count: 1,
    };
    let mut creating = explain(
        &json!({}),
        &[pulling("web-a", "ContainerCreating", "")],
        &[],
    );
    creating.events = vec![event];
    let mut judge = Judge::default();
    for at in 0..5 {
        assert_eq!(judge.observe(secs(at), &creating), None);
    }
}

#[test]
fn an_invalid_image_name_stops_at_once() {
    let pods = [pulling(
        "web-a",
        "InvalidImageName",
        "Failed to apply default image tag \"nginx:1.27:bad\": couldn't parse image name \"nginx:1.27:bad\": invalid reference format",
    )];
    let verdict = observe(&mut Judge::default(), 0, &pods, &[]);
    assert!(
        matches!(&verdict, Some(Hopeless::InvalidImageName { container, .. }) if container == "web"),
        "{verdict:?}"
    );
}

#[test]
fn a_configuration_error_stops_once_it_has_persisted_for_the_grace_period() {
    let pods = [fixture("pod-config-error")];
    let mut judge = Judge::default();
    assert_eq!(observe(&mut judge, 3, &pods, &[]), None);
    assert_eq!(observe(&mut judge, 12, &pods, &[]), None);
    let verdict = observe(&mut judge, 13, &pods, &[]);
    assert_eq!(
        verdict,
        Some(Hopeless::ConfigError {
            pod: "web-7d9c5b8f4-q8w3e".into(),
            container: "web".into(),
            message: "secret \"db-creds\" not found".into(),
            seconds: 10,
        })
    );
    assert_eq!(
        verdict.map(|v| v.to_string()).as_deref(),
        Some(
            "container web (pod web-7d9c5b8f4-q8w3e) could not be configured for 10 s: secret \"db-creds\" not found"
        )
    );
    // The caller's grace.
    let mut judge = Judge::default().with_config_error_grace(secs(30));
    assert_eq!(observe(&mut judge, 0, &pods, &[]), None);
    assert_eq!(observe(&mut judge, 29, &pods, &[]), None);
    assert!(observe(&mut judge, 30, &pods, &[]).is_some());
}

#[test]
fn a_configuration_error_that_goes_away_starts_over() {
    let pods = [fixture("pod-config-error")];
    let mut judge = Judge::default();
    assert_eq!(observe(&mut judge, 0, &pods, &[]), None);
    assert_eq!(
        observe(
            &mut judge,
            5,
            &[pulling("web-7d9c5b8f4-q8w3e", "ContainerCreating", "")],
            &[]
        ),
        None
    );
    assert_eq!(observe(&mut judge, 12, &pods, &[]), None);
    assert!(observe(&mut judge, 22, &pods, &[]).is_some());
}

#[test]
fn a_kubelet_still_syncing_its_cache_is_waited_for() {
    let pods = [pulling(
        "web-a",
        "CreateContainerConfigError",
        "failed to sync secret cache: timed out waiting for the condition",
    )];
    let mut judge = Judge::default();
    for at in (0..600).step_by(5) {
        assert_eq!(observe(&mut judge, at, &pods, &[]), None);
    }
    assert!(is_cache_sync(
        "failed to sync configmap cache: timed out waiting for the condition"
    ));
    assert!(!is_cache_sync("configmap \"app\" not found"));
}

fn crashing(restarts: i64) -> Value {
    json!({
        "metadata": {"name": "web-a"},
        "status": {"phase": "Running", "containerStatuses": [{
            "name": "web", "ready": false, "restartCount": restarts,
            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s restarting failed container=web"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}]}
    })
}

#[test]
fn a_crash_loop_stops_at_the_callers_restart_count() {
    let mut judge = Judge::default();
    assert_eq!(observe(&mut judge, 0, &[crashing(1)], &[]), None);
    assert_eq!(observe(&mut judge, 1, &[crashing(2)], &[]), None);
    let verdict = observe(&mut judge, 2, &[crashing(3)], &[]);
    assert_eq!(
        verdict.as_ref().map(ToString::to_string).as_deref(),
        Some("container web (pod web-a) keeps crashing: 3 restarts, last Error, exit 1")
    );
    let mut patient = Judge::new(5);
    assert_eq!(observe(&mut patient, 0, &[crashing(4)], &[]), None);
    assert!(observe(&mut patient, 1, &[crashing(5)], &[]).is_some());
    // The recorded OOM kill, at 4 restarts.
    assert!(matches!(
        observe(
            &mut Judge::default(),
            0,
            &[fixture("pod-crash-loop-oom")],
            &[]
        ),
        Some(Hopeless::CrashLoop {
            restarts: 4,
            exit_code: Some(137),
            ..
        })
    ));
}

#[test]
fn unschedulable_pods_and_exceeded_quotas_are_waited_for_however_long() {
    let pods = [fixture("pod-unschedulable")];
    let events = match fixture("events-unschedulable")
        .get_mut("items")
        .map(Value::take)
    {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    };
    let quota = fixture("deployment-quota");
    let mut judge = Judge::default();
    for at in (0..7200).step_by(10) {
        let e = explain(&quota, &pods, &events);
        assert!(e.replica_failure.is_some() && !e.pods.is_empty());
        assert_eq!(judge.observe(secs(at), &e), None);
    }
}

#[test]
fn reasons_that_cannot_be_read_decide_nothing() {
    let mut judge = Judge::default();
    for at in 0..10 {
        assert_eq!(
            judge.observe(secs(at), &Explanation::unreadable("forbidden")),
            None
        );
    }
}

#[test]
fn pods_read_without_their_events_are_judged_by_themselves() {
    let mut e = explain(&json!({}), &[crashing(3)], &[]);
    e.unreadable = Some("events forbidden".into());
    assert!(matches!(
        Judge::default().observe(secs(0), &e),
        Some(Hopeless::CrashLoop { .. })
    ));
}

#[test]
fn the_verdict_is_data_too() {
    let (_, message) = NOT_FOUND[0];
    let pods = [pulling("web-a", "ErrImagePull", message)];
    let mut judge = Judge::default();
    let _ = observe(&mut judge, 1, &pods, &[]);
    let verdict = observe(&mut judge, 2, &pods, &[]);
    assert_eq!(
        serde_json::to_value(&verdict).unwrap_or_default(),
        json!({"rule": "imageNotFound", "pod": "web-a", "container": "web", "message": message,
               "runtime": "containerd", "meaning": "the registry has no such repository or tag"})
    );
    let crash = Hopeless::CrashLoop {
        pod: "web-a".into(),
        container: "web".into(),
        restarts: 3,
        exit_code: None,
        last_reason: None,
    };
    assert_eq!(
        serde_json::to_value(&crash).unwrap_or_default(),
        json!({"rule": "crashLoop", "pod": "web-a", "container": "web", "restarts": 3})
    );
}

#[test]
fn a_verdict_escapes_cluster_text() {
    let pods = [pulling(
        "web-\u{1b}]0;x\u{7}",
        "InvalidImageName",
        "bad\nname\u{1b}[2J",
    )];
    let verdict = observe(&mut Judge::default(), 0, &pods, &[]).map(|v| v.to_string());
    assert_eq!(
        verdict.as_deref(),
        Some("the image name of container web (pod web-\\e]0;x\\x07) is invalid: bad name\\e[2J")
    );
}
