//! Validation every kind's strategy shares: ObjectMeta (`ValidateObjectMeta`,
//! `ValidateObjectMetaUpdate`), labels, annotations, label selectors, and Go's `%v`/`%#v` of an
//! invalid value.

use serde_json::{Map, Value};

use crate::model::ApiResource;
use crate::model::names::{
    NameRule, is_dns1123_label, is_qualified_name, is_valid_label_value, name_errors,
};
use crate::model::status::{FieldError, go_quote};

/// `v[key]` as a string, `""` when absent.
pub(super) fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// `v[key]` as an object.
pub(super) fn obj<'a>(v: &'a Value, key: &str) -> Option<&'a Map<String, Value>> {
    v.get(key).and_then(Value::as_object)
}

/// `v[key]` as an array, empty when absent.
pub(super) fn arr<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Go's `%v` of a scalar JSON value (for `Invalid value: …`).
pub(super) fn bad_value(v: &Value) -> String {
    match v {
        Value::String(s) => go_quote(s),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

/// The `Invalid value` text of a `map[string]string`, as `%#v` prints it.
pub(super) fn go_string_map(m: &Map<String, Value>) -> String {
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    let items: Vec<String> = keys
        .iter()
        .map(|k| {
            format!(
                "{}:{}",
                go_quote(k),
                go_quote(m.get(*k).and_then(Value::as_str).unwrap_or(""))
            )
        })
        .collect();
    format!("map[string]string{{{}}}", items.join(", "))
}

/// `ValidateLabels`.
pub fn validate_labels(labels: Option<&Map<String, Value>>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(labels) = labels else { return errs };
    let mut keys: Vec<&String> = labels.keys().collect();
    keys.sort();
    for k in keys {
        for m in is_qualified_name(k) {
            errs.push(FieldError::invalid(path, &go_quote(k), &m));
        }
        let v = labels.get(k).and_then(Value::as_str).unwrap_or("");
        for m in is_valid_label_value(v) {
            errs.push(FieldError::invalid(path, &go_quote(v), &m));
        }
    }
    errs
}

/// `ValidateAnnotations`: qualified keys, 256 KiB in total.
pub(super) fn validate_annotations(
    ann: Option<&Map<String, Value>>,
    path: &str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(ann) = ann else { return errs };
    let mut total = 0usize;
    let mut keys: Vec<&String> = ann.keys().collect();
    keys.sort();
    for k in keys {
        for m in is_qualified_name(&k.to_lowercase()) {
            errs.push(FieldError::invalid(path, &go_quote(k), &m));
        }
        total += k.len()
            + ann
                .get(k)
                .and_then(Value::as_str)
                .map(str::len)
                .unwrap_or(0);
    }
    if total > 256 * 1024 {
        errs.push(FieldError::too_long(path, 256 * 1024));
    }
    errs
}

/// `ValidateObjectMeta`.
pub fn object_meta(r: &ApiResource, name_rule: NameRule, meta: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let gen_name = s(meta, "generateName");
    if !gen_name.is_empty() {
        for m in name_errors(name_rule, gen_name, true) {
            errs.push(FieldError::invalid(
                "metadata.generateName",
                &go_quote(gen_name),
                &m,
            ));
        }
    }
    let name = s(meta, "name");
    if name.is_empty() {
        errs.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        for m in name_errors(name_rule, name, false) {
            errs.push(FieldError::invalid("metadata.name", &go_quote(name), &m));
        }
    }
    let ns = s(meta, "namespace");
    if r.namespaced {
        if ns.is_empty() {
            errs.push(FieldError::required("metadata.namespace", ""));
        } else {
            for m in is_dns1123_label(ns) {
                errs.push(FieldError::invalid("metadata.namespace", &go_quote(ns), &m));
            }
        }
    } else if !ns.is_empty() {
        errs.push(FieldError::forbidden(
            "metadata.namespace",
            "not allowed on this type",
        ));
    }
    if let Some(g) = meta.get("generation").and_then(Value::as_i64)
        && g < 0
    {
        errs.push(FieldError::invalid(
            "metadata.generation",
            &g.to_string(),
            "must be greater than or equal to 0",
        ));
    }
    errs.extend(validate_labels(obj(meta, "labels"), "metadata.labels"));
    errs.extend(validate_annotations(
        obj(meta, "annotations"),
        "metadata.annotations",
    ));
    for (i, f) in arr(meta, "finalizers").iter().enumerate() {
        let f = f.as_str().unwrap_or("");
        for m in is_qualified_name(f) {
            errs.push(FieldError::invalid(
                format!("metadata.finalizers[{i}]"),
                &go_quote(f),
                &m,
            ));
        }
    }
    errs
}

/// `ValidateObjectMetaUpdate` (the parts a client can get wrong).
pub fn object_meta_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for field in ["uid", "creationTimestamp"] {
        let (a, b) = (new.get(field), old.get(field));
        if a != b {
            let shown = a.map(bad_value).unwrap_or_else(|| "\"\"".into());
            errs.push(FieldError::invalid(
                format!("metadata.{field}"),
                &shown,
                "field is immutable",
            ));
        }
    }
    errs
}

pub(super) fn validate_nonnegative(v: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(n) = v.and_then(Value::as_i64)
        && n < 0
    {
        errs.push(FieldError::invalid(
            path,
            &n.to_string(),
            "must be greater than or equal to 0",
        ));
    }
}

pub(super) fn label_selector_is_empty(sel: &Value) -> bool {
    obj(sel, "matchLabels").is_none_or(Map::is_empty) && arr(sel, "matchExpressions").is_empty()
}

/// Does `labels` satisfy the LabelSelector `sel`?
pub fn selector_matches(sel: &Value, labels: Option<&Map<String, Value>>) -> bool {
    let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    if let Some(ml) = obj(sel, "matchLabels") {
        for (k, v) in ml {
            if get(k) != v.as_str() {
                return false;
            }
        }
    }
    for e in arr(sel, "matchExpressions") {
        let key = s(e, "key");
        let values: Vec<&str> = arr(e, "values").iter().filter_map(Value::as_str).collect();
        let ok = match s(e, "operator") {
            "In" => get(key).is_some_and(|v| values.contains(&v)),
            "NotIn" => get(key).is_none_or(|v| !values.contains(&v)),
            "Exists" => get(key).is_some(),
            "DoesNotExist" => get(key).is_none(),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

pub(super) fn go_label_selector(sel: &Value) -> String {
    let ml = obj(sel, "matchLabels")
        .map(go_string_map)
        .unwrap_or_else(|| "map[string]string(nil)".into());
    let me = if arr(sel, "matchExpressions").is_empty() {
        "[]v1.LabelSelectorRequirement(nil)".to_string()
    } else {
        "[]v1.LabelSelectorRequirement{...}".to_string()
    };
    format!("v1.LabelSelector{{MatchLabels:{ml}, MatchExpressions:{me}}}")
}

pub(super) fn validate_label_selector(sel: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = validate_labels(obj(sel, "matchLabels"), &format!("{path}.matchLabels"));
    for (i, e) in arr(sel, "matchExpressions").iter().enumerate() {
        let p = format!("{path}.matchExpressions[{i}]");
        let op = s(e, "operator");
        let n = arr(e, "values").len();
        match op {
            "In" | "NotIn" => {
                if n == 0 {
                    errs.push(FieldError::required(
                        format!("{p}.values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            "Exists" | "DoesNotExist" => {
                if n > 0 {
                    errs.push(FieldError::forbidden(
                        format!("{p}.values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ));
                }
            }
            other => errs.push(FieldError::invalid(
                format!("{p}.operator"),
                &go_quote(other),
                "not a valid selector operator",
            )),
        }
        for m in is_qualified_name(s(e, "key")) {
            errs.push(FieldError::invalid(
                format!("{p}.key"),
                &go_quote(s(e, "key")),
                &m,
            ));
        }
    }
    errs
}

pub(super) fn go_string_slice(v: &Value) -> String {
    let items: Vec<String> = v
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| go_quote(x.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    format!("[]string{{{}}}", items.join(", "))
}
