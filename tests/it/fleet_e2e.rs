//! One change over several clusters (a fleet), end to end against several sandboxes at once
//! (`common::fleet`: one kubeconfig with a context per sandbox): identical plans folded, a
//! cluster that cannot be planned or whose dry run refuses stops the run with nothing written
//! anywhere, canaries, the guard in one cluster only, a signal mid-fleet, saved fleet plans,
//! and the exit codes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::fleet::*;
use common::running::{Running, wait_until};
use common::*;
use sandbox_apiserver::{Fault, Rollout, SandboxOptions, Trigger};
use serde_json::{Value, json};

const THREE: &str = "eu-1,eu-2,us-1";

fn update(fleet: &Fleet, contexts: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["web", "--contexts", contexts, "--image", NEW_IMAGE];
    args.extend_from_slice(extra);
    fleet.run(&args)
}

#[track_caller]
fn assert_nothing_written(fleet: &Fleet) {
    for name in &fleet.names {
        assert!(
            writes(fleet.sb(name)).is_empty(),
            "{name}: {:?}",
            writes(fleet.sb(name))
        );
        assert_eq!(fleet.image(name), OLD_IMAGE, "{name}");
    }
}

#[test]
fn identical_plans_are_folded_into_one_section_that_names_their_clusters() {
    let fleet = Fleet::new(&["eu-1", "eu-2", "us-1"]);
    fleet.set_image("us-1", "registry.example.com/web:1.1");
    let o = update(&fleet, THREE, &["--yes"]);
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(
        out.starts_with("kubectl appupdate: web on 3 clusters (contexts eu-1, eu-2, us-1)\n"),
        "{out}"
    );
    let folded = "=== contexts eu-1, eu-2 (the same plan on 2 clusters): web in namespace shop ===";
    let alone = "=== context us-1: web in namespace shop ===";
    assert_eq!(out.matches(folded).count(), 1, "{out}");
    assert_eq!(out.matches(alone).count(), 1, "{out}");
    // The folded section shows the change once; the other shows its own "before".
    assert_eq!(
        out.matches("-         image: registry.example.com/web:1.0")
            .count(),
        1
    );
    assert_eq!(
        out.matches("-         image: registry.example.com/web:1.1")
            .count(),
        1
    );
    assert!(out.contains("Plan: 0 to create, 1 to update, 0 to delete. (on each of eu-1, eu-2)"));
    assert!(out.contains("Total: 0 to create, 3 to update, 0 to delete, on 3 of 3 clusters."));
    // Every cluster's outcome, then the closing line.
    for name in ["eu-1", "eu-2", "us-1"] {
        assert!(
            out.contains(&format!("context {name} (namespace shop): updated\n")),
            "{out}"
        );
        assert_eq!(fleet.image(name), NEW_IMAGE);
        assert_eq!(fleet.app_writes(name).len(), 1, "{name}: one write");
    }
    assert!(out.ends_with("Fleet: 3 of 3 clusters updated.\n"), "{out}");
}

#[test]
fn every_cluster_gets_one_connection_and_the_requests_of_one_cluster_plus_its_dry_run() {
    // The same change over one cluster, without the fleet.
    let single = Fleet::new(&["solo"]);
    assert_code(&single.run(&["web", "--image", NEW_IMAGE, "--yes"]), 0);
    let requests = |sb: &sandbox_apiserver::Sandbox| -> Vec<(String, String, bool)> {
        let mut r: Vec<_> = sb
            .requests()
            .into_iter()
            .map(|r| (r.method, r.path, r.dry_run))
            .collect();
        r.sort();
        r
    };
    let alone = requests(single.sb("solo"));
    // The reads (the Deployment, the history, who-am-I), the write and its record: one object
    // to write, so no dry run.
    assert_eq!(alone.len(), 5, "{alone:?}");
    assert!(!alone.iter().any(|(_, _, dry_run)| *dry_run), "{alone:?}");

    // A fleet dry-runs everywhere before the first write: the same requests, and the dry run.
    let mut with_dry_run = alone.clone();
    let patch = alone
        .iter()
        .find(|(method, path, _)| method == "PATCH" && path.contains("/deployments/"))
        .expect("the Deployment's write");
    with_dry_run.push((patch.0.clone(), patch.1.clone(), true));
    with_dry_run.sort();
    let fleet = Fleet::new(&["eu-1", "eu-2"]);
    let o = update(&fleet, "eu-1,eu-2", &["--yes"]);
    assert_code(&o, 0);
    for name in ["eu-1", "eu-2"] {
        let sb = fleet.sb(name);
        assert_eq!(sb.counters().connections, 1, "{name}");
        assert_eq!(requests(sb), with_dry_run, "{name}");
    }
}

#[test]
fn a_cluster_that_refuses_access_stops_the_run_before_any_write_anywhere() {
    let fleet = Fleet::new(&["eu-1", "eu-2"]);
    let o = update(&fleet, "eu-1,eu-2-noperm", &["--yes"]);
    assert_code(&o, 1);
    let err = stderr(&o);
    assert!(
        err.contains("context eu-2-noperm: NOT updated: ")
            && err.contains("forbidden")
            && err.contains("context \"eu-2-noperm\""),
        "{err}"
    );
    assert!(
        err.contains("context eu-1 (namespace shop): planned, NOT updated"),
        "{err}"
    );
    assert!(
        err.trim_end()
            .ends_with("Nothing was changed in any of the 2 clusters."),
        "{err}"
    );
    assert_nothing_written(&fleet);
}

#[test]
fn with_skip_unreachable_a_cluster_that_refuses_access_is_left_out_and_the_exit_code_says_so() {
    let fleet = Fleet::new(&["eu-1", "eu-2"]);
    let o = update(&fleet, "eu-1,eu-2-noperm", &["--yes", "--skip-unreachable"]);
    assert_code(&o, 8);
    let out = stdout(&o);
    assert!(
        out.contains("=== context eu-2-noperm: skipped (--skip-unreachable): "),
        "{out}"
    );
    assert!(out.contains("1 cluster skipped."), "{out}");
    let err = stderr(&o);
    assert!(
        err.contains("context eu-2-noperm: skipped (--skip-unreachable): "),
        "{err}"
    );
    assert!(
        err.contains("The fleet is updated except 1 cluster skipped (--skip-unreachable): 1 of 2 clusters updated."),
        "{err}"
    );
    assert_eq!(fleet.image("eu-1"), NEW_IMAGE);
    assert_eq!(fleet.image("eu-2"), OLD_IMAGE);
}

#[test]
fn an_unreachable_cluster_is_named_and_nothing_is_written_anywhere() {
    let fleet = Fleet::new(&["eu-1", "eu-2"]);
    // eu-2's server goes away: its port refuses connections.
    let text = std::fs::read_to_string(&fleet.kubeconfig).unwrap();
    let gone = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let text = text.replace(fleet.sb("eu-2").url(), &format!("https://127.0.0.1:{gone}"));
    std::fs::write(&fleet.kubeconfig, text).unwrap();
    let o = update(&fleet, "eu-1,eu-2", &["--yes"]);
    assert_code(&o, 1);
    let err = stderr(&o);
    assert!(
        err.contains("context eu-2: NOT updated: cannot reach the cluster of context \"eu-2\""),
        "{err}"
    );
    assert_nothing_written(&fleet);
}

#[test]
fn one_clusters_dry_run_refused_means_nothing_is_written_anywhere() {
    let fleet = Fleet::new(&["eu-1", "eu-2", "us-1"]);
    fleet.sb("us-1").inject(Fault::Restrict {
        dry_run: true,
        fault: Box::new(Fault::Status {
            method: Some("PATCH".into()),
            path_prefix: DEPLOY.into(),
            status: 422,
            count: 1,
        }),
    });
    let o = update(&fleet, THREE, &["--yes"]);
    assert_code(&o, 1);
    let err = stderr(&o);
    assert!(
        err.contains("context us-1 (namespace shop): NOT updated: refused before any write"),
        "{err}"
    );
    assert!(err.contains("  deployment.apps/web NOT updated: "), "{err}");
    for name in ["eu-1", "eu-2"] {
        assert!(
            err.contains(&format!(
                "context {name} (namespace shop): NOT started: its dry run passed, but another cluster refused the change, so nothing was written anywhere"
            )),
            "{err}"
        );
    }
    assert_nothing_written(&fleet);
}

fn rolling(delay_ms: u64) -> SandboxOptions {
    SandboxOptions {
        rollout: Rollout::Auto {
            delay: Duration::from_millis(delay_ms),
        },
        ..SandboxOptions::default()
    }
}

#[test]
fn a_canary_that_rolls_out_is_followed_by_the_rest() {
    let fleet = Fleet::with(&["eu-1", "eu-2", "us-1"], |_| rolling(300));
    let o = update(&fleet, THREE, &["--yes", "--canary", "eu-2"]);
    assert_code(&o, 0);
    for name in ["eu-1", "eu-2", "us-1"] {
        assert_eq!(fleet.image(name), NEW_IMAGE, "{name}");
    }
    // The canary was written and rolled out before any other cluster was written.
    let err = stderr(&o);
    let at = |needle: &str| {
        err.find(needle)
            .unwrap_or_else(|| panic!("{needle}: {err}"))
    };
    let rolled_out = at("context eu-2 (the canary): successfully rolled out");
    assert!(
        at("context eu-2 (the canary): writing 1 change") < rolled_out,
        "{err}"
    );
    assert!(rolled_out < at("context eu-1: writing 1 change"), "{err}");
    assert!(rolled_out < at("context us-1: writing 1 change"), "{err}");
    let out = stdout(&o);
    assert!(
        out.contains(
            "context eu-2 (namespace shop, the canary): updated\n  deployment.apps/web updated (image registry.example.com/web:1.0 → registry.example.com/web:2.0)\n  recorded as revision 1 in configmap/web-appupdate-history\n  deployment.apps/web successfully rolled out (2 replicas updated and available)\n"
        ),
        "{out}"
    );
}

#[test]
fn a_stuck_canary_leaves_the_rest_not_started_and_exits_7() {
    let fleet = Fleet::with(&["eu-1", "eu-2", "us-1"], |name| SandboxOptions {
        rollout: if name == "eu-1" {
            Rollout::Stuck
        } else {
            Rollout::Auto {
                delay: Duration::from_millis(100),
            }
        },
        ..SandboxOptions::default()
    });
    let o = update(
        &fleet,
        THREE,
        &["--yes", "--canary", "eu-1", "--timeout", "2s"],
    );
    assert_code(&o, 7);
    assert_eq!(fleet.image("eu-1"), NEW_IMAGE);
    for name in ["eu-2", "us-1"] {
        assert!(fleet.app_writes(name).is_empty(), "{name}");
        assert_eq!(fleet.image(name), OLD_IMAGE);
    }
    let err = stderr(&o);
    assert!(
        err.contains("  error: timed out after 2s waiting for the rollout of deployment.apps/web")
            || err.contains("  timed out after 2s waiting for the rollout of deployment.apps/web"),
        "{err}"
    );
    for name in ["eu-2", "us-1"] {
        assert!(
            err.contains(&format!(
                "context {name} (namespace shop): NOT started: the canary did not apply and roll out"
            )),
            "{err}"
        );
    }
    assert!(
        err.contains(
            "The fleet is partly updated: 1 updated whose rollout did not complete, 2 not started (of 3 clusters, listed above)."
        ),
        "{err}"
    );
}

#[test]
fn a_competing_writer_in_one_cluster_trips_the_guard_there_only() {
    let fleet = Fleet::new(&["eu-1", "eu-2", "us-1"]);
    fleet.sb("eu-2").inject(Fault::CompetingWrite {
        object_path: DEPLOY.into(),
        after: Trigger::NextRealWrite,
        mutate: Box::new(|d: &mut Value| {
            d["spec"]["template"]["spec"]["containers"][0]["image"] =
                Value::from("registry.example.com/web:1.9-hotfix");
        }),
    });
    let o = update(&fleet, THREE, &["--yes", "--stop-on-failure=false"]);
    assert_code(&o, 5);
    assert_eq!(fleet.image("eu-1"), NEW_IMAGE);
    assert_eq!(fleet.image("us-1"), NEW_IMAGE);
    assert_eq!(fleet.image("eu-2"), "registry.example.com/web:1.9-hotfix");
    let err = stderr(&o);
    assert!(
        err.contains("context eu-2 (namespace shop): stopped by the approved-diff guard"),
        "{err}"
    );
    assert!(
        err.contains("The live object changed after the plan was shown."),
        "{err}"
    );
    assert!(err.contains("1.9-hotfix"), "{err}");
    let out = stdout(&o);
    assert!(
        out.contains("context eu-1 (namespace shop): updated"),
        "{out}"
    );
    assert!(
        out.contains("context us-1 (namespace shop): updated"),
        "{out}"
    );
}

#[test]
fn after_a_failure_no_new_cluster_is_started_and_the_mixed_fleet_exits_6() {
    let fleet = Fleet::new(&["eu-1", "eu-2", "us-1"]);
    // eu-2's real write fails (its dry run passes).
    fleet.sb("eu-2").inject(Fault::Restrict {
        dry_run: false,
        fault: Box::new(Fault::Status {
            method: Some("PATCH".into()),
            path_prefix: DEPLOY.into(),
            status: 500,
            count: 10,
        }),
    });
    let o = update(&fleet, THREE, &["--yes", "--parallel", "1"]);
    assert_code(&o, 6);
    assert_eq!(fleet.image("eu-1"), NEW_IMAGE);
    assert_eq!(fleet.image("eu-2"), OLD_IMAGE);
    assert!(fleet.app_writes("us-1").is_empty());
    let err = stderr(&o);
    assert!(
        err.contains(
            "context us-1 (namespace shop): NOT started: another cluster failed (--stop-on-failure)"
        ),
        "{err}"
    );
}

#[test]
fn a_signal_mid_fleet_lets_the_write_in_flight_finish_and_starts_no_new_cluster() {
    let fleet = Fleet::new(&["eu-1", "eu-2", "us-1"]);
    fleet.sb("eu-2").inject(Fault::Restrict {
        dry_run: false,
        fault: Box::new(Fault::Hold {
            method: Some("PATCH".into()),
            path_prefix: DEPLOY.into(),
            count: 1,
        }),
    });
    let mut run = Running::with_kubeconfig(
        &fleet.kubeconfig,
        &[
            "web",
            "--contexts",
            THREE,
            "--image",
            NEW_IMAGE,
            "--yes",
            "--parallel",
            "1",
        ],
    );
    wait_until("eu-2's write in flight", || fleet.sb("eu-2").held() == 1);
    run.signal("INT");
    run.wait_for_stderr("interrupt received");
    fleet.sb("eu-2").release_held();
    let (code, out, err) = run.finish();
    assert_eq!(code, 130, "{out}\n--- stderr\n{err}");
    assert_eq!(fleet.image("eu-1"), NEW_IMAGE);
    assert_eq!(
        fleet.image("eu-2"),
        NEW_IMAGE,
        "the write in flight finished"
    );
    assert!(
        fleet.app_writes("us-1").is_empty(),
        "no new cluster started"
    );
    assert!(
        out.contains("context eu-1 (namespace shop): updated"),
        "{out}"
    );
    assert!(
        out.contains("context eu-2 (namespace shop): updated"),
        "{out}"
    );
    assert!(
        err.contains("context us-1 (namespace shop): NOT started: interrupted before it started"),
        "{err}"
    );
}

#[test]
fn a_saved_fleet_plan_holds_every_cluster_and_is_applied_with_the_guard_everywhere() {
    let fleet = Fleet::new(&["eu-1", "eu-2"]);
    let file = fleet.dir.path().join("plan.json");
    let file = file.to_str().unwrap();
    let o = update(&fleet, "eu-1,eu-2", &["--plan-out", file]);
    assert_code(&o, 0);
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let contexts: Vec<&str> = saved["content"]["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["context"].as_str().unwrap())
        .collect();
    assert_eq!(contexts, ["eu-1", "eu-2"]);
    assert_nothing_written(&fleet);

    // Someone changes the image in eu-2 meanwhile: the plan is refused everywhere.
    fleet.set_image("eu-2", "registry.example.com/web:1.5");
    let o = fleet.run(&["apply", file, "--yes"]);
    assert_code(&o, 5);
    assert!(fleet.app_writes("eu-1").is_empty());
    assert_eq!(fleet.image("eu-1"), OLD_IMAGE);
    let err = stderr(&o);
    assert!(
        err.contains("context eu-1 (namespace shop): NOT started: the saved plan no longer holds in another cluster, so nothing was written anywhere"),
        "{err}"
    );
    // The re-check comes before the plan is shown and the question asked: without a terminal
    // it is the refusal that is told, not a missing --yes.
    let o = fleet.run(&["apply", file]);
    assert_code(&o, 5);
    assert!(
        stderr(&o).contains("no longer holds in another cluster"),
        "{}",
        stderr(&o)
    );
    assert!(fleet.app_writes("eu-1").is_empty());

    // Planned again and applied: both clusters, each through its own context.
    let o = update(&fleet, "eu-1,eu-2", &["--plan-out", file]);
    assert_code(&o, 0);
    let o = fleet.run(&["apply", file, "--yes"]);
    assert_code(&o, 0);
    assert_eq!(fleet.image("eu-1"), NEW_IMAGE);
    assert_eq!(fleet.image("eu-2"), NEW_IMAGE);
    let out = stdout(&o);
    assert!(out.contains("Fleet: 2 of 2 clusters updated."), "{out}");
}

#[test]
fn a_context_selector_picks_contexts_by_their_whole_name() {
    let fleet = Fleet::new(&["eu-1", "eu-2", "us-1"]);
    let o = fleet.run(&[
        "web",
        "--context-selector",
        "eu-[0-9]",
        "--image",
        NEW_IMAGE,
        "--dry-run",
        "--detailed-exitcode",
    ]);
    assert_code(&o, 2);
    assert!(
        stdout(&o).starts_with("kubectl appupdate: web on 2 clusters (contexts eu-1, eu-2)"),
        "{}",
        stdout(&o)
    );
    let o = fleet.run(&["web", "--context-selector", "eu", "--image", NEW_IMAGE]);
    assert_code(&o, 3);
    assert!(
        stderr(&o).contains("no context in kubeconfig")
            && stderr(&o).contains("matches --context-selector \"eu\""),
        "{}",
        stderr(&o)
    );
    assert_nothing_written(&fleet);
}

#[test]
fn without_a_terminal_and_without_yes_nothing_is_written_anywhere() {
    let fleet = Fleet::new(&["eu-1", "eu-2"]);
    let o = update(&fleet, "eu-1,eu-2", &[]);
    assert_code(&o, 4);
    assert_nothing_written(&fleet);
}

#[test]
fn a_converged_fleet_has_nothing_to_change() {
    let fleet = Fleet::new(&["eu-1", "eu-2"]);
    assert_code(&update(&fleet, "eu-1,eu-2", &["--yes"]), 0);
    let before = fleet.all_writes();
    let o = update(&fleet, "eu-1,eu-2", &["--yes"]);
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(out.contains("No changes. (on each of eu-1, eu-2)"), "{out}");
    assert!(
        out.contains("Total: no changes on any of 2 clusters."),
        "{out}"
    );
    assert_eq!(fleet.all_writes(), before);
}

#[test]
fn fleet_flags_need_several_contexts_and_cluster_flags_need_one() {
    let fleet = Fleet::new(&["eu-1"]);
    for (args, message) in [
        (
            &["web", "--image", NEW_IMAGE, "--parallel", "2"][..],
            "--parallel only applies to a run over several contexts",
        ),
        (
            &[
                "web",
                "--contexts",
                "eu-1,eu-1-readonly",
                "--image",
                NEW_IMAGE,
                "--cluster",
                "eu-1",
            ][..],
            "--cluster and --user replace one context's cluster or user",
        ),
        (
            &[
                "web",
                "--contexts",
                "eu-1,eu-1-readonly",
                "--image",
                NEW_IMAGE,
                "--canary",
                "us-9",
            ][..],
            "--canary \"us-9\" is not one of the contexts of this run (eu-1, eu-1-readonly)",
        ),
        (
            &[
                "history",
                "web",
                "--context",
                "eu-1",
                "--context",
                "eu-1-readonly",
            ][..],
            "history reads one cluster's records",
        ),
        (
            &["web", "--contexts", "eu-1,nowhere", "--image", NEW_IMAGE][..],
            "context \"nowhere\" does not exist in kubeconfig",
        ),
        (
            &[
                "web",
                "--contexts",
                "eu-1,eu-1-readonly",
                "--image",
                NEW_IMAGE,
                "--yes",
            ][..],
            "contexts \"eu-1\" and \"eu-1-readonly\" both point at the API server",
        ),
    ] {
        let o = fleet.run(args);
        assert_code(&o, 3);
        assert!(stderr(&o).contains(message), "{args:?}: {}", stderr(&o));
        assert!(stdout(&o).is_empty(), "{args:?}");
    }
    assert!(writes(fleet.sb("eu-1")).is_empty());
}

fn schema(name: &str) -> Value {
    let path = format!("{}/schema/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[track_caller]
pub(crate) fn assert_valid_fleet_document(doc: &Value) {
    let plan = schema("plan.schema.json");
    let registry = jsonschema::Registry::new()
        .add(plan["$id"].as_str().unwrap(), plan.clone())
        .unwrap()
        .prepare()
        .unwrap();
    let validator = jsonschema::options()
        .with_registry(&registry)
        .build(&schema("fleet.schema.json"))
        .expect("the schema compiles");
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

#[test]
fn with_o_json_stdout_holds_one_document_with_every_clusters_plan_and_outcome() {
    let fleet = Fleet::with(&["eu-1", "eu-2", "us-1"], |_| rolling(100));
    let o = fleet.run(&[
        "web",
        "--contexts",
        "eu-1,eu-2,us-1-noperm",
        "--image",
        NEW_IMAGE,
        "--canary",
        "eu-2",
        "--skip-unreachable",
        "--yes",
        "-o",
        "json",
    ]);
    assert_code(&o, 8);
    let doc: Value = serde_json::from_slice(&o.stdout).expect("stdout is one JSON document");
    assert_valid_fleet_document(&doc);
    assert_eq!(doc["schema"], "kubectl-appupdate.fleet/v2");
    assert_eq!(doc["summary"]["update"], 2);
    let clusters = doc["clusters"].as_array().unwrap();
    let by = |c: &str| clusters.iter().find(|x| x["context"] == c).unwrap();
    assert_eq!(by("eu-1")["outcome"]["status"], "applied");
    assert_eq!(by("eu-1")["outcome"]["revision"], 1);
    assert_eq!(by("eu-1")["section"], 0);
    assert_eq!(by("eu-2")["section"], 0, "identical plans share a section");
    assert_eq!(by("eu-2")["canary"], true);
    assert_eq!(by("eu-2")["outcome"]["rollout"]["complete"], true);
    assert_eq!(
        by("eu-2")["plan"]["objects"][0]["fields"][0]["after"],
        NEW_IMAGE
    );
    let skipped = by("us-1-noperm");
    assert_eq!(skipped["outcome"]["status"], "skipped");
    assert!(skipped["plan"].is_null());
    assert!(
        skipped["outcome"]["message"]
            .as_str()
            .unwrap()
            .contains("forbidden"),
        "{skipped}"
    );
    // The report went to stderr.
    assert!(stderr(&o).contains("context eu-1 (namespace shop): updated"));

    // Before any write: the plan, each cluster "planned".
    let o = fleet.run(&[
        "web",
        "--contexts",
        "eu-1,eu-2",
        "--max",
        "7",
        "--dry-run",
        "-o",
        "yaml",
    ]);
    assert_code(&o, 0);
    let doc: Value = serde_saphyr::from_str(&stdout(&o)).expect("stdout is one YAML document");
    assert_valid_fleet_document(&doc);
    for c in doc["clusters"].as_array().unwrap() {
        assert_eq!(c["outcome"]["status"], "planned", "{c}");
    }
}

#[test]
fn a_context_name_from_the_kubeconfig_reaches_the_terminal_escaped() {
    let hostile = "eu-\u{1b}]0;pwned\u{7}\u{1b}[2J\u{202e}1";
    let fleet = Fleet::new(&[hostile, "eu-2"]);
    let contexts = format!("{hostile},eu-2");
    for color in ["never", "always"] {
        let o = fleet.run(&[
            "web",
            "--contexts",
            &contexts,
            "--max",
            "6",
            "--dry-run",
            "--color",
            color,
        ]);
        // A debug build fails (101) when a value reaches the terminal unescaped.
        assert_code(&o, 0);
        let out = stdout(&o);
        assert!(out.contains("eu-\\e]0;pwned\\x07\\e[2J\\u{202e}1"), "{out}");
        assert!(
            !out.contains("\u{1b}]0;") && !out.contains('\u{202e}'),
            "{out:?}"
        );
        if color == "never" {
            assert!(!out.contains('\u{1b}') && !stderr(&o).contains('\u{1b}'));
        }
    }
    let o = fleet.run(&["web", "--contexts", &contexts, "--max", "6", "--yes"]);
    assert_code(&o, 0);
    let all = format!("{}{}", stdout(&o), stderr(&o));
    assert!(!all.contains('\u{1b}') && !all.contains('\u{7}'), "{all:?}");
    assert!(
        all.contains("context eu-\\e]0;pwned\\x07\\e[2J\\u{202e}1 (namespace shop): updated"),
        "{all}"
    );
    let o = fleet.run(&[
        "web",
        "--contexts",
        &contexts,
        "--max",
        "7",
        "--dry-run",
        "-o",
        "json",
    ]);
    assert_code(&o, 0);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        doc["clusters"][0]["context"], hostile,
        "JSON carries the exact name"
    );
}

// ---- waves ----

const SIX: [&str; 6] = ["dev-1", "dev-2", "eu-1", "eu-2", "us-1", "us-2"];

/// The six clusters, each rolling a change out after 100 ms.
fn six_rolling_out() -> Fleet {
    Fleet::with(&SIX, |_| SandboxOptions {
        rollout: Rollout::Auto {
            delay: Duration::from_millis(100),
        },
        ..SandboxOptions::default()
    })
}

/// The three waves of the six clusters: by names, by names, by a regular expression.
const WAVES: [&str; 6] = [
    "--wave",
    "dev-1,dev-2",
    "--wave",
    "eu-1,eu-2",
    "--wave",
    "re:us-[0-9]",
];

/// `web`, the three waves, then `rest`.
fn in_waves_args<'a>(rest: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["web"];
    args.extend(WAVES);
    args.extend_from_slice(rest);
    args
}

/// An update to NEW_IMAGE over the three waves, without asking, as JSON; and `extra`.
fn in_waves(fleet: &Fleet, extra: &[&str]) -> std::process::Output {
    let mut args = in_waves_args(&["--image", NEW_IMAGE, "--yes", "-o", "json"]);
    args.extend_from_slice(extra);
    fleet.run(&args)
}

/// The next real write of the Deployment in `name` fails with 422, after its dry run passed.
fn fail_the_write(fleet: &Fleet, name: &str) {
    fleet.sb(name).inject(Fault::Restrict {
        dry_run: false,
        fault: Box::new(Fault::Status {
            method: Some("PATCH".into()),
            path_prefix: DEPLOY.into(),
            status: 422,
            count: 1,
        }),
    });
}

fn wave_statuses(doc: &Value) -> Vec<String> {
    doc["waves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["status"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn three_waves_all_good_update_every_cluster_and_say_so() {
    let fleet = Fleet::new(&SIX);
    let o = in_waves(&fleet, &[]);
    assert_code(&o, 0);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["schema"], "kubectl-appupdate.fleet/v2");
    assert_eq!(wave_statuses(&doc), ["applied", "applied", "applied"]);
    assert_eq!(doc["waves"][2]["contexts"], json!(["us-1", "us-2"]));
    let waves: Vec<u64> = doc["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["wave"].as_u64().unwrap())
        .collect();
    assert_eq!(waves, [1, 1, 2, 2, 3, 3]);
    for name in SIX {
        assert_eq!(fleet.image(name), NEW_IMAGE, "{name}");
    }
}

#[test]
fn a_failure_in_the_first_wave_leaves_the_later_waves_untouched() {
    let fleet = Fleet::new(&SIX);
    fail_the_write(&fleet, "dev-2");
    let o = in_waves(&fleet, &[]);
    // Mixed: written in dev-1, not in dev-2, nothing after.
    assert_code(&o, 6);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        wave_statuses(&doc),
        ["failed", "not-started", "not-started"]
    );
    let err = stderr(&o);
    assert!(
        err.contains(
            "context eu-1 (namespace shop): NOT started: an earlier wave had more failed clusters than --max-failed allows"
        ),
        "{err}"
    );
    for name in ["eu-1", "eu-2", "us-1", "us-2"] {
        assert!(fleet.app_writes(name).is_empty(), "{name}");
        assert_eq!(fleet.image(name), OLD_IMAGE, "{name}");
    }
    assert_eq!(fleet.image("dev-1"), NEW_IMAGE);
}

#[test]
fn the_failure_budget_lets_one_failure_through_and_stops_at_two() {
    let fleet = Fleet::new(&SIX);
    fail_the_write(&fleet, "dev-2");
    let o = in_waves(&fleet, &["--max-failed", "1"]);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(wave_statuses(&doc), ["within-budget", "applied", "applied"]);
    assert_eq!(doc["waves"][0]["failed"], 1);
    for name in ["dev-1", "eu-1", "eu-2", "us-1", "us-2"] {
        assert_eq!(fleet.image(name), NEW_IMAGE, "{name}");
    }
    assert_ne!(code(&o), 0, "a failed cluster is never a success");

    let fleet = Fleet::new(&SIX);
    fail_the_write(&fleet, "eu-1");
    fail_the_write(&fleet, "eu-2");
    let o = in_waves(&fleet, &["--max-failed", "1"]);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(wave_statuses(&doc), ["applied", "failed", "not-started"]);
    for name in ["us-1", "us-2"] {
        assert!(fleet.app_writes(name).is_empty(), "{name}");
    }
}

#[test]
fn waves_that_overlap_or_mix_with_other_context_flags_are_refused() {
    let fleet = Fleet::new(&["eu-1", "eu-2", "us-1"]);
    for (args, needle) in [
        (
            &[
                "web",
                "--wave",
                "eu-1,eu-2",
                "--wave",
                "re:eu-.*",
                "--max",
                "9",
                "--yes",
            ][..],
            "context \"eu-1\" is in wave 1 and in wave 2",
        ),
        (
            &[
                "web",
                "--wave",
                "eu-1",
                "--contexts",
                "us-1",
                "--max",
                "9",
                "--yes",
            ][..],
            "--wave names the clusters of the run, in order",
        ),
        (
            &[
                "web", "--wave", "eu-1", "--canary", "eu-1", "--max", "9", "--yes",
            ][..],
            "--canary is a first wave of one",
        ),
        (
            &["web", "--wave", "eu-1,", "--max", "9", "--yes"][..],
            "has an empty context name",
        ),
        (
            &[
                "web", "--wave", "eu-1", "--bake", "1m", "--max", "9", "--yes",
            ][..],
            "--bake watches each wave after its rollout: add --wait",
        ),
    ] {
        let o = fleet.run(args);
        assert_code(&o, 3);
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
    assert_eq!(fleet.all_writes(), 0);
}

#[test]
fn a_stuck_rollout_in_the_first_wave_leaves_the_later_waves_untouched_and_exits_7() {
    let fleet = Fleet::with(&SIX, |name| SandboxOptions {
        rollout: if name == "dev-1" {
            Rollout::Stuck
        } else {
            Rollout::Auto {
                delay: Duration::from_millis(100),
            }
        },
        ..SandboxOptions::default()
    });
    let o = in_waves(&fleet, &["--wait", "--timeout", "2s"]);
    assert_code(&o, 7);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        wave_statuses(&doc),
        ["failed", "not-started", "not-started"]
    );
    assert_eq!(fleet.image("dev-2"), NEW_IMAGE);
    for name in ["eu-1", "eu-2", "us-1", "us-2"] {
        assert!(fleet.app_writes(name).is_empty(), "{name}");
    }
}

#[test]
fn a_regression_during_the_bake_stops_the_run_before_the_next_wave() {
    let fleet = six_rolling_out();
    // The regression lands as soon as the bake is seen to begin (not after a fixed sleep that
    // a slow machine can overrun): the bake's end, which reads the Deployment again, is seconds
    // away then.
    let mut run = Running::with_kubeconfig(
        &fleet.kubeconfig,
        &in_waves_args(&[
            "--image",
            NEW_IMAGE,
            "--yes",
            "-o",
            "json",
            "--wait",
            "--timeout",
            "30s",
            "--bake",
            "5s",
        ]),
    );
    // Once dev-1 rolled out and its bake began, one of its replicas becomes unavailable.
    run.wait_for_stderr("baking:");
    fleet
        .sb("dev-1")
        .update_status(DEPLOY, |d| {
            d["status"]["unavailableReplicas"] = json!(1);
            d["status"]["availableReplicas"] = json!(1);
        })
        .unwrap();
    let (code, out, err) = run.finish();
    assert_eq!(code, 7, "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        wave_statuses(&doc),
        ["failed", "not-started", "not-started"]
    );
    assert!(
        err.contains("it regressed during the bake: 1 replica is unavailable"),
        "{err}"
    );
    for name in ["eu-1", "eu-2", "us-1", "us-2"] {
        assert!(fleet.app_writes(name).is_empty(), "{name}");
    }
}

#[test]
fn ctrl_c_during_a_bake_starts_nothing_further() {
    let fleet = six_rolling_out();
    let mut run = Running::with_kubeconfig(
        &fleet.kubeconfig,
        &in_waves_args(&["--image", NEW_IMAGE, "--yes", "--wait", "--bake", "1m"]),
    );
    run.wait_for_stderr("baking:");
    run.signal("INT");
    let (code, _, err) = run.finish();
    assert_eq!(code, 130, "{err}");
    for name in ["dev-1", "dev-2"] {
        assert_eq!(fleet.image(name), NEW_IMAGE, "{name}");
    }
    for name in ["eu-1", "eu-2", "us-1", "us-2"] {
        assert!(fleet.app_writes(name).is_empty(), "{name}");
    }
}

/// The records in `name`'s history, as `history -o json` lists them.
fn records(fleet: &Fleet, name: &str) -> Vec<Value> {
    let o = fleet.run(&["history", "web", "--context", name, "-o", "json"]);
    assert_code(&o, 0);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    doc["records"].as_array().cloned().unwrap_or_default()
}

#[test]
fn a_saved_plan_in_waves_stops_after_a_wave_and_resumes_with_the_rest() {
    let fleet = Fleet::new(&SIX);
    let file = fleet.dir.path().join("plan.json");
    let o = fleet.run(&in_waves_args(&[
        "--image",
        NEW_IMAGE,
        "--plan-out",
        file.to_str().unwrap(),
    ]));
    assert_code(&o, 0);
    let plan: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(plan["content"]["waves"][2], json!(["us-1", "us-2"]));

    // Tonight: the first wave only.
    let o = fleet.run(&[
        "apply",
        file.to_str().unwrap(),
        "--stop-after-wave",
        "1",
        "--yes",
        "-o",
        "json",
    ]);
    assert_code(&o, 0);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        wave_statuses(&doc),
        ["applied", "not-started", "not-started"]
    );
    assert!(
        stderr(&o).contains(
            "its wave comes after --stop-after-wave; apply the same file again to carry on"
        ),
        "{}",
        stderr(&o)
    );
    for name in ["eu-1", "eu-2", "us-1", "us-2"] {
        assert!(fleet.app_writes(name).is_empty(), "{name}");
    }

    // Tomorrow: the same file again carries on; the first wave is not applied twice.
    let o = fleet.run(&["apply", file.to_str().unwrap(), "--yes", "-o", "json"]);
    assert_code(&o, 0);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["clusters"][0]["outcome"]["status"], "already-applied");
    assert_eq!(wave_statuses(&doc), ["applied", "applied", "applied"]);
    for name in SIX {
        assert_eq!(fleet.image(name), NEW_IMAGE, "{name}");
        let records = records(&fleet, name);
        assert_eq!(records.len(), 1, "{name}: exactly one record of the run");
        assert_eq!(records[0]["planChecksum"], plan["checksum"], "{name}");
    }
}

#[test]
fn a_fleet_undo_takes_every_cluster_back_in_reverse_wave_order() {
    let fleet = Fleet::new(&SIX);
    assert_code(&in_waves(&fleet, &[]), 0);
    let run_ids: Vec<Value> = SIX
        .iter()
        .map(|n| records(&fleet, n)[0]["fleetRun"].clone())
        .collect();
    assert!(
        run_ids[0].as_str().unwrap().starts_with("run-"),
        "{run_ids:?}"
    );
    assert!(run_ids.iter().all(|id| *id == run_ids[0]), "{run_ids:?}");

    let o = fleet.run(&in_waves_args(&["--undo", "--yes", "-o", "json"]));
    assert_code(&o, 0);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    // The last wave first.
    assert_eq!(doc["waves"][0]["contexts"], json!(["us-1", "us-2"]));
    assert_eq!(doc["waves"][2]["contexts"], json!(["dev-1", "dev-2"]));
    assert_eq!(wave_statuses(&doc), ["applied", "applied", "applied"]);
    for name in SIX {
        assert_eq!(fleet.image(name), OLD_IMAGE, "{name}");
        let records = records(&fleet, name);
        assert_eq!(
            records[1]["source"],
            json!({"type": "undo", "revision": 1}),
            "{name}"
        );
    }
}

#[test]
fn a_fleet_undo_leaves_alone_the_clusters_the_run_never_reached() {
    let fleet = Fleet::new(&SIX);
    let file = fleet.dir.path().join("plan.json");
    let waves = WAVES;
    let mut args = vec![
        "web",
        "--image",
        NEW_IMAGE,
        "--plan-out",
        file.to_str().unwrap(),
    ];
    args.extend(waves);
    assert_code(&fleet.run(&args), 0);
    let o = fleet.run(&[
        "apply",
        file.to_str().unwrap(),
        "--stop-after-wave",
        "1",
        "--yes",
    ]);
    assert_code(&o, 0);
    let mut args = vec!["web", "--undo", "--yes", "-o", "json"];
    args.extend(waves);
    let o = fleet.run(&args);
    assert_code(&o, 0);
    let err = stderr(&o);
    for name in ["eu-1", "us-2"] {
        assert!(
            err.contains(&format!(
                "context {name} (namespace shop): NOT started: left alone: the fleet run being undone never applied here"
            )),
            "{err}"
        );
    }
    for name in SIX {
        assert_eq!(fleet.image(name), OLD_IMAGE, "{name}");
    }
    for name in ["eu-1", "eu-2", "us-1", "us-2"] {
        assert!(fleet.app_writes(name).is_empty(), "{name}");
    }
}

#[test]
fn the_combined_plan_shows_the_waves_in_order() {
    let fleet = Fleet::new(&SIX);
    let o = fleet.run(&in_waves_args(&[
        "--image",
        NEW_IMAGE,
        "--dry-run",
        "--color",
        "never",
    ]));
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(
        out.contains("  wave 1: dev-1, dev-2\n  wave 2: eu-1, eu-2\n  wave 3: us-1, us-2\n"),
        "{out}"
    );
    assert_eq!(fleet.all_writes(), 0);
}

#[test]
fn a_fleet_undo_refused_in_one_cluster_names_it_once_and_writes_nothing_anywhere() {
    let fleet = Fleet::new(&["eu-1", "eu-2", "us-1"]);
    assert_code(&update(&fleet, THREE, &["--yes"]), 0);
    // Another writer changes the image in eu-2 after the run: undoing there would overwrite it.
    fleet.set_image("eu-2", "registry.example.com/web:hotfix");
    let before = fleet.all_writes();
    let o = fleet.run(&["web", "--contexts", THREE, "--undo", "--yes"]);
    assert_code(&o, 5);
    let err = stderr(&o);
    let eu2: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("context eu-2"))
        .collect();
    assert_eq!(eu2.len(), 1, "{err}");
    assert!(
        eu2[0].contains("not undone") && eu2[0].contains("--force-undo image"),
        "{err}"
    );
    for name in ["eu-1", "us-1"] {
        assert!(
            err.lines()
                .any(|l| l.starts_with(&format!("context {name}"))),
            "{err}"
        );
    }
    assert_eq!(fleet.all_writes(), before, "{err}");
    assert_eq!(fleet.image("eu-1"), NEW_IMAGE);
    assert_eq!(fleet.image("eu-2"), "registry.example.com/web:hotfix");
}

#[test]
fn with_the_history_key_a_fleet_undo_refuses_a_record_tampered_with_in_one_cluster() {
    use base64::Engine as _;
    use std::io::{Read as _, Write as _};
    const HISTORY: &str = "/api/v1/namespaces/shop/configmaps/web-appupdate-history";
    let fleet = Fleet::new(&["eu-1", "eu-2", "us-1"]);
    let key = fleet.dir.path().join("history.key");
    std::fs::write(&key, "0123456789abcdef0123456789abcdef\n").unwrap();
    let key = key.to_str().unwrap();
    assert_code(&update(&fleet, THREE, &["--yes", "--history-key", key]), 0);
    // In eu-2, a ConfigMap writer edits the signed record: the image the undo would deploy.
    let b64 = base64::engine::general_purpose::STANDARD;
    let original =
        fleet.sb("eu-2").get(HISTORY).unwrap()["binaryData"]["revision-1.json.gz"].clone();
    let mut json = String::new();
    flate2::read::GzDecoder::new(b64.decode(original.as_str().unwrap()).unwrap().as_slice())
        .read_to_string(&mut json)
        .unwrap();
    let mut record: Value = serde_json::from_str(&json).unwrap();
    assert!(record["signature"].is_string(), "{record}");
    record["image"]["before"] = json!("evil.example.com/miner:1");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(record.to_string().as_bytes()).unwrap();
    let forged = b64.encode(gz.finish().unwrap());
    let put = |text: &Value| {
        fleet
            .sb("eu-2")
            .update(HISTORY, |cm| {
                cm["binaryData"]["revision-1.json.gz"] = text.clone()
            })
            .unwrap();
    };
    put(&json!(forged));
    let before = fleet.all_writes();
    let o = fleet.run(&[
        "web",
        "--contexts",
        THREE,
        "--undo",
        "--yes",
        "--history-key",
        key,
    ]);
    assert_code(&o, 5);
    let err = stderr(&o);
    let eu2: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("context eu-2"))
        .collect();
    assert_eq!(eu2.len(), 1, "{err}");
    assert!(
        eu2[0].contains("not undone: revision 1 of web in namespace \"shop\" (context \"eu-2\") does not verify with --history-key "),
        "{err}"
    );
    assert_eq!(fleet.all_writes(), before, "{err}");
    for name in ["eu-1", "eu-2", "us-1"] {
        assert_eq!(fleet.image(name), NEW_IMAGE, "{name}");
    }
    // The record as the tool signed it undoes everywhere.
    put(&original);
    let o = fleet.run(&[
        "web",
        "--contexts",
        THREE,
        "--undo",
        "--yes",
        "--history-key",
        key,
    ]);
    assert_code(&o, 0);
    for name in ["eu-1", "eu-2", "us-1"] {
        assert_eq!(fleet.image(name), OLD_IMAGE, "{name}");
    }
}
