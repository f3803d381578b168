//! Deployment rollout simulation: status advancing (watched), stuck, progress deadline, off.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{Conn, admin, request, send_json};
use sandbox_apiserver::{Rollout, Sandbox, SandboxOptions};
use serde_json::{Value, json};

const WEB: &str = "/apis/apps/v1/namespaces/demo/deployments/web";

fn demo(rollout: Rollout) -> Sandbox {
    let sb = Sandbox::start(SandboxOptions {
        rollout,
        ..Default::default()
    })
    .unwrap();
    sb.seed_demo_app("demo", "web").unwrap();
    sb
}

fn wait_for(sb: &Sandbox, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let d = sb.get(WEB).unwrap();
        if pred(&d) {
            return d;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {}",
            d["status"]
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until the rollout simulation has nothing left to do (every change considered, no
/// status write pending), so that what a test then reads is final, however long the
/// controller would have taken — instead of sleeping a fixed time and hoping.
fn wait_until_settled(sb: &Sandbox) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sb.rollout_settled() {
        assert!(
            Instant::now() < deadline,
            "the rollout simulation did not settle: {}",
            sb.get(WEB).unwrap()["status"]
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn condition<'a>(d: &'a Value, ty: &str) -> &'a Value {
    d["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == ty))
        .unwrap_or(&Value::Null)
}

fn set_image(sb: &Sandbox, image: &str) -> Value {
    let p =
        json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}});
    send_json(
        sb,
        "PATCH",
        WEB,
        "application/strategic-merge-patch+json",
        &p,
    )
    .json()
}

#[test]
fn auto_rollout_advances_status_in_two_steps_seen_by_a_watch() {
    let sb = demo(Rollout::Auto {
        delay: Duration::from_millis(400),
    });
    let first = wait_for(&sb, "the initial rollout", |d| {
        condition(d, "Progressing")["reason"] == "NewReplicaSetAvailable"
    });
    assert_eq!(first["status"]["availableReplicas"], json!(2));
    let rv = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut conn = Conn::open(&sb);
    conn.send(
        Some(&admin(&sb)),
        "GET",
        &format!("/apis/apps/v1/namespaces/demo/deployments?watch=true&fieldSelector=metadata.name%3Dweb&resourceVersion={rv}"),
        &[],
        None,
    );
    let (_, headers) = conn.read_head(Duration::from_secs(5)).unwrap();
    let patched = set_image(&sb, "registry.example.com/web:2.0");
    assert_eq!(patched["metadata"]["generation"], json!(2));
    assert_eq!(
        patched["status"]["observedGeneration"],
        json!(1),
        "the write itself leaves status alone"
    );
    let mut body = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let events = loop {
        body.extend(conn.read_body(&headers, Duration::from_millis(100)));
        let events: Vec<Value> = String::from_utf8_lossy(&body)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if events.len() >= 3 || Instant::now() > deadline {
            break events;
        }
    };
    assert_eq!(events.len(), 3, "spec change, progressing, complete");
    assert!(events.iter().all(|e| e["type"] == "MODIFIED"));
    let mid = &events[1]["object"];
    assert_eq!(mid["status"]["observedGeneration"], json!(2));
    assert_eq!(
        condition(mid, "Progressing")["reason"],
        json!("ReplicaSetUpdated")
    );
    assert!(mid["status"]["updatedReplicas"].as_i64().unwrap() < 2);
    let done = &events[2]["object"];
    for f in [
        "replicas",
        "updatedReplicas",
        "readyReplicas",
        "availableReplicas",
    ] {
        assert_eq!(done["status"][f], json!(2), "{f}");
    }
    assert_eq!(condition(done, "Available")["status"], json!("True"));
    assert_eq!(
        condition(done, "Progressing")["reason"],
        json!("NewReplicaSetAvailable")
    );
    let mf = done["metadata"]["managedFields"].as_array().unwrap();
    let controller = mf
        .iter()
        .find(|e| e["manager"] == "kube-controller-manager")
        .unwrap();
    assert_eq!(controller["subresource"], json!("status"));
    assert!(controller["fieldsV1"].get("f:status").is_some());
    let rvs: Vec<u64> = events
        .iter()
        .map(|e| {
            e["object"]["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert!(
        rvs.windows(2).all(|w| w[0] < w[1]),
        "status writes bump the resourceVersion"
    );
}

#[test]
fn a_stuck_rollout_observes_the_generation_but_never_completes() {
    let sb = demo(Rollout::Stuck);
    set_image(&sb, "registry.example.com/web:2.0");
    let d = wait_for(&sb, "observedGeneration", |d| {
        d["status"]["observedGeneration"] == json!(2)
    });
    // Once the controller has nothing left to do, whatever it was going to write is written.
    wait_until_settled(&sb);
    let d2 = sb.get(WEB).unwrap();
    assert_eq!(d["status"], d2["status"], "no further progress");
    assert!(d2["status"]["updatedReplicas"].as_i64().unwrap_or(0) < 2);
    assert!(d2["status"]["availableReplicas"].as_i64().unwrap_or(0) < 2);
    assert_eq!(condition(&d2, "Progressing")["status"], json!("True"));
}

#[test]
fn progress_deadline_exceeded_reports_progressing_false() {
    let sb = demo(Rollout::ProgressDeadlineExceeded);
    set_image(&sb, "registry.example.com/web:3.0");
    let d = wait_for(&sb, "the deadline", |d| {
        d["status"]["observedGeneration"] == json!(2)
            && condition(d, "Progressing")["reason"] == "ProgressDeadlineExceeded"
    });
    assert_eq!(condition(&d, "Progressing")["status"], json!("False"));
    assert_eq!(d["status"]["observedGeneration"], json!(2));
}

#[test]
fn off_leaves_status_untouched_like_a_cluster_without_controllers() {
    let sb = demo(Rollout::Off);
    set_image(&sb, "registry.example.com/web:2.0");
    wait_until_settled(&sb);
    assert_eq!(sb.get(WEB).unwrap()["status"], json!({}));
    assert_eq!(
        sb.get("/apis/autoscaling/v2/namespaces/demo/horizontalpodautoscalers/web")
            .unwrap()["status"],
        json!({"desiredReplicas": 0, "currentMetrics": null}),
        "HPA status is left alone"
    );
    // Switching the mode on at run time picks up existing Deployments.
    sb.set_rollout(Rollout::Auto {
        delay: Duration::from_millis(100),
    });
    wait_for(&sb, "the rollout after switching", |d| {
        d["status"]["updatedReplicas"] == json!(2)
    });
}

#[test]
fn the_control_surface_switches_the_rollout_mode() {
    let sb = demo(Rollout::Off);
    let t = admin(&sb);
    let body = serde_json::to_vec(&json!({"mode": "auto", "delayMs": 100})).unwrap();
    let r = request(
        &sb,
        Some(&t),
        "PUT",
        "/sandbox/rollout",
        &[("Content-Type", "application/json")],
        Some(&body),
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        request(&sb, Some(&t), "GET", "/sandbox/rollout", &[], None).json(),
        json!({"mode": "auto", "delayMs": 100})
    );
    wait_for(&sb, "the rollout", |d| {
        condition(d, "Available")["status"] == "True"
    });
}
