//! A stand-in for a gateway or ingress controller, for `--verify-url`: it answers every request
//! the same way (a status, a redirect, or never) and records what it was asked — method,
//! request target, `Host`, whether credentials came, and for TLS the server name the client
//! sent. Used by the test files that need it (`#[path = "common/gate.rs"] mod gate;`), each
//! using a part of it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

/// How the gate answers every request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// This status, with a small body.
    Status(u16),
    /// `302 Found` with this `Location`.
    Redirect(String),
    /// Reads the request and never answers.
    Never,
}

/// One request the gate received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub method: String,
    /// The request target's path (an absolute-form target — from a forwarding proxy — too).
    pub path: String,
    pub host: Option<String>,
    /// An `Authorization` or `Cookie` header came with it.
    pub credentials: bool,
    /// The TLS server name (SNI) of its connection; `None` for plain HTTP or no SNI.
    pub sni: Option<String>,
}

pub struct Gate {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    ca_pem: Option<String>,
    _rt: tokio::runtime::Runtime,
}

impl Gate {
    /// Plain HTTP on 127.0.0.1.
    pub fn start(reply: Reply) -> Gate {
        Gate::serve(reply, None)
    }

    /// HTTPS on 127.0.0.1 with a certificate for `names`, from a CA of its own
    /// ([`Gate::ca_pem`]).
    pub fn start_tls(reply: Reply, names: &[&str]) -> Gate {
        let (ca, config) = tls_config(names);
        Gate::serve(reply, Some((ca, config)))
    }

    fn serve(reply: Reply, tls: Option<(String, rustls::ServerConfig)>) -> Gate {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let (ca_pem, acceptor) = match tls {
            Some((ca, config)) => (
                Some(ca),
                Some(tokio_rustls::TlsAcceptor::from(Arc::new(config))),
            ),
            None => (None, None),
        };
        let log = seen.clone();
        rt.spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (reply, log, acceptor) = (reply.clone(), log.clone(), acceptor.clone());
                tokio::spawn(async move {
                    match acceptor {
                        None => connection(TokioIo::new(socket), None, reply, log).await,
                        Some(tls) => {
                            let Ok(stream) = tls.accept(socket).await else {
                                return;
                            };
                            let sni = stream.get_ref().1.server_name().map(str::to_owned);
                            connection(TokioIo::new(stream), sni, reply, log).await
                        }
                    }
                });
            }
        });
        Gate {
            addr,
            seen,
            ca_pem,
            _rt: rt,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` (or `https://`).
    pub fn url(&self) -> String {
        let scheme = if self.ca_pem.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.addr)
    }

    /// The CA of an HTTPS gate's certificate.
    pub fn ca_pem(&self) -> &str {
        self.ca_pem.as_deref().unwrap_or_default()
    }

    /// The requests received, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// `(host, path)` of each request received, sorted.
    pub fn asked(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = self
            .seen()
            .into_iter()
            .map(|s| (s.host.unwrap_or_default(), s.path))
            .collect();
        v.sort();
        v
    }
}

async fn connection<I>(io: I, sni: Option<String>, reply: Reply, log: Arc<Mutex<Vec<Seen>>>)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let header = |name: hyper::header::HeaderName| {
            req.headers()
                .get(name)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        };
        log.lock().unwrap().push(Seen {
            method: req.method().to_string(),
            path: req.uri().path().to_owned(),
            host: header(hyper::header::HOST),
            credentials: header(hyper::header::AUTHORIZATION).is_some()
                || header(hyper::header::COOKIE).is_some(),
            sni: sni.clone(),
        });
        let reply = reply.clone();
        async move {
            let response = match reply {
                Reply::Status(code) => Response::builder()
                    .status(code)
                    .body(Full::new(Bytes::from_static(b"gate\n"))),
                Reply::Redirect(location) => Response::builder()
                    .status(302)
                    .header(hyper::header::LOCATION, location)
                    .body(Full::new(Bytes::new())),
                Reply::Never => std::future::pending().await,
            };
            Ok::<_, std::convert::Infallible>(response.unwrap())
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(io, service)
        .await;
}

/// A CA and a server certificate for `names` signed by it.
fn tls_config(names: &[&str]) -> (String, rustls::ServerConfig) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "gate CA");
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let params =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(cert.der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    (ca_cert.pem(), config)
}
