//! What a LIST keeps of its items' managedFields for finding who else owns them
//! (`appupdate_kube::cluster::ListItems`), counted by dhat's allocator (bytes, not times: the
//! same on every machine). One test: the counts are the process's.

use appupdate_kube::cluster::ListItems;
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

/// A listed Ingress of ten paths, with `entries` as its managedFields.
fn ingress(i: usize, entries: &[Value]) -> Value {
    let paths: Vec<Value> = (0..10)
        .map(|p| {
            json!({
                "path": format!("/web/team{i}/e{p}"),
                "pathType": "Prefix",
                "backend": {"service": {"name": "web", "port": {"number": 80}}}
            })
        })
        .collect();
    let mut metadata = json!({
        "name": format!("web-{i}"), "namespace": "shop",
        "labels": {"app": "web", "identifier": format!("g{i}")},
        "resourceVersion": "7", "uid": format!("u-{i}"),
    });
    if !entries.is_empty() {
        metadata["managedFields"] = json!(entries);
    }
    json!({"metadata": metadata,
           "spec": {"ingressClassName": "nginx", "rules": [{"http": {"paths": paths}}]}})
}

/// Everything a manager that wrote the whole Ingress holds, its ten paths each a key.
fn whole_ingress_fields(i: usize) -> Value {
    let paths: serde_json::Map<String, Value> = (0..10)
        .map(|p| {
            (
                format!("k:{{\"path\":\"/web/team{i}/e{p}\",\"pathType\":\"Prefix\"}}"),
                json!({".": {}, "f:backend": {"f:service": {"f:name": {}, "f:port": {"f:number": {}}}},
                       "f:path": {}, "f:pathType": {}}),
            )
        })
        .collect();
    json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:identifier": {}}},
           "f:spec": {"f:ingressClassName": {}, "f:rules": {"k:{\"host\":\"\"}": {"f:http": {"f:paths": paths}}}}})
}

fn entry(manager: &str, operation: &str, fields: Value) -> Value {
    json!({"manager": manager, "operation": operation, "apiVersion": "networking.k8s.io/v1",
           "time": "2026-12-01T07:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields})
}

fn listing(n: usize, entries: impl Fn(usize) -> Vec<Value>) -> String {
    let items: Vec<Value> = (0..n).map(|i| ingress(i, &entries(i))).collect();
    json!({"kind": "IngressList", "apiVersion": "networking.k8s.io/v1",
           "metadata": {"resourceVersion": "9"}, "items": items})
    .to_string()
}

#[test]
fn a_listing_keeps_nothing_of_managed_fields_that_name_no_owner_and_little_of_those_that_do() {
    let _profiler = dhat::Profiler::builder().testing().build();
    const N: usize = 40;
    let read = |text: &str| serde_json::from_str::<ListItems>(text).unwrap_or_default();
    let without = listing(N, |_| Vec::new());
    let (bare, bare_bytes) = held(|| read(&without));
    // What this tool and people's kubectl write: no owner, nothing kept.
    let ours = listing(N, |i| {
        vec![
            entry(
                "kubectl-client-side-apply",
                "Update",
                whole_ingress_fields(i),
            ),
            entry("kubectl-appupdate", "Update", whole_ingress_fields(i)),
        ]
    });
    let (mine, mine_bytes) = held(|| read(&ours));
    assert!(mine.1.is_empty());
    assert_eq!(mine.0, bare.0);
    assert_eq!(
        mine_bytes, bare_bytes,
        "managedFields of no owner kept bytes"
    );
    // A server-side applier holding all of every Ingress: its entry is kept, cut four levels
    // deep (the paths, a tenth of the item's JSON each time, are not).
    let applied = listing(N, |i| vec![entry("helm", "Apply", whole_ingress_fields(i))]);
    let (theirs, theirs_bytes) = held(|| read(&applied));
    assert_eq!(theirs.1.len(), N);
    let kept = (theirs_bytes - bare_bytes) / N as u64;
    assert!(
        kept <= 1_024,
        "kept {kept} B per item (items alone: {} B each)",
        bare_bytes / N as u64
    );
    drop((bare, mine, theirs));
}
