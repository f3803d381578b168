//! The confirmation prompt in a real pseudo-terminal: answered y, n, and Enter alone (No); a fleet's one question.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::Command;

use common::*;
use rexpect::process::WaitStatus;

fn spawn(env: &Env, args: &[&str]) -> rexpect::session::PtySession {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("kubectl-appupdate"));
    scrub(&mut cmd);
    cmd.env("TERM", "xterm-256color");
    cmd.arg("--kubeconfig").arg(&env.kubeconfig).args(args);
    rexpect::session::spawn_command(cmd, Some(30_000)).expect("spawned in a pty")
}

const QUESTION: &str = "Apply these changes to web in namespace shop (context sandbox):";

fn exit_code(p: &mut rexpect::session::PtySession) -> i32 {
    match p.process().wait().expect("process ends") {
        WaitStatus::Exited(_, code) => code,
        other => panic!("unexpected end: {other:?}"),
    }
}

#[test]
fn answering_y_applies_the_plan() {
    let env = Env::new();
    let mut p = spawn(
        &env,
        &[
            "web",
            "--image",
            "registry.example.com/web:2.0",
            "--color",
            "never",
        ],
    );
    p.exp_string("Plan: 0 to create, 1 to update, 0 to delete.")
        .unwrap();
    pty::wait_for_prompt(&mut p, QUESTION);
    pty::answer(&mut p, &["y", "\r"]);
    p.exp_string("deployment.apps/web updated").unwrap();
    p.exp_eof().unwrap();
    assert_eq!(exit_code(&mut p), 0);
    assert_eq!(env.image(), "registry.example.com/web:2.0");
}

#[test]
fn answering_n_changes_nothing() {
    let env = Env::new();
    let mut p = spawn(&env, &["web", "--max", "9", "--color", "never"]);
    pty::wait_for_prompt(&mut p, QUESTION);
    pty::answer(&mut p, &["n", "\r"]);
    p.exp_string("not confirmed").unwrap();
    p.exp_eof().unwrap();
    assert_eq!(exit_code(&mut p), 4);
    assert_eq!(env.bounds(), (2, 5));
    assert!(env.writes().is_empty());
}

#[test]
fn enter_alone_means_no() {
    let env = Env::new();
    let mut p = spawn(&env, &["web", "--max", "9"]);
    pty::wait_for_prompt(&mut p, QUESTION);
    pty::answer(&mut p, &["\r"]);
    p.exp_eof().unwrap();
    assert_eq!(exit_code(&mut p), 4);
    assert_eq!(env.bounds(), (2, 5));
}

#[test]
fn a_fleet_asks_once_naming_every_cluster_and_the_canary_order() {
    let fleet = common::fleet::Fleet::with(&["eu-1", "eu-2", "us-1"], |_| {
        sandbox_apiserver::SandboxOptions {
            rollout: sandbox_apiserver::Rollout::Auto {
                delay: std::time::Duration::from_millis(200),
            },
            ..sandbox_apiserver::SandboxOptions::default()
        }
    });
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("kubectl-appupdate"));
    scrub(&mut cmd);
    cmd.env("TERM", "xterm-256color");
    cmd.arg("--kubeconfig").arg(&fleet.kubeconfig).args([
        "web",
        "--contexts",
        "eu-1,eu-2,us-1",
        "--canary",
        "eu-1",
        "--image",
        common::fleet::NEW_IMAGE,
        "--color",
        "never",
    ]);
    let mut p = rexpect::session::spawn_command(cmd, Some(30_000)).expect("spawned in a pty");
    pty::wait_for_prompt(
        &mut p,
        "Apply these changes to web on 3 clusters (eu-1, eu-2, us-1; eu-1 first, the rest after its rollout): 0 to create, 3 to update, 0 to delete in total.",
    );
    pty::answer(&mut p, &["y", "\r"]);
    p.exp_string("Fleet: 3 of 3 clusters updated.").unwrap();
    p.exp_eof().unwrap();
    assert_eq!(exit_code(&mut p), 0);
    for name in ["eu-1", "eu-2", "us-1"] {
        assert_eq!(fleet.image(name), common::fleet::NEW_IMAGE, "{name}");
    }
}

/// What the terminal shows of `text`: without escape sequences, the part after the last line
/// break or carriage return.
fn last_visible_line(text: &str) -> String {
    let plain = regex::Regex::new(r"\x1b\[[0-9;?]*[A-Za-z]")
        .unwrap()
        .replace_all(text, "");
    plain
        .rsplit(['\n', '\r'])
        .next()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn the_question_fits_narrow_terminals_and_is_drawn_once() {
    for columns in [60u16, 80] {
        let env = Env::new();
        let mut p = spawn(&env, &["web", "--max", "9", "--color", "never"]);
        let master = p.process().get_file_handle().unwrap();
        rustix::termios::tcsetwinsize(
            &master,
            rustix::termios::Winsize {
                ws_row: 24,
                ws_col: columns,
                ws_xpixel: 0,
                ws_ypixel: 0,
            },
        )
        .unwrap();
        let before = p.exp_string(QUESTION).unwrap();
        let (summary, _) = p.exp_regex(r"\r?\n").unwrap();
        assert!(
            summary.contains("0 to create, 1 to update, 0 to delete."),
            "{summary:?}"
        );
        let drawn = p.exp_string("[y/N]").unwrap();
        let line = last_visible_line(&drawn);
        assert_eq!(line.trim(), "Apply these changes?", "{columns}: {drawn:?}");
        // The question, its marks and the answer's room stay within the width: it never wraps.
        assert!(line.chars().count() + "[y/N] ".chars().count() < usize::from(columns));
        assert_eq!((before + &drawn).matches("Apply these changes?").count(), 1);
        pty::wait_for_prompt(&mut p, "");
        pty::answer(&mut p, &["n", "\r"]);
        p.exp_eof().unwrap();
        assert_eq!(exit_code(&mut p), 4, "{columns}");
    }
}

/// A Helm-managed Deployment: the owner is named after the plan and the question says what it
/// overrides; answering y writes it (the terminal user saw it, unlike --yes).
#[test]
fn the_question_names_the_owner_it_overrides() {
    let env = Env::new();
    env.sb
        .update("/apis/apps/v1/namespaces/shop/deployments/web", |d| {
            d["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "Helm".into();
            d["metadata"]["annotations"]["meta.helm.sh/release-name"] = "web".into();
            d["metadata"]["annotations"]["meta.helm.sh/release-namespace"] = "shop".into();
        })
        .unwrap();
    let mut p = spawn(
        &env,
        &[
            "web",
            "--image",
            "registry.example.com/web:2.0",
            "--color",
            "never",
        ],
    );
    p.exp_string("owner: deployment.apps/web: Helm release shop/web")
        .unwrap();
    pty::wait_for_prompt(&mut p, "This overrides what Helm release shop/web own(s)");
    pty::answer(&mut p, &["y", "\r"]);
    p.exp_string("deployment.apps/web updated").unwrap();
    p.exp_eof().unwrap();
    assert_eq!(exit_code(&mut p), 0);
    assert_eq!(env.image(), "registry.example.com/web:2.0");
    // The confirmed run overrode the owner: its record says so.
    let o = env.run(&["history", "web"]);
    assert!(
        stdout(&o).contains("; overrode Helm release shop/web (deployment.apps/web)"),
        "{}",
        stdout(&o)
    );
}

/// A fleet with one Helm-managed cluster: the one question names that owner and its cluster;
/// answering n writes nothing anywhere.
#[test]
fn a_fleets_question_names_the_owner_and_its_cluster() {
    let fleet = common::fleet::Fleet::new(&["eu-1", "us-1"]);
    fleet
        .sb("us-1")
        .update(common::fleet::DEPLOY, |d| {
            d["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "Helm".into();
            d["metadata"]["annotations"]["meta.helm.sh/release-name"] = "web".into();
            d["metadata"]["annotations"]["meta.helm.sh/release-namespace"] = "shop".into();
        })
        .unwrap();
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("kubectl-appupdate"));
    scrub(&mut cmd);
    cmd.env("TERM", "xterm-256color");
    cmd.arg("--kubeconfig").arg(&fleet.kubeconfig).args([
        "web",
        "--contexts",
        "eu-1,us-1",
        "--image",
        common::fleet::NEW_IMAGE,
        "--color",
        "never",
    ]);
    let mut p = rexpect::session::spawn_command(cmd, Some(30_000)).expect("spawned in a pty");
    p.exp_string("owner: deployment.apps/web in context \"us-1\": Helm release shop/web")
        .unwrap();
    pty::wait_for_prompt(
        &mut p,
        "0 to delete in total. This overrides what Helm release shop/web in context \"us-1\" own(s) (see the owner lines above).",
    );
    pty::answer(&mut p, &["n", "\r"]);
    p.exp_eof().unwrap();
    assert_eq!(exit_code(&mut p), 4);
    for name in ["eu-1", "us-1"] {
        assert!(common::fleet::writes(fleet.sb(name)).is_empty(), "{name}");
    }
}
