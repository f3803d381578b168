//! The three PATCH flavours: JSON merge patch (RFC 7386) and JSON patch (RFC 6902), both from
//! the `json-patch` crate, and strategic merge patch (list merge keys and `$patch`,
//! `$setElementOrder/…`, `$deleteFromPrimitiveList/…`, `$retainKeys` directives) driven by the
//! schema's patch strategies.

use serde_json::{Map, Value};

use crate::model::schema::{self, L, T};

/// RFC 7386 (the `json-patch` crate's `merge`).
pub fn merge_patch(target: &Value, patch: &Value) -> Value {
    let mut out = target.clone();
    json_patch::merge(&mut out, patch);
    out
}

/// RFC 6902 (the `json-patch` crate), with evanphx/json-patch's reading of an `add`, `replace`
/// or `test` without a `value`: null. `Err` carries the library message; the API server turns
/// any failure into a generic 422.
pub fn json_patch(doc: &Value, ops: &[Value]) -> Result<Value, String> {
    let ops: Vec<Value> = ops
        .iter()
        .map(|op| {
            let mut op = op.clone();
            if let Some(m) = op.as_object_mut()
                && matches!(
                    m.get("op").and_then(Value::as_str),
                    Some("add" | "replace" | "test")
                )
            {
                m.entry("value").or_insert(Value::Null);
            }
            op
        })
        .collect();
    let patch: json_patch::Patch =
        serde_json::from_value(Value::Array(ops)).map_err(|e| e.to_string())?;
    let mut doc = doc.clone();
    json_patch::patch(&mut doc, &patch).map_err(|e| e.to_string())?;
    Ok(doc)
}

/// A strategic merge patch failure: `BadRequest` texts are mergepatch's sentinel errors; others
/// surface as 500 InternalError like the real server.
#[derive(Debug, PartialEq)]
pub enum SmpError {
    BadRequest(String),
    Internal(String),
}

/// Go's `%v` of a decoded JSON value (`map[image:nginx name:web]`).
fn go_fmt(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let items: Vec<String> = keys
                .iter()
                .map(|k| format!("{k}:{}", go_fmt(&m[k.as_str()])))
                .collect();
            format!("map[{}]", items.join(" "))
        }
        Value::Array(a) => format!("[{}]", a.iter().map(go_fmt).collect::<Vec<_>>().join(" ")),
        Value::String(s) => s.clone(),
        Value::Null => "<nil>".into(),
        other => other.to_string(),
    }
}

/// Apply a strategic merge patch to `original` of type `ty`.
pub fn strategic_merge(original: &Value, patch: &Value, ty: usize) -> Result<Value, SmpError> {
    let Value::Object(p) = patch else {
        return Err(SmpError::BadRequest("invalid JSON document".into()));
    };
    let orig = match original {
        Value::Object(o) => o.clone(),
        _ => Map::new(),
    };
    merge_map(orig, p, Some(&T::Obj(ty))).map(Value::Object)
}

fn field_type(parent: Option<&T>, key: &str) -> Option<&'static T> {
    match parent? {
        T::Obj(i) => schema::type_def(*i).field(key).map(|f| &f.ty),
        T::Map(item, _) => Some(*item),
        _ => None,
    }
}

fn merge_map(
    mut orig: Map<String, Value>,
    patch: &Map<String, Value>,
    ty: Option<&T>,
) -> Result<Map<String, Value>, SmpError> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut p = patch.clone();
            p.remove("$patch");
            return Ok(p);
        }
        Some("delete") => return Ok(Map::new()),
        Some(other) => {
            return Err(SmpError::BadRequest(format!(
                "Unknown patch type: {other} in map: {}",
                go_fmt(&Value::Object(patch.clone()))
            )));
        }
        None => {}
    }
    if let Some(Value::Array(keep)) = patch.get("$retainKeys") {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        orig.retain(|k, _| keep.contains(&k.as_str()));
    }
    // Directives on lists are applied after the lists themselves.
    for (k, v) in patch {
        if k.starts_with('$') {
            continue;
        }
        let fty = field_type(ty, k);
        if v.is_null() {
            orig.remove(k);
            continue;
        }
        let cur = orig.remove(k);
        let merged = match (cur, v, fty) {
            (Some(Value::Object(o)), Value::Object(pm), t) => {
                let atomic_map = matches!(t, Some(T::Map(_, true)));
                if atomic_map {
                    Value::Object(strip_directives(pm))
                } else {
                    Value::Object(merge_map(o, pm, t)?)
                }
            }
            (None, Value::Object(pm), t) => Value::Object(merge_map(Map::new(), pm, t)?),
            (Some(Value::Array(o)), Value::Array(pa), Some(T::List(item, strategy))) => {
                Value::Array(merge_list(o, pa, item, strategy, k)?)
            }
            (None, Value::Array(pa), Some(T::List(item, strategy))) => {
                Value::Array(merge_list(Vec::new(), pa, item, strategy, k)?)
            }
            (_, other, _) => strip_value(other),
        };
        orig.insert(k.clone(), merged);
    }
    for (k, v) in patch {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            let Value::Array(del) = v else {
                return Err(SmpError::BadRequest("Invalid JSON Patch".into()));
            };
            if let Some(Value::Array(cur)) = orig.get_mut(field) {
                cur.retain(|x| !del.contains(x));
            }
        } else if let Some(field) = k.strip_prefix("$setElementOrder/") {
            let Value::Array(order) = v else {
                return Err(SmpError::BadRequest(
                    "invalid type for setElementOrder list".into(),
                ));
            };
            let merge_key = match field_type(ty, field) {
                Some(T::List(_, L::Map { merge_key, .. })) => Some(*merge_key),
                _ => None,
            };
            if let Some(Value::Array(cur)) = orig.get_mut(field) {
                let ident = |x: &Value| -> Value {
                    match merge_key {
                        Some(mk) => x.get(mk).cloned().unwrap_or(Value::Null),
                        None => x.clone(),
                    }
                };
                let wanted: Vec<Value> = order.iter().map(&ident).collect();
                let mut ordered: Vec<Value> = Vec::new();
                for w in &wanted {
                    if let Some(pos) = cur.iter().position(|x| &ident(x) == w) {
                        ordered.push(cur.remove(pos));
                    }
                }
                ordered.append(cur);
                *cur = ordered;
            }
        }
    }
    Ok(orig)
}

fn strip_directives(m: &Map<String, Value>) -> Map<String, Value> {
    m.iter()
        .filter(|(k, _)| !k.starts_with('$'))
        .map(|(k, v)| (k.clone(), strip_value(v)))
        .collect()
}

fn strip_value(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(strip_directives(m)),
        Value::Array(a) => Value::Array(a.iter().map(strip_value).collect()),
        other => other.clone(),
    }
}

fn merge_list(
    mut orig: Vec<Value>,
    patch: &[Value],
    item: &'static T,
    strategy: &L,
    field: &str,
) -> Result<Vec<Value>, SmpError> {
    // `[{"$patch": "replace"}, …]` replaces the whole list.
    let replace = patch
        .iter()
        .any(|p| p.get("$patch").and_then(Value::as_str) == Some("replace"));
    if replace {
        return Ok(patch
            .iter()
            .filter(|p| p.get("$patch").is_none())
            .map(strip_value)
            .collect());
    }
    match strategy {
        L::Atomic => Ok(patch.iter().map(strip_value).collect()),
        L::Set => {
            for p in patch {
                if p.is_object() || p.is_array() {
                    return Err(SmpError::BadRequest(
                        "The patch format for primitive lists is not supported by this version of the API".into(),
                    ));
                }
                if !orig.contains(p) {
                    orig.push(p.clone());
                }
            }
            Ok(orig)
        }
        L::Map { merge_key, .. } => {
            for p in patch {
                let Value::Object(pm) = p else {
                    return Err(SmpError::Internal(format!(
                        "unable to find api field in struct {field} for the json field"
                    )));
                };
                let directive = pm.get("$patch").and_then(Value::as_str);
                let Some(key_val) = pm.get(*merge_key) else {
                    return Err(SmpError::Internal(format!(
                        "map: {} does not contain declared merge key: {merge_key}",
                        go_fmt(p)
                    )));
                };
                let pos = orig.iter().position(|o| o.get(*merge_key) == Some(key_val));
                match directive {
                    Some("delete") => {
                        orig.retain(|o| o.get(*merge_key) != Some(key_val));
                    }
                    Some("replace") => {
                        let v = Value::Object(strip_directives(pm));
                        match pos {
                            Some(i) => orig[i] = v,
                            None => orig.push(v),
                        }
                    }
                    Some(other) => {
                        return Err(SmpError::BadRequest(format!(
                            "Unknown patch type: {other} in map: {}",
                            go_fmt(p)
                        )));
                    }
                    None => match pos {
                        Some(i) => {
                            let cur = match orig[i].clone() {
                                Value::Object(o) => o,
                                _ => Map::new(),
                            };
                            orig[i] = Value::Object(merge_map(cur, pm, Some(item))?);
                        }
                        None => orig.push(Value::Object(merge_map(Map::new(), pm, Some(item))?)),
                    },
                }
            }
            Ok(orig)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn deployment() -> Value {
        json!({"spec":{"template":{"spec":{"containers":[
            {"name":"web","image":"nginx:1.25","ports":[{"containerPort":80,"protocol":"TCP"}],"env":[{"name":"A","value":"1"}]},
            {"name":"sidecar","image":"envoy:1"}
        ],"volumes":[{"name":"data","emptyDir":{}}]}}}})
    }

    #[test]
    fn containers_merge_by_name() {
        let p = json!({"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.27"}]}}}});
        let out = strategic_merge(&deployment(), &p, schema::DEPLOYMENT).unwrap();
        let cs = &out["spec"]["template"]["spec"]["containers"];
        assert_eq!(cs[0]["image"], json!("nginx:1.27"));
        assert_eq!(cs[0]["ports"][0]["containerPort"], json!(80));
        assert_eq!(cs[1]["name"], json!("sidecar"));
    }

    #[test]
    fn env_and_ports_merge_by_key_and_directives_work() {
        let p = json!({"spec":{"template":{"spec":{"containers":[{"name":"web",
            "env":[{"name":"B","value":"2"},{"name":"A","$patch":"delete"}],
            "ports":[{"containerPort":8080}]},
            {"name":"sidecar","$patch":"delete"}],
            "volumes":[{"name":"cache","emptyDir":{}}]}}}});
        let out = strategic_merge(&deployment(), &p, schema::DEPLOYMENT).unwrap();
        let cs = out["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap();
        assert_eq!(cs.len(), 1);
        assert_eq!(cs[0]["env"], json!([{"name":"B","value":"2"}]));
        assert_eq!(cs[0]["ports"].as_array().unwrap().len(), 2);
        assert_eq!(
            out["spec"]["template"]["spec"]["volumes"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn missing_merge_key_is_an_internal_error() {
        let p = json!({"spec":{"template":{"spec":{"containers":[{"image":"x"}]}}}});
        assert_eq!(
            strategic_merge(&deployment(), &p, schema::DEPLOYMENT).unwrap_err(),
            SmpError::Internal(
                "map: map[image:x] does not contain declared merge key: name".into()
            )
        );
    }

    #[test]
    fn set_element_order_and_replace() {
        let p = json!({"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"sidecar"},{"name":"web"}],"containers":[{"name":"web","image":"n"}]}}}});
        let out = strategic_merge(&deployment(), &p, schema::DEPLOYMENT).unwrap();
        assert_eq!(
            out["spec"]["template"]["spec"]["containers"][0]["name"],
            json!("sidecar")
        );
        let p = json!({"spec":{"template":{"spec":{"containers":[{"$patch":"replace"},{"name":"only","image":"i"}]}}}});
        let out = strategic_merge(&deployment(), &p, schema::DEPLOYMENT).unwrap();
        assert_eq!(
            out["spec"]["template"]["spec"]["containers"],
            json!([{"name":"only","image":"i"}])
        );
    }

    #[test]
    fn atomic_lists_are_replaced() {
        let hpa = json!({"spec":{"metrics":[{"type":"Resource"},{"type":"Pods"}]}});
        let out = strategic_merge(
            &hpa,
            &json!({"spec":{"metrics":[{"type":"External"}]}}),
            schema::HORIZONTAL_POD_AUTOSCALER,
        )
        .unwrap();
        assert_eq!(out["spec"]["metrics"], json!([{"type":"External"}]));
    }

    #[test]
    fn json_patch_ops() {
        let doc = json!({"spec":{"minReplicas":2,"list":[1,2]}});
        let out = json_patch(
            &doc,
            &[
                json!({"op":"replace","path":"/spec/minReplicas","value":3}),
                json!({"op":"add","path":"/spec/list/-","value":3}),
            ],
        )
        .unwrap();
        assert_eq!(out, json!({"spec":{"minReplicas":3,"list":[1,2,3]}}));
        assert!(
            json_patch(
                &doc,
                &[json!({"op":"test","path":"/spec/minReplicas","value":3})]
            )
            .is_err()
        );
        assert!(json_patch(&doc, &[json!({"op":"remove","path":"/spec/nope"})]).is_err());
    }

    #[test]
    fn json_patch_reads_a_missing_value_as_null_like_evanphx() {
        let doc = json!({"spec":{"minReplicas":2}});
        let out = json_patch(&doc, &[json!({"op":"add","path":"/spec/paused"})]).unwrap();
        assert_eq!(out, json!({"spec":{"minReplicas":2,"paused":null}}));
        assert!(json_patch(&doc, &[json!({"op":"move","path":"/spec/x"})]).is_err());
    }

    #[test]
    fn merge_patch_rfc7386() {
        let out = merge_patch(&json!({"a":{"b":1,"c":2}}), &json!({"a":{"b":null,"d":3}}));
        assert_eq!(out, json!({"a":{"c":2,"d":3}}));
    }
}
