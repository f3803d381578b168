//! Field validation with the messages of k8s.io/apimachinery/pkg/util/validation and the v1.28
//! registry strategies of the served kinds.

use serde_json::{Map, Value};

use crate::kinds::Kind;
use crate::status::{FieldError, go_quote};

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";

/// `validation.RegexError`.
pub fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut s = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push_str(&format!("'{e}', "));
    }
    s.push_str(&format!("regex used for validation is '{fmt}')"));
    s
}

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

fn is_alnum(c: u8) -> bool {
    c.is_ascii_alphanumeric()
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn matches_qualified_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && is_alnum(b[0])
        && is_alnum(b[b.len() - 1])
        && b.iter()
            .all(|&c| is_alnum(c) || c == b'-' || c == b'_' || c == b'.')
}

fn matches_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && (b[b.len() - 1].is_ascii_lowercase() || b[b.len() - 1].is_ascii_digit())
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
}

fn matches_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty() && s.split('.').all(matches_dns1123_label)
}

/// `IsQualifiedName` (label keys, annotation keys).
pub fn is_qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.len() {
        1 => parts[0],
        2 => {
            let prefix = parts[0];
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                for m in is_dns1123_subdomain(prefix) {
                    errs.push(format!("prefix part {m}"));
                }
            }
            parts[1]
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_error(63)));
    }
    if !matches_qualified_name(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_MSG,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// `IsValidLabelValue`.
pub fn is_valid_label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !value.is_empty() && !matches_qualified_name(value) {
        errs.push(regex_error(
            LABEL_VALUE_MSG,
            &format!("({QUALIFIED_NAME_FMT})?"),
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push(max_len_error(253));
    }
    if !matches_dns1123_subdomain(value) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_MSG,
            &format!("{DNS1123_LABEL_FMT}(\\.{DNS1123_LABEL_FMT})*"),
            &["example.com"],
        ));
    }
    errs
}

pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !matches_dns1123_label(value) {
        if matches_dns1123_subdomain(value) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(
                DNS1123_LABEL_MSG,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

pub fn is_dns1035_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    let b = value.as_bytes();
    let ok = !b.is_empty()
        && b[0].is_ascii_lowercase()
        && (b[b.len() - 1].is_ascii_lowercase() || b[b.len() - 1].is_ascii_digit())
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-');
    if !ok {
        errs.push(regex_error(
            DNS1035_LABEL_MSG,
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// `IsValidPortName` (IANA_SVC_NAME).
fn is_valid_port_name(port: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if port.len() > 15 {
        errs.push(max_len_error(15));
    }
    let b = port.as_bytes();
    if !b
        .iter()
        .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
    {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !b.iter().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".into());
    }
    if port.contains("--") {
        errs.push("must not contain consecutive hyphens".into());
    }
    if port.starts_with('-') || port.ends_with('-') {
        errs.push("must not begin or end with a hyphen".into());
    }
    errs
}

fn port_range_msg() -> &'static str {
    "must be between 1 and 65535, inclusive"
}

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn obj<'a>(v: &'a Value, key: &str) -> Option<&'a Map<String, Value>> {
    v.get(key).and_then(Value::as_object)
}

fn arr<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Go's `%v` of a scalar JSON value (for `Invalid value: …`).
fn bad_value(v: &Value) -> String {
    match v {
        Value::String(s) => go_quote(s),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

/// The `Invalid value` text of a `map[string]string`, as `%#v` prints it.
fn go_string_map(m: &Map<String, Value>) -> String {
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

fn validate_annotations(ann: Option<&Map<String, Value>>, path: &str) -> Vec<FieldError> {
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

/// Which name rule a kind applies to `metadata.name`.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum NameRule {
    Dns1123Subdomain,
    Dns1123Label,
    Dns1035Label,
}

fn name_errors(rule: NameRule, name: &str, prefix: bool) -> Vec<String> {
    let name = if prefix {
        name.trim_end_matches('-')
    } else {
        name
    };
    let name = if prefix && name.is_empty() { "a" } else { name };
    match rule {
        NameRule::Dns1123Subdomain => is_dns1123_subdomain(name),
        NameRule::Dns1123Label => is_dns1123_label(name),
        NameRule::Dns1035Label => is_dns1035_label(name),
    }
}

/// `ValidateObjectMeta`.
pub fn validate_object_meta(k: &Kind, meta: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let gen_name = s(meta, "generateName");
    if !gen_name.is_empty() {
        for m in name_errors(k.name_rule, gen_name, true) {
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
        for m in name_errors(k.name_rule, name, false) {
            errs.push(FieldError::invalid("metadata.name", &go_quote(name), &m));
        }
    }
    let ns = s(meta, "namespace");
    if k.namespaced {
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
pub fn validate_object_meta_update(new: &Value, old: &Value) -> Vec<FieldError> {
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

// ---------------------------------------------------------------------------------------------
// Per-kind validation. `obj` is the canonical object (kind/apiVersion stripped), `old` the stored
// one on update.

pub fn validate(k: &Kind, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let meta = obj.get("metadata").unwrap_or(&Value::Null);
    let mut errs = validate_object_meta(k, meta);
    if let Some(old) = old {
        errs.extend(validate_object_meta_update(
            meta,
            old.get("metadata").unwrap_or(&Value::Null),
        ));
    }
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let old_spec = old.and_then(|o| o.get("spec"));
    match k.kind {
        "Deployment" => errs.extend(validate_deployment_spec(spec, old_spec)),
        "Service" => errs.extend(validate_service_spec(spec, old_spec)),
        "HorizontalPodAutoscaler" => errs.extend(validate_hpa_spec(spec)),
        "Ingress" => errs.extend(validate_ingress_spec(spec)),
        _ => {}
    }
    errs
}

fn validate_nonnegative(v: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
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

fn label_selector_is_empty(sel: &Value) -> bool {
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

fn go_label_selector(sel: &Value) -> String {
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

fn validate_label_selector(sel: &Value, path: &str) -> Vec<FieldError> {
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

fn int_or_percent(v: &Value) -> Option<(i64, bool)> {
    match v {
        Value::Number(n) => n.as_i64().map(|i| (i, false)),
        Value::String(s) => s
            .strip_suffix('%')
            .and_then(|p| p.parse().ok())
            .map(|i| (i, true)),
        _ => None,
    }
}

fn validate_deployment_spec(spec: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate_nonnegative(spec.get("replicas"), "spec.replicas", &mut errs);
    let sel = spec.get("selector").unwrap_or(&Value::Null);
    if sel.is_null() {
        errs.push(FieldError::required("spec.selector", ""));
    } else {
        errs.extend(validate_label_selector(sel, "spec.selector"));
        if label_selector_is_empty(sel) {
            errs.push(FieldError::invalid(
                "spec.selector",
                &go_label_selector(sel),
                "empty selector is invalid for deployment",
            ));
        }
    }
    let template = spec.get("template").unwrap_or(&Value::Null);
    let tmeta = template.get("metadata").unwrap_or(&Value::Null);
    let tlabels = obj(tmeta, "labels");
    if !sel.is_null() && !label_selector_is_empty(sel) && !selector_matches(sel, tlabels) {
        let shown = tlabels
            .map(go_string_map)
            .unwrap_or_else(|| "map[string]string(nil)".into());
        errs.push(FieldError::invalid(
            "spec.template.metadata.labels",
            &shown,
            "`selector` does not match template `labels`",
        ));
    }
    errs.extend(validate_labels(tlabels, "spec.template.metadata.labels"));
    errs.extend(validate_annotations(
        obj(tmeta, "annotations"),
        "spec.template.metadata.annotations",
    ));
    let pod = template.get("spec").unwrap_or(&Value::Null);
    errs.extend(validate_pod_spec(pod, "spec.template.spec", true));
    // strategy
    let strategy = spec.get("strategy").unwrap_or(&Value::Null);
    match s(strategy, "type") {
        "Recreate" => {
            if strategy.get("rollingUpdate").is_some() {
                errs.push(FieldError::forbidden(
                    "spec.strategy.rollingUpdate",
                    "may not be specified when strategy `type` is 'Recreate'",
                ));
            }
        }
        "RollingUpdate" => {
            let ru = strategy.get("rollingUpdate").unwrap_or(&Value::Null);
            let mut zero_unavailable = false;
            let mut zero_surge = false;
            for (field, flag) in [
                ("maxUnavailable", &mut zero_unavailable),
                ("maxSurge", &mut zero_surge),
            ] {
                let p = format!("spec.strategy.rollingUpdate.{field}");
                if let Some(v) = ru.get(field) {
                    match int_or_percent(v) {
                        Some((n, pct)) => {
                            if n < 0 {
                                errs.push(FieldError::invalid(&p, &bad_value(v), "must be greater than or equal to 0"));
                            }
                            if pct && n > 100 && field == "maxUnavailable" {
                                errs.push(FieldError::invalid(&p, &bad_value(v), "must not be greater than 100%"));
                            }
                            *flag = n == 0;
                        }
                        None => errs.push(FieldError::invalid(&p, &bad_value(v), "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")),
                    }
                }
            }
            if zero_unavailable && zero_surge {
                let v = ru.get("maxUnavailable").map(bad_value).unwrap_or_default();
                errs.push(FieldError::invalid(
                    "spec.strategy.rollingUpdate.maxUnavailable",
                    &v,
                    "may not be 0 when `maxSurge` is 0",
                ));
            }
        }
        "" => errs.push(FieldError::required("spec.strategy.type", "")),
        other => errs.push(FieldError::not_supported(
            "spec.strategy.type",
            &go_quote(other),
            &["Recreate", "RollingUpdate"],
        )),
    }
    validate_nonnegative(
        spec.get("revisionHistoryLimit"),
        "spec.revisionHistoryLimit",
        &mut errs,
    );
    validate_nonnegative(
        spec.get("minReadySeconds"),
        "spec.minReadySeconds",
        &mut errs,
    );
    if let Some(pds) = spec.get("progressDeadlineSeconds").and_then(Value::as_i64) {
        validate_nonnegative(
            spec.get("progressDeadlineSeconds"),
            "spec.progressDeadlineSeconds",
            &mut errs,
        );
        let mrs = spec
            .get("minReadySeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if pds <= mrs {
            errs.push(FieldError::invalid(
                "spec.progressDeadlineSeconds",
                &pds.to_string(),
                "must be greater than minReadySeconds",
            ));
        }
    }
    if let Some(old) = old
        && let Some(old_sel) = old.get("selector")
        && old_sel != sel
        && !sel.is_null()
    {
        errs.push(FieldError::invalid(
            "spec.selector",
            &go_label_selector(sel),
            "field is immutable",
        ));
    }
    errs
}

/// `<p>.name` of a volume or container: required, a DNS-1123 label, unique among its siblings
/// (`seen`, to which it is added).
fn unique_label_name<'a>(
    name: &'a str,
    p: &str,
    seen: &mut Vec<&'a str>,
    errs: &mut Vec<FieldError>,
) {
    if name.is_empty() {
        errs.push(FieldError::required(format!("{p}.name"), ""));
        return;
    }
    for m in is_dns1123_label(name) {
        errs.push(FieldError::invalid(
            format!("{p}.name"),
            &go_quote(name),
            &m,
        ));
    }
    if seen.contains(&name) {
        errs.push(FieldError::duplicate(format!("{p}.name"), &go_quote(name)));
    }
    seen.push(name);
}

fn validate_pod_spec(pod: &Value, path: &str, template: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut volume_names: Vec<&str> = Vec::new();
    for (i, v) in arr(pod, "volumes").iter().enumerate() {
        let p = format!("{path}.volumes[{i}]");
        unique_label_name(s(v, "name"), &p, &mut volume_names, &mut errs);
    }
    let containers = arr(pod, "containers");
    if containers.is_empty() {
        errs.push(FieldError::required(format!("{path}.containers"), ""));
    }
    let mut names: Vec<&str> = Vec::new();
    for (i, c) in arr(pod, "initContainers").iter().enumerate() {
        errs.extend(validate_container(
            c,
            &format!("{path}.initContainers[{i}]"),
            &mut names,
            &volume_names,
        ));
    }
    for (i, c) in containers.iter().enumerate() {
        errs.extend(validate_container(
            c,
            &format!("{path}.containers[{i}]"),
            &mut names,
            &volume_names,
        ));
    }
    let rp = s(pod, "restartPolicy");
    if template && rp != "Always" {
        errs.push(FieldError::not_supported(
            format!("{path}.restartPolicy"),
            &go_quote(rp),
            &["Always"],
        ));
    }
    let dns = s(pod, "dnsPolicy");
    if !["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"].contains(&dns) {
        errs.push(FieldError::not_supported(
            format!("{path}.dnsPolicy"),
            &go_quote(dns),
            &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
        ));
    }
    validate_nonnegative(
        pod.get("terminationGracePeriodSeconds"),
        &format!("{path}.terminationGracePeriodSeconds"),
        &mut errs,
    );
    errs
}

fn validate_container<'a>(
    c: &'a Value,
    p: &str,
    names: &mut Vec<&'a str>,
    volumes: &[&str],
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    unique_label_name(s(c, "name"), p, names, &mut errs);
    let image = s(c, "image");
    if image.is_empty() {
        errs.push(FieldError::required(format!("{p}.image"), ""));
    } else if image.trim() != image {
        errs.push(FieldError::invalid(
            format!("{p}.image"),
            &go_quote(image),
            "must not have leading or trailing whitespace",
        ));
    }
    let mut port_names: Vec<&str> = Vec::new();
    for (j, port) in arr(c, "ports").iter().enumerate() {
        let pp = format!("{p}.ports[{j}]");
        let pname = s(port, "name");
        if !pname.is_empty() {
            for m in is_valid_port_name(pname) {
                errs.push(FieldError::invalid(
                    format!("{pp}.name"),
                    &go_quote(pname),
                    &m,
                ));
            }
            if port_names.contains(&pname) {
                errs.push(FieldError::duplicate(
                    format!("{pp}.name"),
                    &go_quote(pname),
                ));
            }
            port_names.push(pname);
        }
        let cp = port
            .get("containerPort")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if cp == 0 {
            errs.push(FieldError::required(format!("{pp}.containerPort"), ""));
        } else if !(1..=65535).contains(&cp) {
            errs.push(FieldError::invalid(
                format!("{pp}.containerPort"),
                &cp.to_string(),
                port_range_msg(),
            ));
        }
        if let Some(hp) = port.get("hostPort").and_then(Value::as_i64)
            && hp != 0
            && !(1..=65535).contains(&hp)
        {
            errs.push(FieldError::invalid(
                format!("{pp}.hostPort"),
                &hp.to_string(),
                port_range_msg(),
            ));
        }
        let proto = s(port, "protocol");
        if !["SCTP", "TCP", "UDP"].contains(&proto) {
            errs.push(FieldError::not_supported(
                format!("{pp}.protocol"),
                &go_quote(proto),
                &["SCTP", "TCP", "UDP"],
            ));
        }
    }
    for (j, e) in arr(c, "env").iter().enumerate() {
        let ep = format!("{p}.env[{j}]");
        let n = s(e, "name");
        if n.is_empty() {
            errs.push(FieldError::required(format!("{ep}.name"), ""));
        } else {
            let b = n.as_bytes();
            let ok = !b[0].is_ascii_digit()
                && b.iter().all(|&ch| {
                    ch.is_ascii_alphanumeric() || ch == b'_' || ch == b'-' || ch == b'.'
                });
            if !ok {
                errs.push(FieldError::invalid(
                    format!("{ep}.name"),
                    &go_quote(n),
                    &regex_error(
                        "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit",
                        "[-._a-zA-Z][-._a-zA-Z0-9]*",
                        &["my.env-name", "MY_ENV.NAME", "MyEnvName1"],
                    ),
                ));
            }
        }
        if e.get("value")
            .is_some_and(|v| v.as_str().is_some_and(|s| !s.is_empty()))
            && e.get("valueFrom").is_some()
        {
            errs.push(FieldError::invalid(
                format!("{ep}.valueFrom"),
                "\"\"",
                "may not be specified when `value` is not empty",
            ));
        }
    }
    for (j, m) in arr(c, "volumeMounts").iter().enumerate() {
        let n = s(m, "name");
        if !volumes.contains(&n) {
            errs.push(FieldError {
                cause: "FieldValueNotFound",
                field: format!("{p}.volumeMounts[{j}].name"),
                body: format!("Not found: {}", go_quote(n)),
            });
        }
        if s(m, "mountPath").is_empty() {
            errs.push(FieldError::required(
                format!("{p}.volumeMounts[{j}].mountPath"),
                "",
            ));
        }
    }
    let ipp = s(c, "imagePullPolicy");
    if !["Always", "IfNotPresent", "Never"].contains(&ipp) {
        errs.push(FieldError::not_supported(
            format!("{p}.imagePullPolicy"),
            &go_quote(ipp),
            &["Always", "IfNotPresent", "Never"],
        ));
    }
    let tmp = s(c, "terminationMessagePolicy");
    if !["File", "FallbackToLogsOnError"].contains(&tmp) {
        errs.push(FieldError::not_supported(
            format!("{p}.terminationMessagePolicy"),
            &go_quote(tmp),
            &["File", "FallbackToLogsOnError"],
        ));
    }
    for (res_kind, res) in ["limits", "requests"]
        .iter()
        .filter_map(|k| c.get("resources").and_then(|r| obj(r, k)).map(|m| (*k, m)))
    {
        for (name, q) in res {
            if let Some(q) = q.as_str()
                && q.starts_with('-')
            {
                errs.push(FieldError::invalid(
                    format!("{p}.resources.{res_kind}[{name}]"),
                    &go_quote(q),
                    "must be greater than or equal to 0",
                ));
            }
        }
    }
    if let (Some(limits), Some(requests)) = (
        c.get("resources").and_then(|r| obj(r, "limits")),
        c.get("resources").and_then(|r| obj(r, "requests")),
    ) {
        for (name, req) in requests {
            let (Some(req_s), Some(lim)) = (req.as_str(), limits.get(name).and_then(Value::as_str))
            else {
                continue;
            };
            if let (Some(a), Some(b)) =
                (crate::quantity::to_f64(req_s), crate::quantity::to_f64(lim))
                && a > b
            {
                errs.push(FieldError::invalid(
                    format!("{p}.resources.requests"),
                    &go_quote(req_s),
                    &format!("must be less than or equal to {name} limit of {lim}"),
                ));
            }
        }
    }
    errs
}

fn validate_service_spec(spec: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let ty = s(spec, "type");
    let headless = s(spec, "clusterIP") == "None";
    let ports = arr(spec, "ports");
    if !["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"].contains(&ty) {
        errs.push(FieldError::not_supported(
            "spec.type",
            &go_quote(ty),
            &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"],
        ));
    }
    if ports.is_empty() && !headless && ty != "ExternalName" {
        errs.push(FieldError::required("spec.ports", ""));
    }
    if ty == "ExternalName" {
        let en = s(spec, "externalName");
        if en.is_empty() {
            errs.push(FieldError::required("spec.externalName", ""));
        }
    }
    let mut names: Vec<&str> = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let p = format!("spec.ports[{i}]");
        let name = s(port, "name");
        if ports.len() > 1 && name.is_empty() {
            errs.push(FieldError::required(format!("{p}.name"), ""));
        } else if !name.is_empty() {
            for m in is_dns1123_label(name) {
                errs.push(FieldError::invalid(
                    format!("{p}.name"),
                    &go_quote(name),
                    &m,
                ));
            }
            if names.contains(&name) {
                errs.push(FieldError::duplicate(format!("{p}.name"), &go_quote(name)));
            }
            names.push(name);
        }
        let n = port.get("port").and_then(Value::as_i64).unwrap_or(0);
        if !(1..=65535).contains(&n) {
            errs.push(FieldError::invalid(
                format!("{p}.port"),
                &n.to_string(),
                port_range_msg(),
            ));
        }
        let proto = s(port, "protocol");
        if !["SCTP", "TCP", "UDP"].contains(&proto) {
            errs.push(FieldError::not_supported(
                format!("{p}.protocol"),
                &go_quote(proto),
                &["SCTP", "TCP", "UDP"],
            ));
        }
        match port.get("targetPort") {
            Some(Value::Number(t)) => {
                let t = t.as_i64().unwrap_or(0);
                if !(1..=65535).contains(&t) {
                    errs.push(FieldError::invalid(
                        format!("{p}.targetPort"),
                        &t.to_string(),
                        port_range_msg(),
                    ));
                }
            }
            Some(Value::String(t)) => {
                for m in is_valid_port_name(t) {
                    errs.push(FieldError::invalid(
                        format!("{p}.targetPort"),
                        &go_quote(t),
                        &m,
                    ));
                }
            }
            _ => {}
        }
    }
    errs.extend(validate_labels(obj(spec, "selector"), "spec.selector"));
    if let Some(old) = old {
        let old_ip = s(old, "clusterIP");
        let new_ip = s(spec, "clusterIP");
        if !old_ip.is_empty() && old_ip != new_ip && ty != "ExternalName" {
            let shown = spec
                .get("clusterIPs")
                .map(go_string_slice)
                .unwrap_or_else(|| "[]string(nil)".into());
            errs.push(FieldError::invalid(
                "spec.clusterIPs[0]",
                &shown,
                "may not change once set",
            ));
        }
    }
    errs
}

fn go_string_slice(v: &Value) -> String {
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

fn validate_hpa_spec(spec: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let min = spec.get("minReplicas").and_then(Value::as_i64);
    let max = spec.get("maxReplicas").and_then(Value::as_i64).unwrap_or(0);
    if let Some(min) = min
        && min < 1
    {
        errs.push(FieldError::invalid(
            "spec.minReplicas",
            &min.to_string(),
            "must be greater than or equal to 1",
        ));
    }
    if max < 1 {
        errs.push(FieldError::invalid(
            "spec.maxReplicas",
            &max.to_string(),
            "must be greater than 0",
        ));
    }
    if let Some(min) = min
        && max < min
    {
        errs.push(FieldError::invalid(
            "spec.maxReplicas",
            &max.to_string(),
            "must be greater than or equal to `minReplicas`",
        ));
    }
    let r = spec.get("scaleTargetRef").unwrap_or(&Value::Null);
    for field in ["kind", "name"] {
        let v = s(r, field);
        let p = format!("spec.scaleTargetRef.{field}");
        if v.is_empty() {
            errs.push(FieldError::required(p, ""));
        } else {
            for bad in ["/", "%"] {
                if v.contains(bad) {
                    errs.push(FieldError::invalid(
                        &p,
                        &go_quote(v),
                        &format!("may not contain '{bad}'"),
                    ));
                }
            }
            if v == "." || v == ".." {
                errs.push(FieldError::invalid(
                    &p,
                    &go_quote(v),
                    &format!("may not be '{v}'"),
                ));
            }
        }
    }
    let mut has_object_or_external = false;
    for (i, m) in arr(spec, "metrics").iter().enumerate() {
        let p = format!("spec.metrics[{i}]");
        let ty = s(m, "type");
        let source_field = match ty {
            "Object" => "object",
            "Pods" => "pods",
            "Resource" => "resource",
            "ContainerResource" => "containerResource",
            "External" => "external",
            "" => {
                errs.push(FieldError::required(
                    format!("{p}.type"),
                    "must specify a metric source type",
                ));
                continue;
            }
            other => {
                errs.push(FieldError::not_supported(
                    format!("{p}.type"),
                    &go_quote(other),
                    &[
                        "ContainerResource",
                        "External",
                        "Object",
                        "Pods",
                        "Resource",
                    ],
                ));
                continue;
            }
        };
        if ty == "Object" || ty == "External" {
            has_object_or_external = true;
        }
        let Some(src) = m.get(source_field) else {
            errs.push(FieldError::required(
                format!("{p}.{source_field}"),
                "must populate information for the given metric source",
            ));
            continue;
        };
        if ty == "Resource" || ty == "ContainerResource" {
            if s(src, "name").is_empty() {
                errs.push(FieldError::required(
                    format!("{p}.{source_field}.name"),
                    "must specify a resource name",
                ));
            }
            let t = src.get("target").unwrap_or(&Value::Null);
            let tp = format!("{p}.{source_field}.target");
            match s(t, "type") {
                "Utilization" | "Value" | "AverageValue" => {}
                "" => errs.push(FieldError::required(
                    format!("{tp}.type"),
                    "must specify a metric target type",
                )),
                other => errs.push(FieldError::not_supported(
                    format!("{tp}.type"),
                    &go_quote(other),
                    &["AverageValue", "Utilization", "Value"],
                )),
            }
            if let Some(u) = t.get("averageUtilization").and_then(Value::as_i64)
                && u < 1
            {
                errs.push(FieldError::invalid(
                    format!("{tp}.averageUtilization"),
                    &u.to_string(),
                    "must be greater than 0",
                ));
            }
            if t.get("averageUtilization").is_none()
                && t.get("averageValue").is_none()
                && t.get("value").is_none()
            {
                errs.push(FieldError::required(
                    tp.clone(),
                    "must set either a target raw value or a target utilization",
                ));
            }
        }
    }
    if min == Some(0) && !has_object_or_external {
        errs.push(FieldError::forbidden(
            "spec.metrics",
            "must specify at least one Object or External metric to support scaling to zero replicas",
        ));
    }
    if let Some(b) = spec.get("behavior") {
        for dir in ["scaleUp", "scaleDown"] {
            let Some(rules) = b.get(dir) else { continue };
            let p = format!("spec.behavior.{dir}");
            if let Some(w) = rules
                .get("stabilizationWindowSeconds")
                .and_then(Value::as_i64)
            {
                if w < 0 {
                    errs.push(FieldError::invalid(
                        format!("{p}.stabilizationWindowSeconds"),
                        &w.to_string(),
                        "must be greater than or equal to zero",
                    ));
                } else if w > 3600 {
                    errs.push(FieldError::invalid(
                        format!("{p}.stabilizationWindowSeconds"),
                        &w.to_string(),
                        "must be less than or equal to 3600",
                    ));
                }
            }
            for (i, pol) in arr(rules, "policies").iter().enumerate() {
                let pp = format!("{p}.policies[{i}]");
                let v = pol.get("value").and_then(Value::as_i64).unwrap_or(0);
                if v <= 0 {
                    errs.push(FieldError::invalid(
                        format!("{pp}.value"),
                        &v.to_string(),
                        "must be greater than zero",
                    ));
                }
                let ps = pol
                    .get("periodSeconds")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                if ps <= 0 {
                    errs.push(FieldError::invalid(
                        format!("{pp}.periodSeconds"),
                        &ps.to_string(),
                        "must be greater than zero",
                    ));
                } else if ps > 1800 {
                    errs.push(FieldError::invalid(
                        format!("{pp}.periodSeconds"),
                        &ps.to_string(),
                        "must be less than or equal to 1800",
                    ));
                }
            }
        }
    }
    errs
}

fn validate_ingress_backend(b: &Value, p: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let svc = b.get("service");
    let res = b.get("resource");
    match (svc, res) {
        (Some(_), Some(_)) => errs.push(FieldError::invalid(
            p,
            "\"\"",
            "cannot set both service and resource backends",
        )),
        (None, None) => errs.push(FieldError::invalid(
            p,
            "\"\"",
            "one backend (service or resource) must be specified",
        )),
        (Some(svc), None) => {
            let name = s(svc, "name");
            if name.is_empty() {
                errs.push(FieldError::required(format!("{p}.service.name"), ""));
            } else {
                for m in is_dns1035_label(name) {
                    errs.push(FieldError::invalid(
                        format!("{p}.service.name"),
                        &go_quote(name),
                        &m,
                    ));
                }
            }
            let port = svc.get("port").unwrap_or(&Value::Null);
            let pname = s(port, "name");
            let pnum = port.get("number").and_then(Value::as_i64).unwrap_or(0);
            if !pname.is_empty() && pnum != 0 {
                errs.push(FieldError::invalid(
                    format!("{p}.service.port"),
                    &go_quote(pname),
                    "cannot set both port name & port number",
                ));
            } else if !pname.is_empty() {
                for m in is_valid_port_name(pname) {
                    errs.push(FieldError::invalid(
                        format!("{p}.service.port.name"),
                        &go_quote(pname),
                        &m,
                    ));
                }
            } else if pnum != 0 {
                if !(1..=65535).contains(&pnum) {
                    errs.push(FieldError::invalid(
                        format!("{p}.service.port.number"),
                        &pnum.to_string(),
                        port_range_msg(),
                    ));
                }
            } else {
                errs.push(FieldError::required(
                    format!("{p}.service.port"),
                    "port name or number is required",
                ));
            }
        }
        (None, Some(r)) => {
            if s(r, "kind").is_empty() {
                errs.push(FieldError::required(format!("{p}.resource.kind"), ""));
            }
            if s(r, "name").is_empty() {
                errs.push(FieldError::required(format!("{p}.resource.name"), ""));
            }
        }
    }
    errs
}

fn is_wildcard_dns1123_subdomain(host: &str) -> bool {
    match host.strip_prefix("*.") {
        Some(rest) => matches_dns1123_subdomain(rest),
        None => false,
    }
}

fn validate_ingress_spec(spec: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let rules = arr(spec, "rules");
    if let Some(db) = spec.get("defaultBackend") {
        errs.extend(validate_ingress_backend(db, "spec.defaultBackend"));
    } else if rules.is_empty() {
        errs.push(FieldError::invalid(
            "spec.rules",
            "[]networking.IngressRule(nil)",
            "either `defaultBackend` or `rules` must be specified",
        ));
    }
    if let Some(class) = spec.get("ingressClassName").and_then(Value::as_str) {
        for m in is_dns1123_subdomain(class) {
            errs.push(FieldError::invalid(
                "spec.ingressClassName",
                &go_quote(class),
                &m,
            ));
        }
    }
    for (i, tls) in arr(spec, "tls").iter().enumerate() {
        for (j, h) in arr(tls, "hosts").iter().enumerate() {
            let h = h.as_str().unwrap_or("");
            if !matches_dns1123_subdomain(h) && !is_wildcard_dns1123_subdomain(h) {
                for m in is_dns1123_subdomain(h) {
                    errs.push(FieldError::invalid(
                        format!("spec.tls[{i}].hosts[{j}]"),
                        &go_quote(h),
                        &m,
                    ));
                }
            }
        }
    }
    for (i, rule) in rules.iter().enumerate() {
        let rp = format!("spec.rules[{i}]");
        let host = s(rule, "host");
        if !host.is_empty() {
            if host.parse::<std::net::IpAddr>().is_ok() {
                errs.push(FieldError::invalid(
                    format!("{rp}.host"),
                    &go_quote(host),
                    "must be a DNS name, not an IP address",
                ));
            } else if host.contains('*') {
                if !is_wildcard_dns1123_subdomain(host) {
                    errs.push(FieldError::invalid(
                        format!("{rp}.host"),
                        &go_quote(host),
                        &regex_error(
                            "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character",
                            "\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
                            &["*.example.com"],
                        ),
                    ));
                }
            } else {
                for m in is_dns1123_subdomain(host) {
                    errs.push(FieldError::invalid(
                        format!("{rp}.host"),
                        &go_quote(host),
                        &m,
                    ));
                }
            }
        }
        let Some(http) = rule.get("http") else {
            continue;
        };
        let paths = arr(http, "paths");
        if paths.is_empty() {
            errs.push(FieldError::required(format!("{rp}.http.paths"), ""));
        }
        for (j, path) in paths.iter().enumerate() {
            let pp = format!("{rp}.http.paths[{j}]");
            let p = s(path, "path");
            let Some(pt) = path.get("pathType").and_then(Value::as_str) else {
                errs.push(FieldError::required(
                    format!("{pp}.pathType"),
                    "pathType must be specified",
                ));
                continue;
            };
            match pt {
                "Exact" | "Prefix" => {
                    if !p.starts_with('/') {
                        errs.push(FieldError::invalid(
                            format!("{pp}.path"),
                            &go_quote(p),
                            "must be an absolute path",
                        ));
                    }
                    if !p.is_empty() {
                        for seq in ["//", "/./", "/../", "%2f", "%2F"] {
                            if p.contains(seq) {
                                errs.push(FieldError::invalid(
                                    format!("{pp}.path"),
                                    &go_quote(p),
                                    &format!("must not contain '{seq}'"),
                                ));
                            }
                        }
                        for suf in ["/..", "/."] {
                            if p.ends_with(suf) {
                                errs.push(FieldError::invalid(
                                    format!("{pp}.path"),
                                    &go_quote(p),
                                    &format!("cannot end with '{suf}'"),
                                ));
                            }
                        }
                    }
                }
                "ImplementationSpecific" => {
                    if !p.is_empty() && !p.starts_with('/') {
                        errs.push(FieldError::invalid(
                            format!("{pp}.path"),
                            &go_quote(p),
                            "must be an absolute path",
                        ));
                    }
                }
                other => {
                    errs.push(FieldError::not_supported(
                        format!("{pp}.pathType"),
                        &go_quote(other),
                        &["Exact", "ImplementationSpecific", "Prefix"],
                    ));
                }
            }
            errs.extend(validate_ingress_backend(
                path.get("backend").unwrap_or(&Value::Null),
                &format!("{pp}.backend"),
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_value_message_matches_fixture() {
        assert_eq!(
            is_valid_label_value("web:abc123"),
            vec!["a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".to_string()]
        );
        assert!(is_valid_label_value("").is_empty());
        assert!(is_valid_label_value("3f9c2a7be41d0c58").is_empty());
    }

    #[test]
    fn qualified_names() {
        assert!(is_qualified_name("app").is_empty());
        assert!(is_qualified_name("example.com/team").is_empty());
        assert_eq!(
            is_qualified_name("/x"),
            vec!["prefix part must be non-empty"]
        );
        assert_eq!(is_qualified_name("a/b/c").len(), 1);
        assert_eq!(is_qualified_name("-x").len(), 1);
        assert_eq!(
            is_qualified_name(&"a".repeat(64)),
            vec!["name part must be no more than 63 characters"]
        );
    }

    #[test]
    fn dns_names() {
        assert!(is_dns1123_subdomain("web.example").is_empty());
        assert_eq!(is_dns1123_subdomain("Web").len(), 1);
        assert_eq!(is_dns1123_label("a.b"), vec!["must not contain dots"]);
        assert!(is_dns1035_label("web").is_empty());
        assert_eq!(is_dns1035_label("1web").len(), 1);
    }
}
