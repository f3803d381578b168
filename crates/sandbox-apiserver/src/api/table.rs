//! `meta.k8s.io/v1` Tables for `kubectl get`: the kind's columns and cells, one row per object.

use serde_json::{Value, json};

use crate::kinds::{self, Kind};
use crate::model::schema;
use crate::model::status::{self, StatusBody};
use crate::model::time;

/// What a Table row carries besides its cells (`?includeObject=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Include {
    None,
    Metadata,
    Object,
}

impl Include {
    /// `includeObject`: `Metadata` by default; 400 for an unknown value.
    pub fn parse(v: Option<&str>) -> Result<Include, StatusBody> {
        match v.unwrap_or("") {
            "" | "Metadata" => Ok(Include::Metadata),
            "Object" => Ok(Include::Object),
            "None" => Ok(Include::None),
            other => Err(status::bad_request(format!(
                "unrecognized includeObject value: {}",
                status::go_quote(other)
            ))),
        }
    }
}

/// `PartialObjectMetadata` of `meta.k8s.io/<version>`.
pub fn partial(obj: &Value, version: &str) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": format!("meta.k8s.io/{version}"),
        // ObjectMeta in Go field order, whatever order the object keeps its keys in.
        "metadata": schema::normalize(
            schema::OBJECT_META,
            &obj.get("metadata").cloned().unwrap_or(json!({}))
        ),
    })
}

/// A Table (`meta.k8s.io/<version>`) of `objs` (as stored, or as another version of the
/// resource wrote them: the printer and the partial metadata work on the stored object, a
/// row's whole object is as `k` serves it); `rv`: the list's revision (else the first object's), `cont`: the continue
/// token and remaining count.
pub fn table_for(
    k: &dyn Kind,
    objs: &[Value],
    rv: Option<u64>,
    cont: Option<(String, Option<usize>)>,
    version: &str,
    include: Include,
) -> Value {
    let now = time::now_secs();
    let rows: Vec<Value> = objs
        .iter()
        .map(|o| {
            let object = match include {
                Include::None => Value::Null,
                Include::Metadata => partial(o, version),
                Include::Object => kinds::to_wire(k, o),
            };
            json!({"cells": k.table_cells(o, now), "object": object})
        })
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
    if let Some((c, remaining)) = cont {
        meta.insert("continue".into(), json!(c));
        if let Some(n) = remaining {
            meta.insert("remainingItemCount".into(), json!(n));
        }
    }
    json!({"kind": "Table", "apiVersion": format!("meta.k8s.io/{version}"), "metadata": meta, "columnDefinitions": k.table_columns(), "rows": rows})
}
