//! How endpoints are published, by name: the route style (`--routes`), the auth provider of
//! the `gateway` style (`--auth-provider`), and what a route change means in endpoint terms.
//! What each style generates lives in `routes`; the plan, the records and the flags' parsers
//! all speak of styles, so their names sit below all of them.

use std::fmt;

use serde::{Deserialize, Serialize};

/// How the endpoints are published: the route style (`--routes`). What each style generates
/// lives in `routes`; this is only its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum RouteStyle {
    /// Ingresses with ingress-nginx's `configuration-snippet` (the original format).
    #[serde(rename = "nginx-snippet")]
    NginxSnippet,
    /// Ingresses for ingress-nginx with `auth-url` and `rewrite-target`, no snippet.
    #[serde(rename = "nginx-auth")]
    NginxAuth,
    /// Gateway API HTTPRoutes.
    #[serde(rename = "gateway")]
    Gateway,
}

impl RouteStyle {
    /// Every style, in the order they are listed in help and messages.
    pub const ALL: [RouteStyle; 3] = [
        RouteStyle::NginxSnippet,
        RouteStyle::NginxAuth,
        RouteStyle::Gateway,
    ];

    /// The name used on the command line and in `-o json`.
    pub fn as_str(self) -> &'static str {
        match self {
            RouteStyle::NginxSnippet => "nginx-snippet",
            RouteStyle::NginxAuth => "nginx-auth",
            RouteStyle::Gateway => "gateway",
        }
    }
}

impl fmt::Display for RouteStyle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the `gateway` style enforces the scopes of its routes (`--auth-provider`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AuthProvider {
    /// Each scoped HTTPRoute's rules carry the Gateway API `ExternalAuth` filter (GEP-1494,
    /// experimental channel).
    #[serde(rename = "filter")]
    Filter,
    /// Each scoped HTTPRoute is targeted by an Envoy Gateway `SecurityPolicy` with `extAuth`.
    #[serde(rename = "envoy-gateway")]
    EnvoyGateway,
}

impl AuthProvider {
    /// Every provider, in the order they are listed in help and messages.
    pub const ALL: [AuthProvider; 2] = [AuthProvider::Filter, AuthProvider::EnvoyGateway];

    /// The name used on the command line and in records.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthProvider::Filter => "filter",
            AuthProvider::EnvoyGateway => "envoy-gateway",
        }
    }
}

impl fmt::Display for AuthProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a route change (an Ingress or an HTTPRoute) means in endpoint terms, for people and
/// for `-o json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteInfo {
    /// The style of the route after the change (for a delete, the style it has).
    pub style: RouteStyle,
    /// The identifier label value of the scope group.
    pub identifier: String,
    /// Sorted, de-duplicated scopes (empty for the public group).
    pub scopes: Vec<String>,
    /// Endpoint paths (as in the endpoints file, without the `/<app>` prefix) served after the
    /// change, sorted; empty for a delete.
    pub paths: Vec<String>,
    /// Endpoint paths served before the change, sorted; empty for a create.
    pub paths_before: Vec<String>,
    /// What the live route carries that its style does not write, and this update removes
    /// (a route taken over with them): `nginx.ingress.kubernetes.io/*` annotations, HTTPRoute
    /// filters, each named by its field (`metadata.annotations[…]`,
    /// `spec.rules[path=…].filters[RequestMirror]`). Shown in the diff; a run with `--yes`
    /// refuses to remove them unseen.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub foreign: Vec<String>,
}

impl RouteInfo {
    /// The change only takes paths away: what it serves after is a strict subset of before.
    pub fn only_removes_paths(&self) -> bool {
        self.paths.len() < self.paths_before.len()
            && self
                .paths
                .iter()
                .all(|p| self.paths_before.binary_search(p).is_ok())
    }
}
