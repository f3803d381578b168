//! The names of a served resource and helpers every layer uses on a JSON object.

use serde_json::{Map, Value, json};

/// How the API names a served resource: group, version, plural resource, kind, scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiResource {
    /// `""` for the core group.
    pub group: &'static str,
    pub version: &'static str,
    /// `v1`, `apps/v1`.
    pub api_version: &'static str,
    /// The plural resource in paths (`deployments`).
    pub resource: &'static str,
    pub kind: &'static str,
    pub list_kind: &'static str,
    /// Namespaced (`true`) or cluster-scoped.
    pub namespaced: bool,
}

/// `kind` + `apiVersion` first, then the rest: how the server writes an object.
pub fn with_type_meta(r: &ApiResource, obj: &Value) -> Value {
    let mut m = Map::new();
    m.insert("kind".into(), json!(r.kind));
    m.insert("apiVersion".into(), json!(r.api_version));
    if let Value::Object(o) = obj {
        for (key, v) in o {
            if key != "kind" && key != "apiVersion" {
                m.insert(key.clone(), v.clone());
            }
        }
    }
    Value::Object(m)
}

/// `metadata.<field>` as a string, `""` when absent.
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `metadata`, created (and the object made an object) when missing.
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let Value::Object(root) = obj else {
        unreachable!("made an object above")
    };
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    let Value::Object(m) = meta else {
        unreachable!("made an object above")
    };
    m
}

/// A LIST response body; `cont`: the continue token and the remaining item count (not
/// known when a selector filtered the list).
pub fn list_body(
    r: &ApiResource,
    items: Vec<Value>,
    rv: u64,
    cont: Option<(String, Option<usize>)>,
) -> Value {
    let mut meta = Map::new();
    meta.insert("resourceVersion".into(), json!(rv.to_string()));
    if let Some((token, remaining)) = cont {
        meta.insert("continue".into(), json!(token));
        if let Some(n) = remaining {
            meta.insert("remainingItemCount".into(), json!(n));
        }
    }
    // Built by hand: `json!` would copy every item through serde.
    let mut list = Map::with_capacity(4);
    list.insert("kind".into(), json!(r.list_kind));
    list.insert("apiVersion".into(), json!(r.api_version));
    list.insert("metadata".into(), Value::Object(meta));
    list.insert("items".into(), Value::Array(items));
    Value::Object(list)
}
