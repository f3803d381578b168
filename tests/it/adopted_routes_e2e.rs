//! What is written is shown, for routes the plugin takes over too: a live route labelled as
//! the application's managed route of a scope group (`app`, `identifier`) is updated into its
//! style, and everything of ingress-nginx (`nginx.ingress.kubernetes.io/*` annotations) or of
//! the Gateway API (HTTPRoute filters) that the style does not write is removed — shown in the
//! diff, and refused under `--yes`, where nobody sees the diff.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::Command;

use common::*;
use rexpect::process::WaitStatus;
use serde_json::{Value, json};

const INGRESSES: &str = "/apis/networking.k8s.io/v1/namespaces/shop/ingresses";
const AUTH_SNIPPET: &str = "nginx.ingress.kubernetes.io/auth-snippet";
const SNIPPET: &str = "nginx.ingress.kubernetes.io/configuration-snippet";

/// The identifier label of a scope set.
fn identifier(scopes: &[&str]) -> String {
    use sha2::Digest as _;
    let mut s = scopes.to_vec();
    s.sort();
    sha2::Sha256::digest(s.join("\n").as_bytes())
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The demo's groups and a new one, `[ops]`.
const ENDPOINTS: &str = "endpoints:
  - path: /health
  - path: /unprotected
  - path: /protected/user
    scopes: [user]
  - path: /ops
    scopes: [ops]
";

/// An Ingress someone labelled as `web`'s managed route of the scope group `[ops]`, with an
/// `auth-snippet` that answers every auth request with 200, and an annotation of their own.
fn planted(env: &Env) -> Value {
    env.sb
        .create(
            INGRESSES,
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                   "metadata": {"name": "ops-planted",
                     "labels": {"app": "web", "identifier": identifier(&["ops"])},
                     "annotations": {AUTH_SNIPPET: "return 200;", "team.example.com/owner": "ops"}},
                   "spec": {"ingressClassName": "nginx", "rules": [{"http": {"paths": [
                     {"path": "/web/ops", "pathType": "Prefix",
                      "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}}),
        )
        .unwrap();
    env.sb.get(&ingress_path("ops-planted")).unwrap()
}

fn run(env: &Env, extra: &[&str]) -> std::process::Output {
    let file = env.write_file("endpoints.yaml", ENDPOINTS);
    let mut args = vec!["web", "--endpoints", file.to_str().unwrap()];
    args.extend_from_slice(extra);
    env.run(&args)
}

const REFUSED_SNIPPET: &str = "error: not applied: routes this run updates carry what their style does not write, which the run removes, and with --yes nobody saw that in the diff: ingress.networking.k8s.io/ops-planted (metadata.annotations[nginx.ingress.kubernetes.io/auth-snippet]); run without --yes to review and confirm the removal, or remove it from the routes first; nothing was written\n";

#[test]
fn a_planted_auth_snippet_is_refused_under_yes_and_the_ingress_is_left_as_it_was() {
    let env = Env::new();
    let before = planted(&env);
    let o = run(&env, &["--yes"]);
    assert_code(&o, 3);
    assert_eq!(stderr(&o), REFUSED_SNIPPET);
    // The diff was printed all the same, removal included: the log of the run shows it.
    assert!(
        stdout(&o).contains("-     nginx.ingress.kubernetes.io/auth-snippet: return 200;"),
        "{}",
        stdout(&o)
    );
    assert_eq!(env.sb.get(&ingress_path("ops-planted")).unwrap(), before);
    assert!(env.app_writes().is_empty(), "{:?}", env.app_writes());
}

#[test]
fn the_diff_shows_the_removal_and_the_document_carries_it() {
    let env = Env::new();
    planted(&env);
    let o = run(&env, &["--dry-run", "--color", "never"]);
    assert_code(&o, 0);
    let diff = stdout(&o);
    assert!(
        diff.contains("~ ingress.networking.k8s.io/ops-planted will be updated in place"),
        "{diff}"
    );
    assert!(
        diff.contains("-     nginx.ingress.kubernetes.io/auth-snippet: return 200;"),
        "{diff}"
    );
    assert!(
        diff.contains("+     nginx.ingress.kubernetes.io/configuration-snippet: |"),
        "{diff}"
    );
    // Not an annotation of ingress-nginx: kept, and not shown.
    assert!(!diff.contains("team.example.com/owner"), "{diff}");

    let o = run(&env, &["--dry-run", "-o", "json"]);
    assert_code(&o, 0);
    let doc: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let change = doc["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "ops-planted")
        .unwrap();
    let field = change["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == format!("metadata.annotations[{AUTH_SNIPPET}]"))
        .unwrap_or_else(|| panic!("{change}"));
    assert_eq!(field["before"], "return 200;");
    assert!(field["after"].is_null(), "{field}");
    assert_eq!(
        change["route"]["foreign"],
        json!([format!("metadata.annotations[{AUTH_SNIPPET}]")])
    );
    // The document as its schema says (the new field included).
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/schema/plan.schema.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    // The views the diff is made of: before with it, after without.
    assert_eq!(
        change["before"]["metadata"]["annotations"][AUTH_SNIPPET],
        "return 200;"
    );
    assert!(
        change["after"]["metadata"]["annotations"]
            .get(AUTH_SNIPPET)
            .is_none()
    );
    assert!(env.app_writes().is_empty());
}

#[test]
fn confirmed_on_the_terminal_the_removal_is_written() {
    let env = Env::new();
    planted(&env);
    let file = env.write_file("endpoints.yaml", ENDPOINTS);
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("kubectl-appupdate"));
    scrub(&mut cmd);
    cmd.env("TERM", "xterm-256color");
    cmd.arg("--kubeconfig").arg(&env.kubeconfig).args([
        "web",
        "--endpoints",
        file.to_str().unwrap(),
        "--color",
        "never",
    ]);
    let mut p = rexpect::session::spawn_command(cmd, Some(30_000)).unwrap();
    p.exp_string("-     nginx.ingress.kubernetes.io/auth-snippet: return 200;")
        .unwrap();
    pty::wait_for_prompt(
        &mut p,
        "Apply these changes to web in namespace shop (context sandbox):",
    );
    pty::answer(&mut p, &["y", "\r"]);
    p.exp_string("ingress.networking.k8s.io/ops-planted updated")
        .unwrap();
    p.exp_eof().unwrap();
    match p.process().wait().unwrap() {
        WaitStatus::Exited(_, code) => assert_eq!(code, 0),
        other => panic!("{other:?}"),
    }
    let ing = env.sb.get(&ingress_path("ops-planted")).unwrap();
    let annotations = &ing["metadata"]["annotations"];
    assert!(annotations.get(AUTH_SNIPPET).is_none(), "{annotations}");
    assert!(
        annotations[SNIPPET]
            .as_str()
            .unwrap()
            .starts_with("set $scopes \"ops\";\nauth_request /external-auth;"),
        "{annotations}"
    );
    assert_eq!(annotations["team.example.com/owner"], "ops");
}

#[test]
fn a_saved_plan_shows_the_removal_and_applies_it_and_a_snippet_planted_since_trips_the_guard() {
    let env = Env::new();
    planted(&env);
    let plan = env.dir.path().join("plan.json");
    let o = run(&env, &["--plan-out", plan.to_str().unwrap()]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("-     nginx.ingress.kubernetes.io/auth-snippet: return 200;"),
        "{}",
        stdout(&o)
    );
    // Someone adds another one after the plan was reviewed: its removal was never shown.
    env.sb
        .update(&ingress_path("ops-planted"), |i| {
            i["metadata"]["annotations"]["nginx.ingress.kubernetes.io/server-snippet"] =
                json!("location /x { return 200; }");
        })
        .unwrap();
    let o = env.run(&["apply", plan.to_str().unwrap(), "--yes"]);
    assert_code(&o, 5);
    assert!(
        stderr(&o).contains("nginx.ingress.kubernetes.io/server-snippet"),
        "{}",
        stderr(&o)
    );
    assert!(env.app_writes().is_empty());
    // Taken away again: the reviewed plan applies, --yes and all (its diff was there to read).
    env.sb
        .update(&ingress_path("ops-planted"), |i| {
            i["metadata"]["annotations"]
                .as_object_mut()
                .unwrap()
                .remove("nginx.ingress.kubernetes.io/server-snippet");
        })
        .unwrap();
    let o = env.run(&["apply", plan.to_str().unwrap(), "--yes"]);
    assert_code(&o, 0);
    let ing = env.sb.get(&ingress_path("ops-planted")).unwrap();
    assert!(ing["metadata"]["annotations"].get(AUTH_SNIPPET).is_none());
    assert_eq!(
        ing["metadata"]["annotations"]["team.example.com/owner"],
        "ops"
    );
}

#[test]
fn a_route_of_the_tool_without_foreign_annotations_is_updated_under_yes_as_before() {
    // The demo's routes carry only their style's annotation: a change of paths goes through.
    let env = Env::new();
    let file = env.write_file(
        "endpoints.yaml",
        "endpoints:\n  - path: /health\n  - path: /unprotected\n  - path: /v2\n  - path: /protected/user\n    scopes: [user]\n",
    );
    let o = env.run(&["web", "--endpoints", file.to_str().unwrap(), "--yes"]);
    assert_code(&o, 0);
    // And so is a migration to nginx-auth: the snippet is the old style's own annotation.
    let o = env.run(&[
        "web",
        "--endpoints",
        file.to_str().unwrap(),
        "--routes",
        "nginx-auth",
        "--auth-url",
        "http://oauth.auth.svc:8080/verify",
        "--yes",
    ]);
    assert_code(&o, 0);
    let user = env.sb.get(&ingress_path("web-04f8996da763b7a9")).unwrap();
    assert!(user["metadata"]["annotations"].get(SNIPPET).is_none());
}

#[test]
fn a_migration_refuses_an_annotation_neither_style_writes() {
    let env = Env::new();
    env.sb
        .update(&ingress_path("web-04f8996da763b7a9"), |i| {
            i["metadata"]["annotations"]["nginx.ingress.kubernetes.io/whitelist-source-range"] =
                json!("10.0.0.0/8");
        })
        .unwrap();
    let before = env.ingresses();
    let file = env.write_file(
        "endpoints.yaml",
        "endpoints:\n  - path: /health\n  - path: /unprotected\n  - path: /protected/user\n    scopes: [user]\n",
    );
    let o = env.run(&[
        "web",
        "--endpoints",
        file.to_str().unwrap(),
        "--routes",
        "nginx-auth",
        "--auth-url",
        "http://oauth.auth.svc:8080/verify",
        "--yes",
    ]);
    assert_code(&o, 3);
    assert_eq!(
        stderr(&o),
        "error: not applied: routes this run updates carry what their style does not write, which the run removes, and with --yes nobody saw that in the diff: ingress.networking.k8s.io/web-04f8996da763b7a9 (metadata.annotations[nginx.ingress.kubernetes.io/whitelist-source-range]); run without --yes to review and confirm the removal, or remove it from the routes first; nothing was written\n"
    );
    assert_eq!(env.ingresses(), before);
}

// ---- HTTPRoutes ----

const GATEWAY_ENDPOINTS: &str = "endpoints:
  - path: /health
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

fn httproute_path(name: &str) -> String {
    format!("/apis/gateway.networking.k8s.io/v1/namespaces/{NS}/httproutes/{name}")
}

/// `web` published as HTTPRoutes, then the scoped route's rule given a RequestMirror filter
/// (every request copied elsewhere) and a header filter on its backendRef.
fn httproutes_with_filters() -> (Env, String, Value) {
    let env = Env::new();
    for name in ["web-e3b0c44298fc1c14", "web-04f8996da763b7a9"] {
        env.sb.delete(&ingress_path(name)).unwrap();
    }
    let file = env.write_file("endpoints.yaml", GATEWAY_ENDPOINTS);
    let mut args = vec!["web", "--endpoints", file.to_str().unwrap(), "--yes"];
    args.extend_from_slice(&GATEWAY);
    assert_code(&env.run(&args), 0);
    let name = format!("web-{}", identifier(&["user"]));
    let route = env
        .sb
        .update(&httproute_path(&name), |r| {
            let rule = &mut r["spec"]["rules"][0];
            rule["filters"].as_array_mut().unwrap().push(json!({
                "type": "RequestMirror",
                "requestMirror": {"backendRef": {"name": "sniffer", "port": 80}}
            }));
            rule["backendRefs"][0]["filters"] = json!([{
                "type": "RequestHeaderModifier",
                "requestHeaderModifier": {"set": [{"name": "User-Scopes", "value": "admin"}]}
            }]);
        })
        .unwrap();
    (env, name, route)
}

#[test]
fn filters_the_gateway_style_does_not_write_are_refused_under_yes_and_left_as_they_were() {
    let (env, name, before) = httproutes_with_filters();
    let file = env.write_file("endpoints.yaml", GATEWAY_ENDPOINTS);
    let writes = env.app_writes().len();
    let o = env.run(&["web", "--endpoints", file.to_str().unwrap(), "--yes"]);
    assert_code(&o, 3);
    assert_eq!(
        stderr(&o),
        format!(
            "error: not applied: routes this run updates carry what their style does not write, which the run removes, and with --yes nobody saw that in the diff: httproute.gateway.networking.k8s.io/{name} (spec.rules[path=/web/protected/user].filters[RequestMirror], spec.rules[path=/web/protected/user].backendRefs[0].filters[RequestHeaderModifier]); run without --yes to review and confirm the removal, or remove it from the routes first; nothing was written\n"
        )
    );
    let diff = stdout(&o);
    assert!(diff.contains("type: RequestMirror"), "{diff}");
    assert!(diff.contains("type: RequestHeaderModifier"), "{diff}");
    assert_eq!(env.sb.get(&httproute_path(&name)).unwrap(), before);
    assert_eq!(env.app_writes().len(), writes);
}

#[test]
fn a_reviewed_plan_removes_the_filters_the_gateway_style_does_not_write() {
    let (env, name, _) = httproutes_with_filters();
    let file = env.write_file("endpoints.yaml", GATEWAY_ENDPOINTS);
    let plan = env.dir.path().join("plan.json");
    let o = env.run(&[
        "web",
        "--endpoints",
        file.to_str().unwrap(),
        "--plan-out",
        plan.to_str().unwrap(),
        "--color",
        "never",
    ]);
    assert_code(&o, 0);
    let diff = stdout(&o);
    assert!(diff.contains("-     - type: RequestMirror"), "{diff}");
    assert!(
        diff.contains("-       - type: RequestHeaderModifier"),
        "{diff}"
    );
    let o = env.run(&["apply", plan.to_str().unwrap(), "--yes"]);
    assert_code(&o, 0);
    let route = env.sb.get(&httproute_path(&name)).unwrap();
    let rule = &route["spec"]["rules"][0];
    let types: Vec<&str> = rule["filters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["ExternalAuth", "URLRewrite"]);
    assert!(
        rule["backendRefs"][0].get("filters").is_none(),
        "{}",
        rule["backendRefs"]
    );
    // A re-run finds nothing to change.
    let o = env.run(&[
        "web",
        "--endpoints",
        file.to_str().unwrap(),
        "--dry-run",
        "--detailed-exitcode",
    ]);
    assert_code(&o, 0);
}
