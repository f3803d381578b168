//! One API server as the harness sees it: a kube client per identity, built from kubeconfig
//! contexts, sending requests exactly as prepared (no retries, no added headers) and reading
//! whole responses or watch streams.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use http_body_util::BodyExt;
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};

use serde::Deserialize;

/// A bearer token no server knows (the `invalid` identity).
const INVALID_TOKEN: &str = "parity-invalid-token";

/// Who sends a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, Hash, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Who {
    #[default]
    Admin,
    Readonly,
    Noperm,
    Invalid,
    Anonymous,
}

impl Who {
    /// The `user` of a fixture (as in the shared recording).
    pub fn fixture_user(self) -> &'static str {
        match self {
            Who::Admin => "admin",
            Who::Readonly => "readonly",
            Who::Noperm => "noperm",
            Who::Invalid => "invalid-token",
            Who::Anonymous => "anonymous",
        }
    }
}

/// A request with every `${…}` resolved.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub who: Who,
    pub method: String,
    /// Path and query, as sent.
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
}

/// What came back (or why nothing did).
#[derive(Debug, Clone, Default)]
pub struct Got {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// No answer: the transport failed or the identity is not configured.
    pub error: Option<String>,
}

pub struct Server {
    pub label: String,
    clients: BTreeMap<Who, kube::Client>,
}

/// The kubeconfig contexts of each identity: given explicitly, or found by name (`admin`,
/// `readonly`, `noperm` as the real server's kubeconfig names them; `sandbox`,
/// `sandbox-readonly`, `sandbox-noperm` as the sandbox's does).
fn contexts(kc: &Kubeconfig, explicit: &[(Who, String)]) -> BTreeMap<Who, String> {
    let names: Vec<&str> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
    let mut out = BTreeMap::new();
    for (who, candidates) in [
        (Who::Admin, ["admin", "sandbox"]),
        (Who::Readonly, ["readonly", "sandbox-readonly"]),
        (Who::Noperm, ["noperm", "sandbox-noperm"]),
    ] {
        if let Some(c) = candidates.iter().find(|c| names.contains(c)) {
            out.insert(who, (*c).to_string());
        }
    }
    if !out.contains_key(&Who::Admin)
        && let Some(current) = &kc.current_context
    {
        out.insert(Who::Admin, current.clone());
    }
    for (who, ctx) in explicit {
        out.insert(*who, ctx.clone());
    }
    out
}

impl Server {
    pub async fn connect(
        label: &str,
        kubeconfig: &Path,
        explicit: &[(Who, String)],
    ) -> Result<Server, String> {
        let kc = Kubeconfig::read_from(kubeconfig)
            .map_err(|e| format!("{label}: cannot read {}: {e}", kubeconfig.display()))?;
        Server::from_kubeconfig(label, kc, explicit, &kubeconfig.display().to_string()).await
    }

    /// A server from kubeconfig text (the in-process sandbox's).
    pub async fn from_yaml(label: &str, yaml: &str) -> Result<Server, String> {
        let kc = Kubeconfig::from_yaml(yaml).map_err(|e| format!("{label}: {e}"))?;
        Server::from_kubeconfig(label, kc, &[], "the generated kubeconfig").await
    }

    async fn from_kubeconfig(
        label: &str,
        kc: Kubeconfig,
        explicit: &[(Who, String)],
        source: &str,
    ) -> Result<Server, String> {
        let mut clients = BTreeMap::new();
        for (who, context) in contexts(&kc, explicit) {
            let mut config = kube::Config::from_custom_kubeconfig(
                kc.clone(),
                &KubeConfigOptions {
                    context: Some(context.clone()),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| format!("{label}: context {context:?}: {e}"))?;
            config.default_retry = false;
            config.read_timeout = None;
            if who == Who::Admin {
                // The unauthenticated identities reach the same server without credentials.
                let mut bare = config.clone();
                bare.auth_info = AuthInfo::default();
                let bare = kube::Client::try_from(bare).map_err(|e| format!("{label}: {e}"))?;
                clients.insert(Who::Anonymous, bare.clone());
                clients.insert(Who::Invalid, bare);
            }
            let client = kube::Client::try_from(config)
                .map_err(|e| format!("{label}: context {context:?}: {e}"))?;
            clients.insert(who, client);
        }
        if !clients.contains_key(&Who::Admin) {
            return Err(format!("{label}: {source} has no context to act as admin"));
        }
        Ok(Server {
            label: label.to_string(),
            clients,
        })
    }

    /// Sends one request. A watch (`stream_for`) is read until the server ends it or the time
    /// is up; any other response until its end (at most a minute).
    pub async fn send(&self, req: &Prepared, stream_for: Option<Duration>) -> Got {
        let Some(client) = self.clients.get(&req.who) else {
            return Got {
                error: Some(format!(
                    "{}: no kubeconfig context for the {} identity",
                    self.label,
                    req.who.fixture_user()
                )),
                ..Default::default()
            };
        };
        let mut builder = http::Request::builder()
            .method(req.method.as_str())
            .uri(req.target.as_str());
        for (k, v) in &req.headers {
            builder = builder.header(k.as_str(), v.as_str());
        }
        if req.who == Who::Invalid {
            builder = builder.header("Authorization", format!("Bearer {INVALID_TOKEN}"));
        }
        let body = kube::client::Body::from(req.body.clone().unwrap_or_default());
        let request = match builder.body(body) {
            Ok(r) => r,
            Err(e) => {
                return Got {
                    error: Some(format!("cannot build the request: {e}")),
                    ..Default::default()
                };
            }
        };
        let limit = stream_for.unwrap_or(Duration::from_secs(60));
        let deadline = tokio::time::Instant::now() + limit;
        let response = match tokio::time::timeout_at(deadline, client.send(request)).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                return Got {
                    error: Some(format!("no answer: {e}")),
                    ..Default::default()
                };
            }
            Err(_) => {
                return Got {
                    error: Some(format!("no answer within {limit:?}")),
                    ..Default::default()
                };
            }
        };
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    crate::normalize::canonical_header(k.as_str()),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let mut body = response.into_body();
        let mut bytes = Vec::new();
        let mut error = None;
        loop {
            match tokio::time::timeout_at(deadline, body.frame()).await {
                Ok(Some(Ok(frame))) => {
                    if let Some(data) = frame.data_ref() {
                        bytes.extend_from_slice(data);
                    }
                }
                Ok(Some(Err(e))) => {
                    error = Some(format!("the body broke off: {e}"));
                    break;
                }
                Ok(None) => break,
                Err(_) => {
                    if stream_for.is_none() {
                        error = Some(format!("the body did not end within {limit:?}"));
                    }
                    break;
                }
            }
        }
        Got {
            status,
            headers,
            body: bytes,
            error,
        }
    }
}
