//! Endpoints file → Ingresses, end to end against the sandbox: first exposure, moving paths
//! between scope groups, adding and removing groups, order-insensitivity, the unmanaged Ingress,
//! preservation of what the tool does not own, the empty-file guard, injection attempts, and
//! competing writers deleting or re-creating an Ingress between plan and apply.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use sandbox_apiserver::{Fault, Trigger};
use serde_json::json;

const PUBLIC: &str = "web-e3b0c44298fc1c14"; // scopes []
const USER: &str = "web-04f8996da763b7a9"; // scopes [user]
const ADMIN_USER: &str = "web-4f515e078b8f8861"; // scopes [admin, user]

/// name → sorted backend paths of every Ingress in the namespace.
fn routes(env: &Env) -> Vec<(String, Vec<String>)> {
    let mut v: Vec<(String, Vec<String>)> = env
        .ingresses()
        .iter()
        .map(|i| {
            (
                i["metadata"]["name"].as_str().unwrap().to_owned(),
                paths_of(i),
            )
        })
        .collect();
    v.sort();
    v
}

fn r(name: &str, paths: &[&str]) -> (String, Vec<String>) {
    (
        name.to_owned(),
        paths.iter().map(|p| p.to_string()).collect(),
    )
}

fn apply_endpoints(env: &Env, text: &str, extra: &[&str]) -> std::process::Output {
    let file = env.write_file("endpoints.yaml", text);
    let mut args = vec!["web", "--endpoints", file.to_str().unwrap(), "--yes"];
    args.extend_from_slice(extra);
    env.run(&args)
}

/// The seeded app: public (/health, /unprotected), user (/protected/user), and web-unmanaged.
const SEEDED: &str = "endpoints:
  - path: /health
  - path: /unprotected
  - path: /protected/user
    scopes: [user]
";

#[test]
fn the_seeded_state_plans_no_change() {
    let env = Env::new();
    let o = apply_endpoints(&env, SEEDED, &[]);
    assert_code(&o, 0);
    assert!(stdout(&o).contains("No changes."), "{}", stdout(&o));
    assert!(env.writes().is_empty());
}

#[test]
fn first_exposure_creates_one_ingress_per_scope_group() {
    let env = Env::new();
    for name in [PUBLIC, USER] {
        env.sb.delete(&ingress_path(name)).unwrap();
    }
    let o = apply_endpoints(
        &env,
        "endpoints:
  - path: /unprotected
  - path: /protected/user
    scopes: [user]
  - path: /protected/admin
    scopes: [user, admin]
",
        &["--ingress-class", "nginx"],
    );
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("Plan: 3 to create, 0 to update, 0 to delete."),
        "{}",
        stdout(&o)
    );
    assert_eq!(
        routes(&env),
        vec![
            r(USER, &["/web/protected/user"]),
            r(ADMIN_USER, &["/web/protected/admin"]),
            r(PUBLIC, &["/web/unprotected"]),
            r("web-unmanaged", &["/web/legacy"]),
        ]
    );
    let admin = env.sb.get(&ingress_path(ADMIN_USER)).unwrap();
    assert_eq!(
        admin["metadata"]["labels"],
        json!({"app": "web", "identifier": "4f515e078b8f8861"})
    );
    let snippet =
        admin["metadata"]["annotations"]["nginx.ingress.kubernetes.io/configuration-snippet"]
            .as_str()
            .unwrap();
    assert_eq!(
        snippet,
        "set $scopes \"admin user\";\nauth_request /external-auth;\nauth_request_set $user_id $upstream_http_user_id;\nauth_request_set $user_scopes $upstream_http_user_scopes;\nproxy_set_header User-Id $user_id;\nproxy_set_header User-Scopes $user_scopes;\nrewrite ^/web/(.*)$ /$1 break;\n"
    );
    assert_eq!(admin["spec"]["ingressClassName"], "nginx");
    // The backend is the Service's port.
    assert_eq!(
        admin["spec"]["rules"][0]["http"]["paths"][0]["backend"],
        json!({"service": {"name": "web", "port": {"number": 80}}})
    );
}

#[test]
fn moving_a_path_between_scope_groups_updates_both() {
    let env = Env::new();
    let o = apply_endpoints(
        &env,
        "endpoints:
  - path: /health
  - path: /unprotected
    scopes: [user]
  - path: /protected/user
    scopes: [user]
",
        &[],
    );
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("Plan: 0 to create, 2 to update, 0 to delete."),
        "{}",
        stdout(&o)
    );
    assert_eq!(
        routes(&env),
        vec![
            r(USER, &["/web/protected/user", "/web/unprotected"]),
            r(PUBLIC, &["/web/health"]),
            r("web-unmanaged", &["/web/legacy"]),
        ]
    );
    // Creates/updates before deletes, updates after creates: here two updates, one round.
    let writes = env.app_writes();
    assert_eq!(writes.len(), 2, "{writes:?}");
    assert!(writes.iter().all(|w| w.method == "PATCH"));
}

/// The new group serves a new path and the removed group's path is served by nobody afterwards:
/// no write waits for another, so the create and the delete go out together (in either order).
#[test]
fn adding_and_removing_unrelated_groups_writes_both_in_one_round() {
    let env = Env::new();
    let o = apply_endpoints(
        &env,
        "endpoints:
  - path: /health
  - path: /unprotected
  - path: /protected/admin
    scopes: [admin, user]
",
        &[],
    );
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("Plan: 1 to create, 0 to update, 1 to delete."),
        "{}",
        stdout(&o)
    );
    assert_eq!(
        routes(&env),
        vec![
            r(ADMIN_USER, &["/web/protected/admin"]),
            r(PUBLIC, &["/web/health", "/web/unprotected"]),
            r("web-unmanaged", &["/web/legacy"]),
        ]
    );
    let writes = env.app_writes();
    let mut methods: Vec<&str> = writes.iter().map(|w| w.method.as_str()).collect();
    methods.sort_unstable();
    assert_eq!(methods, vec!["DELETE", "POST"], "{writes:?}");
}

#[test]
fn scopes_in_another_order_or_repeated_change_nothing() {
    let env = Env::new();
    let first = apply_endpoints(
        &env,
        "endpoints:
  - path: /health
  - path: /unprotected
  - path: /protected/user
    scopes: [user]
  - path: /protected/admin
    scopes: [user, admin]
",
        &[],
    );
    assert_code(&first, 0);
    env.sb.clear_requests();
    let again = apply_endpoints(
        &env,
        "endpoints:
  - path: /protected/admin
    scopes: [admin, user, user]
  - path: /unprotected
  - path: /protected/user
    scopes: [user]
  - path: /health
",
        &[],
    );
    assert_code(&again, 0);
    assert!(stdout(&again).contains("No changes."), "{}", stdout(&again));
    assert!(env.writes().is_empty());
}

#[test]
fn the_unmanaged_ingress_is_never_touched() {
    let env = Env::new();
    let before = env.sb.get(&ingress_path("web-unmanaged")).unwrap();
    // Even an empty endpoints file (allowed explicitly) leaves it alone.
    let o = apply_endpoints(&env, "endpoints: []\n", &["--allow-empty-endpoints"]);
    assert_code(&o, 0);
    assert!(!stdout(&o).contains("web-unmanaged"), "{}", stdout(&o));
    assert_eq!(env.sb.get(&ingress_path("web-unmanaged")).unwrap(), before);
    assert_eq!(routes(&env), vec![r("web-unmanaged", &["/web/legacy"])]);
}

#[test]
fn an_empty_file_is_refused_without_the_flag() {
    let env = Env::new();
    let o = apply_endpoints(&env, "endpoints: []\n", &[]);
    assert_code(&o, 3);
    let err = stderr(&o);
    assert!(err.contains("--allow-empty-endpoints"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(env.sb.requests().is_empty(), "rejected before any request");
    assert_eq!(routes(&env).len(), 3);
}

#[test]
fn what_the_tool_does_not_own_is_preserved_and_new_ingresses_inherit() {
    let env = Env::new();
    env.sb
        .update(&ingress_path(PUBLIC), |i| {
            i["metadata"]["annotations"]["team.example.com/owner"] = json!("payments");
            i["metadata"]["labels"]["tier"] = json!("edge");
            i["spec"]["rules"][0]["host"] = json!("shop.example.com");
            i["spec"]["tls"] = json!([{"hosts": ["shop.example.com"], "secretName": "shop-tls"}]);
            i["spec"]["ingressClassName"] = json!("nginx-public");
        })
        .unwrap();
    env.sb.delete(&ingress_path(USER)).unwrap();
    let o = apply_endpoints(
        &env,
        "endpoints:
  - path: /health
  - path: /catalog
  - path: /protected/user
    scopes: [user]
",
        &[],
    );
    assert_code(&o, 0);
    let public = env.sb.get(&ingress_path(PUBLIC)).unwrap();
    assert_eq!(
        public["metadata"]["annotations"]["team.example.com/owner"],
        "payments"
    );
    assert_eq!(public["metadata"]["labels"]["tier"], "edge");
    assert_eq!(public["spec"]["rules"][0]["host"], "shop.example.com");
    assert_eq!(public["spec"]["tls"][0]["secretName"], "shop-tls");
    assert_eq!(public["spec"]["ingressClassName"], "nginx-public");
    let paths: Vec<&str> = public["spec"]["rules"][0]["http"]["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, vec!["/web/catalog", "/web/health"]);
    // The new group's Ingress takes class, host and TLS from its managed sibling.
    let user = env.sb.get(&ingress_path(USER)).unwrap();
    assert_eq!(user["spec"]["ingressClassName"], "nginx-public");
    assert_eq!(user["spec"]["rules"][0]["host"], "shop.example.com");
    assert_eq!(user["spec"]["tls"][0]["secretName"], "shop-tls");
}

#[test]
fn injection_attempts_are_refused_with_nothing_changed() {
    let env = Env::new();
    for (text, needle) in [
        ("endpoints:\n  - path: /a;deny all\n", "/a;deny all"),
        ("endpoints:\n  - path: \"/a b\"\n", "/a b"),
        (
            "endpoints:\n  - path: /a\n    scopes: [\"user\\\"; allow all; #\"]\n",
            "user",
        ),
        ("endpoints:\n  - path: /a${x}\n", "/a${x}"),
        ("endpoints:\n  - path: /a{b}\n", "/a{b}"),
        (
            "endpoints:\n  - path: /a\n    scopes: [\"$scopes\"]\n",
            "$scopes",
        ),
    ] {
        let o = apply_endpoints(&env, text, &[]);
        assert_code(&o, 3);
        let err = stderr(&o);
        assert!(
            err.contains("endpoints.yaml:"),
            "names the file and line: {err}"
        );
        assert!(err.contains(needle), "names the value {needle:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    assert!(env.sb.requests().is_empty(), "nothing reached the cluster");
}

#[test]
fn a_competing_change_to_owned_paths_trips_the_guard() {
    let env = Env::new();
    // Right before our first write to the public Ingress, someone renames one of its paths.
    env.sb.inject(Fault::CompetingWrite {
        object_path: ingress_path(PUBLIC),
        after: Trigger::NextWrite,
        mutate: Box::new(|i| {
            i["spec"]["rules"][0]["http"]["paths"][0]["path"] = json!("/web/healthz");
        }),
    });
    let o = apply_endpoints(
        &env,
        "endpoints:
  - path: /health
  - path: /unprotected
  - path: /catalog
  - path: /protected/user
    scopes: [user]
",
        &[],
    );
    assert_code(&o, 5);
    let err = stderr(&o);
    assert!(
        err.contains(&format!("ingress.networking.k8s.io/{PUBLIC} NOT updated")),
        "{err}"
    );
    assert!(err.contains("Nothing was changed."), "{err}");
    // The competitor's version stands.
    assert_eq!(
        routes(&env)[1],
        r(PUBLIC, &["/web/healthz", "/web/unprotected"])
    );
    assert!(err.contains("/web/healthz"), "the new diff is shown: {err}");
}

#[test]
fn a_competing_foreign_annotation_is_merged_through() {
    let env = Env::new();
    env.sb.inject(Fault::CompetingWrite {
        object_path: ingress_path(PUBLIC),
        after: Trigger::NextWrite,
        mutate: Box::new(|i| {
            i["metadata"]["annotations"]["team.example.com/owner"] = json!("payments");
        }),
    });
    let o = apply_endpoints(
        &env,
        "endpoints:
  - path: /health
  - path: /catalog
  - path: /protected/user
    scopes: [user]
",
        &[],
    );
    assert_code(&o, 0);
    let public = env.sb.get(&ingress_path(PUBLIC)).unwrap();
    assert_eq!(
        public["metadata"]["annotations"]["team.example.com/owner"],
        "payments"
    );
    assert_eq!(routes(&env)[1], r(PUBLIC, &["/web/catalog", "/web/health"]));
}
