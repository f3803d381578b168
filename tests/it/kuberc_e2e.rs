//! kubectl's credential plugin policy (kuberc `credentialPluginPolicy`,
//! `credentialPluginAllowlist`): an exec plugin it does not allow is never started — the
//! plugin here writes a marker file when run, and the tests look for it — and the run is
//! refused with exit 3 before any client is built, for `--user`, a context's own user, every
//! context of a fleet, `history` and `apply`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::fleet::Fleet;
use crate::common::{Env, assert_code, path_exists, plugin, stderr};

/// A credential plugin that leaves `marker` behind and hands out the sandbox admin's token.
struct ExecUser {
    script: PathBuf,
    marker: PathBuf,
    kubeconfig: PathBuf,
}

fn exec_user(dir: &Path, kubeconfig: &Path, token: &str, context_user: Option<&str>) -> ExecUser {
    let marker = dir.join("plugin-ran");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = bin.join("cloud-login");
    let credential = format!(
        r#"{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{{"token":"{token}"}}}}"#
    );
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n: > '{}'\nprintf '%s' '{credential}'\n",
            marker.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut doc: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(kubeconfig).unwrap()).unwrap();
    doc["users"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "name": "exec-admin",
            "user": {"exec": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": script.to_str().unwrap(),
                "interactiveMode": "Never",
            }},
        }));
    if let Some(context) = context_user {
        for c in doc["contexts"].as_array_mut().unwrap() {
            if c["name"] == context {
                c["context"]["user"] = "exec-admin".into();
            }
        }
    }
    let out = dir.join("exec-kubeconfig");
    std::fs::write(&out, serde_json::to_string(&doc).unwrap()).unwrap();
    ExecUser {
        script,
        marker,
        kubeconfig: out,
    }
}

fn kuberc(dir: &Path, body: &str) -> PathBuf {
    let p = dir.join("kuberc");
    std::fs::write(
        &p,
        format!("apiVersion: kubectl.config.k8s.io/v1beta1\nkind: Preference\n{body}"),
    )
    .unwrap();
    p
}

fn setup() -> (Env, ExecUser) {
    let env = Env::new();
    let token = env.sb.token(sandbox_apiserver::Identity::Admin);
    let user = exec_user(env.dir.path(), &env.kubeconfig, &token, None);
    (env, user)
}

fn run(user: &ExecUser, vars: &[(&str, &Path)], args: &[&str]) -> Output {
    let mut c = plugin();
    c.arg("--kubeconfig").arg(&user.kubeconfig);
    for (k, v) in vars {
        c.env(k, v);
    }
    c.args(args).output().unwrap()
}

const UPDATE: &[&str] = &["web", "--max", "11", "--yes", "--user", "exec-admin"];

/// Refused: exit 3, one line naming the kuberc and the plugin, the plugin never started,
/// nothing written.
fn assert_refused(env: &Env, user: &ExecUser, o: &Output, kuberc: &Path) {
    assert_code(o, 3);
    let err = stderr(o);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(kuberc.to_str().unwrap()), "{err}");
    assert!(err.contains(user.script.to_str().unwrap()), "{err}");
    assert!(err.contains("the plugin was not run"), "{err}");
    assert!(!path_exists(&user.marker), "the plugin ran: {err}");
    assert!(env.writes().is_empty(), "{:?}", env.writes());
}

#[test]
fn deny_all_refuses_the_plugin_of_a_user_override() {
    let (env, user) = setup();
    let rc = kuberc(env.dir.path(), "credentialPluginPolicy: DenyAll\n");
    let o = run(&user, &[("KUBERC", &rc)], UPDATE);
    assert_refused(&env, &user, &o, &rc);
    assert!(stderr(&o).contains("DenyAll"), "{}", stderr(&o));
    assert_eq!(env.bounds(), (2, 5));
}

#[test]
fn the_home_kuberc_is_read_without_kuberc_set() {
    let (env, user) = setup();
    let home = env.dir.path().join("home");
    std::fs::create_dir_all(home.join(".kube")).unwrap();
    let rc = home.join(".kube").join("kuberc");
    std::fs::write(&rc, "credentialPluginPolicy: DenyAll\n").unwrap();
    let o = run(&user, &[("HOME", &home)], UPDATE);
    assert_refused(&env, &user, &o, &rc);
}

#[test]
fn an_allowlist_naming_the_plugin_lets_it_run() {
    let (env, user) = setup();
    let by_path = kuberc(
        env.dir.path(),
        &format!(
            "credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n- name: {}\n",
            user.script.display()
        ),
    );
    let o = run(&user, &[("KUBERC", &by_path)], UPDATE);
    assert_code(&o, 0);
    assert!(path_exists(&user.marker));
    assert_eq!(env.bounds(), (2, 11));
}

#[test]
fn an_allowlist_basename_is_looked_up_on_path() {
    let (env, user) = setup();
    let rc = kuberc(
        env.dir.path(),
        "credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n- name: cloud-login\n",
    );
    let bin = user.script.parent().unwrap().to_owned();
    let o = run(&user, &[("KUBERC", &rc), ("PATH", &bin)], UPDATE);
    assert_code(&o, 0);
    assert!(path_exists(&user.marker));
    // Not on PATH: the basename names no file, so nothing matches.
    let o = run(
        &user,
        &[("KUBERC", &rc), ("PATH", Path::new("/nonexistent"))],
        UPDATE,
    );
    assert_code(&o, 3);
}

#[test]
fn an_allowlist_that_does_not_name_the_plugin_refuses_it() {
    let (env, user) = setup();
    let other = env.dir.path().join("other-login");
    std::fs::write(&other, "#!/bin/sh\nexit 1\n").unwrap();
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o755)).unwrap();
    let rc = kuberc(
        env.dir.path(),
        &format!(
            "credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n- name: {}\n- command: {}\n",
            other.display(),
            user.script.display()
        ),
    );
    // `command` is not a key kubectl's kuberc has: the file is refused, nothing widened.
    let o = run(&user, &[("KUBERC", &rc)], UPDATE);
    assert_refused(&env, &user, &o, &rc);
    let rc = kuberc(
        env.dir.path(),
        &format!(
            "credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n- name: {}\n",
            other.display()
        ),
    );
    let o = run(&user, &[("KUBERC", &rc)], UPDATE);
    assert_refused(&env, &user, &o, &rc);
    assert!(
        stderr(&o).contains("not in its credentialPluginAllowlist"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn an_empty_allowlist_refuses_every_plugin() {
    let (env, user) = setup();
    let rc = kuberc(
        env.dir.path(),
        "credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist: []\n",
    );
    let o = run(&user, &[("KUBERC", &rc)], UPDATE);
    assert_refused(&env, &user, &o, &rc);
}

#[test]
fn a_malformed_or_missing_kuberc_refuses_the_plugin() {
    let (env, user) = setup();
    let rc = env.dir.path().join("kuberc");
    std::fs::write(&rc, "credentialPluginPolicy: [DenyAll\n").unwrap();
    let o = run(&user, &[("KUBERC", &rc)], UPDATE);
    assert_refused(&env, &user, &o, &rc);
    assert!(stderr(&o).contains("cannot be used"), "{}", stderr(&o));
    let missing = env.dir.path().join("no-such-kuberc");
    let o = run(&user, &[("KUBERC", &missing)], UPDATE);
    assert_refused(&env, &user, &o, &missing);
}

#[test]
fn kuberc_off_lets_the_plugin_run() {
    for (var, value) in [("KUBERC", "off"), ("KUBECTL_KUBERC", "false")] {
        let (env, user) = setup();
        let home = env.dir.path().join("home");
        std::fs::create_dir_all(home.join(".kube")).unwrap();
        std::fs::write(
            home.join(".kube").join("kuberc"),
            "credentialPluginPolicy: DenyAll\n",
        )
        .unwrap();
        let o = run(&user, &[("HOME", &home), (var, Path::new(value))], UPDATE);
        assert_code(&o, 0);
        assert!(path_exists(&user.marker), "{var}={value}");
        assert_eq!(env.bounds(), (2, 11));
    }
}

#[test]
fn a_user_without_a_plugin_is_not_affected() {
    let (env, user) = setup();
    let rc = kuberc(env.dir.path(), "credentialPluginPolicy: DenyAll\n");
    let o = run(&user, &[("KUBERC", &rc)], &["web", "--max", "11", "--yes"]);
    assert_code(&o, 0);
    assert_eq!(env.bounds(), (2, 11));
}

#[test]
fn history_and_apply_are_refused_too() {
    let (env, user) = setup();
    let plan = env.dir.path().join("plan.json");
    let o = run(
        &user,
        &[],
        &["web", "--max", "11", "--plan-out", plan.to_str().unwrap()],
    );
    assert_code(&o, 0);
    std::fs::remove_file(&user.marker).ok();
    let rc = kuberc(env.dir.path(), "credentialPluginPolicy: DenyAll\n");
    let o = run(
        &user,
        &[("KUBERC", &rc)],
        &["history", "web", "--user", "exec-admin"],
    );
    assert_refused(&env, &user, &o, &rc);
    let o = run(
        &user,
        &[("KUBERC", &rc)],
        &[
            "apply",
            plan.to_str().unwrap(),
            "--yes",
            "--user",
            "exec-admin",
        ],
    );
    assert_refused(&env, &user, &o, &rc);
    assert_eq!(env.bounds(), (2, 5));
}

#[test]
fn a_fleet_with_one_denied_context_is_refused_before_any_cluster_is_touched() {
    let fleet = Fleet::new(&["east", "west"]);
    let token = fleet.sb("west").token(sandbox_apiserver::Identity::Admin);
    let user = exec_user(fleet.dir.path(), &fleet.kubeconfig, &token, Some("west"));
    let rc = kuberc(fleet.dir.path(), "credentialPluginPolicy: DenyAll\n");
    let o = run(
        &user,
        &[("KUBERC", &rc)],
        &["web", "--max", "11", "--yes", "--contexts", "east,west"],
    );
    assert_code(&o, 3);
    let err = stderr(&o);
    assert!(err.contains(rc.to_str().unwrap()), "{err}");
    assert!(err.contains("\"west\""), "{err}");
    assert!(!path_exists(&user.marker), "the plugin ran: {err}");
    assert_eq!(fleet.all_writes(), 0);
    for sb in &fleet.sandboxes {
        assert!(sb.requests().is_empty(), "a cluster was contacted");
    }
}
