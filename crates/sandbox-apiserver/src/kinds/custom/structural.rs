//! A CRD version's `openAPIV3Schema` as the API server uses it for custom resources:
//! pruning of unknown fields (reported as `unknown field "spec.x"`), defaulting, OpenAPI
//! validation with kube-openapi's messages, duplicate keys in `x-kubernetes-list-type: map`
//! and `set` lists, and the `x-kubernetes-validations` CEL rules — in the real server's order:
//! the rules are skipped (with its "some validation rules were not checked" error) when the
//! schema found a wrong type, a missing required field or a too long/too many value.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::{Map, Value};

use super::cel::{self, Env, Expr, Val};
use crate::model::status::{FieldError, go_quote};

/// One CEL rule and what its failure says.
#[derive(Debug)]
pub struct Rule {
    pub rule: String,
    pub message: String,
    pub expr: Expr,
    /// Uses `oldSelf`: a transition rule, evaluated only on update where an old value exists.
    pub transition: bool,
}

/// A node of a structural schema.
#[derive(Debug, Default)]
pub struct Node {
    pub ty: Option<String>,
    pub format: Option<String>,
    /// In the CRD's order.
    pub properties: Vec<(String, Node)>,
    pub items: Option<Box<Node>>,
    pub additional: Option<Box<Node>>,
    pub required: Vec<String>,
    pub enum_values: Option<Vec<Value>>,
    pub pattern: Option<(String, regex::Regex)>,
    pub max_length: Option<u64>,
    pub min_length: Option<u64>,
    pub max_items: Option<u64>,
    pub min_items: Option<u64>,
    pub max_properties: Option<u64>,
    pub minimum: Option<Value>,
    pub maximum: Option<Value>,
    pub default: Option<Value>,
    pub nullable: bool,
    pub preserve_unknown: bool,
    pub int_or_string: bool,
    pub list_type: Option<String>,
    pub list_map_keys: Vec<String>,
    pub map_type: Option<String>,
    pub rules: Vec<Rule>,
}

fn u(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

fn s(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// `v[key]` as a list of strings, empty when absent.
fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Go's RE2 patterns as the regex crate reads them.
pub fn compile_regex(pattern: &str) -> Result<regex::Regex, String> {
    regex::Regex::new(pattern).map_err(|e| format!("pattern {pattern:?}: {e}"))
}

impl Node {
    /// Parse a schema (JSON), compiling its patterns and rules.
    pub fn parse(v: &Value) -> Result<Node, String> {
        let mut n = Node {
            ty: s(v, "type"),
            format: s(v, "format"),
            required: strings(v, "required"),
            enum_values: v.get("enum").and_then(Value::as_array).cloned(),
            max_length: u(v, "maxLength"),
            min_length: u(v, "minLength"),
            max_items: u(v, "maxItems"),
            min_items: u(v, "minItems"),
            max_properties: u(v, "maxProperties"),
            minimum: v.get("minimum").cloned(),
            maximum: v.get("maximum").cloned(),
            default: v.get("default").cloned(),
            nullable: v.get("nullable") == Some(&Value::Bool(true)),
            preserve_unknown: v.get("x-kubernetes-preserve-unknown-fields")
                == Some(&Value::Bool(true)),
            int_or_string: v.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)),
            list_type: s(v, "x-kubernetes-list-type"),
            list_map_keys: strings(v, "x-kubernetes-list-map-keys"),
            map_type: s(v, "x-kubernetes-map-type"),
            ..Node::default()
        };
        if let Some(p) = v.get("pattern").and_then(Value::as_str) {
            n.pattern = Some((p.to_string(), compile_regex(p)?));
        }
        if let Some(props) = v.get("properties").and_then(Value::as_object) {
            for (k, pv) in props {
                n.properties.push((k.clone(), Node::parse(pv)?));
            }
        }
        if let Some(items) = v.get("items") {
            n.items = Some(Box::new(Node::parse(items)?));
        }
        if let Some(ap) = v.get("additionalProperties").filter(|a| a.is_object()) {
            n.additional = Some(Box::new(Node::parse(ap)?));
        }
        for r in v
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let rule = s(r, "rule").unwrap_or_default();
            let expr = cel::parse(&rule)?;
            n.rules.push(Rule {
                message: s(r, "message").unwrap_or_else(|| format!("failed rule: {rule}")),
                transition: rule.contains("oldSelf"),
                rule,
                expr,
            });
        }
        Ok(n)
    }

    pub fn property(&self, name: &str) -> Option<&Node> {
        self.properties
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, n)| n)
    }

    /// The type name CEL errors show as the invalid value.
    fn type_name(&self) -> &str {
        match self.ty.as_deref() {
            Some(t) => t,
            None if self.int_or_string => "integer-or-string",
            None => "object",
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

// ---------------------------------------------------------------------------------------------
// Pruning and defaulting

/// Drop what the schema does not know (and nulls of non-nullable fields), appending the
/// dropped fields' paths to `unknown` in document order.
pub fn prune(v: &mut Value, n: &Node, path: &str, unknown: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            // Pruning follows the value: a map is pruned to the node's properties whatever
            // type the node declares (validation reports the type).
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                let child = n.property(&k).or(n.additional.as_deref());
                match child {
                    Some(c) => {
                        if m.get(&k).is_some_and(Value::is_null)
                            && !c.nullable
                            && c.default.is_none()
                        {
                            m.remove(&k);
                            continue;
                        }
                        if let Some(cv) = m.get_mut(&k) {
                            prune(cv, c, &join(path, &k), unknown);
                        }
                    }
                    None if n.preserve_unknown => {}
                    None => {
                        m.remove(&k);
                        unknown.push(join(path, &k));
                    }
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = &n.items {
                for (i, x) in a.iter_mut().enumerate() {
                    prune(x, items, &format!("{path}[{i}]"), unknown);
                }
            }
        }
        _ => {}
    }
}

/// Structural defaulting: a property with a default that is absent gets it; then every value
/// present (defaulted ones included) is defaulted in turn.
pub fn default(v: &mut Value, n: &Node) {
    match v {
        Value::Object(m) => {
            for (k, p) in &n.properties {
                if let Some(d) = &p.default
                    && m.get(k).is_none_or(|x| x.is_null() && !p.nullable)
                {
                    m.insert(k.clone(), d.clone());
                }
            }
            for (k, x) in m.iter_mut() {
                if let Some(p) = n.property(k).or(n.additional.as_deref()) {
                    default(x, p);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = &n.items {
                for x in a {
                    default(x, items);
                }
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// OpenAPI validation

/// kube-openapi's name for a JSON value's type.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Go's `%v` of a value in an `Invalid value:` message.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => go_quote(s),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => go_quote(json_type(other)),
    }
}

fn type_ok(n: &Node, v: &Value) -> bool {
    if v.is_null() && n.nullable {
        return true;
    }
    if n.int_or_string {
        return matches!(json_type(v), "integer" | "string");
    }
    match n.ty.as_deref() {
        None => true,
        Some("number") => matches!(json_type(v), "integer" | "number"),
        Some(t) => json_type(v) == t,
    }
}

fn num(v: &Value) -> Option<f64> {
    v.as_f64()
}

/// Validate `v` against `n` (kube-openapi), appending to `errs`.
pub fn validate(v: &Value, n: &Node, path: &str, errs: &mut Vec<FieldError>) {
    if !type_ok(n, v) {
        let actual = json_type(v);
        errs.push(FieldError::type_invalid(
            path,
            &go_quote(actual),
            &format!(
                "{path} in body must be of type {}: {}",
                n.ty.as_deref().unwrap_or("object"),
                go_quote(actual)
            ),
        ));
        return;
    }
    match v {
        Value::String(text) => {
            // kube-openapi's string validator stops at the first failed check.
            let len = text.chars().count() as u64;
            if let Some(max) = n.max_length.filter(|max| len > *max) {
                errs.push(FieldError::too_long_chars(path, max));
            } else if let Some(min) = n.min_length.filter(|min| len < *min) {
                errs.push(FieldError::invalid(
                    path,
                    &shown(v),
                    &format!("{path} in body should be at least {min} chars long"),
                ));
            } else if let Some((p, _)) = n.pattern.as_ref().filter(|(_, re)| !re.is_match(text)) {
                errs.push(FieldError::invalid(
                    path,
                    &shown(v),
                    &format!("{path} in body should match '{p}'"),
                ));
            }
            if n.format.as_deref() == Some("date-time")
                && crate::model::time::parse_rfc3339(text).is_none()
            {
                errs.push(FieldError::invalid(
                    path,
                    &shown(v),
                    &format!(
                        "{path} in body must be of type date-time: {}",
                        go_quote(text)
                    ),
                ));
            }
        }
        Value::Number(_) => {
            let x = num(v).unwrap_or(0.0);
            if let Some(max) = n
                .maximum
                .as_ref()
                .filter(|m| x > num(m).unwrap_or(f64::MAX))
            {
                errs.push(FieldError::invalid(
                    path,
                    &shown(v),
                    &format!("{path} in body should be less than or equal to {max}"),
                ));
            } else if let Some(min) = n
                .minimum
                .as_ref()
                .filter(|m| x < num(m).unwrap_or(f64::MIN))
            {
                errs.push(FieldError::invalid(
                    path,
                    &shown(v),
                    &format!("{path} in body should be greater than or equal to {min}"),
                ));
            }
        }
        Value::Array(items) => {
            let len = items.len() as u64;
            if let Some(max) = n.max_items
                && len > max
            {
                errs.push(FieldError::too_many(path, len, max));
            }
            if let Some(min) = n.min_items
                && len < min
            {
                errs.push(FieldError::invalid(
                    path,
                    &len.to_string(),
                    &format!("{path} in body should have at least {min} items"),
                ));
            }
            if let Some(item) = &n.items {
                for (i, x) in items.iter().enumerate() {
                    validate(x, item, &format!("{path}[{i}]"), errs);
                }
            }
        }
        Value::Object(m) => {
            if let Some(max) = n.max_properties
                && m.len() as u64 > max
            {
                errs.push(FieldError::too_many(path, m.len() as u64, max));
            }
            // kube-openapi's object validator: the properties first, then what is missing.
            for (k, p) in &n.properties {
                if let Some(x) = m.get(k) {
                    validate(x, p, &join(path, k), errs);
                }
            }
            if let Some(ap) = &n.additional {
                for (k, x) in m {
                    if n.property(k).is_none() {
                        validate(x, ap, &join(path, k), errs);
                    }
                }
            }
            for r in &n.required {
                if m.get(r).is_none_or(Value::is_null) {
                    errs.push(FieldError::required(join(path, r), ""));
                }
            }
        }
        _ => {}
    }
    if let Some(values) = &n.enum_values
        && !values.contains(v)
    {
        let supported: Vec<String> = values
            .iter()
            .map(|x| match x {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        let supported: Vec<&str> = supported.iter().map(String::as_str).collect();
        errs.push(FieldError::not_supported(path, &shown(v), &supported));
    }
}

/// Go's `%#v` of a list item or a map-list key.
fn go_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{k:?}:{}", go_value(&m[k.as_str()])))
                .collect();
            format!("map[string]interface {{}}{{{}}}", parts.join(", "))
        }
        other => other.to_string(),
    }
}

/// `ValidateListSetsAndMaps`: no duplicate item in a `set`, no duplicate key in a `map` list.
pub fn validate_lists(v: &Value, n: &Node, path: &str, errs: &mut Vec<FieldError>) {
    match v {
        Value::Array(items) => {
            match n.list_type.as_deref() {
                Some("set") => {
                    for (i, x) in items.iter().enumerate() {
                        if items[..i].contains(x) {
                            errs.push(FieldError::duplicate(format!("{path}[{i}]"), &go_value(x)));
                        }
                    }
                }
                Some("map")
                    if let Some((i, x)) = items
                        .iter()
                        .enumerate()
                        .find(|(_, x)| !x.is_object() && !x.is_null()) =>
                {
                    // `validateListMap` looks no further than the first item that is not an
                    // object.
                    errs.push(FieldError::invalid(
                        format!("{path}[{i}]"),
                        &go_value(x),
                        "must be an object for an array of list-type map",
                    ));
                }
                Some("map") => {
                    let key_of = |x: &Value| {
                        let mut m = Map::new();
                        for k in &n.list_map_keys {
                            if let Some(kv) = x.get(k) {
                                m.insert(k.clone(), kv.clone());
                            }
                        }
                        Value::Object(m)
                    };
                    for (i, x) in items.iter().enumerate() {
                        let key = key_of(x);
                        if items[..i].iter().any(|y| key_of(y) == key) {
                            errs.push(FieldError::duplicate(
                                format!("{path}[{i}]"),
                                &go_value(&key),
                            ));
                        }
                    }
                }
                _ => {}
            }
            if let Some(item) = &n.items {
                for (i, x) in items.iter().enumerate() {
                    validate_lists(x, item, &format!("{path}[{i}]"), errs);
                }
            }
        }
        Value::Object(m) => {
            for (k, x) in m {
                if let Some(p) = n.property(k).or(n.additional.as_deref()) {
                    validate_lists(x, p, &join(path, k), errs);
                }
            }
        }
        _ => {}
    }
}

/// Errors that keep the CEL rules from running (`hasBlockingErr`): on v1.28 type, required,
/// length and item-count violations; newer servers (`enum_blocks`, as v1.33.3 was recorded)
/// count enum violations (`Unsupported value`) too.
pub fn blocks_rules(errs: &[FieldError], enum_blocks: bool) -> bool {
    errs.iter().any(|e| {
        matches!(
            e.cause,
            "FieldValueTypeInvalid"
                | "FieldValueRequired"
                | "FieldValueTooLong"
                | "FieldValueTooMany"
        ) || (enum_blocks && e.cause == "FieldValueNotSupported")
    })
}

/// The error the real server adds when it skipped the rules.
pub fn rules_not_checked() -> FieldError {
    FieldError::invalid(
        "<nil>",
        "\"null\"",
        "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
    )
}

// ---------------------------------------------------------------------------------------------
// CEL rules

/// Compiled patterns of `matches()`, shared by every evaluation.
fn cached_regex(pattern: &str) -> Option<regex::Regex> {
    static CACHE: Mutex<Option<HashMap<String, regex::Regex>>> = Mutex::new(None);
    let mut guard = CACHE.lock().ok()?;
    let cache = guard.get_or_insert_with(HashMap::new);
    if let Some(re) = cache.get(pattern) {
        return Some(re.clone());
    }
    let re = compile_regex(pattern).ok()?;
    cache.insert(pattern.to_string(), re.clone());
    Some(re)
}

/// The item of `old` (a list of `n`'s type) that corresponds to `item`: only `map` lists
/// correlate their items, by key.
fn correlate<'a>(n: &Node, old: Option<&'a Value>, item: &Value) -> Option<&'a Value> {
    if n.list_type.as_deref() != Some("map") {
        return None;
    }
    let key = |x: &Value| {
        n.list_map_keys
            .iter()
            .map(|k| x.get(k).cloned())
            .collect::<Vec<_>>()
    };
    let want = key(item);
    old?.as_array()?.iter().find(|o| key(o) == want)
}

/// Evaluate the `x-kubernetes-validations` rules of `n` and below for `v` (`old`: the stored
/// value at the same place, on update): each node's own rules first, then its children.
pub fn validate_rules(
    v: &Value,
    old: Option<&Value>,
    n: &Node,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    if v.is_null() {
        return;
    }
    for r in &n.rules {
        if r.transition && old.is_none() {
            continue;
        }
        let mut env = Env::new(Val::from_json(v), old.map(Val::from_json), &cached_regex);
        let shown_type = go_quote(n.type_name());
        match cel::eval(&r.expr, &mut env) {
            Ok(Val::Bool(true)) => {}
            Ok(Val::Bool(false)) => errs.push(FieldError::invalid(path, &shown_type, &r.message)),
            Ok(other) => errs.push(FieldError::invalid(
                path,
                &shown_type,
                &format!(
                    "rule did not evaluate to a bool: {other:?} evaluating rule: {}",
                    r.rule
                ),
            )),
            Err(e) => errs.push(FieldError::invalid(
                path,
                &shown_type,
                &format!("{e} evaluating rule: {}", r.rule),
            )),
        }
    }
    match v {
        Value::Array(items) => {
            if let Some(item) = &n.items {
                for (i, x) in items.iter().enumerate() {
                    let o = correlate(n, old, x);
                    validate_rules(x, o, item, &format!("{path}[{i}]"), errs);
                }
            }
        }
        Value::Object(m) => {
            for (k, p) in &n.properties {
                if let Some(x) = m.get(k) {
                    let o = old.and_then(|o| o.get(k));
                    validate_rules(x, o, p, &join(path, k), errs);
                }
            }
            if let Some(ap) = &n.additional {
                for (k, x) in m {
                    if n.property(k).is_none() {
                        let o = old.and_then(|o| o.get(k));
                        validate_rules(x, o, ap, &join(path, k), errs);
                    }
                }
            }
        }
        _ => {}
    }
}
