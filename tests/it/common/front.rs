//! A plain-HTTP server in front of a sandbox: forwards every request, adds a `Warning` header
//! to each answer when one is set, or answers a matching request with a canned status and body
//! instead (a refusal, or an answer the sandbox cannot give).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;

/// A chosen answer for the next `count` requests that match.
#[derive(Clone)]
pub struct Refusal {
    pub method: &'static str,
    pub path: String,
    /// Only requests with (`Some(true)`) or without (`Some(false)`) `dryRun`.
    pub dry_run: Option<bool>,
    pub code: u16,
    pub status: Value,
    pub count: u32,
}

#[derive(Default)]
struct FrontState {
    warning: Option<String>,
    refusals: Vec<Refusal>,
}

/// Forwards every request to the sandbox (plain HTTP/1.1, watches streamed), adding a
/// `Warning: 299 - "<text>"` header to each answer when one is set, or answers a matching
/// request with a [`Refusal`]'s Status instead.
pub struct Front {
    pub addr: SocketAddr,
    state: Arc<Mutex<FrontState>>,
}

type Body = BoxBody<Bytes, hyper::Error>;

fn full(bytes: Vec<u8>) -> Body {
    Full::new(Bytes::from(bytes))
        .map_err(|never| match never {})
        .boxed()
}

async fn answer(
    req: Request<Incoming>,
    upstream: SocketAddr,
    state: Arc<Mutex<FrontState>>,
    client: hyper_util::client::legacy::Client<
        hyper_util::client::legacy::connect::HttpConnector,
        Body,
    >,
) -> Result<Response<Body>, hyper::Error> {
    let path = req.uri().path().to_owned();
    let dry_run = req.uri().query().unwrap_or("").contains("dryRun=All");
    let refusal = {
        let mut st = state.lock().unwrap();
        let found = st.refusals.iter_mut().find(|r| {
            r.count > 0
                && r.method == req.method().as_str()
                && path == r.path
                && r.dry_run.is_none_or(|d| d == dry_run)
        });
        found.map(|r| {
            r.count -= 1;
            r.clone()
        })
    };
    let warning = state.lock().unwrap().warning.clone();
    let mut res = match refusal {
        Some(r) => Response::builder()
            .status(r.code)
            .header("content-type", "application/json")
            .body(full(serde_json::to_vec(&r.status).unwrap()))
            .unwrap(),
        None => {
            let (mut parts, body) = req.into_parts();
            let pq = parts.uri.path_and_query().map_or("/", |p| p.as_str());
            parts.uri = format!("http://{upstream}{pq}").parse().unwrap();
            parts.headers.remove(hyper::header::HOST);
            let body = body.collect().await?.to_bytes();
            match client
                .request(Request::from_parts(parts, full(body.to_vec())))
                .await
            {
                Ok(res) => res.map(|b| b.boxed()),
                Err(e) => Response::builder()
                    .status(502)
                    .body(full(e.to_string().into_bytes()))
                    .unwrap(),
            }
        }
    };
    if let Some(text) = warning {
        let value = format!(
            "299 - \"{}\"",
            text.replace('\\', "\\\\").replace('"', "\\\"")
        );
        res.headers_mut().append(
            hyper::header::WARNING,
            hyper::header::HeaderValue::from_bytes(value.as_bytes()).unwrap(),
        );
    }
    Ok(res)
}

impl Front {
    pub fn start(upstream: SocketAddr) -> Front {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(FrontState::default()));
        let shared = state.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
                    .build_http::<Body>();
                while let Ok((tcp, _)) = listener.accept().await {
                    let (state, client) = (shared.clone(), client.clone());
                    let service = hyper::service::service_fn(move |req| {
                        answer(req, upstream, state.clone(), client.clone())
                    });
                    tokio::spawn(async move {
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(tcp), service)
                            .await;
                    });
                }
            });
        });
        Front { addr, state }
    }

    pub fn warn(&self, text: &str) {
        self.state.lock().unwrap().warning = Some(text.to_owned());
    }

    pub fn refuse(&self, refusal: Refusal) {
        self.state.lock().unwrap().refusals.push(refusal);
    }
}
