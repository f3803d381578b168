//! What a listed Ingress and a copy of its paths take to hold, counted by dhat's allocator
//! (bytes, not times: the same on every machine). One test: the counts are the process's.

use appupdate_model::compact_json;
use serde_json::{Value, json};

#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

/// `make`'s result and the bytes it holds.
fn held<T>(make: impl FnOnce() -> T) -> (T, u64) {
    let before = dhat::HeapStats::get().curr_bytes;
    let made = make();
    let after = dhat::HeapStats::get().curr_bytes;
    (made, (after - before) as u64)
}

fn ingress(paths: usize) -> Value {
    let paths: Vec<Value> = (0..paths)
        .map(|i| {
            json!({
                "path": format!("/web/team/e{i}"),
                "pathType": "Prefix",
                "backend": {"service": {"name": "web", "port": {"number": 80}}}
            })
        })
        .collect();
    json!({
        "metadata": {"name": "web-public", "labels": {"app": "web", "identifier": "public"},
                     "resourceVersion": "7", "uid": "u-1"},
        "spec": {"ingressClassName": "nginx", "rules": [{"http": {"paths": paths}}]}
    })
}

#[test]
fn compact_reads_and_copies_hold_at_most_70_percent_of_serde_jsons() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let live = ingress(10);
    let text = live.to_string();

    let (plain, plain_bytes) = held(|| serde_json::from_str::<Value>(&text).unwrap_or_default());
    let (compact, compact_bytes) = held(|| compact_json::from_str(&text).unwrap_or_default());
    assert_eq!(compact, plain);
    assert!(
        compact_bytes * 10 <= plain_bytes * 7,
        "read: compact {compact_bytes} B, serde_json {plain_bytes} B"
    );

    let paths = &live["spec"]["rules"][0]["http"]["paths"];
    let (cloned, cloned_bytes) = held(|| paths.clone());
    let (copied, copied_bytes) = held(|| compact_json::copy(paths));
    assert_eq!(copied, cloned);
    assert!(
        copied_bytes * 10 <= cloned_bytes * 7,
        "copy: {copied_bytes} B, clone {cloned_bytes} B"
    );
}
