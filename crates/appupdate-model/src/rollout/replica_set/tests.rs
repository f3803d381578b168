use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;
use crate::rollout::fixture;

#[test]
fn a_selector_is_written_as_kubectl_writes_it() {
    let selector = json!({
        "matchLabels": {"app": "web", "tier": "front"},
        "matchExpressions": [
            {"key": "track", "operator": "In", "values": ["stable", "canary"]},
            {"key": "env", "operator": "NotIn", "values": ["test"]},
            {"key": "owner", "operator": "Exists"},
            {"key": "legacy", "operator": "DoesNotExist", "values": []}
        ]
    });
    assert_eq!(
        label_selector(Some(&selector)),
        Ok("app=web,env notin (test),!legacy,owner,tier=front,track in (canary,stable)".into())
    );
    assert_eq!(
        label_selector(Some(&json!({"matchLabels": {"app": "web"}}))),
        Ok("app=web".into())
    );
}

#[test]
fn a_selector_that_would_select_everything_or_cannot_be_written_is_an_error() {
    assert_eq!(label_selector(None), Err(SelectorError::Missing));
    assert_eq!(
        label_selector(Some(&Value::Null)),
        Err(SelectorError::Missing)
    );
    assert_eq!(label_selector(Some(&json!({}))), Err(SelectorError::Empty));
    assert_eq!(
        label_selector(Some(&json!({"matchLabels": {}, "matchExpressions": []}))),
        Err(SelectorError::Empty)
    );
    assert_eq!(
        label_selector(Some(
            &json!({"matchExpressions": [{"key": "a", "operator": "Gt"}]})
        )),
        Err(SelectorError::UnknownOperator("Gt".into()))
    );
    assert_eq!(
        label_selector(Some(
            &json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]})
        )),
        Err(SelectorError::NoValues {
            key: "a".into(),
            op: "In".into()
        })
    );
    let err = label_selector(Some(&json!({"matchLabels": {"a\u{1b}[2J": 1}})));
    assert_eq!(
        err.map_err(|e| e.to_string()),
        Err("the selector's matchLabels.a\\e[2J is not a string".into())
    );
}

const DEPLOYMENT_UID: &str = "d3e4f5a6-b7c8-4d9e-8f0a-1b2c3d4e5f60";

/// A ReplicaSet of the fixture Deployment: its template with `image` and `hash`, owned by
/// `owner`, created at `created`, at `revision`.
fn replica_set(
    name: &str,
    hash: &str,
    image: &str,
    revision: &str,
    created: &str,
    owner: &str,
) -> Value {
    let mut template = fixture("deployment-quota")["spec"]["template"].clone();
    template["metadata"]["labels"]["pod-template-hash"] = json!(hash);
    template["spec"]["containers"][0]["image"] = json!(image);
    json!({
        "metadata": {
            "name": name, "uid": format!("uid-{name}"), "creationTimestamp": created,
            "labels": {"app": "web", "pod-template-hash": hash},
            "annotations": {"deployment.kubernetes.io/revision": revision},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                 "uid": owner, "controller": true}]
        },
        "spec": {"selector": {"matchLabels": {"app": "web", "pod-template-hash": hash}},
                 "template": template}
    })
}

fn name(rs: Option<&Value>) -> Option<&str> {
    rs.and_then(|rs| rs["metadata"]["name"].as_str())
}

#[test]
fn the_new_replica_set_is_the_one_at_the_deployments_revision() {
    let deployment = fixture("deployment-quota");
    let sets = [
        replica_set(
            "web-old",
            "5f6d7c8b9",
            "nginx:1.25",
            "1",
            "2025-06-02T09:00:00Z",
            DEPLOYMENT_UID,
        ),
        // Same revision, but another Deployment's (a selector that overlaps).
        replica_set(
            "other-2",
            "1a2b3c4d5",
            "nginx:1.27",
            "2",
            "2025-06-02T09:14:00Z",
            "uid-of-other",
        ),
        replica_set(
            "web-new",
            "7d9c5b8f4",
            "nginx:1.26",
            "2",
            "2025-06-02T09:14:03Z",
            DEPLOYMENT_UID,
        ),
    ];
    // The revision wins over the images (here they differ on purpose).
    assert_eq!(name(new_replica_set(&deployment, &sets)), Some("web-new"));
}

#[test]
fn before_the_controller_observed_the_deployment_its_template_decides() {
    let mut deployment = fixture("deployment-quota");
    // A new generation the controller has not seen: its revision is still the old one's.
    deployment["metadata"]["generation"] = json!(3);
    deployment["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = json!("1");
    let sets = [
        replica_set(
            "web-old",
            "5f6d7c8b9",
            "nginx:1.25",
            "1",
            "2025-06-02T09:00:00Z",
            DEPLOYMENT_UID,
        ),
        replica_set(
            "web-new",
            "7d9c5b8f4",
            "nginx:1.27",
            "2",
            "2025-06-02T09:14:03Z",
            DEPLOYMENT_UID,
        ),
    ];
    assert_eq!(name(new_replica_set(&deployment, &sets)), Some("web-new"));
    // Nothing created for it yet: no new ReplicaSet, rather than the old one.
    assert_eq!(name(new_replica_set(&deployment, &sets[..1])), None);
}

#[test]
fn without_an_exact_template_the_newest_with_the_deployments_images_is_taken() {
    let mut deployment = fixture("deployment-quota");
    deployment["metadata"]["annotations"] = json!({});
    let mut a = replica_set(
        "web-a",
        "aaaa",
        "nginx:1.27",
        "",
        "2025-06-02T09:10:00Z",
        DEPLOYMENT_UID,
    );
    let mut b = replica_set(
        "web-b",
        "bbbb",
        "nginx:1.27",
        "",
        "2025-06-02T09:12:00Z",
        DEPLOYMENT_UID,
    );
    let c = replica_set(
        "web-c",
        "cccc",
        "nginx:1.28",
        "",
        "2025-06-02T09:13:00Z",
        DEPLOYMENT_UID,
    );
    // Templates that differ from the Deployment's by more than the hash.
    a["spec"]["template"]["metadata"]["annotations"] = json!({"x": "1"});
    b["spec"]["template"]["metadata"]["annotations"] = json!({"x": "2"});
    assert_eq!(
        name(new_replica_set(
            &deployment,
            &[b.clone(), a.clone(), c.clone()]
        )),
        Some("web-b")
    );
    // Not owned by this Deployment: never.
    b["metadata"]["ownerReferences"][0]["uid"] = json!("uid-of-other");
    assert_eq!(name(new_replica_set(&deployment, &[b, c])), None);
}

#[test]
fn the_pods_of_the_new_replica_set_are_selected_by_its_hash() {
    let deployment = fixture("deployment-quota");
    let rs = replica_set(
        "web-new",
        "7d9c5b8f4",
        "nginx:1.27",
        "2",
        "",
        DEPLOYMENT_UID,
    );
    assert_eq!(
        pod_selector(&deployment, &rs),
        Ok("app=web,pod-template-hash=7d9c5b8f4".into())
    );
    // A hash that is not one: the ReplicaSet's own selector.
    let mut odd = rs.clone();
    odd["metadata"]["labels"]["pod-template-hash"] = json!("a,b=c");
    odd["spec"]["selector"]["matchLabels"]["pod-template-hash"] = json!("xyz");
    assert_eq!(
        pod_selector(&deployment, &odd),
        Ok("app=web,pod-template-hash=xyz".into())
    );
}

#[test]
fn field_selector_values_are_escaped_as_the_api_server_reads_them() {
    assert_eq!(
        escape_field_value("web-7d9c5b8f4-x2kqz"),
        "web-7d9c5b8f4-x2kqz"
    );
    assert!(matches!(escape_field_value("web"), Cow::Borrowed(_)));
    assert_eq!(escape_field_value(r"a\b,c=d"), r"a\\b\,c\=d");
    assert_eq!(
        event_field_selector("web-7d9c5b8f4-x2kqz"),
        "involvedObject.kind=Pod,involvedObject.name=web-7d9c5b8f4-x2kqz"
    );
    assert_eq!(
        event_field_selector("x,type=Normal"),
        r"involvedObject.kind=Pod,involvedObject.name=x\,type\=Normal"
    );
}

#[test]
fn ownership_is_by_uid() {
    let rs = replica_set("web-new", "h", "nginx", "1", "", DEPLOYMENT_UID);
    assert!(owned_by(&rs, DEPLOYMENT_UID));
    assert!(!owned_by(&rs, "uid-of-other"));
    assert!(!owned_by(&json!({"metadata": {}}), DEPLOYMENT_UID));
}
