//! `--wait` against the emulator's rollout simulation: a rollout that completes, one that
//! stalls (the `--timeout` message names the object and what it was waiting for), and one that
//! exceeds its progress deadline. Plain lines when stderr is not a terminal, a progress bar in a
//! pty. Exit code 7 whenever the writes landed but the rollout did not complete.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::*;
use sandbox_apiserver::{Rollout, SandboxOptions};

const NEW_IMAGE: &str = "registry.example.com/web:2.0";

fn env_with(rollout: Rollout) -> Env {
    Env::with_options(SandboxOptions {
        rollout,
        ..SandboxOptions::default()
    })
}

fn auto() -> Rollout {
    Rollout::Auto {
        delay: Duration::from_millis(300),
    }
}

fn rollout_status(env: &Env) -> (i64, i64, i64, i64) {
    let d = env.deployment();
    (
        d["metadata"]["generation"].as_i64().unwrap_or(-1),
        d["status"]["observedGeneration"].as_i64().unwrap_or(-1),
        d["status"]["updatedReplicas"].as_i64().unwrap_or(-1),
        d["status"]["availableReplicas"].as_i64().unwrap_or(-1),
    )
}

/// `web --image NEW_IMAGE --yes --wait --timeout <timeout>`.
fn update_and_wait(env: &Env, timeout: &str) -> std::process::Output {
    env.run(&[
        "web",
        "--image",
        NEW_IMAGE,
        "--yes",
        "--wait",
        "--timeout",
        timeout,
    ])
}

#[test]
fn a_completed_rollout_is_followed_in_plain_lines_and_exits_0() {
    let env = env_with(auto());
    let o = update_and_wait(&env, "2m");
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(out.contains("deployment.apps/web updated"), "{out}");
    let err = stderr(&o);
    assert!(
        err.contains(
            "deployment.apps/web successfully rolled out (2 replicas updated and available)"
        ),
        "{err}"
    );
    // Plain lines only: no progress bar, no escape codes, nothing but rollout lines.
    assert!(!err.contains('\u{1b}'), "{err:?}");
    for line in err.lines() {
        assert!(
            line.starts_with("Waiting for the rollout of deployment.apps/web: ")
                || line.starts_with("deployment.apps/web successfully rolled out"),
            "unexpected stderr line {line:?}"
        );
    }
    // The rollout really is complete when the command returns.
    let (generation, observed, updated, available) = rollout_status(&env);
    assert_eq!(observed, generation);
    assert_eq!((updated, available), (2, 2));
    assert_eq!(env.image(), NEW_IMAGE);
}

#[test]
fn the_rollout_is_followed_with_one_watch_on_the_one_deployment() {
    let env = env_with(auto());
    let o = env.run(&["web", "--image", NEW_IMAGE, "--yes", "--wait"]);
    assert_code(&o, 0);
    let follows: Vec<_> = env
        .sb
        .requests()
        .into_iter()
        .filter(|r| {
            r.method == "GET"
                && r.path == "/apis/apps/v1/namespaces/shop/deployments"
                && r.query.contains("fieldSelector=metadata.name=web")
        })
        .collect();
    assert!(!follows.is_empty(), "a list+watch of the Deployment");
    assert!(
        follows.iter().any(|r| r.query.contains("watch=true")),
        "{follows:?}"
    );
    // Only the one object, never the whole namespace.
    assert!(
        env.sb
            .requests()
            .iter()
            .filter(|r| r.query.contains("watch=true"))
            .all(|r| r.query.contains("fieldSelector=metadata.name=web")),
    );
}

#[test]
fn a_stalled_rollout_times_out_naming_the_deployment_and_what_it_waited_for() {
    let env = env_with(Rollout::Stuck);
    let o = update_and_wait(&env, "4s");
    assert_code(&o, 7);
    let err = stderr(&o);
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(
            "error: timed out after 4s waiting for the rollout of deployment.apps/web in namespace \"shop\" (context \"sandbox\"): "
        ),
        "{err}"
    );
    assert!(last.contains("1 of 2 new replicas updated"), "{err}");
    assert!(
        last.contains("the changes were applied")
            && last.contains("kubectl rollout status deployment/web -n shop"),
        "{err}"
    );
    // The write did land: exit 7 is not "nothing changed".
    assert!(stdout(&o).contains("deployment.apps/web updated"));
    assert_eq!(env.image(), NEW_IMAGE);
}

#[test]
fn a_rollout_past_its_progress_deadline_fails_at_once_with_exit_7() {
    let env = env_with(Rollout::ProgressDeadlineExceeded);
    // A long timeout: the failure must come from the condition, not from the clock.
    let o = update_and_wait(&env, "10m");
    assert_code(&o, 7);
    let err = stderr(&o);
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: the rollout of deployment.apps/web in namespace \"shop\" (context \"sandbox\") failed: exceeded its progress deadline"),
        "{err}"
    );
    assert!(last.contains("has timed out progressing"), "{err}");
    // Said once, by the error, not also as a progress line.
    assert_eq!(
        err.matches("exceeded its progress deadline").count(),
        1,
        "{err}"
    );
    assert_eq!(env.image(), NEW_IMAGE);
}

#[test]
fn a_rerun_with_the_same_image_waits_for_the_rollout_again() {
    let env = env_with(Rollout::Stuck);
    let o = update_and_wait(&env, "1s");
    assert_code(&o, 7);
    // The pipeline retries: nothing to write, but the rollout is still not done.
    let o = update_and_wait(&env, "1s");
    assert_code(&o, 7);
    assert!(stdout(&o).contains("No changes."), "{}", stdout(&o));
    assert!(stderr(&o).contains("timed out after 1s"), "{}", stderr(&o));
    // Once the controller catches up, the same re-run succeeds.
    env.sb.set_rollout(auto());
    let o = update_and_wait(&env, "2m");
    assert_code(&o, 0);
    assert!(
        stderr(&o).contains("successfully rolled out"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_dry_run_never_waits() {
    let env = env_with(Rollout::Stuck);
    let o = env.run(&["web", "--image", NEW_IMAGE, "--dry-run", "--wait"]);
    assert_code(&o, 0);
    assert_eq!(env.sb.counters().watches, 0);
    assert!(env.writes().is_empty());
}

#[test]
fn wait_without_an_image_or_a_route_written_has_nothing_to_follow() {
    // A stuck rollout: following it would time out.
    let env = env_with(Rollout::Stuck);
    let o = env.run(&["web", "--max", "7", "--yes", "--wait", "--timeout", "2s"]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("horizontalpodautoscaler.autoscaling/web updated"),
        "{}",
        stdout(&o)
    );
    assert_eq!(stderr(&o), "");
    assert_eq!(env.sb.counters().watches, 0);
    assert_eq!(env.bounds().1, 7);
}

/// In a terminal, the wait shows an indicatif bar on stderr and ends with the same final line.
#[test]
fn on_a_terminal_the_wait_shows_a_progress_bar() {
    let env = env_with(Rollout::Auto {
        delay: Duration::from_millis(1500),
    });
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("kubectl-appupdate"));
    scrub(&mut cmd);
    cmd.env("TERM", "xterm-256color");
    cmd.arg("--kubeconfig").arg(&env.kubeconfig).args([
        "web", "--image", NEW_IMAGE, "--yes", "--wait", "--color", "never",
    ]);
    let mut p = rexpect::session::spawn_command(cmd, Some(60_000)).expect("spawned in a pty");
    p.exp_string("deployment.apps/web updated").unwrap();
    p.exp_string("rollout of deployment.apps/web [").unwrap();
    p.exp_string("deployment.apps/web successfully rolled out (2 replicas updated and available)")
        .unwrap();
    p.exp_eof().unwrap();
    match p.process().wait().expect("process ends") {
        rexpect::process::WaitStatus::Exited(_, code) => assert_eq!(code, 0),
        other => panic!("unexpected end: {other:?}"),
    }
}
