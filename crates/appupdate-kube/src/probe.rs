//! `--verify-url`'s client: sends the requests [`appupdate_model::verify`] plans
//! ([`Probe`]s) and collects the answers ([`Answer`]s), which the model judges.
//!
//! Each request goes over the API server's connector ([`crate::transport::plain_client`]):
//! the proxy chosen for the address by kubectl's environment rules (`HTTPS_PROXY`/
//! `HTTP_PROXY`, `NO_PROXY`, never for loopback; the kubeconfig's `proxy-url` is the cluster's
//! and does not apply), TLS checked against `--verify-url-ca` or the system's trusted roots,
//! with the route's host as the server name. Nothing of kube's middleware: no credentials, no
//! retries, and a redirect is an answer, never followed.
//!
//! Bounded: at most [`CONCURRENCY`] requests at once, each within the request bound (from
//! connecting to the answer's status line; the body is not read), all within the overall
//! bound — what it leaves unsent is reported as not checked.

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt;
use http::header::{HOST, LOCATION, PROXY_AUTHORIZATION, USER_AGENT};
use http::{HeaderValue, Request};
use hyper_util::client::legacy::Client;
use kube::client::Body;

use crate::describe::{Unanswered, classify};
use crate::proxy_connector::find_proxy_error;
use crate::transport::Connector;
use appupdate_model::text::Untrusted;
use appupdate_model::verify::{Answer, Probe, VerifyUrl};

/// Requests at once, at most.
pub const CONCURRENCY: usize = 8;

type Plain = Client<Connector, Body>;

/// What the requests need, resolved by the plugin's `settings`.
#[derive(Clone, Debug)]
pub struct ProbeSettings {
    pub url: VerifyUrl,
    /// `--verify-url-ca`: DER certificates; `None`: the system's trusted roots.
    pub ca: Option<Vec<Vec<u8>>>,
    /// The proxy for the address, by the environment's rules.
    pub proxy: Option<crate::proxy::Proxy>,
    /// The bound on each request.
    pub request_timeout: Duration,
    /// The bound on the whole verification: `appupdate_model::verify::OVERALL`, or one
    /// request's bound if longer.
    pub overall: Duration,
    /// The `User-Agent` sent: the plugin and its version.
    pub user_agent: String,
}

/// The CA certificates of `--verify-url-ca`: every `CERTIFICATE` block of a PEM file, as DER.
pub fn parse_ca(pem: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut certs = Vec::new();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert =
            cert.map_err(|e| format!("it is not valid PEM ({})", Untrusted(e.to_string())))?;
        certs.push(cert.to_vec());
    }
    if certs.is_empty() {
        return Err("it holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into());
    }
    Ok(certs)
}

/// Sends every probe (see the module docs); the answers in the probes' order.
pub async fn send_all(probes: &[Probe], settings: &ProbeSettings) -> Vec<Answer> {
    let overall = settings.overall;
    let deadline = tokio::time::Instant::now() + overall;
    // One client per TLS server name: a pooled connection is only reused for its own name.
    let mut clients: HashMap<Option<&str>, Result<Plain, String>> = HashMap::new();
    for p in probes {
        clients
            .entry(p.host.as_deref())
            .or_insert_with(|| client(settings, p.host.as_deref()));
    }
    let clients = &clients;
    let mut answers: Vec<(usize, Answer)> = futures::stream::iter(probes.iter().enumerate())
        .map(|(i, probe)| async move {
            let answer = match clients.get(&probe.host.as_deref()) {
                Some(Ok(client)) => send(client, probe, settings, deadline, overall).await,
                Some(Err(why)) => Answer::Failed(why.clone()),
                None => Answer::Failed("no client".into()),
            };
            (i, answer)
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    answers.sort_by_key(|(i, _)| *i);
    answers.into_iter().map(|(_, a)| a).collect()
}

/// A client for requests to the address with `host` as the TLS server name (`None`: the
/// address's own).
fn client(settings: &ProbeSettings, host: Option<&str>) -> Result<Plain, String> {
    let uri: http::Uri = settings
        .url
        .with_path("/")
        .parse()
        .map_err(|_| "the address is not a valid URL".to_owned())?;
    let mut config = kube::Config::new(uri);
    config.root_cert = settings.ca.clone();
    config.connect_timeout = Some(settings.request_timeout);
    if settings.url.is_https() {
        config.tls_server_name = host.map(str::to_owned);
    }
    crate::transport::plain_client(&config, settings.proxy.as_ref()).map_err(|e| {
        format!(
            "cannot set up TLS: {}",
            appupdate_model::text::one_line(&appupdate_model::text::error_chain(&e).join(": "))
        )
    })
}

async fn send(
    client: &Plain,
    probe: &Probe,
    settings: &ProbeSettings,
    deadline: tokio::time::Instant,
    overall: Duration,
) -> Answer {
    let now = tokio::time::Instant::now();
    if now >= deadline {
        return Answer::OutOfTime(overall);
    }
    let request = match request(probe, settings) {
        Ok(r) => r,
        Err(why) => return Answer::Failed(why),
    };
    let bound = settings.request_timeout.min(deadline - now);
    match tokio::time::timeout(bound, client.request(request)).await {
        Err(_) if bound < settings.request_timeout => Answer::OutOfTime(overall),
        Err(_) => Answer::TimedOut(settings.request_timeout),
        Ok(Err(e)) => Answer::Failed(reason(&e)),
        Ok(Ok(response)) => Answer::Status {
            code: response.status().as_u16(),
            location: response
                .headers()
                .get(LOCATION)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
        },
    }
}

/// `GET /<app><path>` to the address, with the route's host and no credentials (but the
/// proxy's own, when a forwarding proxy needs them).
fn request(probe: &Probe, settings: &ProbeSettings) -> Result<Request<Body>, String> {
    let user_agent = HeaderValue::from_str(&settings.user_agent)
        .map_err(|_| "the User-Agent is not a valid header".to_owned())?;
    let mut builder =
        Request::get(settings.url.with_path(&probe.path)).header(USER_AGENT, user_agent);
    if let Some(host) = &probe.host {
        let value =
            HeaderValue::from_str(host).map_err(|_| "the host is not a valid Host header")?;
        builder = builder.header(HOST, value);
    }
    // An http:// address through an HTTP proxy: the request itself goes to the proxy, with
    // its credentials (an https:// one is tunnelled, and the tunnel carries them).
    if !settings.url.is_https()
        && let Some(auth) = settings
            .proxy
            .as_ref()
            .filter(|p| matches!(p.url.scheme.as_str(), "http" | "https"))
            .and_then(|p| crate::proxy_connector::basic_authorization(&p.url))
    {
        builder = builder.header(PROXY_AUTHORIZATION, auth);
    }
    builder
        .body(Body::empty())
        .map_err(|_| "the path is not a valid URL path".to_owned())
}

/// Why no answer came, in a few words: the proxy's failure names the proxy. (The image
/// check's registry requests say it the same way.)
pub(crate) fn reason(e: &hyper_util::client::legacy::Error) -> String {
    if let Some(proxy) = find_proxy_error(e) {
        return proxy.to_string();
    }
    match classify(e) {
        Unanswered::Refused => "connection refused".into(),
        Unanswered::TimedOut => "timed out".into(),
        Unanswered::ClosedEarly => "the connection was closed before an answer".into(),
        Unanswered::Tls(detail) => format!("TLS failure ({detail})"),
        Unanswered::Unresolved(detail) => format!("cannot resolve the name ({detail})"),
        Unanswered::Credentials(detail) | Unanswered::Other(detail) => detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that takes connections and requests and never answers.
    async fn silent() -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                open.push(socket);
            }
        });
        (addr, task)
    }

    fn settings(addr: std::net::SocketAddr, request: u64, overall: u64) -> ProbeSettings {
        ProbeSettings {
            url: VerifyUrl::parse(&format!("http://{addr}")).unwrap(),
            ca: None,
            proxy: None,
            request_timeout: Duration::from_millis(request),
            overall: Duration::from_millis(overall),
            user_agent: "kubectl-appupdate/test (verify-url)".into(),
        }
    }

    fn probes(n: usize) -> Vec<Probe> {
        (0..n)
            .map(|i| Probe {
                host: Some("shop.example.com".into()),
                path: format!("/web/p{i:02}"),
            })
            .collect()
    }

    /// Eight at a time, each within its bound, all within the overall bound: the first eight
    /// time out, the next eight are cut short by the overall bound, the last ones never start.
    #[tokio::test]
    async fn requests_go_eight_at_a_time_and_stop_at_the_overall_bound() {
        let (addr, server) = silent().await;
        let answers = send_all(&probes(20), &settings(addr, 1000, 1500)).await;
        server.abort();
        assert_eq!(answers.len(), 20);
        let timed_out = Answer::TimedOut(Duration::from_secs(1));
        let out_of_time = Answer::OutOfTime(Duration::from_millis(1500));
        assert_eq!(answers[..CONCURRENCY], vec![timed_out; CONCURRENCY][..]);
        assert_eq!(
            answers[CONCURRENCY..],
            vec![out_of_time; 20 - CONCURRENCY][..]
        );
    }

    #[test]
    fn a_ca_file_gives_its_certificates_or_says_it_has_none() {
        let pem = b"-----BEGIN CERTIFICATE-----\nAAEC\n-----END CERTIFICATE-----\nnoise\n-----BEGIN CERTIFICATE-----\nAwQ=\n-----END CERTIFICATE-----\n";
        assert_eq!(parse_ca(pem).unwrap(), vec![vec![0, 1, 2], vec![3, 4]]);
        assert!(
            parse_ca(b"not a certificate")
                .unwrap_err()
                .contains("no PEM certificate")
        );
        assert!(parse_ca(b"-----BEGIN CERTIFICATE-----\n!!\n-----END CERTIFICATE-----\n").is_err());
    }
}
