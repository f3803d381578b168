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

/// A strategic merge patch failure: `BadRequest` texts are mergepatch's sentinel errors; the
/// others are plain Go errors, which the handler passes on as a 500 without a reason.
#[derive(Debug, PartialEq)]
pub enum SmpError {
    BadRequest(String),
    Internal(String),
}

/// Go's `%v` of a decoded JSON value (`map[image:nginx name:web]`).
pub fn go_fmt(v: &Value) -> String {
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
            return Err(SmpError::Internal(format!(
                "unknown patch type: {other} in map: {}",
                go_fmt(&Value::Object(patch.clone()))
            )));
        }
        None => {}
    }
    if let Some(Value::Array(keep)) = patch.get("$retainKeys") {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        orig.retain(|k, _| keep.contains(&k.as_str()));
    }
    // `$setElementOrder/<list>` first, with the list it orders (mergePatchIntoOriginal).
    let mut ordered_fields: Vec<&str> = Vec::new();
    for (k, order) in patch {
        let Some(field) = k.strip_prefix("$setElementOrder/") else {
            continue;
        };
        let Value::Array(order) = order else {
            return Err(SmpError::BadRequest(
                "invalid type for setElementOrder list".into(),
            ));
        };
        ordered_fields.push(field);
        let (item, strategy) = match field_type(ty, field) {
            Some(T::List(item, strategy)) => (Some(*item), Some(strategy)),
            _ => (None, None),
        };
        let merge_key = match strategy {
            Some(L::Map { merge_key, .. }) => Some(*merge_key),
            _ => None,
        };
        let original = match orig.get(field) {
            Some(Value::Array(a)) => Some(a.clone()),
            _ => None,
        };
        let merged = match (original.clone(), patch.get(field)) {
            (Some(o), None) => o,
            (None, Some(Value::Array(p))) => p.clone(),
            (Some(o), Some(Value::Array(p))) => match (item, strategy) {
                (Some(item), Some(strategy)) => merge_list(o, p, item, strategy, field)?,
                _ => p.clone(),
            },
            _ => continue,
        };
        let (in_order, server_only) = partition(merged, order, merge_key);
        let server_order = original.unwrap_or_default();
        orig.insert(
            field.to_string(),
            Value::Array(normalize_element_order(
                in_order,
                server_only,
                order,
                &server_order,
                merge_key,
            )),
        );
    }
    for (k, v) in patch {
        if k.starts_with('$') || ordered_fields.contains(&k.as_str()) {
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

/// The identity of a list element: its merge key's value, or the value itself.
fn ident<'a>(v: &'a Value, merge_key: Option<&str>) -> Option<&'a Value> {
    match merge_key {
        Some(mk) => v.get(mk),
        None => Some(v),
    }
}

/// `index`: where an element with the same identity is in `list`.
fn index_of(list: &[Value], item: &Value, merge_key: Option<&str>) -> Option<usize> {
    let id = ident(item, merge_key)?;
    list.iter().position(|x| ident(x, merge_key) == Some(id))
}

/// `partitionMapsByPresentInList` / `partitionPrimitivesByPresentInList`: the elements named
/// in `by`, and the others (server-only), each in `merged` order.
fn partition(
    merged: Vec<Value>,
    by: &[Value],
    merge_key: Option<&str>,
) -> (Vec<Value>, Vec<Value>) {
    merged
        .into_iter()
        .partition(|x| index_of(by, x, merge_key).is_some())
}

/// `normalizeElementOrder`: the patch's elements in the patch's order, the server-only ones in
/// the live order, then interleaved (`mergeSortedSlice`): a server-only element goes first
/// only when both are in the live list and it came first there, so elements the patch adds
/// come before the existing ones.
fn normalize_element_order(
    mut patch_items: Vec<Value>,
    mut server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: Option<&str>,
) -> Vec<Value> {
    let pos = |list: &[Value], v: &Value| index_of(list, v, merge_key).unwrap_or(usize::MAX);
    patch_items.sort_by_key(|v| pos(patch_order, v));
    server_only.sort_by_key(|v| pos(server_order, v));
    let mut out = Vec::with_capacity(patch_items.len() + server_only.len());
    let mut left = server_only.into_iter().peekable();
    let mut right = patch_items.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!(
                (index_of(server_order, l, merge_key), index_of(server_order, r, merge_key)),
                (Some(li), Some(ri)) if li < ri
            ),
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    out
}

fn merge_list(
    orig: Vec<Value>,
    patch: &[Value],
    item: &'static T,
    strategy: &L,
    field: &str,
) -> Result<Vec<Value>, SmpError> {
    if orig.is_empty() && patch.is_empty() {
        return Ok(orig);
    }
    match strategy {
        L::Atomic => {
            // `[{"$patch": "replace"}, …]` of a list without a merge strategy: the elements.
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
            Ok(patch.iter().map(strip_value).collect())
        }
        L::Set => {
            for p in patch {
                if p.is_object() || p.is_array() {
                    return Err(SmpError::BadRequest(
                        "The patch format for primitive lists is not supported by this version of the API".into(),
                    ));
                }
            }
            // deduplicateScalars(append(original, patch…)), then the patch's elements first.
            let mut merged: Vec<Value> = Vec::new();
            for v in orig.iter().chain(patch) {
                if !merged.contains(v) {
                    merged.push(v.clone());
                }
            }
            let (in_patch, server_only) = partition(merged, patch, None);
            Ok(normalize_element_order(
                in_patch,
                server_only,
                patch,
                &orig,
                None,
            ))
        }
        L::Map { merge_key, .. } => {
            // mergeSliceWithSpecialElements: `$patch: delete` elements remove, `replace`
            // replaces the list by the other elements.
            let mut orig = orig;
            let mut items: Vec<&Value> = Vec::new();
            let mut replace = false;
            // sliceElementType: every element of both lists of one Go type.
            let kind = |v: &Value| std::mem::discriminant(v);
            if let Some(first) = orig.iter().chain(patch.iter()).next()
                && orig
                    .iter()
                    .chain(patch.iter())
                    .any(|v| kind(v) != kind(first))
            {
                return Err(SmpError::Internal(format!(
                    "list element types are not identical: [{} {}]",
                    go_fmt(&Value::Array(orig.clone())),
                    go_fmt(&Value::Array(patch.to_vec()))
                )));
            }
            for p in patch {
                let Value::Object(pm) = p else {
                    return Err(SmpError::Internal(format!(
                        "unable to find api field in struct {field} for the json field"
                    )));
                };
                match pm.get("$patch").and_then(Value::as_str) {
                    None => items.push(p),
                    Some("delete") => {
                        let Some(key_val) = pm.get(*merge_key) else {
                            return Err(SmpError::Internal(format!(
                                "map: {} does not contain declared merge key: {merge_key}",
                                go_fmt(p)
                            )));
                        };
                        orig.retain(|o| o.get(*merge_key) != Some(key_val));
                    }
                    Some("replace") => replace = true,
                    Some("merge") => {
                        return Err(SmpError::Internal(
                            "merging lists cannot yet be specified in the patch".into(),
                        ));
                    }
                    Some(other) => {
                        return Err(SmpError::Internal(format!(
                            "unknown patch type: {other} in map: {}",
                            go_fmt(p)
                        )));
                    }
                }
            }
            if replace {
                return Ok(items.into_iter().map(strip_value).collect());
            }
            let server_order = orig.clone();
            let mut merged = orig;
            // mergeSliceWithoutSpecialElements: merge into the element with the same key, or
            // append.
            for p in &items {
                let Some(key_val) = p.get(*merge_key) else {
                    return Err(SmpError::Internal(format!(
                        "map: {} does not contain declared merge key: {merge_key}",
                        go_fmt(p)
                    )));
                };
                let pm = p.as_object().cloned().unwrap_or_default();
                match merged
                    .iter()
                    .position(|o| o.get(*merge_key) == Some(key_val))
                {
                    Some(i) => {
                        let cur = match merged[i].clone() {
                            Value::Object(o) => o,
                            _ => Map::new(),
                        };
                        merged[i] = Value::Object(merge_map(cur, &pm, Some(item))?);
                    }
                    None => merged.push(Value::Object(merge_map(Map::new(), &pm, Some(item))?)),
                }
            }
            let patch_order: Vec<Value> = items.into_iter().cloned().collect();
            let (in_patch, server_only) = partition(merged, &patch_order, Some(merge_key));
            Ok(normalize_element_order(
                in_patch,
                server_only,
                &patch_order,
                &server_order,
                Some(merge_key),
            ))
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
    fn elements_the_patch_adds_come_before_the_existing_ones() {
        let orig = json!({"spec":{"template":{"spec":{"containers":[
            {"name":"sidecar"},{"name":"app"},{"name":"proxy"}]}}}});
        let p = json!({"spec":{"template":{"spec":{"containers":[
            {"name":"zeta"},{"name":"app","image":"x"},{"name":"alpha"}]}}}});
        let out = strategic_merge(&orig, &p, schema::DEPLOYMENT).unwrap();
        let names: Vec<&str> = out["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["zeta", "sidecar", "app", "alpha", "proxy"]);
        let fin = strategic_merge(
            &json!({"metadata":{"finalizers":["a"]}}),
            &json!({"metadata":{"finalizers":["b","a"]}}),
            schema::DEPLOYMENT,
        )
        .unwrap();
        assert_eq!(fin["metadata"]["finalizers"], json!(["b", "a"]));
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
