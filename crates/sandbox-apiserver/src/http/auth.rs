//! Authentication (bearer tokens, random per instance) and authorization (the RBAC the
//! sandbox's identities would have): who is asking, and may they.

use std::collections::HashMap;

use http::HeaderMap;
use serde::{Deserialize, Serialize};

use crate::api::request::RequestInfo;
use crate::model::status::{self, StatusBody};

/// The identities the sandbox knows (bearer tokens are random per instance).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Identity {
    /// Everything (like `system:masters`); kubeconfig context `sandbox`.
    Admin,
    /// The built-in `view` ClusterRole: get/list/watch on what it grants (Deployments,
    /// Services, HPAs, Ingresses, ConfigMaps, namespaces… but not IngressClasses, Secrets or
    /// custom resources), 403 on every write (dry runs too); context `sandbox-readonly`.
    ReadOnly,
    /// Authenticated, no RBAC bindings: only discovery; context `sandbox-noperm`.
    NoPerm,
    /// A token the server does not know: 401; context `sandbox-invalid`.
    Invalid,
}

impl Identity {
    /// The user name the server reports (`User "readonly" cannot …`).
    pub fn user_name(self) -> &'static str {
        match self {
            Identity::Admin => "admin",
            Identity::ReadOnly => "readonly",
            Identity::NoPerm => "noperm",
            Identity::Invalid => "invalid-token",
        }
    }
}

/// The bearer tokens of an instance.
pub struct Tokens {
    by_token: HashMap<String, Identity>,
    of: HashMap<Identity, String>,
    /// Plain HTTP: requests without credentials act as admin (client-go never sends bearer
    /// tokens over plain HTTP, like the removed insecure port of old API servers).
    anonymous_is_admin: bool,
}

impl Tokens {
    /// A random token for each identity; `tls: false` lets requests without one act as admin.
    pub fn generate(tls: bool) -> Self {
        let mut of = HashMap::new();
        for id in [
            Identity::Admin,
            Identity::ReadOnly,
            Identity::NoPerm,
            Identity::Invalid,
        ] {
            of.insert(
                id,
                format!(
                    "{}{}",
                    uuid::Uuid::new_v4().simple(),
                    uuid::Uuid::new_v4().simple()
                ),
            );
        }
        let by_token = of
            .iter()
            .filter(|(id, _)| **id != Identity::Invalid)
            .map(|(id, t)| (t.clone(), *id))
            .collect();
        Tokens {
            by_token,
            of,
            anonymous_is_admin: !tls,
        }
    }

    /// The token of an identity (`Invalid`: one the server rejects).
    pub fn token(&self, id: Identity) -> String {
        self.of.get(&id).cloned().unwrap_or_default()
    }

    /// Who sends these headers: `None` for anonymous, `Invalid` for a token nobody has.
    pub fn authenticate(&self, headers: &HeaderMap) -> Option<Identity> {
        match headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
        {
            None if self.anonymous_is_admin => Some(Identity::Admin),
            None => None,
            Some(v) => match v
                .strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
            {
                Some(t) => Some(
                    self.by_token
                        .get(t.trim())
                        .copied()
                        .unwrap_or(Identity::Invalid),
                ),
                None => Some(Identity::Invalid),
            },
        }
    }
}

/// The user name in messages (`system:anonymous` without credentials).
pub fn user_name(id: Option<Identity>) -> &'static str {
    id.map(Identity::user_name).unwrap_or("system:anonymous")
}

/// Authorization: `Err` with RBAC's 403 when `id` may not do what `info` (or, for a
/// non-resource request, `verb` on `path`) describes.
pub fn authorize(
    id: Option<Identity>,
    user: &str,
    info: &RequestInfo,
    verb: &str,
    path: &str,
) -> Result<(), StatusBody> {
    if !info.resource_request {
        if !non_resource_allowed(id, path) {
            return Err(status::forbidden_path(user, verb, path));
        }
        return Ok(());
    }
    if !resource_allowed(id, info) {
        return Err(forbidden(user, info));
    }
    Ok(())
}

/// RBAC's 403 for a resource request.
pub fn forbidden(user: &str, info: &RequestInfo) -> StatusBody {
    status::forbidden(
        user,
        &info.verb,
        &info.group,
        &info.resource,
        &info.subresource,
        &info.namespace,
        &info.name,
    )
}

const DISCOVERY_PATHS: &[&str] = &[
    "/api",
    "/apis",
    "/healthz",
    "/livez",
    "/readyz",
    "/version",
    "/version/",
    "/openapi",
];

fn non_resource_allowed(id: Option<Identity>, path: &str) -> bool {
    match id {
        Some(Identity::Admin) => true,
        Some(Identity::ReadOnly) | Some(Identity::NoPerm) => {
            DISCOVERY_PATHS.contains(&path)
                || path.starts_with("/api/")
                || path.starts_with("/apis/")
                || path.starts_with("/openapi/")
        }
        _ => matches!(
            path,
            "/healthz" | "/livez" | "/readyz" | "/version" | "/version/"
        ),
    }
}

/// The rules of kube-apiserver v1.28's `view` ClusterRole (all get/list/watch): group, then
/// resources and subresources.
const VIEW: &[(&str, &[&str])] = &[
    (
        "",
        &[
            "configmaps",
            "endpoints",
            "persistentvolumeclaims",
            "persistentvolumeclaims/status",
            "pods",
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "serviceaccounts",
            "services",
            "services/status",
            "bindings",
            "events",
            "limitranges",
            "namespaces/status",
            "pods/log",
            "pods/status",
            "replicationcontrollers/status",
            "resourcequotas",
            "resourcequotas/status",
            "namespaces",
        ],
    ),
    ("discovery.k8s.io", &["endpointslices"]),
    (
        "apps",
        &[
            "controllerrevisions",
            "daemonsets",
            "daemonsets/status",
            "deployments",
            "deployments/scale",
            "deployments/status",
            "replicasets",
            "replicasets/scale",
            "replicasets/status",
            "statefulsets",
            "statefulsets/scale",
            "statefulsets/status",
        ],
    ),
    (
        "autoscaling",
        &[
            "horizontalpodautoscalers",
            "horizontalpodautoscalers/status",
        ],
    ),
    (
        "batch",
        &["cronjobs", "cronjobs/status", "jobs", "jobs/status"],
    ),
    (
        "extensions",
        &[
            "daemonsets",
            "daemonsets/status",
            "deployments",
            "deployments/scale",
            "deployments/status",
            "ingresses",
            "ingresses/status",
            "networkpolicies",
            "replicasets",
            "replicasets/scale",
            "replicasets/status",
            "replicationcontrollers/scale",
        ],
    ),
    (
        "policy",
        &["poddisruptionbudgets", "poddisruptionbudgets/status"],
    ),
    (
        "networking.k8s.io",
        &["ingresses", "ingresses/status", "networkpolicies"],
    ),
];

/// Does the `view` role grant `verb` on this resource?
fn view_allows(info: &RequestInfo) -> bool {
    if !matches!(info.verb.as_str(), "get" | "list" | "watch") {
        return false;
    }
    let resource = if info.subresource.is_empty() {
        info.resource.clone()
    } else {
        format!("{}/{}", info.resource, info.subresource)
    };
    VIEW.iter()
        .any(|(group, resources)| *group == info.group && resources.contains(&resource.as_str()))
}

fn resource_allowed(id: Option<Identity>, info: &RequestInfo) -> bool {
    match id {
        Some(Identity::Admin) => true,
        Some(Identity::ReadOnly) => view_allows(info),
        _ => false,
    }
}
