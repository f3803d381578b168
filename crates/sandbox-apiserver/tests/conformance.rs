//! Replays every exchange recorded from kube-apiserver v1.28.0 in file order on one fresh
//! sandbox per folder and compares: status code, the headers clients look at, and the body —
//! byte for byte in key order after replacing only values that are random by nature (uids,
//! timestamps, cluster IPs, the server address), which must still be present and well formed.
//!
//! * `tests/fixtures/k8s/` (a copy of `shared/k8s-fixtures`): recorded on a fresh cluster
//!   without CRDs; resourceVersions are compared exactly (the sandbox starts its revision
//!   counter where the recording's etcd was, 192).
//! * `tests/fixtures/kinds/` (`tools/record_fixtures.py` with `tools/kinds-cases.yaml`):
//!   ConfigMaps, IngressClasses, DefaultIngressClass admission, the Gateway API CRDs; recorded
//!   on a shared cluster with the Gateway API CRDs installed, whose revision counter other
//!   clients moved, so resourceVersions are only checked to be decimal and ages in table
//!   cells to be durations.
//! * `tests/fixtures/standard/` (`tools/record_fixtures.py` with `tools/standard-cases.yaml`):
//!   the Gateway API's standard channel — discovery, GatewayClass `supportedFeatures`, and an
//!   HTTPRoute with an `ExternalAuth` filter refused; recorded like `kinds/`.
//! * `tests/fixtures/gateway-api-v1.6.1-{standard,experimental}/` (`tools/record_fixtures.py`
//!   with `tools/gateway-api-v1.6.1-*-cases.yaml`): recorded on kube-apiserver v1.33.3 with the
//!   Gateway API v1.6.1 CRDs of that channel — the plugin's HTTPRoute writes, dry runs and
//!   reads, the ExternalAuth filter refused by the standard channel, status updates; recorded
//!   like `kinds/`.
//! * `tests/fixtures/webhook/`: the API server passing on a snippet refusal of a webhook named
//!   like ingress-nginx's, replayed with `IngressNginxWebhook::SnippetsDisabled`.
//! * `tests/fixtures/rollout-failures/<kind>/` (`tools/record_fixtures.py` with
//!   `tools/rollout-<kind>-cases.yaml`): recorded on kube-apiserver v1.33.3 with its controllers,
//!   the real scheduler and the stand-in kubelet — rollouts that fail five ways — and replayed
//!   on a sandbox running `Rollout::Auto`, waiting for the states the recording waited for and
//!   mapping the names a cluster generates (see that folder's README).
//! * `tests/fixtures/server-side-apply/` (`tools/record_fixtures.py` with
//!   `tools/server-side-apply-cases.yaml`): recorded on kube-apiserver v1.33.3 — applies that
//!   create, change, share, conflict, force and prune, on Deployments, Services, HPAs,
//!   Ingresses and ConfigMaps; the recording server's deployment controller acted on the
//!   Deployments, and what it wrote is left out of the comparison (see that folder's README).
//!
//! Recorded uids and timestamps inside request bodies (PUT bodies are objects as last read)
//! are replaced by the sandbox's values read from the same object, as a real client would have
//! sent them.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use sandbox_apiserver::{
    GatewayApiChannel, GatewayApiVersion, Identity, IngressNginxWebhook, Rollout, Sandbox,
    SandboxOptions,
};
use serde_json::{Map, Value, json};

/// Fixtures the sandbox is allowed to differ on, with the reason. Aim: empty.
const ALLOWED: &[(&str, &str)] = &[];

/// What the recording's cluster is called that the sandbox calls otherwise: its node, its
/// scheduler's instance (`default-scheduler-<host>`) and the stand-in kubelet's field manager.
const CLUSTER_NAMES: &[(&str, &str)] = &[
    ("fake-node-1", sandbox_apiserver::NODE_NAME),
    (
        "default-scheduler-vm",
        sandbox_apiserver::SCHEDULER_INSTANCE,
    ),
    ("fake-kubelet", "kubelet"),
];

/// Keys holding timestamps (normalised to `<time>`, checked to be RFC 3339).
const TIME_KEYS: &[&str] = &[
    "creationTimestamp",
    "time",
    "lastTransitionTime",
    "lastUpdateTime",
    "startTime",
    "startedAt",
    "finishedAt",
    "firstTimestamp",
    "lastTimestamp",
    "eventTime",
    "lastObservedTime",
];

/// Headers whose values are compared (when either side has them).
const COMPARED_HEADERS: &[&str] = &[
    "Content-Type",
    "Cache-Control",
    "X-Content-Type-Options",
    "Warning",
    "Etag",
    "Vary",
    "Transfer-Encoding",
];

#[derive(Default)]
struct Replay {
    /// resourceVersions and table ages are not compared (only checked to be well formed).
    relaxed: bool,
    /// Recorded on a cluster with controllers (`rollout-failures/`): names the controllers
    /// generate, the node's and the kubelet's names, pod IPs, container ids and restart
    /// counts are mapped or normalised, lists are compared in a name-independent order, and
    /// fixtures may wait for a state before their request ([`await_state`]).
    cluster: bool,
    /// Recorded on a server whose kube-controller-manager ran, replayed on a sandbox without
    /// its rollout simulation: what the deployment controller wrote to a Deployment (`status`,
    /// the `deployment.kubernetes.io/revision` annotation, its own managedFields entry and the
    /// annotation in the entries of managers who took it over) is removed from both sides,
    /// and managedFields entries are compared by operation and manager (the server orders them
    /// by time first, at a resolution of a second).
    deployment_controller: bool,
    /// Generated names: recorded → ours.
    names: HashMap<String, String>,
    uids: HashMap<String, String>,
    ips: HashMap<String, String>,
    /// Object key → (recorded object, our object), from the last response carrying it.
    last: HashMap<String, (Value, Value)>,
}

fn object_key(v: &Value) -> Option<String> {
    let kind = v.get("kind")?.as_str()?;
    let name = v.pointer("/metadata/name")?.as_str()?;
    let ns = v
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    Some(format!("{kind}/{ns}/{name}"))
}

fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && [8, 13, 18, 23].iter().all(|&i| b[i] == b'-')
        && b.iter()
            .enumerate()
            .all(|(i, c)| [8, 13, 18, 23].contains(&i) || c.is_ascii_hexdigit())
        && b[14] == b'4'
}

fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    let seconds = b.len() == 20 && b[19] == b'Z';
    // metav1.MicroTime: `2026-12-06T22:22:38.047221Z`.
    let micro = b.len() == 27 && b[19] == b'.' && b[26] == b'Z';
    (seconds || micro) && b[4] == b'-' && b[10] == b'T'
}

/// `duration.HumanDuration`'s output: `0s`, `5m3s`, `2d`.
fn is_age(s: &str) -> bool {
    !s.is_empty()
        && s.bytes().next().is_some_and(|b| b.is_ascii_digit())
        && s.bytes()
            .all(|b| b.is_ascii_digit() || b"smhdy".contains(&b))
}

fn is_cluster_ip(s: &str) -> bool {
    let parts: Vec<u32> = s.split('.').filter_map(|p| p.parse().ok()).collect();
    parts.len() == 4 && parts[0] == 10 && (96..112).contains(&parts[1])
}

impl Replay {
    /// Learn uid / IP correspondences from a recorded and an actual value at the same place.
    /// Record that recorded `a` is our `b`; a recorded value must always map to the same value
    /// of ours, and two recorded values never to one of ours (uids are unique).
    fn map(
        table: &mut HashMap<String, String>,
        a: &str,
        b: &str,
        what: &str,
        problems: &mut Vec<String>,
    ) {
        match table.get(a) {
            Some(prev) if prev != b => {
                problems.push(format!("{what} {a} was {prev} earlier, now {b}"))
            }
            Some(_) => {}
            None => {
                if table.values().any(|v| v == b) {
                    problems.push(format!("{what} {b} stands for two recorded values"));
                }
                table.insert(a.to_string(), b.to_string());
            }
        }
    }

    fn learn(&mut self, recorded: &Value, ours: &Value, problems: &mut Vec<String>) {
        match (recorded, ours) {
            (Value::Object(r), Value::Object(o)) => {
                for (k, rv) in r {
                    let Some(ov) = o.get(k) else { continue };
                    match (k.as_str(), rv, ov) {
                        ("uid", Value::String(a), Value::String(b)) => {
                            Self::map(&mut self.uids, a, b, "uid", problems);
                        }
                        ("clusterIP", Value::String(a), Value::String(b)) => {
                            Self::map(&mut self.ips, a, b, "cluster IP", problems);
                        }
                        (
                            "name" | "generateName" | "pod-template-hash",
                            Value::String(a),
                            Value::String(b),
                        ) if self.cluster && a != b => {
                            Self::map(&mut self.names, a, b, "name", problems);
                        }
                        ("message", Value::String(a), Value::String(b)) if self.cluster => {
                            self.learn_from_text(a, b, problems);
                        }
                        ("clusterIPs", Value::Array(a), Value::Array(b)) => {
                            for (x, y) in a.iter().zip(b) {
                                if let (Some(x), Some(y)) = (x.as_str(), y.as_str()) {
                                    Self::map(&mut self.ips, x, y, "cluster IP", problems);
                                }
                            }
                        }
                        _ => self.learn(rv, ov, problems),
                    }
                }
            }
            (Value::Array(r), Value::Array(o)) => {
                for (a, b) in r.iter().zip(o) {
                    self.learn(a, b, problems);
                }
            }
            _ => {}
        }
    }

    /// Names a text quotes before any answer has shown them (a Deployment's condition names
    /// its new ReplicaSet): when the two texts are the same but for generated names, those
    /// names correspond.
    fn learn_from_text(&mut self, recorded: &str, ours: &str, problems: &mut Vec<String>) {
        static NAME: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
        let re = NAME.get_or_init(|| regex::Regex::new(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)+").unwrap());
        let recorded = self.map_names(recorded);
        if recorded == ours || re.replace_all(&recorded, "#") != re.replace_all(ours, "#") {
            return;
        }
        let pairs: Vec<(String, String)> = re
            .find_iter(&recorded)
            .zip(re.find_iter(ours))
            .map(|(a, b)| (a.as_str().to_string(), b.as_str().to_string()))
            .filter(|(a, b)| a != b)
            .collect();
        for (a, b) in pairs {
            Self::map(&mut self.names, &a, &b, "name", problems);
        }
    }

    fn remember(&mut self, recorded: &Value, ours: &Value) {
        if let (Some(k1), Some(k2)) = (object_key(recorded), object_key(ours))
            && k1 == k2
        {
            self.last.insert(k1, (recorded.clone(), ours.clone()));
        }
        if let (Some(ri), Some(oi)) = (
            recorded.get("items").and_then(Value::as_array),
            ours.get("items").and_then(Value::as_array),
        ) {
            for (r, o) in ri.iter().zip(oi) {
                let mut r = r.clone();
                let mut o = o.clone();
                for v in [&mut r, &mut o] {
                    if let Some(m) = v.as_object_mut() {
                        m.insert(
                            "kind".into(),
                            recorded
                                .get("kind")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .trim_end_matches("List")
                                .into(),
                        );
                    }
                }
                self.remember(&r, &o);
            }
        }
    }

    /// The request body a client would send to the sandbox for the recorded one.
    fn rewrite_body(&self, body: &Value) -> Value {
        let mut b = self.map_strings(body);
        if let (Some(m), Some(key)) = (b.get("metadata").cloned(), object_key(body))
            && let Some((rec, ours)) = self.last.get(&key)
        {
            {
                let mut m = m;
                let fields: &[&str] = if self.relaxed {
                    &["creationTimestamp", "managedFields", "resourceVersion"]
                } else {
                    &["creationTimestamp", "managedFields"]
                };
                for field in fields {
                    let (Some(r), Some(o)) = (
                        rec.pointer(&format!("/metadata/{field}")),
                        ours.pointer(&format!("/metadata/{field}")),
                    ) else {
                        continue;
                    };
                    if body.pointer(&format!("/metadata/{field}")) == Some(r) {
                        m[field] = o.clone();
                    }
                }
                b["metadata"] = m;
            }
        }
        b
    }

    fn map_strings(&self, v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(
                self.uids
                    .get(s)
                    .or_else(|| self.ips.get(s))
                    .cloned()
                    .unwrap_or_else(|| s.clone()),
            ),
            Value::Array(a) => Value::Array(a.iter().map(|x| self.map_strings(x)).collect()),
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, x)| (k.clone(), self.map_strings(x)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    fn map_message(&self, s: &str) -> String {
        let mut out = s.to_string();
        for (a, b) in self.uids.iter().chain(self.ips.iter()) {
            out = out.replace(a.as_str(), b);
        }
        if self.cluster {
            out = self.map_names(&out);
        }
        out
    }

    /// A recorded text with the names of the recording's cluster replaced by ours: the
    /// generated names learned so far (longest first, so that a pod's name goes before its
    /// ReplicaSet's), the node, the scheduler's instance, the stand-in kubelet's field manager.
    fn map_names(&self, s: &str) -> String {
        let mut out = s.to_string();
        let mut names: Vec<(&String, &String)> = self.names.iter().collect();
        names.sort_by_key(|(a, _)| std::cmp::Reverse(a.len()));
        for (a, b) in names {
            out = out.replace(a.as_str(), b);
        }
        for (a, b) in CLUSTER_NAMES {
            if out == *a || out.contains(a) {
                out = out.replace(a, b);
            }
        }
        out
    }
}

/// Replace values random by nature with placeholders, checking they are well formed.
fn normalize(
    v: &Value,
    replay: &Replay,
    recorded: bool,
    problems: &mut Vec<String>,
    path: &str,
) -> Value {
    match v {
        Value::Object(m) if replay.relaxed && m.get("kind") == Some(&json!("APIResourceList")) => {
            // A real server lists a CRD group's resources in no fixed order (it changes from
            // one request to the next): compare them sorted by name.
            let mut sorted = m.clone();
            if let Some(Value::Array(resources)) = sorted.get_mut("resources") {
                resources
                    .sort_by_key(|r| r.get("name").and_then(Value::as_str).map(str::to_string));
            }
            let mut relaxed = Replay {
                relaxed: false,
                ..Replay::default()
            };
            relaxed.uids = replay.uids.clone();
            normalize(&Value::Object(sorted), &relaxed, recorded, problems, path)
        }
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, x) in m {
                let p = format!("{path}/{k}");
                let key = if replay.cluster {
                    cluster_key(k, replay, recorded)
                } else {
                    k.clone()
                };
                let nv = match (k.as_str(), x) {
                    (t, Value::String(s)) if replay.cluster && TIME_KEYS.contains(&t) => {
                        if !recorded && !is_timestamp(s) {
                            problems.push(format!("{p}: {s:?} is not an RFC 3339 timestamp"));
                        }
                        json!("<time>")
                    }
                    ("containerID", Value::String(s)) if replay.cluster => {
                        let hex = s.strip_prefix("containerd://").unwrap_or("");
                        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                            problems.push(format!("{p}: {s:?} is not a containerd id"));
                        }
                        json!("<container-id>")
                    }
                    ("podIP" | "ip", Value::String(s)) if replay.cluster => {
                        if !s.starts_with("10.244.") {
                            problems.push(format!("{p}: {s:?} is not a pod IP"));
                        }
                        json!("<pod-ip>")
                    }
                    ("restartCount", Value::Number(n))
                        if replay.cluster && n.as_u64() != Some(0) =>
                    {
                        json!("<restarts>")
                    }
                    ("uid", Value::String(s)) => {
                        if !recorded && !is_uuid(s) {
                            problems.push(format!("{p}: {s:?} is not a UUID v4"));
                        }
                        json!("<uid>")
                    }
                    (
                        "creationTimestamp" | "time" | "lastTransitionTime" | "lastUpdateTime",
                        Value::String(s),
                    ) => {
                        if !recorded && !is_timestamp(s) {
                            problems.push(format!("{p}: {s:?} is not an RFC 3339 timestamp"));
                        }
                        json!("<time>")
                    }
                    ("clusterIP", Value::String(s)) => {
                        if !recorded && !is_cluster_ip(s) {
                            problems.push(format!("{p}: {s:?} is not a service cluster IP"));
                        }
                        json!("<ip>")
                    }
                    ("clusterIPs", Value::Array(a)) => {
                        json!(a.iter().map(|_| "<ip>").collect::<Vec<_>>())
                    }
                    ("serverAddress", Value::String(_)) => json!("<address>"),
                    ("resourceVersion", Value::String(s)) if replay.relaxed => {
                        if !recorded && (s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit())) {
                            problems.push(format!("{p}: {s:?} is not a resourceVersion"));
                        }
                        json!("<rv>")
                    }
                    ("cells", Value::Array(cells)) if replay.relaxed => Value::Array(
                        cells
                            .iter()
                            .map(|c| match c.as_str() {
                                Some(t) if is_age(t) => json!("<age>"),
                                Some(t) if replay.cluster && is_restarts(t) => json!("<restarts>"),
                                Some(t) if replay.cluster && t.starts_with("10.244.") => {
                                    json!("<pod-ip>")
                                }
                                _ => normalize(c, replay, recorded, problems, &p),
                            })
                            .collect(),
                    ),
                    (_, Value::String(s)) if replay.cluster => {
                        let s = if recorded {
                            replay.map_message(s)
                        } else {
                            s.clone()
                        };
                        json!(varying_counts(&s))
                    }
                    ("message", Value::String(s)) if recorded => json!(replay.map_message(s)),
                    _ => normalize(x, replay, recorded, problems, &p),
                };
                out.insert(key, nv);
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(
            a.iter()
                .enumerate()
                .map(|(i, x)| normalize(x, replay, recorded, problems, &format!("{path}/{i}")))
                .collect(),
        ),
        Value::String(s) if replay.cluster => {
            let s = if recorded {
                replay.map_message(s)
            } else {
                s.clone()
            };
            json!(varying_counts(&s))
        }
        other => other.clone(),
    }
}

/// A map key of a cluster fixture: managedFields keys name pods' IPs and owners' uids.
fn cluster_key(k: &str, replay: &Replay, recorded: bool) -> String {
    if k.starts_with("k:{\"ip\":") {
        return "k:{\"ip\":\"<pod-ip>\"}".into();
    }
    if recorded {
        replay.map_message(k)
    } else {
        k.to_string()
    }
}

/// What a text says that depends on when it is looked at (a crash-looping container's back-off)
/// or names what no other answer names (the pod a quota refused, whose generated name was
/// never stored).
fn varying_counts(s: &str) -> String {
    static BACK_OFF: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    static REFUSED: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let back_off = BACK_OFF.get_or_init(|| regex::Regex::new(r"back-off \d+s restarting").unwrap());
    let refused = REFUSED
        .get_or_init(|| regex::Regex::new(r#"pods \\?"[a-z0-9-]+\\?" is forbidden"#).unwrap());
    let s = back_off.replace_all(s, "back-off <n>s restarting");
    refused
        .replace_all(&s, "pods \"<refused pod>\" is forbidden")
        .into_owned()
}

/// A RESTARTS cell with a last restart: `2 (5s ago)`.
fn is_restarts(s: &str) -> bool {
    s.split_once(" (").is_some_and(|(n, rest)| {
        n.parse::<u64>().is_ok()
            && rest.ends_with(" ago)")
            && is_age(rest.trim_end_matches(" ago)"))
    })
}

/// The first difference between two JSON values (key order included).
fn first_difference(a: &Value, b: &Value, path: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let kx: Vec<&String> = x.keys().collect();
            let ky: Vec<&String> = y.keys().collect();
            for k in &kx {
                if !y.contains_key(k.as_str()) {
                    return Some(format!(
                        "{path}/{k}: missing in the sandbox's response (recorded {})",
                        x[k.as_str()]
                    ));
                }
            }
            for k in &ky {
                if !x.contains_key(k.as_str()) {
                    return Some(format!(
                        "{path}/{k}: not in the recorded response (sandbox sent {})",
                        y[k.as_str()]
                    ));
                }
            }
            for k in &kx {
                if let Some(d) =
                    first_difference(&x[k.as_str()], &y[k.as_str()], &format!("{path}/{k}"))
                {
                    return Some(d);
                }
            }
            if kx != ky {
                return Some(format!(
                    "{path}: key order differs: recorded {kx:?}, sandbox {ky:?}"
                ));
            }
            None
        }
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                return Some(format!(
                    "{path}: {} items recorded, {} sent",
                    x.len(),
                    y.len()
                ));
            }
            x.iter()
                .zip(y)
                .enumerate()
                .find_map(|(i, (p, q))| first_difference(p, q, &format!("{path}/{i}")))
        }
        _ if a == b => None,
        _ => Some(format!("{path}: recorded {a}, sandbox sent {b}")),
    }
}

fn token_for(sb: &Sandbox, user: &str) -> Option<String> {
    Some(sb.token(match user {
        "admin" => Identity::Admin,
        "readonly" => Identity::ReadOnly,
        "noperm" => Identity::NoPerm,
        "invalid-token" => Identity::Invalid,
        other => panic!("unknown fixture user {other}"),
    }))
}

fn request_body(replay: &Replay, req: &Value) -> Option<Vec<u8>> {
    match req.get("body")? {
        Value::String(raw) => Some(raw.as_bytes().to_vec()),
        v => Some(serde_json::to_vec(&replay.rewrite_body(v)).unwrap()),
    }
}

fn request_headers(req: &Value) -> Vec<(String, String)> {
    req.get("headers")
        .and_then(Value::as_object)
        .map(|h| {
            h.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default()
}

fn compare_headers(recorded: &Value, ours: &[(String, String)], problems: &mut Vec<String>) {
    let rec = recorded.as_object().cloned().unwrap_or_default();
    for name in COMPARED_HEADERS {
        let want: Vec<String> = match rec.get(*name) {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
            _ => vec![],
        };
        let got: Vec<String> = ours
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
            .collect();
        if want != got {
            problems.push(format!(
                "header {name}: recorded {want:?}, sandbox sent {got:?}"
            ));
        }
    }
}

fn compare_json(replay: &mut Replay, recorded: &Value, ours: &Value, problems: &mut Vec<String>) {
    replay.learn(recorded, ours, problems);
    let r = normalize(recorded, replay, true, problems, "");
    let o = normalize(ours, replay, false, problems, "");
    if let Some(d) = first_difference(&r, &o, "") {
        problems.push(format!("body: {d}"));
    }
    replay.remember(recorded, ours);
}

fn parse_events(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or(json!({"unparseable": l})))
        .collect()
}

fn replay_watch(sb: &Sandbox, replay: &mut Replay, fixture: &Value, problems: &mut Vec<String>) {
    let req = &fixture["request"];
    let resp = &fixture["response"];
    let token = token_for(sb, req["user"].as_str().unwrap());
    let mut conn = common::Conn::open(sb);
    let headers = request_headers(req);
    let hv: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    conn.send(
        token.as_deref(),
        req["method"].as_str().unwrap(),
        req["path"].as_str().unwrap(),
        &hv,
        None,
    );
    let Some((status, got_headers)) = conn.read_head(Duration::from_secs(5)) else {
        problems.push("no response headers".into());
        return;
    };
    if status != resp["status"].as_u64().unwrap() as u16 {
        problems.push(format!(
            "status: recorded {}, sandbox sent {status}",
            resp["status"]
        ));
    }
    compare_headers(&resp["headers"], &got_headers, problems);
    let mut body = Vec::new();
    if let Some(cr) = fixture.get("concurrent_request") {
        body.extend(conn.read_body(&got_headers, Duration::from_millis(500)));
        let ch = request_headers(cr);
        let chv: Vec<(&str, &str)> = ch.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let cbody = request_body(replay, cr);
        let r = common::request(
            sb,
            token.as_deref(),
            cr["method"].as_str().unwrap(),
            cr["path"].as_str().unwrap(),
            &chv,
            cbody.as_deref(),
        );
        if u64::from(r.status) != cr["response_status"].as_u64().unwrap_or(0) {
            problems.push(format!(
                "concurrent request: status {} (recorded {})",
                r.status, cr["response_status"]
            ));
        }
        if let Some(want_rv) = cr.get("response_resourceVersion").and_then(Value::as_str) {
            let got = r
                .json()
                .pointer("/metadata/resourceVersion")
                .cloned()
                .unwrap_or(Value::Null);
            if got != json!(want_rv) {
                problems.push(format!(
                    "concurrent request: resourceVersion {got} (recorded {want_rv})"
                ));
            }
        }
    }
    let want_events = resp["events"].as_array().cloned().unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline
        && parse_events(&String::from_utf8_lossy(&body)).len() < want_events.len()
    {
        body.extend(conn.read_body(&got_headers, Duration::from_millis(200)));
    }
    // Anything else arriving shortly after would be an extra event.
    body.extend(conn.read_body(&got_headers, Duration::from_millis(300)));
    let text = String::from_utf8_lossy(&body).into_owned();
    if !text.is_empty() && !text.ends_with('\n') {
        problems.push("watch stream: the last event is not newline-terminated".into());
    }
    let got_events = parse_events(&text);
    compare_json(
        replay,
        &Value::Array(want_events),
        &Value::Array(got_events.clone()),
        problems,
    );
    for e in &got_events {
        if let Some(o) = e.get("object") {
            replay.remember(o, o);
        }
    }
}

fn replay_one(sb: &Sandbox, replay: &mut Replay, fixture: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let req = &fixture["request"];
    let resp = &fixture["response"];
    if resp.get("events").is_some() {
        replay_watch(sb, replay, fixture, &mut problems);
        return problems;
    }
    if let Some(cond) = fixture.get("await") {
        await_state(sb, replay, cond, &mut problems);
    }
    let token = token_for(sb, req["user"].as_str().unwrap());
    let headers = request_headers(req);
    let hv: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let body = request_body(replay, req);
    let path = if replay.cluster {
        replay.map_message(req["path"].as_str().unwrap())
    } else {
        req["path"].as_str().unwrap().to_string()
    };
    let r = common::request(
        sb,
        token.as_deref(),
        req["method"].as_str().unwrap(),
        &path,
        &hv,
        body.as_deref(),
    );
    let want_status = resp["status"].as_u64().unwrap() as u16;
    if r.status != want_status {
        problems.push(format!(
            "status: recorded {want_status}, sandbox sent {} ({})",
            r.status,
            r.text().chars().take(300).collect::<String>()
        ));
    }
    compare_headers(&resp["headers"], &r.headers, &mut problems);
    match &resp["body"] {
        Value::String(text) => {
            if r.text() != *text {
                problems.push(format!(
                    "body: recorded {text:?}, sandbox sent {:?}",
                    r.text()
                ));
            }
        }
        recorded => match serde_json::from_slice::<Value>(&r.body) {
            Ok(ours) if replay.cluster => {
                let recorded = sorted_items(recorded, replay, true);
                let ours = sorted_items(&ours, replay, false);
                compare_json(replay, &recorded, &ours, &mut problems)
            }
            Ok(mut ours) if replay.deployment_controller => {
                let mut recorded = recorded.clone();
                if without_deployment_controller(&mut recorded, false) {
                    without_deployment_controller(&mut ours, true);
                }
                for v in [&mut recorded, &mut ours] {
                    sort_managed_fields(v, &|m: &str| m.to_string());
                    // The server lists an apply's conflicts manager by manager in the order
                    // of a Go map: compare them grouped by manager, in the message's order.
                    if let Some(Value::Array(causes)) = v.pointer_mut("/details/causes") {
                        causes.sort_by_key(|c| c.get("message").map(Value::to_string));
                    }
                }
                compare_json(replay, &recorded, &ours, &mut problems)
            }
            Ok(ours) => compare_json(replay, recorded, &ours, &mut problems),
            Err(e) => problems.push(format!("body is not JSON ({e}): {}", r.text())),
        },
    }
    problems
}

/// Remove what a deployment controller wrote to a Deployment (see
/// [`Replay::deployment_controller`]); false (and nothing removed) when `v` is not a
/// Deployment the controller acted on, unless `anyway` (the sandbox's answer to the same
/// request, where no controller ran).
fn without_deployment_controller(v: &mut Value, anyway: bool) -> bool {
    const REVISION: &str = "deployment.kubernetes.io/revision";
    let acted_on = v.get("kind") == Some(&json!("Deployment"))
        && v.pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .is_some_and(|a| a.contains_key(REVISION));
    if !acted_on && !anyway {
        return false;
    }
    if let Some(m) = v.as_object_mut() {
        m.shift_remove("status");
    }
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        if let Some(Value::Object(a)) = meta.get_mut("annotations") {
            a.shift_remove(REVISION);
            if a.is_empty() {
                meta.shift_remove("annotations");
            }
        }
        if let Some(Value::Array(entries)) = meta.get_mut("managedFields") {
            entries.retain(|e| e.get("manager") != Some(&json!("kube-controller-manager")));
            for e in entries.iter_mut() {
                let Some(Value::Object(fm)) = e.pointer_mut("/fieldsV1/f:metadata") else {
                    continue;
                };
                if let Some(Value::Object(fa)) = fm.get_mut("f:annotations") {
                    fa.shift_remove(&format!("f:{REVISION}"));
                    if fa.keys().all(|k| k == ".") {
                        fm.shift_remove("f:annotations");
                    }
                }
                if fm.is_empty()
                    && let Some(Value::Object(f)) = e.get_mut("fieldsV1")
                {
                    f.shift_remove("f:metadata");
                }
            }
        }
    }
    acted_on
}

/// Cluster fixtures: poll the sandbox until it reaches the state the recording waited for
/// (what the recorded `await` names: a value at a JSON pointer whose `*` segments match every
/// item of a list, equal to `equals` or at least `at_least`).
fn await_state(sb: &Sandbox, replay: &Replay, cond: &Value, problems: &mut Vec<String>) {
    let path = replay.map_message(cond["path"].as_str().unwrap());
    let pointer = cond["pointer"].as_str().unwrap();
    let token = sb.token(Identity::Admin);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = common::request(sb, Some(&token), "GET", &path, &[], None);
        let values = pointer_values(&r.json(), pointer);
        let reached = match (cond.get("equals"), cond.get("at_least")) {
            (Some(want), _) => values.iter().any(|v| v == want),
            (None, Some(n)) => values
                .iter()
                .any(|v| v.as_f64().zip(n.as_f64()).is_some_and(|(v, n)| v >= n)),
            _ => panic!("await needs equals or at_least: {cond}"),
        };
        if reached {
            return;
        }
        if Instant::now() > deadline {
            problems.push(format!(
                "the sandbox never reached {cond}: {}",
                r.text().chars().take(600).collect::<String>()
            ));
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn pointer_values(doc: &Value, pointer: &str) -> Vec<Value> {
    let mut cur = vec![doc.clone()];
    for part in pointer.split('/').skip(1) {
        let part = part.replace("~1", "/").replace("~0", "~");
        cur = cur
            .into_iter()
            .flat_map(|c| match (&c, part.as_str()) {
                (Value::Array(a), "*") => a.clone(),
                (Value::Array(a), i) => i
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| a.get(i).cloned())
                    .into_iter()
                    .collect(),
                (Value::Object(m), k) => m.get(k).cloned().into_iter().collect(),
                _ => Vec::new(),
            })
            .collect();
    }
    cur
}

/// A list's items (or a Table's rows) in an order both clusters agree on: the real server
/// sorts by name, and names differ. The key is what identifies an item besides its name — its
/// reason, message, images, revision, cells — with the names known so far written as ours and
/// the others blanked out.
fn sorted_items(v: &Value, replay: &Replay, recorded: bool) -> Value {
    let mut v = v.clone();
    for list in ["items", "rows"] {
        if let Some(items) = v.get_mut(list).and_then(Value::as_array_mut) {
            items.sort_by_cached_key(|item| item_key(item, replay, recorded));
        }
    }
    sort_managed_fields(&mut v, &|m: &str| {
        if recorded {
            replay.map_message(m)
        } else {
            m.to_string()
        }
    });
    v
}

/// managedFields entries by operation, manager and subresource: the server orders them by
/// time first, at a resolution of a second, and the two clusters' timings differ (as the
/// differential check compares them).
fn sort_managed_fields(v: &mut Value, manager: &dyn Fn(&str) -> String) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if k == "managedFields"
                    && let Some(entries) = x.as_array_mut()
                {
                    entries.sort_by_cached_key(|e| {
                        ["operation", "manager", "subresource"]
                            .map(|f| manager(e.get(f).and_then(Value::as_str).unwrap_or("")))
                    });
                } else {
                    sort_managed_fields(x, manager);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| sort_managed_fields(x, manager)),
        _ => {}
    }
}

fn item_key(item: &Value, replay: &Replay, recorded: bool) -> (String, String) {
    static GENERATED: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let generated = GENERATED.get_or_init(|| {
        regex::Regex::new(
            r"-[a-z0-9]{5,10}\b|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\d+",
        )
        .unwrap()
    });
    let parts = json!([
        item.get("cells"),
        item.get("reason"),
        item.get("type"),
        item.get("message"),
        item.pointer("/involvedObject/kind"),
        item.pointer("/involvedObject/name"),
        item.pointer("/metadata/annotations/deployment.kubernetes.io~1revision"),
        item.pointer("/spec/containers/0/image"),
        item.pointer("/spec/template/spec/containers/0/image"),
        item.pointer("/status/phase"),
    ])
    .to_string();
    let named = if recorded {
        replay.map_message(&parts)
    } else {
        parts
    };
    (generated.replace_all(&named, "#").into_owned(), named)
}

/// Replay every fixture of `tests/fixtures/<folder>` on `sb`; panics listing the fixtures not
/// reproduced (beyond `allowed`).
fn replay_folder(
    folder: &str,
    expected: usize,
    sb: &Sandbox,
    relaxed: bool,
    allowed: &[(&str, &str)],
) {
    replay_folder_with(
        folder,
        expected,
        sb,
        Replay {
            relaxed,
            ..Replay::default()
        },
        allowed,
    );
}

fn replay_folder_with(
    folder: &str,
    expected: usize,
    sb: &Sandbox,
    mut replay: Replay,
    allowed: &[(&str, &str)],
) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(folder);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert_eq!(
        files.len(),
        expected,
        "expected the {expected} recorded fixtures in {}",
        dir.display()
    );
    let mut failures = Vec::new();
    let mut reproduced = 0;
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let fixture: Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
        let problems = replay_one(sb, &mut replay, &fixture);
        if problems.is_empty() {
            reproduced += 1;
            println!("ok    {name}");
        } else {
            println!("FAIL  {name}");
            for p in &problems {
                println!("        {p}");
            }
            if !allowed.iter().any(|(n, _)| *n == name) {
                failures.push(name);
            }
        }
    }
    println!(
        "conformance ({folder}): {reproduced} of {} fixtures reproduced",
        files.len()
    );
    for (n, why) in allowed {
        println!("allowed to differ: {n}: {why}");
    }
    assert!(failures.is_empty(), "fixtures not reproduced: {failures:?}");
}

#[test]
fn every_recorded_exchange_is_reproduced() {
    let sb = Sandbox::start(SandboxOptions {
        tls: true,
        initial_resource_version: 192,
        // The recorded cluster had no CustomResourceDefinitions.
        install_crds: false,
        ..Default::default()
    })
    .unwrap();
    replay_folder("k8s", 83, &sb, false, ALLOWED);
}

#[test]
fn every_recorded_server_side_apply_exchange_is_reproduced() {
    // Recorded from v1.33.3 with its kube-controller-manager running (see the folder's README).
    let sb = Sandbox::start(SandboxOptions::default()).unwrap();
    replay_folder_with(
        "server-side-apply",
        41,
        &sb,
        Replay {
            relaxed: true,
            deployment_controller: true,
            ..Replay::default()
        },
        &[],
    );
}

#[test]
fn every_recorded_exchange_of_config_maps_ingress_classes_and_the_gateway_api_is_reproduced() {
    // The recorded cluster had the Gateway API CRDs installed (the sandbox's default).
    let sb = Sandbox::start(SandboxOptions {
        tls: true,
        ..Default::default()
    })
    .unwrap();
    replay_folder("kinds", 81, &sb, true, &[]);
}

#[test]
fn every_recorded_exchange_with_the_standard_gateway_api_channel_is_reproduced() {
    // The recorded cluster had the Gateway API v1.4.1 standard-channel CRDs installed.
    let sb = Sandbox::start(SandboxOptions {
        tls: true,
        gateway_api_channel: GatewayApiChannel::Standard,
        ..Default::default()
    })
    .unwrap();
    replay_folder("standard", 22, &sb, true, &[]);
}

#[test]
fn every_recorded_exchange_with_the_v1_6_1_standard_gateway_api_is_reproduced() {
    // Recorded on kube-apiserver v1.33.3 (v1.6.1's CEL needs ≥ 1.30) with the Gateway API
    // v1.6.1 standard-channel CRDs installed.
    let sb = Sandbox::start(SandboxOptions {
        tls: true,
        gateway_api_version: GatewayApiVersion::V1_6_1,
        gateway_api_channel: GatewayApiChannel::Standard,
        ..Default::default()
    })
    .unwrap();
    replay_folder("gateway-api-v1.6.1-standard", 37, &sb, true, &[]);
}

#[test]
fn every_recorded_exchange_with_the_v1_6_1_experimental_gateway_api_is_reproduced() {
    // Recorded on a fresh kube-apiserver v1.33.3 with the v1.6.1 experimental-channel CRDs.
    let sb = Sandbox::start(SandboxOptions {
        tls: true,
        gateway_api_version: GatewayApiVersion::V1_6_1,
        gateway_api_channel: GatewayApiChannel::Experimental,
        ..Default::default()
    })
    .unwrap();
    replay_folder("gateway-api-v1.6.1-experimental", 15, &sb, true, &[]);
}

#[test]
fn every_recorded_exchange_of_envoy_gateway_security_policies_is_reproduced() {
    // Recorded on kube-apiserver v1.33.3 (the CRD's CEL needs ≥ 1.30) with the SecurityPolicy
    // CRD installed.
    let sb = Sandbox::start(SandboxOptions {
        tls: true,
        install_envoy_gateway: true,
        ..Default::default()
    })
    .unwrap();
    replay_folder("envoy-gateway", 25, &sb, true, &[]);
}

#[test]
fn a_cluster_without_envoy_gateway_answers_as_recorded() {
    // Recorded on the same server before the SecurityPolicy CRD was installed.
    let sb = Sandbox::start(SandboxOptions {
        tls: true,
        ..Default::default()
    })
    .unwrap();
    replay_folder("envoy-gateway-absent", 3, &sb, true, &[]);
}

#[test]
fn every_recorded_exchange_with_the_snippet_webhook_is_reproduced() {
    // The recording had a validating webhook named like ingress-nginx's refusing snippets.
    let sb = Sandbox::start(SandboxOptions {
        tls: true,
        ingress_nginx_webhook: Some(IngressNginxWebhook::SnippetsDisabled),
        ..Default::default()
    })
    .unwrap();
    replay_folder("webhook", 8, &sb, true, &[]);
}

/// A sandbox running the cluster of `Rollout::Auto`, as the rollout failures were recorded on
/// a cluster with controllers, the real scheduler and the stand-in kubelet.
fn cluster_sandbox() -> Sandbox {
    Sandbox::start(SandboxOptions {
        tls: true,
        rollout: Rollout::Auto {
            delay: Duration::from_millis(400),
        },
        ..Default::default()
    })
    .unwrap()
}

fn replay_rollout_failure(kind: &str, expected: usize) {
    let sb = cluster_sandbox();
    replay_folder_with(
        &format!("rollout-failures/{kind}"),
        expected,
        &sb,
        Replay {
            relaxed: true,
            cluster: true,
            ..Replay::default()
        },
        &[],
    );
}

#[test]
fn a_rollout_to_an_image_that_does_not_exist_fails_as_recorded() {
    replay_rollout_failure("image-not-found", 24);
}

#[test]
fn a_rollout_whose_container_crashes_fails_as_recorded() {
    replay_rollout_failure("crash-loop", 12);
}

#[test]
fn a_rollout_that_needs_a_missing_secret_fails_as_recorded() {
    replay_rollout_failure("missing-secret", 9);
}

#[test]
fn a_rollout_that_requests_too_much_cpu_fails_as_recorded() {
    replay_rollout_failure("insufficient-cpu", 12);
}

#[test]
fn a_rollout_beyond_a_resource_quota_fails_as_recorded() {
    replay_rollout_failure("quota-exceeded", 14);
}
