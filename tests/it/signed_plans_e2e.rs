//! Signed saved plans, end to end against the sandbox: `--plan-out FILE --sign-key KEYFILE`
//! (or `APPUPDATE_PLAN_KEY_FILE`) signs, `apply FILE --verify-key KEYFILE` (or the variable)
//! applies only a plan signed with that key. An edited plan (its checksum made again, as anyone
//! without the key can), an unsigned plan and a plan signed with another key are refused with
//! exit 3 before any request; a key file that cannot be a key is refused before any request.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::fleet::Fleet;
use common::*;
use serde_json::Value;

const KEY_VAR: &str = "APPUPDATE_PLAN_KEY_FILE";
/// As `openssl rand -hex 32 > key` writes it.
const KEY: &str = "3f1c9a0b7e2d4c6f8a1b3c5d7e9f0a2b4c6d8e0f1a3b5c7d9e1f3a5b7c9d1e3f\n";
const OTHER_KEY: &str = "0000000000000000111111111111111122222222222222223333333333333333\n";

fn key(env: &Env, name: &str, text: &str) -> PathBuf {
    env.write_file(name, text)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `kubectl appupdate web ARGS --plan-out DIR/NAME`, with `APPUPDATE_PLAN_KEY_FILE` when given.
fn plan_out(env: &Env, name: &str, args: &[&str], key_var: Option<&Path>) -> (PathBuf, Output) {
    let file = env.dir.path().join(name);
    let mut c = env.cmd();
    c.arg("web").args(args).arg("--plan-out").arg(&file);
    if let Some(k) = key_var {
        c.env(KEY_VAR, k);
    }
    (file, c.output().unwrap())
}

/// `kubectl appupdate apply FILE --yes ARGS`, with `APPUPDATE_PLAN_KEY_FILE` when given.
fn apply(env: &Env, file: &Path, args: &[&str], key_var: Option<&Path>) -> Output {
    let mut c = env.cmd();
    c.arg("apply").arg(file).arg("--yes").args(args);
    if let Some(k) = key_var {
        c.env(KEY_VAR, k);
    }
    c.output().unwrap()
}

/// The plan file at `file` with `edit` applied to its content and its checksum made again, as
/// someone without the key could: the checksum holds, only the signature can tell.
fn edit_keeping_the_checksum(env: &Env, file: &Path, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    edit(&mut doc["content"]);
    reseal_plan(&mut doc);
    env.write_file("edited.json", &serde_json::to_string_pretty(&doc).unwrap())
}

/// Refused with exit 3 in exactly `message`, nothing on stdout, and not one request sent since
/// `requests_before`; the HPA's bounds as seeded.
#[track_caller]
fn assert_refused_before_any_request(env: &Env, o: &Output, requests_before: usize, message: &str) {
    assert_code(o, 3);
    assert_eq!(stderr(o), format!("error: {message}\n"));
    assert_eq!(stdout(o), "");
    assert_eq!(
        env.sb.requests().len(),
        requests_before,
        "{:?}",
        env.sb.requests()
    );
    assert!(env.writes().is_empty(), "{:?}", env.writes());
    assert_eq!(env.bounds(), (2, 5));
}

fn signature(file: &Path) -> Option<String> {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    doc["signature"].as_str().map(str::to_owned)
}

#[test]
fn a_plan_signed_with_sign_key_is_applied_with_verify_key() {
    let env = Env::new();
    let k = key(&env, "plan.key", KEY);
    let (file, o) = plan_out(
        &env,
        "plan.json",
        &["--max", "9", "--sign-key", s(&k)],
        None,
    );
    assert_code(&o, 0);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(
        stderr(&o),
        format!(
            "Saved the plan to {f}, signed with --sign-key {k}; apply it with: kubectl appupdate apply {f} --checksum {c}\n",
            f = s(&file),
            k = s(&k),
            c = doc["checksum"].as_str().unwrap()
        )
    );
    let signature = signature(&file).unwrap();
    assert!(signature.starts_with("hmac-sha256:"), "{signature}");
    // The key is in neither the file nor the output.
    let key_text = KEY.trim_end();
    assert!(!std::fs::read_to_string(&file).unwrap().contains(key_text));
    assert!(!stdout(&o).contains(key_text) && !stderr(&o).contains(key_text));

    let o = apply(&env, &file, &["--verify-key", s(&k)], None);
    assert_code(&o, 0);
    assert!(!stdout(&o).contains(key_text) && !stderr(&o).contains(key_text));
    assert_eq!(env.bounds(), (2, 9));
}

#[test]
fn a_signed_plan_edited_and_given_a_new_checksum_is_refused_with_nothing_sent() {
    let env = Env::new();
    let k = key(&env, "plan.key", KEY);
    let (file, o) = plan_out(
        &env,
        "plan.json",
        &["--max", "9", "--sign-key", s(&k)],
        None,
    );
    assert_code(&o, 0);
    let edited = edit_keeping_the_checksum(&env, &file, |content| {
        let plan = content["clusters"][0]["objects"].as_array_mut().unwrap();
        let hpa = plan
            .iter_mut()
            .find(|o| o["change"]["kind"] == "HorizontalPodAutoscaler")
            .unwrap();
        let text = hpa.to_string();
        let raised = text.replace("\"maxReplicas\":9", "\"maxReplicas\":19");
        assert_ne!(raised, text);
        *hpa = serde_json::from_str(&raised).unwrap();
    });
    let before = env.sb.requests().len();
    let o = apply(&env, &edited, &["--verify-key", s(&k)], None);
    assert_refused_before_any_request(
        &env,
        &o,
        before,
        &format!(
            "{}'s signature does not match --verify-key {}: it was changed after signing, or signed with another key",
            s(&edited),
            s(&k)
        ),
    );
    // The same through the variable.
    let o = apply(&env, &edited, &[], Some(&k));
    assert_refused_before_any_request(
        &env,
        &o,
        before,
        &format!(
            "{}'s signature does not match {KEY_VAR}={}: it was changed after signing, or signed with another key",
            s(&edited),
            s(&k)
        ),
    );
}

#[test]
fn an_unsigned_plan_is_refused_when_a_key_is_given() {
    let env = Env::new();
    let k = key(&env, "plan.key", KEY);
    let (file, o) = plan_out(&env, "plan.json", &["--max", "9"], None);
    assert_code(&o, 0);
    assert_eq!(signature(&file), None);
    let before = env.sb.requests().len();
    for (args, var, named) in [
        (
            &["--verify-key", s(&k)][..],
            None,
            format!("--verify-key {}", s(&k)),
        ),
        (&[][..], Some(k.as_path()), format!("{KEY_VAR}={}", s(&k))),
    ] {
        let o = apply(&env, &file, args, var);
        assert_refused_before_any_request(
            &env,
            &o,
            before,
            &format!(
                "{} is not signed; {named} accepts only plans signed with that key: make it again with --plan-out FILE --sign-key KEYFILE",
                s(&file)
            ),
        );
    }
    // Without a key nothing is checked: the plan applies as it always did.
    let o = apply(&env, &file, &[], None);
    assert_code(&o, 0);
    assert_eq!(env.bounds(), (2, 9));
}

#[test]
fn a_plan_signed_with_another_key_is_refused_and_the_flag_wins_over_the_variable() {
    let env = Env::new();
    let ours = key(&env, "ours.key", KEY);
    let theirs = key(&env, "theirs.key", OTHER_KEY);
    // Signed through the variable: --plan-out without --sign-key.
    let (file, o) = plan_out(&env, "plan.json", &["--max", "9"], Some(&theirs));
    assert_code(&o, 0);
    assert!(
        stderr(&o).contains(&format!(", signed with {KEY_VAR}={};", s(&theirs))),
        "{}",
        stderr(&o)
    );
    assert!(signature(&file).is_some());
    let before = env.sb.requests().len();
    let refused = |named: String| {
        format!(
            "{}'s signature does not match {named}: it was changed after signing, or signed with another key",
            s(&file)
        )
    };
    let o = apply(&env, &file, &["--verify-key", s(&ours)], None);
    assert_refused_before_any_request(
        &env,
        &o,
        before,
        &refused(format!("--verify-key {}", s(&ours))),
    );
    // The flag wins over the variable, whichever key each names.
    let o = apply(&env, &file, &["--verify-key", s(&ours)], Some(&theirs));
    assert_refused_before_any_request(
        &env,
        &o,
        before,
        &refused(format!("--verify-key {}", s(&ours))),
    );
    let o = apply(&env, &file, &[], Some(&ours));
    assert_refused_before_any_request(
        &env,
        &o,
        before,
        &refused(format!("{KEY_VAR}={}", s(&ours))),
    );
    let o = apply(&env, &file, &["--verify-key", s(&theirs)], Some(&ours));
    assert_code(&o, 0);
    assert_eq!(env.bounds(), (2, 9));
}

#[test]
fn the_sign_key_flag_wins_over_the_variable_when_saving() {
    let env = Env::new();
    let ours = key(&env, "ours.key", KEY);
    let theirs = key(&env, "theirs.key", OTHER_KEY);
    let (file, o) = plan_out(
        &env,
        "plan.json",
        &["--max", "9", "--sign-key", s(&ours)],
        Some(&theirs),
    );
    assert_code(&o, 0);
    assert!(
        stderr(&o).contains(&format!(", signed with --sign-key {};", s(&ours))),
        "{}",
        stderr(&o)
    );
    let before = env.sb.requests().len();
    let o = apply(&env, &file, &[], Some(&theirs));
    assert_code(&o, 3);
    assert_eq!(env.sb.requests().len(), before);
    let o = apply(&env, &file, &[], Some(&ours));
    assert_code(&o, 0);
    assert_eq!(env.bounds(), (2, 9));
}

#[test]
fn a_key_file_that_cannot_be_a_key_is_refused_before_any_request() {
    let env = Env::new();
    let short = key(&env, "short.key", "0123456789abcde\n");
    let empty = key(&env, "empty.key", "\n");
    let missing = env.dir.path().join("missing.key");
    let before = env.sb.requests().len();
    for (k, why) in [
        (
            &short,
            "the key is shorter than 16 bytes; a key needs at least 16, e.g. from openssl rand -hex 32",
        ),
        (
            &empty,
            "the key file is empty; a key needs at least 16 bytes, e.g. from openssl rand -hex 32",
        ),
    ] {
        let (file, o) = plan_out(&env, "plan.json", &["--max", "9", "--sign-key", s(k)], None);
        assert_refused_before_any_request(&env, &o, before, &format!("--sign-key {}: {why}", s(k)));
        assert!(!file.exists(), "no plan is saved");
        let o = apply(&env, &file, &["--verify-key", s(k)], None);
        assert_refused_before_any_request(
            &env,
            &o,
            before,
            &format!("--verify-key {}: {why}", s(k)),
        );
    }
    let (_, o) = plan_out(&env, "plan.json", &["--max", "9"], Some(&missing));
    assert_code(&o, 3);
    let err = stderr(&o);
    assert!(
        err.starts_with(&format!(
            "error: {KEY_VAR}={}: cannot read the key file: ",
            s(&missing)
        )),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(env.sb.requests().len(), before);
    // A run that saves nothing does not read the variable.
    let o = env
        .cmd()
        .args(["web", "--max", "9", "--dry-run"])
        .env(KEY_VAR, &missing)
        .output()
        .unwrap();
    assert_code(&o, 0);
}

#[test]
fn a_saved_plan_of_several_clusters_is_signed_and_verified_as_one() {
    let fleet = Fleet::new(&["eu-1", "eu-2"]);
    let k = fleet.dir.path().join("plan.key");
    std::fs::write(&k, KEY).unwrap();
    let file = fleet.dir.path().join("plan.json");
    let o = fleet.run(&[
        "web",
        "--contexts",
        "eu-1,eu-2",
        "--max",
        "9",
        "--plan-out",
        s(&file),
        "--sign-key",
        s(&k),
    ]);
    assert_code(&o, 0);
    assert!(
        stderr(&o).contains(&format!(
            "Saved the plan of 2 clusters to {f}, signed with --sign-key {k}; apply it with: kubectl appupdate apply {f}",
            f = s(&file),
            k = s(&k)
        )),
        "{}",
        stderr(&o)
    );
    let o = fleet.run(&["apply", s(&file), "--yes", "--verify-key", s(&k)]);
    assert_code(&o, 0);
    assert_eq!(fleet.max("eu-1"), 9);
    assert_eq!(fleet.max("eu-2"), 9);
}
