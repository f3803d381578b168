//! Small proxies for tests, the benchmark and trying the plugin behind a proxy:
//!
//! * [`Kind::Http`]: an HTTP proxy that opens `CONNECT` tunnels and forwards requests written in
//!   absolute form (`GET http://host/path`) — what kubectl and the plugin use for `https://`
//!   and `http://` servers;
//! * [`Kind::Https`]: the same over TLS, with a certificate for 127.0.0.1 and localhost from a
//!   CA generated per proxy ([`TestProxy::ca_pem`]);
//! * [`Kind::Socks5`]: a SOCKS5 proxy (`CONNECT` by IPv4, IPv6 or name).
//!
//! Either can require credentials (HTTP: `Proxy-Authorization: Basic`, answered with 407
//! otherwise; SOCKS5: username/password), refuse every tunnel, or send every tunnel to one
//! upstream address whatever the client asked for (so that a client can ask for a name that
//! does not resolve). [`Stats`] counts requests and tunnels and records the targets and the
//! credentials received, and [`Stats::log`] has one line per request, as a proxy's access log
//! would (without credentials).

#![allow(clippy::unwrap_used)]

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use base64::Engine;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Which protocol the proxy speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Http,
    Https,
    Socks5,
}

/// How the proxy behaves.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Require these credentials (user, password).
    pub credentials: Option<(String, String)>,
    /// Refuse every tunnel: HTTP answers `CONNECT` with this status; SOCKS5 replies
    /// "connection not allowed by ruleset".
    pub refuse_with: Option<u16>,
    /// Connect every tunnel and forwarded request here instead of the requested target.
    pub upstream: Option<SocketAddr>,
    /// Also print each log line on stderr (the standalone proxy).
    pub log_to_stderr: bool,
}

/// What the proxy saw.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// TCP connections accepted.
    pub connections: u64,
    /// `CONNECT` requests, forwarded requests' connections and SOCKS5 requests, answered or not.
    pub requests: u64,
    /// Tunnels opened (HTTP 200 to a `CONNECT`, or SOCKS5 success).
    pub tunnels: u64,
    /// Connections on which requests were forwarded in absolute form.
    pub forwarded: u64,
    /// The `host:port` each request asked for, in order.
    pub targets: Vec<String>,
    /// The credentials each request carried (decoded `user:password`), in order.
    pub credentials: Vec<Option<String>>,
    /// One line per request: method or command, target, outcome.
    pub log: Vec<String>,
}

/// A running proxy on 127.0.0.1; it stops when dropped.
pub struct TestProxy {
    kind: Kind,
    addr: SocketAddr,
    stats: Arc<Mutex<Stats>>,
    ca_pem: Option<String>,
    _rt: tokio::runtime::Runtime,
}

impl TestProxy {
    /// Listens on `127.0.0.1:0`.
    pub fn start(kind: Kind, opts: Options) -> io::Result<TestProxy> {
        TestProxy::start_on(kind, opts, SocketAddr::from(([127, 0, 0, 1], 0)))
    }

    /// Listens on `listen`.
    pub fn start_on(kind: Kind, opts: Options, listen: SocketAddr) -> io::Result<TestProxy> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .thread_name("test-proxy")
            .build()?;
        let listener = rt.block_on(TcpListener::bind(listen))?;
        let addr = listener.local_addr()?;
        let stats = Arc::new(Mutex::new(Stats::default()));
        let (ca_pem, acceptor) = match kind {
            Kind::Https => {
                let (ca, config) = tls_config().map_err(io::Error::other)?;
                (
                    Some(ca),
                    Some(tokio_rustls::TlsAcceptor::from(Arc::new(config))),
                )
            }
            _ => (None, None),
        };
        let shared = Arc::new(Shared {
            opts,
            stats: stats.clone(),
        });
        rt.spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                shared.stats.lock().unwrap().connections += 1;
                let shared = shared.clone();
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let _ = match (kind, acceptor) {
                        (Kind::Https, Some(tls)) => match tls.accept(client).await {
                            Ok(client) => http(client, &shared).await,
                            Err(e) => {
                                shared.log(format!("TLS handshake failed: {e}"));
                                Ok(())
                            }
                        },
                        (Kind::Socks5, _) => socks5(client, &shared).await,
                        _ => http(client, &shared).await,
                    };
                });
            }
        });
        Ok(TestProxy {
            kind,
            addr,
            stats,
            ca_pem,
            _rt: rt,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` or `socks5://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("{}://{}", self.scheme(), self.addr)
    }

    /// The URL with `user:password@` (both percent-encoded).
    pub fn url_with_credentials(&self, user: &str, password: &str) -> String {
        format!(
            "{}://{}:{}@{}",
            self.scheme(),
            percent_encode(user),
            percent_encode(password),
            self.addr
        )
    }

    /// The CA certificate (PEM) of a [`Kind::Https`] proxy.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    fn scheme(&self) -> &'static str {
        match self.kind {
            Kind::Http => "http",
            Kind::Https => "https",
            Kind::Socks5 => "socks5",
        }
    }

    pub fn stats(&self) -> Stats {
        self.stats.lock().unwrap().clone()
    }
}

/// A port on 127.0.0.1 on which nothing listens (for "the proxy is down").
pub fn closed_port() -> io::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

struct Shared {
    opts: Options,
    stats: Arc<Mutex<Stats>>,
}

impl Shared {
    fn record(&self, target: &str, credentials: Option<String>) {
        let mut s = self.stats.lock().unwrap();
        s.requests += 1;
        s.targets.push(target.to_owned());
        s.credentials.push(credentials);
    }

    fn log(&self, line: String) {
        if self.opts.log_to_stderr {
            eprintln!("{line}");
        }
        self.stats.lock().unwrap().log.push(line);
    }

    fn credentials_ok(&self, got: Option<&str>) -> bool {
        match &self.opts.credentials {
            None => true,
            Some((u, p)) => got == Some(format!("{u}:{p}").as_str()),
        }
    }

    async fn upstream(&self, target: &str) -> io::Result<TcpStream> {
        match self.opts.upstream {
            Some(addr) => TcpStream::connect(addr).await,
            None => TcpStream::connect(target).await,
        }
    }
}

async fn read_head<S: AsyncRead + Unpin>(client: &mut S) -> io::Result<Vec<u8>> {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 64 * 1024 {
            return Err(io::Error::other("request head too long"));
        }
        let mut b = [0u8; 1];
        if client.read(&mut b).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        head.push(b[0]);
    }
    Ok(head)
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "Connection established",
        403 => "Forbidden",
        407 => "Proxy Authentication Required",
        502 => "Bad Gateway",
        _ => "Refused",
    }
}

async fn http<S: AsyncRead + AsyncWrite + Unpin>(mut client: S, shared: &Shared) -> io::Result<()> {
    let head = read_head(&mut client).await?;
    let text = String::from_utf8_lossy(&head).into_owned();
    let mut lines = text.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let (method, target) = (
        first.next().unwrap_or_default().to_owned(),
        first.next().unwrap_or_default().to_owned(),
    );
    let credentials = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("proxy-authorization"))
        .and_then(|(_, v)| v.trim().strip_prefix("Basic ").map(str::to_owned))
        .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
        .map(|raw| String::from_utf8_lossy(&raw).into_owned());
    let forward = method != "CONNECT";
    // Forwarded requests name the server in the URL: http://host:port/path.
    let host_port = if forward {
        let rest = target.strip_prefix("http://").unwrap_or(&target);
        let authority = rest.split('/').next().unwrap_or_default();
        if authority.contains(':') {
            authority.to_owned()
        } else {
            format!("{authority}:80")
        }
    } else {
        target.clone()
    };
    shared.record(&host_port, credentials.clone());
    let auth = if credentials.is_some() {
        "with credentials"
    } else {
        "without credentials"
    };
    let answer = |code: u16| {
        format!(
            "HTTP/1.1 {code} {}\r\n{}Content-Length: 0\r\nConnection: close\r\n\r\n",
            reason(code),
            if code == 407 {
                "Proxy-Authenticate: Basic realm=\"test-proxy\"\r\n"
            } else {
                ""
            }
        )
    };
    let refusal = if !shared.credentials_ok(credentials.as_deref()) {
        Some(407)
    } else {
        shared.opts.refuse_with
    };
    if let Some(code) = refusal {
        shared.log(format!(
            "{method} {target} {auth} -> {code} {}",
            reason(code)
        ));
        client.write_all(answer(code).as_bytes()).await?;
        return Ok(());
    }
    let mut upstream = match shared.upstream(&host_port).await {
        Ok(u) => u,
        Err(e) => {
            shared.log(format!("{method} {target} {auth} -> 502 ({e})"));
            client.write_all(answer(502).as_bytes()).await?;
            return Ok(());
        }
    };
    if forward {
        shared.stats.lock().unwrap().forwarded += 1;
        shared.log(format!("{method} {target} {auth} -> forwarded"));
        upstream.write_all(&head).await?;
    } else {
        shared.stats.lock().unwrap().tunnels += 1;
        shared.log(format!("{method} {target} {auth} -> 200 tunnel open"));
        client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await?;
    }
    let (up, down) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    shared.log(format!(
        "{method} {target} closed: {up} bytes up, {down} bytes down"
    ));
    Ok(())
}

async fn socks5(mut client: TcpStream, shared: &Shared) -> io::Result<()> {
    let mut hello = [0u8; 2];
    client.read_exact(&mut hello).await?;
    let mut methods = vec![0u8; usize::from(hello[1])];
    client.read_exact(&mut methods).await?;
    let want_auth = shared.opts.credentials.is_some();
    let method = if want_auth { 0x02 } else { 0x00 };
    if hello[0] != 5 || !methods.contains(&method) {
        client.write_all(&[5, 0xFF]).await?;
        shared.log("SOCKS5 no acceptable authentication method".into());
        return Ok(());
    }
    client.write_all(&[5, method]).await?;
    let mut credentials = None;
    if want_auth {
        let mut ver_len = [0u8; 2];
        client.read_exact(&mut ver_len).await?;
        let mut user = vec![0u8; usize::from(ver_len[1])];
        client.read_exact(&mut user).await?;
        let mut plen = [0u8; 1];
        client.read_exact(&mut plen).await?;
        let mut password = vec![0u8; usize::from(plen[0])];
        client.read_exact(&mut password).await?;
        let got = format!(
            "{}:{}",
            String::from_utf8_lossy(&user),
            String::from_utf8_lossy(&password)
        );
        let ok = shared.credentials_ok(Some(&got));
        credentials = Some(got);
        client.write_all(&[1, if ok { 0 } else { 1 }]).await?;
        if !ok {
            shared.log("SOCKS5 authentication failed".into());
            return Ok(());
        }
    }
    let mut req = [0u8; 4];
    client.read_exact(&mut req).await?;
    let host = match req[3] {
        1 => {
            let mut a = [0u8; 4];
            client.read_exact(&mut a).await?;
            std::net::Ipv4Addr::from(a).to_string()
        }
        4 => {
            let mut a = [0u8; 16];
            client.read_exact(&mut a).await?;
            format!("[{}]", std::net::Ipv6Addr::from(a))
        }
        3 => {
            let mut len = [0u8; 1];
            client.read_exact(&mut len).await?;
            let mut name = vec![0u8; usize::from(len[0])];
            client.read_exact(&mut name).await?;
            String::from_utf8_lossy(&name).into_owned()
        }
        _ => return Ok(()),
    };
    let mut port = [0u8; 2];
    client.read_exact(&mut port).await?;
    let target = format!("{host}:{}", u16::from_be_bytes(port));
    shared.record(&target, credentials);
    let reply = |code: u8| [5, code, 0, 1, 0, 0, 0, 0, 0, 0];
    if req[1] != 1 {
        client.write_all(&reply(7)).await?;
        return Ok(());
    }
    if shared.opts.refuse_with.is_some() {
        shared.log(format!("SOCKS5 CONNECT {target} -> not allowed"));
        client.write_all(&reply(2)).await?;
        return Ok(());
    }
    let mut upstream = match shared.upstream(&target).await {
        Ok(u) => u,
        Err(e) => {
            shared.log(format!("SOCKS5 CONNECT {target} -> refused ({e})"));
            client.write_all(&reply(5)).await?;
            return Ok(());
        }
    };
    shared.stats.lock().unwrap().tunnels += 1;
    shared.log(format!("SOCKS5 CONNECT {target} -> tunnel open"));
    client.write_all(&reply(0)).await?;
    let (up, down) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    shared.log(format!(
        "SOCKS5 CONNECT {target} closed: {up} bytes up, {down} bytes down"
    ));
    Ok(())
}

/// A CA (returned as PEM) and a server configuration for 127.0.0.1 and localhost.
fn tls_config() -> Result<(String, rustls::ServerConfig), String> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let e = |e: rcgen::Error| e.to_string();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(e)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "test-proxies CA");
    let ca_key = KeyPair::generate().map_err(e)?;
    let ca_cert = ca_params.self_signed(&ca_key).map_err(e)?;
    let issuer = Issuer::new(ca_params, ca_key);
    let mut params =
        CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).map_err(e)?;
    params
        .distinguished_name
        .push(DnType::CommonName, "test-proxies");
    let key = KeyPair::generate().map_err(e)?;
    let cert = params.signed_by(&key, &issuer).map_err(e)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(cert.der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .map_err(|e| e.to_string())?;
    Ok((ca_cert.pem(), config))
}
