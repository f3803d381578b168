//! Shell completion, `--version` and `--help`: the `completion bash|zsh|fish` scripts, the
//! `kubectl_complete-appupdate` helper (directly and through the real kubectl, which runs it
//! for `kubectl appupdate <TAB>` since 1.26), and the help text's examples.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;

const HELPER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/scripts/kubectl_complete-appupdate"
);

/// A directory holding the plugin and the helper, as krew's bin directory would.
fn install_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        assert_cmd::cargo::cargo_bin("kubectl-appupdate"),
        dir.path().join("kubectl-appupdate"),
    )
    .unwrap();
    std::os::unix::fs::symlink(HELPER, dir.path().join("kubectl_complete-appupdate")).unwrap();
    dir
}

fn path_with(dir: &Path) -> std::ffi::OsString {
    let mut paths = vec![dir.to_path_buf()];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(paths).unwrap()
}

fn scrubbed(program: impl AsRef<std::ffi::OsStr>, dir: &Path) -> Command {
    let mut c = Command::new(program);
    scrub(&mut c);
    c.env("PATH", path_with(dir));
    c
}

fn helper(dir: &Path, words: &[&str]) -> Output {
    scrubbed(dir.join("kubectl_complete-appupdate"), dir)
        .args(words)
        .output()
        .unwrap()
}

fn lines(o: &Output) -> Vec<String> {
    stdout(o).lines().map(str::to_owned).collect()
}

#[test]
fn the_helper_completes_flags_with_descriptions_in_cobras_protocol() {
    let dir = install_dir();
    let o = helper(dir.path(), &["web", "--col"]);
    assert_code(&o, 0);
    assert_eq!(lines(&o), vec!["--color\tWhen to colour the output", ":4"]);
}

#[test]
fn the_helper_completes_values_of_enumerated_flags() {
    let dir = install_dir();
    let o = helper(dir.path(), &["web", "-o", ""]);
    let values: Vec<String> = lines(&o)
        .iter()
        .map(|l| l.split('\t').next().unwrap().to_owned())
        .collect();
    assert_eq!(values, vec!["diff", "json", "yaml", ":4"]);
}

#[test]
fn the_helper_completes_contexts_from_the_kubeconfig_named_earlier() {
    let env = Env::new();
    let dir = install_dir();
    let kc = env.kubeconfig.to_str().unwrap();
    let o = helper(
        dir.path(),
        &["web", "--kubeconfig", kc, "--context", "sandbox-r"],
    );
    assert_eq!(lines(&o), vec!["sandbox-readonly", ":4"]);
    // And from KUBECONFIG when no flag names one.
    let o = scrubbed(dir.path().join("kubectl_complete-appupdate"), dir.path())
        .env("KUBECONFIG", &env.kubeconfig)
        .args(["web", "--context", ""])
        .output()
        .unwrap();
    let out = stdout(&o);
    for ctx in [
        "sandbox",
        "sandbox-readonly",
        "sandbox-noperm",
        "sandbox-invalid",
    ] {
        assert!(out.lines().any(|l| l == ctx), "{ctx} in {out}");
    }
    // Completion never talks to the cluster.
    assert!(env.sb.requests().is_empty());
}

#[test]
fn the_helper_leaves_endpoints_files_to_the_shell_filtered_by_extension() {
    let dir = install_dir();
    let o = helper(dir.path(), &["web", "--endpoints", ""]);
    assert_eq!(lines(&o), vec!["yaml", "yml", ":8"]);
}

#[test]
fn a_broken_kubeconfig_gives_no_candidates_and_no_error() {
    let dir = install_dir();
    let o = helper(
        dir.path(),
        &["web", "--kubeconfig", "/nonexistent", "--context", ""],
    );
    assert_code(&o, 0);
    assert_eq!(lines(&o), vec![":4"]);
    assert_eq!(stderr(&o), "");
}

/// The real kubectl (≥ 1.26) finds the helper on PATH and passes its answer through.
#[test]
fn kubectl_runs_the_helper_for_plugin_completion() {
    let dir = install_dir();
    let o = scrubbed("kubectl", dir.path())
        .args(["__complete", "appupdate", "web", "--color", ""])
        .output()
        .unwrap();
    assert_code(&o, 0);
    assert_eq!(
        lines(&o)
            .iter()
            .map(|l| l.split('\t').next().unwrap())
            .collect::<Vec<_>>(),
        vec!["auto", "always", "never", ":4"],
        "stderr: {}",
        stderr(&o)
    );
    assert!(
        stderr(&o).contains("kubectl_complete-appupdate"),
        "kubectl used the helper: {}",
        stderr(&o)
    );
}

fn completion_script(shell: &str) -> String {
    let o = plugin().args(["completion", shell]).output().unwrap();
    assert_code(&o, 0);
    stdout(&o)
}

#[test]
fn completion_scripts_are_generated_for_bash_zsh_and_fish() {
    let bash = completion_script("bash");
    assert!(bash.contains("complete -F _kubectl__appupdate"), "{bash}");
    assert!(completion_script("zsh").starts_with("#compdef kubectl-appupdate"));
    assert!(completion_script("fish").contains("complete -c kubectl-appupdate"));
}

/// The bash script is valid bash and completes flags and values when sourced.
#[test]
fn the_bash_script_completes_when_sourced() {
    let dir = tempfile::tempdir().unwrap();
    let script: PathBuf = dir.path().join("kubectl-appupdate.bash");
    std::fs::write(&script, completion_script("bash")).unwrap();
    let run = |words: &str, cword: usize, cur: &str, prev: &str| {
        let program = format!(
            r#"source "$1"; COMP_WORDS=({words}); COMP_CWORD={cword}; COMP_LINE="${{COMP_WORDS[*]}}"; COMP_POINT=${{#COMP_LINE}}; _kubectl__appupdate kubectl-appupdate "{cur}" "{prev}"; printf '%s\n' "${{COMPREPLY[@]}}""#
        );
        let o = Command::new("bash")
            .args(["--norc", "-c", &program, "bash"])
            .arg(&script)
            .output()
            .unwrap();
        assert_code(&o, 0);
        stdout(&o)
    };
    assert_eq!(
        run("kubectl-appupdate web --col", 2, "--col", "web"),
        "--color\n"
    );
    assert_eq!(
        run(r#"kubectl-appupdate web --color """#, 3, "", "--color"),
        "auto\nalways\nnever\n"
    );
}

#[test]
fn a_closed_pipe_does_not_crash_the_completion_script() {
    let o = Command::new("sh")
        .arg("-c")
        .arg(r#""$0" completion bash | head -n 1"#)
        .arg(assert_cmd::cargo::cargo_bin("kubectl-appupdate"))
        .output()
        .unwrap();
    assert_code(&o, 0);
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
}

#[test]
fn version_is_the_builds_version() {
    for flag in ["--version", "-V"] {
        let o = plugin().arg(flag).output().unwrap();
        assert_code(&o, 0);
        assert_eq!(
            stdout(&o).trim(),
            format!("kubectl appupdate {}", env!("CARGO_PKG_VERSION"))
        );
    }
}

#[test]
fn help_has_examples_for_the_common_cases() {
    let o = plugin().arg("--help").output().unwrap();
    assert_code(&o, 0);
    let help = stdout(&o);
    for example in [
        "kubectl appupdate web --image registry.example.com/web:2.1 --min 2 --max 8",
        "--yes",
        "--dry-run --detailed-exitcode",
        "--endpoints endpoints.yaml",
        "-o json",
        "--wait --timeout",
        "7    --wait",
    ] {
        assert!(help.contains(example), "--help lacks {example:?}:\n{help}");
    }
}
