//! OpenAPI: just enough for kubectl's field-validation check. kubectl 1.28 loads `/openapi/v2`
//! before `create -f`/`replace -f`/`apply -f`, finds no schema for the kind and then asks
//! `/openapi/v3` whether the kind's PATCH accepts `fieldValidation` — after which it leaves
//! validation to the server (`fieldValidation=Strict`), as against a real cluster.

use serde_json::{Value, json};

use crate::kinds::{self, Discovery, Registry};

/// The group/versions of the served kinds, in registration order.
fn openapi_gvs(reg: &Registry) -> Vec<(&'static str, &'static str)> {
    let mut gvs = Vec::new();
    for k in reg.kinds() {
        let gv = (k.api().group, k.api().version);
        if !gvs.contains(&gv) {
            gvs.push(gv);
        }
    }
    gvs
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// A minimal `openapi_v2.Document` in protobuf (swagger "2.0", info, empty paths): kubectl
/// 1.28 loads it before validating `create -f`/`replace -f` input, finds no schema for the
/// kind and leaves validation to the server (`fieldValidation=Strict`).
pub fn v2_protobuf() -> Vec<u8> {
    fn field(tag: u8, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        let mut len = bytes.len();
        loop {
            let b = (len & 0x7f) as u8;
            len >>= 7;
            if len == 0 {
                out.push(b);
                break;
            }
            out.push(b | 0x80);
        }
        out.extend_from_slice(bytes);
        out
    }
    let mut info = field(0x0a, b"Kubernetes");
    info.extend(field(0x12, b"v1.28.0"));
    let mut doc = field(0x0a, b"2.0");
    doc.extend(field(0x12, &info));
    doc.extend(field(0x42, &[]));
    doc
}

/// `/openapi/v3`: the real server's index (every group and group/version, with its
/// documents' hashes, as recorded), less the group/versions of CRDs the sandbox does not
/// install (all of them without CRDs; the experimental ones with the Gateway API's standard
/// channel). Only the served kinds' group/versions have documents here.
pub fn v3_root(reg: &Registry) -> Value {
    let mut doc: Value =
        serde_json::from_str(include_str!("discovery/openapi_v3.json")).unwrap_or(json!({}));
    let absent: Vec<(&str, &str)> = kinds::all()
        .iter()
        .filter(|k| matches!(k.discovery(), Discovery::CustomResource(_)))
        .map(|k| (k.api().group, k.api().version))
        .filter(|(g, v)| {
            !reg.kinds()
                .any(|k| k.api().group == *g && k.api().version == *v)
        })
        .collect();
    if let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) {
        paths.retain(|p, _| {
            let mut parts = p.strip_prefix("apis/").unwrap_or("").split('/');
            let gv = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            !absent.contains(&gv)
        });
    }
    doc
}

/// `/openapi/v3/<gv>`: the PATCH operation of each served kind, with its parameters.
pub fn v3_doc(reg: &Registry, path: &str) -> Option<Value> {
    let (g, v) = openapi_gvs(reg)
        .into_iter()
        .find(|(g, v)| gv_path(g, v) == path)?;
    let params = json!([
        {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}}
    ]);
    let mut paths = serde_json::Map::new();
    for k in reg
        .kinds()
        .filter(|k| k.review().is_none())
        .map(|k| k.api())
        .filter(|k| k.group == g && k.version == v)
    {
        let prefix = format!("/{}", gv_path(g, v));
        let item = if k.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", k.resource)
        } else {
            format!("{prefix}/{}/{{name}}", k.resource)
        };
        paths.insert(
            item,
            json!({"patch": {
                "operationId": format!("patch{}", k.kind),
                "parameters": params,
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": {"group": k.group, "kind": k.kind, "version": k.version}
            }}),
        );
    }
    Some(
        json!({"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.28.0"}, "paths": paths, "components": {"schemas": {}}}),
    )
}
