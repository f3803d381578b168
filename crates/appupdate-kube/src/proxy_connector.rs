//! The TCP leg of the transport, through the chosen proxy ([`crate::proxy`]), as kubectl (Go's
//! `net/http`) opens it:
//!
//! * no proxy: a TCP connection to the server;
//! * `http://` or `https://` proxy (TLS to the proxy itself, verified like the server's
//!   certificate, as Go does): an `https://` server is reached through an HTTP `CONNECT`
//!   tunnel; an `http://` server gets its requests forwarded in absolute form on the proxy
//!   connection. Credentials in the proxy URL (`user:password@`) are sent as
//!   `Proxy-Authorization: Basic`;
//! * `socks5://` (and `socks5h://` from the environment): a SOCKS5 `CONNECT` that hands the
//!   proxy the server's name (the proxy resolves it), with username/password authentication
//!   when the URL carries credentials.
//!
//! Whatever the route, the transport then does TLS with the API server over this stream and
//! negotiates HTTP/2 by ALPN, so a run still uses one connection — one tunnel.
//!
//! What is hyper-util's and what is ours:
//!
//! * the `CONNECT` exchange is hyper-util's [`Tunnel`], as Go's: `CONNECT host:port` with `Host`
//!   and our `Proxy-Authorization`, exactly `200` accepted, and bytes past the proxy's answer
//!   dropped (Go drops its buffered reader too: a TLS server does not speak first). We give it
//!   the connection to the proxy (TCP, then TLS for an `https://` proxy, which `Tunnel` cannot
//!   do) and keep a copy of what the proxy answered, because hyper-util's error for a refusal
//!   does not carry the status, which our message names (`refused the tunnel to …: 403
//!   Forbidden`);
//! * the SOCKS5 exchange is ours: hyper-util's `SocksV5` differs from Go where kubectl users
//!   can see it. With credentials it offers username/password only, where Go offers "no
//!   authentication" too, so a proxy that needs none fails (no acceptable method) where kubectl
//!   connects; and it holds a username and password of more than 256 bytes together as a
//!   failure to serialize, where RFC 1929 and Go allow 255 bytes each.
//!
//! Failures are [`ProxyError`]s, whose one-line message names the proxy (never its
//! credentials) and what it did: hyper-util's errors are mapped to ours by their variants.

use std::fmt;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use base64::Engine;
use http::Uri;
use hyper_util::client::legacy::connect::dns::{GaiResolver, Name};
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tower::ServiceExt;

use crate::proxy::{Proxy, ProxyUrl, bracketed};
use appupdate_model::text::Untrusted;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type BoxFuture<T> = Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send>>;

/// The system resolver (getaddrinfo on a blocking thread, as hyper's default), with its
/// failures as [`ResolveError`].
#[derive(Clone)]
pub struct Resolver(GaiResolver);

impl Default for Resolver {
    fn default() -> Self {
        Resolver(GaiResolver::new())
    }
}

/// The server's name did not resolve: nothing was sent.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ResolveError(#[source] pub std::io::Error);

impl tower::Service<Name> for Resolver {
    type Response = <GaiResolver as tower::Service<Name>>::Response;
    type Error = ResolveError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, ResolveError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ResolveError>> {
        self.0.poll_ready(cx).map_err(ResolveError)
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let resolving = self.0.call(name);
        Box::pin(async move { resolving.await.map_err(ResolveError) })
    }
}

/// A connector (a `tower::Service<Uri>`) for hyper: straight to the server or through a proxy.
#[derive(Clone)]
pub struct ProxyConnector {
    tcp: HttpConnector<Resolver>,
    proxy: Option<Arc<Route>>,
}

struct Route {
    proxy: Proxy,
    /// For an `https://` proxy: the TLS set-up toward the proxy.
    tls: Option<tokio_rustls::TlsConnector>,
}

impl ProxyConnector {
    /// `tcp` opens TCP connections (its options, such as TCP_NODELAY, apply to the proxy
    /// connection too); `tls` gives the TLS configuration for an `https://` proxy (the
    /// server's, as in Go: its CA, its client certificate).
    pub fn new<E>(
        tcp: HttpConnector<Resolver>,
        proxy: Option<&Proxy>,
        tls: impl FnOnce() -> Result<rustls::ClientConfig, E>,
    ) -> Result<ProxyConnector, E> {
        let proxy = match proxy {
            None => None,
            Some(p) => {
                let tls = if p.url.scheme == "https" {
                    let mut config = tls()?;
                    // The proxy speaks HTTP/1.1 only; HTTP/2 is for the server, inside.
                    config.alpn_protocols = vec![b"http/1.1".to_vec()];
                    Some(tokio_rustls::TlsConnector::from(Arc::new(config)))
                } else {
                    None
                };
                Some(Arc::new(Route {
                    proxy: p.clone(),
                    tls,
                }))
            }
        };
        Ok(ProxyConnector { tcp, proxy })
    }
}

impl tower::Service<Uri> for ProxyConnector {
    type Response = ProxyStream;
    type Error = BoxError;
    type Future = BoxFuture<ProxyStream>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let mut tcp = self.tcp.clone();
        let route = self.proxy.clone();
        Box::pin(async move {
            let Some(route) = route else {
                let io = tower::Service::call(&mut tcp, dst).await?;
                return Ok(ProxyStream::new(Box::new(io.into_inner()), false));
            };
            Ok(route.open(tcp, &dst).await?)
        })
    }
}

impl Route {
    async fn open(
        &self,
        tcp: HttpConnector<Resolver>,
        dst: &Uri,
    ) -> Result<ProxyStream, ProxyError> {
        let target = Authority::of(dst);
        let url = &self.proxy.url;
        let fail = |kind| ProxyError {
            proxy: self.proxy.to_string(),
            target: target.to_string(),
            kind,
        };
        let Some(port) = url.port_or_default() else {
            return Err(fail(Kind::BadPort));
        };
        let proxy_uri = Uri::builder()
            .scheme("http")
            .authority(format!("{}:{port}", bracketed(&url.host)))
            .path_and_query("/")
            .build()
            .map_err(|_| fail(Kind::BadHost))?;
        match url.scheme.as_str() {
            "http" | "https" => {
                let tls = match &self.tls {
                    None => None,
                    Some(tls) => {
                        let name = rustls::pki_types::ServerName::try_from(url.host.clone())
                            .map_err(|_| fail(Kind::BadHost))?;
                        Some((tls.clone(), name))
                    }
                };
                let answer = Arc::new(Mutex::new(Vec::new()));
                let to_proxy = ToProxy {
                    tcp,
                    tls,
                    answer: answer.clone(),
                };
                if dst.scheme_str() == Some("http") {
                    // Forwarded in absolute form, as Go does for http:// servers.
                    let mut io = to_proxy.oneshot(proxy_uri).await.map_err(fail)?;
                    io.forwarding = true;
                    io.untap();
                    return Ok(io);
                }
                let mut tunnel = Tunnel::new(proxy_uri, to_proxy);
                if let Some(auth) = basic_authorization(url) {
                    tunnel = tunnel.with_auth(auth);
                }
                match tunnel.oneshot(dst.clone()).await {
                    Ok(mut io) => {
                        io.untap();
                        Ok(io)
                    }
                    Err(e) => {
                        let answer = answer.lock().map(|a| a.clone()).unwrap_or_default();
                        Err(fail(tunnel_failure(e, &answer, url.user.is_some())))
                    }
                }
            }
            "socks5" | "socks5h" => {
                let mut io = connect_tcp(tcp, proxy_uri).await.map_err(fail)?;
                socks5_connect(&mut io, &target, url).await.map_err(fail)?;
                Ok(ProxyStream::new(Box::new(io), false))
            }
            other => Err(fail(Kind::UnsupportedScheme(other.to_owned()))),
        }
    }
}

/// The `Proxy-Authorization` value for `url`'s credentials, if any.
pub fn basic_authorization(url: &ProxyUrl) -> Option<http::HeaderValue> {
    let user = url.user.as_ref()?;
    let plain = format!(
        "{}:{}",
        user.username,
        user.password.as_deref().unwrap_or_default()
    );
    let mut value = http::HeaderValue::from_str(&format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(plain)
    ))
    .ok()?;
    value.set_sensitive(true);
    Some(value)
}

async fn connect_tcp(mut tcp: HttpConnector<Resolver>, proxy: Uri) -> Result<TcpStream, Kind> {
    match tower::Service::call(&mut tcp, proxy).await {
        Ok(io) => Ok(io.into_inner()),
        Err(e) => Err(Kind::Unreachable(connect_reason(&e))),
    }
}

/// Why the TCP connection to the proxy failed, in a few words.
fn connect_reason(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<io::Error>() {
            return match io.kind() {
                io::ErrorKind::ConnectionRefused => "connection refused".into(),
                io::ErrorKind::TimedOut => "timed out".into(),
                _ => appupdate_model::text::one_line(&io.to_string()),
            };
        }
        cur = err.source();
    }
    if std::iter::successors(Some(e), |e| e.source()).any(|e| e.is::<ResolveError>()) {
        return "its name cannot be resolved".into();
    }
    appupdate_model::text::one_line(
        &appupdate_model::text::error_chain(e)
            .join(": ")
            .to_lowercase(),
    )
}

/// The connection to an `http://` or `https://` proxy (TLS for the latter) that hyper-util's
/// [`Tunnel`] sends its `CONNECT` over; what the proxy answers is copied into `answer`.
#[derive(Clone)]
struct ToProxy {
    tcp: HttpConnector<Resolver>,
    tls: Option<(
        tokio_rustls::TlsConnector,
        rustls::pki_types::ServerName<'static>,
    )>,
    answer: Arc<Mutex<Vec<u8>>>,
}

impl tower::Service<Uri> for ToProxy {
    type Response = ProxyStream;
    type Error = Kind;
    type Future = Pin<Box<dyn Future<Output = Result<ProxyStream, Kind>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Kind>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, proxy: Uri) -> Self::Future {
        let ToProxy { tcp, tls, answer } = self.clone();
        Box::pin(async move {
            let io = connect_tcp(tcp, proxy).await?;
            let io: Box<dyn Stream> = match tls {
                None => Box::new(io),
                Some((tls, name)) => Box::new(tls.connect(name, io).await.map_err(Kind::Tls)?),
            };
            let mut stream = ProxyStream::new(io, false);
            stream.io.inner_mut().answer = Some(answer);
            Ok(stream)
        })
    }
}

/// hyper-util's `TunnelError` (a type it does not export by name).
type TunnelError = <Tunnel<ToProxy> as tower::Service<Uri>>::Error;

/// A failed tunnel as our [`Kind`]. A refusal's status and reason are read from the proxy's
/// `answer`: hyper-util's error does not carry them.
fn tunnel_failure(e: TunnelError, answer: &[u8], sent_credentials: bool) -> Kind {
    match e {
        TunnelError::ConnectFailed(e) => match e.downcast::<Kind>() {
            Ok(kind) => *kind,
            Err(e) => Kind::Unreachable(connect_reason(e.as_ref())),
        },
        TunnelError::Io(e) => Kind::Io(e),
        TunnelError::TunnelUnexpectedEof => Kind::Closed,
        // Go too accepts exactly 200 and tells 407 apart.
        TunnelError::ProxyAuthRequired => Kind::AuthRequired { sent_credentials },
        TunnelError::MissingHost => Kind::Io(io::Error::other("the server's URL has no host")),
        TunnelError::ProxyHeadersTooLong | TunnelError::TunnelUnsuccessful => {
            let mut headers = [httparse::EMPTY_HEADER; 100];
            let mut response = httparse::Response::new(&mut headers);
            let Ok(httparse::Status::Complete(_)) = response.parse(answer) else {
                return Kind::NotHttp;
            };
            Kind::Refused {
                code: response.code.unwrap_or_default(),
                reason: response
                    .reason
                    .unwrap_or_default()
                    .chars()
                    .filter(|c| c.is_ascii_graphic() || *c == ' ')
                    .take(80)
                    .collect(),
            }
        }
    }
}

/// A SOCKS5 `CONNECT` (RFC 1928) on `io`, offering no authentication and, when the URL has
/// credentials, username/password (RFC 1929) — as Go does. The server's name is sent as is:
/// the proxy resolves it.
async fn socks5_connect(
    io: &mut TcpStream,
    target: &Authority,
    url: &ProxyUrl,
) -> Result<(), Kind> {
    const NO_AUTH: u8 = 0x00;
    const USER_PASS: u8 = 0x02;
    let methods: &[u8] = if url.user.is_some() {
        &[NO_AUTH, USER_PASS]
    } else {
        &[NO_AUTH]
    };
    let mut hello = vec![0x05, methods.len() as u8];
    hello.extend_from_slice(methods);
    io.write_all(&hello).await.map_err(Kind::Io)?;
    let mut chosen = [0u8; 2];
    read_exact(io, &mut chosen).await?;
    if chosen[0] != 0x05 {
        return Err(Kind::NotSocks);
    }
    match chosen[1] {
        NO_AUTH => {}
        USER_PASS => {
            let user = url.user.as_ref().ok_or(Kind::NotSocks)?;
            let (name, password) = (
                user.username.as_bytes(),
                user.password.as_deref().unwrap_or_default().as_bytes(),
            );
            let (Ok(nlen), Ok(plen)) = (u8::try_from(name.len()), u8::try_from(password.len()))
            else {
                return Err(Kind::Socks(
                    "the user name or password is longer than 255 bytes",
                ));
            };
            let mut auth = vec![0x01, nlen];
            auth.extend_from_slice(name);
            auth.push(plen);
            auth.extend_from_slice(password);
            io.write_all(&auth).await.map_err(Kind::Io)?;
            let mut status = [0u8; 2];
            read_exact(io, &mut status).await?;
            if status[1] != 0 {
                return Err(Kind::SocksAuth {
                    sent_credentials: true,
                });
            }
        }
        _ => {
            return Err(Kind::SocksAuth {
                sent_credentials: url.user.is_some(),
            });
        }
    }
    let mut request = vec![0x05, 0x01, 0x00];
    match target.host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(ip)) => {
            request.push(0x01);
            request.extend_from_slice(&ip.octets());
        }
        Ok(std::net::IpAddr::V6(ip)) => {
            request.push(0x04);
            request.extend_from_slice(&ip.octets());
        }
        Err(_) => {
            let name = target.host.as_bytes();
            let Ok(len) = u8::try_from(name.len()) else {
                return Err(Kind::Socks("the server's name is longer than 255 bytes"));
            };
            request.push(0x03);
            request.push(len);
            request.extend_from_slice(name);
        }
    }
    request.extend_from_slice(&target.port.to_be_bytes());
    io.write_all(&request).await.map_err(Kind::Io)?;
    let mut reply = [0u8; 4];
    read_exact(io, &mut reply).await?;
    if reply[0] != 0x05 {
        return Err(Kind::NotSocks);
    }
    if reply[1] != 0 {
        return Err(Kind::Socks(match reply[1] {
            0x01 => "general failure",
            0x02 => "connection not allowed by ruleset",
            0x03 => "network unreachable",
            0x04 => "host unreachable",
            0x05 => "connection refused",
            0x06 => "TTL expired",
            0x07 => "command not supported",
            0x08 => "address type not supported",
            _ => "unknown error",
        }));
    }
    // The bound address, which the client does not need.
    let rest = match reply[3] {
        0x01 => 4 + 2,
        0x04 => 16 + 2,
        0x03 => {
            let mut len = [0u8; 1];
            read_exact(io, &mut len).await?;
            usize::from(len[0]) + 2
        }
        _ => return Err(Kind::NotSocks),
    };
    let mut bound = vec![0u8; rest];
    read_exact(io, &mut bound).await
}

async fn read_exact(io: &mut TcpStream, buf: &mut [u8]) -> Result<(), Kind> {
    match io.read_exact(buf).await {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Err(Kind::Closed),
        Err(e) => Err(Kind::Io(e)),
    }
}

/// `host:port` of the server, the port defaulted by scheme.
struct Authority {
    host: String,
    port: u16,
}

impl Authority {
    fn of(dst: &Uri) -> Authority {
        let host = dst
            .host()
            .unwrap_or_default()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = dst.port_u16().unwrap_or(match dst.scheme_str() {
            Some("http") => 80,
            _ => 443,
        });
        Authority { host, port }
    }
}

impl fmt::Display for Authority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", bracketed(&self.host), self.port)
    }
}

/// A proxy failure; the message names the proxy and where it came from, never credentials.
#[derive(Debug)]
pub struct ProxyError {
    /// `http://proxy.corp:3128 (HTTPS_PROXY)`.
    proxy: String,
    /// `host:port` of the API server.
    target: String,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Unreachable(String),
    Tls(io::Error),
    Io(io::Error),
    Closed,
    NotHttp,
    NotSocks,
    Refused { code: u16, reason: String },
    AuthRequired { sent_credentials: bool },
    SocksAuth { sent_credentials: bool },
    Socks(&'static str),
    UnsupportedScheme(String),
    BadPort,
    BadHost,
}

impl fmt::Display for ProxyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The proxy's URL comes from the environment or the kubeconfig, its answers from the
        // network: all of it is escaped.
        let (p, t) = (Untrusted(&self.proxy), Untrusted(&self.target));
        match &self.kind {
            Kind::Unreachable(why) => {
                write!(f, "cannot connect to the proxy {p}: {}", Untrusted(why))
            }
            Kind::Tls(e) => write!(
                f,
                "TLS with the proxy {p} failed: {}",
                appupdate_model::text::one_line(&e.to_string())
            ),
            Kind::Io(e) => write!(
                f,
                "the connection to the proxy {p} failed while opening the tunnel to {t}: {}",
                appupdate_model::text::one_line(&e.to_string())
            ),
            Kind::Closed => write!(
                f,
                "the proxy {p} closed the connection instead of opening a tunnel to {t}"
            ),
            Kind::NotHttp => write!(
                f,
                "the proxy {p} did not answer the CONNECT request for {t} with HTTP"
            ),
            Kind::NotSocks => write!(
                f,
                "the proxy {p} did not answer the SOCKS5 request for {t} as a SOCKS5 proxy"
            ),
            Kind::Refused { code, reason } => {
                write!(f, "the proxy {p} refused the tunnel to {t}: {code}")?;
                if !reason.is_empty() {
                    write!(f, " {}", Untrusted(reason))?;
                }
                Ok(())
            }
            Kind::AuthRequired {
                sent_credentials: true,
            } => write!(
                f,
                "the proxy {p} rejected the credentials in its URL (407 Proxy Authentication Required)"
            ),
            Kind::AuthRequired {
                sent_credentials: false,
            } => write!(
                f,
                "the proxy {p} requires authentication (407 Proxy Authentication Required); put the credentials in the proxy URL (http://USER:PASSWORD@HOST:PORT)"
            ),
            Kind::SocksAuth {
                sent_credentials: true,
            } => write!(
                f,
                "the SOCKS5 proxy {p} rejected the credentials in its URL"
            ),
            Kind::SocksAuth {
                sent_credentials: false,
            } => write!(
                f,
                "the SOCKS5 proxy {p} requires authentication; put the credentials in the proxy URL (socks5://USER:PASSWORD@HOST:PORT)"
            ),
            Kind::Socks(why) => write!(f, "the SOCKS5 proxy {p} could not connect to {t}: {why}"),
            Kind::UnsupportedScheme(s) => write!(
                f,
                "the proxy {p} has the unsupported scheme {:?}; use http, https or socks5",
                Untrusted(s)
            ),
            Kind::BadPort => write!(f, "the proxy {p} has no valid port"),
            Kind::BadHost => write!(f, "the proxy {p} has no valid host name"),
        }
    }
}

impl std::error::Error for ProxyError {}

/// A failure before it is named ([`ProxyError`] gives the message): hyper-util's [`Tunnel`]
/// carries the failures of the connection to the proxy as errors.
impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for Kind {}

/// The first [`ProxyError`] in an error's chain.
pub fn find_proxy_error<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a ProxyError> {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if let Some(p) = e.downcast_ref::<ProxyError>() {
            return Some(p);
        }
        cur = e.source();
    }
    None
}

/// A byte stream: TCP, or TLS to an `https://` proxy.
trait Stream: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> Stream for T {}

/// The byte stream to the proxy or the server; while `answer` is set (the `CONNECT` exchange),
/// what is read is copied into it.
struct Io {
    stream: Box<dyn Stream>,
    answer: Option<Arc<Mutex<Vec<u8>>>>,
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.stream).poll_read(cx, buf);
        if let (Poll::Ready(Ok(())), Some(answer)) = (&polled, &this.answer)
            && let Ok(mut answer) = answer.lock()
        {
            answer.extend_from_slice(&buf.filled()[before..]);
        }
        polled
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// What [`ProxyConnector`] yields: a stream to the server (direct or tunnelled), or to a proxy
/// that forwards requests (then hyper writes them in absolute form).
pub struct ProxyStream {
    io: TokioIo<Io>,
    forwarding: bool,
}

impl ProxyStream {
    fn new(stream: Box<dyn Stream>, forwarding: bool) -> ProxyStream {
        ProxyStream {
            io: TokioIo::new(Io {
                stream,
                answer: None,
            }),
            forwarding,
        }
    }

    /// The proxy's answer is no longer copied.
    fn untap(&mut self) {
        self.io.inner_mut().answer = None;
    }
}

impl Connection for ProxyStream {
    fn connected(&self) -> Connected {
        Connected::new().proxy(self.forwarding)
    }
}

impl hyper::rt::Read for ProxyStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for ProxyStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::{Source, parse_url};

    fn proxy(url: &str) -> Proxy {
        Proxy {
            url: parse_url(url).unwrap(),
            source: Source::Env("HTTPS_PROXY"),
        }
    }

    /// A one-shot CONNECT proxy that answers `answer` and records the request head.
    async fn answering(answer: &'static str) -> (Uri, tokio::task::JoinHandle<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            while !head.ends_with(b"\r\n\r\n") {
                let mut b = [0u8; 1];
                if s.read(&mut b).await.unwrap() == 0 {
                    break;
                }
                head.push(b[0]);
            }
            s.write_all(answer.as_bytes()).await.unwrap();
            String::from_utf8(head).unwrap()
        });
        (format!("http://{addr}").parse().unwrap(), task)
    }

    fn connector(p: &Proxy) -> ProxyConnector {
        ProxyConnector::new(
            HttpConnector::new_with_resolver(Resolver::default()),
            Some(p),
            || Err::<rustls::ClientConfig, ()>(()),
        )
        .unwrap()
    }

    async fn open(p: &Proxy, dst: &str) -> Result<ProxyStream, String> {
        let mut c = connector(p);
        tower::Service::call(&mut c, dst.parse().unwrap())
            .await
            .map_err(|e| find_proxy_error(e.as_ref()).unwrap().to_string())
    }

    #[tokio::test]
    async fn a_tunnel_sends_connect_with_basic_credentials() {
        let (uri, head) = answering("HTTP/1.1 200 Connection established\r\n\r\n").await;
        let p = proxy(&format!(
            "http://al%40ice:s3cret@{}",
            uri.authority().unwrap()
        ));
        let s = open(&p, "https://api.corp.example:6443").await.unwrap();
        let head = head.await.unwrap();
        // base64("al@ice:s3cret")
        assert_eq!(
            head,
            "CONNECT api.corp.example:6443 HTTP/1.1\r\nHost: api.corp.example:6443\r\nProxy-Authorization: Basic YWxAaWNlOnMzY3JldA==\r\n\r\n"
        );
        assert!(!s.connected().is_proxied());
        // The proxy's answer is no longer copied once the tunnel is open.
        assert!(s.io.inner().answer.is_none());
    }

    #[tokio::test]
    async fn refusals_name_the_proxy_and_status_without_credentials() {
        let (uri, _h) = answering("HTTP/1.1 403 Forbidden\r\n\r\n").await;
        let p = proxy(&format!("http://u:pw@{}", uri.authority().unwrap()));
        let e = open(&p, "https://10.0.0.1:6443").await.err().unwrap();
        assert_eq!(
            e,
            format!(
                "the proxy http://{} (HTTPS_PROXY) refused the tunnel to 10.0.0.1:6443: 403 Forbidden",
                uri.authority().unwrap()
            )
        );

        let e = refusal("HTTP/1.1 407 Proxy Authentication Required\r\n\r\n").await;
        assert!(e.contains("requires authentication (407"), "{e}");
        let e = refusal("SSH-2.0-OpenSSH\r\n\r\n").await;
        assert!(
            e.contains("did not answer the CONNECT request for h:443 with HTTP"),
            "{e}"
        );
    }

    /// The error of a tunnel to `https://h` through a proxy that answers `answer`.
    async fn refusal(answer: &'static str) -> String {
        let (uri, _h) = answering(answer).await;
        let p = proxy(&format!("http://{}", uri.authority().unwrap()));
        open(&p, "https://h").await.err().unwrap()
    }

    #[tokio::test]
    async fn a_proxy_that_is_down_is_named() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let p = proxy(&format!("socks5://user:pw@127.0.0.1:{port}"));
        let e = open(&p, "https://api:6443").await.err().unwrap();
        assert_eq!(
            e,
            format!(
                "cannot connect to the proxy socks5://127.0.0.1:{port} (HTTPS_PROXY): connection refused"
            )
        );
        let e = open(&proxy("ftp://127.0.0.1:21"), "https://api")
            .await
            .err()
            .unwrap();
        assert!(e.contains("unsupported scheme \"ftp\""), "{e}");
    }

    /// Why the SOCKS5 exchange is not hyper-util's `SocksV5` (module documentation): with
    /// credentials in the URL, Go offers "no authentication" too, and a proxy that needs none
    /// is used without them.
    #[tokio::test]
    async fn socks5_offers_no_authentication_too_as_go_does() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let proxy_side = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut hello = [0u8; 4];
            s.read_exact(&mut hello).await.unwrap();
            s.write_all(&[0x05, 0x00]).await.unwrap();
            // CONNECT to the name "api" (3 bytes), port 6443.
            let mut request = [0u8; 4 + 1 + 3 + 2];
            s.read_exact(&mut request).await.unwrap();
            s.write_all(&[0x05, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0, 0])
                .await
                .unwrap();
            (hello, request)
        });
        let p = proxy(&format!("socks5://user:pw@{addr}"));
        open(&p, "https://api:6443").await.unwrap();
        let (hello, request) = proxy_side.await.unwrap();
        assert_eq!(hello, [0x05, 0x02, 0x00, 0x02]);
        assert_eq!(&request[..], b"\x05\x01\x00\x03\x03api\x19\x2b");
    }

    #[tokio::test]
    async fn http_servers_get_their_requests_forwarded_in_absolute_form() {
        let (uri, _h) = answering("").await;
        let p = proxy(&format!("http://{}", uri.authority().unwrap()));
        let s = open(&p, "http://api:8080").await.unwrap();
        assert!(s.connected().is_proxied());
    }
}
