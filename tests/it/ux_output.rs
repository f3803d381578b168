//! `-o json` / `-o yaml`: the plan as data on stdout, validated against the documented JSON
//! Schema (`schema/plan.schema.json`); everything else (report, prompt, errors) on stderr; the
//! prompt still works on the terminal when stdout is a pipe.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::Command;

use common::*;
use serde_json::{Value, json};

const ENDPOINTS: &str = "\
endpoints:
  - path: /health
  - path: /unprotected
  - path: /products
  - path: /protected/admin
    scopes: [user, admin]
";

fn schema() -> Value {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/schema/plan.schema.json"
    ))
    .unwrap();
    serde_json::from_str(&text).unwrap()
}

#[track_caller]
fn assert_valid(doc: &Value) {
    let validator = jsonschema::validator_for(&schema()).expect("the schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{errors:#?}\n{}",
        serde_json::to_string_pretty(doc).unwrap()
    );
}

fn full_plan(env: &Env, format: &str) -> std::process::Output {
    let endpoints = env.write_file("endpoints.yaml", ENDPOINTS);
    env.run(&[
        "web",
        "--image",
        "registry.example.com/web:2.1",
        "--min",
        "3",
        "--max",
        "8",
        "--endpoints",
        endpoints.to_str().unwrap(),
        "--dry-run",
        "-o",
        format,
    ])
}

fn object<'a>(doc: &'a Value, kind: &str, name_prefix: &str, action: &str) -> &'a Value {
    doc["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| {
            o["kind"] == kind
                && o["action"] == action
                && o["name"].as_str().unwrap().starts_with(name_prefix)
        })
        .unwrap_or_else(|| panic!("no {action} of {kind} {name_prefix}* in {doc:#}"))
}

#[test]
fn the_schema_is_a_valid_draft_2020_12_schema() {
    assert!(jsonschema::meta::is_valid(&schema()));
}

#[test]
fn a_full_plan_validates_against_the_schema_and_says_what_changes() {
    let env = Env::new();
    let o = full_plan(&env, "json");
    assert_code(&o, 0);
    let doc: Value = serde_json::from_slice(&o.stdout).expect("stdout is one JSON document");
    assert_valid(&doc);
    assert_eq!(doc["schema"], "kubectl-appupdate.plan/v1");
    assert_eq!(
        (doc["app"].as_str(), doc["namespace"].as_str()),
        (Some("web"), Some("shop"))
    );
    assert_eq!(doc["context"], "sandbox");
    assert_eq!(doc["hasChanges"], true);
    assert_eq!(
        doc["summary"],
        json!({"create": 1, "update": 3, "delete": 1, "unchanged": 0})
    );

    let deploy = object(&doc, "Deployment", "web", "update");
    assert_eq!(deploy["apiVersion"], "apps/v1");
    assert_eq!(
        deploy["fields"],
        json!([{
            "path": "spec.template.spec.containers[name=app].image",
            "before": "registry.example.com/web:1.0",
            "after": "registry.example.com/web:2.1",
        }])
    );
    let hpa = object(&doc, "HorizontalPodAutoscaler", "web", "update");
    assert_eq!(
        hpa["fields"],
        json!([
            {"path": "spec.minReplicas", "before": 2, "after": 3},
            {"path": "spec.maxReplicas", "before": 5, "after": 8},
        ])
    );

    let created = object(&doc, "Ingress", "web-", "create");
    assert_eq!(created["resourceVersion"], Value::Null);
    assert_eq!(created["ingress"]["scopes"], json!(["admin", "user"]));
    assert_eq!(created["ingress"]["paths"], json!(["/protected/admin"]));
    assert_eq!(created["ingress"]["pathsBefore"], json!([]));

    let public = object(&doc, "Ingress", "web-", "update");
    assert_eq!(public["ingress"]["scopes"], json!([]));
    assert_eq!(
        public["ingress"]["paths"],
        json!(["/health", "/products", "/unprotected"])
    );
    assert_eq!(
        public["ingress"]["pathsBefore"],
        json!(["/health", "/unprotected"])
    );

    let deleted = object(&doc, "Ingress", "web-", "delete");
    assert_eq!(deleted["ingress"]["scopes"], json!(["user"]));
    assert_eq!(deleted["ingress"]["paths"], json!([]));
    assert_eq!(
        deleted["ingress"]["pathsBefore"],
        json!(["/protected/user"])
    );
    assert_eq!(deleted["after"], Value::Null);

    // Data only: no diff, no colour, nothing on stderr.
    assert!(!stdout(&o).contains('\u{1b}'));
    assert_eq!(stderr(&o), "");
    assert!(env.writes().is_empty());
}

#[test]
fn the_schema_is_not_vacuous() {
    let env = Env::new();
    let o = full_plan(&env, "json");
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let validator = jsonschema::validator_for(&schema()).unwrap();
    let broken = |f: &dyn Fn(&mut Value)| {
        let mut d = doc.clone();
        f(&mut d);
        !validator.is_valid(&d)
    };
    assert!(broken(&|d| d["schema"] = json!("kubectl-appupdate.plan/v2")));
    assert!(broken(&|d| d["objects"][0]["action"] = json!("replace")));
    assert!(broken(&|d| {
        d.as_object_mut().unwrap().remove("summary");
    }));
    assert!(broken(
        &|d| d["objects"][0]["ingress"] = json!({"identifier": "x"})
    ));
    assert!(broken(&|d| d["surprise"] = json!(1)));
}

#[test]
fn yaml_is_the_same_document_as_json() {
    let env = Env::new();
    let json_doc: Value = serde_json::from_slice(&full_plan(&env, "json").stdout).unwrap();
    let o = full_plan(&env, "yaml");
    assert_code(&o, 0);
    let yaml_doc: Value = serde_saphyr::from_str(&stdout(&o)).expect("stdout is one YAML document");
    assert_eq!(yaml_doc, json_doc);
    assert_valid(&yaml_doc);
}

#[test]
fn no_changes_is_a_valid_document_with_everything_unchanged() {
    let env = Env::new();
    let o = env.run(&[
        "web",
        "--min",
        "2",
        "--max",
        "5",
        "-o",
        "json",
        "--dry-run",
        "--detailed-exitcode",
    ]);
    assert_code(&o, 0);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_valid(&doc);
    assert_eq!(doc["hasChanges"], false);
    assert_eq!(doc["summary"]["unchanged"], 1);
    assert_eq!(doc["objects"][0]["action"], "unchanged");
    assert_eq!(doc["objects"][0]["fields"], json!([]));
}

#[test]
fn with_yes_stdout_is_exactly_the_plan_and_the_report_goes_to_stderr() {
    let env = Env::new();
    let o = env.run(&["web", "--max", "9", "--yes", "-o", "json"]);
    assert_code(&o, 0);
    let doc: Value = serde_json::from_slice(&o.stdout).expect("nothing but the plan on stdout");
    assert_valid(&doc);
    assert_eq!(doc["summary"]["update"], 1);
    assert!(
        stderr(&o).contains("horizontalpodautoscaler.autoscaling/web updated (maxReplicas 5 → 9)"),
        "{}",
        stderr(&o)
    );
    assert_eq!(env.bounds(), (2, 9));
}

#[test]
fn without_yes_and_without_a_terminal_the_plan_is_printed_and_the_run_refuses() {
    let env = Env::new();
    let o = env
        .cmd()
        .args([
            "web",
            "--image",
            "registry.example.com/web:2.0",
            "-o",
            "json",
        ])
        .write_stdin("y\n")
        .output()
        .unwrap();
    assert_code(&o, 4);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_valid(&doc);
    assert!(stderr(&o).contains("no terminal"), "{}", stderr(&o));
    assert!(env.writes().is_empty());
}

/// `kubectl appupdate … -o json > plan.json` in a terminal: the JSON goes to the file, the
/// question is asked on the terminal, and answering y applies.
#[test]
fn json_to_a_file_while_the_prompt_stays_on_the_terminal() {
    let env = Env::new();
    let plan_file = env.dir.path().join("plan.json");
    let bin = assert_cmd::cargo::cargo_bin("kubectl-appupdate");
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(r#"exec "$0" "$@" > "$PLAN_FILE""#)
        .arg(&bin)
        .args(["--kubeconfig"])
        .arg(&env.kubeconfig)
        .args(["web", "--max", "7", "-o", "json", "--color", "never"])
        .env("PLAN_FILE", &plan_file);
    scrub(&mut cmd).env("TERM", "xterm-256color");
    let mut p = rexpect::session::spawn_command(cmd, Some(30_000)).expect("spawned in a pty");
    pty::wait_for_prompt(
        &mut p,
        "Apply these changes to web in namespace shop (context sandbox):",
    );
    pty::answer(&mut p, &["y", "\r"]);
    // The report is on the terminal (stderr) too.
    p.exp_string("horizontalpodautoscaler.autoscaling/web updated")
        .unwrap();
    p.exp_eof().unwrap();
    match p.process().wait().expect("process ends") {
        rexpect::process::WaitStatus::Exited(_, code) => assert_eq!(code, 0),
        other => panic!("unexpected end: {other:?}"),
    }
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&plan_file).unwrap()).unwrap();
    assert_valid(&doc);
    assert_eq!(doc["objects"][0]["fields"][0]["after"], 7);
    assert_eq!(env.bounds(), (2, 7));
}

#[test]
fn the_readme_documents_every_field_of_the_schema() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let schema = schema();
    let mut names: Vec<String> = Vec::new();
    for props in [
        &schema["properties"],
        &schema["$defs"]["object"]["properties"],
        &schema["$defs"]["field"]["properties"],
        &schema["$defs"]["ingress"]["properties"],
        &schema["$defs"]["route"]["properties"],
        &schema["$defs"]["routes"]["properties"],
        &schema["properties"]["summary"]["properties"],
    ] {
        names.extend(props.as_object().unwrap().keys().cloned());
    }
    for name in names {
        let documented = [
            format!("`{name}`"),
            format!(".{name}`"),
            format!("`{name}[]"),
            format!(".{name}[]`"),
        ]
        .iter()
        .any(|form| readme.contains(form.as_str()));
        assert!(documented, "README does not document `{name}`");
    }
}
