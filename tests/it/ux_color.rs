//! Colour, kubectl's rule, end to end: `--color always|never` wins; else `NO_COLOR` (any value,
//! even empty) turns it off; else `CLICOLOR_FORCE` (not `0`) turns it on; else `TERM=dumb` turns
//! it off; else colour only when the stream is a terminal. Checked by the presence or absence of
//! escape sequences in what the real binary prints, through pipes and in a pseudo-terminal.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::{Command, Output};

use common::*;

const ESC: char = '\u{1b}';
/// A change to show (colour appears in the diff), nothing written.
const PLAN: &[&str] = &["web", "--max", "9", "--dry-run"];

fn run(env: &Env, vars: &[(&str, &str)], extra: &[&str]) -> Output {
    let mut c = env.cmd();
    for (k, v) in vars {
        c.env(k, v);
    }
    c.args(PLAN).args(extra);
    let o = c.output().unwrap();
    assert_code(&o, 0);
    assert!(stdout(&o).contains("maxReplicas"), "{}", stdout(&o));
    o
}

fn coloured(o: &Output) -> bool {
    stdout(o).contains(ESC)
}

#[test]
fn a_pipe_gets_no_colour_by_default() {
    let env = Env::new();
    let o = run(&env, &[], &[]);
    assert!(!coloured(&o), "{:?}", stdout(&o));
    assert!(!stderr(&o).contains(ESC));
}

#[test]
fn the_flag_wins_over_everything() {
    let env = Env::new();
    assert!(coloured(&run(&env, &[], &["--color", "always"])));
    assert!(coloured(&run(
        &env,
        &[("NO_COLOR", "1")],
        &["--color", "always"]
    )));
    assert!(coloured(&run(
        &env,
        &[("TERM", "dumb")],
        &["--color=always"]
    )));
    assert!(!coloured(&run(
        &env,
        &[("CLICOLOR_FORCE", "1")],
        &["--color", "never"]
    )));
    assert!(!coloured(&run(&env, &[], &["--color", "auto"])));
}

#[test]
fn clicolor_force_turns_colour_on_for_a_pipe() {
    let env = Env::new();
    assert!(coloured(&run(&env, &[("CLICOLOR_FORCE", "1")], &[])));
    assert!(coloured(&run(&env, &[("CLICOLOR_FORCE", "yes")], &[])));
    assert!(!coloured(&run(&env, &[("CLICOLOR_FORCE", "0")], &[])));
    assert!(!coloured(&run(&env, &[("CLICOLOR_FORCE", "")], &[])));
}

#[test]
fn no_color_with_any_value_beats_clicolor_force() {
    let env = Env::new();
    for value in ["1", "0", "false", ""] {
        let o = run(&env, &[("NO_COLOR", value), ("CLICOLOR_FORCE", "1")], &[]);
        assert!(!coloured(&o), "NO_COLOR={value:?}");
    }
}

#[test]
fn clicolor_force_beats_term_dumb() {
    let env = Env::new();
    assert!(coloured(&run(
        &env,
        &[("TERM", "dumb"), ("CLICOLOR_FORCE", "1")],
        &[]
    )));
}

#[test]
fn errors_on_stderr_follow_the_same_rule() {
    let env = Env::new();
    let fail = |vars: &[(&str, &str)], extra: &[&str]| {
        let mut c = env.cmd();
        for (k, v) in vars {
            c.env(k, v);
        }
        let o = c.args(["api", "--max", "9"]).args(extra).output().unwrap();
        assert_code(&o, 1);
        assert!(stderr(&o).contains("not found"), "{}", stderr(&o));
        stderr(&o).contains(ESC)
    };
    assert!(!fail(&[], &[]));
    assert!(fail(&[], &["--color", "always"]));
    assert!(fail(&[("CLICOLOR_FORCE", "1")], &[]));
    assert!(!fail(&[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "")], &[]));
}

#[test]
fn data_output_is_never_coloured() {
    let env = Env::new();
    for format in ["json", "yaml"] {
        let o = env
            .cmd()
            .args(PLAN)
            .args(["-o", format, "--color", "always"])
            .output()
            .unwrap();
        assert_code(&o, 0);
        assert!(!stdout(&o).contains(ESC), "{format}: {}", stdout(&o));
    }
}

/// Everything the plugin prints in a pseudo-terminal, until it exits.
fn in_a_pty(env: &Env, vars: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("kubectl-appupdate"));
    scrub(&mut cmd);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.arg("--kubeconfig").arg(&env.kubeconfig).args(PLAN);
    let mut p = rexpect::session::spawn_command(cmd, Some(30_000)).expect("spawned in a pty");
    let out = p.exp_eof().unwrap();
    assert!(out.contains("maxReplicas"), "{out}");
    out
}

#[test]
fn a_terminal_gets_colour_unless_term_is_dumb_or_no_color_is_set() {
    let env = Env::new();
    assert!(in_a_pty(&env, &[("TERM", "xterm-256color")]).contains(ESC));
    assert!(!in_a_pty(&env, &[("TERM", "dumb")]).contains(ESC));
    assert!(!in_a_pty(&env, &[("TERM", "xterm-256color"), ("NO_COLOR", "1")]).contains(ESC));
}
