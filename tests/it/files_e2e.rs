//! The files the plugin reads and writes, end to end: every file it reads is read within a
//! bound (a plan file, a key, a kubeconfig, an endpoints file, standard input), and
//! `--plan-out` writes a new file and renames it over the target, never through a symlink.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::Write as _;
use std::process::Stdio;

use common::*;

/// `o` ended with exactly `line` on stderr (one line), exit 3, and the sandbox saw no request.
#[track_caller]
fn refused_in_one_line(env: &Env, o: &std::process::Output, line: &str) {
    assert_code(o, 3);
    assert_eq!(stderr(o), format!("error: {line}\n"));
    assert_eq!(stdout(o), "");
    assert!(env.sb.requests().is_empty(), "{:?}", env.sb.requests());
}

/// A sparse file of `len` bytes: its size is all there is to it.
fn sparse(env: &Env, name: &str, len: u64) -> std::path::PathBuf {
    let path = env.dir.path().join(name);
    std::fs::File::create(&path).unwrap().set_len(len).unwrap();
    path
}

#[test]
fn dev_zero_as_a_plan_file_is_refused_after_its_bound_and_nothing_is_sent() {
    let env = Env::new();
    let o = env.run(&["apply", "/dev/zero", "--yes"]);
    refused_in_one_line(
        &env,
        &o,
        "cannot read plan file /dev/zero: it is larger than 128 MiB, the most kubectl-appupdate reads of a plan file",
    );
}

#[test]
fn a_plan_file_over_its_bound_is_refused_by_its_size() {
    let env = Env::new();
    let big = sparse(&env, "plan.json", 128 * 1024 * 1024 + 1);
    let o = env.run(&["apply", big.to_str().unwrap(), "--yes"]);
    refused_in_one_line(
        &env,
        &o,
        &format!(
            "cannot read plan file {}: it is larger than 128 MiB, the most kubectl-appupdate reads of a plan file",
            big.display()
        ),
    );
}

#[test]
fn an_endless_endpoints_file_on_stdin_is_refused_after_its_bound() {
    let env = Env::new();
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("kubectl-appupdate"));
    let mut child = scrub(&mut cmd)
        .arg("--kubeconfig")
        .arg(&env.kubeconfig)
        .args(["web", "--endpoints", "-", "--yes"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // A writer that would go on for ever: the plugin stops reading after 16 MiB and one byte,
    // and the pipe then breaks.
    let writer = std::thread::spawn(move || {
        let line = b"  - path: /a\n".repeat(4096);
        let _ = stdin.write_all(b"endpoints:\n");
        while stdin.write_all(&line).is_ok() {}
    });
    let o = child.wait_with_output().unwrap();
    writer.join().unwrap();
    refused_in_one_line(
        &env,
        &o,
        "cannot read endpoints file <stdin>: it is larger than 16 MiB, the most kubectl-appupdate reads of an endpoints file",
    );
}

#[test]
fn dev_zero_as_an_endpoints_file_or_a_key_is_refused() {
    let env = Env::new();
    let o = env.run(&["web", "--endpoints", "/dev/zero", "--yes"]);
    refused_in_one_line(
        &env,
        &o,
        "cannot read endpoints file /dev/zero: it is larger than 16 MiB, the most kubectl-appupdate reads of an endpoints file",
    );
    let o = env.run(&[
        "web",
        "--max",
        "9",
        "--plan-out",
        env.dir.path().join("plan.json").to_str().unwrap(),
        "--sign-key",
        "/dev/zero",
    ]);
    refused_in_one_line(
        &env,
        &o,
        "--sign-key /dev/zero: cannot read the key file: it is larger than 64 KiB, the most kubectl-appupdate reads of a key file",
    );
    assert!(!env.dir.path().join("plan.json").exists());
}

#[test]
fn dev_zero_as_a_kubeconfig_is_refused() {
    let env = Env::new();
    let o = plugin()
        .args(["--kubeconfig", "/dev/zero", "web", "--max", "9", "--yes"])
        .output()
        .unwrap();
    refused_in_one_line(
        &env,
        &o,
        "cannot read kubeconfig /dev/zero: it is larger than 16 MiB, the most kubectl-appupdate reads of a kubeconfig",
    );
    assert_eq!(env.bounds().1, 5);
}

#[test]
fn a_kubeconfig_with_relative_certificate_paths_still_connects() {
    // The kubeconfig is read by the plugin now (within its bound), no longer by kube: the files
    // it names relative to its directory are found as before.
    let env = Env::new();
    let text = std::fs::read_to_string(&env.kubeconfig).unwrap();
    let doc: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    let b64 = doc["clusters"][0]["cluster"]["certificate-authority-data"]
        .as_str()
        .expect("the sandbox serves TLS with a CA of its own");
    let ca = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap()
    };
    std::fs::write(env.dir.path().join("ca.crt"), ca).unwrap();
    let relative = text
        .lines()
        .map(|l| match l.split_once("certificate-authority-data:") {
            Some((indent, _)) => format!("{indent}certificate-authority: ca.crt"),
            None => l.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    let kubeconfig = env.write_file("relative-kubeconfig", &relative);
    let o = plugin()
        .current_dir("/")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["web", "--max", "9", "--yes"])
        .output()
        .unwrap();
    assert_code(&o, 0);
    assert_eq!(env.bounds().1, 9);
}

#[cfg(unix)]
#[test]
fn plan_out_replaces_a_planted_symlink_and_leaves_its_target_alone() {
    let env = Env::new();
    let victim = env.write_file("victim.txt", "precious\n");
    let target = env.dir.path().join("plan.json");
    std::os::unix::fs::symlink(&victim, &target).unwrap();
    let o = env.run(&["web", "--max", "9", "--plan-out", target.to_str().unwrap()]);
    assert_code(&o, 0);
    // The symlink's target is untouched; the plan is a new file where the link was.
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    let meta = std::fs::symlink_metadata(&target).unwrap();
    assert!(meta.file_type().is_file(), "{meta:?}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&target).unwrap()).unwrap();
    assert_eq!(doc["schema"], "kubectl-appupdate.plan-file/v1");
    // Nothing else was left in the directory: the new file was renamed over the target.
    let mut names: Vec<String> = std::fs::read_dir(env.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["kubeconfig", "plan.json", "victim.txt"]);
    // And it applies.
    let o = env.run(&["apply", target.to_str().unwrap(), "--yes"]);
    assert_code(&o, 0);
    assert_eq!(env.bounds().1, 9);
}

#[cfg(unix)]
#[test]
fn plan_out_over_an_existing_plan_replaces_it_and_keeps_the_usual_permissions() {
    use std::os::unix::fs::PermissionsExt as _;
    let env = Env::new();
    let target = env.write_file("plan.json", "an older plan\n");
    let o = plugin()
        .arg("--kubeconfig")
        .arg(&env.kubeconfig)
        .args(["web", "--max", "9", "--plan-out", target.to_str().unwrap()])
        .output()
        .unwrap();
    assert_code(&o, 0);
    let text = std::fs::read_to_string(&target).unwrap();
    assert!(text.starts_with("{\n  \"schema\""), "{text}");
    // As a file created by the plugin always was: readable by others (umask permitting), not
    // only by its owner as a temporary file would be.
    let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o777;
    let reference = env.write_file("reference", "");
    let usual = std::fs::metadata(&reference).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, usual);
}

#[test]
fn plan_out_into_a_missing_directory_fails_in_one_line_and_writes_nothing() {
    let env = Env::new();
    let target = env.dir.path().join("missing").join("plan.json");
    let o = env.run(&["web", "--max", "9", "--plan-out", target.to_str().unwrap()]);
    assert_code(&o, 1);
    let err = stderr(&o);
    assert!(
        err.starts_with(&format!(
            "error: cannot write the plan to {}: ",
            target.display()
        )),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(env.app_writes().is_empty());
}
