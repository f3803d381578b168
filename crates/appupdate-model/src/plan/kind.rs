//! The kinds of object a plan writes, and what happens to each ([`Action`]).

use std::fmt;

use serde::{Deserialize, Serialize};

/// The kinds of object this tool writes (the Service and IngressClasses are only read).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Kind {
    Deployment,
    HorizontalPodAutoscaler,
    Ingress,
    /// Gateway API `HTTPRoute` (`gateway.networking.k8s.io/v1`).
    #[serde(rename = "HTTPRoute")]
    HttpRoute,
    /// Envoy Gateway `SecurityPolicy` (`gateway.envoyproxy.io/v1alpha1`): the external auth of
    /// one HTTPRoute with the `envoy-gateway` auth provider.
    SecurityPolicy,
}

impl Kind {
    /// `apiVersion` of the version this tool speaks.
    pub fn api_version(self) -> &'static str {
        match self {
            Kind::Deployment => "apps/v1",
            Kind::HorizontalPodAutoscaler => "autoscaling/v2",
            Kind::Ingress => "networking.k8s.io/v1",
            Kind::HttpRoute => "gateway.networking.k8s.io/v1",
            Kind::SecurityPolicy => "gateway.envoyproxy.io/v1alpha1",
        }
    }

    /// API group ("" for core; none of ours is core).
    pub fn group(self) -> &'static str {
        match self {
            Kind::Deployment => "apps",
            Kind::HorizontalPodAutoscaler => "autoscaling",
            Kind::Ingress => "networking.k8s.io",
            Kind::HttpRoute => "gateway.networking.k8s.io",
            Kind::SecurityPolicy => "gateway.envoyproxy.io",
        }
    }

    /// Version within the group.
    pub fn version(self) -> &'static str {
        match self {
            Kind::Deployment | Kind::Ingress | Kind::HttpRoute => "v1",
            Kind::HorizontalPodAutoscaler => "v2",
            Kind::SecurityPolicy => "v1alpha1",
        }
    }

    /// Lower-case plural resource name, as in URLs and RBAC messages.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Deployment => "deployments",
            Kind::HorizontalPodAutoscaler => "horizontalpodautoscalers",
            Kind::Ingress => "ingresses",
            Kind::HttpRoute => "httproutes",
            Kind::SecurityPolicy => "securitypolicies",
        }
    }

    /// `resource.group`, the way kubectl names objects (`deployment.apps/web`).
    pub fn kubectl_name(self) -> &'static str {
        match self {
            Kind::Deployment => "deployment.apps",
            Kind::HorizontalPodAutoscaler => "horizontalpodautoscaler.autoscaling",
            Kind::Ingress => "ingress.networking.k8s.io",
            Kind::HttpRoute => "httproute.gateway.networking.k8s.io",
            Kind::SecurityPolicy => "securitypolicy.gateway.envoyproxy.io",
        }
    }

    /// `resource.group` in the plural, as in RBAC messages and lists
    /// (`httproutes.gateway.networking.k8s.io`).
    pub fn resource_name(self) -> String {
        format!("{}.{}", self.plural(), self.group())
    }

    /// Order within a write round ([`write_order`](super::write_order)) and in a listing: Deployment, HPA,
    /// Ingresses, SecurityPolicies, HTTPRoutes (a policy is listed before the route it guards,
    /// as a new one is written before it).
    pub fn order(self) -> u8 {
        match self {
            Kind::Deployment => 0,
            Kind::HorizontalPodAutoscaler => 1,
            Kind::Ingress => 2,
            Kind::SecurityPolicy => 3,
            Kind::HttpRoute => 4,
        }
    }

    /// The kind's name in the plural, for sentences ("Ingresses", "HTTPRoutes").
    pub fn plural_title(self) -> &'static str {
        match self {
            Kind::Deployment => "Deployments",
            Kind::HorizontalPodAutoscaler => "HorizontalPodAutoscalers",
            Kind::Ingress => "Ingresses",
            Kind::HttpRoute => "HTTPRoutes",
            Kind::SecurityPolicy => "SecurityPolicies",
        }
    }

    /// Whether objects of this kind publish the application's endpoints.
    pub fn is_route(self) -> bool {
        matches!(self, Kind::Ingress | Kind::HttpRoute)
    }

    /// The kind of route an object of this kind guards: a SecurityPolicy enforces the auth of
    /// the HTTPRoute of its own name ([`write_order`](super::write_order) writes it before that route serves, and
    /// deletes it only after).
    pub fn guards(self) -> Option<Kind> {
        match self {
            Kind::SecurityPolicy => Some(Kind::HttpRoute),
            _ => None,
        }
    }

    /// Whether objects of this kind belong to the application's routes: routes, and what
    /// guards them.
    pub fn is_route_part(self) -> bool {
        self.is_route() || self.guards().is_some()
    }
}

impl Kind {
    /// The `kind` of its objects (`HTTPRoute`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Deployment => "Deployment",
            Kind::HorizontalPodAutoscaler => "HorizontalPodAutoscaler",
            Kind::Ingress => "Ingress",
            Kind::HttpRoute => "HTTPRoute",
            Kind::SecurityPolicy => "SecurityPolicy",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What happens to one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Unchanged,
    Create,
    Update,
    Delete,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Unchanged => "unchanged",
            Action::Create => "create",
            Action::Update => "update",
            Action::Delete => "delete",
        })
    }
}
