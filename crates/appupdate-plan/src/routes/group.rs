//! The scope groups of an endpoints file and what names them: the identifier label, the
//! scope token, the route names, the backend port.

use std::collections::HashMap;

use base64::Engine as _;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use appupdate_model::endpoints_file::EndpointsFile;
use appupdate_model::names;
use appupdate_model::plan::{Kind, PlanError};

/// The label whose value identifies the scope group of a managed route.
pub const IDENTIFIER_LABEL: &str = "identifier";
/// The label every object of the application carries.
pub const APP_LABEL: &str = "app";
/// The annotation that marks the cluster's default IngressClass.
pub const DEFAULT_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";
/// The response headers of the auth service that reach the backend.
pub const AUTH_RESPONSE_HEADERS: [&str; 2] = ["User-Id", "User-Scopes"];

/// Label selector of the routes this tool manages for `app`.
pub fn managed_selector(app: &str) -> String {
    format!("{APP_LABEL}={app},{IDENTIFIER_LABEL}")
}

pub use appupdate_model::intent::normalize_scopes;

/// `items` sorted and without duplicates: [`normalize_scopes`] of owned or borrowed scopes.
fn as_set<T: Ord>(mut items: Vec<T>) -> Vec<T> {
    items.sort_unstable();
    items.dedup();
    items
}

/// The identifier label value of a scope set: the first 16 lowercase hex digits of SHA-256 over
/// the sorted, de-duplicated scopes joined by `"\n"`.
pub fn scope_identifier(scopes: &[String]) -> String {
    let joined = normalize_scopes(scopes).join("\n");
    let digest = Sha256::digest(joined.as_bytes());
    appupdate_model::text::hex(&digest[..8])
}

/// The scope token (see the module docs): base64url, no padding, of the sorted,
/// de-duplicated scopes joined by one space.
pub fn scope_token(scopes: &[String]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(normalize_scopes(scopes).join(" "))
}

/// The scopes of a scope token; `None` when it is not one.
pub fn scopes_of_token(token: &str) -> Option<Vec<String>> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    Some(
        text.split(' ')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
    )
}

/// The name of a new route: `<app>-<identifier>`, which must be a valid DNS subdomain.
pub fn route_name(kind: Kind, app: &str, identifier: &str) -> Result<String, PlanError> {
    let name = format!("{app}-{identifier}");
    if names::is_dns1123_subdomain(&name) {
        Ok(name)
    } else {
        Err(PlanError::Unexpected {
            reference: format!("{}/{name}", kind.kubectl_name()),
            message: format!(
                "the {kind} name derived from the application name {app:?} is not a valid DNS subdomain (lowercase letters, digits, '-' and '.', at most 253 characters); the application name must be one too"
            ),
        })
    }
}

/// The Service port routes send traffic to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendPort {
    Number(i32),
}

impl BackendPort {
    /// The Ingress `backend.service.port` object.
    pub fn to_json(self) -> Value {
        match self {
            BackendPort::Number(n) => json!({ "number": n }),
        }
    }

    /// The port number.
    pub fn number(self) -> i32 {
        match self {
            BackendPort::Number(n) => n,
        }
    }
}

/// The backend port from the live Service: its only port; with several, the one named `http`,
/// else the first; no ports is an error.
pub fn backend_port(service: &Value, app: &str) -> Result<BackendPort, PlanError> {
    let reference = format!("service/{app}");
    let ports = service["spec"]["ports"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let port = ports
        .iter()
        .find(|p| p["name"].as_str() == Some("http"))
        .or_else(|| ports.first())
        .ok_or_else(|| PlanError::Unexpected {
            reference: reference.clone(),
            message: "has no ports, so the routes have no port to send traffic to; add a port to the Service".to_owned(),
        })?;
    port["port"]
        .as_i64()
        .and_then(|n| i32::try_from(n).ok())
        .filter(|n| (1..=65535).contains(n))
        .map(BackendPort::Number)
        .ok_or_else(|| PlanError::Unexpected {
            reference,
            message: format!(
                "has a port without a valid number ({}); fix the Service",
                port["port"]
            ),
        })
}

/// One scope group of the endpoints file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeGroup {
    /// Sorted, de-duplicated; empty for the public group.
    pub scopes: Vec<String>,
    /// [`scope_identifier`] of the scopes.
    pub identifier: String,
    /// Endpoint paths as written in the file (without `/<app>`), sorted, distinct.
    pub paths: Vec<String>,
}

impl ScopeGroup {
    pub fn is_public(&self) -> bool {
        self.scopes.is_empty()
    }
}

/// The scope groups of an endpoints file, sorted by identifier.
pub fn scope_groups(file: &EndpointsFile) -> Vec<ScopeGroup> {
    // Keyed by borrowed scopes: tens of thousands of endpoints are common, and most share
    // their scopes with many others — usually with the endpoint before them, whose group is
    // then taken again without looking it up.
    let mut index: HashMap<Vec<&str>, usize> = HashMap::new();
    let mut groups: Vec<(Vec<&str>, Vec<&str>)> = Vec::new();
    let mut last: Option<(&[String], usize)> = None;
    for e in &file.endpoints {
        let at = match last {
            Some((scopes, at)) if scopes == e.scopes.as_slice() => at,
            _ => {
                let scopes = as_set(e.scopes.iter().map(String::as_str).collect());
                *index.entry(scopes).or_insert_with_key(|scopes| {
                    groups.push((scopes.clone(), Vec::new()));
                    groups.len() - 1
                })
            }
        };
        last = Some((&e.scopes, at));
        groups[at].1.push(&e.path);
    }
    let mut out: Vec<ScopeGroup> = groups
        .into_iter()
        .map(|(scopes, paths)| {
            let scopes: Vec<String> = scopes.into_iter().map(str::to_owned).collect();
            ScopeGroup {
                identifier: scope_identifier(&scopes),
                scopes,
                paths: as_set(paths).into_iter().map(str::to_owned).collect(),
            }
        })
        .collect();
    out.sort_by(|a, b| (a.identifier.cmp(&b.identifier)).then_with(|| a.scopes.cmp(&b.scopes)));
    out
}

/// An endpoint path without its trailing `/` (`/a/` → `/a`), except `/` itself: the part that
/// styles with prefix matching by segment (`nginx-auth`, `gateway`) match and keep.
pub fn path_core(path: &str) -> &str {
    if path.len() > 1 {
        path.strip_suffix('/').unwrap_or(path)
    } else {
        path
    }
}
