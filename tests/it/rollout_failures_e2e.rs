//! When a rollout fails: `--wait` says why from the new pods (the emulator's node fails the
//! way a real one does, by image name, with the kubelet's words), stops as soon as the rollout
//! cannot succeed, and `--undo-on-failure` puts the run back — in one cluster and in a fleet
//! in waves. Each test asserts what the user sees (stderr, the exit code) and what the cluster
//! holds afterwards.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::fleet::Fleet;
use common::*;
use sandbox_apiserver::{Rollout, SandboxOptions};

const OLD_IMAGE: &str = "registry.example.com/web:1.0";
const GOOD_IMAGE: &str = "registry.example.com/web:2.0";
/// The emulator's node cannot pull it: containerd's "not found".
const MISSING_IMAGE: &str = "registry.example.com/web:notfound";
/// Starts, exits 1, restarts every 2 s.
const CRASHING_IMAGE: &str = "registry.example.com/web:crash";

fn rolling() -> SandboxOptions {
    SandboxOptions {
        rollout: Rollout::Auto {
            delay: Duration::from_millis(200),
        },
        ..SandboxOptions::default()
    }
}

fn env() -> Env {
    Env::with_options(rolling())
}

/// `web --image IMAGE --yes --wait --timeout TIMEOUT` and `extra`.
fn update_and_wait(env: &Env, image: &str, timeout: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "web",
        "--image",
        image,
        "--yes",
        "--wait",
        "--timeout",
        timeout,
    ];
    args.extend_from_slice(extra);
    env.run(&args)
}

fn history_revisions(env: &Env) -> usize {
    let o = env.run(&["history", "web", "-o", "json"]);
    assert_code(&o, 0);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("history is JSON");
    doc["records"].as_array().map_or(0, Vec::len)
}

#[test]
fn an_image_that_does_not_exist_ends_the_wait_early_and_says_why() {
    let env = env();
    assert_eq!(env.image(), OLD_IMAGE);
    let o = update_and_wait(&env, MISSING_IMAGE, "10m", &[]);
    assert_code(&o, 7);
    let err = stderr(&o);
    assert!(
        err.contains("cannot succeed without someone acting"),
        "ended by --fail-fast, not by the 10m timeout: {err}"
    );
    assert!(err.contains("stopped waiting after"), "{err}");
    assert!(
        err.contains("ErrImagePull") || err.contains("ImagePullBackOff"),
        "{err}"
    );
    assert!(err.contains("not found"), "the kubelet's words: {err}");
    assert!(
        err.lines().any(|l| l.starts_with("  pod web-")),
        "the pod is named, on a line of its own: {err}"
    );
    // The change stays: --undo-on-failure was not asked for.
    assert_eq!(env.image(), MISSING_IMAGE);
}

#[test]
fn without_fail_fast_the_timeout_ends_the_wait_and_still_says_why() {
    let env = env();
    let o = update_and_wait(&env, MISSING_IMAGE, "12s", &["--fail-fast=false"]);
    assert_code(&o, 7);
    let err = stderr(&o);
    assert!(err.contains("timed out after 12s"), "{err}");
    assert!(!err.contains("cannot succeed"), "{err}");
    assert!(err.lines().any(|l| l.starts_with("  pod web-")), "{err}");
}

#[test]
fn a_crash_loop_ends_the_wait_once_it_restarted_as_often_as_asked() {
    let env = env();
    let o = update_and_wait(&env, CRASHING_IMAGE, "10m", &["--crash-restarts", "2"]);
    assert_code(&o, 7);
    let err = stderr(&o);
    assert!(
        err.contains("cannot succeed without someone acting"),
        "{err}"
    );
    assert!(err.contains("CrashLoopBackOff"), "{err}");
}

#[test]
fn undo_on_failure_puts_the_image_back_and_exits_10() {
    let env = env();
    let before = history_revisions(&env);
    let o = update_and_wait(&env, MISSING_IMAGE, "10m", &["--undo-on-failure"]);
    assert_code(&o, 10);
    let err = stderr(&o);
    assert!(
        err.contains("cannot succeed without someone acting"),
        "the failure first: {err}"
    );
    assert!(err.contains("putting back what this run changed"), "{err}");
    assert!(err.contains("was put back"), "{err}");
    assert_eq!(env.image(), OLD_IMAGE, "the image is as it was");
    // The failed run and its put-back are both recorded.
    assert_eq!(history_revisions(&env), before + 2);
}

#[test]
fn undo_on_failure_works_without_a_history() {
    let env = env();
    let o = update_and_wait(
        &env,
        MISSING_IMAGE,
        "10m",
        &["--rollback-on-failure", "--history-max", "0"],
    );
    assert_code(&o, 10);
    assert_eq!(env.image(), OLD_IMAGE);
}

#[test]
fn undo_on_failure_leaves_a_healthy_rollout_alone() {
    let env = env();
    let o = update_and_wait(&env, GOOD_IMAGE, "2m", &["--undo-on-failure"]);
    assert_code(&o, 0);
    assert!(!stderr(&o).contains("putting back"), "{}", stderr(&o));
    assert_eq!(env.image(), GOOD_IMAGE);
}

#[test]
fn a_saved_plan_applied_with_undo_on_failure_is_put_back_too() {
    let env = env();
    let plan = env.dir.path().join("plan.json");
    let o = env.run(&[
        "web",
        "--image",
        MISSING_IMAGE,
        "--plan-out",
        plan.to_str().unwrap(),
    ]);
    assert_code(&o, 0);
    let o = env.run(&[
        "apply",
        plan.to_str().unwrap(),
        "--yes",
        "--undo-on-failure",
        "--timeout",
        "10m",
    ]);
    assert_code(&o, 10);
    assert_eq!(env.image(), OLD_IMAGE);
}

/// Three waves of one cluster each; in the second, a quota of 2 pods leaves no room for the
/// new pods, so its rollout never completes (the old pods stay, so putting it back does).
fn three_waves() -> Fleet {
    three_waves_failing_in(&["w2"])
}

/// Three waves of one cluster each, `failing` with a quota of 2 pods.
fn three_waves_failing_in(failing: &[&str]) -> Fleet {
    let fleet = Fleet::with(&["w1", "w2", "w3"], |_| rolling());
    for name in failing {
        fleet
            .sb(name)
            .create(
                "/api/v1/namespaces/shop/resourcequotas",
                serde_json::json!({
                    "apiVersion": "v1", "kind": "ResourceQuota",
                    "metadata": {"name": "pods"},
                    "spec": {"hard": {"pods": "2"}}
                }),
            )
            .expect("the quota is created");
        // The quota refuses new pods once it has counted the ones running.
        common::running::wait_until("the quota to count the running pods", || {
            fleet
                .sb(name)
                .get("/api/v1/namespaces/shop/resourcequotas/pods")
                .is_some_and(|q| q["status"]["used"]["pods"] == "2")
        });
    }
    fleet
}

#[test]
fn a_fleet_that_fails_in_its_second_wave_puts_back_waves_one_and_two_and_leaves_three_alone() {
    let fleet = three_waves();
    let o = fleet.run(&[
        "web",
        "--wave",
        "w1",
        "--wave",
        "w2",
        "--wave",
        "w3",
        "--image",
        GOOD_IMAGE,
        "--yes",
        "--undo-on-failure",
        "--timeout",
        "8s",
        "-o",
        "json",
    ]);
    assert_code(&o, 10);
    assert_eq!(fleet.image("w1"), OLD_IMAGE, "wave 1 put back");
    assert_eq!(fleet.image("w2"), OLD_IMAGE, "wave 2 put back");
    assert_eq!(fleet.image("w3"), OLD_IMAGE, "wave 3 never started");
    assert!(
        fleet.app_writes("w3").is_empty(),
        "nothing written in wave 3"
    );
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON document");
    let clusters = doc["clusters"].as_array().unwrap();
    let by = |c: &str| clusters.iter().find(|x| x["context"] == c).unwrap();
    assert_eq!(by("w1")["outcome"]["putBack"]["complete"], true);
    assert_eq!(by("w2")["outcome"]["putBack"]["complete"], true);
    assert_eq!(by("w2")["outcome"]["rollout"]["complete"], false);
    assert_eq!(
        by("w2")["outcome"]["rollout"]["reasons"]["replicaFailure"]["reason"],
        "FailedCreate",
        "the reasons are data: {}",
        by("w2")["outcome"]
    );
    assert!(by("w3")["outcome"]["putBack"].is_null());
    assert_eq!(by("w3")["outcome"]["status"], "not-started");
}

#[cfg(unix)]
#[test]
fn a_signal_during_the_wait_puts_nothing_back_and_gives_the_undo_command() {
    use common::running::Running;
    let env = Env::with_options(SandboxOptions {
        rollout: Rollout::Stuck,
        ..SandboxOptions::default()
    });
    let mut run = Running::start(
        &env,
        &[
            "web",
            "--image",
            GOOD_IMAGE,
            "--yes",
            "--undo-on-failure",
            "--timeout",
            "10m",
        ],
    );
    run.wait_for_stderr("Waiting for the rollout of deployment.apps/web");
    run.signal("INT");
    let (code, _, err) = run.finish();
    assert_eq!(code, 130, "{err}");
    assert!(err.contains("nothing was put back"), "{err}");
    assert!(
        err.contains("kubectl appupdate web -n shop --context sandbox --undo"),
        "{err}"
    );
    assert_eq!(env.image(), GOOD_IMAGE, "no write after the signal");
}

#[cfg(unix)]
#[test]
fn a_value_moved_by_someone_else_during_the_wait_is_not_put_back_but_listed_and_exits_11() {
    use common::running::Running;
    let env = env();
    let (min, max) = env.bounds();
    let new_max = (max + 2).to_string();
    let mut run = Running::start(
        &env,
        &[
            "web",
            "--image",
            MISSING_IMAGE,
            "--max",
            &new_max,
            "--yes",
            "--undo-on-failure",
            "--timeout",
            "10m",
        ],
    );
    run.wait_for_stderr("Waiting for the rollout of deployment.apps/web");
    // Someone else moves the bound this run just wrote.
    env.sb
        .update(
            "/apis/autoscaling/v2/namespaces/shop/horizontalpodautoscalers/web",
            |hpa| hpa["spec"]["maxReplicas"] = serde_json::json!(max + 5),
        )
        .expect("the autoscaler is updated");
    let (code, _, err) = run.finish();
    assert_eq!(code, 11, "{err}");
    assert!(err.contains("NOT put back completely"), "{err}");
    assert!(
        err.lines()
            .any(|l| l.starts_with("  - max of ") && l.contains("left as it is")),
        "{err}"
    );
    assert_eq!(env.image(), OLD_IMAGE, "the image is put back");
    assert_eq!(
        env.bounds(),
        (min, max + 5),
        "the moved bound is left as it is"
    );
}

#[test]
fn an_account_that_may_not_list_the_pods_is_told_the_reasons_are_not_readable() {
    let env = env();
    env.sb.inject(sandbox_apiserver::Fault::Status {
        method: Some("GET".into()),
        path_prefix: "/apis/apps/v1/namespaces/shop/replicasets".into(),
        status: 403,
        count: 1000,
    });
    let o = update_and_wait(&env, MISSING_IMAGE, "12s", &[]);
    assert_code(&o, 7);
    let err = stderr(&o);
    assert!(
        err.contains("timed out after 12s"),
        "no reasons, no early stop: {err}"
    );
    assert!(
        err.lines().any(|l| l
            .trim_start()
            .starts_with("reasons not readable: forbidden")),
        "{err}"
    );
}

#[test]
fn within_each_waves_failure_budget_only_the_failed_clusters_are_put_back_and_the_run_goes_on() {
    // One failure in wave 1 and one in wave 2: each wave within --max-failed 1.
    let fleet = three_waves_failing_in(&["w1", "w2"]);
    let o = fleet.run(&[
        "web",
        "--wave",
        "w1",
        "--wave",
        "w2",
        "--wave",
        "w3",
        "--max-failed",
        "1",
        "--image",
        GOOD_IMAGE,
        "--yes",
        "--undo-on-failure",
        "--timeout",
        "8s",
    ]);
    assert_code(&o, 10);
    assert_eq!(
        fleet.image("w1"),
        OLD_IMAGE,
        "wave 1's failed cluster is put back"
    );
    assert_eq!(
        fleet.image("w2"),
        OLD_IMAGE,
        "wave 2's failed cluster is put back"
    );
    assert_eq!(
        fleet.image("w3"),
        GOOD_IMAGE,
        "wave 3 went on, within the budget"
    );
}
