//! One kubeconfig for several sandboxes (a fleet): each sandbox's own kubeconfig
//! (`Sandbox::kubeconfig_yaml`) with its cluster, users and contexts renamed after the
//! cluster — context `sandbox` becomes `<name>`, `sandbox-readonly` becomes `<name>-readonly`
//! (and `-noperm`, `-invalid`) — all in one file whose current context is the first cluster's.
//! Shared by the tests, `examples/fleet.rs` and the benchmark (`#[path]`).

use sandbox_apiserver::Sandbox;
use serde_json::{Value, json};

/// The merged kubeconfig, as JSON (which is YAML too).
pub fn merged_kubeconfig(clusters: &[(&str, &Sandbox)], namespace: &str) -> String {
    let mut merged = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [],
        "contexts": [],
        "users": [],
        "current-context": clusters.first().map_or("", |(n, _)| *n),
        "preferences": {},
    });
    for (name, sb) in clusters {
        let doc: Value =
            serde_saphyr::from_str(&sb.kubeconfig_yaml(namespace)).unwrap_or(Value::Null);
        let renamed =
            |v: &Value| Value::from(v.as_str().unwrap_or_default().replacen("sandbox", name, 1));
        for (list, fields) in [
            ("clusters", &["/name"][..]),
            (
                "contexts",
                &["/name", "/context/cluster", "/context/user"][..],
            ),
            ("users", &["/name"][..]),
        ] {
            for entry in doc[list].as_array().into_iter().flatten() {
                let mut entry = entry.clone();
                for field in fields {
                    if let Some(v) = entry.pointer_mut(field) {
                        *v = renamed(v);
                    }
                }
                if let Some(items) = merged[list].as_array_mut() {
                    items.push(entry);
                }
            }
        }
    }
    serde_json::to_string_pretty(&merged).unwrap_or_default()
}

/// One kubeconfig for one sandbox seen as many clusters: a context per namespace, named after
/// it, each with the sandbox's cluster and admin user and that namespace (a fleet of
/// `namespaces.len()` clusters on one server). The current context is the first.
#[allow(dead_code)] // the benchmark and examples/fleet.rs include this file too
pub fn namespaces_kubeconfig(sb: &Sandbox, namespaces: &[String]) -> String {
    let doc: Value = serde_saphyr::from_str(&sb.kubeconfig_yaml("default")).unwrap_or(Value::Null);
    let admin = doc["contexts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == "sandbox")
        .map(|c| c["context"]["user"].clone())
        .unwrap_or(Value::Null);
    let users: Vec<Value> = doc["users"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|u| u["name"] == admin)
        .cloned()
        .collect();
    let contexts: Vec<Value> = namespaces
        .iter()
        .map(|ns| json!({"name": ns, "context": {"cluster": "sandbox", "user": admin, "namespace": ns}}))
        .collect();
    let merged = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": doc["clusters"],
        "contexts": contexts,
        "users": users,
        "current-context": namespaces.first().map_or("", String::as_str),
        "preferences": {},
    });
    serde_json::to_string(&merged).unwrap_or_default()
}
