//! Racing writers: many concurrent plugin runs against one application (and more applications
//! in the same namespace), conflicts forced often, an outside writer editing labels all along.
//!
//! **Lost update, precisely.** Every run prints its plan with `-o json`, so each field change
//! it reports has the `before` value it was computed from and the `after` value it wrote. For
//! each field, the runs that reported it applied (exit 0, `… updated` on stderr) must form one
//! chain: the first starts from the field's initial value, each next one starts from the
//! previous one's `after`, and the last `after` is the value in the cluster at the end. A
//! success that is not on that chain — two successes computed from the same `before`, or a
//! chain that does not end at the live value — is a lost update: a write that overwrote a
//! change it never saw. The outside writer's labels are the same test for a field the plugin
//! never owns: its last value must be in the cluster at the end. Runs that did not apply must
//! say so: a non-zero exit and a `NOT …` line for their object.
//!
//! Saved plans race too: some runs save their plan (`--plan-out`) and apply the file
//! (`apply FILE`) while everything else goes on. The plan shown by `apply -o json` is the one
//! that was saved, so their successes join the same chains. And every run that wrote records
//! itself in the application's history at the same time as the others: at the end the history
//! holds one record per successful run on `web`, numbered without a gap.
//!
//! `RACING_ROUNDS=N cargo nextest run --test it racing_writers_e2e:: --no-capture` repeats the
//! scenario N times (CI: once) and prints the totals recorded in docs/reliability.md.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::*;
use sandbox_apiserver::Fault;
use serde_json::{Value, json};

const DEPLOY_PATH: &str = "/apis/apps/v1/namespaces/shop/deployments/web";
const HPA_PATH: &str = "/apis/autoscaling/v2/namespaces/shop/horizontalpodautoscalers/web";
const PROXY_IMAGE: &str = "spec.template.spec.containers[name=proxy].image";
const APP_IMAGE: &str = "spec.template.spec.containers[name=app].image";
const MIN: &str = "spec.minReplicas";
const MAX: &str = "spec.maxReplicas";
/// Applications beside `web` that get one endpoints run each.
const OTHER_APPS: [&str; 4] = ["api", "cart", "search", "auth"];

#[derive(Debug, Clone)]
enum Job {
    /// Changes one field of `web`.
    Field { args: Vec<String> },
    /// Re-exposes another app's endpoints.
    Endpoints { app: &'static str, file: String },
    /// Changes one field of `web` through a saved plan: `--plan-out FILE`, then `apply FILE`.
    Saved { args: Vec<String>, file: String },
}

#[derive(Debug)]
struct Done {
    job: Job,
    code: i32,
    plan: Value,
    stderr: String,
}

#[derive(Debug, Default)]
struct Totals {
    runs: usize,
    applied: usize,
    tripped: usize,
    exhausted: usize,
    other_failures: usize,
    conflicts: u64,
    injected_conflicts: u64,
    writes: u64,
    retries: u64,
    lost_updates: usize,
    label_writes: u64,
    longest_chain: usize,
}

fn endpoints_for(i: usize) -> String {
    format!(
        "endpoints:\n  - path: /health\n  - path: /v{i}/orders\n    scopes: [orders:read]\n  - path: /v{i}/admin\n    scopes: [admin, orders:write]\n"
    )
}

fn jobs(env: &Env) -> Vec<Job> {
    let mut jobs = Vec::new();
    let field = |a: &[String]| Job::Field { args: a.to_vec() };
    for i in 0..7 {
        jobs.push(field(&[
            "--image".into(),
            format!("envoyproxy/envoy:v1.{}", 40 + i),
            "--container".into(),
            "proxy".into(),
        ]));
        jobs.push(field(&["--min".into(), (3 + i).to_string()]));
        jobs.push(field(&["--max".into(), (20 + i).to_string()]));
    }
    for i in 0..3 {
        jobs.push(field(&[
            "--image".into(),
            format!("registry.example.com/web:3.{i}"),
            "--container".into(),
            "app".into(),
        ]));
    }
    for i in 0..2 {
        let saved = |a: &[String], n: &str| Job::Saved {
            args: a.to_vec(),
            file: env
                .dir
                .path()
                .join(format!("plan-{n}-{i}.json"))
                .to_str()
                .unwrap()
                .to_owned(),
        };
        jobs.push(saved(
            &[
                "--image".into(),
                format!("envoyproxy/envoy:v1.{}", 60 + i),
                "--container".into(),
                "proxy".into(),
            ],
            "image",
        ));
        jobs.push(saved(&["--min".into(), (12 + i).to_string()], "min"));
        jobs.push(saved(&["--max".into(), (30 + i).to_string()], "max"));
    }
    for (i, app) in OTHER_APPS.iter().enumerate() {
        let file = env.write_file(&format!("{app}.yaml"), &endpoints_for(i));
        jobs.push(Job::Endpoints {
            app,
            file: file.to_str().unwrap().to_owned(),
        });
    }
    jobs
}

fn setup() -> Env {
    let env = Env::new();
    for app in OTHER_APPS {
        env.sb.seed_demo_app(NS, app).unwrap();
    }
    // A second container, and room for every --min below the live max.
    env.sb
        .update(DEPLOY_PATH, |d| {
            let c = d["spec"]["template"]["spec"]["containers"]
                .as_array_mut()
                .unwrap();
            c[0]["name"] = json!("app");
            c.push(json!({"name": "proxy", "image": "envoyproxy/envoy:v1.30"}));
        })
        .unwrap();
    env.sb
        .update(HPA_PATH, |h| h["spec"]["maxReplicas"] = json!(50))
        .unwrap();
    env
}

fn run_job(env: &Env, job: &Job) -> Done {
    let mut args: Vec<String> = vec!["-o".into(), "json".into(), "--yes".into()];
    args.extend(["--retries".into(), "10".into()]);
    match job {
        Job::Field { args: a } => {
            args.insert(0, "web".into());
            args.extend(a.iter().cloned());
        }
        Job::Endpoints { app, file } => {
            args.insert(0, (*app).into());
            args.extend(["--endpoints".into(), file.clone()]);
        }
        Job::Saved { args: a, file } => {
            let mut save: Vec<&str> = vec!["web"];
            save.extend(a.iter().map(String::as_str));
            save.extend(["--plan-out", file.as_str()]);
            let o = env.run(&save);
            assert_code(&o, 0);
            args = vec![
                "apply".into(),
                file.clone(),
                "-o".into(),
                "json".into(),
                "--yes".into(),
                "--retries".into(),
                "10".into(),
            ];
        }
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = env.run(&refs);
    let plan = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    Done {
        job: job.clone(),
        code: code(&o),
        plan,
        stderr: stderr(&o),
    }
}

/// (path, before, after) of the one field a web job changes, from its plan.
fn field_change(d: &Done) -> Option<(String, Value, Value)> {
    let f = &d.plan["objects"]
        .as_array()?
        .iter()
        .find(|o| o["action"] == "update")?["fields"][0];
    Some((
        f["path"].as_str()?.to_owned(),
        f["before"].clone(),
        f["after"].clone(),
    ))
}

fn live_value(env: &Env, path: &str) -> Value {
    let d = env.deployment();
    let containers = d["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .clone();
    let image = |name: &str| {
        containers
            .iter()
            .find(|c| c["name"] == name)
            .map(|c| c["image"].clone())
            .unwrap()
    };
    match path {
        PROXY_IMAGE => image("proxy"),
        APP_IMAGE => image("app"),
        MIN => env.hpa()["spec"]["minReplicas"].clone(),
        MAX => env.hpa()["spec"]["maxReplicas"].clone(),
        other => panic!("unexpected field {other}"),
    }
}

fn managed_paths(env: &Env, app: &str) -> Vec<String> {
    let mut v: Vec<String> = env
        .ingresses()
        .iter()
        .filter(|i| i["metadata"]["labels"]["app"] == app)
        .filter(|i| i["metadata"]["labels"]["identifier"].is_string())
        .flat_map(|i| {
            i["spec"]["rules"][0]["http"]["paths"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|p| p["path"].as_str().unwrap().to_owned())
        .collect();
    v.sort();
    v
}

fn round(totals: &mut Totals) {
    let env = setup();
    let initial: BTreeMap<&str, Value> = [PROXY_IMAGE, APP_IMAGE, MIN, MAX]
        .into_iter()
        .map(|p| (p, live_value(&env, p)))
        .collect();
    // Conflicts forced often: on every object, real writes and dry runs alike, plus latency
    // so the runs' read-to-write windows overlap.
    env.sb.inject(Fault::Latency(Duration::from_millis(15)));
    for path in [DEPLOY_PATH, HPA_PATH] {
        env.sb.inject(Fault::Conflicts {
            object_path: path.into(),
            count: 20,
        });
    }
    for app in OTHER_APPS {
        env.sb.inject(Fault::Conflicts {
            object_path: format!(
                "/apis/networking.k8s.io/v1/namespaces/shop/ingresses/{app}-e3b0c44298fc1c14"
            ),
            count: 3,
        });
    }
    let jobs = jobs(&env);
    let stop = AtomicBool::new(false);
    let (done, label_writes) = std::thread::scope(|s| {
        let outside = s.spawn(|| {
            // The outside writer: a label on the Deployment and the HPA, over and over.
            let mut n = 0u64;
            while !stop.load(Ordering::SeqCst) && n < 20_000 {
                n += 1;
                let path = if n.is_multiple_of(2) {
                    DEPLOY_PATH
                } else {
                    HPA_PATH
                };
                env.sb
                    .update(path, |o| {
                        o["metadata"]["labels"]["outside"] = json!(n.to_string())
                    })
                    .unwrap();
                std::thread::sleep(Duration::from_millis(40));
            }
            n
        });
        // Staggered starts, so that some runs plan after others applied (chains longer than
        // one link) while most overlap. Only the mix depends on timing, never the verdict.
        let handles: Vec<_> = jobs
            .iter()
            .enumerate()
            .map(|(i, job)| {
                let env = &env;
                s.spawn(move || {
                    std::thread::sleep(Duration::from_millis(400 * (i as u64 % 5)));
                    run_job(env, job)
                })
            })
            .collect();
        let done: Vec<Done> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        stop.store(true, Ordering::SeqCst);
        (done, outside.join().unwrap())
    });
    env.sb.clear_faults();

    // The outside writer's last labels are there.
    let last = label_writes;
    let (last_deploy, last_hpa) = if last.is_multiple_of(2) {
        (last, last - 1)
    } else {
        (last - 1, last)
    };
    assert_eq!(
        env.deployment()["metadata"]["labels"]["outside"],
        json!(last_deploy.to_string())
    );
    assert_eq!(
        env.hpa()["metadata"]["labels"]["outside"],
        json!(last_hpa.to_string())
    );

    // Every run either applied and says so, or did not and says so.
    let mut web_records = 0u64;
    let mut chains: BTreeMap<String, Vec<(Value, Value)>> = BTreeMap::new();
    let mut successes: Vec<(String, Value, Value)> = Vec::new();
    let web_failures = done
        .iter()
        .filter(|d| d.code != 0 && !matches!(d.job, Job::Endpoints { .. }))
        .count() as u64;
    for d in &done {
        let ctx = format!("{:?} exit {}\n{}", d.job, d.code, d.stderr);
        totals.runs += 1;
        match d.code {
            0 => {
                totals.applied += 1;
                assert!(
                    d.stderr.contains(" updated") || d.stderr.contains(" created"),
                    "{ctx}"
                );
                assert!(!d.stderr.contains(" NOT "), "{ctx}");
                match &d.job {
                    Job::Field { .. } | Job::Saved { .. } => {
                        web_records += 1;
                        let (path, before, after) = field_change(d).expect("the plan");
                        successes.push((path.clone(), before.clone(), after.clone()));
                        chains.entry(path).or_default().push((before, after));
                    }
                    Job::Endpoints { app, .. } => {
                        let i = OTHER_APPS.iter().position(|a| a == app).unwrap();
                        let mut want = vec![
                            format!("/{app}/health"),
                            format!("/{app}/v{i}/admin"),
                            format!("/{app}/v{i}/orders"),
                        ];
                        want.sort();
                        assert_eq!(managed_paths(&env, app), want, "{ctx}");
                    }
                }
            }
            5 => {
                totals.tripped += 1;
                assert!(d.stderr.contains(" NOT updated: "), "{ctx}");
                assert!(d.stderr.contains("the plan showed"), "{ctx}");
            }
            1 | 6 => {
                if d.stderr.contains("still conflicting after") {
                    totals.exhausted += 1;
                } else {
                    totals.other_failures += 1;
                }
                assert!(d.stderr.contains(" NOT "), "{ctx}");
            }
            _ => panic!("unexpected exit: {ctx}"),
        }
    }
    assert_eq!(totals.other_failures, 0);

    // The chain check: no lost update.
    for (path, mut links) in chains {
        totals.longest_chain = totals.longest_chain.max(links.len());
        let mut current = initial[path.as_str()].clone();
        while !links.is_empty() {
            let next: Vec<usize> = (0..links.len())
                .filter(|&i| links[i].0 == current)
                .collect();
            if next.len() != 1 {
                totals.lost_updates += links.len();
                panic!("lost update on {path}: from {current} the successes {links:?}");
            }
            current = links.remove(next[0]).1;
        }
        let live = live_value(&env, &path);
        if live != current {
            totals.lost_updates += 1;
            panic!("lost update on {path}: the chain ends at {current}, the cluster has {live}");
        }
    }

    // The history: one record per successful run on web, and none of a run that failed; the
    // newest ten are kept. A run records with its last writes and takes its record back when
    // they do not land; when no other run recorded in between, the history reads as if it
    // had never been written (numbered 1, 2, 3… without a gap), otherwise its number stays
    // unused and the other run's pruning counted it.
    let o = env.run(&["history", "web", "-o", "json"]);
    assert_code(&o, 0);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let records = doc["records"].as_array().unwrap();
    let revisions: Vec<u64> = records
        .iter()
        .map(|r| r["revision"].as_u64().unwrap())
        .collect();
    let kept = web_records.min(10);
    if web_failures == 0 {
        assert_eq!(
            revisions,
            ((web_records - kept + 1)..=web_records).collect::<Vec<_>>(),
            "one record per successful run"
        );
    }
    assert!(revisions.windows(2).all(|w| w[0] < w[1]), "{revisions:?}");
    let n = revisions.len() as u64;
    assert!(
        n <= kept && n + web_failures >= kept,
        "{n} records kept of {web_records} successful runs ({web_failures} failed): {revisions:?}"
    );
    for r in records {
        let (path, change) = if r["image"]["container"] == "app" {
            (APP_IMAGE, &r["image"])
        } else if r["image"].is_object() {
            (PROXY_IMAGE, &r["image"])
        } else if r["bounds"]["min"].is_object() {
            (MIN, &r["bounds"]["min"])
        } else {
            (MAX, &r["bounds"]["max"])
        };
        let change = (
            path.to_owned(),
            change["before"].clone(),
            change["after"].clone(),
        );
        assert!(
            successes.contains(&change),
            "a record that no successful run made: {r}\nsuccesses: {successes:?}"
        );
        assert_eq!(r["status"], "applied", "{r}");
    }
    for d in &done {
        assert!(!d.stderr.contains("not recorded"), "{}", d.stderr);
    }

    let c = env.sb.counters();
    let injected = env
        .sb
        .requests()
        .iter()
        .filter(|r| r.fault.as_deref() == Some("conflict"))
        .count() as u64;
    totals.conflicts += c.conflicts;
    totals.injected_conflicts += injected;
    totals.writes += c.writes;
    totals.label_writes += label_writes;
    let stopped = done.iter().filter(|d| d.code != 0).count() as u64;
    totals.retries += c.conflicts.saturating_sub(stopped);
}

#[test]
fn concurrent_runs_lose_no_update_and_every_run_says_what_happened() {
    let rounds: usize = std::env::var("RACING_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let mut totals = Totals::default();
    for _ in 0..rounds {
        round(&mut totals);
    }
    println!(
        "racing writers: {rounds} round(s), {} runs ({} concurrent per round): {} applied, {} stopped by the guard, {} gave up after --retries 10; {} conflicts seen ({} injected, {} real), {} retries used, {} writes, {} outside label writes; longest chain of successes on one field: {}; lost updates: {}",
        totals.runs,
        totals.runs / rounds,
        totals.applied,
        totals.tripped,
        totals.exhausted,
        totals.conflicts,
        totals.injected_conflicts,
        totals.conflicts - totals.injected_conflicts,
        totals.retries,
        totals.writes,
        totals.label_writes,
        totals.longest_chain,
        totals.lost_updates
    );
    assert_eq!(totals.lost_updates, 0);
    assert!(totals.runs >= 20 * rounds);
    assert!(totals.applied > 0, "some runs applied");
}
