//! SIGINT and SIGTERM at the prompt (in a real pty) and while a write is in flight.
//!
//! No timing is relied on: at the prompt the signal is sent once the question is shown and the
//! terminal is raw (the same readiness the prompt tests use, `common::pty`); during apply the
//! real write is held by the sandbox (`Fault::Hold`, dry runs excluded) and the signal is sent
//! once `held()` shows it in flight; the write is released only after the plugin has said it
//! received the signal. Each object write is one request, so nothing can be half-written: the
//! held write either completes whole (and is reported as applied) or, after a second signal,
//! the run exits at once saying it may or may not have landed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::Command;

use common::running::{DEPLOY_PATH, Running, kill, wait_until};
use common::*;
use sandbox_apiserver::Fault;

const USER_INGRESS: &str =
    "/apis/networking.k8s.io/v1/namespaces/shop/ingresses/web-04f8996da763b7a9";
const PUBLIC_INGRESS: &str =
    "/apis/networking.k8s.io/v1/namespaces/shop/ingresses/web-e3b0c44298fc1c14";

// ---------------------------------------------------------------------------------------------
// At the prompt, in a pty

/// Runs the plugin under `sh` in a pty; after it exits, sh prints its exit code and the
/// terminal's modes (`stty -a`), so the test sees whether the terminal was restored.
fn spawn_in_shell(env: &Env, args: &[&str]) -> (rexpect::session::PtySession, u32, String) {
    let bin = assert_cmd::cargo::cargo_bin("kubectl-appupdate");
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("stty -a; echo SHELL_PID=$$; \"$0\" \"$@\"; echo \"EXIT=$?\"; stty -a")
        .arg(bin)
        .arg("--kubeconfig")
        .arg(&env.kubeconfig)
        .args(args);
    scrub(&mut cmd);
    cmd.env("TERM", "xterm-256color");
    let mut p = rexpect::session::spawn_command(cmd, Some(60_000)).expect("spawned in a pty");
    let (modes, pid) = p.exp_regex(r"SHELL_PID=(\d+)").unwrap();
    let shell: u32 = pid.trim_start_matches("SHELL_PID=").parse().unwrap();
    (p, shell, normalize(&modes))
}

/// The plugin: the shell's only child.
fn child_of(shell: u32) -> u32 {
    let mut pid = None;
    wait_until("the plugin process", || {
        let children =
            std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children")).unwrap();
        pid = children
            .split_whitespace()
            .next()
            .map(|p| p.parse().unwrap());
        pid.is_some()
    });
    pid.unwrap()
}

/// `stty -a` output as one line of words.
fn normalize(modes: &str) -> String {
    modes.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn sigterm_at_the_prompt_restores_the_terminal_and_exits_143() {
    signal_at_the_prompt_checked("TERM", 143);
}

#[test]
fn sigint_at_the_prompt_restores_the_terminal_and_exits_130() {
    signal_at_the_prompt_checked("INT", 130);
}

fn signal_at_the_prompt_checked(signal: &str, expected: i32) {
    let env = Env::new();
    let (mut p, shell, modes_before) =
        spawn_in_shell(&env, &["web", "--max", "9", "--color", "never"]);
    pty::wait_for_prompt(
        &mut p,
        "Apply these changes to web in namespace shop (context sandbox):",
    );
    let plugin = child_of(shell);
    kill(plugin, signal);
    let (before, exit) = p.exp_regex(r"EXIT=\d+").unwrap();
    let modes = normalize(&p.exp_eof().unwrap());
    assert!(
        before.contains("interrupted: nothing was changed"),
        "{before:?}"
    );
    assert!(before.contains("\u{1b}[?25h"), "the cursor is shown again");
    assert_eq!(exit, format!("EXIT={expected}"), "{before:?}");
    // stty -a after the plugin: the terminal is as it was before (not raw: canonical mode,
    // signals and the rest back on). Without the restore it read `-isig -icanon … -icrnl -ixon`.
    assert_eq!(modes, modes_before, "terminal modes after SIG{signal}");
    assert!(
        modes.contains(" icanon ") && modes.contains(" isig "),
        "{modes}"
    );
    assert!(env.writes().is_empty());
    assert_eq!(env.bounds(), (2, 5));
}

// ---------------------------------------------------------------------------------------------
// During apply

fn signal_during_apply(signal: &str, expected: i32) {
    let env = Env::new();
    let mut run = Running::with_the_deployment_write_held(&env);
    kill(run.child.id(), signal);
    run.wait_for_stderr("interrupt received: finishing the requests in flight");
    env.sb.release_held();
    let (code, out, err) = run.finish();
    assert_eq!(code, expected, "--- stdout\n{out}\n--- stderr\n{err}");
    // The writes in flight completed whole and are reported; the next round never started.
    assert!(
        out.contains("deployment.apps/web updated (image registry.example.com/web:1.0 → registry.example.com/web:2.0)"),
        "{out}"
    );
    assert!(
        out.contains("ingress.networking.k8s.io/web-e3b0c44298fc1c14 updated"),
        "{out}"
    );
    assert!(
        err.contains("ingress.networking.k8s.io/web-04f8996da763b7a9 NOT deleted: not attempted"),
        "{err}"
    );
    assert!(
        err.contains("The application is partly updated: 1 change was not applied"),
        "{err}"
    );
    assert_eq!(env.image(), "registry.example.com/web:2.0");
    assert!(
        env.sb.get(USER_INGRESS).is_some(),
        "the delete was not sent"
    );
    // Not even the history's record: the interrupt promised no new request.
    assert!(
        err.contains("warning: interrupted before the history was written"),
        "{err}"
    );
    let mut writes: Vec<String> = env
        .writes()
        .iter()
        .map(|w| format!("{} {}", w.method, w.path))
        .collect();
    writes.sort();
    assert_eq!(
        writes,
        vec![
            format!("PATCH {DEPLOY_PATH}"),
            format!("PATCH {PUBLIC_INGRESS}")
        ]
    );
}

#[test]
fn sigint_during_apply_finishes_the_write_in_flight_starts_no_other_and_exits_130() {
    signal_during_apply("INT", 130);
}

#[test]
fn sigterm_during_apply_finishes_the_write_in_flight_starts_no_other_and_exits_143() {
    signal_during_apply("TERM", 143);
}

#[test]
fn a_second_signal_during_apply_exits_at_once_and_says_the_write_may_have_landed() {
    let env = Env::new();
    let mut run = Running::with_the_deployment_write_held(&env);
    kill(run.child.id(), "INT");
    run.wait_for_stderr("interrupt received");
    kill(run.child.id(), "TERM");
    let (code, _out, err) = run.finish();
    assert_eq!(code, 143, "{err}");
    assert!(
        err.contains(
            "interrupted again: exiting now; requests already sent may or may not have been applied"
        ),
        "{err}"
    );
    // Nothing was started after the first signal: the delete waited for the next round.
    assert!(env.sb.get(USER_INGRESS).is_some());
    env.sb.release_held();
}

#[test]
fn a_signal_while_reading_exits_at_once_with_nothing_changed() {
    let env = Env::new();
    env.sb.inject(Fault::Hold {
        method: Some("GET".into()),
        path_prefix: DEPLOY_PATH.into(),
        count: 1,
    });
    let run = Running::start(
        &env,
        &["web", "--image", "registry.example.com/web:2.0", "--yes"],
    );
    wait_until("the read in flight", || env.sb.held() == 1);
    kill(run.child.id(), "TERM");
    let (code, _out, err) = run.finish();
    assert_eq!(code, 143, "{err}");
    assert!(err.contains("interrupted: nothing was changed"), "{err}");
    env.sb.release_held();
    assert!(env.writes().is_empty());
    assert_eq!(env.image(), "registry.example.com/web:1.0");
}
