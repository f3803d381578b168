//! What two API servers' answers to the same request sequence have in common: each side's
//! responses with the values that are random by nature replaced by stable placeholders, and
//! the first place where two such normalised responses differ.
//!
//! Shared by the `apiserver-parity` tool and the `parity` conformance replay (which includes
//! this file), so that both judge the same way. Pure: JSON in, JSON out.
//!
//! Per side, in order of appearance:
//! * object `resourceVersion`s become `<rv:N>` (the N-th distinct one seen), so equal versions
//!   stay equal and a new version is visible as a new number, whatever the server's counter;
//! * a list's or a watch bookmark's `resourceVersion` is the server's current revision, which
//!   other clients of a shared server move: it becomes `<rv:current>` and must not be older
//!   than any version seen before;
//! * `uid`s become `<uid:N>`, `continue` tokens `<continue:N>`, cluster IPs `<ip:N>`, names
//!   generated from `generateName` `<prefix><generated:N>`;
//! * timestamps (RFC 3339) become `<time>`, a Table's `Age` cells `<age>`, discovery's server
//!   addresses `<address>`, an `Etag` `<etag>`;
//! * inside messages, known uids, versions and generated names are replaced the same way.
//!
//! Values that should have a shape (UUID, RFC 3339, IP, decimal version) are checked: a
//! malformed one is reported as a problem of that side.

#![allow(dead_code)] // two targets include this file, each uses a part of it

use serde_json::{Map, Value, json};

/// Response headers worth comparing (the rest are per-request noise: Date, Audit-Id,
/// Content-Length, the priority-and-fairness uids).
pub const COMPARED_HEADERS: &[&str] = &[
    "Content-Type",
    "Cache-Control",
    "X-Content-Type-Options",
    "Warning",
    "Etag",
    "Vary",
    "Transfer-Encoding",
    "Retry-After",
    "Location",
    "Content-Encoding",
    "Www-Authenticate",
];

/// Go's canonical form of a header name (`content-type` → `Content-Type`).
pub fn canonical_header(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => {
                    first.to_ascii_uppercase().to_string() + &chars.as_str().to_ascii_lowercase()
                }
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join("-")
}

/// The compared headers of a response, as recorded in fixtures: one value as a string,
/// several (Warning) as an array.
pub fn header_map(headers: &[(String, String)]) -> Map<String, Value> {
    let mut out = Map::new();
    for name in COMPARED_HEADERS {
        let values: Vec<&str> = headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect();
        match values.as_slice() {
            [] => {}
            [one] => {
                out.insert((*name).to_string(), json!(one));
            }
            many => {
                out.insert((*name).to_string(), json!(many));
            }
        }
    }
    out
}

/// A response body as data: JSON when it parses, else the text.
pub fn body_value(body: &[u8]) -> Value {
    if body.is_empty() {
        return Value::Null;
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(v) => v,
        Err(_) => Value::String(String::from_utf8_lossy(body).into_owned()),
    }
}

/// The events of a watch stream (one JSON object per line).
pub fn watch_events(body: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(body)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| json!({ "unparseable": l })))
        .collect()
}

fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| {
            if [8, 13, 18, 23].contains(&i) {
                *c == b'-'
            } else {
                c.is_ascii_hexdigit()
            }
        })
}

/// RFC 3339 as Go's `metav1.Time` (`2026-12-01T05:50:55Z`) or `MicroTime` writes it.
pub fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' {
        return false;
    }
    let digits = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18];
    if !digits.iter().all(|&i| b[i].is_ascii_digit()) || b[16] != b':' {
        return false;
    }
    let rest = &s[19..];
    let rest = rest
        .strip_prefix('.')
        .map(|r| r.trim_start_matches(|c: char| c.is_ascii_digit()))
        .unwrap_or(rest);
    rest == "Z"
        || (rest.len() == 6
            && (rest.starts_with('+') || rest.starts_with('-'))
            && rest.as_bytes()[3] == b':')
}

fn is_ip(s: &str) -> bool {
    s.parse::<std::net::IpAddr>().is_ok()
}

/// The random values one server produced so far, in order of first appearance, and what was
/// wrong with any of them.
#[derive(Debug, Default, Clone)]
pub struct Side {
    pub rvs: Vec<String>,
    pub current_rvs: Vec<String>,
    pub uids: Vec<String>,
    pub continues: Vec<String>,
    pub ips: Vec<String>,
    pub generated: Vec<String>,
    max_rv: u64,
    pub problems: Vec<String>,
}

fn ordinal(table: &mut Vec<String>, value: &str) -> usize {
    match table.iter().position(|v| v == value) {
        Some(i) => i + 1,
        None => {
            table.push(value.to_string());
            table.len()
        }
    }
}

impl Side {
    fn rv(&mut self, value: &str, path: &str) -> Value {
        match value.parse::<u64>() {
            Ok(n) => self.max_rv = self.max_rv.max(n),
            Err(_) => self.problems.push(format!(
                "{path}: resourceVersion {value:?} is not a decimal number"
            )),
        }
        json!(format!("<rv:{}>", ordinal(&mut self.rvs, value)))
    }

    fn current_rv(&mut self, value: &str, path: &str) -> Value {
        match value.parse::<u64>() {
            Ok(n) if n < self.max_rv => self.problems.push(format!(
                "{path}: the current resourceVersion {n} is older than {} seen before",
                self.max_rv
            )),
            Ok(n) => self.max_rv = n,
            Err(_) => self.problems.push(format!(
                "{path}: resourceVersion {value:?} is not a decimal number"
            )),
        }
        if !self.current_rvs.iter().any(|v| v == value) {
            self.current_rvs.push(value.to_string());
        }
        json!("<rv:current>")
    }

    /// Replace what is known to be random inside a free text (messages, Table cells).
    fn text(&self, s: &str) -> String {
        let mut out = s.to_string();
        for (i, uid) in self.uids.iter().enumerate() {
            out = out.replace(uid.as_str(), &format!("<uid:{}>", i + 1));
        }
        for (i, name) in self.generated.iter().enumerate() {
            out = out.replace(name.as_str(), &format!("<generated:{}>", i + 1));
        }
        // Whole decimal numbers that are known versions.
        let mut result = String::with_capacity(out.len());
        let mut digits = String::new();
        let flush = |digits: &mut String, result: &mut String| {
            if !digits.is_empty() {
                match self.rvs.iter().position(|v| v == digits) {
                    Some(i) => result.push_str(&format!("<rv:{}>", i + 1)),
                    None if self.current_rvs.iter().any(|v| v == digits) => {
                        result.push_str("<rv:current>")
                    }
                    None => result.push_str(digits),
                }
                digits.clear();
            }
        };
        for c in out.chars() {
            if c.is_ascii_digit() {
                digits.push(c);
            } else {
                flush(&mut digits, &mut result);
                result.push(c);
            }
        }
        flush(&mut digits, &mut result);
        result
    }

    /// A whole response: status, compared headers, body (and watch events, and the answers to
    /// requests sent while the watch was open).
    pub fn response(
        &mut self,
        status: u16,
        headers: &Map<String, Value>,
        body: &Value,
        events: Option<&[Value]>,
    ) -> Value {
        let mut out = Map::new();
        out.insert("status".into(), json!(status));
        // The body first: where both differ, the body's difference is the one worth reading.
        match events {
            Some(events) => {
                let ev: Vec<Value> = events
                    .iter()
                    .enumerate()
                    .map(|(i, e)| self.event(e, &format!("/events/{i}")))
                    .collect();
                out.insert("events".into(), Value::Array(ev));
            }
            None => {
                let b = self.value(body, "/body", Context::Top);
                out.insert("body".into(), b);
            }
        }
        let mut h = Map::new();
        for (k, v) in headers {
            let name = canonical_header(k);
            // HTTP/1.1 framing (Go's net/http chunks a body above its 2 KiB buffer) is not
            // part of the API except for a watch, which must stream.
            if name == "Transfer-Encoding" && events.is_none() {
                continue;
            }
            let v = if name == "Etag" {
                json!("<etag>")
            } else {
                v.clone()
            };
            h.insert(name, v);
        }
        out.insert("headers".into(), Value::Object(h));
        Value::Object(out)
    }

    fn event(&mut self, e: &Value, path: &str) -> Value {
        let bookmark = e.get("type").and_then(Value::as_str) == Some("BOOKMARK");
        let Some(m) = e.as_object() else {
            return e.clone();
        };
        let mut out = Map::new();
        for (k, v) in m {
            let p = format!("{path}/{k}");
            let nv = if k == "object" {
                self.value(
                    v,
                    &p,
                    if bookmark {
                        Context::Current
                    } else {
                        Context::Top
                    },
                )
            } else {
                v.clone()
            };
            out.insert(k.clone(), nv);
        }
        Value::Object(out)
    }

    fn value(&mut self, v: &Value, path: &str, ctx: Context) -> Value {
        match v {
            Value::Object(m) => self.object(m, path, ctx),
            Value::Array(a) => Value::Array(
                a.iter()
                    .enumerate()
                    .map(|(i, x)| self.value(x, &format!("{path}/{i}"), Context::Top))
                    .collect(),
            ),
            Value::String(s) => self.string(s),
            other => other.clone(),
        }
    }

    /// Any string that has the shape of a random value, wherever it appears (Table cells,
    /// annotations, status).
    fn string(&mut self, s: &str) -> Value {
        if is_timestamp(s) {
            json!("<time>")
        } else if is_uuid(s) {
            json!(format!("<uid:{}>", ordinal(&mut self.uids, s)))
        } else if is_ip(s) {
            json!(format!("<ip:{}>", ordinal(&mut self.ips, s)))
        } else {
            json!(s)
        }
    }

    fn object(&mut self, m: &Map<String, Value>, path: &str, ctx: Context) -> Value {
        // A list (or Table) carries the current revision in its metadata; so does a bookmark.
        let is_list = m.contains_key("items")
            || m.get("kind")
                .and_then(Value::as_str)
                .is_some_and(|k| k.ends_with("List") || k == "Table");
        let generate_name = m
            .get("generateName")
            .and_then(Value::as_str)
            .map(str::to_string);
        let age_column = m
            .get("columnDefinitions")
            .and_then(Value::as_array)
            .and_then(|cols| {
                cols.iter()
                    .position(|c| c.get("name").and_then(Value::as_str) == Some("Age"))
            });
        let mut out = Map::new();
        for (k, x) in m {
            let p = format!("{path}/{k}");
            let nv = match (k.as_str(), x) {
                ("resourceVersion", Value::String(s)) if s.is_empty() => x.clone(),
                ("resourceVersion", Value::String(s)) => match ctx {
                    Context::Metadata { current: true } => self.current_rv(s, &p),
                    _ => self.rv(s, &p),
                },
                ("metadata", Value::Object(_)) => self.value_in(
                    x,
                    &p,
                    Context::Metadata {
                        current: is_list || ctx == Context::Current,
                    },
                ),
                ("uid", Value::String(s)) if !s.is_empty() => {
                    if !is_uuid(s) {
                        self.problems.push(format!("{p}: {s:?} is not a UUID"));
                    }
                    json!(format!("<uid:{}>", ordinal(&mut self.uids, s)))
                }
                ("continue", Value::String(s)) if !s.is_empty() => {
                    json!(format!("<continue:{}>", ordinal(&mut self.continues, s)))
                }
                ("serverAddress", Value::String(_)) => json!("<address>"),
                ("name", Value::String(s))
                    if matches!(ctx, Context::Metadata { .. })
                        && generate_name
                            .as_deref()
                            .is_some_and(|g| s.len() == g.len() + 5 && s.starts_with(g)) =>
                {
                    let g = generate_name.as_deref().unwrap_or_default();
                    json!(format!(
                        "{g}<generated:{}>",
                        ordinal(&mut self.generated, s)
                    ))
                }
                ("message", Value::String(s)) => json!(self.text(s)),
                ("rows", Value::Array(rows)) if age_column.is_some() => {
                    let col = age_column.unwrap_or_default();
                    Value::Array(
                        rows.iter()
                            .enumerate()
                            .map(|(i, row)| {
                                let mut row = self.value(row, &format!("{p}/{i}"), Context::Top);
                                if let Some(cell) =
                                    row.get_mut("cells").and_then(|c| c.get_mut(col))
                                {
                                    *cell = json!("<age>");
                                }
                                row
                            })
                            .collect(),
                    )
                }
                _ => self.value(x, &p, Context::Top),
            };
            out.insert(k.clone(), nv);
        }
        Value::Object(out)
    }

    fn value_in(&mut self, v: &Value, path: &str, ctx: Context) -> Value {
        match v {
            Value::Object(m) => self.object(m, path, ctx),
            other => self.value(other, path, Context::Top),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    Top,
    /// The object of a BOOKMARK event: its metadata carries the current revision.
    Current,
    Metadata {
        current: bool,
    },
}

/// Where two normalised responses first differ: a JSON pointer-like path and both values
/// (`None`: absent on that side).
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    pub path: String,
    pub left: Option<Value>,
    pub right: Option<Value>,
    /// Set when only the order of keys differs.
    pub key_order: Option<(Vec<String>, Vec<String>)>,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: &Option<Value>| match v {
            Some(v) => v.to_string(),
            None => "(absent)".to_string(),
        };
        match &self.key_order {
            Some((l, r)) => write!(f, "{}: key order {l:?} vs {r:?}", self.path),
            None => write!(
                f,
                "{}: {} vs {}",
                self.path,
                show(&self.left),
                show(&self.right)
            ),
        }
    }
}

/// The first difference between two JSON values, key order included.
pub fn first_difference(a: &Value, b: &Value, path: &str) -> Option<Difference> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, xv) in x {
                let p = format!("{path}/{k}");
                match y.get(k) {
                    None => {
                        return Some(Difference {
                            path: p,
                            left: Some(xv.clone()),
                            right: None,
                            key_order: None,
                        });
                    }
                    Some(yv) => {
                        if let Some(d) = first_difference(xv, yv, &p) {
                            return Some(d);
                        }
                    }
                }
            }
            if let Some((k, yv)) = y.iter().find(|(k, _)| !x.contains_key(k.as_str())) {
                return Some(Difference {
                    path: format!("{path}/{k}"),
                    left: None,
                    right: Some(yv.clone()),
                    key_order: None,
                });
            }
            let kx: Vec<String> = x.keys().cloned().collect();
            let ky: Vec<String> = y.keys().cloned().collect();
            if kx != ky {
                return Some(Difference {
                    path: path.to_string(),
                    left: None,
                    right: None,
                    key_order: Some((kx, ky)),
                });
            }
            None
        }
        (Value::Array(x), Value::Array(y)) => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                if let Some(d) = first_difference(p, q, &format!("{path}/{i}")) {
                    return Some(d);
                }
            }
            match x.len().cmp(&y.len()) {
                std::cmp::Ordering::Equal => None,
                std::cmp::Ordering::Greater => Some(Difference {
                    path: format!("{path}/{}", y.len()),
                    left: Some(x[y.len()].clone()),
                    right: None,
                    key_order: None,
                }),
                std::cmp::Ordering::Less => Some(Difference {
                    path: format!("{path}/{}", x.len()),
                    left: None,
                    right: Some(y[x.len()].clone()),
                    key_order: None,
                }),
            }
        }
        _ if a == b => None,
        _ => Some(Difference {
            path: path.to_string(),
            left: Some(a.clone()),
            right: Some(b.clone()),
            key_order: None,
        }),
    }
}

/// Rewrites a value recorded on one side into the other side's terms: every string that one
/// side produced as a random value (version, uid, continue token, generated name) becomes the
/// other side's value of the same ordinal. Used to replay a recorded request against another
/// server.
pub fn translate(v: &Value, from: &Side, to: &Side) -> Value {
    match v {
        Value::String(s) => Value::String(translate_str(s, from, to)),
        Value::Array(a) => Value::Array(a.iter().map(|x| translate(x, from, to)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), translate(x, from, to)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// [`translate`] for one string: an exact match of a version, uid, continue token or
/// generated name, or (for paths and raw text) any occurrence of a uid or generated name.
pub fn translate_str(s: &str, from: &Side, to: &Side) -> String {
    let tables: [(&Vec<String>, &Vec<String>); 5] = [
        (&from.rvs, &to.rvs),
        (&from.uids, &to.uids),
        (&from.continues, &to.continues),
        (&from.generated, &to.generated),
        (&from.current_rvs, &to.current_rvs),
    ];
    for (a, b) in tables {
        if let Some(i) = a.iter().position(|x| x == s)
            && let Some(y) = b.get(i)
        {
            return y.clone();
        }
    }
    let mut out = s.to_string();
    for (a, b) in [(&from.uids, &to.uids), (&from.generated, &to.generated)] {
        for (x, y) in a.iter().zip(b.iter()) {
            out = out.replace(x.as_str(), y);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_become_ordinals_in_order_of_appearance() {
        let mut s = Side::default();
        let a = s.value(
            &json!({"metadata": {"resourceVersion": "905", "uid": "8ad3a07d-81dc-40e5-875c-ad57ccea7dae"}}),
            "",
            Context::Top,
        );
        let b = s.value(
            &json!({"metadata": {"resourceVersion": "907"}, "x": {"metadata": {"resourceVersion": "905"}}}),
            "",
            Context::Top,
        );
        assert_eq!(
            a,
            json!({"metadata": {"resourceVersion": "<rv:1>", "uid": "<uid:1>"}})
        );
        assert_eq!(
            b,
            json!({"metadata": {"resourceVersion": "<rv:2>"}, "x": {"metadata": {"resourceVersion": "<rv:1>"}}})
        );
        assert!(s.problems.is_empty());
    }

    #[test]
    fn a_list_version_is_the_current_one_and_may_not_go_back() {
        let mut s = Side::default();
        s.value(
            &json!({"metadata": {"resourceVersion": "500"}}),
            "",
            Context::Top,
        );
        let l = s.value(
            &json!({"kind": "DeploymentList", "metadata": {"resourceVersion": "512"}, "items": []}),
            "",
            Context::Top,
        );
        assert_eq!(l["metadata"]["resourceVersion"], "<rv:current>");
        assert!(s.problems.is_empty());
        s.value(
            &json!({"items": [], "metadata": {"resourceVersion": "499"}}),
            "",
            Context::Top,
        );
        assert_eq!(s.problems.len(), 1, "{:?}", s.problems);
    }

    #[test]
    fn messages_lose_known_uids_and_versions_but_keep_other_numbers() {
        let mut s = Side::default();
        s.value(
            &json!({"metadata": {"resourceVersion": "203", "uid": "8ad3a07d-81dc-40e5-875c-ad57ccea7dae"}}),
            "",
            Context::Top,
        );
        let m = s.value(
            &json!({"message": "the ResourceVersion in the precondition (203) does not match (208) of 8ad3a07d-81dc-40e5-875c-ad57ccea7dae, max 5"}),
            "",
            Context::Top,
        );
        assert_eq!(
            m["message"],
            "the ResourceVersion in the precondition (<rv:1>) does not match (208) of <uid:1>, max 5"
        );
    }

    #[test]
    fn timestamps_ages_and_generated_names_are_placeholders() {
        let mut s = Side::default();
        let t = s.value(
            &json!({"kind": "Table", "columnDefinitions": [{"name": "Name"}, {"name": "Age"}],
                     "rows": [{"cells": ["web", "3s"], "object": {"metadata": {"creationTimestamp": "2026-12-01T05:50:55Z"}}}],
                     "x": {"metadata": {"generateName": "web-", "name": "web-x7k2p"}}}),
            "",
            Context::Top,
        );
        assert_eq!(t["rows"][0]["cells"], json!(["web", "<age>"]));
        assert_eq!(
            t["rows"][0]["object"]["metadata"]["creationTimestamp"],
            "<time>"
        );
        assert_eq!(t["x"]["metadata"]["name"], "web-<generated:1>");
        assert!(is_timestamp("2026-12-01T05:50:55.123456Z"));
        assert!(!is_timestamp("2026-12-01"));
    }

    #[test]
    fn the_first_difference_names_the_path_and_both_values() {
        let d = first_difference(
            &json!({"a": {"b": [1, 2]}, "c": 1}),
            &json!({"a": {"b": [1, 3]}, "c": 1}),
            "",
        )
        .unwrap();
        assert_eq!(d.to_string(), "/a/b/1: 2 vs 3");
        let d = first_difference(&json!({"a": 1, "b": 2}), &json!({"b": 2, "a": 1}), "").unwrap();
        assert!(d.key_order.is_some());
        let d = first_difference(&json!({"a": 1}), &json!({"a": 1, "z": 0}), "").unwrap();
        assert_eq!(d.to_string(), "/z: (absent) vs 0");
    }

    #[test]
    fn translation_maps_values_of_the_same_ordinal() {
        let mut a = Side::default();
        let mut b = Side::default();
        a.value(
            &json!({"metadata": {"resourceVersion": "900", "uid": "8ad3a07d-81dc-40e5-875c-ad57ccea7dae"}}),
            "",
            Context::Top,
        );
        b.value(
            &json!({"metadata": {"resourceVersion": "101", "uid": "11111111-81dc-40e5-875c-ad57ccea7dae"}}),
            "",
            Context::Top,
        );
        assert_eq!(
            translate(
                &json!({"preconditions": {"resourceVersion": "900", "uid": "8ad3a07d-81dc-40e5-875c-ad57ccea7dae"}}),
                &a,
                &b
            ),
            json!({"preconditions": {"resourceVersion": "101", "uid": "11111111-81dc-40e5-875c-ad57ccea7dae"}})
        );
    }
}
