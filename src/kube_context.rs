//! Kubeconfig → a kube client, the namespace and the context name, the way kubectl resolves
//! them: `--kubeconfig`, else `KUBECONFIG` (files merged, first wins, missing files skipped),
//! else `~/.kube/config`; `--context`/`--cluster`/`--user` override; the namespace is `-n`, else
//! the context's, else `default`. Exec credential plugins and client certificates are kube's.
//!
//! Error messages never include credential or certificate data: kube's errors are translated
//! into our own words, naming files, contexts, clusters and users only.

use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError, LoadDataError};

use crate::error::AppError;
use crate::proxy;
use crate::settings::{ClusterSelection, KubeconfigSource};

/// A ready client and where it points.
#[derive(Clone)]
pub struct Connection {
    pub client: kube::Client,
    pub namespace: String,
    pub context: String,
    /// The API server URL (for messages; carries no credentials).
    pub server: String,
    pub request_timeout: Option<std::time::Duration>,
    /// The proxy the connection goes through, e.g. `http://proxy.corp:3128 (HTTPS_PROXY)`
    /// (carries no credentials).
    pub proxy: Option<String>,
}

/// Stands in for the cluster's `proxy-url` while kube loads the kubeconfig (never dialled).
const PROXY_PLACEHOLDER: &str = "http://proxy-chosen-by-kubectl-appupdate.invalid";

fn read_one(path: &Path) -> Result<Kubeconfig, AppError> {
    Kubeconfig::read_from(path).map_err(|e| match e {
        KubeconfigError::ReadConfig(io, _) => AppError::Kubeconfig(format!(
            "cannot read kubeconfig {}: {}",
            path.display(),
            io_reason(&io)
        )),
        KubeconfigError::Parse(err) => {
            let at = err
                .location()
                .map(|l| format!(" at line {}, column {}", l.line(), l.column()))
                .unwrap_or_default();
            AppError::Kubeconfig(format!(
                "kubeconfig {} is not a valid kubeconfig{at}; fix the file or point --kubeconfig elsewhere",
                path.display()
            ))
        }
        other => AppError::Kubeconfig(format!(
            "kubeconfig {} cannot be used: {}",
            path.display(),
            describe_kubeconfig_error(&other)
        )),
    })
}

fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        std::io::ErrorKind::InvalidData => "not UTF-8 text".into(),
        _ => e.to_string(),
    }
}

/// Loads and merges the kubeconfig files; returns the merged config and the files used.
pub fn load_kubeconfig(source: &KubeconfigSource) -> Result<(Kubeconfig, Vec<PathBuf>), AppError> {
    match source {
        KubeconfigSource::Flag(path) => Ok((read_one(path)?, vec![path.clone()])),
        KubeconfigSource::Env(paths) => {
            let mut merged: Option<Kubeconfig> = None;
            let mut used = Vec::new();
            for p in paths {
                if !p.exists() {
                    continue; // client-go skips missing files listed in KUBECONFIG
                }
                let next = read_one(p)?;
                used.push(p.clone());
                merged = Some(match merged {
                    None => next,
                    Some(m) => m.merge(next).map_err(|e| {
                        AppError::Kubeconfig(format!(
                            "cannot merge kubeconfig {}: {}",
                            p.display(),
                            describe_kubeconfig_error(&e)
                        ))
                    })?,
                });
            }
            match merged {
                Some(m) => Ok((m, used)),
                None => Err(AppError::Kubeconfig(format!(
                    "none of the files in KUBECONFIG exists ({}); set KUBECONFIG or pass --kubeconfig",
                    paths
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))),
            }
        }
        KubeconfigSource::Home(path) => {
            if !path.exists() {
                return Err(AppError::Kubeconfig(format!(
                    "no kubeconfig found: {} does not exist and KUBECONFIG is not set; pass --kubeconfig",
                    path.display()
                )));
            }
            Ok((read_one(path)?, vec![path.clone()]))
        }
        KubeconfigSource::Nowhere => Err(AppError::Kubeconfig(
            "no kubeconfig found: KUBECONFIG and HOME are not set; pass --kubeconfig".into(),
        )),
    }
}

fn load_data_reason(e: &LoadDataError) -> String {
    match e {
        // The decoder's message would quote bytes of the (possibly secret) data.
        LoadDataError::DecodeBase64(_) => "the data is not valid base64".into(),
        LoadDataError::ReadFile(io, path) => {
            format!("cannot read {}: {}", path.display(), io_reason(io))
        }
        LoadDataError::NoBase64DataOrFile => "neither data nor a file is given".into(),
    }
}

/// Describes a kubeconfig error without any of the data it was loading.
pub fn describe_kubeconfig_error(e: &KubeconfigError) -> String {
    match e {
        KubeconfigError::CurrentContextNotSet => "it has no current-context".into(),
        KubeconfigError::KindMismatch | KubeconfigError::ApiVersionMismatch => {
            "the files have different kinds or apiVersions".into()
        }
        KubeconfigError::LoadContext(name) => format!("context {name:?} does not exist"),
        KubeconfigError::LoadClusterOfContext(name) => format!("cluster {name:?} does not exist"),
        KubeconfigError::FindPath => "no kubeconfig path".into(),
        KubeconfigError::ReadConfig(io, path) => {
            format!("cannot read {}: {}", path.display(), io_reason(io))
        }
        KubeconfigError::Parse(_) => "it is not valid YAML".into(),
        KubeconfigError::MissingClusterUrl => "the cluster has no server URL".into(),
        KubeconfigError::ParseClusterUrl(_) => "the cluster's server URL is not a valid URL".into(),
        KubeconfigError::ParseProxyUrl(_) => "the proxy URL is not a valid URL".into(),
        KubeconfigError::LoadCertificateAuthority(d) => {
            format!("certificate-authority: {}", load_data_reason(d))
        }
        KubeconfigError::LoadClientCertificate(d) => {
            format!("client-certificate: {}", load_data_reason(d))
        }
        KubeconfigError::LoadClientKey(d) => format!("client-key: {}", load_data_reason(d)),
        KubeconfigError::ParseCertificates(_) => "the certificate data is not valid PEM".into(),
        #[allow(unreachable_patterns)]
        _ => "it cannot be used".into(),
    }
}

fn names<T>(items: &[T], name: impl Fn(&T) -> &String) -> String {
    let mut v: Vec<&str> = items.iter().map(|i| name(i).as_str()).collect();
    v.sort_unstable();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// Resolves the kubeconfig and builds a client. Makes no request.
pub async fn connect(sel: &ClusterSelection) -> Result<Connection, AppError> {
    let (kubeconfig, files) = load_kubeconfig(&sel.kubeconfig)?;
    let where_ = files
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");

    let context_name = match sel
        .context
        .clone()
        .or_else(|| kubeconfig.current_context.clone())
    {
        Some(c) if !c.is_empty() => c,
        _ => {
            return Err(AppError::Kubeconfig(format!(
                "kubeconfig {where_} has no current context; pass --context (contexts: {})",
                names(&kubeconfig.contexts, |c| &c.name)
            )));
        }
    };
    let Some(context) = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == context_name)
        .and_then(|c| c.context.clone())
    else {
        return Err(AppError::Kubeconfig(format!(
            "context {context_name:?} does not exist in kubeconfig {where_} (contexts: {})",
            names(&kubeconfig.contexts, |c| &c.name)
        )));
    };
    let cluster_name = sel.cluster.clone().unwrap_or(context.cluster.clone());
    if !kubeconfig.clusters.iter().any(|c| c.name == cluster_name) {
        return Err(AppError::Kubeconfig(format!(
            "cluster {cluster_name:?} (context {context_name:?}) does not exist in kubeconfig {where_} (clusters: {})",
            names(&kubeconfig.clusters, |c| &c.name)
        )));
    }
    if let Some(user) = &sel.user
        && !kubeconfig.auth_infos.iter().any(|u| &u.name == user)
    {
        return Err(AppError::Kubeconfig(format!(
            "user {user:?} does not exist in kubeconfig {where_} (users: {})",
            names(&kubeconfig.auth_infos, |u| &u.name)
        )));
    }
    // A context naming a user that is not there would silently run as system:anonymous.
    if sel.user.is_none()
        && let Some(user) = context.user.as_ref().filter(|u| !u.is_empty())
        && !kubeconfig.auth_infos.iter().any(|u| &u.name == user)
    {
        return Err(AppError::Kubeconfig(format!(
            "user {user:?} (context {context_name:?}) does not exist in kubeconfig {where_} (users: {})",
            names(&kubeconfig.auth_infos, |u| &u.name)
        )));
    }
    let namespace = sel
        .namespace
        .clone()
        .or(context.namespace.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".to_owned());

    // The cluster's proxy-url is ours to interpret (kubectl's rules, `crate::proxy`). Left
    // empty, kube would read HTTPS_PROXY itself (ignoring NO_PROXY) and fail to parse what it
    // does not understand; a placeholder keeps it from reading the environment at all.
    let mut kubeconfig = kubeconfig;
    let mut proxy_url = None;
    if let Some(cluster) = kubeconfig
        .clusters
        .iter_mut()
        .find(|c| c.name == cluster_name)
        .and_then(|c| c.cluster.as_mut())
    {
        proxy_url = cluster.proxy_url.replace(PROXY_PLACEHOLDER.to_owned());
    }

    let options = KubeConfigOptions {
        context: Some(context_name.clone()),
        cluster: sel.cluster.clone(),
        user: sel.user.clone(),
    };
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| {
            AppError::Kubeconfig(format!(
                "kubeconfig {where_}, context {context_name:?}: {}",
                describe_kubeconfig_error(&e)
            ))
        })?;
    if let Some(user) = &sel.as_user {
        config.auth_info.impersonate = Some(user.clone());
    }
    if !sel.as_groups.is_empty() {
        config.auth_info.impersonate_groups = Some(sel.as_groups.clone());
    }
    if let Some(t) = sel.request_timeout {
        config.read_timeout = Some(t);
        config.write_timeout = Some(t);
        config.connect_timeout = Some(config.connect_timeout.map_or(t, |c| c.min(t)));
    }
    let server = config.cluster_url.to_string();
    config.proxy_url = None;
    let proxy = proxy::select(
        proxy_url.as_deref(),
        &proxy::Target::from_uri(&config.cluster_url),
        &sel.proxy_env,
    )
    .map_err(|e| match e {
        proxy::SelectError::InvalidProxyUrl(_) => AppError::Kubeconfig(format!(
            "kubeconfig {where_}, cluster {cluster_name:?}: {e}"
        )),
        proxy::SelectError::Cgi(_) => AppError::Kubeconfig(e.to_string()),
    })?;
    let client = transport::client(config, proxy.as_ref()).map_err(|e| {
        AppError::Kubeconfig(format!(
            "cannot set up a client for context {context_name:?}: {}",
            crate::error::one_line(&client_setup_reason(&e))
        ))
    })?;
    Ok(Connection {
        client,
        namespace,
        context: context_name,
        server,
        request_timeout: sel.request_timeout,
        proxy: proxy.map(|p| p.to_string()),
    })
}

fn client_setup_reason(e: &kube::Error) -> String {
    // Credential errors (exec plugins) carry command lines and output: describe them ourselves.
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(auth) = err.downcast_ref::<kube::client::AuthError>() {
            return format!(
                "cannot get credentials ({})",
                crate::error::describe_auth_error(auth)
            );
        }
        cur = err.source();
    }
    // TLS set-up errors name what is wrong (e.g. an invalid private key) without the data.
    let chain = crate::error::error_chain(e);
    let text = chain.join(": ");
    if text.to_lowercase().contains("key") {
        "the client key cannot be used (check client-key-data / client-key)".into()
    } else if text.to_lowercase().contains("certificate") || text.to_lowercase().contains("pem") {
        "the certificate data cannot be used (check certificate-authority-data / client-certificate-data)".into()
    } else {
        chain.first().cloned().unwrap_or_default()
    }
}

/// The HTTP transport under kube's middleware.
///
/// `kube::Client::try_from(Config)` offers only HTTP/1.1 over rustls (ALPN `http/1.1`), so every
/// concurrent request needs a connection — a TCP and a TLS handshake — of its own: the read
/// round opened 4, a dry-run round of 62 changes opened 58 more. Here the same middleware as
/// kube's (base URI, kube's retry of 429/503/504, authentication, impersonation headers) sits on
/// a hyper client that offers `h2` by ALPN and, when the server takes it, sends every request
/// of the run as a stream of one HTTP/2 connection: concurrent requests wait for that one
/// connection instead of opening their own. A server that does not negotiate `h2` gets plain
/// HTTP/1.1 keep-alive, as before (one wasted handshake on the first request, nothing sent on
/// it). Plain `http://` servers get HTTP/1.1 keep-alive. Through a proxy (see
/// `crate::proxy_connector`) the same holds, over one tunnel.
mod transport {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::task::{Context, Poll};

    use http::{Request, Response, Uri};
    use http_body_util::BodyExt;
    use hyper_util::client::legacy::Client as HyperClient;
    use hyper_util::client::legacy::connect::{Connection, HttpConnector};
    use hyper_util::rt::TokioExecutor;
    use kube::client::{Body, ConfigExt};
    use tokio::sync::watch;
    use tower::{BoxError, ServiceBuilder};

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

    type Connector = hyper_timeout::TimeoutConnector<
        hyper_rustls::HttpsConnector<crate::proxy_connector::ProxyConnector>,
    >;

    /// HTTP/2 on one connection, else HTTP/1.1 keep-alive for the rest of the run.
    ///
    /// Until the protocol is known, the first request sets up the connection and the others
    /// wait only for its TLS handshake (not for its answer): then they follow it onto the one
    /// HTTP/2 connection, or go to HTTP/1.1. Sent straight to the HTTP/2 client, they would wait
    /// in its pool and, if the server turns out to speak only HTTP/1.1, fail with "request was
    /// canceled" instead of falling back (tests/transport_http1_e2e.rs); serialised until the
    /// first answer, the concurrent read round would cost one more round trip.
    #[derive(Clone)]
    struct H2OrH1 {
        h2: HyperClient<RequireH2<Connector>, Body>,
        h1: HyperClient<Connector, Body>,
        protocol: Arc<watch::Sender<Protocol>>,
        /// A request is setting up the first connection.
        probing: Arc<AtomicBool>,
    }

    impl H2OrH1 {
        async fn send(
            &self,
            parts: http::request::Parts,
            bytes: hyper::body::Bytes,
        ) -> Result<Response<hyper::body::Incoming>, BoxError> {
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
        type Response = Response<hyper::body::Incoming>;
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
                    // Another request is setting up the connection: wait for its handshake (or
                    // its failure, then try for ourselves).
                    let _ = known.changed().await;
                    return this.send(parts, bytes).await;
                }
                let _probe = Probe(&this);
                this.send(parts, bytes).await
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

    fn connector(
        config: &kube::Config,
        h2: bool,
        proxy: Option<&crate::proxy::Proxy>,
    ) -> Result<Connector, kube::Error> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        // HTTP/2 writes frames (settings, headers, data, window updates) as they come; without
        // TCP_NODELAY, Nagle's algorithm holds a small write back until the previous one is
        // acknowledged, a round trip at a time. kubectl (Go) sets it too.
        http.set_nodelay(true);
        let http = crate::proxy_connector::ProxyConnector::new(http, proxy, || {
            config.rustls_client_config()
        })?;
        let tls = config.rustls_client_config()?;
        let builder = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http();
        let builder = match &config.tls_server_name {
            Some(name) => builder.with_server_name_resolver(
                hyper_rustls::FixedServerNameResolver::new(name.clone().try_into().map_err(
                    |e| kube::Error::RustlsTls(kube::client::RustlsTlsError::InvalidServerName(e)),
                )?),
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

    /// kube's middleware (see `kube::client::ClientBuilder::try_from`): base URI, retries,
    /// authentication (tokens, exec plugins), impersonation and extra headers, over `transport`.
    fn stack<S>(config: kube::Config, transport: S) -> Result<kube::Client, kube::Error>
    where
        S: tower::Service<Request<Body>, Response = Response<hyper::body::Incoming>>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Error: Into<BoxError>,
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
            .map_err(Into::<BoxError>::into)
            .service(transport);
        Ok(kube::Client::new(service, config.default_namespace))
    }

    /// The client: [`H2OrH1`] for `https://` servers, HTTP/1.1 keep-alive for `http://` ones;
    /// either through `proxy`.
    pub(super) fn client(
        mut config: kube::Config,
        proxy: Option<&crate::proxy::Proxy>,
    ) -> Result<kube::Client, kube::Error> {
        if config.cluster_url.scheme_str() != Some("https") {
            let h1 =
                HyperClient::builder(TokioExecutor::new()).build(connector(&config, false, proxy)?);
            // Requests forwarded by an HTTP proxy carry its credentials.
            if let Some(auth) = proxy
                .filter(|p| matches!(p.url.scheme.as_str(), "http" | "https"))
                .and_then(|p| crate::proxy_connector::basic_authorization(&p.url))
            {
                config
                    .headers
                    .push((http::header::PROXY_AUTHORIZATION, auth));
            }
            return stack(config, h1);
        }
        let protocol = Arc::new(watch::channel(Protocol::Unknown).0);
        let transport = H2OrH1 {
            h2: HyperClient::builder(TokioExecutor::new())
                .http2_only(true)
                .build(RequireH2 {
                    inner: connector(&config, true, proxy)?,
                    protocol: protocol.clone(),
                }),
            h1: HyperClient::builder(TokioExecutor::new()).build(connector(&config, false, proxy)?),
            protocol,
            probing: Arc::new(AtomicBool::new(false)),
        };
        stack(config, transport)
    }
}
