//! The fourth layer: the API handlers. A routed request (its [`request::RequestInfo`], query,
//! headers and body) becomes a [`Reply`]: get, list (with tables and continue tokens), watch
//! streams, create, update, patch, delete and deletecollection of a stored kind and its
//! subresources; the resources the real server advertises but the sandbox does not store;
//! discovery, OpenAPI, `/version` and health.
//!
//! The layers above plug in through [`Hooks`] (the fault middleware's injected conflicts and
//! competing writers) without this layer knowing about faults.
//!
//! Uses [`crate::store`], [`crate::kinds`] and [`crate::model`].

pub mod discovery;
mod generic;
mod list;
pub mod nonresource;
mod openapi;
pub mod request;
pub mod resource;
mod table;
mod watch;

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use serde_json::Value;
use tokio::sync::watch as signal;

use crate::kinds::{Kind, Registry};
use crate::model::gojson;
use crate::model::status::StatusBody;
use crate::store::Store;

pub use generic::generic_resource;

/// A response body: complete, or streamed (watch).
pub type Body = BoxBody<Bytes, std::io::Error>;

/// A response, before the HTTP layer adds the headers every response carries.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Body,
    /// The Status `reason` of an error, for the request log.
    pub reason: Option<String>,
    /// Send half the body, then drop the connection (an injected fault).
    pub cut: bool,
    /// The body, when it is one JSON document (to write it as YAML instead).
    pub json: Option<Value>,
}

/// What the handlers work on.
pub struct Ctx<'a> {
    pub store: &'a Store,
    /// The kinds served.
    pub registry: &'a Registry,
    /// The address clients reach the server at (`/api` reports it).
    pub addr: SocketAddr,
    /// Becomes `true` when the sandbox stops: open watch streams end.
    pub shutdown: &'a signal::Receiver<bool>,
    /// Indent JSON (`?pretty=true`, or a curl/wget/browser User-Agent).
    pub pretty: bool,
    /// Who the request acts as, as a UserInfo (after impersonation).
    pub user: Value,
    /// The authorizer's answer to a SelfSubjectAccessReview spec, for that user.
    pub access: Option<&'a dyn Fn(&Value) -> Value>,
}

/// What a layer above may do around a request's store access, at the moments a real race
/// would happen: answer a write with the stale-resourceVersion conflict, or let another writer
/// act. The defaults do nothing.
pub trait Hooks {
    /// Asked before a PUT, PATCH or DELETE of `object_path` is processed: answer it with the
    /// conflict a stale resourceVersion gets, where the precondition check happens?
    fn conflict_armed(&mut self, _object_path: &str) -> bool {
        false
    }

    /// The armed conflict was sent.
    fn conflict_sent(&mut self, _object_path: &str) {}

    /// Right before a write to the object `name` of `k` in `ns` (at `object_path`) is processed:
    /// a PUT, PATCH or DELETE of it, or the POST that creates it.
    fn before_write(
        &mut self,
        _store: &Store,
        _k: &'static dyn Kind,
        _ns: &str,
        _name: &str,
        _object_path: &str,
        _dry_run: bool,
    ) {
    }

    /// Right after a GET of the object has been answered successfully.
    fn after_read(
        &mut self,
        _store: &Store,
        _k: &'static dyn Kind,
        _ns: &str,
        _name: &str,
        _object_path: &str,
    ) {
    }
}

/// Resolves when the sandbox shuts down.
pub async fn stopped(rx: &mut signal::Receiver<bool>) {
    let _ = rx.wait_for(|v| *v).await;
}

/// A complete body.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never: Infallible| match never {})
        .boxed()
}

/// JSON as the API server writes it (`Content-Type: application/json`).
pub fn json_reply(code: u16, v: Value, pretty: bool) -> Reply {
    Reply {
        status: code,
        headers: vec![
            ("Content-Type".into(), "application/json".into()),
            ("Cache-Control".into(), "no-cache, private".into()),
        ],
        body: full(gojson::encode(&v, pretty)),
        reason: None,
        cut: false,
        json: Some(v),
    }
}

/// An error as a `metav1.Status` body, with its reason and extra headers.
pub fn status_reply(s: &StatusBody, pretty: bool) -> Reply {
    let mut r = json_reply(s.code, s.to_json(), pretty);
    r.reason = (!s.reason.is_empty()).then(|| s.reason.clone());
    r.headers.extend(s.headers.iter().cloned());
    r
}

/// Plain text, as Go's `http.Error` writes it.
pub fn text_reply(code: u16, text: &str) -> Reply {
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
        json: None,
    }
}

/// The mux's plain-text 404 for a path nothing serves.
pub fn not_found_text() -> Reply {
    text_reply(404, "404 page not found\n")
}
