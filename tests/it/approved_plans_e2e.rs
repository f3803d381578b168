//! `apply` bound to the plan that was approved: `--checksum` (printed when the plan is saved)
//! and `--app` refuse any other file before a request; and a saved plan creates routes only
//! under the names their style generates.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use serde_json::{Value, json};

const INGRESSES: &str = "/apis/networking.k8s.io/v1/namespaces/shop/ingresses";

/// `--plan-out FILE` with `args`: the file and the checksum the notice printed.
fn saved(env: &Env, name: &str, args: &[&str]) -> (std::path::PathBuf, String) {
    let file = env.dir.path().join(name);
    let mut all = vec!["web"];
    all.extend_from_slice(args);
    all.extend(["--plan-out", file.to_str().unwrap()]);
    let o = env.run(&all);
    assert_code(&o, 0);
    let err = stderr(&o);
    let checksum = err
        .trim_end()
        .rsplit_once(" --checksum ")
        .map(|(_, c)| c.to_owned())
        .unwrap_or_else(|| panic!("no checksum in {err:?}"));
    assert_eq!(
        err,
        format!(
            "Saved the plan to {f}; apply it with: kubectl appupdate apply {f} --checksum {checksum}\n",
            f = file.display()
        )
    );
    (file, checksum)
}

/// `o` was refused with exactly `line`, exit 3, and nothing was sent since `requests`.
#[track_caller]
fn refused_before_any_request(env: &Env, o: &std::process::Output, requests: usize, line: &str) {
    assert_code(o, 3);
    assert_eq!(stderr(o), format!("error: {line}\n"));
    assert_eq!(env.sb.requests().len(), requests, "a request was sent");
}

#[test]
fn the_printed_checksum_applies_the_plan_it_names() {
    let env = Env::new();
    let (file, checksum) = saved(&env, "plan.json", &["--max", "9"]);
    // The file's own checksum field, which is not the SHA-256 of its bytes.
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(doc["checksum"], checksum.as_str());
    let o = env.run(&[
        "apply",
        file.to_str().unwrap(),
        "--checksum",
        &checksum,
        "--app",
        "web",
        "--yes",
    ]);
    assert_code(&o, 0);
    assert_eq!(env.bounds().1, 9);
}

#[test]
fn another_validly_made_plan_is_refused_by_the_approved_checksum_and_nothing_is_written() {
    let env = Env::new();
    let (_, approved) = saved(&env, "approved.json", &["--max", "9"]);
    // Yesterday's rejected plan, valid in every other way, put where the approved one was.
    let (rejected, theirs) = saved(&env, "rejected.json", &["--max", "50", "--min", "1"]);
    assert_ne!(approved, theirs);
    let requests = env.sb.requests().len();
    let o = env.run(&[
        "apply",
        rejected.to_str().unwrap(),
        "--checksum",
        &approved,
        "--yes",
    ]);
    refused_before_any_request(
        &env,
        &o,
        requests,
        &format!(
            "{} is not the approved plan: its checksum is {theirs}, not --checksum {approved}; nothing was sent",
            rejected.display()
        ),
    );
    assert_eq!(env.bounds(), (2, 5));
    assert!(env.app_writes().is_empty());
}

#[test]
fn the_sha256sum_of_the_file_is_not_the_checksum() {
    use sha2::Digest as _;
    let env = Env::new();
    let (file, checksum) = saved(&env, "plan.json", &["--max", "9"]);
    let bytes = std::fs::read(&file).unwrap();
    let sum: String = sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let requests = env.sb.requests().len();
    let o = env.run(&[
        "apply",
        file.to_str().unwrap(),
        "--checksum",
        &format!("sha256:{sum}"),
        "--yes",
    ]);
    refused_before_any_request(
        &env,
        &o,
        requests,
        &format!(
            "{} is not the approved plan: its checksum is {checksum}, not --checksum sha256:{sum}; nothing was sent",
            file.display()
        ),
    );
    // A bare digest is not taken for one.
    let o = env.run(&["apply", file.to_str().unwrap(), "--checksum", &sum, "--yes"]);
    assert_code(&o, 3);
    assert!(
        stderr(&o).contains("give the checksum --plan-out printed, sha256: and 64 hex digits (not sha256sum of the file)"),
        "{}",
        stderr(&o)
    );
    assert_eq!(env.sb.requests().len(), requests);
    assert_eq!(env.bounds().1, 5);
}

#[test]
fn a_plan_for_another_application_is_refused_by_app() {
    let env = Env::new();
    let (file, checksum) = saved(&env, "plan.json", &["--max", "9"]);
    let requests = env.sb.requests().len();
    let o = env.run(&[
        "apply",
        file.to_str().unwrap(),
        "--app",
        "api",
        "--checksum",
        &checksum,
        "--yes",
    ]);
    refused_before_any_request(
        &env,
        &o,
        requests,
        &format!(
            "{} is a plan for the application \"web\", not --app api; nothing was sent",
            file.display()
        ),
    );
    assert_eq!(env.bounds().1, 5);
}

/// The identifier label of a scope set (the first 16 hex digits of SHA-256 over the sorted
/// scopes joined by line feeds).
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

fn objects(doc: &mut Value) -> &mut Vec<Value> {
    doc["content"]["clusters"][0]["objects"]
        .as_array_mut()
        .unwrap()
}

#[test]
fn an_edited_plan_creating_a_route_under_a_name_of_its_own_is_refused_as_edited() {
    let env = Env::new();
    let ops = identifier(&["ops"]);
    let endpoints = env.write_file(
        "endpoints.yaml",
        "endpoints:\n  - path: /health\n  - path: /unprotected\n  - path: /protected/user\n    scopes: [user]\n  - path: /ops\n    scopes: [ops]\n",
    );
    let (file, _) = saved(
        &env,
        "plan.json",
        &["--endpoints", endpoints.to_str().unwrap()],
    );
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let create = objects(&mut doc)
        .iter_mut()
        .find(|o| o["change"]["name"] == format!("web-{ops}"))
        .expect("the new group's Ingress is created");
    assert!(create["change"]["live"].is_null());
    // Every value as the style makes it, but the name: the updater's is not the desired one.
    create["updater"]["spec"]["name"] = json!("payments-api");
    create["change"]["name"] = json!("payments-api");
    reseal_plan(&mut doc);
    let edited = env.write_file("edited.json", &serde_json::to_string_pretty(&doc).unwrap());
    let before = env.ingresses();
    let requests = env.sb.requests().len();
    let o = env.run(&["apply", edited.to_str().unwrap(), "--yes"]);
    refused_before_any_request(
        &env,
        &o,
        requests,
        &format!(
            "{} was edited: ingress.networking.k8s.io/payments-api: it creates the Ingress \"payments-api\", a name no route style gives a new one (its scope group's is \"web-{ops}\"); a saved plan is applied only as kubectl-appupdate wrote it, so nothing was sent; make it again with --plan-out",
            edited.display()
        ),
    );
    assert_eq!(env.ingresses(), before);
    assert!(env.sb.get(&ingress_path("payments-api")).is_none());
}

#[test]
fn a_saved_plan_still_updates_a_managed_route_created_under_another_name() {
    // Routes are matched by their identifier label, so one made under another name keeps it:
    // its update is not a new name.
    let env = Env::new();
    let ops = identifier(&["ops"]);
    env.sb
        .create(
            INGRESSES,
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                   "metadata": {"name": "ops-legacy", "labels": {"app": "web", "identifier": ops},
                     "annotations": {"nginx.ingress.kubernetes.io/configuration-snippet":
                       "set $scopes \"ops\";\nauth_request /external-auth;\nauth_request_set $user_id $upstream_http_user_id;\nauth_request_set $user_scopes $upstream_http_user_scopes;\nproxy_set_header User-Id $user_id;\nproxy_set_header User-Scopes $user_scopes;\nrewrite ^/web/(.*)$ /$1 break;\n"}},
                   "spec": {"ingressClassName": "nginx", "rules": [{"http": {"paths": [
                     {"path": "/web/ops", "pathType": "Prefix",
                      "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}}),
        )
        .unwrap();
    let endpoints = env.write_file(
        "endpoints.yaml",
        "endpoints:\n  - path: /health\n  - path: /unprotected\n  - path: /protected/user\n    scopes: [user]\n  - path: /ops\n    scopes: [ops]\n  - path: /ops/v2\n    scopes: [ops]\n",
    );
    let (file, checksum) = saved(
        &env,
        "plan.json",
        &["--endpoints", endpoints.to_str().unwrap()],
    );
    let o = env.run(&[
        "apply",
        file.to_str().unwrap(),
        "--checksum",
        &checksum,
        "--yes",
    ]);
    assert_code(&o, 0);
    let ing = env.sb.get(&ingress_path("ops-legacy")).unwrap();
    assert_eq!(paths_of(&ing), ["/web/ops", "/web/ops/v2"]);
    assert!(env.sb.get(&ingress_path(&format!("web-{ops}"))).is_none());
}
