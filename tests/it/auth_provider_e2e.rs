//! `--auth-provider envoy-gateway` end to end against the sandbox with Envoy Gateway's
//! SecurityPolicy CRD installed: a first exposure (the policy of a scoped group written, and
//! answered, before its HTTPRoute is sent), a re-run that reads the provider from what is live,
//! the migrations filter → envoy-gateway → filter in place, a scoped group removed (its route
//! before its policy), a saved plan applied, undo, a policy the cluster refuses (its route is
//! never written), racing writers on a policy (the guard), and the refusals before any write:
//! no CRD, no permission to list.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use sandbox_apiserver::{Fault, SandboxOptions, Trigger};
use serde_json::{Value, json};

const PUBLIC: &str = "web-e3b0c44298fc1c14"; // scopes []
const ADMIN: &str = "web-4f515e078b8f8861"; // scopes [admin, user]

const ENDPOINTS: &str = "endpoints:
  - path: /health
  - path: /protected/admin
    scopes: [user, admin]
";

const GATEWAY: [&str; 6] = [
    "--routes",
    "gateway",
    "--gateway",
    "gateways/public",
    "--auth-service",
    "auth/oauth:8080",
];

fn httproute_path(name: &str) -> String {
    format!("/apis/gateway.networking.k8s.io/v1/namespaces/{NS}/httproutes/{name}")
}

fn policies_path() -> String {
    format!("/apis/gateway.envoyproxy.io/v1alpha1/namespaces/{NS}/securitypolicies")
}

fn policy_path(name: &str) -> String {
    format!("{}/{name}", policies_path())
}

/// The demo application without its managed Ingresses, on a cluster with Envoy Gateway.
fn unexposed() -> Env {
    let env = Env::with_options(SandboxOptions {
        install_envoy_gateway: true,
        ..SandboxOptions::default()
    });
    for name in [PUBLIC, "web-04f8996da763b7a9"] {
        env.sb.delete(&ingress_path(name)).unwrap();
    }
    env
}

fn run(env: &Env, text: &str, extra: &[&str]) -> std::process::Output {
    let file = env.write_file("endpoints.yaml", text);
    let mut args = vec!["web", "--endpoints", file.to_str().unwrap()];
    args.extend_from_slice(extra);
    env.run(&args)
}

fn with(extra: &[&'static str]) -> Vec<&'static str> {
    let mut args = GATEWAY.to_vec();
    args.extend_from_slice(extra);
    args
}

/// `METHOD path` of each write to the application's routes and policies, in arrival order.
fn route_writes(env: &Env) -> Vec<String> {
    env.app_writes()
        .iter()
        .map(|w| format!("{} {}", w.method, w.path))
        .collect()
}

fn filter_types(route: &Value) -> Vec<String> {
    route["spec"]["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["filters"].as_array().into_iter().flatten())
        .map(|f| f["type"].as_str().unwrap().to_owned())
        .collect()
}

/// Exposes `ENDPOINTS` with the envoy-gateway provider.
fn exposed() -> Env {
    let env = unexposed();
    let o = run(
        &env,
        ENDPOINTS,
        &with(&["--auth-provider", "envoy-gateway", "--yes"]),
    );
    assert_code(&o, 0);
    env
}

#[test]
fn a_first_exposure_writes_each_policy_before_its_route_and_a_rerun_changes_nothing() {
    let env = unexposed();
    // Hold the policy's create: its route must not be sent while it is in flight, the public
    // route (nothing to guard) goes at once.
    env.sb.inject(Fault::Restrict {
        dry_run: false,
        fault: Box::new(Fault::Hold {
            method: Some("POST".into()),
            path_prefix: policies_path(),
            count: 1,
        }),
    });
    let file = env.write_file("endpoints.yaml", ENDPOINTS);
    let mut args = vec!["web", "--endpoints", file.to_str().unwrap()];
    args.extend(with(&["--auth-provider", "envoy-gateway", "--yes"]));
    let running = common::running::Running::start(&env, &args);
    let routes = format!("/apis/gateway.networking.k8s.io/v1/namespaces/{NS}/httproutes");
    common::running::wait_until("the policy held, the public route written", || {
        env.sb.held() == 1
            && env
                .app_writes()
                .iter()
                .any(|w| w.method == "POST" && w.path == routes && w.status == 201)
    });
    assert_eq!(
        env.app_writes().len(),
        1,
        "only the public route may be written while the policy is in flight: {:?}",
        route_writes(&env)
    );
    assert!(env.sb.get(&httproute_path(ADMIN)).is_none());
    env.sb.release_held();
    let (code, out, err) = running.finish();
    assert_eq!(code, 0, "--- stdout\n{out}\n--- stderr\n{err}");
    assert!(
        out.contains(&format!(
            "securitypolicy.gateway.envoyproxy.io/{ADMIN} created (guards httproute.gateway.networking.k8s.io/{ADMIN})"
        )),
        "{out}"
    );
    assert!(
        out.contains("Plan: 3 to create, 0 to update, 0 to delete."),
        "{out}"
    );

    // The policy's POST was answered before the scoped route's POST arrived.
    let log = env.app_writes();
    let policy = log
        .iter()
        .find(|w| w.method == "POST" && w.path == policies_path())
        .unwrap();
    let scoped = log
        .iter()
        .filter(|w| w.method == "POST" && w.path == routes)
        .nth(1)
        .unwrap_or_else(|| panic!("two route creates in {log:?}"));
    assert!(
        scoped.started_ms >= policy.started_ms + policy.duration_ms && scoped.seq > policy.seq,
        "{log:?}"
    );

    let p = env.sb.get(&policy_path(ADMIN)).unwrap();
    assert_eq!(
        p["metadata"]["labels"],
        json!({"app": "web", "identifier": "4f515e078b8f8861"})
    );
    assert_eq!(
        p["spec"],
        json!({
            "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": ADMIN}],
            "extAuth": {
                "failOpen": false,
                "http": {
                    "backendRefs": [{"group": "", "kind": "Service", "name": "oauth", "namespace": "auth", "port": 8080, "weight": 1}],
                    "path": "/scopes/YWRtaW4gdXNlcg",
                    "headersToBackend": ["User-Id", "User-Scopes"]
                }
            }
        })
    );
    for name in [ADMIN, PUBLIC] {
        let route = env.sb.get(&httproute_path(name)).unwrap();
        assert_eq!(filter_types(&route), ["URLRewrite"], "{name}");
    }
    assert_eq!(
        env.sb.list(&policies_path()).len(),
        1,
        "no policy for the public group"
    );

    // Without any route flag the style and the provider are read from what is live.
    let before = env.writes().len();
    let o = run(&env, ENDPOINTS, &["--yes"]);
    assert_code(&o, 0);
    assert!(stdout(&o).contains("No changes."), "{}", stdout(&o));
    assert_eq!(env.writes().len(), before);
}

#[test]
fn the_provider_moves_in_place_both_ways_never_leaving_a_scoped_route_unchecked() {
    let env = unexposed();
    let o = run(&env, ENDPOINTS, &with(&["--yes"]));
    assert_code(&o, 0);
    assert_eq!(
        filter_types(&env.sb.get(&httproute_path(ADMIN)).unwrap()),
        ["ExternalAuth", "URLRewrite"]
    );
    let uid = env.sb.get(&httproute_path(ADMIN)).unwrap()["metadata"]["uid"].clone();

    // filter → envoy-gateway: the policy is created, then the route drops its filter.
    let start = env.app_writes().len();
    let o = run(
        &env,
        ENDPOINTS,
        &["--auth-provider", "envoy-gateway", "--yes"],
    );
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(
        out.contains("Moving the scope checks of web's HTTPRoutes from the ExternalAuth filter to Envoy Gateway SecurityPolicies: each policy is created before its HTTPRoute drops the filter."),
        "{out}"
    );
    assert_eq!(
        route_writes(&env)[start..],
        [
            format!("POST {}", policies_path()),
            format!("PATCH {}", httproute_path(ADMIN)),
        ]
    );
    let route = env.sb.get(&httproute_path(ADMIN)).unwrap();
    assert_eq!(filter_types(&route), ["URLRewrite"]);
    assert_eq!(route["metadata"]["uid"], uid, "updated in place");
    // The auth Service came from the live filter.
    assert_eq!(
        env.sb.get(&policy_path(ADMIN)).unwrap()["spec"]["extAuth"]["http"]["backendRefs"][0]["name"],
        "oauth"
    );

    // envoy-gateway → filter: the route gets its filter back, then the policy goes.
    let start = env.app_writes().len();
    let o = run(&env, ENDPOINTS, &["--auth-provider", "filter", "--yes"]);
    assert_code(&o, 0);
    assert_eq!(
        route_writes(&env)[start..],
        [
            format!("PATCH {}", httproute_path(ADMIN)),
            format!("DELETE {}", policy_path(ADMIN)),
        ]
    );
    assert_eq!(
        filter_types(&env.sb.get(&httproute_path(ADMIN)).unwrap()),
        ["ExternalAuth", "URLRewrite"]
    );
    assert!(env.sb.list(&policies_path()).is_empty());
    let o = run(&env, ENDPOINTS, &["--yes"]);
    assert!(stdout(&o).contains("No changes."), "{}", stdout(&o));
}

#[test]
fn a_scoped_group_that_goes_loses_its_route_before_its_policy() {
    let env = exposed();
    let start = env.app_writes().len();
    let o = run(&env, "endpoints:\n  - path: /health\n", &["--yes"]);
    assert_code(&o, 0);
    let out = stdout(&o);
    // Listed as written: the route, then its policy.
    let route_at = out
        .find(&format!(
            "- httproute.gateway.networking.k8s.io/{ADMIN} will be deleted (scopes: admin user)"
        ))
        .unwrap_or_else(|| panic!("{out}"));
    let policy_at = out
        .find(&format!(
            "- securitypolicy.gateway.envoyproxy.io/{ADMIN} will be deleted"
        ))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(route_at < policy_at, "{out}");
    assert_eq!(
        route_writes(&env)[start..],
        [
            format!("DELETE {}", httproute_path(ADMIN)),
            format!("DELETE {}", policy_path(ADMIN)),
        ]
    );
    let log = env.app_writes();
    let (route, policy) = (&log[start], &log[start + 1]);
    assert!(
        policy.started_ms >= route.started_ms + route.duration_ms,
        "{log:?}"
    );
    assert!(env.sb.get(&httproute_path(ADMIN)).is_none());
    assert!(env.sb.list(&policies_path()).is_empty());
}

#[test]
fn a_policy_the_cluster_refuses_leaves_its_route_unwritten() {
    let env = unexposed();
    env.sb.inject(Fault::Restrict {
        dry_run: false,
        fault: Box::new(Fault::Status {
            method: Some("POST".into()),
            path_prefix: policies_path(),
            status: 500,
            count: 1,
        }),
    });
    let o = run(
        &env,
        ENDPOINTS,
        &with(&["--auth-provider", "envoy-gateway", "--yes"]),
    );
    assert_code(&o, 6);
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "httproute.gateway.networking.k8s.io/{ADMIN} NOT created: not attempted"
        )),
        "{err}"
    );
    assert!(env.sb.get(&httproute_path(ADMIN)).is_none());
    assert!(env.sb.list(&policies_path()).is_empty());
}

#[test]
fn a_saved_envoy_gateway_plan_applies_as_written_and_undo_restores_the_auth_service() {
    let env = exposed();
    let plan = env.dir.path().join("plan.json");
    let o = run(
        &env,
        ENDPOINTS,
        &[
            "--auth-service",
            "auth/oauth2:9090",
            "--dry-run",
            "--plan-out",
            plan.to_str().unwrap(),
        ],
    );
    assert_code(&o, 0);
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    let types: Vec<&str> = saved["content"]["clusters"][0]["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["updater"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["securitypolicy", "httproute", "httproute"]);
    assert_eq!(
        saved["content"]["clusters"][0]["routes"]["attachment"]["authProvider"],
        "envoy-gateway"
    );
    let start = env.app_writes().len();
    let o = env.run(&["apply", plan.to_str().unwrap(), "--yes"]);
    assert_code(&o, 0);
    assert_eq!(
        route_writes(&env)[start..],
        [format!("PATCH {}", policy_path(ADMIN))]
    );
    let backend = |env: &Env| {
        env.sb.get(&policy_path(ADMIN)).unwrap()["spec"]["extAuth"]["http"]["backendRefs"][0]
            .clone()
    };
    assert_eq!(backend(&env)["name"], "oauth2");
    assert_eq!(backend(&env)["port"], 9090);

    // Undo: the auth Service before, through the same provider.
    let o = env.run(&["web", "--undo", "--yes"]);
    assert_code(&o, 0);
    assert_eq!(backend(&env)["name"], "oauth");
    assert_eq!(
        filter_types(&env.sb.get(&httproute_path(ADMIN)).unwrap()),
        ["URLRewrite"]
    );
    // Undo of the first exposure removes the routes and the policy, route first.
    let o = env.run(&["web", "--to-revision", "1", "--yes"]);
    assert_code(&o, 0);
    assert!(env.sb.get(&httproute_path(ADMIN)).is_none());
    assert!(env.sb.list(&policies_path()).is_empty());
    let o = env.run(&["history", "web"]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("undo of revision 1: routes: 3 deleted"),
        "{}",
        stdout(&o)
    );
    // …and undoing that undo publishes the scoped path guarded again, not public.
    let o = env.run(&["web", "--undo", "--yes"]);
    assert_code(&o, 0);
    assert!(env.sb.get(&policy_path(ADMIN)).is_some());
    assert_eq!(
        env.sb.get(&httproute_path(ADMIN)).unwrap()["metadata"]["labels"]["identifier"],
        "4f515e078b8f8861"
    );
}

#[test]
fn a_saved_plan_that_drops_a_policy_is_refused_before_anything_is_sent() {
    let env = unexposed();
    let plan = env.dir.path().join("plan.json");
    let mut args = with(&[
        "--auth-provider",
        "envoy-gateway",
        "--dry-run",
        "--plan-out",
    ]);
    args.push(plan.to_str().unwrap());
    let o = run(&env, ENDPOINTS, &args);
    assert_code(&o, 0);
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    doc["content"]["clusters"][0]["objects"]
        .as_array_mut()
        .unwrap()
        .retain(|o| o["updater"]["type"] != "securitypolicy");
    // A checksum made again, as anyone can.
    reseal_plan(&mut doc);
    std::fs::write(&plan, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    env.sb.clear_requests();
    let o = env.run(&["apply", plan.to_str().unwrap(), "--yes"]);
    assert_code(&o, 3);
    assert_eq!(
        stderr(&o),
        format!(
            "error: {} was edited: httproute.gateway.networking.k8s.io/{ADMIN} serves paths with scopes without the ExternalAuth filter and without a SecurityPolicy of its name in the plan; a saved plan is applied only as kubectl-appupdate wrote it, so nothing was sent; make it again with --plan-out\n",
            plan.display()
        )
    );
    assert!(env.sb.requests().is_empty());
}

#[test]
fn without_the_security_policy_crd_envoy_gateway_is_refused_in_one_line_and_nothing_is_written() {
    let env = Env::new();
    for name in [PUBLIC, "web-04f8996da763b7a9"] {
        env.sb.delete(&ingress_path(name)).unwrap();
    }
    let o = run(
        &env,
        ENDPOINTS,
        &with(&["--auth-provider", "envoy-gateway", "--yes"]),
    );
    assert_code(&o, 3);
    assert_eq!(
        stderr(&o),
        "error: routes of web: the cluster does not serve gateway.envoyproxy.io/v1alpha1 SecurityPolicies, which the envoy-gateway auth provider writes to guard the paths with scopes; install Envoy Gateway (its CRDs), or choose --auth-provider filter\n"
    );
    assert_eq!(stdout(&o), "");
    assert!(env.writes().is_empty());
    // The filter provider works on the same cluster, and nothing about policies is said.
    let o = run(&env, ENDPOINTS, &with(&["--yes"]));
    assert_code(&o, 0);
    assert!(!stdout(&o).contains("SecurityPolic"), "{}", stdout(&o));
}

#[test]
fn a_user_who_may_not_list_policies_is_refused_before_any_write() {
    let env = unexposed();
    let o = env
        .cmd()
        .args(["--context", "sandbox-readonly", "web", "--endpoints"])
        .arg(env.write_file("endpoints.yaml", ENDPOINTS))
        // Without --routes: a forbidden HTTPRoute list is then only noted, and the policies'
        // is the run's failure.
        .args(["--auth-provider", "envoy-gateway", "--dry-run"])
        .output()
        .unwrap();
    assert_code(&o, 1);
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: forbidden: you cannot list securitypolicies.gateway.envoyproxy.io in namespace \"shop\""),
        "{err}"
    );
    assert!(env.writes().is_empty());
}

#[test]
fn the_flag_belongs_to_the_gateway_style() {
    let env = unexposed();
    let o = run(
        &env,
        ENDPOINTS,
        &["--routes", "nginx-auth", "--auth-provider", "envoy-gateway"],
    );
    assert_code(&o, 3);
    assert_eq!(
        stderr(&o),
        "error: --auth-provider applies to the gateway route style, not to --routes nginx-auth; drop --auth-provider\n"
    );
    let o = env.run(&["web", "--max", "3", "--auth-provider", "filter"]);
    assert_code(&o, 3);
    assert!(
        stderr(&o).contains("--auth-provider only applies with --endpoints FILE"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_competing_change_to_a_policys_auth_service_trips_the_guard() {
    let env = exposed();
    env.sb.inject(Fault::CompetingWrite {
        object_path: policy_path(ADMIN),
        after: Trigger::NextRealWrite,
        mutate: Box::new(|p| {
            p["spec"]["extAuth"]["http"]["backendRefs"][0]["name"] = json!("other-auth");
        }),
    });
    let o = run(
        &env,
        ENDPOINTS,
        &["--auth-service", "auth/oauth2:9090", "--yes"],
    );
    assert_code(&o, 5);
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "securitypolicy.gateway.envoyproxy.io/{ADMIN} NOT updated"
        )),
        "{err}"
    );
    assert!(err.contains("other-auth"), "the new diff is shown: {err}");
    // The competitor's value stands.
    assert_eq!(
        env.sb.get(&policy_path(ADMIN)).unwrap()["spec"]["extAuth"]["http"]["backendRefs"][0]["name"],
        "other-auth"
    );
}

#[test]
fn a_competing_change_outside_the_owned_fields_of_a_policy_is_merged_through() {
    let env = exposed();
    env.sb.inject(Fault::CompetingWrite {
        object_path: policy_path(ADMIN),
        after: Trigger::NextRealWrite,
        mutate: Box::new(|p| {
            p["metadata"]["labels"]["team"] = json!("payments");
            p["spec"]["extAuth"]["timeout"] = json!("2s");
        }),
    });
    let o = run(
        &env,
        ENDPOINTS,
        &["--auth-service", "auth/oauth2:9090", "--yes"],
    );
    assert_code(&o, 0);
    let p = env.sb.get(&policy_path(ADMIN)).unwrap();
    assert_eq!(p["metadata"]["labels"]["team"], "payments");
    assert_eq!(p["spec"]["extAuth"]["timeout"], "2s");
    assert_eq!(
        p["spec"]["extAuth"]["http"]["backendRefs"][0]["name"],
        "oauth2"
    );
}

#[test]
fn a_migration_from_ingresses_creates_each_policy_before_its_route_and_each_ingress_after_its_route()
 {
    // The demo application is exposed as nginx-snippet Ingresses: [] and [user].
    let env = Env::with_options(SandboxOptions {
        install_envoy_gateway: true,
        ..SandboxOptions::default()
    });
    let endpoints = "endpoints:
  - path: /health
  - path: /protected/user
    scopes: [user]
";
    let o = run(
        &env,
        endpoints,
        &with(&["--auth-provider", "envoy-gateway", "--yes"]),
    );
    assert_code(&o, 0);
    let writes = route_writes(&env);
    let at = |w: &str| {
        writes
            .iter()
            .position(|x| x == w)
            .unwrap_or_else(|| panic!("no {w} in {writes:?}"))
    };
    let user = "web-04f8996da763b7a9";
    let routes = format!("/apis/gateway.networking.k8s.io/v1/namespaces/{NS}/httproutes");
    let policy = at(&format!("POST {}", policies_path()));
    let route_creates: Vec<usize> = writes
        .iter()
        .enumerate()
        .filter(|(_, w)| **w == format!("POST {routes}"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(route_creates.len(), 2, "{writes:?}");
    // The public route goes in the first round, the scoped one in the next, after its
    // policy; each Ingress is deleted after the route that takes its paths.
    assert!(policy < route_creates[1], "{writes:?}");
    assert!(
        at(&format!("DELETE {}", ingress_path(PUBLIC))) > route_creates[0],
        "{writes:?}"
    );
    assert!(
        at(&format!("DELETE {}", ingress_path(user))) > route_creates[1],
        "{writes:?}"
    );
    assert!(
        env.ingresses()
            .iter()
            .all(|i| i["metadata"]["labels"].get("identifier").is_none())
    );
    assert!(env.sb.get(&policy_path(user)).is_some());
    assert_eq!(
        filter_types(&env.sb.get(&httproute_path(user)).unwrap()),
        ["URLRewrite"]
    );
}

#[test]
fn an_undo_after_the_provider_moved_is_refused_as_drift() {
    // Revision 1 published with the filter; revision 2 moved the checks to policies.
    let env = unexposed();
    assert_code(&run(&env, ENDPOINTS, &with(&["--yes"])), 0);
    assert_code(
        &run(
            &env,
            ENDPOINTS,
            &["--auth-provider", "envoy-gateway", "--yes"],
        ),
        0,
    );
    // Undoing revision 1 would take back the routes revision 1 left with the filter: the
    // provider is not what revision 1 left, so the undo stops.
    let writes = env.app_writes().len();
    let o = env.run(&["web", "--to-revision", "1", "--yes"]);
    assert_code(&o, 5);
    assert!(
        stderr(&o).contains("the auth provider of the routes of web (auth-provider) is now \"envoy-gateway\" (revision 1 left it at \"filter\")"),
        "{}",
        stderr(&o)
    );
    assert!(
        stderr(&o).contains("add --force-undo auth-provider"),
        "{}",
        stderr(&o)
    );
    assert_eq!(env.app_writes().len(), writes);
}

#[test]
fn wait_follows_the_policies_too_until_their_ancestors_accept_them() {
    // No controller accepts anything here: the wait times out naming the policy with the routes.
    let env = unexposed();
    let o = run(
        &env,
        ENDPOINTS,
        &with(&[
            "--auth-provider",
            "envoy-gateway",
            "--wait",
            "--timeout",
            "1s",
            "--yes",
        ]),
    );
    assert_code(&o, 7);
    let err = stderr(&o);
    assert!(
        err.contains(&format!("securitypolicy.gateway.envoyproxy.io/{ADMIN}")),
        "{err}"
    );
    assert!(err.contains("timed out after 1s"), "{err}");
}
