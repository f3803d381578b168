//! The HTTP transport under kube's middleware: one connection for the whole run.
//!
//! `kube::Client::try_from(Config)` offers only HTTP/1.1 over rustls (ALPN `http/1.1`), so every
//! concurrent request needs a connection — a TCP and a TLS handshake — of its own: the read
//! round opened 4, a dry-run round of 62 changes opened 58 more. Here the same middleware as
//! kube's (base URI, kube's retry of 429/503/504 with our bounds, authentication,
//! impersonation headers, kube's tracing spans) sits on a hyper client that offers `h2` by
//! ALPN and, when the server takes it, sends every request of the run as a stream of one
//! HTTP/2 connection: concurrent requests wait for that one connection instead of opening
//! their own. A server that does not negotiate `h2` gets plain HTTP/1.1 keep-alive, as before
//! (one wasted handshake on the first request, nothing sent on it). Plain `http://` servers get
//! HTTP/1.1 keep-alive. Through a proxy (see [`crate::proxy_connector`]) the same holds, over
//! one tunnel.
//!
//! When this module can go: once kube's own client negotiates HTTP/2 — kube-rs/kube#1923
//! ("Try to enable HTTP/2 support in the client", open; a first attempt is kube-rs/kube#1823)
//! — `kube::Client::try_from(config)` gives the same behaviour, and this module with the
//! direct dependencies on hyper, hyper-util, hyper-rustls, hyper-timeout, tower-http and
//! tracing can be replaced by it plus the retry bounds of [`retry_layer`]. Until then,
//! `tests/it/transport_e2e.rs` (one connection for a whole run) and `tests/it/transport_http1_e2e.rs`
//! (the fallback) hold any replacement to the same behaviour.
//!
//! Name resolution goes through [`crate::proxy_connector::Resolver`], whose failures carry their
//! own type, so that the error messages can tell a name that does not resolve from other
//! connection failures without reading error text.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderMap, Request, Response, Uri};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::{Connection, HttpConnector};
use hyper_util::rt::TokioExecutor;
use kube::client::{Body, ConfigExt};
use tokio::sync::watch;
use tower::{BoxError, ServiceBuilder};
use tower_http::classify::ServerErrorsFailureClass;
use tower_http::trace::TraceLayer;
use tracing::Span;

use crate::connections::Sessions;

type BoxFuture<T> = Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send>>;

/// The server did not negotiate `h2`: nothing was sent on the connection.
#[derive(Debug)]
struct NoH2;

impl std::fmt::Display for NoH2 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the server did not negotiate HTTP/2")
    }
}

impl std::error::Error for NoH2 {}

/// What the server's TLS handshake (ALPN) chose, once a connection has been set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protocol {
    Unknown,
    H2,
    H1,
}

/// A connector that only yields connections on which ALPN chose `h2`, and tells the
/// transport which protocol the server chose as soon as the handshake is done.
#[derive(Clone)]
struct RequireH2<C> {
    inner: C,
    protocol: Arc<watch::Sender<Protocol>>,
}

impl<C> tower::Service<Uri> for RequireH2<C>
where
    C: tower::Service<Uri, Error = BoxError>,
    C::Response: Connection + Send + 'static,
    C::Future: Send + 'static,
{
    type Response = C::Response;
    type Error = BoxError;
    type Future = BoxFuture<C::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let connecting = self.inner.call(dst);
        let protocol = self.protocol.clone();
        Box::pin(async move {
            let io = connecting.await?;
            if io.connected().is_negotiated_h2() {
                protocol.send_replace(Protocol::H2);
                Ok(io)
            } else {
                protocol.send_replace(Protocol::H1);
                Err(Box::new(NoH2) as BoxError)
            }
        })
    }
}

fn is_no_h2(e: &hyper_util::client::legacy::Error) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if err.is::<NoH2>() {
            return true;
        }
        cur = err.source();
    }
    false
}

pub type Connector = hyper_timeout::TimeoutConnector<
    hyper_rustls::HttpsConnector<crate::proxy_connector::ProxyConnector>,
>;

/// A cluster's connector: each connection it opens holds the permit of the session it was
/// opened in ([`crate::connections`]) until it is closed.
#[derive(Clone)]
struct Holding<C> {
    inner: C,
    sessions: Arc<Sessions>,
}

type ClusterConnector = Holding<Connector>;

impl<C> tower::Service<Uri> for Holding<C>
where
    C: tower::Service<Uri, Error = BoxError>,
    C::Response: Send + 'static,
    C::Future: Send + 'static,
{
    type Response = Held<C::Response>;
    type Error = BoxError;
    type Future = BoxFuture<Held<C::Response>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let permit = self.sessions.hold();
        let connecting = self.inner.call(dst);
        Box::pin(async move {
            Ok(Held {
                io: connecting.await?,
                _permit: permit,
            })
        })
    }
}

/// A connection's stream, with the permit it holds until it is dropped.
struct Held<T> {
    io: T,
    _permit: Option<crate::connections::Permit>,
}

impl<T: hyper::rt::Read + Unpin> hyper::rt::Read for Held<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: hyper::rt::Write + Unpin> hyper::rt::Write for Held<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

impl<T: Connection> Connection for Held<T> {
    fn connected(&self) -> hyper_util::client::legacy::connect::Connected {
        self.io.connected()
    }
}

/// HTTP/2 on one connection, else HTTP/1.1 keep-alive for the rest of the run.
///
/// Until the protocol is known, the first request sets up the connection and the others
/// wait only for its TLS handshake (not for its answer): then they follow it onto the one
/// HTTP/2 connection, or go to HTTP/1.1. Sent straight to the HTTP/2 client, they would wait
/// in its pool and, if the server turns out to speak only HTTP/1.1, fail with "request was
/// canceled" instead of falling back (tests/it/transport_http1_e2e.rs); serialised until the
/// first answer, the concurrent read round would cost one more round trip.
#[derive(Clone)]
struct H2OrH1 {
    h2: HyperClient<RequireH2<ClusterConnector>, Body>,
    h1: HyperClient<ClusterConnector, Body>,
    protocol: Arc<watch::Sender<Protocol>>,
    /// A request is setting up the first connection.
    probing: Arc<AtomicBool>,
    /// How the last attempt to set up the first connection failed, for the requests that
    /// waited for it (cleared when another attempt starts).
    failed: Arc<Mutex<Option<SharedError>>>,
}

type SharedError = Arc<dyn std::error::Error + Send + Sync>;

/// The failure of the connection a request waited for: every request that waited for the
/// first connection fails as the one that set it up did (a refused connection, a TLS failure, a
/// timeout), with that error as its cause, rather than trying again at once — one of several
/// such retries would wait for another's connection and fail with hyper's "request was
/// canceled", which says nothing of why.
#[derive(Debug)]
struct ConnectionFailed(SharedError);

impl std::fmt::Display for ConnectionFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for ConnectionFailed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

impl H2OrH1 {
    fn failure(&self) -> std::sync::MutexGuard<'_, Option<SharedError>> {
        self.failed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn send(
        &self,
        parts: http::request::Parts,
        bytes: hyper::body::Bytes,
    ) -> Result<Response<Incoming>, BoxError> {
        if *self.protocol.borrow() == Protocol::H1 {
            return Ok(self
                .h1
                .request(Request::from_parts(parts, Body::from(bytes)))
                .await?);
        }
        let first = Request::from_parts(parts.clone(), Body::from(bytes.clone()));
        match self.h2.request(first).await {
            // Nothing was sent on that connection: resend over HTTP/1.1.
            Err(e) if is_no_h2(&e) => Ok(self
                .h1
                .request(Request::from_parts(parts, Body::from(bytes)))
                .await?),
            other => Ok(other?),
        }
    }
}

impl tower::Service<Request<Body>> for H2OrH1 {
    type Response = Response<Incoming>;
    type Error = BoxError;
    type Future = BoxFuture<Self::Response>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            // Request bodies are small, complete JSON documents; keep one to resend it over
            // HTTP/1.1 should the server not speak HTTP/2 (then nothing was sent).
            let (parts, body) = req.into_parts();
            let bytes = body.collect().await?.to_bytes();
            let mut known = this.protocol.subscribe();
            if *known.borrow_and_update() != Protocol::Unknown {
                return this.send(parts, bytes).await;
            }
            if this.probing.swap(true, Ordering::SeqCst) {
                // Another request is setting up the connection: wait for its handshake, or
                // fail as it failed (when it was dropped instead, say by --request-timeout,
                // try for ourselves).
                let _ = known.changed().await;
                if let Some(failed) = this.failure().clone() {
                    return Err(Box::new(ConnectionFailed(failed)) as BoxError);
                }
                return this.send(parts, bytes).await;
            }
            let _probe = Probe(&this);
            *this.failure() = None;
            match this.send(parts, bytes).await {
                Err(e) if *this.protocol.borrow() == Protocol::Unknown => {
                    let failed: SharedError = Arc::from(e);
                    *this.failure() = Some(failed.clone());
                    Err(Box::new(ConnectionFailed(failed)) as BoxError)
                }
                sent => sent,
            }
        })
    }
}

/// Held by the request that sets up the first connection; when it is done (or dropped, say
/// by --request-timeout) without a handshake having told the protocol, the waiting requests
/// are woken to try for themselves.
struct Probe<'a>(&'a H2OrH1);

impl Drop for Probe<'_> {
    fn drop(&mut self) {
        self.0.probing.store(false, Ordering::SeqCst);
        if *self.0.protocol.borrow() == Protocol::Unknown {
            self.0.protocol.send_replace(Protocol::Unknown);
        }
    }
}

/// The TLS client configuration of a cluster's connectors: its CA (or the system's roots), its
/// client certificate, made once per cluster and shared by its connectors (the HTTP/2 and
/// HTTP/1.1 ones, the proxy's).
fn tls_config(config: &kube::Config) -> Result<rustls::ClientConfig, kube::Error> {
    let mut tls = config.rustls_client_config()?;
    // rustls's default keeps TLS sessions for up to 256 servers, its table allocated up front
    // (~14 KB); a cluster's client talks to one server: 27 MB of a fleet of 2 000 was these
    // tables. A few are kept, so that a cluster reconnected at the next stage (a fleet larger
    // than its connection limit, `crate::connections`) resumes its session.
    tls.resumption = rustls::client::Resumption::in_memory_sessions(4);
    Ok(tls)
}

fn connector(
    config: &kube::Config,
    h2: bool,
    proxy: Option<&crate::proxy::Proxy>,
    tls: &rustls::ClientConfig,
) -> Result<Connector, kube::Error> {
    let mut http = HttpConnector::new_with_resolver(crate::proxy_connector::Resolver::default());
    http.enforce_http(false);
    // HTTP/2 writes frames (settings, headers, data, window updates) as they come; without
    // TCP_NODELAY, Nagle's algorithm holds a small write back until the previous one is
    // acknowledged, a round trip at a time. kubectl (Go) sets it too.
    http.set_nodelay(true);
    let http =
        crate::proxy_connector::ProxyConnector::new(http, proxy, || config.rustls_client_config())?;
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls.clone())
        .https_or_http();
    let builder = match &config.tls_server_name {
        Some(name) => builder.with_server_name_resolver(
            hyper_rustls::FixedServerNameResolver::new(name.clone().try_into().map_err(|e| {
                kube::Error::RustlsTls(kube::client::RustlsTlsError::InvalidServerName(e))
            })?),
        ),
        None => builder,
    };
    let builder = builder.enable_http1();
    let https = if h2 {
        builder.enable_http2().wrap_connector(http)
    } else {
        builder.wrap_connector(http)
    };
    let mut c = hyper_timeout::TimeoutConnector::new(https);
    c.set_connect_timeout(config.connect_timeout);
    c.set_read_timeout(config.read_timeout);
    c.set_write_timeout(config.write_timeout);
    c.set_reset_reader_on_write(config.reset_reader_on_write);
    Ok(c)
}

/// Retries of 429/503/504 below our own conflict handling: 4 retries from 100 ms, doubling,
/// capped at 2 s (about 1.5 s in all), or the server's `Retry-After`. kube's
/// `RetryPolicy::server_retry()` makes 15 attempts with delays growing toward 1 000 s —
/// minutes of silence for a command-line tool. Retrying a write is safe: every write carries
/// preconditions, so a repeat of one that did land meets a conflict and is re-checked.
fn retry_layer() -> Option<tower::retry::RetryLayer<kube::client::retry::RetryPolicy>> {
    kube::client::retry::RetryPolicy::new(
        std::time::Duration::from_millis(100),
        std::time::Duration::from_secs(2),
        4,
        true,
    )
    .ok()
    .map(tower::retry::RetryLayer::new)
}

/// The texts of a `Warning` header value, as client-go reads them: comma-separated
/// `code agent "text" ["date"]` (RFC 7234), with `\` quoting the next character inside the
/// text; only code 299 (what the API server and admission webhooks send) with a text counts.
/// Whatever does not parse is skipped.
pub fn warning_texts(value: &str) -> Vec<String> {
    fn quoted(s: &str) -> Option<(String, &str)> {
        let mut chars = s.strip_prefix('"')?.char_indices();
        let mut text = String::new();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => return Some((text, &s[i + 2..])),
                '\\' => text.push(chars.next()?.1),
                c => text.push(c),
            }
        }
        None
    }
    let mut texts = Vec::new();
    let mut rest = value.trim_start();
    while !rest.is_empty() {
        let Some((code, after)) = rest.split_once(' ') else {
            break;
        };
        let Some((_agent, after)) = after.trim_start().split_once(' ') else {
            break;
        };
        let Some((text, after)) = quoted(after.trim_start()) else {
            break;
        };
        let mut after = after.trim_start();
        if after.starts_with('"') {
            // The optional date.
            after = quoted(after).map_or("", |(_, a)| a).trim_start();
        }
        if code == "299" && !text.is_empty() {
            texts.push(text);
        }
        rest = after.strip_prefix(',').unwrap_or("").trim_start();
    }
    texts
}

/// Where the server's warnings go: each distinct text once, to `print`, as the answers come
/// (kubectl prints them as `Warning: …` on stderr, deduplicated).
#[derive(Clone)]
pub struct Warnings {
    print: fn(&str),
    seen: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
}

impl Warnings {
    pub fn new(print: fn(&str)) -> Warnings {
        Warnings {
            print,
            seen: Arc::default(),
        }
    }

    fn observe(&self, headers: &HeaderMap) {
        for value in headers.get_all(http::header::WARNING) {
            for text in warning_texts(&String::from_utf8_lossy(value.as_bytes())) {
                let new = self
                    .seen
                    .lock()
                    .map(|mut seen| seen.insert(text.clone()))
                    .unwrap_or(true);
                if new {
                    (self.print)(&text);
                }
            }
        }
    }
}

/// kube's middleware (see `kube::client::ClientBuilder::try_from`): base URI, retries,
/// authentication (tokens, exec plugins), impersonation and extra headers, and tracing, over
/// `transport`; the server's `Warning` headers go to `warnings`. Where the connection is
/// closed between sessions (`reopens`), kube's client is made again after each close
/// ([`Client`]); elsewhere one is made now and kept.
fn stack<S>(
    config: kube::Config,
    transport: S,
    warnings: Option<Warnings>,
    reopens: bool,
) -> Result<Client, kube::Error>
where
    S: tower::Service<Request<Body>, Response = Response<Incoming>> + Clone + Send + Sync + 'static,
    S::Error: Into<BoxError> + std::fmt::Display,
    S::Future: Send + 'static,
{
    let retry = if config.default_retry {
        retry_layer()
    } else {
        None
    };
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(retry)
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        // kube's tracing of each request (as `kube::client::ClientBuilder::try_from` sets it
        // up): a `debug` span `HTTP` with the method, URL and status, and an `error` event for
        // a failure. It costs nothing unless a tracing subscriber is installed (the plugin
        // installs none).
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(|req: &Request<Body>| {
                    tracing::debug_span!(
                        "HTTP",
                        http.method = %req.method(),
                        http.url = %req.uri(),
                        http.status_code = tracing::field::Empty,
                        otel.name = req.extensions().get::<&'static str>().unwrap_or(&"HTTP"),
                        otel.kind = "client",
                        otel.status_code = tracing::field::Empty,
                    )
                })
                .on_request(|_req: &Request<Body>, _span: &Span| tracing::debug!("requesting"))
                .on_response(
                    |res: &Response<Incoming>, _latency: Duration, span: &Span| {
                        let status = res.status();
                        span.record("http.status_code", status.as_u16());
                        if status.is_client_error() || status.is_server_error() {
                            span.record("otel.status_code", "ERROR");
                        }
                    },
                )
                .on_body_chunk(())
                .on_eos(|_: Option<&HeaderMap>, _duration: Duration, _span: &Span| {
                    tracing::debug!("stream closed")
                })
                .on_failure(
                    |failure: ServerErrorsFailureClass, _latency: Duration, span: &Span| {
                        span.record("otel.status_code", "ERROR");
                        match failure {
                            ServerErrorsFailureClass::StatusCode(status) => {
                                span.record("http.status_code", status.as_u16());
                                tracing::error!("failed with status {}", status)
                            }
                            ServerErrorsFailureClass::Error(err) => {
                                tracing::error!("failed with error {}", err)
                            }
                        }
                    },
                ),
        )
        .map_response(move |res: Response<Incoming>| {
            if let Some(w) = &warnings {
                w.observe(res.headers());
            }
            res
        })
        .map_err(Into::<BoxError>::into)
        .service(transport);
    let namespace = config.default_namespace;
    if !reopens {
        return Ok(Client::from(kube::Client::new(service, namespace)));
    }
    Ok(Client(Reopening::new(move || {
        kube::Client::new(service.clone(), namespace.clone())
    })))
}

/// A cluster's kube client over its middleware, made by the first request after its
/// connection was closed and dropped with it, where connections are closed between sessions
/// ([`client`]). kube's client queues its requests
/// in a buffer whose first block (32 requests' room, ~10 KB) is allocated when the client is
/// made: kept for every cluster of a fleet of 2 000, that was 20 MB of its peak, while at most
/// the connection bound's clusters send anything at once. The middleware under it — with the
/// credentials an exec plugin fetched — is kept from one to the next.
#[derive(Clone)]
pub struct Client(Reopening<kube::Client>);

impl Client {
    /// The client, made now if it was dropped.
    pub fn current(&self) -> kube::Client {
        self.0.current()
    }

    /// [`kube::Client::request`] on the current client.
    pub async fn request<T: serde::de::DeserializeOwned>(
        &self,
        request: Request<Vec<u8>>,
    ) -> kube::Result<T> {
        self.current().request(request).await
    }

    /// [`kube::Client::request_text`] on the current client.
    pub async fn request_text(&self, request: Request<Vec<u8>>) -> kube::Result<String> {
        self.current().request_text(request).await
    }
}

/// A client that is never dropped (a test's, over a service of its own).
impl From<kube::Client> for Client {
    fn from(client: kube::Client) -> Client {
        Client(Reopening::new(move || client.clone()))
    }
}

/// Closes a cluster's connection: drops its kube client, then empties its transport's slot.
fn closing(client: &Client, transport: crate::connections::Close) -> crate::connections::Close {
    let client = client.0.closer();
    Box::new(move || {
        client();
        transport();
    })
}

/// The client: [`H2OrH1`] for `https://` servers, HTTP/1.1 keep-alive for `http://` ones;
/// either through `proxy`. The server's warnings go to `warnings` (`None`: nowhere). Its
/// connections are opened and closed in `sessions` ([`Reopening`], [`Holding`]).
pub fn client(
    mut config: kube::Config,
    proxy: Option<&crate::proxy::Proxy>,
    warnings: Option<Warnings>,
    sessions: &Arc<Sessions>,
) -> Result<Client, kube::Error> {
    if config.cluster_url.scheme_str() != Some("https") {
        let connector = Holding {
            inner: connector(&config, false, proxy, &tls_config(&config)?)?,
            sessions: sessions.clone(),
        };
        let h1 = Reopening::new(move || {
            HyperClient::builder(TokioExecutor::new()).build(connector.clone())
        });
        // Requests forwarded by an HTTP proxy carry its credentials.
        if let Some(auth) = proxy
            .filter(|p| matches!(p.url.scheme.as_str(), "http" | "https"))
            .and_then(|p| crate::proxy_connector::basic_authorization(&p.url))
        {
            config
                .headers
                .push((http::header::PROXY_AUTHORIZATION, auth));
        }
        let close = h1.closer();
        let client = stack(config, h1, warnings, sessions.limit().closes())?;
        sessions.closes_with(closing(&client, close));
        return Ok(client);
    }
    let connectors = H2OrH1Connectors::new(&config, proxy, sessions)?;
    let transport = Reopening::new(move || connectors.open());
    let close = transport.closer();
    let client = stack(config, transport, warnings, sessions.limit().closes())?;
    sessions.closes_with(closing(&client, close));
    Ok(client)
}

/// A transport whose connection can be closed between requests: it holds the transport (and
/// with it the pool of its open connection) until [`Reopening::closer`]'s function empties it;
/// the next request then makes a new one, which opens a new connection. The client's
/// middleware above it — credentials already fetched by an exec plugin among them — stays.
struct Reopening<S> {
    slot: Arc<Slot<S>>,
}

impl<S> Clone for Reopening<S> {
    fn clone(&self) -> Self {
        Reopening {
            slot: self.slot.clone(),
        }
    }
}

struct Slot<S> {
    open: std::sync::Mutex<Option<S>>,
    make: Box<dyn Fn() -> S + Send + Sync>,
}

impl<S: Clone + Send + 'static> Reopening<S> {
    fn new(make: impl Fn() -> S + Send + Sync + 'static) -> Reopening<S> {
        Reopening {
            slot: Arc::new(Slot {
                open: std::sync::Mutex::new(None),
                make: Box::new(make),
            }),
        }
    }

    /// The transport, made now if it was closed.
    fn current(&self) -> S {
        let mut open = self
            .slot
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        open.get_or_insert_with(|| (self.slot.make)()).clone()
    }

    /// Empties the slot: the transport's pool, and the idle connection in it, are dropped once
    /// the requests in flight on it are done.
    fn closer(&self) -> crate::connections::Close {
        let slot = Arc::downgrade(&self.slot);
        Box::new(move || {
            let closed = slot.upgrade().and_then(|slot| {
                slot.open
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take()
            });
            drop(closed);
        })
    }
}

impl<S> tower::Service<Request<Body>> for Reopening<S>
where
    S: tower::Service<Request<Body>> + Clone + Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Both transports are always ready (hyper's client and [`H2OrH1`] say so).
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        self.current().call(req)
    }
}

/// A plain HTTP/1.1 client for requests outside the API (`--verify-url`): the API server's
/// connector — `proxy`, TLS with `config`'s CA (the system's trusted roots without one) and
/// `config.tls_server_name`, the connect timeout — without kube's middleware: no credentials,
/// no retries, no redirects followed.
pub fn plain_client(
    config: &kube::Config,
    proxy: Option<&crate::proxy::Proxy>,
) -> Result<HyperClient<Connector, Body>, kube::Error> {
    Ok(HyperClient::builder(TokioExecutor::new()).build(connector(
        config,
        false,
        proxy,
        &tls_config(config)?,
    )?))
}

/// What an [`H2OrH1`] is made of, made once per cluster: each [`H2OrH1Connectors::open`] is a
/// new pair of clients (new pools, no connection yet) over them. What the server spoke is kept
/// from one to the next.
struct H2OrH1Connectors {
    h2: RequireH2<ClusterConnector>,
    h1: ClusterConnector,
    protocol: Arc<watch::Sender<Protocol>>,
}

impl H2OrH1Connectors {
    fn new(
        config: &kube::Config,
        proxy: Option<&crate::proxy::Proxy>,
        sessions: &Arc<Sessions>,
    ) -> Result<H2OrH1Connectors, kube::Error> {
        let protocol = Arc::new(watch::channel(Protocol::Unknown).0);
        let holding = |inner| Holding {
            inner,
            sessions: sessions.clone(),
        };
        // One configuration (one verifier, one session cache) for both: the same server.
        let tls = tls_config(config)?;
        Ok(H2OrH1Connectors {
            h2: RequireH2 {
                inner: holding(connector(config, true, proxy, &tls)?),
                protocol: protocol.clone(),
            },
            h1: holding(connector(config, false, proxy, &tls)?),
            protocol,
        })
    }

    fn open(&self) -> H2OrH1 {
        H2OrH1 {
            h2: HyperClient::builder(TokioExecutor::new())
                .http2_only(true)
                .build(self.h2.clone()),
            h1: HyperClient::builder(TokioExecutor::new()).build(self.h1.clone()),
            protocol: self.protocol.clone(),
            probing: Arc::new(AtomicBool::new(false)),
            failed: Arc::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use kube::config::{KubeConfigOptions, Kubeconfig};
    use sandbox_apiserver::{Sandbox, SandboxOptions};

    use super::*;

    async fn client_for(sb: &Sandbox) -> Client {
        let kubeconfig = Kubeconfig::from_yaml(&sb.kubeconfig_yaml("shop")).unwrap();
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .unwrap();
        client(config, None, None, &Sessions::detached()).unwrap()
    }

    fn version() -> Request<Vec<u8>> {
        Request::get("/version").body(Vec::new()).unwrap()
    }

    /// `n` requests at once, as the read and dry-run rounds send them.
    async fn round(client: &Client, n: usize) {
        let client = client.current();
        let requests = (0..n).map(|_| client.request_text(version()));
        for answer in futures::future::join_all(requests).await {
            answer.unwrap();
        }
    }

    #[test]
    fn warning_headers_read_as_client_go_reads_them() {
        assert_eq!(
            warning_texts(r#"299 - "spec.template: deprecated""#),
            ["spec.template: deprecated"]
        );
        assert_eq!(
            warning_texts(
                r#"299 - "a \"quoted\" \\ text" "Mon, 01 Jan 2024 00:00:00 GMT", 199 x "not 299", 299 - "second""#
            ),
            [r#"a "quoted" \ text"#, "second"]
        );
        // A C1 control or a bidi override travels in a header as UTF-8; it is kept here and
        // escaped where it is printed.
        assert_eq!(
            warning_texts("299 - \"x\u{9b}2J\u{202e}\""),
            ["x\u{9b}2J\u{202e}"]
        );
        for junk in [
            "",
            "299",
            "299 -",
            "299 - unquoted",
            "299 - \"open",
            "abc",
            r#"299 - """#,
        ] {
            assert!(warning_texts(junk).is_empty(), "{junk:?}");
        }
    }

    #[tokio::test]
    async fn concurrent_requests_travel_as_streams_of_one_http2_connection() {
        let sb = Sandbox::start(SandboxOptions::default()).unwrap();
        let client = client_for(&sb).await;
        round(&client, 8).await;
        round(&client, 8).await;
        let log = sb.requests();
        assert_eq!(log.len(), 16);
        assert!(log.iter().all(|r| r.http_version == "HTTP/2.0"), "{log:?}");
        assert_eq!(sb.counters().connections, 1);
    }

    /// Closing a cluster's connection between rounds closes its socket (on both ends), and the
    /// next round opens a new connection over the same client.
    #[tokio::test]
    async fn a_closed_connection_is_closed_and_the_next_request_opens_another() {
        let sb = Sandbox::start(SandboxOptions::default()).unwrap();
        let kubeconfig = Kubeconfig::from_yaml(&sb.kubeconfig_yaml("shop")).unwrap();
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .unwrap();
        let limit = crate::connections::ConnectionLimit::new(1);
        let sessions = Sessions::new(limit.clone());
        // Another cluster of the run, which waits for the permit.
        let other = Sessions::new(limit.clone());
        let client = client(config, None, None, &sessions).unwrap();
        let before = open_descriptors();
        let session = sessions.open().await;
        round(&client, 4).await;
        assert!(open_descriptors() > before || !cfg!(target_os = "linux"));
        drop(session);
        // Kept open while nobody waits for its permit.
        assert!(open_descriptors() > before || !cfg!(target_os = "linux"));
        assert!(client.0.slot.open.lock().unwrap().is_some());
        let mut permit_back = std::pin::pin!(other.open());
        assert!(futures::poll!(&mut permit_back).is_pending());
        // Closed once another cluster waits: kube's client (its request buffer) is dropped
        // with the connection, made again by the next request.
        assert!(client.0.slot.open.lock().unwrap().is_none());
        // The permit comes back once the connection is gone, not before.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let session = loop {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the connection was not closed: {} descriptors open, {before} before",
                open_descriptors()
            );
            tokio::select! {
                session = &mut permit_back => break session,
                () = tokio::time::sleep(Duration::from_millis(10)) => {}
            }
        };
        if cfg!(target_os = "linux") {
            // The client's socket is closed; the server's end may take a moment more.
            while open_descriptors() > before {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the server's end stays open"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        drop(session);
        let session = sessions.open().await;
        round(&client, 4).await;
        drop(session);
        assert_eq!(sb.counters().connections, 2);
        assert_eq!(sb.requests().len(), 8);
    }

    /// The descriptors this process has open (Linux; elsewhere 0, and the test above checks
    /// only the connections).
    fn open_descriptors() -> usize {
        std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count)
    }

    #[tokio::test]
    async fn against_a_server_without_http2_every_concurrent_request_falls_back_to_http1() {
        let sb = Sandbox::start(SandboxOptions {
            http1_only: true,
            ..Default::default()
        })
        .unwrap();
        let client = client_for(&sb).await;
        round(&client, 8).await;
        round(&client, 8).await;
        let log = sb.requests();
        assert_eq!(log.len(), 16);
        assert!(log.iter().all(|r| r.http_version == "HTTP/1.1"), "{log:?}");
    }

    /// The requests that wait for the first connection's handshake must not wait forever when
    /// the request setting it up is abandoned first (e.g. by `--request-timeout`).
    #[tokio::test]
    async fn when_the_first_request_is_abandoned_before_the_handshake_the_waiting_ones_connect() {
        // A server that accepts connections and never answers the TLS handshake.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        let server = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                open.push(socket);
            }
        });
        let until = |what: &'static str, done: Box<dyn Fn() -> bool + Send>| async move {
            let polling = async {
                while !done() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            };
            tokio::time::timeout(Duration::from_secs(10), polling)
                .await
                .unwrap_or_else(|_| panic!("timed out waiting until {what}"));
        };
        let url = format!("https://127.0.0.1:{port}/version");
        let config = kube::Config::new(url.parse().unwrap());
        let transport = H2OrH1Connectors::new(&config, None, &Sessions::detached())
            .unwrap()
            .open();
        let get = || {
            let mut transport = transport.clone();
            let request = Request::get(url.as_str())
                .body(Body::from(Vec::new()))
                .unwrap();
            tokio::spawn(async move { tower::Service::call(&mut transport, request).await })
        };

        let first = get();
        let n = accepted.clone();
        until(
            "the first request connects",
            Box::new(move || n.load(Ordering::SeqCst) == 1),
        )
        .await;
        let second = get();
        // Each request watches the protocol; the second waits for the first one's handshake.
        let watching = transport.protocol.clone();
        until(
            "the second request waits",
            Box::new(move || watching.receiver_count() == 2),
        )
        .await;
        first.abort();
        let n = accepted.clone();
        until(
            "the second request connects by itself",
            Box::new(move || n.load(Ordering::SeqCst) == 2),
        )
        .await;
        second.abort();
        server.abort();
    }
}
