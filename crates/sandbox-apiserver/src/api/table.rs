//! `meta.k8s.io/v1` Tables for `kubectl get`: the kind's columns and cells, one row per object.

use serde_json::{Value, json};

use crate::kinds::Kind;
use crate::model::object::partial_metadata;
use crate::model::time;

/// A Table of `objs`; `rv`: the list's revision (else the first object's), `cont`: the
/// continue token.
pub fn table_for(k: &dyn Kind, objs: &[Value], rv: Option<u64>, cont: Option<String>) -> Value {
    let now = time::now_secs();
    let rows: Vec<Value> = objs
        .iter()
        .map(|o| json!({"cells": k.table_cells(o, now), "object": partial_metadata(o)}))
        .collect();
    let mut meta = serde_json::Map::new();
    if let Some(rv) = rv {
        meta.insert("resourceVersion".into(), json!(rv.to_string()));
    } else if let Some(rv) = objs
        .first()
        .and_then(|o| o.pointer("/metadata/resourceVersion"))
    {
        meta.insert("resourceVersion".into(), rv.clone());
    }
    if let Some(c) = cont {
        meta.insert("continue".into(), json!(c));
    }
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "columnDefinitions": k.table_columns(), "rows": rows})
}
