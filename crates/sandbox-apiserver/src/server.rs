//! HTTP: connections (plain or TLS, HTTP/1.1 keep-alive or HTTP/2 via ALPN), authentication,
//! authorization, routing, faults, the request log, watch streams and the `/sandbox/…` control
//! surface.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc, watch};

use crate::discovery;
use crate::gojson;
use crate::kinds::{self, Kind};
use crate::status::{self, StatusBody};
use crate::store::{self, Event, FieldValidation, Selectors, State, WriteCtx};
use crate::timefmt;
use crate::{Counters, Fault, Identity, LoggedRequest, Rollout, Trigger};

pub type Body = BoxBody<Bytes, std::io::Error>;

/// Returned by the service to make hyper close the connection without a response.
#[derive(Debug)]
pub struct DropConnection;

impl std::fmt::Display for DropConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection dropped by an injected fault")
    }
}

impl std::error::Error for DropConnection {}

#[derive(Default)]
pub struct LogState {
    pub entries: Vec<LoggedRequest>,
    pub counters: Counters,
}

#[derive(Default)]
pub struct FaultState {
    pub active: Vec<Fault>,
    pub latency: Duration,
}

/// Everything the connections and the [`crate::Sandbox`] handle share.
pub struct Shared {
    pub state: Mutex<State>,
    pub tokens: HashMap<String, Identity>,
    pub token_of: HashMap<Identity, String>,
    pub log: Mutex<LogState>,
    pub faults: Mutex<FaultState>,
    pub rollout: Mutex<Rollout>,
    pub rollout_changed: tokio::sync::Notify,
    pub addr: SocketAddr,
    /// Plain HTTP: requests without credentials act as admin (client-go never sends bearer
    /// tokens over plain HTTP, like the removed insecure port of old API servers).
    pub anonymous_is_admin: bool,
    pub started: Instant,
    seq: AtomicU64,
    conn_seq: AtomicU64,
    pub sink: Option<Mutex<Box<dyn Write + Send>>>,
    pub shutdown: watch::Receiver<bool>,
    /// Competing writers that could not do what they were armed to do.
    pub competitor_failures: Mutex<Vec<String>>,
    /// Requests held by [`Fault::Hold`] now, and the gate that releases them.
    pub held: AtomicU64,
    pub hold_gate: watch::Sender<u64>,
}

impl Shared {
    pub fn new(
        state: State,
        tokens: HashMap<Identity, String>,
        addr: SocketAddr,
        tls: bool,
        rollout: Rollout,
        sink: Option<Box<dyn Write + Send>>,
        shutdown: watch::Receiver<bool>,
    ) -> Self {
        let by_token = tokens
            .iter()
            .filter(|(id, _)| **id != Identity::Invalid)
            .map(|(id, t)| (t.clone(), *id))
            .collect();
        Shared {
            state: Mutex::new(state),
            tokens: by_token,
            token_of: tokens,
            log: Mutex::new(LogState::default()),
            faults: Mutex::new(FaultState::default()),
            rollout: Mutex::new(rollout),
            rollout_changed: tokio::sync::Notify::new(),
            addr,
            anonymous_is_admin: !tls,
            started: Instant::now(),
            seq: AtomicU64::new(0),
            conn_seq: AtomicU64::new(0),
            sink: sink.map(Mutex::new),
            shutdown,
            competitor_failures: Mutex::new(Vec::new()),
            held: AtomicU64::new(0),
            hold_gate: watch::channel(0).0,
        }
    }

    pub fn next_connection(&self) -> u64 {
        let id = self.conn_seq.fetch_add(1, Ordering::SeqCst) + 1;
        self.log.lock().counters.connections += 1;
        id
    }

    fn elapsed_ms(&self, t: Instant) -> f64 {
        t.duration_since(self.started).as_secs_f64() * 1000.0
    }

    /// Record a finished request.
    pub fn record(&self, mut entry: LoggedRequest, started: Instant) {
        entry.duration_ms = started.elapsed().as_secs_f64() * 1000.0;
        {
            let mut log = self.log.lock();
            let c = &mut log.counters;
            c.requests += 1;
            *c.by_method.entry(entry.method.clone()).or_default() += 1;
            *c.by_status.entry(entry.status).or_default() += 1;
            if matches!(entry.method.as_str(), "POST" | "PUT" | "PATCH" | "DELETE") {
                c.writes += 1;
                if entry.dry_run {
                    c.dry_run_writes += 1;
                }
            }
            if entry.status == 409 && entry.reason.as_deref() == Some("Conflict") {
                c.conflicts += 1;
            }
            if entry.fault.is_some() {
                c.faults += 1;
            }
            if entry
                .query
                .split('&')
                .any(|p| p == "watch=true" || p == "watch=1")
            {
                c.watches += 1;
            }
            log.entries.push(entry.clone());
        }
        if let Some(sink) = &self.sink
            && let Ok(line) = serde_json::to_string(&entry)
        {
            let mut w = sink.lock();
            let _ = writeln!(w, "{line}");
            let _ = w.flush();
        }
    }

    fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::SeqCst) + 1
    }
}

// ---------------------------------------------------------------------------------------------
// Responses

/// Resolves when the sandbox shuts down.
pub async fn stopped(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|v| *v).await;
}

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never: Infallible| match never {})
        .boxed()
}

pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Body,
    pub reason: Option<String>,
    /// Truncate the body and drop the connection (DropMidResponse).
    pub cut: bool,
}

fn json_reply(code: u16, v: &Value, pretty: bool) -> Reply {
    Reply {
        status: code,
        headers: vec![
            ("Content-Type".into(), "application/json".into()),
            ("Cache-Control".into(), "no-cache, private".into()),
        ],
        body: full(gojson::encode(v, pretty)),
        reason: None,
        cut: false,
    }
}

fn status_reply(s: &StatusBody, pretty: bool) -> Reply {
    let mut r = json_reply(s.code, &s.to_json(), pretty);
    r.reason = (!s.reason.is_empty()).then(|| s.reason.clone());
    r.headers.extend(s.headers.iter().cloned());
    r
}

fn text_reply(code: u16, text: &str) -> Reply {
    Reply {
        status: code,
        headers: vec![
            ("Cache-Control".into(), "no-cache, private".into()),
            ("Content-Type".into(), "text/plain; charset=utf-8".into()),
            ("X-Content-Type-Options".into(), "nosniff".into()),
        ],
        body: full(text.to_string()),
        reason: None,
        cut: false,
    }
}

fn not_found_text() -> Reply {
    text_reply(404, "404 page not found\n")
}

// ---------------------------------------------------------------------------------------------
// Request parsing

/// The request attributes authorization sees (k8s.io/apiserver RequestInfo).
#[derive(Debug, Clone, Default)]
struct RequestInfo {
    resource_request: bool,
    verb: String,
    group: String,
    version: String,
    namespace: String,
    resource: String,
    name: String,
    subresource: String,
    /// Path segments after the resource/name/subresource (unsupported deeper paths).
    extra: usize,
    /// `/api/v1/watch/…` legacy watch prefix.
    legacy_watch: bool,
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn request_info(method: &Method, path: &str, query: &[(String, String)]) -> RequestInfo {
    let mut info = RequestInfo {
        verb: method.as_str().to_lowercase(),
        ..Default::default()
    };
    let parts: Vec<String> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    let (group, rest) = match parts.first().map(String::as_str) {
        Some("api") if parts.len() >= 3 => (String::new(), &parts[1..]),
        Some("apis") if parts.len() >= 4 => (parts[1].clone(), &parts[2..]),
        _ => return info,
    };
    info.resource_request = true;
    info.group = group;
    info.version = rest[0].clone();
    let mut cur: Vec<String> = rest[1..].to_vec();
    if cur.first().map(String::as_str) == Some("watch") {
        info.legacy_watch = true;
        cur.remove(0);
    }
    if cur.first().map(String::as_str) == Some("namespaces") && cur.len() > 1 {
        info.namespace = cur[1].clone();
        if cur.len() > 2 && !matches!(cur[2].as_str(), "status" | "finalize") {
            cur = cur[2..].to_vec();
        }
    }
    info.resource = cur.first().cloned().unwrap_or_default();
    info.name = cur.get(1).cloned().unwrap_or_default();
    info.subresource = cur.get(2).cloned().unwrap_or_default();
    info.extra = cur.len().saturating_sub(3);
    let watch_param = query
        .iter()
        .any(|(k, v)| k == "watch" && !matches!(v.to_lowercase().as_str(), "false" | "0"));
    info.verb = match *method {
        Method::GET | Method::HEAD => {
            if info.legacy_watch || watch_param {
                "watch".into()
            } else if info.name.is_empty() {
                "list".into()
            } else {
                "get".into()
            }
        }
        Method::POST => "create".into(),
        Method::PUT => "update".into(),
        Method::PATCH => "patch".into(),
        Method::DELETE => {
            if info.name.is_empty() {
                "deletecollection".into()
            } else {
                "delete".into()
            }
        }
        ref m => m.as_str().to_lowercase(),
    };
    info
}

const DISCOVERY_PATHS: &[&str] = &[
    "/api",
    "/apis",
    "/healthz",
    "/livez",
    "/readyz",
    "/version",
    "/version/",
    "/openapi",
];

fn non_resource_allowed(id: Option<Identity>, path: &str) -> bool {
    match id {
        Some(Identity::Admin) => true,
        Some(Identity::ReadOnly) | Some(Identity::NoPerm) => {
            DISCOVERY_PATHS.contains(&path)
                || path.starts_with("/api/")
                || path.starts_with("/apis/")
                || path.starts_with("/openapi/")
        }
        _ => matches!(
            path,
            "/healthz" | "/livez" | "/readyz" | "/version" | "/version/"
        ),
    }
}

fn resource_allowed(id: Option<Identity>, verb: &str) -> bool {
    match id {
        Some(Identity::Admin) => true,
        Some(Identity::ReadOnly) => matches!(verb, "get" | "list" | "watch"),
        _ => false,
    }
}

fn query_get<'a>(q: &'a [(String, String)], key: &str) -> Option<&'a str> {
    q.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

fn parse_bool(v: Option<&str>) -> bool {
    matches!(v.map(str::to_lowercase).as_deref(), Some("true" | "1"))
}

fn media_type(h: &HeaderMap) -> String {
    h.get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|s| s.split(';').next().unwrap_or("").trim().to_lowercase())
        .unwrap_or_default()
}

fn wants_table(h: &HeaderMap) -> bool {
    h.get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| {
            a.split(',')
                .any(|part| part.contains("as=Table") && part.contains("g=meta.k8s.io"))
        })
}

// ---------------------------------------------------------------------------------------------
// Faults

enum RequestFault {
    Status(u16),
    Drop,
    DropMid,
    Hang,
    Hold,
}

fn prefix_matches(prefix: &str, path: &str) -> bool {
    path.starts_with(prefix)
}

fn method_matches(want: &Option<String>, method: &str) -> bool {
    want.as_deref()
        .is_none_or(|m| m.eq_ignore_ascii_case(method))
}

impl Shared {
    fn take_request_fault(&self, method: &str, path: &str, dry_run: bool) -> Option<RequestFault> {
        fn matches(fault: &Fault, method: &str, path: &str, dry_run: bool) -> bool {
            match fault {
                Fault::Status {
                    method: m,
                    path_prefix,
                    count,
                    ..
                }
                | Fault::DropConnection {
                    method: m,
                    path_prefix,
                    count,
                }
                | Fault::DropMidResponse {
                    method: m,
                    path_prefix,
                    count,
                }
                | Fault::Hold {
                    method: m,
                    path_prefix,
                    count,
                } => *count > 0 && method_matches(m, method) && prefix_matches(path_prefix, path),
                Fault::Hang { path_prefix, count } => {
                    *count > 0 && prefix_matches(path_prefix, path)
                }
                Fault::Restrict { dry_run: d, fault } => {
                    *d == dry_run && matches(fault, method, path, dry_run)
                }
                _ => false,
            }
        }
        fn fire(fault: &mut Fault) -> Option<RequestFault> {
            match fault {
                Fault::Status { status, count, .. } => {
                    *count -= 1;
                    Some(RequestFault::Status(*status))
                }
                Fault::DropConnection { count, .. } => {
                    *count -= 1;
                    Some(RequestFault::Drop)
                }
                Fault::DropMidResponse { count, .. } => {
                    *count -= 1;
                    Some(RequestFault::DropMid)
                }
                Fault::Hang { count, .. } => {
                    *count -= 1;
                    Some(RequestFault::Hang)
                }
                Fault::Hold { count, .. } => {
                    *count -= 1;
                    Some(RequestFault::Hold)
                }
                Fault::Restrict { fault, .. } => fire(fault),
                _ => None,
            }
        }
        fn spent(fault: &Fault) -> bool {
            match fault {
                Fault::Status { count, .. }
                | Fault::DropConnection { count, .. }
                | Fault::DropMidResponse { count, .. }
                | Fault::Hang { count, .. }
                | Fault::Hold { count, .. }
                | Fault::Conflicts { count, .. } => *count == 0,
                Fault::Restrict { fault, .. } => spent(fault),
                _ => false,
            }
        }
        let mut f = self.faults.lock();
        let pos = f
            .active
            .iter()
            .position(|fault| matches(fault, method, path, dry_run))?;
        let fired = fire(&mut f.active[pos])?;
        f.active.retain(|fault| !spent(fault));
        Some(fired)
    }

    fn conflict_pending(&self, path: &str) -> bool {
        self.faults.lock().active.iter().any(|f| matches!(f, Fault::Conflicts { object_path, count } if *count > 0 && same_path(object_path, path)))
    }

    fn consume_conflict(&self, path: &str) {
        let mut f = self.faults.lock();
        if let Some(Fault::Conflicts { count, .. }) =
            f.active.iter_mut().find(|f| matches!(f, Fault::Conflicts { object_path, count } if *count > 0 && same_path(object_path, path)))
        {
            *count -= 1;
        }
        f.active
            .retain(|x| !matches!(x, Fault::Conflicts { count: 0, .. }));
    }

    /// Removes and returns the first competing-writer fault armed for `path` at `trigger`.
    /// `dry_run`: the request that triggers it is a dry run ([`Trigger::NextRealWrite`] waits
    /// for a real one).
    fn take_competitor(&self, path: &str, trigger: Trigger, dry_run: bool) -> Option<Fault> {
        let fires = |after: Trigger, object_path: &str| {
            same_path(object_path, path)
                && match trigger {
                    Trigger::Read => after == Trigger::Read,
                    Trigger::NextWrite | Trigger::NextRealWrite => {
                        after == Trigger::NextWrite || (after == Trigger::NextRealWrite && !dry_run)
                    }
                }
        };
        let mut f = self.faults.lock();
        let pos = f.active.iter().position(|x| match x {
            Fault::CompetingWrite {
                object_path, after, ..
            }
            | Fault::CompetingDelete { object_path, after }
            | Fault::CompetingRecreate {
                object_path, after, ..
            }
            | Fault::CompetingCreate {
                object_path, after, ..
            } => fires(*after, object_path),
            _ => false,
        })?;
        Some(f.active.remove(pos))
    }

    /// Runs a competing writer taken by [`Shared::take_competitor`] against the object
    /// `ns`/`name` of kind `k`. Returns the request-log mark: `competing-…` when it did what it
    /// was armed to do, `competing-write-failed` (and a recorded failure) otherwise.
    pub fn run_competitor(&self, k: &'static Kind, ns: &str, name: &str, fault: Fault) -> String {
        let (mark, result) = match fault {
            Fault::CompetingWrite { mutate, .. } => {
                ("competing-write", self.competing_write(k, ns, name, mutate))
            }
            Fault::CompetingDelete { .. } => (
                "competing-delete",
                self.state
                    .lock()
                    .delete(k, ns, name, &json!({}), false, false)
                    .map(|_| ())
                    .map_err(|e| e.message),
            ),
            Fault::CompetingRecreate { mutate, .. } => (
                "competing-recreate",
                self.competing_recreate(k, ns, name, mutate),
            ),
            Fault::CompetingCreate { body, .. } => {
                ("competing-create", self.competing_create(k, ns, name, body))
            }
            _ => return String::new(),
        };
        match result {
            Ok(()) => mark.to_owned(),
            Err(why) => {
                self.competitor_failures
                    .lock()
                    .push(format!("{mark} of {} {ns}/{name}: {why}", k.resource));
                "competing-write-failed".to_owned()
            }
        }
    }

    /// Apply a competing writer's mutation to the object; an error when it cannot be applied
    /// or changes nothing.
    pub fn competing_write(
        &self,
        k: &'static Kind,
        ns: &str,
        name: &str,
        mutate: crate::Mutation,
    ) -> Result<(), String> {
        let mut once = Some(mutate);
        let mut st = self.state.lock();
        let before = st.rv;
        st.system_update(k, ns, name, crate::sandbox::COMPETITOR, "", &mut |obj| {
            if let Some(m) = once.take() {
                m(obj);
            }
        })
        .map_err(|e| e.message)?;
        if st.rv == before {
            return Err("the mutation changed nothing".into());
        }
        Ok(())
    }

    fn competing_recreate(
        &self,
        k: &'static Kind,
        ns: &str,
        name: &str,
        mutate: Option<crate::Mutation>,
    ) -> Result<(), String> {
        let mut st = self.state.lock();
        let old = st.get(k, ns, name).map_err(|e| e.message)?;
        let mut fresh = old.clone();
        if let Some(meta) = fresh.get_mut("metadata").and_then(Value::as_object_mut) {
            for field in [
                "uid",
                "resourceVersion",
                "creationTimestamp",
                "generation",
                "managedFields",
                "deletionTimestamp",
                "selfLink",
            ] {
                meta.remove(field);
            }
        }
        if let Some(m) = fresh.as_object_mut() {
            m.remove("status");
        }
        if let Some(m) = mutate {
            m(&mut fresh);
        }
        st.delete(k, ns, name, &json!({}), false, false)
            .map_err(|e| e.message)?;
        let bytes = serde_json::to_vec(&fresh).map_err(|e| e.to_string())?;
        st.create(k, ns, &bytes, &competitor_ctx())
            .map(|_| ())
            .map_err(|e| e.message)
    }

    fn competing_create(
        &self,
        k: &'static Kind,
        ns: &str,
        name: &str,
        mut body: Value,
    ) -> Result<(), String> {
        if let Some(m) = body.as_object_mut() {
            let meta = m.entry("metadata").or_insert_with(|| json!({}));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert("name".into(), json!(name));
                if k.namespaced {
                    meta.insert("namespace".into(), json!(ns));
                }
            }
        }
        let bytes = serde_json::to_vec(&body).map_err(|e| e.to_string())?;
        self.state
            .lock()
            .create(k, ns, &bytes, &competitor_ctx())
            .map(|_| ())
            .map_err(|e| e.message)
    }
}

fn competitor_ctx() -> WriteCtx {
    WriteCtx {
        manager: crate::sandbox::COMPETITOR.into(),
        dry_run: false,
        field_validation: FieldValidation::Strict,
        inject_conflict: false,
    }
}

fn same_path(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

fn fault_status(code: u16, info: &RequestInfo, user: &str) -> StatusBody {
    let kind = kinds::lookup(&info.group, &info.version, &info.resource);
    match code {
        401 => status::unauthorized(),
        403 if info.resource_request => status::forbidden(
            user,
            &info.verb,
            &info.group,
            &info.resource,
            &info.subresource,
            &info.namespace,
            &info.name,
        ),
        404 if kind.is_some() && !info.name.is_empty() => kind
            .map(|k| status::not_found(k, &info.name))
            .unwrap_or_else(|| status::generic(404, "")),
        409 if kind.is_some() && !info.name.is_empty() => kind
            .map(|k| status::conflict_modified(k, &info.name))
            .unwrap_or_else(|| status::generic(409, "")),
        422 if kind.is_some() => kind
            .map(|k| {
                status::invalid(
                    k,
                    &info.name,
                    &[status::FieldError::invalid(
                        "metadata",
                        "\"sandbox\"",
                        "injected fault",
                    )],
                )
            })
            .unwrap_or_else(|| status::generic(422, "")),
        400 => status::bad_request("injected fault"),
        500 => status::internal("injected fault"),
        503 => StatusBody::new(
            503,
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
            None,
        ),
        504 => StatusBody::new(
            504,
            "Timeout",
            "Timeout: request did not complete within requested timeout - context deadline exceeded",
            Some(json!({})),
        ),
        c => status::generic(c, "injected fault"),
    }
}

// ---------------------------------------------------------------------------------------------
// The service

/// Serve one HTTP request.
pub async fn serve(
    shared: Arc<Shared>,
    conn_id: u64,
    req: Request<Incoming>,
) -> Result<Response<Body>, DropConnection> {
    let started = Instant::now();
    let (parts, body) = req.into_parts();
    let method = parts.method.clone();
    let path = parts.uri.path().to_string();
    let raw_query = parts.uri.query().unwrap_or("").to_string();
    let query: Vec<(String, String)> = form_urlencoded::parse(raw_query.as_bytes())
        .into_owned()
        .collect();
    let headers = parts.headers;
    let user_agent = headers
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let pretty = parse_bool(query_get(&query, "pretty"))
        || ["curl", "Wget", "Mozilla/5.0"]
            .iter()
            .any(|p| user_agent.starts_with(p));
    let identity = match headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        None if shared.anonymous_is_admin => Some(Identity::Admin),
        None => None,
        Some(v) => match v
            .strip_prefix("Bearer ")
            .or_else(|| v.strip_prefix("bearer "))
        {
            Some(t) => Some(
                shared
                    .tokens
                    .get(t.trim())
                    .copied()
                    .unwrap_or(Identity::Invalid),
            ),
            None => Some(Identity::Invalid),
        },
    };
    let user = identity
        .map(Identity::user_name)
        .unwrap_or("system:anonymous")
        .to_string();

    if path.starts_with("/sandbox/") || path == "/sandbox" {
        let body = body
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        let reply = crate::sandbox::control(&shared, identity, &method, &path, &query, &body).await;
        return Ok(finish(reply, identity.is_some(), parts.version));
    }

    let mut entry = LoggedRequest {
        seq: shared.next_seq(),
        method: method.as_str().to_string(),
        path: path.clone(),
        query: query
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&"),
        user: user.clone(),
        dry_run: query_get(&query, "dryRun").is_some_and(|v| !v.is_empty()),
        status: 0,
        reason: None,
        fault: None,
        started_ms: shared.elapsed_ms(started),
        duration_ms: 0.0,
        connection_id: conn_id,
        http_version: format!("{:?}", parts.version),
        user_agent: user_agent.clone(),
    };

    let latency = shared.faults.lock().latency;
    if !latency.is_zero() {
        entry.fault = Some("latency".into());
        tokio::time::sleep(latency).await;
    }

    let info = request_info(&method, &path, &query);
    match shared.take_request_fault(method.as_str(), &path, entry.dry_run) {
        Some(RequestFault::Hold) => {
            entry.fault = Some("hold".into());
            let mut gate = shared.hold_gate.subscribe();
            let generation = *gate.borrow_and_update();
            // Counted while waiting, also when the client gives up and the future is dropped.
            struct Held<'a>(&'a AtomicU64);
            impl Drop for Held<'_> {
                fn drop(&mut self) {
                    self.0.fetch_sub(1, Ordering::SeqCst);
                }
            }
            shared.held.fetch_add(1, Ordering::SeqCst);
            let held = Held(&shared.held);
            let mut sd = shared.shutdown.clone();
            tokio::select! {
                _ = gate.wait_for(|g| *g != generation) => {}
                _ = stopped(&mut sd) => {}
            }
            drop(held);
        }
        Some(RequestFault::Hang) => {
            entry.fault = Some("hang".into());
            shared.record(entry, started);
            let mut sd = shared.shutdown.clone();
            stopped(&mut sd).await;
            return Err(DropConnection);
        }
        Some(RequestFault::Drop) => {
            entry.fault = Some("drop-connection".into());
            shared.record(entry, started);
            return Err(DropConnection);
        }
        Some(RequestFault::Status(code)) => {
            entry.fault = Some("status".into());
            let s = fault_status(code, &info, &user);
            let reply = if code == 429 {
                let mut r = text_reply(429, "Too many requests, please try again later.\n");
                r.headers.push(("Retry-After".into(), "1".into()));
                r.reason = Some("TooManyRequests".into());
                r
            } else {
                status_reply(&s, pretty)
            };
            entry.status = reply.status;
            entry.reason = reply.reason.clone();
            shared.record(entry, started);
            return Ok(finish(reply, identity.is_some(), parts.version));
        }
        Some(RequestFault::DropMid) => entry.fault = Some("drop-mid-response".into()),
        None => {}
    }

    let body_bytes = match Limited::new(body, 3 * 1024 * 1024).collect().await {
        Ok(c) => c.to_bytes(),
        Err(_) => {
            let reply = status_reply(
                &StatusBody::new(
                    413,
                    "RequestEntityTooLarge",
                    "Request entity too large: limit is 3145728",
                    None,
                ),
                pretty,
            );
            entry.status = 413;
            entry.reason = reply.reason.clone();
            shared.record(entry, started);
            return Ok(finish(reply, identity.is_some(), parts.version));
        }
    };

    let mut reply = handle(
        &shared,
        identity,
        &user,
        &method,
        &path,
        &query,
        &headers,
        &body_bytes,
        &info,
        pretty,
        &mut entry,
    )
    .await;
    if entry.fault.as_deref() == Some("drop-mid-response") {
        reply.cut = true;
    }
    entry.status = reply.status;
    entry.reason = reply.reason.clone();
    shared.record(entry, started);
    Ok(finish(reply, identity.is_some(), parts.version))
}

fn finish(reply: Reply, authenticated: bool, _version: http::Version) -> Response<Body> {
    let mut resp = Response::new(reply.body);
    *resp.status_mut() =
        StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&uuid::Uuid::new_v4().to_string()) {
        h.insert("audit-id", v);
    }
    for (k, v) in reply.headers {
        if let (Ok(name), Ok(value)) = (
            http::header::HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(&v),
        ) {
            h.append(name, value);
        }
    }
    if authenticated {
        for name in [
            "x-kubernetes-pf-flowschema-uid",
            "x-kubernetes-pf-prioritylevel-uid",
        ] {
            if let Ok(v) = HeaderValue::from_str(&uuid::Uuid::new_v4().to_string()) {
                h.insert(name, v);
            }
        }
    }
    if reply.cut {
        // Send the headers and half the body, then fail the stream: hyper aborts the connection.
        let (parts, body) = resp.into_parts();
        let stream = futures_util::stream::once(async move {
            match body.collect().await {
                Ok(c) => {
                    let b = c.to_bytes();
                    Ok(Frame::data(b.slice(..b.len() / 2)))
                }
                Err(e) => Err(e),
            }
        })
        .chain(futures_util::stream::once(async {
            Err(std::io::Error::other(
                "connection dropped mid-response by an injected fault",
            ))
        }));
        return Response::from_parts(parts, BodyExt::boxed(StreamBody::new(stream)));
    }
    resp
}

#[allow(clippy::too_many_arguments)]
async fn handle(
    shared: &Arc<Shared>,
    identity: Option<Identity>,
    user: &str,
    method: &Method,
    path: &str,
    query: &[(String, String)],
    headers: &HeaderMap,
    body: &Bytes,
    info: &RequestInfo,
    pretty: bool,
    entry: &mut LoggedRequest,
) -> Reply {
    if identity == Some(Identity::Invalid) {
        return status_reply(&status::unauthorized(), pretty);
    }
    if !info.resource_request {
        let verb = method.as_str().to_lowercase();
        if !non_resource_allowed(identity, path) {
            return status_reply(&status::forbidden_path(user, &verb, path), pretty);
        }
        return non_resource(shared, method, path, headers, pretty);
    }
    if !resource_allowed(identity, &info.verb) {
        return status_reply(
            &status::forbidden(
                user,
                &info.verb,
                &info.group,
                &info.resource,
                &info.subresource,
                &info.namespace,
                &info.name,
            ),
            pretty,
        );
    }
    resource(
        shared, method, path, query, headers, body, info, pretty, entry,
    )
    .await
}

fn non_resource(
    shared: &Arc<Shared>,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    pretty: bool,
) -> Reply {
    if method != Method::GET && method != Method::HEAD {
        if discovery_path(path) {
            return status_reply(&status::generic(405, ""), pretty);
        }
        return not_found_text();
    }
    let accept = headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let aggregated = accept
        .split(',')
        .any(|p| p.contains("as=APIGroupDiscoveryList"));
    let trimmed = path.trim_end_matches('/');
    let parts: Vec<&str> = trimmed.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["version"] => json_reply(200, &discovery::version(), pretty),
        ["healthz"] | ["livez"] | ["readyz"] => text_reply(200, "ok"),
        ["api"] | ["apis"] if aggregated => {
            let (doc, etag) = if parts[0] == "api" {
                (discovery::aggregated_api(), discovery::AGGREGATED_API_ETAG)
            } else {
                (
                    discovery::aggregated_apis(),
                    discovery::AGGREGATED_APIS_ETAG,
                )
            };
            if headers
                .get(http::header::IF_NONE_MATCH)
                .and_then(|v| v.to_str().ok())
                == Some(etag)
            {
                return Reply {
                    status: 304,
                    headers: vec![
                        ("Etag".into(), etag.into()),
                        ("Vary".into(), "Accept".into()),
                        ("Cache-Control".into(), "public".into()),
                    ],
                    body: full(Bytes::new()),
                    reason: None,
                    cut: false,
                };
            }
            Reply {
                status: 200,
                headers: vec![
                    ("Cache-Control".into(), "public".into()),
                    (
                        "Content-Type".into(),
                        discovery::AGGREGATED_CONTENT_TYPE.into(),
                    ),
                    ("Etag".into(), etag.into()),
                    ("Vary".into(), "Accept".into()),
                ],
                body: full(gojson::encode(&doc, pretty)),
                reason: None,
                cut: false,
            }
        }
        ["api"] => json_reply(200, &discovery::api(&shared.addr.to_string()), pretty),
        ["apis"] => json_reply(200, &discovery::apis(), pretty),
        ["api", v] => match discovery::resource_list("", v) {
            Some(d) => json_reply(200, &d, pretty),
            None => status_reply(&status::generic(404, ""), pretty),
        },
        ["apis", g] => match discovery::api_group(g) {
            Some(d) => json_reply(200, &d, pretty),
            None => not_found_text(),
        },
        ["apis", g, v] => match discovery::resource_list(g, v) {
            Some(d) => json_reply(200, &d, pretty),
            None if discovery::group_served(g) => status_reply(&status::generic(404, ""), pretty),
            None => not_found_text(),
        },
        ["openapi", "v2"] => {
            if accept.contains("protobuf") {
                Reply {
                    status: 200,
                    headers: vec![
                        (
                            "Content-Type".into(),
                            "application/com.github.proto-openapi.spec.v2.v1.0+protobuf".into(),
                        ),
                        ("Cache-Control".into(), "no-cache, private".into()),
                    ],
                    body: full(crate::sandbox::openapi_v2_protobuf()),
                    reason: None,
                    cut: false,
                }
            } else {
                json_reply(
                    200,
                    &json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.28.0"}, "paths": {}}),
                    pretty,
                )
            }
        }
        ["openapi", "v3"] => json_reply(200, &crate::sandbox::openapi_v3_root(), pretty),
        ["openapi", "v3", rest @ ..] => match crate::sandbox::openapi_v3_doc(&rest.join("/")) {
            Some(d) => json_reply(200, &d, pretty),
            None => not_found_text(),
        },
        _ => not_found_text(),
    }
}

fn discovery_path(path: &str) -> bool {
    path == "/api"
        || path == "/apis"
        || path.starts_with("/api/")
        || path.starts_with("/apis/")
        || path == "/version"
}

#[allow(clippy::too_many_arguments)]
async fn resource(
    shared: &Arc<Shared>,
    method: &Method,
    path: &str,
    query: &[(String, String)],
    headers: &HeaderMap,
    body: &Bytes,
    info: &RequestInfo,
    pretty: bool,
    entry: &mut LoggedRequest,
) -> Reply {
    let Some(k) = kinds::lookup(&info.group, &info.version, &info.resource) else {
        if let Some(g) = discovery::generic_resource(&info.group, &info.version, &info.resource) {
            let timeout = query_get(query, "timeoutSeconds")
                .and_then(|t| t.parse().ok())
                .unwrap_or(1800);
            return generic_resource(shared, timeout, g, method, info, headers, pretty);
        }
        if info.group.is_empty() || discovery::group_served(&info.group) {
            return status_reply(&status::generic(404, ""), pretty);
        }
        return not_found_text();
    };
    let sub_ok = match info.subresource.as_str() {
        "" | "status" => true,
        "scale" => k.kind == "Deployment",
        _ => false,
    };
    if info.extra > 0 || !sub_ok {
        return status_reply(&status::generic(404, ""), pretty);
    }
    // A namespaced kind addressed without a namespace (or the reverse) has no route.
    let ns = info.namespace.clone();
    // A namespaced kind addressed without a namespace (or the reverse) has no route.
    if k.namespaced
        && info.namespace.is_empty()
        && !(info.name.is_empty() && (info.verb == "list" || info.verb == "watch"))
    {
        return status_reply(
            &status::generic(if info.name.is_empty() { 405 } else { 404 }, ""),
            pretty,
        );
    }
    // RequestInfo puts a namespace's own name in `namespace`; anything else is no route.
    if !k.namespaced && !info.namespace.is_empty() && info.namespace != info.name {
        return status_reply(&status::generic(404, ""), pretty);
    }
    let ct = media_type(headers);
    let has_body = !body.is_empty();
    let consumes_ok = |allowed: &[&str]| {
        if ct.is_empty() {
            return false;
        }
        allowed.contains(&ct.as_str())
    };
    let dry_run = match query
        .iter()
        .filter(|(k, _)| k == "dryRun")
        .map(|(_, v)| v.as_str())
        .collect::<Vec<_>>()
    {
        v if v.is_empty() => false,
        v if v.iter().all(|x| *x == "All") => true,
        v => {
            let opts = match method.as_str() {
                "POST" => "CreateOptions",
                "DELETE" => "DeleteOptions",
                "PATCH" => "PatchOptions",
                _ => "UpdateOptions",
            };
            let shown: Vec<String> = v.iter().map(|x| status::go_quote(x)).collect();
            return status_reply(
                &status::invalid_kind(
                    "meta.k8s.io",
                    opts,
                    "",
                    &[status::FieldError::not_supported(
                        "dryRun",
                        &format!("[]string{{{}}}", shown.join(", ")),
                        &["All"],
                    )],
                ),
                pretty,
            );
        }
    };
    let field_validation = match query_get(query, "fieldValidation") {
        None | Some("") | Some("Warn") => FieldValidation::Warn,
        Some("Strict") => FieldValidation::Strict,
        Some("Ignore") => FieldValidation::Ignore,
        Some(other) => {
            return status_reply(
                &status::bad_request(format!(
                    "fieldValidation parameter unsupported: {}; must be one of: Ignore, Warn, Strict",
                    status::go_quote(other)
                )),
                pretty,
            );
        }
    };
    let manager = query_get(query, "fieldManager")
        .map(str::to_string)
        .unwrap_or_else(|| {
            let ua = headers
                .get(http::header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            ua.split('/')
                .next()
                .unwrap_or("")
                .chars()
                .filter(|c| !c.is_control())
                .take(128)
                .collect()
        });
    let table = wants_table(headers);
    let inject_conflict = matches!(info.verb.as_str(), "update" | "patch" | "delete")
        && shared.conflict_pending(path);
    if matches!(info.verb.as_str(), "update" | "patch" | "delete")
        && let Some(c) = shared.take_competitor(path, Trigger::NextWrite, dry_run)
    {
        entry.fault = Some(shared.run_competitor(k, &ns, &info.name, c));
    }
    // A create is a write to the object it names.
    if info.verb == "create"
        && info.subresource.is_empty()
        && let Some(name) = serde_json::from_slice::<Value>(body).ok().and_then(|b| {
            b.pointer("/metadata/name")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        && let Some(c) = shared.take_competitor(
            &format!("{}/{name}", path.trim_end_matches('/')),
            Trigger::NextWrite,
            dry_run,
        )
    {
        entry.fault = Some(shared.run_competitor(k, &ns, &name, c));
    }
    let ctx = WriteCtx {
        manager,
        dry_run,
        field_validation,
        inject_conflict,
    };

    let result: Result<store::Outcome, StatusBody> =
        match (info.verb.as_str(), info.subresource.as_str()) {
            ("get", "scale") if k.kind == "Deployment" => shared
                .state
                .lock()
                .get_object(k, &ns, &info.name)
                .map(|o| store::Outcome {
                    code: 200,
                    body: store::scale_of(o),
                    warnings: vec![],
                })
                .ok_or_else(|| status::not_found(k, &info.name)),
            ("update" | "patch", sub @ ("status" | "scale"))
                if sub == "status" || k.kind == "Deployment" =>
            {
                let allowed: &[&str] = if info.verb == "update" {
                    &["application/json"]
                } else {
                    &[
                        "application/json-patch+json",
                        "application/merge-patch+json",
                        "application/strategic-merge-patch+json",
                    ]
                };
                if !consumes_ok(allowed) {
                    Err(status::generic(415, "415: Unsupported Media Type"))
                } else {
                    let pt = (info.verb == "patch").then_some(ct.as_str());
                    shared
                        .state
                        .lock()
                        .update_subresource(k, &ns, &info.name, sub, pt, body, &ctx)
                }
            }
            ("get", "" | "status") => {
                let r = shared.state.lock().get(k, &ns, &info.name);
                if r.is_ok()
                    && let Some(c) = shared.take_competitor(path, Trigger::Read, false)
                {
                    entry.fault = Some(shared.run_competitor(k, &ns, &info.name, c));
                }
                r.map(|obj| {
                    let body = if table {
                        table_for(k, std::slice::from_ref(&obj), None, None)
                    } else {
                        obj
                    };
                    store::Outcome {
                        code: 200,
                        body,
                        warnings: vec![],
                    }
                })
            }
            ("list", "") => list(shared, k, info, query, table),
            ("watch", "") => {
                return watch(shared, k, info, query, table, pretty).await;
            }
            ("create", "") if !info.name.is_empty() => Err(status::generic(405, "")),
            ("create", "") => {
                // Only JSON bodies are emulated (the real server also takes YAML and protobuf).
                if !consumes_ok(&["application/json"]) {
                    Err(status::generic(415, "415: Unsupported Media Type"))
                } else if k.namespaced && ns.is_empty() {
                    Err(status::generic(405, ""))
                } else {
                    shared.state.lock().create(k, &ns, body, &ctx)
                }
            }
            ("update", "") => {
                if !consumes_ok(&["application/json"]) {
                    Err(status::generic(415, "415: Unsupported Media Type"))
                } else {
                    shared.state.lock().update(k, &ns, &info.name, body, &ctx)
                }
            }
            ("patch", "") => {
                if !consumes_ok(&[
                    "application/json-patch+json",
                    "application/merge-patch+json",
                    "application/strategic-merge-patch+json",
                ]) {
                    Err(status::generic(415, "415: Unsupported Media Type"))
                } else {
                    shared
                        .state
                        .lock()
                        .patch(k, &ns, &info.name, &ct, body, &ctx)
                }
            }
            ("delete", "") => {
                if has_body && !ct.is_empty() && ct != "application/json" {
                    Err(status::generic(415, "415: Unsupported Media Type"))
                } else {
                    match delete_options(body) {
                        Err(e) => Err(e),
                        Ok(opts) => {
                            let dry = dry_run
                                || opts
                                    .get("dryRun")
                                    .and_then(Value::as_array)
                                    .is_some_and(|a| a.iter().any(|x| x == "All"));
                            shared.state.lock().delete(
                                k,
                                &ns,
                                &info.name,
                                &opts,
                                dry,
                                inject_conflict,
                            )
                        }
                    }
                }
            }
            ("deletecollection", "") => delete_collection(shared, k, info, query, dry_run),
            _ => Err(status::generic(405, "")),
        };
    if inject_conflict && matches!(&result, Err(e) if e.code == 409 && e.reason == "Conflict") {
        shared.consume_conflict(path);
        entry.fault = Some("conflict".into());
    }
    match result {
        Ok(out) => {
            let mut r = json_reply(out.code, &out.body, pretty);
            if table && (info.verb == "get" || info.verb == "list") {
                r.headers[0].1 = "application/json;as=Table;v=v1;g=meta.k8s.io".into();
            }
            for w in out.warnings {
                r.headers
                    .push(("Warning".into(), format!("299 - {}", status::go_quote(&w))));
            }
            r
        }
        Err(s) => status_reply(&s, pretty),
    }
}

fn delete_options(body: &Bytes) -> Result<Value, StatusBody> {
    if body.is_empty() {
        return Ok(json!({}));
    }
    match gojson::parse(body) {
        Ok(v @ Value::Object(_)) => {
            if let Some(pp) = v.get("propagationPolicy").and_then(Value::as_str)
                && !["Foreground", "Background", "Orphan"].contains(&pp)
            {
                return Err(status::invalid_kind(
                    "meta.k8s.io",
                    "DeleteOptions",
                    "",
                    &[status::FieldError::not_supported(
                        "propagationPolicy",
                        &status::go_quote(pp),
                        &["Foreground", "Background", "Orphan"],
                    )],
                ));
            }
            Ok(v)
        }
        Ok(_) => Err(StatusBody::new(
            500,
            "",
            "decoded object cannot be converted to DeleteOptions",
            None,
        )),
        Err(e) => Err(StatusBody::new(
            500,
            "",
            format!("couldn't get version/kind; json parse error: {e}"),
            None,
        )),
    }
}

fn list(
    shared: &Shared,
    k: &'static Kind,
    info: &RequestInfo,
    query: &[(String, String)],
    table: bool,
) -> Result<store::Outcome, StatusBody> {
    let sel = Selectors::parse(
        k,
        query_get(query, "labelSelector"),
        query_get(query, "fieldSelector"),
    )?;
    let limit: usize = query_get(query, "limit")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let start_after = match query_get(query, "continue").filter(|c| !c.is_empty()) {
        None => None,
        Some(token) => Some(decode_continue(token).ok_or_else(|| {
            status::bad_request("continue key is not valid: illegal base64 data")
        })?),
    };
    let st = shared.state.lock();
    let ns = (!info.namespace.is_empty()).then_some(info.namespace.as_str());
    let all = st.select(k, ns, &sel);
    let mut items: Vec<&Value> = all
        .into_iter()
        .filter(|o| {
            start_after.as_ref().is_none_or(|after| {
                let key = format!(
                    "{}/{}",
                    o.pointer("/metadata/namespace")
                        .and_then(Value::as_str)
                        .unwrap_or(""),
                    o.pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                );
                key.as_str() > after.as_str()
            })
        })
        .collect();
    let mut cont = None;
    if limit > 0 && items.len() > limit {
        let remaining = items.len() - limit;
        items.truncate(limit);
        let last = items.last().map(|o| {
            format!(
                "{}/{}",
                o.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
                o.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            )
        });
        if let Some(last) = last {
            cont = Some((encode_continue(&last, st.rv), remaining));
        }
    }
    let body = if table {
        let full: Vec<Value> = items.iter().map(|o| kinds::with_type_meta(k, o)).collect();
        table_for(k, &full, Some(st.rv), cont.as_ref().map(|(t, _)| t.clone()))
    } else {
        store::list_body(k, items.into_iter().cloned().collect(), st.rv, cont)
    };
    Ok(store::Outcome {
        code: 200,
        body,
        warnings: vec![],
    })
}

fn encode_continue(last_key: &str, rv: u64) -> String {
    use base64::Engine;
    let token = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{last_key}\u{0}")});
    base64::engine::general_purpose::URL_SAFE.encode(token.to_string())
}

fn decode_continue(token: &str) -> Option<String> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::URL_SAFE
        .decode(token)
        .ok()?;
    let v: Value = serde_json::from_slice(&bytes).ok()?;
    let start = v.get("start")?.as_str()?;
    Some(start.trim_end_matches('\u{0}').to_string())
}

fn delete_collection(
    shared: &Shared,
    k: &'static Kind,
    info: &RequestInfo,
    query: &[(String, String)],
    dry_run: bool,
) -> Result<store::Outcome, StatusBody> {
    let sel = Selectors::parse(
        k,
        query_get(query, "labelSelector"),
        query_get(query, "fieldSelector"),
    )?;
    let mut st = shared.state.lock();
    let ns = (!info.namespace.is_empty()).then_some(info.namespace.as_str());
    let names: Vec<(String, String)> = st
        .select(k, ns, &sel)
        .iter()
        .map(|o| {
            (
                o.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                o.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect();
    let mut items = Vec::new();
    for (ns, name) in names {
        if let Some(obj) = st.get_object(k, &ns, &name).cloned() {
            st.delete(k, &ns, &name, &json!({}), dry_run, false)?;
            items.push(obj);
        }
    }
    Ok(store::Outcome {
        code: 200,
        body: store::list_body(k, items, st.rv, None),
        warnings: vec![],
    })
}

fn table_for(k: &Kind, objs: &[Value], rv: Option<u64>, cont: Option<String>) -> Value {
    let now = timefmt::now_secs();
    let rows: Vec<Value> = objs.iter().map(|o| json!({"cells": kinds::table_cells(k, o, now), "object": kinds::partial_metadata(o)})).collect();
    let mut meta = serde_json::Map::new();
    if let Some(rv) = rv {
        meta.insert("resourceVersion".into(), json!(rv.to_string()));
    } else if let Some(rv) = objs
        .first()
        .and_then(|o| o.pointer("/metadata/resourceVersion"))
    {
        meta.insert("resourceVersion".into(), rv.clone());
    }
    if let Some(c) = cont {
        meta.insert("continue".into(), json!(c));
    }
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "columnDefinitions": kinds::table_columns(k), "rows": rows})
}

fn generic_resource(
    shared: &Shared,
    watch_timeout: u64,
    g: &discovery::GenericResource,
    method: &Method,
    info: &RequestInfo,
    headers: &HeaderMap,
    pretty: bool,
) -> Reply {
    let list_kind = format!("{}List", g.kind);
    let api_version = if g.group.is_empty() {
        g.version.clone()
    } else {
        format!("{}/{}", g.group, g.version)
    };
    match (method.as_str(), info.name.is_empty(), info.verb.as_str()) {
        ("GET", true, "list") => {
            let rv = shared.state.lock().rv;
            if wants_table(headers) {
                let mut r = json_reply(
                    200,
                    &json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv.to_string()},
                        "columnDefinitions": [{"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0}],
                        "rows": []}),
                    pretty,
                );
                r.headers[0].1 = "application/json;as=Table;v=v1;g=meta.k8s.io".into();
                return r;
            }
            json_reply(
                200,
                &json!({"kind": list_kind, "apiVersion": api_version, "metadata": {"resourceVersion": rv.to_string()}, "items": []}),
                pretty,
            )
        }
        ("GET", true, "watch") => {
            // Nothing ever changes: keep the stream open, without events, until it times out.
            let shutdown = shared.shutdown.clone();
            let timeout = Duration::from_secs(watch_timeout);
            let idle = futures_util::stream::unfold(true, move |first| {
                let mut shutdown = shutdown.clone();
                async move {
                    if first {
                        tokio::select! {
                            _ = tokio::time::sleep(timeout) => {}
                            _ = stopped(&mut shutdown) => {}
                        }
                    }
                    None::<(Result<Frame<Bytes>, std::io::Error>, bool)>
                }
            });
            Reply {
                status: 200,
                headers: vec![
                    ("Cache-Control".into(), "no-cache, private".into()),
                    ("Content-Type".into(), "application/json".into()),
                ],
                body: BodyExt::boxed(StreamBody::new(idle)),
                reason: None,
                cut: false,
            }
        }
        ("GET", false, _) => {
            let gr = status::group_resource(&g.group, &g.resource);
            status_reply(
                &StatusBody::new(
                    404,
                    "NotFound",
                    format!("{gr} \"{}\" not found", info.name),
                    Some(status::details(&info.name, &g.group, &g.resource)),
                ),
                pretty,
            )
        }
        _ => status_reply(&status::generic(405, ""), pretty),
    }
}

// ---------------------------------------------------------------------------------------------
// Watch

fn event_line(event_type: &str, obj: Value) -> Bytes {
    let mut m = serde_json::Map::new();
    m.insert("type".into(), json!(event_type));
    m.insert("object".into(), obj);
    Bytes::from(gojson::encode(&Value::Object(m), false))
}

async fn watch(
    shared: &Arc<Shared>,
    k: &'static Kind,
    info: &RequestInfo,
    query: &[(String, String)],
    table: bool,
    pretty: bool,
) -> Reply {
    let sel = match Selectors::parse(
        k,
        query_get(query, "labelSelector"),
        query_get(query, "fieldSelector"),
    ) {
        Ok(s) => s,
        Err(e) => return status_reply(&e, pretty),
    };
    if query_get(query, "sendInitialEvents").is_some() {
        return status_reply(
            &status::invalid_kind(
                "meta.k8s.io",
                "ListOptions",
                "",
                &[status::FieldError::forbidden(
                    "sendInitialEvents",
                    "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
                )],
            ),
            pretty,
        );
    }
    let rv_param = query_get(query, "resourceVersion").unwrap_or("");
    let start_rv: Option<u64> = match rv_param {
        "" | "0" => None,
        other => match other.parse::<u64>() {
            Ok(v) => Some(v),
            Err(_) => {
                return status_reply(
                    &status::invalid_kind(
                        "meta.k8s.io",
                        "ListOptions",
                        "",
                        &[status::FieldError::invalid(
                            "resourceVersion",
                            &status::go_quote(other),
                            "must be an integer",
                        )],
                    ),
                    pretty,
                );
            }
        },
    };
    let timeout = query_get(query, "timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or_else(|| {
            Duration::from_secs(1800 + (uuid::Uuid::new_v4().as_bytes()[0] as u64 % 60) * 30)
        });
    let bookmarks = parse_bool(query_get(query, "allowWatchBookmarks"));
    let ns = (!info.namespace.is_empty() && k.namespaced).then(|| info.namespace.clone());

    let (initial, rx, current_rv) = {
        let st = shared.state.lock();
        let rx = st.events.subscribe();
        let mut initial: Vec<(String, Value)> = Vec::new();
        match start_rv {
            None => {
                for o in st.select(k, ns.as_deref(), &sel) {
                    initial.push(("ADDED".into(), kinds::with_type_meta(k, o)));
                }
            }
            Some(from) => {
                let oldest = st.history.first().map(|e| e.rv);
                if let Some(oldest) = oldest
                    && from + 1 < oldest
                    && from < st.rv
                {
                    drop(st);
                    return status_reply(
                        &StatusBody::new(
                            410,
                            "Expired",
                            format!("too old resource version: {from} ({})", oldest - 1),
                            Some(json!({})),
                        ),
                        pretty,
                    );
                }
                for ev in st.history.iter().filter(|e| e.rv > from) {
                    if let Some(line) = filter_event(ev, k, ns.as_deref(), &sel) {
                        initial.push(line);
                    }
                }
            }
        }
        (initial, rx, st.rv)
    };

    let (tx, out_rx) = mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(64);
    let mut shutdown = shared.shutdown.clone();
    let kind_for_bookmark = k;
    tokio::spawn(async move {
        let mut rx = rx;
        let mut last_rv = current_rv;
        let render = |t: String, o: Value| -> Bytes {
            if table {
                let full = o.clone();
                event_line(
                    &t,
                    table_for(kind_for_bookmark, std::slice::from_ref(&full), None, None),
                )
            } else {
                event_line(&t, o)
            }
        };
        for (t, o) in initial {
            if tx.send(Ok(Frame::data(render(t, o)))).await.is_err() {
                return;
            }
        }
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval(Duration::from_secs(60));
        tick.tick().await;
        loop {
            tokio::select! {
                _ = &mut deadline => break,
                _ = crate::server::stopped(&mut shutdown) => break,
                _ = tick.tick(), if bookmarks => {
                    // An empty object of the kind carrying only the revision, as the real server sends.
                    let mut empty = crate::schema::zero_struct(crate::schema::type_def(kind_for_bookmark.type_idx));
                    empty["metadata"] = json!({"resourceVersion": last_rv.to_string(), "creationTimestamp": null});
                    let bm = kinds::with_type_meta(kind_for_bookmark, &empty);
                    if tx.send(Ok(Frame::data(event_line("BOOKMARK", bm)))).await.is_err() { return; }
                }
                ev = rx.recv() => match ev {
                    Ok(ev) => {
                        last_rv = last_rv.max(ev.rv);
                        if let Some((t, o)) = filter_event(&ev, kind_for_bookmark, ns.as_deref(), &sel)
                            && tx.send(Ok(Frame::data(render(t, o)))).await.is_err() { return; }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => break,
                    Err(broadcast::error::RecvError::Closed) => break,
                },
                _ = tx.closed() => return,
            }
        }
    });
    let stream = futures_util::stream::unfold(out_rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Reply {
        status: 200,
        headers: vec![
            ("Cache-Control".into(), "no-cache, private".into()),
            ("Content-Type".into(), "application/json".into()),
        ],
        body: BodyExt::boxed(StreamBody::new(stream)),
        reason: None,
        cut: false,
    }
}

/// The event a watcher of `k` in `ns` with `sel` sees for `ev`, if any.
fn filter_event(
    ev: &Event,
    k: &'static Kind,
    ns: Option<&str>,
    sel: &Selectors,
) -> Option<(String, Value)> {
    if ev.kind.resource != k.resource {
        return None;
    }
    if let Some(ns) = ns
        && ev.namespace != ns
    {
        return None;
    }
    let now = sel.matches(k, &ev.object);
    match (ev.event_type, ev.old.as_ref()) {
        ("MODIFIED", Some(old)) => {
            let before = sel.matches(k, old);
            match (before, now) {
                (true, true) => Some(("MODIFIED".into(), ev.object.clone())),
                (false, true) => Some(("ADDED".into(), ev.object.clone())),
                (true, false) => Some(("DELETED".into(), ev.object.clone())),
                (false, false) => None,
            }
        }
        (t, _) => now.then(|| (t.to_string(), ev.object.clone())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_info_like_apiserver() {
        let q = vec![];
        let i = request_info(
            &Method::GET,
            "/apis/apps/v1/namespaces/shop/deployments/web",
            &q,
        );
        assert!(i.resource_request);
        assert_eq!(
            (
                i.verb.as_str(),
                i.group.as_str(),
                i.namespace.as_str(),
                i.resource.as_str(),
                i.name.as_str()
            ),
            ("get", "apps", "shop", "deployments", "web")
        );
        let i = request_info(&Method::GET, "/api/v1/namespaces/shop", &q);
        assert_eq!(
            (i.resource.as_str(), i.name.as_str(), i.namespace.as_str()),
            ("namespaces", "shop", "shop")
        );
        let i = request_info(&Method::GET, "/apis/apps/v1", &q);
        assert!(!i.resource_request);
        let i = request_info(&Method::GET, "/api/v1", &q);
        assert!(!i.resource_request);
        let w = vec![("watch".to_string(), "true".to_string())];
        assert_eq!(
            request_info(&Method::GET, "/api/v1/namespaces/x/services", &w).verb,
            "watch"
        );
        assert_eq!(
            request_info(&Method::DELETE, "/api/v1/namespaces/x/services", &q).verb,
            "deletecollection"
        );
    }
}
