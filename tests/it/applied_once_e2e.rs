//! A saved plan applies at most once, told by the objects it wrote (their annotation
//! `kubectl-appupdate/applied-plans` and their planned values), not by the history, which
//! anyone who may write ConfigMaps can delete, spoil, freeze or forge, and which ordinary runs
//! prune. Each case: the attack (or the mere passing of time), then what the user sees and the
//! cluster state afterwards.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::common;
use common::fleet::{Fleet, writes};
use common::*;

const OLD_IMAGE: &str = "registry.example.com/web:1.0";
const NEW_IMAGE: &str = "registry.example.com/web:2.0";
const DEPLOY_PATH: &str = "/apis/apps/v1/namespaces/shop/deployments/web";
const HISTORY_PATH: &str = "/api/v1/namespaces/shop/configmaps/web-appupdate-history";
const CONFIG_MAPS: &str = "/api/v1/namespaces/shop/configmaps";
const ANNOTATION: &str = "kubectl-appupdate/applied-plans";

fn plan_out(env: &Env, args: &[&str]) -> (std::path::PathBuf, String) {
    let file = env.dir.path().join("plan.json");
    let mut all = vec!["web"];
    all.extend_from_slice(args);
    all.extend(["--plan-out", file.to_str().unwrap()]);
    let o = env.run(&all);
    assert_code(&o, 0);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    (file, doc["checksum"].as_str().unwrap().to_owned())
}

fn apply(env: &Env, file: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["apply", file.to_str().unwrap()];
    args.extend_from_slice(extra);
    env.run(&args)
}

fn marks(object: &Value) -> String {
    object["metadata"]["annotations"][ANNOTATION]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Writes to the application's objects (not the history, not dry runs).
fn app_writes(env: &Env) -> usize {
    env.writes()
        .iter()
        .filter(|w| !w.path.starts_with(CONFIG_MAPS))
        .count()
}

fn gz_base64(json: &Value) -> String {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(json.to_string().as_bytes()).unwrap();
    base64::engine::general_purpose::STANDARD.encode(gz.finish().unwrap())
}

/// Replaces the history ConfigMap with one holding `data` as its `binaryData`.
fn plant_history(sb: &sandbox_apiserver::Sandbox, data: Value, immutable: bool) {
    let _ = sb.delete(HISTORY_PATH);
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "web-appupdate-history", "labels": {"app": "web"}},
        "binaryData": data});
    if immutable {
        cm["immutable"] = json!(true);
    }
    sb.create(CONFIG_MAPS, cm).unwrap();
}

#[track_caller]
fn assert_refused_as_applied(o: &std::process::Output, then_changed: bool) {
    assert_code(o, 5);
    let err = stderr(o);
    let wanted = if then_changed {
        "was applied already, then changed: deployment.apps/web in namespace shop"
    } else {
        "was applied already: the objects of web in namespace shop"
    };
    assert!(err.contains(wanted), "{err}");
    assert!(
        err.contains(
            "a saved plan is applied once, so nothing was sent; make a new plan with --plan-out"
        ),
        "{err}"
    );
}

#[test]
fn the_objects_carry_the_plan_and_replay_is_refused_whatever_became_of_the_history() {
    let env = Env::new();
    let (file, checksum) = plan_out(&env, &["--image", NEW_IMAGE, "--max", "9"]);
    let o = apply(&env, &file, &["--yes"]);
    assert_code(&o, 0);
    // The diff showed the annotation it wrote.
    assert!(
        stdout(&o).contains(&format!("{ANNOTATION}: {checksum}")),
        "{}",
        stdout(&o)
    );
    assert_eq!(marks(&env.deployment()), checksum);
    assert_eq!(marks(&env.hpa()), checksum);
    // Never in the pod template: that would restart every pod.
    assert!(
        env.deployment()["spec"]["template"]["metadata"]["annotations"]
            .get(ANNOTATION)
            .is_none()
    );

    // The record holding the checksum deleted (the whole history), or spoilt, or frozen: the
    // objects still tell.
    for (what, history) in [
        ("deleted", None),
        (
            "spoilt",
            Some((json!({"revision-1.json.gz": "bm90IGd6aXA="}), false)),
        ),
        ("frozen", Some((json!({}), true))),
    ] {
        let _ = env.sb.delete(HISTORY_PATH);
        if let Some((data, immutable)) = history {
            plant_history(&env.sb, data, immutable);
        }
        let before = app_writes(&env);
        let o = apply(&env, &file, &["--yes"]);
        assert_refused_as_applied(&o, false);
        assert_eq!(app_writes(&env), before, "history {what}: nothing written");
        assert_eq!(env.image(), NEW_IMAGE);
    }
}

#[test]
fn replay_after_ordinary_runs_pruned_the_record_is_refused() {
    let env = Env::new();
    let (file, checksum) = plan_out(&env, &["--image", NEW_IMAGE]);
    assert_code(&apply(&env, &file, &["--yes"]), 0);
    // Ten ordinary runs, no tampering: the record of the plan is pruned.
    for max in 11..21 {
        let o = env.run(&["web", "--max", &max.to_string(), "--yes"]);
        assert_code(&o, 0);
    }
    let o = env.run(&["history", "web", "-o", "json"]);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        doc["records"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["planChecksum"] != json!(checksum)),
        "{doc}"
    );
    let before = app_writes(&env);
    let o = apply(&env, &file, &["--yes"]);
    assert_refused_as_applied(&o, false);
    assert_eq!(app_writes(&env), before);
}

#[test]
fn replay_after_an_undo_is_applied_then_changed_and_writes_nothing() {
    let env = Env::new();
    let (file, checksum) = plan_out(&env, &["--image", NEW_IMAGE]);
    assert_code(&apply(&env, &file, &["--yes"]), 0);
    let o = env.run(&["web", "--undo", "--yes"]);
    assert_code(&o, 0);
    assert_eq!(env.image(), OLD_IMAGE);
    // The undo does not clear the mark.
    assert_eq!(marks(&env.deployment()), checksum);
    let before = app_writes(&env);
    let o = apply(&env, &file, &["--yes"]);
    assert_refused_as_applied(&o, true);
    assert!(
        stderr(&o).contains("undone or edited since"),
        "{}",
        stderr(&o)
    );
    assert_eq!(app_writes(&env), before);
    assert_eq!(env.image(), OLD_IMAGE);
}

#[test]
fn a_forged_mark_without_the_values_cannot_make_the_plan_count_as_applied() {
    let env = Env::new();
    let (file, checksum) = plan_out(&env, &["--image", NEW_IMAGE]);
    env.sb
        .update(DEPLOY_PATH, |d| {
            d["metadata"]["annotations"] = json!({ ANNOTATION: checksum });
        })
        .unwrap();
    let o = apply(&env, &file, &["--yes"]);
    assert_refused_as_applied(&o, true);
    assert_eq!(env.image(), OLD_IMAGE);
    assert_eq!(app_writes(&env), 0);
}

#[test]
fn a_frozen_history_is_said_with_the_plan_before_anything_is_written() {
    let env = Env::new();
    plant_history(&env.sb, json!({}), true);
    let frozen = env.sb.get(HISTORY_PATH).unwrap();
    let o = env.run(&["web", "--max", "7", "--dry-run"]);
    assert_code(&o, 0);
    let err = stderr(&o);
    assert!(
        err.contains("warning: configmap/web-appupdate-history is immutable, so this change will not be recorded in the history and --undo will not know it"),
        "{err}"
    );
    assert_eq!(app_writes(&env), 0);
    // Applied anyway (the history is a log): the change is made, the warning said once more
    // after the writes, and the ConfigMap is as it was.
    let o = env.run(&["web", "--max", "7", "--yes"]);
    assert_code(&o, 0);
    assert!(stderr(&o).contains("is immutable"), "{}", stderr(&o));
    assert_eq!(env.bounds().1, 7);
    assert_eq!(env.sb.get(HISTORY_PATH).unwrap(), frozen);
}

#[test]
fn a_forged_record_in_one_cluster_of_a_fleet_does_not_fake_success_there() {
    let fleet = Fleet::new(&["eu-1", "eu-2"]);
    let file = fleet.dir.path().join("plan.json");
    let o = fleet.run(&[
        "web",
        "--contexts",
        "eu-1,eu-2",
        "--image",
        NEW_IMAGE,
        "--plan-out",
        file.to_str().unwrap(),
    ]);
    assert_code(&o, 0);
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let checksum = saved["checksum"].as_str().unwrap();
    // eu-2's history claims the plan was applied there (the checksum is public: it is in the
    // file); eu-2 still runs the old image.
    let forged = json!({
        "revision": 1, "time": "2026-12-01T07:00:00Z", "user": "admin",
        "tool": "kubectl-appupdate 0.1.0", "status": "applied", "source": {"type": "update"},
        "savedPlan": true, "planChecksum": checksum,
        "image": {"container": "web", "before": OLD_IMAGE, "after": NEW_IMAGE},
    });
    plant_history(
        fleet.sb("eu-2"),
        json!({"revision-1.json.gz": gz_base64(&forged)}),
        false,
    );
    let o = fleet.run(&["apply", file.to_str().unwrap(), "--yes", "-o", "json"]);
    assert_code(&o, 0);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    for c in doc["clusters"].as_array().unwrap() {
        assert_eq!(c["outcome"]["status"], "applied", "{c}");
    }
    for name in ["eu-1", "eu-2"] {
        assert_eq!(fleet.image(name), NEW_IMAGE, "{name}");
    }
    // Applied again as a whole: now the objects tell, and nothing is written a second time.
    let before: usize = ["eu-1", "eu-2"]
        .iter()
        .map(|n| writes(fleet.sb(n)).len())
        .sum();
    let o = fleet.run(&["apply", file.to_str().unwrap(), "--yes", "-o", "json"]);
    assert_code(&o, 0);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    for c in doc["clusters"].as_array().unwrap() {
        assert_eq!(c["outcome"]["status"], "already-applied", "{c}");
    }
    // As a diff: each cluster is said to be applied already, with the newest record naming
    // the plan (eu-2's own, not the forged revision 1).
    let o = fleet.run(&["apply", file.to_str().unwrap(), "--yes"]);
    assert_code(&o, 0);
    let out = format!("{}{}", stdout(&o), stderr(&o));
    assert!(
        out.contains("context eu-2 (namespace shop): already applied by this plan (revision 2), not written again"),
        "{out}"
    );
    assert!(
        out.contains("context eu-1 (namespace shop): already applied by this plan (revision 1), not written again"),
        "{out}"
    );
    let after: usize = ["eu-1", "eu-2"]
        .iter()
        .map(|n| writes(fleet.sb(n)).len())
        .sum();
    assert_eq!(after, before);
}

#[test]
fn a_fleet_whose_plan_was_undone_in_one_cluster_is_refused_there_as_drift_in_the_document() {
    let fleet = Fleet::new(&["eu-1", "eu-2"]);
    let file = fleet.dir.path().join("plan.json");
    let file = file.to_str().unwrap();
    let o = fleet.run(&[
        "web",
        "--contexts",
        "eu-1,eu-2",
        "--image",
        NEW_IMAGE,
        "--plan-out",
        file,
    ]);
    assert_code(&o, 0);
    assert_code(&fleet.run(&["apply", file, "--yes"]), 0);
    let o = fleet.run(&["web", "--context", "eu-2", "--undo", "--yes"]);
    assert_code(&o, 0);
    assert_eq!(fleet.image("eu-2"), OLD_IMAGE);
    let before: usize = ["eu-1", "eu-2"]
        .iter()
        .map(|n| writes(fleet.sb(n)).len())
        .sum();
    let o = fleet.run(&["apply", file, "--yes", "-o", "json"]);
    assert_code(&o, 5);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let outcome = |i: usize| doc["clusters"][i]["outcome"].clone();
    assert_eq!(outcome(0)["status"], "already-applied", "{doc}");
    assert_eq!(outcome(1)["status"], "failed", "{doc}");
    assert_eq!(outcome(1)["reason"], "drift", "{doc}");
    assert!(
        outcome(1)["message"]
            .as_str()
            .unwrap()
            .contains("was applied already, then changed: deployment.apps/web"),
        "{doc}"
    );
    let after: usize = ["eu-1", "eu-2"]
        .iter()
        .map(|n| writes(fleet.sb(n)).len())
        .sum();
    assert_eq!(after, before);
    assert_eq!(fleet.image("eu-2"), OLD_IMAGE);
}
