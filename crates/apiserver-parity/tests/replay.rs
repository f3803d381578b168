//! Replays the exchanges `apiserver-parity --record` captured from a real kube-apiserver
//! v1.28.0 (`crates/sandbox-apiserver/tests/fixtures/parity/<sequence>/NN-<step>.json`) on a fresh sandbox per
//! sequence, with the harness's own normalisation (`src/normalize.rs`):
//! same status, compared headers and body once random values are placeholders.
//!
//! Requests are sent as recorded, with every random value the real server produced (versions,
//! uids, continue tokens, generated names) replaced by the sandbox's value that has the same
//! placeholder - as a client that read it would send it.
//!
//! `PENDING` lists the fixtures the sandbox does not reproduce yet, each with its divergence.
//! The test fails when a fixture outside it differs, and when one on it is reproduced (take
//! it off the list), so the list only shrinks.
#![allow(clippy::unwrap_used)]

#[path = "../src/normalize.rs"]
mod normalize;

#[allow(dead_code)]
#[path = "../src/client.rs"]
mod client;

use std::path::{Path, PathBuf};
use std::time::Duration;

use client::{Got, Prepared, Server, Who};
use normalize::{Observed, Side, body_value, first_difference, header_map, watch_events};
use sandbox_apiserver::{Sandbox, SandboxOptions};
use serde_json::Value;

/// Fixtures the sandbox does not reproduce yet: (`sequence/file`, the first difference, real
/// server first), grouped by sequence under a note naming the divergences. Steps that only
/// follow from an earlier divergence of their sequence (an object the sandbox did not create,
/// a version it did not bump) are listed too: they pass once that one is fixed.
const PENDING: &[(&str, &str)] = &[
    // Writes through autoscaling/v1 are converted by the real server; the sandbox serves that
    // version for reads only and refuses writes (405).
    (
        "hpa-autoscaling-v1/14-patch-v1.json",
        "/status: real 200, sandbox 405",
    ),
];

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../sandbox-apiserver/tests/fixtures/parity")
}

fn who(user: &str) -> Who {
    match user {
        "admin" => Who::Admin,
        "readonly" => Who::Readonly,
        "noperm" => Who::Noperm,
        "invalid-token" => Who::Invalid,
        "anonymous" => Who::Anonymous,
        other => panic!("unknown fixture user {other}"),
    }
}

fn translate_target(target: &str, rec: &Side, ours: &Side) -> String {
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    };
    let mut out = normalize::translate_str(path, rec, ours);
    if let Some(q) = query {
        let mut ser = form_urlencoded::Serializer::new(String::new());
        for (k, v) in form_urlencoded::parse(q.as_bytes()) {
            ser.append_pair(&k, &normalize::translate_str(&v, rec, ours));
        }
        out.push('?');
        out.push_str(&ser.finish());
    }
    out
}

/// Server-set metadata the real server and the sandbox answered for the same object at the
/// same point (creationTimestamp, managedFields): a request body that carries the recorded
/// value (a PUT of an object as read) carries the sandbox's instead, as a client that read
/// it from the sandbox would send it.
#[derive(Default)]
struct Seen(Vec<(Value, Value)>);

const SERVER_SET: &[&str] = &["creationTimestamp", "managedFields"];

impl Seen {
    fn learn(&mut self, recorded: &Value, ours: &Value) {
        if let (Some(r), Some(o)) = (recorded.get("metadata"), ours.get("metadata")) {
            for field in SERVER_SET {
                if let (Some(a), Some(b)) = (r.get(field), o.get(field)) {
                    self.0.push((a.clone(), b.clone()));
                }
            }
        }
        if let (Some(ri), Some(oi)) = (
            recorded.get("items").and_then(Value::as_array),
            ours.get("items").and_then(Value::as_array),
        ) {
            for (r, o) in ri.iter().zip(oi) {
                self.learn(r, o);
            }
        }
    }

    fn rewrite(&self, body: &mut Value) {
        let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) else {
            return;
        };
        for field in SERVER_SET {
            if let Some(v) = meta.get_mut(*field)
                && let Some((_, ours)) = self.0.iter().rev().find(|(r, _)| r == v)
            {
                *v = ours.clone();
            }
        }
    }
}

/// The recorded request in the sandbox's terms.
fn prepared(req: &Value, rec: &Side, ours: &Side, seen: &Seen) -> Prepared {
    let headers = req["headers"]
        .as_object()
        .map(|h| {
            h.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default();
    let body = match req.get("body") {
        None => None,
        Some(Value::String(raw)) => Some(normalize::translate_str(raw, rec, ours).into_bytes()),
        Some(v) => {
            let mut v = normalize::translate(v, rec, ours);
            seen.rewrite(&mut v);
            Some(serde_json::to_vec(&v).unwrap())
        }
    };
    Prepared {
        who: who(req["user"].as_str().unwrap_or("admin")),
        method: req["method"].as_str().unwrap().to_string(),
        target: translate_target(req["path"].as_str().unwrap(), rec, ours),
        headers,
        body,
    }
}

fn initial_events(fixture: &Value) -> bool {
    fixture["request"]["path"]
        .as_str()
        .is_some_and(normalize::starts_with_initial_events)
}

fn generate_name(fixture: &Value) -> Option<String> {
    fixture
        .pointer("/request/body/metadata/generateName")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// What the recording says the real server answered.
fn recorded(fixture: &Value) -> Observed {
    let resp = &fixture["response"];
    let events = resp
        .get("events")
        .and_then(Value::as_array)
        .map(|e| e.to_vec());
    let watch = events.is_some();
    Observed {
        status: resp["status"].as_u64().unwrap_or(0) as u16,
        headers: resp["headers"].as_object().cloned().unwrap_or_default(),
        body: if events.is_some() {
            Value::Null
        } else {
            resp["body"].clone()
        },
        events,
        error: None,
        generate_name: generate_name(fixture),
        during: fixture["concurrent_requests"]
            .as_array()
            .map(|d| d.iter().map(recorded).collect())
            .unwrap_or_default(),
        initial_events: watch && initial_events(fixture),
    }
}

fn observed(got: &Got, watch: bool, generate_name: Option<String>) -> Observed {
    Observed {
        status: got.status,
        headers: header_map(&got.headers),
        body: if watch {
            Value::Null
        } else {
            body_value(&got.body)
        },
        events: watch.then(|| watch_events(&got.body)),
        error: got.error.clone(),
        generate_name,
        during: vec![],
        initial_events: false,
    }
}

/// Replays one fixture; a watch is read while its concurrent requests go out at their
/// recorded offsets, until the server ends it or the recorded reading time is up.
async fn replay_one(
    server: &Server,
    fixture: &Value,
    rec: &Side,
    ours: &Side,
    seen: &Seen,
) -> Observed {
    let req = prepared(&fixture["request"], rec, ours, seen);
    if fixture["response"].get("events").is_none() {
        let got = server.send(&req, None).await;
        return observed(&got, false, generate_name(fixture));
    }
    let limit = Duration::from_millis(fixture["stream_ms"].as_u64().unwrap_or(3000));
    let mut req = req;
    if fixture["concurrent_requests"]
        .as_array()
        .is_some_and(|c| !c.is_empty())
    {
        req.target = with_watch_timeout(&req.target, limit);
    }
    let started = tokio::time::Instant::now();
    let concurrent = async {
        let mut out = Vec::new();
        for c in fixture["concurrent_requests"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let at = started + Duration::from_millis(c["after_ms"].as_u64().unwrap_or(0));
            tokio::time::sleep_until(at).await;
            let got = server
                .send(&prepared(&c["request"], rec, ours, seen), None)
                .await;
            out.push(observed(&got, false, generate_name(c)));
        }
        out
    };
    let (got, during) = tokio::join!(server.send(&req, Some(limit)), concurrent);
    let mut o = observed(&got, true, None);
    o.during = during;
    o.initial_events = initial_events(fixture);
    o
}

/// A watch with requests during it is kept open by the server for the whole reading time: the
/// recorded `timeoutSeconds` (the real server's end of the stream) is raised to it, so that
/// on a loaded machine the concurrent requests, sent late, still land inside the watch. The
/// events are compared, not when the stream ended.
fn with_watch_timeout(target: &str, limit: Duration) -> String {
    let secs = limit.as_secs().max(1);
    let Some((path, query)) = target.split_once('?') else {
        return target.to_string();
    };
    let query: Vec<String> = query
        .split('&')
        .map(|kv| match kv.split_once('=') {
            Some(("timeoutSeconds", v)) if v.parse::<u64>().is_ok_and(|v| v < secs) => {
                format!("timeoutSeconds={secs}")
            }
            _ => kv.to_string(),
        })
        .collect();
    format!("{path}?{}", query.join("&"))
}

#[test]
fn a_watch_with_concurrent_requests_is_kept_open_for_the_reading_time() {
    let five = Duration::from_millis(5000);
    assert_eq!(
        with_watch_timeout("/apis/x?watch=true&timeoutSeconds=2&limit=1", five),
        "/apis/x?watch=true&timeoutSeconds=5&limit=1"
    );
    assert_eq!(
        with_watch_timeout("/apis/x?timeoutSeconds=9", five),
        "/apis/x?timeoutSeconds=9"
    );
    assert_eq!(with_watch_timeout("/apis/x", five), "/apis/x");
}

struct Outcome {
    file: String,
    difference: Option<String>,
}

async fn replay_sequence(dir: PathBuf) -> Vec<Outcome> {
    let sequence = dir.file_name().unwrap().to_string_lossy().into_owned();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let sb = Sandbox::start(SandboxOptions {
        tls: true,
        // As the harness starts it: far from the small numbers messages contain.
        initial_resource_version: 1_000_000,
        // The reference server's Service range.
        service_cidr: normalize::REFERENCE_SERVICE_CIDR.into(),
        ..Default::default()
    })
    .unwrap();
    let server = Server::from_yaml("sandbox", &sb.kubeconfig_yaml("default"))
        .await
        .unwrap();
    let mut rec = Side::default();
    let mut ours = Side::default();
    let mut seen = Seen::default();
    let mut out = Vec::new();
    for f in files {
        let fixture: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        let file = format!("{sequence}/{}", f.file_name().unwrap().to_string_lossy());
        let got = replay_one(&server, &fixture, &rec, &ours, &seen).await;
        let want = recorded(&fixture);
        seen.learn(&want.body, &got.body);
        for (w, g) in want.during.iter().zip(&got.during) {
            seen.learn(&w.body, &g.body);
        }
        let a = rec.exchange(&want);
        let b = ours.exchange(&got);
        let mut difference = first_difference(&a, &b, "").map(|d| d.to_string());
        if difference.is_none() && !ours.problems.is_empty() {
            difference = Some(ours.problems.join("; "));
        }
        ours.problems.clear();
        rec.problems.clear();
        out.push(Outcome { file, difference });
    }
    drop(server);
    tokio::task::spawn_blocking(move || drop(sb)).await.unwrap();
    out
}

#[test]
fn every_parity_fixture_is_reproduced_or_pending() {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    // `PARITY_ONLY=seq1,seq2` replays only these sequences (while working on them).
    let only: Option<Vec<String>> = std::env::var("PARITY_ONLY")
        .ok()
        .map(|v| v.split(',').map(str::to_string).collect());
    if let Some(only) = &only {
        dirs.retain(|d| only.iter().any(|o| d.ends_with(o)));
    }
    assert!(
        !dirs.is_empty(),
        "no fixtures in {}",
        fixtures_dir().display()
    );
    // Sequences are independent (a sandbox each) and mostly wait on watches: run them side
    // by side.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let outcomes: Vec<Outcome> = runtime.block_on(async {
        let tasks: Vec<_> = dirs
            .into_iter()
            .map(|d| tokio::spawn(replay_sequence(d)))
            .collect();
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        all
    });
    let mut unexpected = Vec::new();
    let mut now_reproduced = Vec::new();
    let mut reproduced = 0;
    for o in &outcomes {
        let pending = PENDING.iter().any(|(f, _)| *f == o.file);
        match (&o.difference, pending) {
            (None, false) => {
                reproduced += 1;
                println!("ok       {}", o.file);
            }
            (None, true) => {
                println!("FIXED    {} (still on PENDING)", o.file);
                now_reproduced.push(o.file.clone());
            }
            (Some(d), true) => println!("pending  {}: {d}", o.file),
            (Some(d), false) => {
                println!("FAIL     {}: {d}", o.file);
                unexpected.push(format!("    (\"{}\", {:?}),", o.file, d));
            }
        }
    }
    let stale: Vec<&str> = PENDING
        .iter()
        .map(|(f, _)| *f)
        .filter(|f| {
            only.as_ref()
                .is_none_or(|o| o.iter().any(|s| f.starts_with(&format!("{s}/"))))
        })
        .filter(|f| !outcomes.iter().any(|o| o.file == *f))
        .collect();
    println!(
        "parity: {reproduced} of {} fixtures reproduced, {} pending",
        outcomes.len(),
        PENDING.len()
    );
    assert!(
        unexpected.is_empty(),
        "fixtures not reproduced and not pending:\n{}",
        unexpected.join("\n")
    );
    assert!(
        now_reproduced.is_empty(),
        "reproduced now - take them off PENDING: {now_reproduced:?}"
    );
    assert!(
        stale.is_empty(),
        "PENDING names fixtures that do not exist: {stale:?}"
    );
}
