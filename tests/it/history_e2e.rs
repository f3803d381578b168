//! Saved plans, the history and undo, end to end against the sandbox: `--plan-out` then
//! `apply FILE`, what a saved plan refuses (drift in a planned field, an edited file, another
//! cluster or namespace, an old plan), the records in `<app>-appupdate-history`, their
//! pruning and size, and `--undo` (restoring, refusing, redoing).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeMap;

use common::*;
use k8s_openapi::jiff;
use sandbox_apiserver::Fault;
use serde_json::{Value, json};

const NEW_IMAGE: &str = "registry.example.com/web:2.0";
const DEPLOY_PATH: &str = "/apis/apps/v1/namespaces/shop/deployments/web";
const HPA_PATH: &str = "/apis/autoscaling/v2/namespaces/shop/horizontalpodautoscalers/web";
const HISTORY_PATH: &str = "/api/v1/namespaces/shop/configmaps/web-appupdate-history";
const CONFIG_MAPS: &str = "/api/v1/namespaces/shop/configmaps";

/// Keeps the public group with one more path, drops the `[user]` group, adds `[admin]`: one
/// update, one delete and one create of a route.
const ENDPOINTS: &str = "endpoints:\n  - path: /health\n  - path: /unprotected\n  - path: /status\n  - path: /admin\n    scopes: [admin]\n";

/// Every Ingress of the namespace by name: labels, annotations and spec (what an undo must
/// restore exactly).
fn routes(env: &Env) -> BTreeMap<String, Value> {
    env.ingresses()
        .into_iter()
        .map(|i| {
            (
                i["metadata"]["name"].as_str().unwrap().to_owned(),
                json!({"labels": i["metadata"]["labels"], "annotations": i["metadata"]["annotations"], "spec": i["spec"]}),
            )
        })
        .collect()
}

/// The application's state: image, bounds and routes.
fn state(env: &Env) -> (String, (i64, i64), BTreeMap<String, Value>) {
    (env.image(), env.bounds(), routes(env))
}

fn history_json(env: &Env) -> Value {
    let o = env.run(&["history", "web", "-o", "json"]);
    assert_code(&o, 0);
    serde_json::from_slice(&o.stdout).expect("history -o json is one document")
}

fn revisions(env: &Env) -> Vec<u64> {
    history_json(env)["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["revision"].as_u64().unwrap())
        .collect()
}

fn plan_out(env: &Env, args: &[&str]) -> std::path::PathBuf {
    let file = env.dir.path().join("plan.json");
    let mut all = vec!["web"];
    all.extend_from_slice(args);
    all.extend(["--plan-out", file.to_str().unwrap()]);
    let o = env.run(&all);
    assert_code(&o, 0);
    assert!(stderr(&o).contains("Saved the plan to"), "{}", stderr(&o));
    file
}

fn apply(env: &Env, file: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["apply", file.to_str().unwrap()];
    args.extend_from_slice(extra);
    env.run(&args)
}

/// The next real (not dry-run) write of the HPA fails with 422, after its dry run passed.
fn fail_the_hpa_write_once(env: &Env) {
    env.sb.inject(Fault::Restrict {
        dry_run: false,
        fault: Box::new(Fault::Status {
            method: Some("PATCH".into()),
            path_prefix: HPA_PATH.into(),
            status: 422,
            count: 1,
        }),
    });
}

/// Writes of ConfigMaps (the history) the sandbox received.
fn history_writes(env: &Env) -> usize {
    env.writes()
        .iter()
        .filter(|w| w.path.starts_with(CONFIG_MAPS))
        .count()
}

#[test]
fn a_saved_plan_round_trips_plan_out_then_apply() {
    let env = Env::new();
    let endpoints = env.write_file("endpoints.yaml", ENDPOINTS);
    let file = plan_out(
        &env,
        &[
            "--image",
            NEW_IMAGE,
            "--max",
            "9",
            "--endpoints",
            endpoints.to_str().unwrap(),
        ],
    );
    // Saving writes nothing.
    assert!(env.writes().is_empty(), "{:?}", env.writes());
    assert_eq!(env.image(), "registry.example.com/web:1.0");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(doc["schema"], "kubectl-appupdate.plan-file/v1");
    let cluster = &doc["content"]["clusters"][0];
    assert_eq!(cluster["namespace"], NS);
    assert_eq!(
        cluster["plan"]["summary"],
        json!({"create": 1, "update": 3, "delete": 1, "unchanged": 0})
    );

    let o = apply(&env, &file, &["--yes"]);
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(
        out.contains("Plan: 1 to create, 3 to update, 1 to delete."),
        "{out}"
    );
    assert!(out.contains("deployment.apps/web updated"), "{out}");
    assert!(
        out.contains("recorded as revision 1 in configmap/web-appupdate-history"),
        "{out}"
    );
    assert_eq!(env.image(), NEW_IMAGE);
    assert_eq!(env.bounds(), (2, 9));
    let names: Vec<String> = routes(&env).into_keys().collect();
    assert!(
        names.iter().any(|n| n == "web-8c6976e5b5410415"),
        "{names:?}"
    );
    assert!(
        !names.iter().any(|n| n == "web-04f8996da763b7a9"),
        "{names:?}"
    );

    // The record says it came from a saved plan, and who applied it: the user the server's
    // SelfSubjectReview names (not the kubeconfig's user name, sandbox-admin).
    let record = &history_json(&env)["records"][0];
    assert_eq!(record["savedPlan"], true);
    assert_eq!(record["user"], "admin");

    // The record carries the file's checksum, and applying the file again is refused: a saved
    // plan applies at most once.
    assert!(
        record["planChecksum"]
            .as_str()
            .unwrap()
            .starts_with("sha256:"),
        "{record}"
    );
    let writes = env.writes().len();
    let o = apply(&env, &file, &["--yes"]);
    assert_code(&o, 5);
    let err = stderr(&o);
    assert!(
        err.contains("was applied already: the objects of web in namespace"),
        "{err}"
    );
    assert!(
        err.contains("(the history records it as revision 1)"),
        "{err}"
    );
    assert_eq!(env.writes().len(), writes, "{:?}", env.writes());
}

#[test]
fn drift_in_a_planned_field_refuses_the_whole_plan_with_nothing_written() {
    let env = Env::new();
    let file = plan_out(&env, &["--image", NEW_IMAGE, "--max", "9"]);
    env.sb
        .update(HPA_PATH, |h| h["spec"]["maxReplicas"] = json!(7))
        .unwrap();
    let o = apply(&env, &file, &["--yes"]);
    assert_code(&o, 5);
    let err = stderr(&o);
    assert!(
        err.contains("The live object changed after the plan was shown. This is what would change now (not applied):"),
        "{err}"
    );
    assert!(err.contains("-   maxReplicas: 7"), "{err}");
    assert!(err.contains("+   maxReplicas: 9"), "{err}");
    assert!(
        err.contains("horizontalpodautoscaler.autoscaling/web NOT updated: spec.maxReplicas is now 7 (the plan showed 5)"),
        "{err}"
    );
    assert!(
        err.contains("deployment.apps/web NOT updated: not attempted"),
        "{err}"
    );
    assert!(err.contains("Nothing was changed."), "{err}");
    // Not even the Deployment, whose fields did not move: the plan is refused whole.
    assert!(env.writes().is_empty(), "{:?}", env.writes());
    assert_eq!(env.image(), "registry.example.com/web:1.0");
    assert_eq!(env.bounds(), (2, 7));
}

#[test]
fn drift_elsewhere_in_an_object_does_not_block_a_saved_plan() {
    let env = Env::new();
    let file = plan_out(&env, &["--image", NEW_IMAGE, "--max", "9"]);
    env.sb
        .update(HPA_PATH, |h| {
            h["metadata"]["labels"]["team"] = json!("payments");
            h["spec"]["minReplicas"] = json!(3);
        })
        .unwrap();
    env.sb
        .update(DEPLOY_PATH, |d| {
            d["metadata"]["annotations"] = json!({"owner": "ops"})
        })
        .unwrap();
    let o = apply(&env, &file, &["--yes"]);
    assert_code(&o, 0);
    assert_eq!(env.image(), NEW_IMAGE);
    assert_eq!(env.bounds(), (3, 9));
    assert_eq!(env.hpa()["metadata"]["labels"]["team"], "payments");
    assert_eq!(env.deployment()["metadata"]["annotations"]["owner"], "ops");
    // Rebased before the first write: no conflict, one write per object.
    let patches: Vec<_> = env
        .writes()
        .into_iter()
        .filter(|w| w.method == "PATCH" && !w.path.contains("configmaps"))
        .collect();
    assert_eq!(patches.len(), 2, "{patches:?}");
}

#[test]
fn an_edited_or_truncated_plan_file_is_refused_in_one_line_before_any_request() {
    let env = Env::new();
    let file = plan_out(&env, &["--max", "9"]);
    let text = std::fs::read_to_string(&file).unwrap();
    let before = env.sb.requests().len();
    let edited = env.write_file(
        "edited.json",
        &text.replace("\"maxReplicas\": 9", "\"maxReplicas\": 19"),
    );
    let truncated = env.write_file("truncated.json", &text[..text.len() / 3]);
    let other = env.write_file("other.json", &text.replace("plan-file/v1", "plan-file/v9"));
    for (f, needle) in [
        (
            &edited,
            "was changed after it was written (its checksum does not match its content)",
        ),
        (
            &truncated,
            "is not a complete plan file (it ends early at line",
        ),
        (
            &other,
            "is a plan file of schema \"kubectl-appupdate.plan-file/v9\"",
        ),
    ] {
        let o = apply(&env, f, &["--yes"]);
        assert_code(&o, 3);
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{err}");
        assert_eq!(stdout(&o), "");
    }
    assert_eq!(env.sb.requests().len(), before);
    assert_eq!(env.bounds(), (2, 5));
}

#[test]
fn a_plan_for_another_cluster_or_namespace_is_refused_unless_its_context_is_named() {
    let env = Env::new();
    let file = plan_out(&env, &["--max", "9"]);
    // Another namespace.
    let o = apply(&env, &file, &["--yes", "-n", "default"]);
    assert_code(&o, 3);
    assert!(
        stderr(&o).contains("was made for namespace \"shop\", not \"default\""),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).ends_with("; pass -n shop\n"), "{}", stderr(&o));
    // Another cluster: a second sandbox, its own kubeconfig.
    let other = Env::new();
    let o = other.run(&["apply", file.to_str().unwrap(), "--yes"]);
    assert_code(&o, 3);
    let err = stderr(&o);
    assert!(err.contains("was made against the API server"), "{err}");
    assert!(
        err.contains("to apply it there anyway, name its context: --context"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(stdout(&o), "");
    assert!(other.writes().is_empty());
    assert_eq!(other.bounds(), (2, 5));
    assert_eq!(env.bounds(), (2, 5));
    // Naming the plan's context is the deliberate choice: the plan is checked against that
    // cluster's objects under the guard and applied there.
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let context = doc["content"]["clusters"][0]["context"]
        .as_str()
        .unwrap()
        .to_owned();
    let o = other.run(&[
        "apply",
        file.to_str().unwrap(),
        "--yes",
        "--context",
        &context,
    ]);
    assert_code(&o, 0);
    assert_eq!(other.bounds(), (2, 9));
    assert_eq!(env.bounds(), (2, 5));
}

#[test]
fn a_plan_older_than_max_plan_age_is_refused() {
    let env = Env::new();
    let file = plan_out(&env, &["--max", "9"]);
    // Made two hours ago: its creation time moved back, its checksum made again (no waiting).
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let created: jiff::Timestamp = doc["content"]["createdAt"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let earlier = created - jiff::SignedDuration::from_hours(2);
    doc["content"]["createdAt"] = json!(earlier.to_string());
    reseal_plan(&mut doc);
    std::fs::write(&file, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    let o = apply(&env, &file, &["--yes", "--max-plan-age", "1h"]);
    assert_code(&o, 3);
    let err = stderr(&o);
    assert!(
        err.contains(&format!("ago ({earlier})"))
            && err.contains("longer ago than --max-plan-age 60m"),
        "{err}"
    );
    assert!(env.writes().is_empty());
    let o = apply(&env, &file, &["--yes", "--max-plan-age", "3h"]);
    assert_code(&o, 0);
}

#[test]
fn the_history_records_creates_updates_and_deletes_of_routes() {
    let env = Env::new();
    let endpoints = env.write_file("endpoints.yaml", ENDPOINTS);
    let o = env.run(&["web", "--endpoints", endpoints.to_str().unwrap(), "--yes"]);
    assert_code(&o, 0);
    let doc = history_json(&env);
    assert_eq!(doc["schema"], "kubectl-appupdate.history/v1");
    let record = &doc["records"][0];
    assert_eq!(record["revision"], 1);
    assert_eq!(record["status"], "applied");
    assert_eq!(record["source"], json!({"type": "update"}));
    let route = |action: &str| {
        record["routes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["action"] == action)
            .unwrap()
            .clone()
    };
    let created = route("create");
    assert_eq!(created["kind"], "Ingress");
    assert_eq!(created["apiVersion"], "networking.k8s.io/v1");
    assert_eq!(created["name"], "web-8c6976e5b5410415");
    let deleted = route("delete");
    assert_eq!(deleted["name"], "web-04f8996da763b7a9");
    let updated = route("update");
    assert_eq!(updated["name"], "web-e3b0c44298fc1c14");
    // No object body: the routes are recorded as what they served, in the plugin's terms.
    for r in record["routes"].as_array().unwrap() {
        assert!(r.get("before").is_none() && r.get("after").is_none(), "{r}");
    }
    let endpoints = &record["endpoints"];
    assert_eq!(endpoints["before"]["style"], "nginx-snippet", "{endpoints}");
    assert_eq!(endpoints["after"]["style"], "nginx-snippet", "{endpoints}");
    let groups = |set: &Value| -> Vec<(Value, Value)> {
        set["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| {
                (
                    g.get("scopes").cloned().unwrap_or(json!([])),
                    g["paths"].clone(),
                )
            })
            .collect()
    };
    assert!(
        groups(&endpoints["before"]).contains(&(json!(["user"]), json!(["/protected/user"]))),
        "{endpoints}"
    );
    assert!(
        !groups(&endpoints["after"])
            .iter()
            .any(|(s, _)| *s == json!(["user"])),
        "{endpoints}"
    );

    // The listing, like helm history.
    let o = env.run(&["history", "web"]);
    assert_code(&o, 0);
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("REVISION  UPDATED"), "{out}");
    assert!(lines[1].starts_with("1 "), "{out}");
    assert!(
        lines[1].contains("admin  applied  routes: 1 created, 1 updated, 1 deleted"),
        "{out}"
    );
    // The ConfigMap is labelled with the app.
    let cm = env.sb.get(HISTORY_PATH).unwrap();
    assert_eq!(cm["metadata"]["labels"]["app"], "web");
}

#[test]
fn a_dry_run_and_a_run_that_changes_nothing_record_nothing() {
    let env = Env::new();
    assert_code(&env.run(&["web", "--max", "9", "--dry-run"]), 0);
    assert_code(&env.run(&["web", "--max", "5", "--yes"]), 0);
    assert!(env.sb.get(HISTORY_PATH).is_none());
    let o = env.run(&["history", "web"]);
    assert_code(&o, 0);
    assert_eq!(stdout(&o), "");
    assert!(
        stderr(&o).contains("No recorded changes for web"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn the_history_keeps_the_newest_records_only() {
    let env = Env::new();
    for max in ["6", "7", "8", "9"] {
        assert_code(
            &env.run(&["web", "--max", max, "--yes", "--history-max", "3"]),
            0,
        );
    }
    assert_eq!(revisions(&env), [2, 3, 4]);
    // --history-max 0 records nothing and keeps what is there.
    assert_code(
        &env.run(&["web", "--max", "10", "--yes", "--history-max", "0"]),
        0,
    );
    assert_eq!(revisions(&env), [2, 3, 4]);
}

#[test]
fn the_history_stays_small_with_500_routes() {
    let env = Env::new();
    let many: String = (0..500)
        .map(|i| format!("  - path: /r{i}/orders\n    scopes: [team-{i:03}]\n"))
        .collect();
    let file = env.write_file("many.yaml", &format!("endpoints:\n{many}"));
    let o = env.run(&[
        "web",
        "--endpoints",
        file.to_str().unwrap(),
        "--yes",
        "-o",
        "json",
    ]);
    assert_code(&o, 0);
    // And remove them all again: 500 deleted route objects, each kept whole to restore it.
    let one = env.write_file("one.yaml", "endpoints:\n  - path: /health\n");
    let o = env.run(&[
        "web",
        "--endpoints",
        one.to_str().unwrap(),
        "--yes",
        "-o",
        "json",
    ]);
    assert_code(&o, 0);
    let cm = env.sb.get(HISTORY_PATH).unwrap();
    let stored: usize = cm["binaryData"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_str().unwrap().len())
        .sum();
    assert!(stored < 256 * 1024, "{stored} bytes of records");
    let whole = serde_json::to_vec(&cm).unwrap().len();
    assert!(whole < 1024 * 1024 / 2, "the ConfigMap is {whole} bytes");
    let doc = history_json(&env);
    let newest = doc["records"].as_array().unwrap().last().unwrap().clone();
    let deleted = newest["routes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["action"] == "delete")
        .count();
    assert_eq!(deleted, 500);
    assert_eq!(
        newest["endpoints"]["before"]["groups"]
            .as_array()
            .unwrap()
            .len(),
        500
    );
    assert!(newest.get("routesTruncated").is_none());
}

#[test]
fn undo_restores_the_image_the_bounds_and_the_exact_route_set() {
    let env = Env::new();
    let before = state(&env);
    let endpoints = env.write_file("endpoints.yaml", ENDPOINTS);
    let o = env.run(&[
        "web",
        "--image",
        NEW_IMAGE,
        "--min",
        "3",
        "--max",
        "9",
        "--endpoints",
        endpoints.to_str().unwrap(),
        "--yes",
    ]);
    assert_code(&o, 0);
    let after = state(&env);
    assert_ne!(after, before);

    let o = env.run(&["web", "--undo", "--yes"]);
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(
        out.contains("Plan: 1 to create, 3 to update, 1 to delete."),
        "{out}"
    );
    assert!(out.contains("recorded as revision 2"), "{out}");
    assert_eq!(state(&env), before);
    let record = &history_json(&env)["records"][1];
    assert_eq!(record["source"], json!({"type": "undo", "revision": 1}));

    // Undo of the undo: back to the state after the change.
    let o = env.run(&["web", "--undo", "--yes"]);
    assert_code(&o, 0);
    assert_eq!(state(&env), after);
    // And --to-revision undoes a given one: revision 1 again, from the redone state.
    let o = env.run(&["web", "--to-revision", "1", "--yes"]);
    assert_code(&o, 0);
    assert_eq!(state(&env), before);
}

fn change_cause(env: &Env) -> Value {
    env.deployment()["metadata"]["annotations"]["kubernetes.io/change-cause"].clone()
}

#[test]
fn the_change_cause_names_an_undo_and_a_saved_plan_keeps_the_revision_it_planned() {
    let env = Env::new();
    assert_code(&env.run(&["web", "--image", NEW_IMAGE, "--yes"]), 0);
    assert_code(&env.run(&["web", "--max", "9", "--yes"]), 0);
    // Undoing revision 1 (the image) is revision 3.
    let o = env.run(&["web", "--to-revision", "1", "--yes"]);
    assert_code(&o, 0);
    let undo = "kubectl-appupdate: undo of revision 1: image registry.example.com/web:2.0 → registry.example.com/web:1.0 (revision 3)";
    assert!(stdout(&o).contains(undo), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("recorded as revision 3"),
        "{}",
        stdout(&o)
    );
    assert_eq!(change_cause(&env), undo);

    // A saved plan shows the revision its record would get when it was made, revision 4…
    let file = plan_out(&env, &["--image", NEW_IMAGE]);
    let planned = "kubectl-appupdate: image registry.example.com/web:1.0 → registry.example.com/web:2.0 (revision 4)";
    // …and keeps it when another run records first: the annotation is not guarded, nor
    // planned again; the record lands where the history has room, at 5.
    assert_code(&env.run(&["web", "--max", "8", "--yes"]), 0);
    env.sb
        .update(DEPLOY_PATH, |d| {
            d["metadata"]["annotations"]["kubernetes.io/change-cause"] = json!("by hand")
        })
        .unwrap();
    let o = apply(&env, &file, &["--yes"]);
    assert_code(&o, 0);
    assert!(stdout(&o).contains(planned), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("recorded as revision 5"),
        "{}",
        stdout(&o)
    );
    assert_eq!(change_cause(&env), planned);
    assert_eq!(env.image(), NEW_IMAGE);
}

#[test]
fn undo_refuses_a_field_changed_since_unless_forced_for_exactly_it() {
    let env = Env::new();
    assert_code(
        &env.run(&["web", "--image", NEW_IMAGE, "--max", "9", "--yes"]),
        0,
    );
    env.sb
        .update(HPA_PATH, |h| h["spec"]["maxReplicas"] = json!(12))
        .unwrap();
    let writes = env.writes().len();
    let o = env.run(&["web", "--undo", "--yes"]);
    assert_code(&o, 5);
    let err = stderr(&o);
    assert!(
        err.contains("horizontalpodautoscaler.autoscaling/web spec.maxReplicas is now 12 (revision 1 left it at 9); to overwrite exactly these, add --force-undo max"),
        "{err}"
    );
    // The plan is shown, nothing is written.
    assert!(stdout(&o).contains("maxReplicas: 12"), "{}", stdout(&o));
    assert_eq!(env.writes().len(), writes);
    assert_eq!(env.image(), NEW_IMAGE);
    // Forcing other fields is refused too.
    let o = env.run(&["web", "--undo", "--yes", "--force-undo", "max,image"]);
    assert_code(&o, 5);
    // Exactly the changed field: undone.
    let o = env.run(&["web", "--undo", "--yes", "--force-undo", "max"]);
    assert_code(&o, 0);
    assert_eq!(env.image(), "registry.example.com/web:1.0");
    assert_eq!(env.bounds(), (2, 5));
}

#[test]
fn undo_without_a_history_says_there_is_nothing_to_undo() {
    let env = Env::new();
    let o = env.run(&["web", "--undo", "--yes"]);
    assert_code(&o, 1);
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("cannot undo web in namespace \"shop\""),
        "{err}"
    );
    assert!(err.contains("no changes are recorded"), "{err}");
}

#[test]
fn an_undo_can_be_saved_and_applied_later() {
    let env = Env::new();
    assert_code(&env.run(&["web", "--max", "9", "--yes"]), 0);
    let file = plan_out(&env, &["--undo"]);
    assert_eq!(env.bounds(), (2, 9));
    let o = apply(&env, &file, &["--yes"]);
    assert_code(&o, 0);
    assert_eq!(env.bounds(), (2, 5));
    let record = &history_json(&env)["records"][1];
    assert_eq!(record["source"], json!({"type": "undo", "revision": 1}));
    assert_eq!(record["savedPlan"], true);
}

#[test]
fn a_user_who_cannot_write_the_history_gets_the_update_and_one_warning() {
    let env = Env::new();
    for method in ["POST", "PATCH"] {
        env.sb.inject(Fault::Status {
            method: Some(method.into()),
            path_prefix: CONFIG_MAPS.into(),
            status: 403,
            count: 100,
        });
    }
    let o = env.run(&["web", "--image", NEW_IMAGE, "--yes"]);
    assert_code(&o, 0);
    assert_eq!(env.image(), NEW_IMAGE);
    assert!(
        stdout(&o).contains("deployment.apps/web updated"),
        "{}",
        stdout(&o)
    );
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("warning: the changes were made but not recorded in the history, so --undo does not know them: forbidden"),
        "{err}"
    );
    assert!(env.sb.get(HISTORY_PATH).is_none());
}

#[test]
fn a_user_who_cannot_read_the_history_gets_the_update_and_one_warning() {
    let env = Env::new();
    env.sb.inject(Fault::Status {
        method: Some("GET".into()),
        path_prefix: CONFIG_MAPS.into(),
        status: 403,
        count: 100,
    });
    let o = env.run(&["web", "--max", "9", "--yes"]);
    assert_code(&o, 0);
    assert_eq!(env.bounds(), (2, 9));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("warning: the changes were made but not recorded"),
        "{err}"
    );
}

#[test]
fn two_runs_recording_at_once_both_keep_their_record() {
    let env = Env::new();
    assert_code(&env.run(&["web", "--max", "6", "--yes"]), 0);
    // Another run records between our read of the history and our write.
    env.sb.inject(Fault::Conflicts {
        object_path: HISTORY_PATH.into(),
        count: 1,
    });
    assert_code(&env.run(&["web", "--max", "7", "--yes"]), 0);
    assert_eq!(revisions(&env), [1, 2]);
}

#[test]
fn the_record_goes_out_with_the_last_writes_not_after_them() {
    let env = Env::new();
    common::running::hold_the_deployment_write(&env);
    let run = common::running::Running::start(
        &env,
        &["web", "--image", NEW_IMAGE, "--max", "7", "--yes"],
    );
    common::running::wait_until("the record, while the Deployment's write is held", || {
        env.sb.held() == 1 && env.sb.get(HISTORY_PATH).is_some()
    });
    env.sb.release_held();
    let (code, out, err) = run.finish();
    assert_eq!(code, 0, "--- stdout\n{out}\n--- stderr\n{err}");
    assert_eq!(err, "");
    let doc = history_json(&env);
    let records = doc["records"].as_array().unwrap();
    assert_eq!(records.len(), 1, "{doc}");
    assert_eq!(records[0]["status"], "applied");
    assert_eq!(records[0]["image"]["after"], NEW_IMAGE);
    assert_eq!(records[0]["bounds"]["max"]["after"], 7);
    // One write of the history: nothing to correct.
    assert_eq!(history_writes(&env), 1, "{:?}", env.writes());
}

#[test]
fn a_write_that_fails_beside_the_record_leaves_it_saying_only_what_was_done() {
    let env = Env::new();
    assert_code(&env.run(&["web", "--max", "6", "--yes"]), 0);
    fail_the_hpa_write_once(&env);
    let o = env.run(&["web", "--image", NEW_IMAGE, "--max", "7", "--yes"]);
    assert_ne!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("deployment.apps/web updated"),
        "{}",
        stdout(&o)
    );
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
    assert_eq!((env.image(), env.bounds().1), (NEW_IMAGE.to_owned(), 6));
    let doc = history_json(&env);
    let records = doc["records"].as_array().unwrap();
    assert_eq!(revisions(&env), [1, 2], "{doc}");
    let r = &records[1];
    assert_eq!(r["status"], "partial", "{r}");
    assert_eq!(r["image"]["after"], NEW_IMAGE, "{r}");
    assert!(
        r.get("bounds").is_none(),
        "the failed bounds change is recorded: {r}"
    );
}

#[test]
fn a_run_whose_writes_all_fail_takes_its_record_back_and_the_history_reads_as_before() {
    let env = Env::new();
    for max in ["6", "7"] {
        assert_code(
            &env.run(&["web", "--max", max, "--yes", "--history-max", "2"]),
            0,
        );
    }
    let before = env.sb.get(HISTORY_PATH).unwrap()["binaryData"].clone();
    fail_the_hpa_write_once(&env);
    let o = env.run(&["web", "--max", "8", "--yes", "--history-max", "2"]);
    assert_ne!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
    assert_eq!(env.bounds().1, 7);
    // Written with the HPA's write (pruning revision 1), then taken back with revision 1
    // restored: the history is as it was, byte for byte.
    assert_eq!(history_writes(&env), 4, "{:?}", env.writes());
    assert_eq!(env.sb.get(HISTORY_PATH).unwrap()["binaryData"], before);
    assert_eq!(revisions(&env), [1, 2]);
    // The next run takes the number back.
    assert_code(
        &env.run(&["web", "--max", "9", "--yes", "--history-max", "2"]),
        0,
    );
    assert_eq!(revisions(&env), [2, 3]);
}

#[test]
fn undoing_an_undo_that_removed_every_route_brings_them_back_with_their_attachment() {
    let env = Env::new();
    // An application with no managed route yet: its first exposure is what gets undone.
    for i in env.ingresses() {
        if i["metadata"]["labels"]["identifier"].is_string() {
            let name = i["metadata"]["name"].as_str().unwrap();
            env.sb.delete(&ingress_path(name)).unwrap();
        }
    }
    let endpoints = env.write_file(
        "endpoints.yaml",
        "endpoints:\n  - path: /a\n  - path: /b\n    scopes: [user]\n",
    );
    let publish = [
        "web",
        "--endpoints",
        endpoints.to_str().unwrap(),
        "--routes",
        "nginx-auth",
        "--auth-url",
        "http://auth.auth.svc/check",
        "--ingress-class",
        "nginx",
        "--yes",
    ];
    assert_code(&env.run(&publish), 0);
    let published = routes(&env);
    // Back to no route, then forward again: the nginx-auth routes come back with their class
    // and auth URL although no route is left to take them from.
    assert_code(&env.run(&["web", "--undo", "--yes"]), 0);
    assert_ne!(routes(&env), published);
    let o = env.run(&["web", "--undo", "--yes"]);
    assert_code(&o, 0);
    assert_eq!(routes(&env), published);
}

#[test]
fn an_undo_sees_no_drift_in_paths_written_with_a_trailing_slash_in_every_style() {
    for (style, extra) in [
        ("nginx-snippet", &[][..]),
        (
            "nginx-auth",
            &["--auth-url", "http://auth.auth.svc/check"][..],
        ),
        (
            "gateway",
            &[
                "--gateway",
                "gateways/public",
                "--auth-service",
                "auth/oauth:8080",
            ][..],
        ),
    ] {
        let env = Env::new();
        let first = env.write_file(
            "first.yaml",
            "endpoints:\n  - path: /a/\n  - path: /\n  - path: /b\n    scopes: [user]\n",
        );
        let second = env.write_file("second.yaml", "endpoints:\n  - path: /a/\n");
        for file in [&first, &second] {
            let mut args = vec![
                "web",
                "--endpoints",
                file.to_str().unwrap(),
                "--routes",
                style,
            ];
            args.extend_from_slice(extra);
            args.push("--yes");
            assert_code(&env.run(&args), 0);
        }
        let o = env.run(&["web", "--undo", "--yes"]);
        assert_code(&o, 0);
        assert!(
            !stderr(&o).contains("changed since"),
            "{style}: {}",
            stderr(&o)
        );
    }
}

/// The `-o json` plan of a dry run with `args`.
fn dry_plan(env: &Env, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["--dry-run", "-o", "json"]);
    let o = env.run(&all);
    assert_code(&o, 0);
    serde_json::from_slice(&o.stdout).expect("one plan document")
}

#[test]
fn planted_keys_that_do_not_round_trip_are_listed_never_counted_and_never_undone() {
    let env = Env::new();
    assert_code(&env.run(&["web", "--max", "6", "--yes"]), 0);
    assert_code(&env.run(&["web", "--image", NEW_IMAGE, "--yes"]), 0);
    // A ConfigMap writer plants revision 1's record under a key that reads as 2 and under one
    // that reads as the largest u64 (which made the next revision overflow).
    let rev1 = env.sb.get(HISTORY_PATH).unwrap()["binaryData"]["revision-1.json.gz"].clone();
    env.sb
        .update(HISTORY_PATH, |cm| {
            cm["binaryData"]["revision-02.json.gz"] = rev1.clone();
            cm["binaryData"]["revision-18446744073709551615.json.gz"] = rev1.clone();
        })
        .unwrap();

    // Listed, with why, as keys of no revision.
    let o = env.run(&["history", "web"]);
    assert_code(&o, 0);
    let out = stdout(&o);
    let line = |key: &str| {
        out.lines()
            .find(|l| l.contains(key))
            .unwrap_or_else(|| panic!("{key} is not listed: {out}"))
            .to_owned()
    };
    let planted = line("revision-02.json.gz");
    assert!(planted.starts_with("-  "), "{out}");
    assert!(planted.contains("unverifiable"), "{out}");
    assert!(planted.contains("its revision has a leading zero"), "{out}");
    assert!(planted.contains("never counted or undone"), "{out}");
    assert!(
        line("revision-18446744073709551615.json.gz").contains("above 1000000000"),
        "{out}"
    );
    let doc = history_json(&env);
    assert_eq!(revisions(&env), [1, 2]);
    assert_eq!(
        doc["unverifiableKeys"].as_array().unwrap().len(),
        2,
        "{doc}"
    );

    // --undo and --to-revision 2 pick the same record: revision 2, the image change.
    let undo = dry_plan(&env, &["web", "--undo"]);
    let to_two = dry_plan(&env, &["web", "--to-revision", "2"]);
    assert_eq!(undo["objects"], to_two["objects"]);
    let kinds: Vec<&str> = undo["objects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["action"] != "unchanged")
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["Deployment"], "{undo}");

    // A writing run still works (no panic, no wrap) and records the next canonical revision.
    let o = env.run(&["web", "--max", "7", "--yes"]);
    assert_code(&o, 0);
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
    assert_eq!(env.bounds().1, 7);
    assert_eq!(revisions(&env), [1, 2, 3]);
    let data = env.sb.get(HISTORY_PATH).unwrap()["binaryData"].clone();
    assert!(data["revision-3.json.gz"].is_string(), "{data}");
    assert_eq!(data["revision-02.json.gz"], rev1);
    assert_eq!(data["revision-18446744073709551615.json.gz"], rev1);
    // And the undo of revision 2 is the image change it recorded.
    assert_code(&env.run(&["web", "--to-revision", "2", "--yes"]), 0);
    assert_eq!(env.image(), "registry.example.com/web:1.0");
}

#[test]
fn a_history_at_the_highest_revision_is_not_added_to_and_the_run_says_so() {
    let env = Env::new();
    assert_code(&env.run(&["web", "--max", "6", "--yes"]), 0);
    let rev1 = env.sb.get(HISTORY_PATH).unwrap()["binaryData"]["revision-1.json.gz"].clone();
    env.sb
        .update(HISTORY_PATH, |cm| {
            cm["binaryData"]["revision-1000000000.json.gz"] = rev1.clone();
        })
        .unwrap();
    let before = env.sb.get(HISTORY_PATH).unwrap()["binaryData"].clone();
    let o = env.run(&["web", "--max", "7", "--yes"]);
    assert_code(&o, 0);
    assert_eq!(env.bounds().1, 7);
    let err = stderr(&o);
    assert!(
        err.contains("warning: the changes were made but not recorded in the history, so --undo does not know them: configmap/web-appupdate-history holds revision 1000000000, the highest a record has, so no record can follow it"),
        "{err}"
    );
    assert_eq!(
        err.lines().filter(|l| l.contains("warning")).count(),
        1,
        "{err}"
    );
    assert_eq!(env.sb.get(HISTORY_PATH).unwrap()["binaryData"], before);
}

/// Publishes [`ENDPOINTS`] in the `nginx-auth` style with the auth URL `url`.
fn publish_auth_url(env: &Env, url: &str) {
    let endpoints = env.write_file("endpoints.yaml", ENDPOINTS);
    let o = env.run(&[
        "web",
        "--endpoints",
        endpoints.to_str().unwrap(),
        "--routes",
        "nginx-auth",
        "--auth-url",
        url,
        "--yes",
    ]);
    assert_code(&o, 0);
}

/// The auth URL of every managed Ingress that checks scopes (its annotation without the
/// `?scopes=` query); never empty.
fn auth_urls(env: &Env) -> Vec<String> {
    let urls: Vec<String> = env
        .ingresses()
        .into_iter()
        .filter(|i| i["metadata"]["labels"]["identifier"].is_string())
        .filter_map(|i| {
            let value = i["metadata"]["annotations"]["nginx.ingress.kubernetes.io/auth-url"]
                .as_str()?
                .to_owned();
            Some(value.split('?').next().unwrap_or_default().to_owned())
        })
        .collect();
    assert!(!urls.is_empty());
    urls
}

const AUTH_A: &str = "http://a.auth.svc/check";
const AUTH_B: &str = "http://b.auth.svc/check";
const AUTH_C: &str = "http://c.auth.svc/check";

#[test]
fn an_undo_does_not_overwrite_an_auth_url_changed_since_its_record_unless_forced() {
    let env = Env::new();
    assert_code(&env.run(&["web", "--max", "6", "--yes"]), 0);
    publish_auth_url(&env, AUTH_A); // revision 2: nginx-auth with a
    publish_auth_url(&env, AUTH_B); // revision 3: a → b
    publish_auth_url(&env, AUTH_C); // revision 4: b → c
    assert_eq!(revisions(&env), [1, 2, 3, 4]);
    let before = state(&env);
    assert!(
        auth_urls(&env).iter().all(|u| u == AUTH_C),
        "{:?}",
        auth_urls(&env)
    );

    let writes = env.writes().len();
    let o = env.run(&["web", "--to-revision", "3", "--yes"]);
    assert_code(&o, 5);
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "not undone: the auth URL of the routes of web (auth-url) is now \"{AUTH_C}\" (revision 3 left it at \"{AUTH_B}\"; last set by kubectl-appupdate at "
        )),
        "{err}"
    );
    assert!(
        err.contains("to overwrite exactly these, add --force-undo auth-url"),
        "{err}"
    );
    assert_eq!(env.writes().len(), writes, "{:?}", env.writes());
    assert_eq!(state(&env), before);

    // Named, it is overwritten: revision 3 is undone to the auth URL before it.
    let o = env.run(&[
        "web",
        "--to-revision",
        "3",
        "--yes",
        "--force-undo",
        "auth-url",
    ]);
    assert_code(&o, 0);
    assert!(
        auth_urls(&env).iter().all(|u| u == AUTH_A),
        "{:?}",
        auth_urls(&env)
    );
}

#[test]
fn an_auth_url_changed_by_hand_is_refused_naming_who_changed_it() {
    let env = Env::new();
    publish_auth_url(&env, AUTH_A); // revision 1
    publish_auth_url(&env, AUTH_B); // revision 2: a → b
    // Someone else points the routes at their own auth service.
    let key = "nginx.ingress.kubernetes.io/auth-url";
    for i in env.ingresses() {
        if let Some(url) = i["metadata"]["annotations"][key].as_str() {
            let name = i["metadata"]["name"].as_str().unwrap();
            let theirs = url.replace(AUTH_B, "http://attacker.example/allow-all");
            env.sb
                .update(&ingress_path(name), |o| {
                    o["metadata"]["annotations"][key] = json!(theirs);
                })
                .unwrap();
        }
    }
    let before = state(&env);
    let o = env.run(&["web", "--undo", "--yes"]);
    assert_code(&o, 5);
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "the auth URL of the routes of web (auth-url) is now \"http://attacker.example/allow-all\" (revision 2 left it at \"{AUTH_B}\"; last set by sandbox-competitor at "
        )),
        "{err}"
    );
    assert!(err.contains(", in ingress.networking.k8s.io/web-"), "{err}");
    assert_eq!(state(&env), before);
    // The diff shown before the refusal says what the undo would have written.
    assert!(stdout(&o).contains(AUTH_A), "{}", stdout(&o));
    // Forcing something else is no way around it.
    let o = env.run(&["web", "--undo", "--yes", "--force-undo", "routes"]);
    assert_code(&o, 5);
    assert_eq!(state(&env), before);
}
