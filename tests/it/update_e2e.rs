//! The real binary against the sandbox API server, through a generated kubeconfig: image and
//! autoscaler updates, dry runs, confirmation refusal, conflicts, the approved-diff guard,
//! errors, and kubeconfig resolution. Each test checks what the user sees and the cluster
//! state afterwards.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use predicates::prelude::*;
use sandbox_apiserver::{Fault, Trigger};
use serde_json::json;

const DEPLOY_PATH: &str = "/apis/apps/v1/namespaces/shop/deployments/web";
const HPA_PATH: &str = "/apis/autoscaling/v2/namespaces/shop/horizontalpodautoscalers/web";

#[test]
fn image_only_update_lands_and_says_so() {
    let env = Env::new();
    let before_replicas = env.deployment()["spec"]["replicas"].clone();
    let o = env.run(&["web", "--image", "registry.example.com/web:2.0", "--yes"]);
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(out.contains("registry.example.com/web:2.0"), "{out}");
    assert!(
        out.contains("Plan: 0 to create, 1 to update, 0 to delete."),
        "{out}"
    );
    assert!(out.contains("deployment.apps/web updated"), "{out}");
    assert_eq!(env.image(), "registry.example.com/web:2.0");
    // spec.replicas is the HPA's: never sent, never changed.
    assert_eq!(env.deployment()["spec"]["replicas"], before_replicas);
    assert_eq!(env.bounds(), (2, 5));
    // One object: no dry run, one real patch (the write is its own check).
    let writes = env.app_writes();
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert_eq!(writes[0].method, "PATCH");
    let dry_runs: Vec<_> = env
        .sb
        .requests()
        .into_iter()
        .filter(|r| r.dry_run)
        .collect();
    assert!(dry_runs.is_empty(), "{dry_runs:?}");
}

#[test]
fn two_objects_are_dry_run_before_either_is_written() {
    let env = Env::new();
    let o = env.run(&[
        "web",
        "--image",
        "registry.example.com/web:2.0",
        "--max",
        "9",
        "--yes",
    ]);
    assert_code(&o, 0);
    let log = env.sb.requests();
    let dry_runs: Vec<_> = log.iter().filter(|r| r.dry_run).map(|r| &r.path).collect();
    assert_eq!(dry_runs.len(), 2, "{dry_runs:?}");
    assert!(dry_runs.contains(&&DEPLOY_PATH.to_owned()), "{dry_runs:?}");
    assert!(dry_runs.contains(&&HPA_PATH.to_owned()), "{dry_runs:?}");
    // Every dry run came before the first real write.
    let first_write = log
        .iter()
        .position(|r| !r.dry_run && r.method == "PATCH")
        .unwrap();
    let last_dry_run = log.iter().rposition(|r| r.dry_run).unwrap();
    assert!(last_dry_run < first_write, "{log:?}");
}

/// The Deployment's `kubernetes.io/change-cause`, as kubectl reads it.
fn change_cause(env: &Env) -> String {
    let direct = env.dir.path().join("direct-kubeconfig");
    env.sb.write_kubeconfig(&direct, NS).unwrap();
    let o = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&direct)
        .args(["-n", NS, "get", "deployment", APP, "-o"])
        .arg(r"jsonpath={.metadata.annotations.kubernetes\.io/change-cause}")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o)
}

#[test]
fn an_image_change_says_what_changed_where_kubectl_rollout_history_looks() {
    let env = Env::new();
    let o = env.run(&["web", "--image", "registry.example.com/web:2.0", "--yes"]);
    assert_code(&o, 0);
    let cause = "kubectl-appupdate: image registry.example.com/web:1.0 → registry.example.com/web:2.0 (revision 1)";
    // Shown in the diff before it is written…
    let out = stdout(&o);
    assert!(
        out.contains(&format!(
            "  +   annotations:\n  +     kubernetes.io/change-cause: \"{cause}\"\n"
        )),
        "{out}"
    );
    assert!(out.contains("recorded as revision 1"), "{out}");
    // …written with the image, in the one conditional patch…
    assert_eq!(
        env.deployment()["metadata"]["annotations"]["kubernetes.io/change-cause"],
        cause
    );
    let writes = env.app_writes();
    assert_eq!(writes.len(), 1, "{writes:?}");
    // …and read by kubectl. The deployment controller copies it to the new ReplicaSet, where
    // `kubectl rollout history deployment/web` lists it; the sandbox runs no ReplicaSets, so
    // the Deployment's own annotation is what this checks.
    assert_eq!(change_cause(&env), cause);

    // A run that leaves the image alone leaves the annotation alone.
    assert_code(&env.run(&["web", "--max", "9", "--yes"]), 0);
    assert_eq!(change_cause(&env), cause);
    // The next image change names the next revision (the bounds took 2).
    assert_code(
        &env.run(&["web", "--image", "registry.example.com/web:2.1", "--yes"]),
        0,
    );
    assert_eq!(
        change_cause(&env),
        "kubectl-appupdate: image registry.example.com/web:2.0 → registry.example.com/web:2.1 (revision 3)"
    );
    // A run that records no history names no revision.
    assert_code(
        &env.run(&[
            "web",
            "--image",
            "registry.example.com/web:2.2",
            "--history-max",
            "0",
            "--yes",
        ]),
        0,
    );
    assert_eq!(
        change_cause(&env),
        "kubectl-appupdate: image registry.example.com/web:2.1 → registry.example.com/web:2.2"
    );
}

#[test]
fn min_only_update_lands() {
    let env = Env::new();
    let o = env.run(&["web", "--min", "3", "--yes"]);
    assert_code(&o, 0);
    assert_eq!(env.bounds(), (3, 5));
    assert_eq!(env.image(), "registry.example.com/web:1.0");
}

#[test]
fn max_only_update_lands() {
    let env = Env::new();
    let o = env.run(&["web", "--max", "9", "--yes"]);
    assert_code(&o, 0);
    assert_eq!(env.bounds(), (2, 9));
}

#[test]
fn image_min_and_max_together_land() {
    let env = Env::new();
    let o = env.run(&[
        "web",
        "--image",
        "registry.example.com/web:2.1",
        "--min",
        "3",
        "--max",
        "8",
        "--yes",
    ]);
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(
        out.contains("Plan: 0 to create, 2 to update, 0 to delete."),
        "{out}"
    );
    assert!(
        out.contains("horizontalpodautoscaler.autoscaling/web updated"),
        "{out}"
    );
    assert_eq!(env.image(), "registry.example.com/web:2.1");
    assert_eq!(env.bounds(), (3, 8));
    let writes = env.app_writes();
    assert_eq!(writes.len(), 2, "{writes:?}");
}

#[test]
fn no_op_run_says_no_changes_and_writes_nothing() {
    let env = Env::new();
    let o = env.run(&[
        "web",
        "--image",
        "registry.example.com/web:1.0",
        "--min",
        "2",
    ]);
    assert_code(&o, 0);
    assert!(stdout(&o).contains("No changes."), "{}", stdout(&o));
    assert!(env.writes().is_empty());
    let dry_runs = env.sb.requests().iter().filter(|r| r.dry_run).count();
    assert_eq!(dry_runs, 0);
}

#[test]
fn dry_run_shows_the_plan_and_changes_nothing() {
    let env = Env::new();
    let o = env.run(&["web", "--max", "7", "--dry-run"]);
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(out.contains("maxReplicas: 7"), "{out}");
    assert!(
        out.contains("Plan: 0 to create, 1 to update, 0 to delete."),
        "{out}"
    );
    assert_eq!(env.bounds(), (2, 5));
    assert!(env.writes().is_empty());
}

#[test]
fn dry_run_with_detailed_exitcode_gives_2_for_changes_and_0_for_none() {
    let env = Env::new();
    let o = env.run(&["web", "--max", "7", "--dry-run", "--detailed-exitcode"]);
    assert_code(&o, 2);
    let o = env.run(&["web", "--max", "5", "--dry-run", "--detailed-exitcode"]);
    assert_code(&o, 0);
    assert!(stdout(&o).contains("No changes."));
    assert_eq!(env.bounds(), (2, 5));
}

#[test]
fn without_a_terminal_and_without_yes_it_refuses_and_changes_nothing() {
    let env = Env::new();
    let o = env
        .cmd()
        .args(["web", "--image", "registry.example.com/web:2.0"])
        .write_stdin("y\n")
        .output()
        .unwrap();
    assert_code(&o, 4);
    let err = stderr(&o);
    assert!(err.contains("no terminal"), "{err}");
    assert!(err.contains("--yes"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert_eq!(env.image(), "registry.example.com/web:1.0");
    assert!(env.writes().is_empty());
}

#[test]
fn conflicts_below_the_retry_bound_are_retried_and_succeed() {
    let env = Env::new();
    env.sb.inject(Fault::Conflicts {
        object_path: HPA_PATH.into(),
        count: 4,
    });
    let o = env.run(&["web", "--max", "9", "--yes"]);
    assert_code(&o, 0);
    assert_eq!(env.bounds(), (2, 9));
    let conflicts = env.sb.counters().conflicts;
    assert_eq!(conflicts, 4);
}

#[test]
fn conflicts_beyond_the_retry_bound_fail_cleanly_with_nothing_changed() {
    // Two objects: the conflicts are met by the HPA's dry run, before any write.
    let env = Env::new();
    env.sb.inject(Fault::Conflicts {
        object_path: HPA_PATH.into(),
        count: 50,
    });
    let o = env.run(&[
        "web",
        "--image",
        "registry.example.com/web:2.0",
        "--max",
        "9",
        "--yes",
        "--retries",
        "3",
    ]);
    assert_code(&o, 1);
    let err = stderr(&o);
    assert!(err.contains("still conflicting after 3 attempts"), "{err}");
    assert!(err.contains("Nothing was changed."), "{err}");
    assert_eq!(env.bounds(), (2, 5));
    assert_eq!(env.image(), "registry.example.com/web:1.0");
    assert!(env.writes().is_empty());
}

#[test]
fn conflicts_beyond_the_retry_bound_on_the_one_write_fail_cleanly_with_nothing_changed() {
    // One object, no dry run: the conflicts are met by the write itself.
    let env = Env::new();
    env.sb.inject(Fault::Conflicts {
        object_path: HPA_PATH.into(),
        count: 50,
    });
    let o = env.run(&["web", "--max", "9", "--yes", "--retries", "3"]);
    assert_code(&o, 1);
    let err = stderr(&o);
    assert!(err.contains("still conflicting after 3 attempts"), "{err}");
    assert!(err.contains("Nothing was changed."), "{err}");
    assert!(!err.contains("warning"), "{err}");
    assert_eq!(env.bounds(), (2, 5));
    // Three attempts, each refused with a conflict; nothing else of the app was written.
    let writes = env.app_writes();
    assert_eq!(writes.len(), 3, "{writes:?}");
    assert!(
        writes
            .iter()
            .all(|w| w.path == HPA_PATH && w.method == "PATCH" && w.status == 409),
        "{writes:?}"
    );
    // The record that rode with the first attempt was taken back: no history.
    let o = env.run(&["history", "web"]);
    assert_code(&o, 0);
    assert!(stderr(&o).contains("No recorded changes"), "{}", stderr(&o));
}

#[test]
fn a_competing_image_change_after_the_read_trips_the_guard() {
    let env = Env::new();
    env.sb.inject(Fault::CompetingWrite {
        object_path: DEPLOY_PATH.into(),
        after: Trigger::Read,
        mutate: Box::new(|d| {
            d["spec"]["template"]["spec"]["containers"][0]["image"] =
                json!("registry.example.com/web:1.5-hotfix");
        }),
    });
    let o = env.run(&["web", "--image", "registry.example.com/web:2.0", "--yes"]);
    assert_code(&o, 5);
    let err = stderr(&o);
    assert!(err.contains("1.5-hotfix"), "the new diff is shown: {err}");
    assert!(err.contains("NOT updated"), "{err}");
    // The competitor's image stays: nothing nobody saw was applied.
    assert_eq!(env.image(), "registry.example.com/web:1.5-hotfix");
}

#[test]
fn a_competing_label_change_is_merged_through() {
    let env = Env::new();
    env.sb.inject(Fault::CompetingWrite {
        object_path: DEPLOY_PATH.into(),
        after: Trigger::Read,
        mutate: Box::new(|d| {
            d["metadata"]["labels"]["team"] = json!("payments");
        }),
    });
    let o = env.run(&["web", "--image", "registry.example.com/web:2.0", "--yes"]);
    assert_code(&o, 0);
    assert_eq!(env.image(), "registry.example.com/web:2.0");
    assert_eq!(env.deployment()["metadata"]["labels"]["team"], "payments");
    assert!(env.sb.counters().conflicts >= 1);
}

#[test]
fn a_missing_deployment_is_one_clear_line() {
    let env = Env::new();
    let o = env.run(&["shop-api", "--image", "registry.example.com/api:2", "--yes"]);
    assert_code(&o, 1);
    let err = stderr(&o);
    assert_eq!(
        err.trim(),
        "error: deployment.apps/shop-api not found in namespace \"shop\" (context \"sandbox\"); check the name and -n/--namespace"
    );
}

#[test]
fn the_read_only_identity_is_forbidden_and_nothing_changes() {
    let env = Env::new();
    let o = env.run(&[
        "web",
        "--image",
        "registry.example.com/web:2.0",
        "--yes",
        "--context",
        "sandbox-readonly",
    ]);
    assert_code(&o, 1);
    let err = stderr(&o);
    assert!(
        err.contains("forbidden: you cannot patch deployment.apps/web"),
        "{err}"
    );
    assert!(err.contains("Nothing was changed."), "{err}");
    assert_eq!(env.image(), "registry.example.com/web:1.0");
}

#[test]
fn min_above_max_is_refused_before_any_request() {
    let env = Env::new();
    let o = env.run(&["web", "--min", "6", "--max", "4"]);
    assert_code(&o, 3);
    assert!(stderr(&o).contains("--min 6 is greater than --max 4"));
    assert!(env.sb.requests().is_empty(), "no request at all");
}

#[test]
fn min_above_the_live_max_is_refused_before_any_write() {
    let env = Env::new();
    let o = env.run(&["web", "--min", "6", "--yes"]);
    assert_code(&o, 3);
    assert_eq!(
        stderr(&o).trim(),
        "error: --min 6 is greater than the maximum 5 currently set on the HorizontalPodAutoscaler; raise --max or lower --min"
    );
    assert!(env.writes().is_empty());
}

#[test]
fn an_invalid_image_is_refused_before_any_request() {
    let env = Env::new();
    let o = env.run(&["web", "--image", "Registry.Example.com/Web:2"]);
    assert_code(&o, 3);
    assert!(stderr(&o).contains("--image \"Registry.Example.com/Web:2\""));
    assert!(env.sb.requests().is_empty());
}

#[test]
fn several_containers_need_container_and_then_update_only_that_one() {
    let env = Env::new();
    env.sb.update(DEPLOY_PATH, |d| {
        let c = &mut d["spec"]["template"]["spec"]["containers"];
        c.as_array_mut().unwrap().push(json!({
            "name": "proxy", "image": "envoyproxy/envoy:v1.30", "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent", "resources": {}
        }));
    })
    .unwrap();
    let o = env.run(&["web", "--image", "envoyproxy/envoy:v1.31", "--yes"]);
    assert_code(&o, 3);
    assert!(
        stderr(&o).contains(&format!(
            "has 2 containers ({}, proxy); choose one with --container",
            env.deployment()["spec"]["template"]["spec"]["containers"][0]["name"]
                .as_str()
                .unwrap()
        )),
        "{}",
        stderr(&o)
    );
    let o = env.run(&[
        "web",
        "--image",
        "envoyproxy/envoy:v1.31",
        "--container",
        "proxy",
        "--yes",
    ]);
    assert_code(&o, 0);
    let d = env.deployment();
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.example.com/web:1.0"
    );
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][1]["image"],
        "envoyproxy/envoy:v1.31"
    );
}

#[test]
fn kubeconfig_from_two_files_first_one_wins_and_sets_the_context() {
    let env = Env::new();
    // File 1: only current-context (readonly); file 2: the full sandbox kubeconfig whose own
    // current-context (admin) loses to file 1's.
    let full = std::fs::read_to_string(&env.kubeconfig).unwrap();
    let first = env.write_file(
        "first",
        "apiVersion: v1\nkind: Config\ncurrent-context: sandbox-readonly\n",
    );
    let second = env.write_file("second", &full);
    let joined = std::env::join_paths([&first, &env.dir.path().join("missing"), &second]).unwrap();
    let o = plugin()
        .env("KUBECONFIG", &joined)
        .args(["web", "--max", "9", "--yes"])
        .output()
        .unwrap();
    assert_code(&o, 1);
    assert!(
        stderr(&o).contains("forbidden"),
        "readonly context was used: {}",
        stderr(&o)
    );
    // --context overrides the merged current-context.
    let o = plugin()
        .env("KUBECONFIG", &joined)
        .args(["web", "--max", "9", "--yes", "--context", "sandbox"])
        .output()
        .unwrap();
    assert_code(&o, 0);
    assert_eq!(env.bounds(), (2, 9));
}

#[test]
fn namespace_comes_from_the_flag_then_the_context() {
    let env = Env::new();
    env.sb.seed_demo_app("staging", "web").unwrap();
    // The context's namespace is shop.
    let o = env.run(&["web", "--max", "6", "--yes"]);
    assert_code(&o, 0);
    assert_eq!(env.bounds(), (2, 6));
    // -n wins.
    let o = env.run(&["web", "--max", "7", "--yes", "-n", "staging"]);
    assert_code(&o, 0);
    let staging = env
        .sb
        .get("/apis/autoscaling/v2/namespaces/staging/horizontalpodautoscalers/web")
        .unwrap();
    assert_eq!(staging["spec"]["maxReplicas"], 7);
    assert_eq!(env.bounds(), (2, 6));
    // A context without a namespace means "default", where there is no app.
    let kc = env.write_file(
        "nons",
        &std::fs::read_to_string(&env.kubeconfig)
            .unwrap()
            .replace("namespace: \"shop\"", "namespace: \"\""),
    );
    let o = plugin()
        .arg("--kubeconfig")
        .arg(&kc)
        .args(["web", "--max", "8", "--yes"])
        .output()
        .unwrap();
    assert_code(&o, 1);
    assert!(
        stderr(&o).contains("in namespace \"default\""),
        "{}",
        stderr(&o)
    );
}

#[test]
fn an_unknown_context_is_a_kubeconfig_error() {
    let env = Env::new();
    let o = env.run(&["web", "--max", "9", "--context", "prod"]);
    assert_code(&o, 3);
    let err = stderr(&o);
    assert!(err.contains("context \"prod\" does not exist"), "{err}");
    assert!(err.contains("sandbox, sandbox-invalid"), "{err}");
    assert!(env.sb.requests().is_empty());
}

#[test]
fn an_unknown_token_is_unauthorized() {
    let env = Env::new();
    let o = env.run(&["web", "--max", "9", "--context", "sandbox-invalid"]);
    assert_code(&o, 1);
    assert!(stderr(&o).contains("401 Unauthorized"), "{}", stderr(&o));
}

#[test]
fn help_shows_examples_and_exit_codes() {
    plugin()
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("Usage: kubectl appupdate"))
        .stdout(predicate::str::contains("Exit codes:"))
        .stdout(predicate::str::contains("--detailed-exitcode"));
}

#[test]
fn an_exec_credential_plugin_supplies_the_token() {
    let env = Env::new();
    let token = env.sb.token(sandbox_apiserver::Identity::Admin);
    let credential = format!(
        r#"{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{{"token":"{token}"}}}}"#
    );
    let plugin_script = env.write_file(
        "credential-plugin.sh",
        &format!("#!/bin/sh\nprintf '%s' '{credential}'\n"),
    );
    // The sandbox kubeconfig with a fifth user whose credentials come from the plugin.
    let exec_user = format!(
        "users:\n- name: exec-admin\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: sh\n      args: [{:?}]\n      interactiveMode: Never\n",
        plugin_script.to_str().unwrap()
    );
    let kubeconfig = std::fs::read_to_string(&env.kubeconfig)
        .unwrap()
        .replacen("users:\n", &exec_user, 1);
    let kc = env.write_file("exec-kubeconfig", &kubeconfig);
    let o = plugin()
        .arg("--kubeconfig")
        .arg(&kc)
        .args(["web", "--max", "11", "--yes", "--user", "exec-admin"])
        .output()
        .unwrap();
    assert_code(&o, 0);
    assert_eq!(env.bounds(), (2, 11));
    // Every request was the admin identity, authenticated with the plugin's token.
    assert!(env.sb.requests().iter().all(|r| r.user == "admin"));
}
