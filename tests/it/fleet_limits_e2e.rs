//! A fleet larger than its open files allow: 200 contexts on one sandbox (one namespace each),
//! the plugin started under soft and hard open-files limits of 64 — a connection per cluster
//! at once would need more than three times that. It plans, applies and undoes every cluster,
//! a batch of connections at a time; the plan and the report tell the 200 clusters in a few
//! lines. And `--wait` under a bound (`--max-connections`): each cluster is connected to again
//! at each stage, its rollout followed within its batch.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::Output;
use std::time::Duration;

use common::fleet::{NEW_IMAGE, OLD_IMAGE};
use common::kubeconfig::namespaces_kubeconfig;
use common::*;
use sandbox_apiserver::{Rollout, Sandbox, SandboxOptions};

const CLUSTERS: usize = 200;
const LIMIT: u32 = 64;

struct Many {
    sb: Sandbox,
    namespaces: Vec<String>,
    _dir: tempfile::TempDir,
    kubeconfig: std::path::PathBuf,
}

impl Many {
    fn new(clusters: usize) -> Many {
        let sb = Sandbox::start(SandboxOptions::default()).expect("sandbox starts");
        let namespaces: Vec<String> = (0..clusters).map(|i| format!("f{i:03}")).collect();
        for ns in &namespaces {
            sb.seed_demo_app(ns, APP).expect("demo app seeded");
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, namespaces_kubeconfig(&sb, &namespaces))
            .expect("kubeconfig written");
        Many {
            sb,
            namespaces,
            _dir: dir,
            kubeconfig,
        }
    }

    /// The plugin over every context, under the open-files limit (soft and hard, so it cannot
    /// raise it), through the shell's `ulimit`.
    fn run(&self, args: &[&str]) -> Output {
        let mut cmd = std::process::Command::new("sh");
        scrub(&mut cmd);
        cmd.arg("-c")
            .arg(format!("ulimit -n {LIMIT} && exec \"$0\" \"$@\""))
            .arg(assert_cmd::cargo::cargo_bin("kubectl-appupdate"))
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["web", "--context-selector", "f.*"])
            .args(args);
        cmd.output().expect("binary runs")
    }

    fn images(&self) -> Vec<String> {
        self.namespaces
            .iter()
            .map(|ns| {
                let d = self
                    .sb
                    .get(&format!("/apis/apps/v1/namespaces/{ns}/deployments/{APP}"))
                    .expect("deployment exists");
                d["spec"]["template"]["spec"]["containers"][0]["image"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    }
}

#[test]
fn two_hundred_clusters_under_an_open_files_limit_of_64_are_planned_applied_and_undone() {
    let many = Many::new(CLUSTERS);
    let every = |image: &str| vec![image.to_owned(); CLUSTERS];

    // The limit reaches the plugin: more connections than it allows are refused in one line.
    let o = many.run(&["--image", NEW_IMAGE, "--dry-run", "--max-connections", "40"]);
    assert_code(&o, 3);
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("the open-files limit is 64 (ulimit -n)") && err.contains("ulimit -n 72"),
        "{err}"
    );
    assert_eq!(many.images(), every(OLD_IMAGE));

    // Planned, a batch of connections at a time, and applied.
    let o = many.run(&["--image", NEW_IMAGE, "--yes"]);
    assert_code(&o, 0);
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(!err.contains("Too many open files"), "{err}");
    assert!(
        out.starts_with(
            "kubectl appupdate: web on 200 clusters (contexts f000, f001, f002, f003, f004, f005 and 194 more)\n"
        ),
        "{}",
        out.lines().next().unwrap_or_default()
    );
    assert!(
        out.contains("Total: 0 to create, 200 to update, 0 to delete, on 200 of 200 clusters."),
        "{out}"
    );
    assert_eq!(many.images(), every(NEW_IMAGE));
    // Progress in counts, not a line per cluster and step: the log ends with where all 200
    // stand.
    assert!(!err.contains("context f000:"), "{err}");
    assert_eq!(
        err.lines().last(),
        Some("200 clusters: 200 updated"),
        "{err}"
    );
    assert!(
        err.lines().all(|l| l.starts_with("200 clusters: ")),
        "{err}"
    );
    // The 200 clusters that ended the same way are told once, with their count.
    let report: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("200 clusters"))
        .collect();
    assert!(
        report.first().is_some_and(|l| *l
            == "200 clusters (contexts f000, f001, f002, f003, f004, f005 and 194 more; namespaces f000, f001, f002, f003, f004, f005 and 194 more): updated"),
        "{out}"
    );
    assert!(
        report.len() < 10 && report.last() == Some(&"Fleet: 200 of 200 clusters updated."),
        "{out}"
    );
    assert!(
        report
            .iter()
            .any(|l| l
                == &format!("  deployment.apps/web updated (image {OLD_IMAGE} → {NEW_IMAGE})")),
        "{out}"
    );

    // The fleet run undone everywhere.
    let o = many.run(&["--undo", "--yes"]);
    assert_code(&o, 0);
    assert!(
        !stderr(&o).contains("Too many open files"),
        "{}",
        stderr(&o)
    );
    assert_eq!(many.images(), every(OLD_IMAGE));
    assert!(
        stdout(&o).ends_with("Fleet: 200 of 200 clusters updated.\n"),
        "{}",
        stdout(&o)
    );
}

/// `--wait` with more clusters than connections: every cluster is read and planned, dry-run,
/// and written and followed to the end of its rollout on a connection of its own at each
/// stage, never more than the bound at once — but the clusters a stage left connected (its
/// last batch, as many as the bound) start the next stage over the connection they have: 3
/// connections per cluster, less the bound at each of the two stages that follow planning.
#[test]
fn with_more_clusters_than_connections_each_stage_reconnects_and_every_rollout_is_followed() {
    const FEW: usize = 4;
    let many = Many::new(FEW);
    // Seeded first: the rollouts start with the run's change.
    many.sb.set_rollout(Rollout::Auto {
        delay: Duration::from_millis(100),
    });
    let o = many.run(&[
        "--image",
        NEW_IMAGE,
        "--yes",
        "--wait",
        "--timeout",
        "1m",
        "--max-connections",
        "2",
    ]);
    assert_code(&o, 0);
    assert_eq!(many.images(), vec![NEW_IMAGE.to_owned(); FEW]);
    let out = stdout(&o);
    assert!(
        out.matches("successfully rolled out").count() == FEW
            && out.ends_with("Fleet: 4 of 4 clusters updated.\n"),
        "{out}"
    );
    const BOUND: u64 = 2;
    assert_eq!(many.sb.counters().connections, 3 * FEW as u64 - 2 * BOUND);
}
