//! The requests [`Cluster::rollout_evidence`] sends, and what it makes of the answers, against
//! a stand-in for the API server that answers each path from a table and records what it was
//! asked.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::*;
use crate::kube_context::Connection;

fn fixture(name: &str) -> Value {
    let text = match name {
        "pod-err-image-pull" => include_str!(
            "../../../appupdate-model/tests/data/rollout-failures/pod-err-image-pull.json"
        ),
        "events-image-not-found" => include_str!(
            "../../../appupdate-model/tests/data/rollout-failures/events-image-not-found.json"
        ),
        "deployment-quota" => include_str!(
            "../../../appupdate-model/tests/data/rollout-failures/deployment-quota.json"
        ),
        other => panic!("no fixture {other}"),
    };
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

const RS_UID: &str = "5f0c2a61-3d3e-4c55-9b7e-0f6a1d2c4e01";
const DEPLOYMENT_UID: &str = "d3e4f5a6-b7c8-4d9e-8f0a-1b2c3d4e5f60";

fn replica_set(name: &str, uid: &str, hash: &str, revision: &str) -> Value {
    json!({
        "metadata": {
            "name": name, "uid": uid, "creationTimestamp": "2025-06-02T09:14:03Z",
            "labels": {"app": "web", "pod-template-hash": hash},
            "annotations": {"deployment.kubernetes.io/revision": revision},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                 "uid": DEPLOYMENT_UID, "controller": true}],
            "managedFields": [{"manager": "kube-controller-manager"}]
        },
        "spec": {"selector": {"matchLabels": {"app": "web", "pod-template-hash": hash}}},
        "status": {"replicas": 1}
    })
}

fn list(items: Vec<Value>) -> (u16, Value) {
    (
        200,
        json!({"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items}),
    )
}

fn forbidden(resource: &str) -> (u16, Value) {
    (
        403,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": format!("{resource} is forbidden: User \"system:serviceaccount:shop:deployer\" cannot list resource \"{resource}\" in API group \"\" in the namespace \"shop\""),
               "reason": "Forbidden", "details": {"kind": resource}, "code": 403}),
    )
}

/// A cluster in namespace `shop` whose server answers each path (without its query) from
/// `answers` (404 for any other), and the requests it got: `METHOD path?query`.
fn serving(answers: BTreeMap<&'static str, (u16, Value)>) -> (Cluster, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let answers = Arc::new(answers);
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let uri = req.uri().clone();
        // Decoded, without the empty pair kube's request builder starts with (`?&`).
        let query = uri.query().map(|q| {
            q.split('&')
                .filter(|pair| !pair.is_empty())
                .map(|pair| {
                    percent_encoding::percent_decode_str(&pair.replace('+', " "))
                        .decode_utf8_lossy()
                        .into_owned()
                })
                .collect::<Vec<_>>()
                .join("&")
        });
        if let Ok(mut seen) = log.lock() {
            seen.push(match &query {
                Some(q) => format!("{} {}?{q}", req.method(), uri.path()),
                None => format!("{} {}", req.method(), uri.path()),
            });
        }
        let (status, body) = answers.get(uri.path()).cloned().unwrap_or((
            404,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404, "message": "not found"}),
        ));
        async move {
            Ok::<_, Infallible>(
                http::Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(kube::client::Body::from(body.to_string().into_bytes()))
                    .expect("a response"),
            )
        }
    });
    let conn = Connection {
        client: kube::Client::new(service, "shop").into(),
        namespace: "shop".into(),
        context: "prod".into(),
        server: "https://k8s.example:6443".into(),
        request_timeout: None,
        proxy: None,
        user: None,
        as_user: None,
        sessions: crate::connections::Sessions::detached(),
    };
    (Cluster::new(conn, None), seen)
}

const REPLICA_SETS: &str = "/apis/apps/v1/namespaces/shop/replicasets";
const PODS: &str = "/api/v1/namespaces/shop/pods";
const EVENTS: &str = "/api/v1/namespaces/shop/events";

fn other_rs_pod() -> Value {
    let mut pod = fixture("pod-err-image-pull");
    pod["metadata"]["name"] = json!("web-5f6d7c8b9-aaaaa");
    pod["metadata"]["ownerReferences"][0]["uid"] = json!("uid-of-the-old-replica-set");
    pod
}

fn answers() -> BTreeMap<&'static str, (u16, Value)> {
    let events = fixture("events-image-not-found")["items"].clone();
    BTreeMap::from([
        (
            REPLICA_SETS,
            list(vec![
                replica_set(
                    "web-5f6d7c8b9",
                    "uid-of-the-old-replica-set",
                    "5f6d7c8b9",
                    "1",
                ),
                replica_set("web-7d9c5b8f4", RS_UID, "7d9c5b8f4", "2"),
            ]),
        ),
        (
            PODS,
            list(vec![fixture("pod-err-image-pull"), other_rs_pod()]),
        ),
        (EVENTS, list(events.as_array().cloned().unwrap_or_default())),
    ])
}

#[tokio::test]
async fn the_new_replica_sets_pods_and_the_named_pods_events_are_read_with_their_selectors() {
    let (cluster, seen) = serving(answers());
    let deployment = fixture("deployment-quota");
    let evidence = cluster.rollout_evidence(&deployment).await;
    let evidence = evidence.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        seen.lock().map(|s| s.clone()).unwrap_or_default(),
        vec![
            format!("GET {REPLICA_SETS}?labelSelector=app=web"),
            format!("GET {PODS}?labelSelector=app=web,pod-template-hash=7d9c5b8f4&limit=50"),
            format!(
                "GET {EVENTS}?fieldSelector=involvedObject.kind=Pod,involvedObject.name=web-7d9c5b8f4-x2kqz"
            ),
        ]
    );
    assert_eq!(
        evidence
            .replica_set
            .as_ref()
            .and_then(|rs| rs.pointer("/metadata/name")),
        Some(&json!("web-7d9c5b8f4"))
    );
    assert_eq!(
        evidence
            .replica_set
            .as_ref()
            .and_then(|rs| rs.pointer("/metadata/managedFields")),
        None,
        "listed objects are read without their managedFields"
    );
    // The old ReplicaSet's pod, listed by a selector it also matches, is not the new one's.
    assert_eq!(evidence.pods.len(), 1);
    assert!(!evidence.events_forbidden);
    let lines = evidence.explain(&deployment).lines();
    assert!(
        lines[0].starts_with("pod web-7d9c5b8f4-x2kqz container web: ErrImagePull: rpc error"),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with(
            "event Failed (x3) on web-7d9c5b8f4-x2kqz: Failed to pull image \"nginx:notfound\""
        )),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("deployment: ReplicaFailure FailedCreate")),
        "{lines:?}"
    );
}

#[tokio::test]
async fn no_new_replica_set_yet_means_no_pods_and_no_further_requests() {
    let mut answers = answers();
    answers.insert(
        REPLICA_SETS,
        list(vec![replica_set(
            "web-5f6d7c8b9",
            "uid-of-the-old-replica-set",
            "5f6d7c8b9",
            "1",
        )]),
    );
    let (cluster, seen) = serving(answers);
    let mut deployment = fixture("deployment-quota");
    // Another image than the old ReplicaSet's, not observed yet.
    deployment["metadata"]["generation"] = json!(3);
    deployment["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = json!("1");
    let evidence = cluster.rollout_evidence(&deployment).await;
    assert_eq!(evidence.ok(), Some(Evidence::default()));
    assert_eq!(seen.lock().map(|s| s.len()).unwrap_or_default(), 1);
}

#[tokio::test]
async fn an_account_that_may_not_list_pods_gets_reasons_not_readable_forbidden() {
    let mut answers = answers();
    answers.insert(PODS, forbidden("pods"));
    let (cluster, _) = serving(answers);
    let err = cluster
        .rollout_evidence(&fixture("deployment-quota"))
        .await
        .err();
    let err = err.unwrap_or_else(|| panic!("pods were readable"));
    assert!(err.is_forbidden());
    assert!(
        err.to_string()
            .starts_with("forbidden: you cannot list pods in namespace \"shop\" (context \"prod\"): pods is forbidden"),
        "{err}"
    );
    assert_eq!(
        err.explanation().lines(),
        vec!["reasons not readable: forbidden"]
    );
    // ReplicaSets the same.
    let mut answers = self::answers();
    answers.insert(REPLICA_SETS, forbidden("replicasets"));
    let (cluster, seen) = serving(answers);
    let err = cluster.rollout_evidence(&fixture("deployment-quota")).await;
    assert!(err.is_err_and(|e| e.is_forbidden()));
    assert_eq!(seen.lock().map(|s| s.len()).unwrap_or_default(), 1);
}

#[tokio::test]
async fn forbidden_events_leave_the_pods_reasons_and_say_so() {
    let mut answers = answers();
    answers.insert(EVENTS, forbidden("events"));
    let (cluster, _) = serving(answers);
    let deployment = fixture("deployment-quota");
    let evidence = cluster.rollout_evidence(&deployment).await;
    let evidence = evidence.unwrap_or_else(|e| panic!("{e}"));
    assert!(evidence.events_forbidden && evidence.events.is_empty());
    let e = evidence.explain(&deployment);
    assert_eq!(e.pods.len(), 1);
    assert_eq!(
        e.lines().last().map(String::as_str),
        Some("reasons not readable: events forbidden")
    );
}

#[tokio::test]
async fn another_failure_is_a_request_error_in_the_users_words() {
    let mut answers = answers();
    answers.insert(
        PODS,
        (
            500,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "InternalError",
                   "code": 500, "message": "etcdserver: request timed out\u{1b}[2J"}),
        ),
    );
    let (cluster, _) = serving(answers);
    let err = cluster
        .rollout_evidence(&fixture("deployment-quota"))
        .await
        .err();
    let err = err.unwrap_or_else(|| panic!("pods were readable"));
    assert!(!err.is_forbidden());
    assert_eq!(
        err.to_string(),
        "cannot list pods in namespace \"shop\" (context \"prod\"): the cluster answered 500 InternalError: etcdserver: request timed out\\e[2J"
    );
}

#[tokio::test]
async fn a_deployment_without_a_selector_sends_nothing() {
    let (cluster, seen) = serving(answers());
    let err = cluster
        .rollout_evidence(&json!({"metadata": {"name": "web"}}))
        .await;
    assert!(matches!(
        err,
        Err(EvidenceError::Selector(SelectorError::Missing))
    ));
    assert_eq!(seen.lock().map(|s| s.len()).unwrap_or_default(), 0);
}
