//! `--as` / `--as-group` end to end: the real binary against the sandbox, which authorizes
//! every request as the impersonated identity (the Impersonate-* headers) with the real
//! server's RBAC: what the impersonated user may not do is refused, nothing changes, and the
//! one-line error names that user — not only the context.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;

const NEW_IMAGE: &str = "registry.example.com/web:2.0";
const OLD_IMAGE: &str = "registry.example.com/web:1.0";

/// The `error:` lines of a run's stderr.
fn error_lines(o: &std::process::Output) -> Vec<String> {
    stderr(o)
        .lines()
        .filter(|l| l.starts_with("error:"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn as_readonly_from_the_admin_context_is_forbidden_names_readonly_and_changes_nothing() {
    let env = Env::new();
    let o = env.run(&["web", "--image", NEW_IMAGE, "--yes", "--as", "readonly"]);
    assert_code(&o, 1);
    // The refused write is one line naming the impersonated user, then the outcome.
    let err = stderr(&o);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].starts_with(
            "deployment.apps/web NOT updated: forbidden: \"readonly\" (--as) cannot patch deployment.apps/web in namespace \"shop\" (context \"sandbox\"): "
        ),
        "{err}"
    );
    assert!(
        lines[0].contains("User \"readonly\" cannot patch resource \"deployments\""),
        "{err}"
    );
    assert_eq!(lines[1], "Nothing was changed.");
    assert_eq!(env.image(), OLD_IMAGE);
    // Every request was sent as readonly. The one object's write is its own check (no dry
    // run): it and the history record that rode with it were the only writes, both refused.
    let requests = env.sb.requests();
    assert!(!requests.is_empty());
    for r in &requests {
        assert_eq!(r.impersonated.as_deref(), Some("readonly"), "{r:?}");
    }
    assert!(!requests.iter().any(|r| r.dry_run), "{requests:?}");
    let mut writes: Vec<(String, String, u16)> = env
        .writes()
        .into_iter()
        .map(|r| (r.method, r.path, r.status))
        .collect();
    writes.sort();
    assert_eq!(
        writes,
        [
            (
                "PATCH".to_owned(),
                "/apis/apps/v1/namespaces/shop/deployments/web".to_owned(),
                403
            ),
            (
                "POST".to_owned(),
                "/api/v1/namespaces/shop/configmaps".to_owned(),
                403
            ),
        ]
    );
    let refused: Vec<_> = requests.iter().filter(|r| r.status == 403).collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
}

#[test]
fn as_readonly_two_objects_are_refused_by_their_dry_runs_and_nothing_is_written() {
    let env = Env::new();
    let o = env.run(&[
        "web", "--image", NEW_IMAGE, "--max", "9", "--yes", "--as", "readonly",
    ]);
    assert_code(&o, 1);
    let err = stderr(&o);
    assert!(err.contains("Nothing was changed."), "{err}");
    assert!(
        err.contains("User \"readonly\" cannot patch resource \"deployments\""),
        "{err}"
    );
    assert_eq!(env.image(), OLD_IMAGE);
    let requests = env.sb.requests();
    for r in &requests {
        assert_eq!(r.impersonated.as_deref(), Some("readonly"), "{r:?}");
    }
    // Nothing but the refused dry runs was a write.
    assert!(env.writes().is_empty(), "{:?}", env.writes());
    let refused: Vec<_> = requests.iter().filter(|r| r.status == 403).collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(refused.iter().all(|r| r.dry_run && r.method == "PATCH"));
}

#[test]
fn as_admin_without_the_masters_group_is_forbidden_like_on_a_real_cluster() {
    // admin's power is its group (system:masters); impersonating the name alone does not
    // carry it.
    let env = Env::new();
    let o = env.run(&["web", "--image", NEW_IMAGE, "--yes", "--as", "admin"]);
    assert_code(&o, 1);
    let errors = error_lines(&o);
    assert_eq!(errors.len(), 1, "{}", stderr(&o));
    assert!(
        errors[0].starts_with("error: forbidden: \"admin\" (--as) cannot get deployment.apps/web"),
        "{}",
        errors[0]
    );
    assert_eq!(env.image(), OLD_IMAGE);
}

#[test]
fn as_admin_in_the_masters_group_updates_and_the_history_names_admin() {
    let env = Env::new();
    let o = env.run(&[
        "web",
        "--image",
        NEW_IMAGE,
        "--yes",
        "--as",
        "admin",
        "--as-group",
        "system:masters",
    ]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("deployment.apps/web updated"),
        "{}",
        stdout(&o)
    );
    assert_eq!(env.image(), NEW_IMAGE);
    for r in env.sb.requests() {
        assert_eq!(r.impersonated.as_deref(), Some("admin"), "{r:?}");
    }
    // The history record names the user the server says the run acted as.
    let h = env.run(&["history", "web", "-o", "json"]);
    assert_code(&h, 0);
    let doc: serde_json::Value = serde_json::from_slice(&h.stdout).expect("one JSON document");
    assert_eq!(doc["records"][0]["user"], "admin", "{doc}");
}

#[test]
fn a_context_that_may_not_impersonate_says_so_in_one_line() {
    let env = Env::new();
    let o = env.run(&[
        "web",
        "--image",
        NEW_IMAGE,
        "--yes",
        "--context",
        "sandbox-readonly",
        "--as",
        "admin",
    ]);
    assert_code(&o, 1);
    let errors = error_lines(&o);
    assert_eq!(errors.len(), 1, "{}", stderr(&o));
    assert!(
        errors[0].starts_with(
            "error: forbidden: context \"sandbox-readonly\" may not act as \"admin\" (--as): users \"admin\" is forbidden: User \"readonly\" cannot impersonate resource \"users\""
        ),
        "{}",
        errors[0]
    );
    assert_eq!(env.image(), OLD_IMAGE);
    assert!(
        env.sb.requests().iter().all(|r| r.status == 403),
        "every request refused before it was served"
    );
}

#[test]
fn as_readonly_may_still_read_the_history() {
    let env = Env::new();
    let first = env.run(&["web", "--image", NEW_IMAGE, "--yes"]);
    assert_code(&first, 0);
    let before = env.sb.requests().len();
    let o = env.run(&["history", "web", "--as", "readonly"]);
    assert_code(&o, 0);
    let reads = &env.sb.requests()[before..];
    assert!(!reads.is_empty());
    assert!(
        reads
            .iter()
            .all(|r| r.impersonated.as_deref() == Some("readonly") && r.method == "GET"),
        "{reads:?}"
    );
    assert!(stdout(&o).contains("REVISION"), "{}", stdout(&o));
    assert!(stdout(&o).lines().count() >= 2, "{}", stdout(&o));
}
