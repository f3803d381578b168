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
    errs.extend(owner_references(meta));
    errs.extend(finalizers(meta));
    errs
}

/// `ValidateFinalizers`: qualified names (reported on the list, without an index), and not
/// both `orphan` and `foregroundDeletion`.
fn finalizers(meta: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let list = arr(meta, "finalizers");
    for f in list {
        let f = f.as_str().unwrap_or("");
        for m in is_qualified_name(f) {
            errs.push(FieldError::invalid("metadata.finalizers", &go_quote(f), &m));
        }
    }
    let has = |x: &str| list.iter().any(|f| f == x);
    if has("orphan") && has("foregroundDeletion") {
        errs.push(FieldError::invalid(
            "metadata.finalizers",
            &go_string_slice(&Value::Array(list.to_vec())),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
    errs
}

/// The finalizer check built-in kinds add (`validateKubeFinalizerName`): a name without a `/`
/// must be one of the standard ones.
pub fn kube_finalizers(meta: &Value) -> Vec<FieldError> {
    arr(meta, "finalizers")
        .iter()
        .enumerate()
        .filter_map(|(i, f)| {
            let f = f.as_str().unwrap_or("");
            (!f.contains('/') && !["kubernetes", "orphan", "foregroundDeletion"].contains(&f)).then(
                || {
                    FieldError::invalid(
                        format!("metadata.finalizers[{i}]"),
                        &go_quote(f),
                        "name is neither a standard finalizer name nor is it fully qualified",
                    )
                },
            )
        })
        .collect()
}

/// `ValidateOwnerReferences`: version, kind, name and uid present; one controller at most.
fn owner_references(meta: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let refs = arr(meta, "ownerReferences");
    let mut first_controller: Option<String> = None;
    for r in refs {
        let api_version = s(r, "apiVersion");
        // schema.FromAPIVersionAndKind: no version when apiVersion does not parse.
        let version = match api_version.split('/').collect::<Vec<_>>().as_slice() {
            [v] => *v,
            [_, v] => *v,
            _ => "",
        };
        let p = "metadata.ownerReferences";
        if version.is_empty() {
            errs.push(FieldError::invalid(
                format!("{p}.apiVersion"),
                &go_quote(api_version),
                "version must not be empty",
            ));
        }
        if s(r, "kind").is_empty() {
            errs.push(FieldError::invalid(
                format!("{p}.kind"),
                "\"\"",
                "kind must not be empty",
            ));
        }
        if s(r, "name").is_empty() {
            errs.push(FieldError::invalid(
                format!("{p}.name"),
                "\"\"",
                "name must not be empty",
            ));
        }
        if s(r, "uid").is_empty() {
            errs.push(FieldError::invalid(
                format!("{p}.uid"),
                "\"\"",
                "uid must not be empty",
            ));
        }
        if r.get("controller").and_then(Value::as_bool) == Some(true) {
            let this = format!("{}/{}", s(r, "kind"), s(r, "name"));
            match &first_controller {
                Some(first) => errs.push(FieldError::invalid(
                    p,
                    &go_owner_references(refs),
                    &format!(
                        "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {this}"
                    ),
                )),
                None => first_controller = Some(this),
            }
        }
    }
    errs
}

/// `%#v` of `[]metav1.OwnerReference` (pointers as Go prints them: some address, or nil).
fn go_owner_references(refs: &[Value]) -> String {
    let ptr = |v: Option<&Value>, i: usize, j: usize| match v.and_then(Value::as_bool) {
        Some(_) => format!("(*bool)(0xc000{:06x})", 0x1000 + i * 0x20 + j * 0x10),
        None => "(*bool)(nil)".to_string(),
    };
    let items: Vec<String> = refs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            format!(
                "v1.OwnerReference{{APIVersion:{}, Kind:{}, Name:{}, UID:{}, Controller:{}, BlockOwnerDeletion:{}}}",
                go_quote(s(r, "apiVersion")),
                go_quote(s(r, "kind")),
                go_quote(s(r, "name")),
                go_quote(s(r, "uid")),
                ptr(r.get("controller"), i, 0),
                ptr(r.get("blockOwnerDeletion"), i, 1),
            )
        })
        .collect();
    format!("[]v1.OwnerReference{{{}}}", items.join(", "))
}

/// `ValidateObjectMetaAccessorUpdate`: no new finalizers while deleting, the fields that never
/// change, then labels, annotations and owner references of the new object.
pub fn object_meta_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if old.get("deletionTimestamp").is_some_and(|t| !t.is_null()) {
        let old_f = arr(old, "finalizers");
        let mut extra: Vec<&str> = arr(new, "finalizers")
            .iter()
            .filter(|f| !old_f.contains(f))
            .filter_map(Value::as_str)
            .collect();
        extra.sort();
        extra.dedup();
        if !extra.is_empty() {
            let shown: Vec<String> = extra.iter().map(|f| go_quote(f)).collect();
            errs.push(FieldError::forbidden(
                "metadata.finalizers",
                &format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                    shown.join(", ")
                ),
            ));
        }
    }
    for field in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ] {
        let (a, b) = (
            new.get(field).filter(|v| !v.is_null()),
            old.get(field).filter(|v| !v.is_null()),
        );
        if a != b {
            let shown = match (field, a) {
                (_, None) if matches!(field, "name" | "namespace" | "uid") => "\"\"".to_string(),
                (_, None) => "null".to_string(),
                ("creationTimestamp" | "deletionTimestamp", Some(Value::String(t))) => {
                    crate::model::time::go_string(t).unwrap_or_else(|| t.clone())
                }
                (_, Some(v)) => bad_value(v),
            };
            errs.push(FieldError::invalid(
                format!("metadata.{field}"),
                &shown,
                "field is immutable",
            ));
        }
    }
    errs.extend(validate_labels(obj(new, "labels"), "metadata.labels"));
    errs.extend(validate_annotations(
        obj(new, "annotations"),
        "metadata.annotations",
    ));
    errs.extend(owner_references(new));
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
