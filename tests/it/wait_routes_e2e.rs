//! `--wait` following the routes a run wrote, against the sandbox. A test thread plays the
//! routing layer: a Gateway controller that writes each HTTPRoute's `status.parents` through the
//! status subresource (`PATCH …/httproutes/NAME/status`, as a real controller does), or an
//! Ingress controller that gives Ingresses an address (`…/ingresses/NAME/status`). Accepted
//! routes end the wait with 0; a `ResolvedRefs=False` ends it at once with 7 and the controller's
//! reason and message; routes nobody takes up time out with 7 naming them; deleted routes are not
//! waited for.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::*;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use serde_json::{Value, json};

const PUBLIC: &str = "web-e3b0c44298fc1c14"; // scopes []
const USER: &str = "web-04f8996da763b7a9"; // scopes [user]

const ENDPOINTS: &str = "endpoints:
  - path: /health
  - path: /unprotected
  - path: /protected/user
    scopes: [user]
";

const GATEWAY: [&str; 6] = [
    "--routes",
    "gateway",
    "--gateway",
    "gateways/public",
    "--auth-service",
    "auth/oauth:8080",
];

/// What the playing controller writes.
#[derive(Clone)]
enum Verdict {
    /// HTTPRoutes: `Accepted=True`, `ResolvedRefs=True` for the current generation.
    Accept,
    /// HTTPRoutes: `Accepted=True`, `ResolvedRefs=False` with this reason and message.
    Unresolved { reason: String, message: String },
    /// Ingresses: this IP in `status.loadBalancer.ingress`.
    Address(String),
}

/// A controller on a thread of its own: every 50 ms it lists the application's objects and
/// writes its verdict to the status of each one not yet reported on at its generation, through
/// the status subresource. Stops when dropped.
struct Controller {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Controller {
    fn start(env: &Env, verdict: Verdict) -> Controller {
        let stop = Arc::new(AtomicBool::new(false));
        let kubeconfig = std::fs::read_to_string(&env.kubeconfig).unwrap();
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(play(kubeconfig, verdict, stopping));
        });
        Controller {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn play(kubeconfig: String, verdict: Verdict, stop: Arc<AtomicBool>) {
    let config = kube::config::Kubeconfig::from_yaml(&kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(config, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let resource = match verdict {
        Verdict::Address(_) => ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("networking.k8s.io", "v1", "Ingress"),
            "ingresses",
        ),
        _ => ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "HTTPRoute"),
            "httproutes",
        ),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client, NS, &resource);
    let mut reported: Vec<(String, i64)> = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        if let Ok(list) = api.list(&ListParams::default().labels("app=web")).await {
            for obj in list.items {
                let obj = serde_json::to_value(&obj).unwrap();
                let name = obj["metadata"]["name"].as_str().unwrap().to_owned();
                let generation = obj["metadata"]["generation"].as_i64().unwrap_or(0);
                if reported.contains(&(name.clone(), generation)) {
                    continue;
                }
                let status = status_of(&obj, &verdict, generation);
                let patched = api
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                    .await;
                if patched.is_ok() {
                    reported.push((name, generation));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The status patch a controller would send for `obj`.
fn status_of(obj: &Value, verdict: &Verdict, generation: i64) -> Value {
    let condition = |kind: &str, status: &str, reason: &str, message: &str| {
        json!({"type": kind, "status": status, "reason": reason, "message": message,
               "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": generation})
    };
    let conditions = match verdict {
        Verdict::Address(ip) => {
            return json!({"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}});
        }
        Verdict::Accept => vec![
            condition("Accepted", "True", "Accepted", "Accepted by the test"),
            condition("ResolvedRefs", "True", "ResolvedRefs", "Resolved"),
        ],
        Verdict::Unresolved { reason, message } => vec![
            condition("Accepted", "True", "Accepted", "Accepted by the test"),
            condition("ResolvedRefs", "False", reason, message),
        ],
    };
    let parents: Vec<Value> = obj["spec"]["parentRefs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|parent| {
            json!({"parentRef": parent, "controllerName": "example.com/test-gateway",
                   "conditions": conditions})
        })
        .collect();
    json!({"status": {"parents": parents}})
}

/// The sandbox's demo app without its managed Ingresses (the unmanaged one stays).
fn unexposed() -> Env {
    let env = Env::new();
    for name in [PUBLIC, USER] {
        env.sb.delete(&ingress_path(name)).unwrap();
    }
    env
}

fn httproute_path(name: &str) -> String {
    format!("/apis/gateway.networking.k8s.io/v1/namespaces/{NS}/httproutes/{name}")
}

/// `web --endpoints ENDPOINTS --routes gateway … --yes --wait --timeout TIMEOUT`.
fn expose_through_the_gateway(env: &Env, timeout: &str) -> std::process::Output {
    let file = env.write_file("endpoints.yaml", ENDPOINTS);
    let mut args = vec!["web", "--endpoints", file.to_str().unwrap()];
    args.extend(GATEWAY);
    args.extend(["--yes", "--wait", "--timeout", timeout]);
    env.run(&args)
}

/// The follower's requests (its list by name, and the watch when the list did not already show
/// the end), as `path?query`. A route its controller took up before the follower's list is
/// never watched: the list alone ends its wait.
fn follows(env: &Env) -> Vec<String> {
    env.sb
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.query.contains("fieldSelector=metadata.name="))
        .map(|r| format!("{}?{}", r.path, r.query))
        .collect()
}

#[test]
fn routes_accepted_by_their_gateway_end_the_wait_with_0() {
    let env = unexposed();
    let _gateway = Controller::start(&env, Verdict::Accept);
    let o = expose_through_the_gateway(&env, "60s");
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(
        out.contains(&format!(
            "httproute.gateway.networking.k8s.io/{PUBLIC} created"
        )),
        "{out}"
    );
    let err = stderr(&o);
    for name in [PUBLIC, USER] {
        assert!(
            err.contains(&format!(
                "httproute.gateway.networking.k8s.io/{name} accepted by Gateway gateways/public\n"
            )),
            "{err}"
        );
        // The wait ended on what the cluster holds.
        let route = env.sb.get(&httproute_path(name)).unwrap();
        assert_eq!(
            route["status"]["parents"][0]["conditions"][1]["status"], "True",
            "{route}"
        );
    }
    // Plain lines only, on stderr: nothing but the wait's lines.
    for line in err.lines() {
        assert!(
            line.starts_with("Waiting for httproute.gateway.networking.k8s.io/")
                || line.ends_with(" accepted by Gateway gateways/public"),
            "unexpected stderr line {line:?}"
        );
    }
    // Each route is followed on its own; no --image, so no rollout is followed.
    let watched = follows(&env);
    for name in [PUBLIC, USER] {
        assert!(
            watched
                .iter()
                .any(|w| w.starts_with(&format!(
                    "/apis/gateway.networking.k8s.io/v1/namespaces/{NS}/httproutes?"
                )) && w.contains(&format!("fieldSelector=metadata.name={name}"))),
            "{watched:?}"
        );
    }
    assert!(
        !watched.iter().any(|w| w.contains("/deployments")),
        "{watched:?}"
    );
}

#[test]
fn a_backend_the_gateway_cannot_resolve_fails_the_wait_with_7_and_its_reason() {
    let env = unexposed();
    let _gateway = Controller::start(
        &env,
        Verdict::Unresolved {
            reason: "BackendNotFound".into(),
            message: "Service \"web\" not found\u{1b}]0;owned\u{7}".into(),
        },
    );
    // A long timeout: the refusal ends the wait, not the clock.
    let o = expose_through_the_gateway(&env, "5m");
    assert_code(&o, 7);
    // The writes landed and were reported as done.
    assert!(
        stdout(&o).contains(&format!(
            "httproute.gateway.networking.k8s.io/{USER} created"
        )),
        "{}",
        stdout(&o)
    );
    assert!(env.sb.get(&httproute_path(PUBLIC)).is_some());
    assert!(env.sb.get(&httproute_path(USER)).is_some());
    let err = stderr(&o);
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: httproute.gateway.networking.k8s.io/web-"),
        "{err}"
    );
    assert!(
        last.contains(
            " in namespace \"shop\" (context \"sandbox\") was refused: Gateway gateways/public set \
             ResolvedRefs=False (BackendNotFound: \"Service \\\"web\\\" not found\\e]0;owned\\x07\"); \
             the changes were applied but it does not serve them: fix what it says, or undo them with \
             kubectl appupdate web -n shop --context sandbox --undo"
        ),
        "{err}"
    );
    // The controller's message never reaches the terminal raw, and is said once.
    assert!(!err.contains('\u{1b}'), "{err:?}");
    assert_eq!(err.matches("BackendNotFound").count(), 1, "{err}");
}

#[test]
fn routes_nobody_takes_up_time_out_with_7_naming_each_one() {
    let env = unexposed();
    let o = expose_through_the_gateway(&env, "2s");
    assert_code(&o, 7);
    let err = stderr(&o);
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: timed out after 2s waiting for "),
        "{err}"
    );
    for name in [PUBLIC, USER] {
        assert!(
            last.contains(&format!(
                "httproute.gateway.networking.k8s.io/{name} (Gateway gateways/public has not reported on it yet)"
            )),
            "{err}"
        );
    }
    assert!(
        last.contains(
            "in namespace \"shop\" (context \"sandbox\"); the changes were applied and may still be taken up"
        ),
        "{err}"
    );
    assert!(
        last.ends_with("or undo them with kubectl appupdate web -n shop --context sandbox --undo"),
        "{err}"
    );
    assert!(env.sb.get(&httproute_path(PUBLIC)).is_some());

    // Once a controller takes them up, a re-run (nothing to write) waits for them again and
    // succeeds.
    let _gateway = Controller::start(&env, Verdict::Accept);
    let o = expose_through_the_gateway(&env, "60s");
    assert_code(&o, 0);
    assert!(stdout(&o).contains("No changes."), "{}", stdout(&o));
    assert!(
        stderr(&o).contains(&format!(
            "httproute.gateway.networking.k8s.io/{USER} accepted by Gateway gateways/public"
        )),
        "{}",
        stderr(&o)
    );
}

#[test]
fn an_ingress_given_an_address_ends_the_wait_and_a_deleted_one_is_not_waited_for() {
    let env = Env::new();
    let _ingress_controller = Controller::start(&env, Verdict::Address("203.0.113.7".into()));
    // Moves /protected/user to the public group: the public Ingress is updated, the user
    // Ingress deleted.
    let file = env.write_file("endpoints.yaml", running::DROP_USER);
    let o = env.run(&[
        "web",
        "--endpoints",
        file.to_str().unwrap(),
        "--yes",
        "--wait",
        "--timeout",
        "60s",
    ]);
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(
        out.contains(&format!("ingress.networking.k8s.io/{USER} deleted")),
        "{out}"
    );
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "ingress.networking.k8s.io/{PUBLIC} has an address: 203.0.113.7\n"
        )),
        "{err}"
    );
    assert!(
        !err.contains(USER),
        "the deleted Ingress was waited for: {err}"
    );
    assert!(env.sb.get(&ingress_path(USER)).is_none());
    assert_eq!(
        env.sb.get(&ingress_path(PUBLIC)).unwrap()["status"]["loadBalancer"]["ingress"][0]["ip"],
        "203.0.113.7"
    );
}

#[test]
fn an_ingress_without_an_address_times_out_naming_it() {
    let env = Env::new();
    let file = env.write_file("endpoints.yaml", running::DROP_USER);
    let o = env.run(&[
        "web",
        "--endpoints",
        file.to_str().unwrap(),
        "--yes",
        "--wait",
        "--timeout",
        "2s",
    ]);
    assert_code(&o, 7);
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "error: timed out after 2s waiting for ingress.networking.k8s.io/{PUBLIC} (no address from its Ingress controller yet)"
        )),
        "{err}"
    );
}

/// In a terminal, each route gets a spinner on stderr while it waits, and the run ends with
/// each route's line once the spinners are cleared.
#[test]
fn on_a_terminal_each_route_waits_on_a_spinner() {
    let env = unexposed();
    let file = env.write_file("endpoints.yaml", ENDPOINTS);
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("kubectl-appupdate"));
    scrub(&mut cmd);
    cmd.env("TERM", "xterm-256color");
    cmd.arg("--kubeconfig")
        .arg(&env.kubeconfig)
        .args(["web", "--endpoints", file.to_str().unwrap()])
        .args(GATEWAY)
        .args(["--yes", "--wait", "--color", "never"]);
    let mut p = rexpect::session::spawn_command(cmd, Some(60_000)).expect("spawned in a pty");
    p.exp_string(&format!(
        "httproute.gateway.networking.k8s.io/{USER} created"
    ))
    .unwrap();
    p.exp_string(&format!(
        "httproute.gateway.networking.k8s.io/{USER} Gateway gateways/public has not reported on it yet"
    ))
    .unwrap();
    // The controller comes once the spinners show.
    let _gateway = Controller::start(&env, Verdict::Accept);
    p.exp_string(&format!(
        "httproute.gateway.networking.k8s.io/{USER} accepted by Gateway gateways/public"
    ))
    .unwrap();
    p.exp_eof().unwrap();
    match p.process().wait().expect("process ends") {
        rexpect::process::WaitStatus::Exited(_, code) => assert_eq!(code, 0),
        other => panic!("unexpected end: {other:?}"),
    }
}
