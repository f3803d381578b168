//! The fifth layer: HTTP. Connections (plain or TLS, HTTP/1.1 keep-alive or HTTP/2 by ALPN),
//! the request log, the fault middleware, authentication and authorization, and routing to the
//! API handlers — in the real server's order: faults and latency → authentication (401) →
//! authorization (403, dry runs too) → routing (404/405) → the handlers.
//!
//! * [`conn`] — accepting connections, and the headers every response carries;
//! * [`tls`] — the generated CA and server certificate;
//! * [`auth`] — identities, tokens and what each may do;
//! * [`faults`] — the fault middleware;
//! * [`log`] — the request log and counters;
//! * [`routing`] — which handler serves a request.
//!
//! The `/sandbox/…` control surface plugs in through [`ControlSurface`].
//!
//! Uses [`crate::api`], [`crate::store`], [`crate::kinds`] and [`crate::model`].

pub mod auth;
pub mod conn;
pub mod faults;
pub mod log;
mod routing;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use serde_json::Value;
use tokio::sync::watch;

use crate::api::request::{RequestInfo, parse_bool, query_get, request_info};
use crate::api::{Body, Ctx, Reply, status_reply, stopped, text_reply};
use crate::kinds::Registry;
use crate::model::status::StatusBody;
use crate::store::Store;
use auth::{Identity, Tokens};
use conn::{DropConnection, finish};
use faults::{Faults, RequestFault, RequestHooks};
use log::{LoggedRequest, RequestLog};

/// The largest request body (the real server's limit): 413 above it.
const MAX_BODY: usize = 3 * 1024 * 1024;

/// The `/sandbox/…` paths: a surface for standalone runs, served by a layer above.
pub trait ControlSurface: Send + Sync {
    /// Answer a control request (not logged, not counted).
    fn handle(
        &self,
        server: &Server,
        identity: Option<Identity>,
        method: &Method,
        path: &str,
        query: &[(String, String)],
        body: &Bytes,
    ) -> Reply;
}

/// Everything the connections share.
pub struct Server {
    pub store: Arc<Store>,
    /// The kinds served.
    pub registry: Registry,
    pub tokens: Tokens,
    pub log: RequestLog,
    pub faults: Faults,
    /// Where clients reach the server.
    pub addr: SocketAddr,
    /// Becomes `true` when the sandbox stops.
    pub shutdown: watch::Receiver<bool>,
    control: Option<Box<dyn ControlSurface>>,
}

impl Server {
    pub fn new(
        store: Arc<Store>,
        tokens: Tokens,
        log: RequestLog,
        registry: Registry,
        addr: SocketAddr,
        shutdown: watch::Receiver<bool>,
        control: Option<Box<dyn ControlSurface>>,
    ) -> Self {
        Server {
            store,
            registry,
            tokens,
            log,
            faults: Faults::default(),
            addr,
            shutdown,
            control,
        }
    }
}

/// One request as it arrived, parsed.
struct Parsed {
    method: Method,
    path: String,
    query: Vec<(String, String)>,
    headers: HeaderMap,
    version: http::Version,
    identity: Option<Identity>,
    user: &'static str,
    pretty: bool,
    /// Path and query as sent (the impersonation filter's 500 quotes it).
    uri: String,
}

/// Serve one HTTP request.
pub async fn serve(
    server: Arc<Server>,
    conn_id: u64,
    req: Request<Incoming>,
) -> Result<Response<Body>, DropConnection> {
    let started = Instant::now();
    let (parts, body) = req.into_parts();
    let query: Vec<(String, String)> =
        form_urlencoded::parse(parts.uri.query().unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    let user_agent = parts
        .headers
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let identity = server.tokens.authenticate(&parts.headers);
    let req = Parsed {
        pretty: parse_bool(query_get(&query, "pretty"))
            || ["curl", "Wget", "Mozilla/5.0"]
                .iter()
                .any(|p| user_agent.starts_with(p)),
        path: parts.uri.path().to_string(),
        query,
        headers: parts.headers,
        version: parts.version,
        method: parts.method,
        identity,
        user: auth::user_name(identity),
        uri: parts
            .uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default(),
    };
    let authenticated = req.identity.is_some();

    if let Some(control) = &server.control
        && (req.path.starts_with("/sandbox/") || req.path == "/sandbox")
    {
        let body = body
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        let reply = control.handle(
            &server,
            req.identity,
            &req.method,
            &req.path,
            &req.query,
            &body,
        );
        return Ok(finish(reply, authenticated));
    }

    let mut entry = LoggedRequest {
        seq: server.log.next_seq(),
        method: req.method.as_str().to_string(),
        path: req.path.clone(),
        query: req
            .query
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&"),
        user: req.user.to_string(),
        dry_run: query_get(&req.query, "dryRun").is_some_and(|v| !v.is_empty()),
        status: 0,
        reason: None,
        fault: None,
        started_ms: server.log.elapsed_ms(started),
        duration_ms: 0.0,
        connection_id: conn_id,
        http_version: format!("{:?}", req.version),
        user_agent,
        impersonated: None,
    };
    let info = request_info(&req.method, &req.path, &req.query);

    if let Some(reply) = request_faults(&server, &req, &info, &mut entry, started).await? {
        entry.status = reply.status;
        entry.reason = reply.reason.clone();
        server.log.record(entry, started);
        return Ok(finish(reply, authenticated));
    }

    let Ok(body) = Limited::new(body, MAX_BODY).collect().await else {
        let reply = status_reply(
            &StatusBody::new(
                413,
                "RequestEntityTooLarge",
                "Request entity too large: limit is 3145728",
                None,
            ),
            req.pretty,
        );
        entry.status = reply.status;
        entry.reason = reply.reason.clone();
        server.log.record(entry, started);
        return Ok(finish(reply, authenticated));
    };
    let mut hooks = RequestHooks {
        faults: &server.faults,
        mark: None,
    };
    let ctx = Ctx {
        store: &server.store,
        registry: &server.registry,
        addr: server.addr,
        shutdown: &server.shutdown,
        pretty: req.pretty,
        user: Value::Null,
        access: None,
    };
    let mut reply = authorized(&ctx, &mut hooks, &req, &body.to_bytes(), &info, &mut entry);
    if let Some(mark) = hooks.mark {
        entry.fault = Some(mark);
    }
    if entry.fault.as_deref() == Some("drop-mid-response") {
        reply.cut = true;
    }
    entry.status = reply.status;
    entry.reason = reply.reason.clone();
    server.log.record(entry, started);
    Ok(finish(reply, authenticated))
}

/// The request faults, before authentication: latency, then the first matching fault.
/// `Ok(Some(reply))` answers the request, `Err` drops the connection, `Ok(None)` goes on.
async fn request_faults(
    server: &Server,
    req: &Parsed,
    info: &RequestInfo,
    entry: &mut LoggedRequest,
    started: Instant,
) -> Result<Option<Reply>, DropConnection> {
    let latency = server.faults.latency();
    if !latency.is_zero() {
        entry.fault = Some("latency".into());
        tokio::time::sleep(latency).await;
    }
    match server
        .faults
        .take(req.method.as_str(), &req.path, entry.dry_run)
    {
        Some(RequestFault::Hold) => {
            entry.fault = Some("hold".into());
            server.faults.hold(&server.shutdown).await;
        }
        Some(RequestFault::Hang) => {
            entry.fault = Some("hang".into());
            server.log.record(entry.clone(), started);
            let mut sd = server.shutdown.clone();
            stopped(&mut sd).await;
            return Err(DropConnection);
        }
        Some(RequestFault::Drop) => {
            entry.fault = Some("drop-connection".into());
            server.log.record(entry.clone(), started);
            return Err(DropConnection);
        }
        Some(RequestFault::Status(code)) => {
            entry.fault = Some("status".into());
            let reply = if code == 429 {
                // What API priority and fairness sends.
                let mut r = text_reply(429, "Too many requests, please try again later.\n");
                r.headers.push(("Retry-After".into(), "1".into()));
                r.reason = Some("TooManyRequests".into());
                r
            } else {
                status_reply(&faults::status_for(code, info, req.user), req.pretty)
            };
            return Ok(Some(reply));
        }
        Some(RequestFault::DropMid) => entry.fault = Some("drop-mid-response".into()),
        None => {}
    }
    Ok(None)
}

/// Authentication's 401, impersonation, and authorization's 403 (as the impersonated user),
/// then routing.
fn authorized(
    ctx: &Ctx<'_>,
    hooks: &mut RequestHooks<'_>,
    req: &Parsed,
    body: &Bytes,
    info: &RequestInfo,
    entry: &mut LoggedRequest,
) -> Reply {
    if req.identity == Some(Identity::Invalid) {
        return status_reply(&crate::model::status::unauthorized(), req.pretty);
    }
    let mut user = auth::User::of(req.identity);
    match auth::impersonate(&user, &req.headers, &req.uri) {
        Ok(None) => {}
        Ok(Some(as_user)) => {
            entry.impersonated = Some(as_user.name.clone());
            user = as_user;
        }
        Err(auth::ImpersonationError::Internal(text)) => {
            let mut r = text_reply(500, &text);
            r.reason = Some("InternalError".into());
            return r;
        }
        Err(auth::ImpersonationError::Forbidden(s)) => return status_reply(&s, req.pretty),
    }
    let verb = req.method.as_str().to_lowercase();
    if let Err(forbidden) = auth::authorize(&user, info, &verb, &req.path) {
        return status_reply(&forbidden, req.pretty);
    }
    let access = |spec: &Value| auth::access_review(&user, spec);
    let ctx = Ctx {
        user: user.info(),
        access: Some(&access),
        ..*ctx
    };
    routing::route(
        &ctx,
        hooks,
        &req.method,
        &req.path,
        &req.query,
        &req.headers,
        body,
        info,
    )
}
