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
//!   generated from `generateName` `<prefix><generated:N>`, node ports `<nodePort:N>`;
//! * /version's build details (gitCommit, gitTreeState, buildDate, goVersion) `<build>`;
//! * timestamps (RFC 3339) become `<time>`, a Table's `Age` cells `<age>`, discovery's server
//!   addresses `<address>`, an `Etag` `<etag>`; managedFields entries are ordered by operation
//!   and manager (the server orders them by time first, at a resolution of a second);
//! * inside messages (and text bodies: YAML, plain text), known uids, versions, generated
//!   names and timestamps are replaced the
//!   same way, and so are the revisions only the server knows ("too old resource version:
//!   N (M)", "current: N").
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

/// The Service IP range of the reference server the fixtures come from (its
/// `--service-cluster-ip-range`): the sandbox under comparison is started with it, since
/// messages quote it.
pub const REFERENCE_SERVICE_CIDR: &str = "10.0.0.0/24";

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

/// The characters apimachinery's `utilrand.String` picks a generated name's suffix from.
const GENERATED_ALPHABET: &str = "bcdfghjklmnpqrstvwxz2456789";
const GENERATED_LEN: usize = 5;

/// The random values one server produced so far, each with the placeholder it stands for,
/// and what was wrong with any of them.
#[derive(Debug, Default, Clone)]
pub struct Side {
    /// (value, placeholder) in order of first appearance: versions, uids, continue tokens,
    /// IPs, generated names.
    pub labels: Vec<(String, String)>,
    /// Current revisions (lists, bookmarks) in order of appearance.
    pub current_rvs: Vec<String>,
    /// `generateName` prefixes seen: the name the server made up from one appears in
    /// messages and details too, even when no object came back.
    pub generate_prefixes: Vec<String>,
    per_object: std::collections::HashMap<String, usize>,
    per_class: std::collections::HashMap<String, usize>,
    /// The Age column of the last Table with column definitions: a watch's later Table events
    /// come without them.
    table_age_column: Option<usize>,
    max_rv: u64,
    /// The revision of the list a text body (YAML) holds: `<rv:current>` there, whatever object
    /// has the same version.
    text_current: Option<String>,
    pub problems: Vec<String>,
}

/// Where a value sits: in the metadata of an object (whose kind and name identify it), in a
/// list item (kind from the list), in a bookmark.
#[derive(Debug, Clone, Default)]
struct Ctx {
    /// In `metadata`: the object's `Kind/name`, and whether its version is the current
    /// revision (a list's, a bookmark's).
    metadata_of: Option<(Option<String>, bool)>,
    item_kind: Option<String>,
    bookmark: bool,
}

impl Side {
    /// The placeholder of `value` in `class` (rv, uid, continue, ip, generated): the one it
    /// already has, else a new one - per object (`<rv:Deployment/web#2>`: web's second
    /// version) when the object is known, else by order of appearance (`<rv:3>`).
    fn label(&mut self, class: &str, value: &str, ident: Option<&str>) -> String {
        let prefix = format!("<{class}:");
        if let Some((_, l)) = self
            .labels
            .iter()
            .find(|(v, l)| v == value && l.starts_with(&prefix))
        {
            return l.clone();
        }
        let label = match ident {
            Some(id) => {
                let n = self.per_object.entry(format!("{class}:{id}")).or_default();
                *n += 1;
                if *n == 1 {
                    format!("<{class}:{id}>")
                } else {
                    format!("<{class}:{id}#{n}>")
                }
            }
            None => {
                let n = self.per_class.entry(class.to_string()).or_default();
                *n += 1;
                format!("<{class}:{n}>")
            }
        };
        self.labels.push((value.to_string(), label.clone()));
        label
    }

    /// The value of `placeholder` on this side.
    pub fn value_of(&self, placeholder: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(_, l)| l == placeholder)
            .map(|(v, _)| v.as_str())
    }

    fn label_of(&self, value: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(v, _)| v == value)
            .map(|(_, l)| l.as_str())
    }

    /// Remember the `generateName` of a request about to be judged.
    pub fn hint_generate_name(&mut self, prefix: &str) {
        if !prefix.is_empty() && !self.generate_prefixes.iter().any(|p| p == prefix) {
            self.generate_prefixes.push(prefix.to_string());
        }
    }

    /// Replace names generated from a known prefix inside `s`.
    fn generated_names(&mut self, s: &str) -> String {
        let mut out = s.to_string();
        for prefix in self.generate_prefixes.clone() {
            let mut result = String::new();
            let mut rest = out.as_str();
            while let Some(i) = rest.find(prefix.as_str()) {
                let after = &rest[i + prefix.len()..];
                let suffix: String = after.chars().take(GENERATED_LEN).collect();
                let next = after.chars().nth(GENERATED_LEN);
                if suffix.chars().count() == GENERATED_LEN
                    && suffix.chars().all(|c| GENERATED_ALPHABET.contains(c))
                    && !next.is_some_and(|c| c.is_ascii_alphanumeric())
                {
                    let name = format!("{prefix}{suffix}");
                    let label = self.label("generated", &name, None);
                    result.push_str(&rest[..i]);
                    result.push_str(&format!("{prefix}{label}"));
                    rest = &after[suffix.len()..];
                } else {
                    result.push_str(&rest[..i + prefix.len()]);
                    rest = after;
                }
            }
            result.push_str(rest);
            out = result;
        }
        out
    }

    fn rv(&mut self, value: &str, ident: Option<&str>, path: &str) -> Value {
        match value.parse::<u64>() {
            Ok(n) => self.max_rv = self.max_rv.max(n),
            Err(_) => self.problems.push(format!(
                "{path}: resourceVersion {value:?} is not a decimal number"
            )),
        }
        json!(self.label("rv", value, ident))
    }

    fn current_rv(&mut self, value: &str, path: &str) -> Value {
        // A continue page or an exact read repeats a version seen before; anything new must
        // not be older than what was seen.
        let seen = self.label_of(value).is_some() || self.current_rvs.iter().any(|v| v == value);
        match value.parse::<u64>() {
            Ok(n) if n < self.max_rv && !seen => self.problems.push(format!(
                "{path}: the current resourceVersion {n} is older than {} seen before",
                self.max_rv
            )),
            Ok(n) => self.max_rv = self.max_rv.max(n),
            Err(_) => self.problems.push(format!(
                "{path}: resourceVersion {value:?} is not a decimal number"
            )),
        }
        if !self.current_rvs.iter().any(|v| v == value) {
            self.current_rvs.push(value.to_string());
        }
        json!("<rv:current>")
    }

    fn uid(&mut self, value: &str, ident: Option<&str>, path: &str) -> Value {
        if !is_uuid(value) {
            self.problems
                .push(format!("{path}: {value:?} is not a UUID"));
        }
        json!(self.label("uid", value, ident))
    }

    /// Replace what is known to be random inside a free text (messages).
    fn text(&mut self, s: &str) -> String {
        let mut out = self.generated_names(s);
        // Revisions only the server knows: the oldest one its watch cache still has ("too
        // old resource version: 1 (1651)") and its current one ("current: 1931").
        out = replace_number_after(
            &out,
            "too old resource version: ",
            Some(" ("),
            "<rv:oldest>",
        );
        out = replace_number_after(&out, "current: ", None, "<rv:current>");
        // Objects quoted inside messages carry their timestamps, and Go's %#v prints
        // pointers as addresses.
        out = replace_timestamps(&out);
        out = replace_pointers(&out);
        for (value, label) in &self.labels {
            if label.starts_with("<uid:") || label.starts_with("<generated:") {
                out = out.replace(value.as_str(), label);
            }
        }
        // Whole decimal numbers that are known versions (not digits inside a word: a hash
        // in a generated name may contain one).
        let mut result = String::with_capacity(out.len());
        let mut digits = String::new();
        let mut in_word = false;
        let flush = |digits: &mut String, result: &mut String, whole: bool| {
            if !digits.is_empty() {
                if !whole {
                    result.push_str(digits);
                    digits.clear();
                    return;
                }
                if self.text_current.as_deref() == Some(digits.as_str()) {
                    result.push_str("<rv:current>");
                    digits.clear();
                    return;
                }
                match self
                    .labels
                    .iter()
                    .find(|(v, l)| v == digits && l.starts_with("<rv:"))
                {
                    Some((_, l)) => result.push_str(l),
                    None if self.current_rvs.iter().any(|v| v == digits) => {
                        result.push_str("<rv:current>")
                    }
                    None => result.push_str(digits),
                }
                digits.clear();
            }
        };
        // Whether the run of digits began right after a letter.
        let mut after_letter = false;
        for c in out.chars() {
            if c.is_ascii_digit() {
                if digits.is_empty() {
                    after_letter = in_word;
                }
                digits.push(c);
            } else {
                let whole = !after_letter && !c.is_ascii_alphabetic();
                flush(&mut digits, &mut result, whole);
                result.push(c);
                in_word = c.is_ascii_alphabetic();
            }
        }
        flush(&mut digits, &mut result, !after_letter);
        result
    }

    /// A whole response: status, body (or watch events), compared headers.
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
            // A text body (YAML, plain text) is free text, like a message; a YAML object is
            // read first for its random values (a new object's uid and version).
            None => {
                let b = match body {
                    Value::String(s) => {
                        if let Ok(doc) = serde_saphyr::from_str::<Value>(s)
                            && doc.is_object()
                        {
                            self.value(&doc, "/body", &Ctx::default());
                            let is_list = doc.get("items").is_some()
                                || doc
                                    .get("kind")
                                    .and_then(Value::as_str)
                                    .is_some_and(|k| k.ends_with("List") || k == "Table");
                            self.text_current = doc
                                .pointer("/metadata/resourceVersion")
                                .and_then(Value::as_str)
                                .filter(|_| is_list)
                                .map(str::to_string);
                        }
                        let t = json!(self.text(s));
                        self.text_current = None;
                        t
                    }
                    other => self.value(other, "/body", &Ctx::default()),
                };
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
        let Some(m) = e.as_object().filter(|m| m.contains_key("type")) else {
            // Not an event (an error Status, or an object where a stream was expected).
            return self.value(e, path, &Ctx::default());
        };
        let mut out = Map::new();
        for (k, v) in m {
            let p = format!("{path}/{k}");
            let nv = if k == "object" {
                self.value(
                    v,
                    &p,
                    &Ctx {
                        bookmark,
                        ..Ctx::default()
                    },
                )
            } else {
                v.clone()
            };
            out.insert(k.clone(), nv);
        }
        Value::Object(out)
    }

    fn value(&mut self, v: &Value, path: &str, ctx: &Ctx) -> Value {
        match v {
            Value::Object(m) => self.object(m, path, ctx),
            Value::Array(a) => Value::Array(
                a.iter()
                    .enumerate()
                    .map(|(i, x)| self.value(x, &format!("{path}/{i}"), &Ctx::default()))
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
            json!(self.label("uid", s, None))
        } else if is_ip(s) {
            json!(self.label("ip", s, None))
        } else if s.contains("/TCP") || s.contains("/UDP") || s.contains("/SCTP") {
            // A Service's PORT(S) cell: `80:31234/TCP` carries the node port.
            let mut out = s.to_string();
            for (v, l) in &self.labels {
                if l.starts_with("<nodePort:") {
                    out = out.replace(&format!(":{v}/"), &format!(":{l}/"));
                }
            }
            json!(out)
        } else if self.generate_prefixes.is_empty() {
            json!(s)
        } else {
            json!(self.generated_names(s))
        }
    }

    fn object(&mut self, m: &Map<String, Value>, path: &str, ctx: &Ctx) -> Value {
        // A list (or Table) carries the current revision in its metadata; so does a bookmark.
        let is_list = m.contains_key("items")
            || m.get("kind")
                .and_then(Value::as_str)
                .is_some_and(|k| k.ends_with("List") || k == "Table");
        let kind = m
            .get("kind")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| ctx.item_kind.clone());
        if let Some(g) = m.get("generateName").and_then(Value::as_str) {
            self.hint_generate_name(g);
        }
        let meta = m.get("metadata");
        if let Some(g) = meta
            .and_then(|x| x.get("generateName"))
            .and_then(Value::as_str)
        {
            self.hint_generate_name(g);
        }
        let ident = match (
            &kind,
            meta.and_then(|x| x.get("name")).and_then(Value::as_str),
        ) {
            (Some(k), Some(name)) if !is_list => {
                Some(format!("{k}/{}", self.generated_names(name)))
            }
            _ => None,
        };
        let item_kind = kind
            .as_deref()
            .and_then(|k| k.strip_suffix("List"))
            .map(str::to_string);
        let age_column = match m.get("columnDefinitions") {
            Some(Value::Array(cols)) => {
                self.table_age_column = cols
                    .iter()
                    .position(|c| c.get("name").and_then(Value::as_str) == Some("Age"));
                self.table_age_column
            }
            Some(Value::Null) => self.table_age_column,
            _ => None,
        };
        // /version: two builds of the same release differ in these.
        let version_info = m.contains_key("gitVersion") && m.contains_key("gitCommit");
        let mut out = Map::new();
        for (k, x) in m {
            let p = format!("{path}/{k}");
            let nv = match (k.as_str(), x) {
                ("gitCommit" | "gitTreeState" | "buildDate" | "goVersion", Value::String(_))
                    if version_info =>
                {
                    json!("<build>")
                }
                ("resourceVersion", Value::String(s)) if s.is_empty() => x.clone(),
                ("resourceVersion", Value::String(s)) => match &ctx.metadata_of {
                    Some((_, true)) => self.current_rv(s, &p),
                    Some((owner, false)) => self.rv(s, owner.clone().as_deref(), &p),
                    None => self.rv(s, None, &p),
                },
                // An object's uid (a user's, in a UserInfo, is a name).
                ("uid", Value::String(s)) if !s.is_empty() && !path.ends_with("/userInfo") => {
                    match &ctx.metadata_of {
                        Some((owner, _)) => self.uid(s, owner.clone().as_deref(), &p),
                        None => self.uid(s, None, &p),
                    }
                }
                ("metadata", Value::Object(meta)) => self.object(
                    meta,
                    &p,
                    &Ctx {
                        metadata_of: Some((ident.clone(), is_list || ctx.bookmark)),
                        ..Ctx::default()
                    },
                ),
                ("items", Value::Array(items)) => Value::Array(
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, item)| {
                            self.value(
                                item,
                                &format!("{p}/{i}"),
                                &Ctx {
                                    item_kind: item_kind.clone(),
                                    ..Ctx::default()
                                },
                            )
                        })
                        .collect(),
                ),
                ("continue", Value::String(s)) if !s.is_empty() => {
                    json!(self.label("continue", s, None))
                }
                ("serverAddress", Value::String(_)) => json!("<address>"),
                ("nodePort", Value::Number(n)) => {
                    json!(self.label("nodePort", &n.to_string(), None))
                }
                ("message", Value::String(s)) => json!(self.text(s)),
                ("managedFields", Value::Array(entries)) => {
                    // Entries are sorted by operation, time, manager; times within a second
                    // tie, and which writes share a second depends on timing: order by what
                    // does not.
                    let mut sorted = entries.clone();
                    sorted.sort_by_key(|e| {
                        ["operation", "manager", "subresource", "apiVersion"]
                            .map(|k| e.get(k).and_then(Value::as_str).unwrap_or("").to_string())
                    });
                    self.value(&Value::Array(sorted), &p, &Ctx::default())
                }
                // A custom resource group's APIResourceList is in the order the server's CRD
                // cache lists them, which changes when CRDs are touched: order by name.
                ("resources", Value::Array(resources))
                    if m.get("kind").and_then(Value::as_str) == Some("APIResourceList")
                        && m.get("groupVersion")
                            .and_then(Value::as_str)
                            .is_some_and(|gv| gv.starts_with("gateway.networking.")) =>
                {
                    let mut sorted = resources.clone();
                    sorted.sort_by_key(|r| {
                        r.get("name")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string()
                    });
                    self.value(&Value::Array(sorted), &p, &Ctx::default())
                }
                ("rows", Value::Array(rows)) if age_column.is_some() => {
                    let col = age_column.unwrap_or_default();
                    Value::Array(
                        rows.iter()
                            .enumerate()
                            .map(|(i, row)| {
                                let mut row = self.value(row, &format!("{p}/{i}"), &Ctx::default());
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
                _ => self.value(x, &p, &Ctx::default()),
            };
            out.insert(k.clone(), nv);
        }
        Value::Object(out)
    }
}

/// Every `0x…` address inside `s` (at least six hex digits) becomes `<pointer>`.
fn replace_pointers(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("0x") {
        let hex = rest[i + 2..]
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(rest.len() - i - 2);
        out.push_str(&rest[..i]);
        if hex >= 6 {
            out.push_str("<pointer>");
        } else {
            out.push_str(&rest[i..i + 2 + hex]);
        }
        rest = &rest[i + 2 + hex..];
    }
    out.push_str(rest);
    out
}

/// Every RFC 3339 timestamp inside `s` becomes `<time>`.
fn replace_timestamps(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        let rest = &s[i..];
        // The longest candidate starting here: digits, '-', ':', 'T', '.', then 'Z'.
        let end = rest
            .char_indices()
            .find(|(_, c)| !(c.is_ascii_digit() || matches!(c, '-' | ':' | 'T' | '.' | 'Z')))
            .map_or(rest.len(), |(j, _)| j);
        let candidate = &rest[..end];
        match candidate.find('Z') {
            Some(z) if z >= 19 && is_timestamp(&candidate[..=z]) => {
                out.push_str("<time>");
                i += z + 1;
            }
            _ => {
                let c = rest.chars().next().unwrap_or_default();
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
    out
}

/// In `s`, the decimal number that follows `marker` (and then `then`, when given: the number
/// after that) becomes `placeholder`.
fn replace_number_after(s: &str, marker: &str, then: Option<&str>, placeholder: &str) -> String {
    let Some(i) = s.find(marker) else {
        return s.to_string();
    };
    let mut start = i + marker.len();
    if let Some(then) = then {
        let first = s[start..]
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(s.len() - start);
        if !s[start + first..].starts_with(then) {
            return s.to_string();
        }
        start += first + then.len();
    }
    let len = s[start..]
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(s.len() - start);
    if len == 0 {
        return s.to_string();
    }
    format!("{}{placeholder}{}", &s[..start], &s[start + len..])
}

/// One exchange as observed on one side, in data: what [`Side::exchange`] judges.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// 0 when no answer came.
    pub status: u16,
    /// The compared headers ([`header_map`]).
    pub headers: Map<String, Value>,
    pub body: Value,
    /// For a watch: the events.
    pub events: Option<Vec<Value>>,
    /// Why no (complete) answer came.
    pub error: Option<String>,
    /// The `metadata.generateName` of the request body, if any.
    pub generate_name: Option<String>,
    /// The requests sent while a watch was open.
    pub during: Vec<Observed>,
    /// A watch without a resourceVersion (or from "0"): it starts with synthetic ADDED events,
    /// which the server's watch cache sends in no defined order.
    pub initial_events: bool,
}

/// Whether a request (path and query) is a watch that starts with synthetic ADDED events.
pub fn starts_with_initial_events(target: &str) -> bool {
    let Some((_, query)) = target.split_once('?') else {
        return false;
    };
    let mut watch = false;
    let mut from_zero = true;
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        match k.as_ref() {
            "watch" => watch = !matches!(v.as_ref(), "false" | "0" | ""),
            "resourceVersion" => from_zero = v.is_empty() || v == "0",
            _ => {}
        }
    }
    watch && from_zero
}

/// Orders the leading ADDED events by namespace and name.
fn sort_initial_events(events: &[Value]) -> Vec<Value> {
    let leading = events
        .iter()
        .take_while(|e| e.get("type").and_then(Value::as_str) == Some("ADDED"))
        .count();
    let mut out = events.to_vec();
    out[..leading].sort_by_key(|e| {
        ["namespace", "name"].map(|k| {
            e.pointer(&format!("/object/metadata/{k}"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        })
    });
    out
}

impl Side {
    /// The normalised form of one exchange.
    pub fn exchange(&mut self, o: &Observed) -> Value {
        if let Some(prefix) = &o.generate_name {
            self.hint_generate_name(prefix);
        }
        if o.status == 0 {
            return json!({ "error": o.error.clone().unwrap_or_default() });
        }
        let events = o.events.as_deref().map(|e| {
            if o.initial_events {
                sort_initial_events(e)
            } else {
                e.to_vec()
            }
        });
        let mut v = self.response(o.status, &o.headers, &o.body, events.as_deref());
        if let Some(m) = v.as_object_mut() {
            if let Some(e) = &o.error {
                m.insert("error".into(), json!(e));
            }
            if !o.during.is_empty() {
                let during: Vec<Value> = o.during.iter().map(|d| self.exchange(d)).collect();
                m.insert("during".into(), Value::Array(during));
            }
        }
        v
    }
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
    differences(a, b, path, 1).into_iter().next()
}

/// Up to `limit` differences between two JSON values, in document order, key order included.
pub fn differences(a: &Value, b: &Value, path: &str, limit: usize) -> Vec<Difference> {
    let mut out = Vec::new();
    collect(a, b, path, limit, &mut out);
    out
}

fn collect(a: &Value, b: &Value, path: &str, limit: usize, out: &mut Vec<Difference>) {
    if out.len() >= limit {
        return;
    }
    let diff = |path: String, left: Option<&Value>, right: Option<&Value>| Difference {
        path,
        left: left.cloned(),
        right: right.cloned(),
        key_order: None,
    };
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, xv) in x {
                let p = format!("{path}/{k}");
                match y.get(k) {
                    None => out.push(diff(p, Some(xv), None)),
                    Some(yv) => collect(xv, yv, &p, limit, out),
                }
                if out.len() >= limit {
                    return;
                }
            }
            for (k, yv) in y.iter().filter(|(k, _)| !x.contains_key(k.as_str())) {
                out.push(diff(format!("{path}/{k}"), None, Some(yv)));
                if out.len() >= limit {
                    return;
                }
            }
            let common_x: Vec<String> = x.keys().filter(|k| y.contains_key(*k)).cloned().collect();
            let common_y: Vec<String> = y.keys().filter(|k| x.contains_key(*k)).cloned().collect();
            if common_x != common_y {
                out.push(Difference {
                    path: path.to_string(),
                    left: None,
                    right: None,
                    key_order: Some((x.keys().cloned().collect(), y.keys().cloned().collect())),
                });
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                collect(p, q, &format!("{path}/{i}"), limit, out);
                if out.len() >= limit {
                    return;
                }
            }
            if x.len() > y.len() {
                out.push(diff(format!("{path}/{}", y.len()), Some(&x[y.len()]), None));
            } else if y.len() > x.len() {
                out.push(diff(format!("{path}/{}", x.len()), None, Some(&y[x.len()])));
            }
        }
        _ if a == b => {}
        _ => out.push(diff(path.to_string(), Some(a), Some(b))),
    }
}

/// Rewrites a value recorded on one side into the other side's terms: every string that one
/// side produced as a random value (version, uid, continue token, generated name, current
/// revision) becomes the other side's value with the same placeholder. Used to replay a
/// recorded request against another server.
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

/// [`translate`] for one string: an exact match of a known value, or (for paths and raw
/// text) any occurrence of a uid or generated name.
pub fn translate_str(s: &str, from: &Side, to: &Side) -> String {
    if let Some(label) = from.label_of(s)
        && let Some(v) = to.value_of(label)
    {
        return v.to_string();
    }
    if let Some(i) = from.current_rvs.iter().position(|v| v == s)
        && let Some(v) = to.current_rvs.get(i)
    {
        return v.clone();
    }
    let mut out = s.to_string();
    for (value, label) in &from.labels {
        if (label.starts_with("<uid:") || label.starts_with("<generated:"))
            && let Some(v) = to.value_of(label)
        {
            out = out.replace(value.as_str(), v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(s: &mut Side, v: Value) -> Value {
        s.value(&v, "", &Ctx::default())
    }

    #[test]
    fn versions_and_uids_are_named_after_their_object() {
        let mut s = Side::default();
        let a = norm(
            &mut s,
            json!({"kind": "Deployment", "metadata": {"name": "web", "resourceVersion": "905", "uid": "8ad3a07d-81dc-40e5-875c-ad57ccea7dae"}}),
        );
        let b = norm(
            &mut s,
            json!({"kind": "DeploymentList", "metadata": {"resourceVersion": "990"}, "items": [
                {"metadata": {"name": "web", "resourceVersion": "907"}},
                {"metadata": {"name": "api", "resourceVersion": "905"}}]}),
        );
        assert_eq!(
            a["metadata"],
            json!({"name": "web", "resourceVersion": "<rv:Deployment/web>", "uid": "<uid:Deployment/web>"})
        );
        assert_eq!(b["metadata"]["resourceVersion"], "<rv:current>");
        assert_eq!(
            b["items"][0]["metadata"]["resourceVersion"],
            "<rv:Deployment/web#2>"
        );
        // A value keeps the placeholder it got first.
        assert_eq!(
            b["items"][1]["metadata"]["resourceVersion"],
            "<rv:Deployment/web>"
        );
        let c = norm(&mut s, json!({"preconditions": {"resourceVersion": "911"}}));
        assert_eq!(c["preconditions"]["resourceVersion"], "<rv:1>");
        assert!(s.problems.is_empty(), "{:?}", s.problems);
    }

    #[test]
    fn a_new_current_version_may_not_be_older_than_one_seen() {
        let mut s = Side::default();
        norm(
            &mut s,
            json!({"kind": "Ingress", "metadata": {"name": "a", "resourceVersion": "500"}}),
        );
        norm(
            &mut s,
            json!({"kind": "IngressList", "metadata": {"resourceVersion": "512"}, "items": []}),
        );
        assert!(s.problems.is_empty());
        // A continue page repeats the first page's version: fine.
        norm(
            &mut s,
            json!({"kind": "IngressList", "metadata": {"resourceVersion": "512"}, "items": []}),
        );
        assert!(s.problems.is_empty());
        norm(
            &mut s,
            json!({"items": [], "metadata": {"resourceVersion": "499"}}),
        );
        assert_eq!(s.problems.len(), 1, "{:?}", s.problems);
    }

    #[test]
    fn messages_lose_known_uids_and_versions_but_keep_other_numbers() {
        let mut s = Side::default();
        norm(
            &mut s,
            json!({"kind": "Ingress", "metadata": {"name": "a", "resourceVersion": "203", "uid": "8ad3a07d-81dc-40e5-875c-ad57ccea7dae"}}),
        );
        let m = norm(
            &mut s,
            json!({"message": "the ResourceVersion in the precondition (203) does not match (208) of 8ad3a07d-81dc-40e5-875c-ad57ccea7dae, max 5"}),
        );
        assert_eq!(
            m["message"],
            "the ResourceVersion in the precondition (<rv:Ingress/a>) does not match (208) of <uid:Ingress/a>, max 5"
        );
    }

    #[test]
    fn revisions_only_the_server_knows_are_placeholders_in_messages() {
        let mut s = Side::default();
        let m = norm(
            &mut s,
            json!({"message": "too old resource version: 1 (1651)", "x": {"message": "Timeout: Too large resource version: 999999999, current: 1931"}}),
        );
        assert_eq!(m["message"], "too old resource version: 1 (<rv:oldest>)");
        assert_eq!(
            m["x"]["message"],
            "Timeout: Too large resource version: 999999999, current: <rv:current>"
        );
        assert_eq!(
            replace_number_after("current: x", "current: ", None, "<rv>"),
            "current: x"
        );
        assert_eq!(
            replace_pointers("Controller:(*bool)(0xc011da57f9), 0x1f"),
            "Controller:(*bool)(<pointer>), 0x1f"
        );
        assert_eq!(
            replace_timestamps(
                r#"{\"time\":\"2026-12-01T06:42:30Z\",\"n\":1}, 2026-12-01T06:42:30.5Z."#
            ),
            r#"{\"time\":\"<time>\",\"n\":1}, <time>."#
        );
    }

    #[test]
    fn timestamps_ages_and_generated_names_are_placeholders() {
        let mut s = Side::default();
        let t = norm(
            &mut s,
            json!({"kind": "Table", "columnDefinitions": [{"name": "Name"}, {"name": "Age"}],
                   "rows": [{"cells": ["web", "3s"], "object": {"metadata": {"creationTimestamp": "2026-12-01T05:50:55Z"}}}]}),
        );
        assert_eq!(t["rows"][0]["cells"], json!(["web", "<age>"]));
        assert_eq!(
            t["rows"][0]["object"]["metadata"]["creationTimestamp"],
            "<time>"
        );
        let d = norm(
            &mut s,
            json!({"kind": "Deployment", "metadata": {"generateName": "web-", "name": "web-x7k2p", "resourceVersion": "7"}}),
        );
        assert_eq!(d["metadata"]["name"], "web-<generated:1>");
        assert_eq!(
            d["metadata"]["resourceVersion"],
            "<rv:Deployment/web-<generated:1>>"
        );
        let m = norm(
            &mut s,
            json!({"message": "deployments.apps \"web-x7k2p\" not found", "details": {"name": "web-x7k2p"}}),
        );
        assert_eq!(
            m,
            json!({"message": "deployments.apps \"web-<generated:1>\" not found", "details": {"name": "web-<generated:1>"}})
        );
        assert!(is_timestamp("2026-12-01T05:50:55.123456Z"));
        assert!(!is_timestamp("2026-12-01"));
    }

    #[test]
    fn a_watch_s_initial_added_events_are_ordered_by_name() {
        assert!(starts_with_initial_events("/x?watch=true&labelSelector=a"));
        assert!(starts_with_initial_events("/x?watch=1&resourceVersion=0"));
        assert!(!starts_with_initial_events(
            "/x?watch=true&resourceVersion=12"
        ));
        assert!(!starts_with_initial_events("/x?labelSelector=a"));
        let ev = |t: &str, n: &str| json!({"type": t, "object": {"metadata": {"namespace": "a", "name": n}}});
        let sorted =
            sort_initial_events(&[ev("ADDED", "b"), ev("ADDED", "a"), ev("MODIFIED", "0")]);
        assert_eq!(
            sorted,
            [ev("ADDED", "a"), ev("ADDED", "b"), ev("MODIFIED", "0")]
        );
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
        let all = differences(
            &json!({"a": 1, "b": [1], "c": 3}),
            &json!({"a": 2, "b": [], "c": 4}),
            "",
            2,
        );
        assert_eq!(
            all.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["/a: 1 vs 2", "/b/0: 1 vs (absent)"]
        );
    }

    #[test]
    fn translation_maps_values_with_the_same_placeholder() {
        let mut a = Side::default();
        let mut b = Side::default();
        norm(
            &mut a,
            json!({"kind": "Ingress", "metadata": {"name": "x", "resourceVersion": "900", "uid": "8ad3a07d-81dc-40e5-875c-ad57ccea7dae"}}),
        );
        norm(
            &mut b,
            json!({"kind": "Ingress", "metadata": {"name": "x", "resourceVersion": "101", "uid": "11111111-81dc-40e5-875c-ad57ccea7dae"}}),
        );
        assert_eq!(
            translate(
                &json!({"preconditions": {"resourceVersion": "900", "uid": "8ad3a07d-81dc-40e5-875c-ad57ccea7dae"}}),
                &a,
                &b
            ),
            json!({"preconditions": {"resourceVersion": "101", "uid": "11111111-81dc-40e5-875c-ad57ccea7dae"}})
        );
        assert_eq!(
            translate_str("/x?rv=900", &a, &b),
            "/x?rv=900",
            "only whole values and uids are translated"
        );
    }
}
