//! Each fault kind, through the handle and through the `/sandbox/faults` control surface.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{Conn, admin, get, request, send_json};
use sandbox_apiserver::{Fault, Identity, Sandbox, SandboxOptions, Trigger};
use serde_json::json;

const WEB: &str = "/apis/apps/v1/namespaces/demo/deployments/web";
const HPA: &str = "/apis/autoscaling/v2/namespaces/demo/horizontalpodautoscalers/web";

fn demo() -> Sandbox {
    let sb = Sandbox::start(SandboxOptions::default()).unwrap();
    sb.seed_demo_app("demo", "web").unwrap();
    sb
}

fn put_current(sb: &Sandbox, path: &str, dry_run: bool) -> common::Resp {
    let mut obj = sb.get(path).unwrap();
    obj["spec"]["maxReplicas"] = json!(9);
    let p = if dry_run {
        format!("{path}?dryRun=All")
    } else {
        path.to_string()
    };
    send_json(sb, "PUT", &p, "application/json", &obj)
}

#[test]
fn conflicts_answer_the_next_writes_to_the_object_with_409() {
    let sb = demo();
    sb.inject(Fault::Conflicts {
        object_path: HPA.into(),
        count: 2,
    });
    // Not a write to that object: unaffected.
    assert_eq!(get(&sb, HPA).status, 200);
    let r = put_current(&sb, HPA, true);
    assert_eq!(r.status, 409, "dry runs count");
    assert_eq!(
        r.json()["message"],
        json!(
            "Operation cannot be fulfilled on horizontalpodautoscalers.autoscaling \"web\": the object has been modified; please apply your changes to the latest version and try again"
        )
    );
    assert_eq!(
        r.json()["details"],
        json!({"name": "web", "group": "autoscaling", "kind": "horizontalpodautoscalers"})
    );
    let r = send_json(
        &sb,
        "PATCH",
        HPA,
        "application/merge-patch+json",
        &json!({"spec": {"minReplicas": 3}}),
    );
    assert_eq!(r.status, 409);
    assert_eq!(
        put_current(&sb, HPA, false).status,
        200,
        "consumed after two"
    );
    let log = sb.requests();
    assert_eq!(
        log.iter()
            .filter(|r| r.fault.as_deref() == Some("conflict"))
            .count(),
        2
    );
    assert_eq!(sb.counters().conflicts, 2);
    // Checks before the precondition stage still win: a missing object is 404, not 409.
    sb.inject(Fault::Conflicts {
        object_path: format!("{HPA}-missing"),
        count: 1,
    });
    let r = send_json(
        &sb,
        "PATCH",
        &format!("{HPA}-missing"),
        "application/merge-patch+json",
        &json!({}),
    );
    assert_eq!(r.status, 404);
}

#[test]
fn status_faults_use_the_reason_kube_uses_for_the_code() {
    let sb = demo();
    sb.inject(Fault::Status {
        method: Some("GET".into()),
        path_prefix: "/apis/apps/v1".into(),
        status: 503,
        count: 1,
    });
    sb.inject(Fault::Status {
        method: Some("PUT".into()),
        path_prefix: "/apis/apps/".into(),
        status: 500,
        count: 1,
    });
    sb.inject(Fault::Status {
        method: None,
        path_prefix: HPA.into(),
        status: 429,
        count: 1,
    });
    sb.inject(Fault::Status {
        method: None,
        path_prefix: "/api/v1/namespaces/demo/services".into(),
        status: 403,
        count: 1,
    });
    let r = get(&sb, WEB);
    assert_eq!(
        (r.status, r.json()["reason"].clone()),
        (503, json!("ServiceUnavailable"))
    );
    assert_eq!(get(&sb, WEB).status, 200, "consumed");
    let obj = sb.get(WEB).unwrap();
    let r = send_json(&sb, "PUT", WEB, "application/json", &obj);
    assert_eq!(
        (r.status, r.json()["reason"].clone()),
        (500, json!("InternalError"))
    );
    assert_eq!(
        r.json()["message"],
        json!("Internal error occurred: injected fault")
    );
    let r = get(&sb, HPA);
    assert_eq!(r.status, 429);
    assert_eq!(r.header("Retry-After"), Some("1"));
    assert_eq!(r.text(), "Too many requests, please try again later.\n");
    let r = get(&sb, "/api/v1/namespaces/demo/services/web");
    assert_eq!(r.status, 403);
    assert_eq!(
        r.json()["message"],
        json!(
            "services \"web\" is forbidden: User \"admin\" cannot get resource \"services\" in API group \"\" in the namespace \"demo\""
        )
    );
    assert_eq!(
        sb.requests()
            .iter()
            .filter(|r| r.fault.as_deref() == Some("status"))
            .count(),
        4
    );
    assert_eq!(sb.counters().faults, 4);
}

#[test]
fn latency_delays_every_request_until_turned_off() {
    let sb = demo();
    sb.inject(Fault::Latency(Duration::from_millis(300)));
    let t = Instant::now();
    assert_eq!(get(&sb, WEB).status, 200);
    assert!(t.elapsed() >= Duration::from_millis(300));
    assert!(sb.requests()[0].duration_ms >= 300.0);
    sb.inject(Fault::Latency(Duration::ZERO));
    get(&sb, WEB);
    assert_eq!(sb.requests()[1].fault, None);
}

#[test]
fn a_competing_writer_after_our_read_makes_our_update_conflict() {
    let sb = demo();
    sb.inject(Fault::CompetingWrite {
        object_path: WEB.into(),
        after: Trigger::Read,
        mutate: Box::new(|d| d["metadata"]["annotations"] = json!({"other": "writer"})),
    });
    let read = get(&sb, WEB).json();
    let now = sb.get(WEB).unwrap();
    assert_ne!(
        read["metadata"]["resourceVersion"], now["metadata"]["resourceVersion"],
        "modified right after our GET"
    );
    assert_eq!(now["metadata"]["annotations"]["other"], json!("writer"));
    let mut mine = read.clone();
    mine["spec"]["template"]["spec"]["containers"][0]["image"] =
        json!("registry.example.com/web:2.0");
    assert_eq!(
        send_json(&sb, "PUT", WEB, "application/json", &mine).status,
        409
    );
    assert_eq!(sb.requests()[0].fault.as_deref(), Some("competing-write"));
}

#[test]
fn a_competing_writer_before_our_next_write() {
    let sb = demo();
    let read = get(&sb, WEB).json();
    sb.inject(Fault::CompetingWrite {
        object_path: WEB.into(),
        after: Trigger::NextWrite,
        mutate: Box::new(|d| d["spec"]["replicas"] = json!(7)),
    });
    let r = send_json(&sb, "PUT", WEB, "application/json", &read);
    assert_eq!(r.status, 409);
    assert_eq!(sb.get(WEB).unwrap()["spec"]["replicas"], json!(7));
    // A patch without resourceVersion applies on top of the competitor's change.
    sb.inject(Fault::CompetingWrite {
        object_path: WEB.into(),
        after: Trigger::NextWrite,
        mutate: Box::new(|d| d["metadata"]["labels"]["seen"] = json!("yes")),
    });
    let r = send_json(
        &sb,
        "PATCH",
        WEB,
        "application/merge-patch+json",
        &json!({"spec": {"replicas": 3}}),
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["metadata"]["labels"]["seen"], json!("yes"));
}

const ING: &str = "/apis/networking.k8s.io/v1/namespaces/demo/ingresses";
const PUBLIC_ING: &str =
    "/apis/networking.k8s.io/v1/namespaces/demo/ingresses/web-e3b0c44298fc1c14";

#[test]
fn a_failed_competing_write_is_marked_and_makes_the_handle_panic() {
    let sb = demo();
    // The object does not exist: the competitor cannot write it.
    sb.inject(Fault::CompetingWrite {
        object_path: format!("{WEB}-gone"),
        after: Trigger::NextWrite,
        mutate: Box::new(|d| d["metadata"]["labels"]["x"] = json!("y")),
    });
    // A mutation that changes nothing is a failure too.
    sb.inject(Fault::CompetingWrite {
        object_path: WEB.into(),
        after: Trigger::Read,
        mutate: Box::new(|_| {}),
    });
    let r = send_json(
        &sb,
        "PATCH",
        &format!("{WEB}-gone"),
        "application/merge-patch+json",
        &json!({"spec": {"replicas": 3}}),
    );
    assert_eq!(r.status, 404);
    assert_eq!(get(&sb, WEB).status, 200);
    let marks: Vec<_> = sb.requests().into_iter().map(|r| r.fault).collect();
    assert_eq!(
        marks,
        vec![
            Some("competing-write-failed".to_owned()),
            Some("competing-write-failed".to_owned())
        ]
    );
    assert_eq!(sb.competing_write_failures().len(), 2);
    assert!(sb.competing_write_failures()[1].contains("changed nothing"));
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(sb)));
    assert!(dropped.is_err(), "dropping the handle panics");
}

#[test]
fn a_competing_delete_and_a_recreate_at_the_next_write() {
    let sb = demo();
    let before = sb.get(PUBLIC_ING).unwrap();
    sb.inject(Fault::CompetingRecreate {
        object_path: PUBLIC_ING.into(),
        after: Trigger::NextWrite,
        mutate: None,
    });
    let uid = before["metadata"]["uid"].as_str().unwrap();
    let rv = before["metadata"]["resourceVersion"].as_str().unwrap();
    let del = json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": uid, "resourceVersion": rv}});
    let r = send_json(&sb, "DELETE", PUBLIC_ING, "application/json", &del);
    assert_eq!(r.status, 409, "the uid precondition fails: {:?}", r.json());
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("UID in the precondition")
    );
    let now = sb.get(PUBLIC_ING).unwrap();
    assert_ne!(
        now["metadata"]["uid"], before["metadata"]["uid"],
        "a new incarnation"
    );
    assert_eq!(now["metadata"]["labels"], before["metadata"]["labels"]);
    assert_eq!(now["spec"], before["spec"]);
    assert_eq!(
        sb.requests()[0].fault.as_deref(),
        Some("competing-recreate")
    );

    sb.inject(Fault::CompetingDelete {
        object_path: PUBLIC_ING.into(),
        after: Trigger::NextWrite,
    });
    let r = send_json(
        &sb,
        "PATCH",
        PUBLIC_ING,
        "application/merge-patch+json",
        &json!({"metadata": {"labels": {"x": "y"}}}),
    );
    assert_eq!(r.status, 404);
    assert!(sb.get(PUBLIC_ING).is_none());
    assert_eq!(sb.requests()[1].fault.as_deref(), Some("competing-delete"));
    assert!(sb.competing_write_failures().is_empty());
}

#[test]
fn next_real_write_skips_dry_runs_and_a_competing_create_meets_our_post() {
    let sb = demo();
    let name = "web-competitor";
    let body = json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"rules": [{"http": {"paths": [{"path": "/web/x", "pathType": "Prefix",
            "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}
    });
    sb.inject(Fault::CompetingCreate {
        object_path: format!("{ING}/{name}"),
        after: Trigger::NextRealWrite,
        body: json!({"metadata": {"labels": {"owner": "someone-else"}}, "spec": body["spec"].clone()}),
    });
    let r = send_json(
        &sb,
        "POST",
        &format!("{ING}?dryRun=All"),
        "application/json",
        &body,
    );
    assert_eq!(r.status, 201, "the dry run does not trigger it");
    assert!(sb.get(&format!("{ING}/{name}")).is_none());
    let r = send_json(&sb, "POST", ING, "application/json", &body);
    assert_eq!(r.status, 409);
    assert_eq!(r.json()["reason"], json!("AlreadyExists"));
    let live = sb.get(&format!("{ING}/{name}")).unwrap();
    assert_eq!(live["metadata"]["labels"], json!({"owner": "someone-else"}));
    let marks: Vec<_> = sb.requests().into_iter().map(|r| r.fault).collect();
    assert_eq!(marks, vec![None, Some("competing-create".to_owned())]);
}

#[test]
fn competing_writers_through_the_control_surface() {
    let sb = demo();
    let tok = admin(&sb);
    for fault in [
        json!({"type": "competingDelete", "objectPath": HPA, "after": "nextRealWrite"}),
        json!({"type": "competingRecreate", "objectPath": WEB, "after": "read", "mergePatch": {"metadata": {"labels": {"gen": "2"}}}}),
    ] {
        let r = request(
            &sb,
            Some(&tok),
            "POST",
            "/sandbox/faults",
            &[("Content-Type", "application/json")],
            Some(fault.to_string().as_bytes()),
        );
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    }
    let old_uid = sb.get(WEB).unwrap()["metadata"]["uid"].clone();
    assert_eq!(get(&sb, WEB).status, 200);
    let now = sb.get(WEB).unwrap();
    assert_ne!(now["metadata"]["uid"], old_uid);
    assert_eq!(now["metadata"]["labels"]["gen"], json!("2"));
    let r = put_current(&sb, HPA, false);
    assert_eq!(r.status, 404);
    assert!(sb.get(HPA).is_none());
}

#[test]
fn restrict_targets_real_writes_or_dry_runs_and_hold_waits_for_release() {
    let sb = demo();
    sb.inject(Fault::Restrict {
        dry_run: false,
        fault: Box::new(Fault::Status {
            method: Some("PUT".into()),
            path_prefix: HPA.into(),
            status: 500,
            count: 1,
        }),
    });
    assert_eq!(
        put_current(&sb, HPA, true).status,
        200,
        "the dry run passes"
    );
    assert_eq!(
        put_current(&sb, HPA, false).status,
        500,
        "the real write fails"
    );
    assert_eq!(put_current(&sb, HPA, false).status, 200, "consumed");

    sb.inject(Fault::Restrict {
        dry_run: false,
        fault: Box::new(Fault::Hold {
            method: None,
            path_prefix: HPA.into(),
            count: 1,
        }),
    });
    assert_eq!(put_current(&sb, HPA, true).status, 200, "dry run not held");
    let url_sb = std::sync::Arc::new(sb);
    let bg = url_sb.clone();
    let t = std::thread::spawn(move || {
        let mut obj = bg.get(HPA).unwrap();
        obj["spec"]["maxReplicas"] = json!(11);
        send_json(&bg, "PUT", HPA, "application/json", &obj).status
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while url_sb.held() == 0 {
        assert!(Instant::now() < deadline, "the write is held");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        url_sb.get(HPA).unwrap()["spec"]["maxReplicas"],
        json!(9),
        "not yet processed"
    );
    url_sb.release_held();
    assert_eq!(t.join().unwrap(), 200);
    assert_eq!(url_sb.held(), 0);
    assert_eq!(url_sb.get(HPA).unwrap()["spec"]["maxReplicas"], json!(11));
    let last = url_sb.requests().pop().unwrap();
    assert_eq!(last.fault.as_deref(), Some("hold"));
}

#[test]
fn dropped_connections_get_no_response_and_are_logged() {
    let sb = demo();
    sb.inject(Fault::DropConnection {
        method: Some("GET".into()),
        path_prefix: WEB.into(),
        count: 1,
    });
    let mut c = Conn::open(&sb);
    c.send(Some(&admin(&sb)), "GET", WEB, &[], None);
    assert!(
        c.read_head(Duration::from_secs(5)).is_none(),
        "no response at all"
    );
    assert_eq!(get(&sb, WEB).status, 200);
    let log = sb.requests();
    assert_eq!(
        (log[0].status, log[0].fault.as_deref()),
        (0, Some("drop-connection"))
    );
}

#[test]
fn drop_mid_response_applies_the_write_but_cuts_the_answer() {
    let sb = demo();
    sb.inject(Fault::DropMidResponse {
        method: Some("PATCH".into()),
        path_prefix: HPA.into(),
        count: 1,
    });
    let body = serde_json::to_vec(&json!({"spec": {"maxReplicas": 8}})).unwrap();
    let mut c = Conn::open(&sb);
    c.send(
        Some(&admin(&sb)),
        "PATCH",
        HPA,
        &[("Content-Type", "application/merge-patch+json")],
        Some(&body),
    );
    if let Some((status, headers)) = c.read_head(Duration::from_secs(5)) {
        assert_eq!(status, 200);
        let got = c.read_body(&headers, Duration::from_secs(2));
        assert!(
            serde_json::from_slice::<serde_json::Value>(&got).is_err(),
            "the body is cut"
        );
    }
    assert_eq!(
        sb.get(HPA).unwrap()["spec"]["maxReplicas"],
        json!(8),
        "the write happened"
    );
    assert_eq!(sb.requests()[0].fault.as_deref(), Some("drop-mid-response"));
}

#[test]
fn hung_requests_never_answer_while_others_are_served() {
    let sb = demo();
    sb.inject(Fault::Hang {
        path_prefix: "/apis/networking.k8s.io".into(),
        count: 1,
    });
    let mut c = Conn::open(&sb);
    c.send(
        Some(&admin(&sb)),
        "GET",
        "/apis/networking.k8s.io/v1/namespaces/demo/ingresses",
        &[],
        None,
    );
    assert!(c.read_head(Duration::from_millis(800)).is_none());
    assert_eq!(
        get(&sb, "/apis/networking.k8s.io/v1/namespaces/demo/ingresses").status,
        200
    );
    assert_eq!(sb.requests()[0].fault.as_deref(), Some("hang"));
    drop(sb); // shutting down releases the hung request
}

#[test]
fn the_control_surface_arms_lists_and_clears_faults() {
    let sb = demo();
    let t = admin(&sb);
    let post = |body: serde_json::Value| {
        request(
            &sb,
            Some(&t),
            "POST",
            "/sandbox/faults",
            &[("Content-Type", "application/json")],
            Some(&serde_json::to_vec(&body).unwrap()),
        )
    };
    assert_eq!(
        post(
            json!({"type": "status", "method": "GET", "pathPrefix": WEB, "status": 503, "count": 1})
        )
        .status,
        201
    );
    assert_eq!(post(json!([{"type": "conflicts", "objectPath": HPA, "count": 1}, {"type": "latency", "ms": 10}])).status, 201);
    assert_eq!(post(json!({"type": "competingWrite", "objectPath": WEB, "after": "read", "mergePatch": {"spec": {"replicas": 4}}})).status, 201);
    assert_eq!(post(json!({"type": "bogus"})).status, 400);
    let listed = request(&sb, Some(&t), "GET", "/sandbox/faults", &[], None).json();
    assert_eq!(listed.as_array().unwrap().len(), 4);
    assert_eq!(get(&sb, WEB).status, 503);
    assert_eq!(get(&sb, WEB).status, 200);
    assert_eq!(
        sb.get(WEB).unwrap()["spec"]["replicas"],
        json!(4),
        "competing write after the read"
    );
    assert_eq!(
        request(&sb, Some(&t), "DELETE", "/sandbox/faults", &[], None).status,
        200
    );
    assert_eq!(
        request(&sb, Some(&t), "GET", "/sandbox/faults", &[], None).json(),
        json!([])
    );
    assert_eq!(put_current(&sb, HPA, false).status, 200, "cleared");
    let counters = request(&sb, Some(&t), "GET", "/sandbox/counters", &[], None).json();
    assert!(counters["requests"].as_u64().unwrap() >= 3);
    let log = request(&sb, Some(&t), "GET", "/sandbox/requests?since=1", &[], None).json();
    assert!(
        log.as_array()
            .unwrap()
            .iter()
            .all(|e| e["seq"].as_u64().unwrap() > 1)
    );
    assert!(
        log.as_array()
            .unwrap()
            .iter()
            .all(|e| !e["path"].as_str().unwrap().starts_with("/sandbox")),
        "control calls are not logged"
    );
    assert_eq!(
        request(
            &sb,
            Some(&sb.token(Identity::ReadOnly)),
            "GET",
            "/sandbox/faults",
            &[],
            None
        )
        .status,
        403
    );
    assert_eq!(
        request(&sb, None, "GET", "/sandbox/faults", &[], None).status,
        401
    );
}
