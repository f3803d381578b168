//! Connections: accepting them (TLS by ALPN `h2`/`http/1.1`, or plain), serving each with
//! hyper, and the headers every response carries.

use std::sync::Arc;

use futures_util::StreamExt;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::sync::watch;

use super::{Server, serve};
use crate::api::{Body, Reply, stopped};

/// Returned by the service to make hyper close the connection without a response.
#[derive(Debug)]
pub struct DropConnection;

impl std::fmt::Display for DropConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection dropped by an injected fault")
    }
}

impl std::error::Error for DropConnection {}

/// Accept connections until the sandbox stops; each serves HTTP/1.1 or HTTP/2.
pub async fn accept_loop(
    listener: tokio::net::TcpListener,
    server: Arc<Server>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = stopped(&mut shutdown) => return,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                let conn_id = server.log.next_connection();
                let server = server.clone();
                let tls = tls.clone();
                tokio::spawn(async move {
                    let svc_server = server.clone();
                    let svc = hyper::service::service_fn(move |req| serve(svc_server.clone(), conn_id, req));
                    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    // Go's net/http writes canonical header names (`Content-Type`, `Audit-Id`).
                    builder.http1().title_case_headers(true);
                    match tls {
                        Some(acceptor) => {
                            let Ok(stream) = acceptor.accept(stream).await else { return };
                            let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
                        }
                        None => {
                            let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
                        }
                    }
                });
            }
        }
    }
}

/// The response: the reply with `Audit-Id` and, for an authenticated client, the priority and
/// fairness headers; cut midway when the reply says so.
pub fn finish(reply: Reply, authenticated: bool) -> Response<Body> {
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
