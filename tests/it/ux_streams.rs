//! Which lines go to which stream, for every exit code (docs/output.md's table): stdout carries
//! the plan and what was done; stderr carries what was not done, the closing line of a run that
//! did not go as planned, notices and the reason for a non-zero exit — which every non-zero
//! run gives on stderr. With `-o json`, stdout is exactly one document.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::common::gate;

use common::running::{DEPLOY_PATH, DROP_USER, Running, wait_until};
use common::*;
use sandbox_apiserver::{Fault, Rollout, SandboxOptions, Trigger};
use serde_json::{Value, json};

const NEW_IMAGE: &str = "registry.example.com/web:2.0";
const USER_INGRESS: &str = "web-04f8996da763b7a9";

/// What every report, failure or notice line starts with or contains: none of it on stdout.
const NOT_ON_STDOUT: &[&str] = &[
    " NOT ",
    " MAYBE ",
    "Nothing was changed.",
    "The application is partly updated",
    "The live object changed after the plan was shown",
    "error:",
    "interrupt",
    "Waiting for the rollout",
];

/// The plan's summary line, which never goes to stderr.
const PLAN_LINES: &[&str] = &[
    "Plan: ",
    "will be updated in place",
    "kubectl appupdate: web",
];

#[track_caller]
fn stdout_is_data_only(out: &str) {
    for needle in NOT_ON_STDOUT {
        assert!(!out.contains(needle), "{needle:?} on stdout:\n{out}");
    }
}

#[track_caller]
fn stderr_has_no_plan(err: &str) {
    for needle in PLAN_LINES {
        assert!(!err.contains(needle), "{needle:?} on stderr:\n{err}");
    }
}

#[test]
fn exit_0_the_plan_and_what_was_done_on_stdout_nothing_on_stderr() {
    let env = Env::new();
    let o = env.run(&["web", "--image", NEW_IMAGE, "--yes"]);
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(
        out.contains("Plan: 0 to create, 1 to update, 0 to delete."),
        "{out}"
    );
    assert!(out.contains("deployment.apps/web updated (image "), "{out}");
    stdout_is_data_only(&out);
    assert_eq!(stderr(&o), "");
}

#[test]
fn exit_0_with_json_stdout_is_exactly_one_document_and_the_report_is_on_stderr() {
    let env = Env::new();
    let o = env.run(&["web", "--image", NEW_IMAGE, "--yes", "-o", "json"]);
    assert_code(&o, 0);
    let doc: Value = serde_json::from_slice(&o.stdout).expect("stdout is one JSON document");
    assert_eq!(doc["schema"], "kubectl-appupdate.plan/v1");
    let err = stderr(&o);
    assert!(err.contains("deployment.apps/web updated (image "), "{err}");
    stderr_has_no_plan(&err);
}

#[test]
fn exit_1_before_any_request_the_reason_alone_on_stderr() {
    let env = Env::new();
    let o = env.run(&["shop-api", "--image", NEW_IMAGE, "--yes"]);
    assert_code(&o, 1);
    assert_eq!(stdout(&o), "");
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: deployment.apps/shop-api not found"),
        "{err}"
    );
}

#[test]
fn exit_1_refused_by_the_dry_run_the_plan_on_stdout_the_refusal_on_stderr() {
    let env = Env::new();
    let o = env.run(&[
        "web",
        "--image",
        NEW_IMAGE,
        "--yes",
        "--context",
        "sandbox-readonly",
    ]);
    assert_code(&o, 1);
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(
        out.contains("Plan: 0 to create, 1 to update, 0 to delete."),
        "{out}"
    );
    stdout_is_data_only(&out);
    assert_eq!(
        err.lines().collect::<Vec<_>>(),
        [
            "deployment.apps/web NOT updated: forbidden: you cannot patch deployment.apps/web in namespace \"shop\" (context \"sandbox-readonly\"): deployments.apps \"web\" is forbidden: User \"readonly\" cannot patch resource \"deployments\" in API group \"apps\" in the namespace \"shop\"",
            "Nothing was changed.",
        ],
        "{err}"
    );
}

#[test]
fn exit_2_the_plan_on_stdout_nothing_on_stderr() {
    let env = Env::new();
    let o = env.run(&["web", "--max", "9", "--dry-run", "--detailed-exitcode"]);
    assert_code(&o, 2);
    assert!(stdout(&o).contains("Plan: 0 to create, 1 to update, 0 to delete."));
    stdout_is_data_only(&stdout(&o));
    assert_eq!(stderr(&o), "");
}

#[test]
fn exit_3_the_reason_alone_on_stderr() {
    let env = Env::new();
    for args in [
        &["web", "--max", "9", "--detailed-exitcode"][..],
        &["web", "--min", "0"],
        &["web", "--min", "6", "--yes"],
        &["web", "--max", "9", "--context", "prod"],
    ] {
        let o = env.run(args);
        assert_code(&o, 3);
        assert_eq!(stdout(&o), "", "{args:?}");
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
    }
    assert!(env.writes().is_empty());
}

#[test]
fn exit_3_found_by_the_dry_run_the_plan_on_stdout_what_the_cluster_lacks_on_stderr() {
    // The Gateway API's standard channel: HTTPRoutes without the ExternalAuth filter.
    let env = Env::with_options(SandboxOptions {
        gateway_api_channel: sandbox_apiserver::GatewayApiChannel::Standard,
        ..Default::default()
    });
    let file = env.write_file(
        "endpoints.yaml",
        "endpoints:\n  - path: /health\n  - path: /protected/user\n    scopes: [user]\n",
    );
    let o = env.run(&[
        "web",
        "--endpoints",
        file.to_str().unwrap(),
        "--routes",
        "gateway",
        "--gateway",
        "public",
        "--auth-service",
        "oauth:8080",
        "--yes",
    ]);
    assert_code(&o, 3);
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(
        out.contains("Plan: 2 to create, 0 to update, 2 to delete."),
        "{out}"
    );
    stdout_is_data_only(&out);
    stderr_has_no_plan(&err);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines[0], "Warning: unknown field \"spec.rules[0].filters[0].externalAuth\"",
        "{err}"
    );
    assert!(
        lines[1].starts_with(&format!(
            "httproute.gateway.networking.k8s.io/{USER_INGRESS} NOT created: the HTTPRoutes of context \"sandbox\" have no ExternalAuth filter"
        )),
        "{err}"
    );
    assert_eq!(lines.last(), Some(&"Nothing was changed."), "{err}");
    assert!(env.writes().is_empty());
}

#[test]
fn exit_4_the_plan_on_stdout_the_refusal_on_stderr() {
    let env = Env::new();
    let o = env.run(&["web", "--max", "9"]);
    assert_code(&o, 4);
    assert!(stdout(&o).contains("Plan: 0 to create, 1 to update, 0 to delete."));
    stdout_is_data_only(&stdout(&o));
    assert_eq!(
        stderr(&o).trim(),
        "error: not applied: there is no terminal to ask for confirmation; pass --yes to apply without asking (nothing was changed)"
    );
}

#[test]
fn exit_5_the_new_diff_and_the_refusal_on_stderr() {
    let env = Env::new();
    env.sb.inject(Fault::CompetingWrite {
        object_path: DEPLOY_PATH.into(),
        after: Trigger::Read,
        mutate: Box::new(|d| {
            d["spec"]["template"]["spec"]["containers"][0]["image"] =
                json!("registry.example.com/web:1.5-hotfix");
        }),
    });
    let o = env.run(&["web", "--image", NEW_IMAGE, "--yes", "--color", "never"]);
    assert_code(&o, 5);
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(
        out.contains("Plan: 0 to create, 1 to update, 0 to delete."),
        "{out}"
    );
    assert!(!out.contains("1.5-hotfix"), "{out}");
    stdout_is_data_only(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines[0],
        "The live object changed after the plan was shown. This is what would change now (not applied):"
    );
    assert!(
        lines.iter().any(|l| l.trim_start().starts_with("- ")
            && l.ends_with("image: registry.example.com/web:1.5-hotfix")),
        "the new diff starts from the competitor's image: {err}"
    );
    assert_eq!(
        lines[lines.len() - 2..],
        [
            "deployment.apps/web NOT updated: spec.template.spec.containers[name=app].image is now \"registry.example.com/web:1.5-hotfix\" (the plan showed \"registry.example.com/web:1.0\"); nothing was written",
            "Nothing was changed.",
        ],
        "{err}"
    );
}

#[test]
fn exit_6_what_was_done_on_stdout_what_was_not_on_stderr() {
    let env = Env::new();
    let file = env.write_file("endpoints.yaml", DROP_USER);
    env.sb.inject(Fault::Restrict {
        dry_run: false,
        fault: Box::new(Fault::Status {
            method: Some("DELETE".into()),
            path_prefix: ingress_path(USER_INGRESS),
            status: 500,
            count: 1,
        }),
    });
    let o = env.run(&[
        "web",
        "--image",
        NEW_IMAGE,
        "--endpoints",
        file.to_str().unwrap(),
        "--yes",
    ]);
    assert_code(&o, 6);
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(out.contains("deployment.apps/web updated (image "), "{out}");
    stdout_is_data_only(&out);
    stderr_has_no_plan(&err);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].starts_with(&format!(
            "ingress.networking.k8s.io/{USER_INGRESS} NOT deleted: cannot delete"
        )),
        "{err}"
    );
    assert_eq!(
        lines[1],
        "The application is partly updated: 1 change was not applied (listed above)."
    );
}

#[test]
fn exit_7_what_was_done_on_stdout_progress_and_the_reason_on_stderr() {
    let env = Env::with_options(SandboxOptions {
        rollout: Rollout::Stuck,
        ..SandboxOptions::default()
    });
    let o = env.run(&[
        "web",
        "--image",
        NEW_IMAGE,
        "--yes",
        "--wait",
        "--timeout",
        "1s",
    ]);
    assert_code(&o, 7);
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(out.contains("deployment.apps/web updated (image "), "{out}");
    stdout_is_data_only(&out);
    stderr_has_no_plan(&err);
    assert!(
        err.starts_with("Waiting for the rollout of deployment.apps/web"),
        "{err}"
    );
    let last = err.lines().last().unwrap();
    assert!(
        last.starts_with(
            "error: timed out after 1s waiting for the rollout of deployment.apps/web"
        ),
        "{err}"
    );
}

#[test]
fn exit_9_what_was_done_on_stdout_each_open_path_and_the_reason_on_stderr() {
    let env = Env::new();
    let gate = gate::Gate::start(gate::Reply::Status(200));
    let file = env.write_file(
        "endpoints.yaml",
        "endpoints:\n  - path: /health\n  - path: /unprotected\n  - path: /protected/user\n    scopes: [user]\n  - path: /admin\n    scopes: [admin]\n",
    );
    let o = env.run(&[
        "web",
        "--endpoints",
        file.to_str().unwrap(),
        "--yes",
        "--verify-url",
        &gate.url(),
    ]);
    assert_code(&o, 9);
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(
        out.contains("Plan: 1 to create, 0 to update, 0 to delete."),
        "{out}"
    );
    assert!(out.contains(" created (scopes admin, 1 path)"), "{out}");
    stdout_is_data_only(&out);
    stderr_has_no_plan(&err);
    let at = gate.addr();
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 4, "{err}");
    assert!(lines[0].starts_with("Checking auth at "), "{err}");
    assert_eq!(
        lines[1..3],
        [
            format!("auth NOT enforced on {at}/web/admin (HTTP 200)"),
            format!("auth NOT enforced on {at}/web/protected/user (HTTP 200)"),
        ]
    );
    assert!(
        lines[3].starts_with("error: auth is not enforced: 2 of 2 requests"),
        "{err}"
    );
}

#[test]
fn exit_130_while_reading_nothing_on_stdout_the_reason_on_stderr() {
    let env = Env::new();
    env.sb.inject(Fault::Hold {
        method: Some("GET".into()),
        path_prefix: DEPLOY_PATH.into(),
        count: 1,
    });
    let run = Running::start(&env, &["web", "--image", NEW_IMAGE, "--yes"]);
    wait_until("the read in flight", || env.sb.held() == 1);
    run.signal("INT");
    let (code, out, err) = run.finish();
    env.sb.release_held();
    assert_eq!(code, 130, "{err}");
    assert_eq!(out, "");
    assert_eq!(err.trim(), "interrupted: nothing was changed");
}

#[test]
fn exit_143_while_writing_what_was_done_on_stdout_the_rest_on_stderr() {
    let env = Env::new();
    let mut run = Running::with_the_deployment_write_held(&env);
    run.signal("TERM");
    run.wait_for_stderr("interrupt received: finishing the requests in flight");
    env.sb.release_held();
    let (code, out, err) = run.finish();
    assert_eq!(code, 143, "{err}");
    assert!(out.contains("deployment.apps/web updated (image "), "{out}");
    stdout_is_data_only(&out);
    stderr_has_no_plan(&err);
    let lines: Vec<&str> = err.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(
        lines,
        [
            "interrupt received: finishing the requests in flight, starting no new ones (interrupt again to exit at once)",
            &format!(
                "ingress.networking.k8s.io/{USER_INGRESS} NOT deleted: not attempted (scopes user, 1 path)"
            ),
            "The application is partly updated: 1 change was not applied (listed above).",
            "warning: interrupted before the history was written: the changes made are not recorded in configmap/web-appupdate-history, so --undo does not know them",
        ],
        "{err}"
    );
}
