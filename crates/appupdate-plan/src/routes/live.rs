//! The live objects routes are planned against ([`LiveRoutes`]) and what planning returns
//! ([`PlannedRoutes`]).

use serde_json::Value;

use super::external_auth;
use crate::updaters::Updater;
use appupdate_model::plan::{Kind, RoutesPlan};

/// The result of listing HTTPRoutes: a cluster without the Gateway API answers 404.
#[derive(Clone, Debug, PartialEq)]
pub enum Listing {
    /// The managed objects listed.
    Items(Vec<Value>),
    /// The resource is not served (404): the Gateway API CRDs are not installed.
    NotServed,
    /// Listing was forbidden (403).
    Forbidden,
}

impl Default for Listing {
    fn default() -> Self {
        Listing::Items(Vec::new())
    }
}

impl Listing {
    pub fn items(&self) -> &[Value] {
        match self {
            Listing::Items(v) => v,
            Listing::NotServed | Listing::Forbidden => &[],
        }
    }

    pub fn items_mut(&mut self) -> &mut [Value] {
        match self {
            Listing::Items(v) => v,
            Listing::NotServed | Listing::Forbidden => &mut [],
        }
    }
}

/// The live objects the routes are planned against.
#[derive(Clone, Debug)]
pub struct LiveRoutes<'a> {
    pub service: &'a Value,
    /// Managed Ingresses (`app=<app>,identifier`).
    pub ingresses: &'a [Value],
    /// Managed HTTPRoutes.
    pub httproutes: &'a Listing,
    /// Managed SecurityPolicies (Envoy Gateway).
    pub security_policies: &'a Listing,
    /// The cluster's IngressClasses, when they were read ([`needs_ingress_classes`](super::needs_ingress_classes)).
    pub ingress_classes: Option<&'a [Value]>,
    /// The Gateways the scoped HTTPRoutes attach to and their classes, when they were read
    /// ([`needs_gateway_check`](super::needs_gateway_check)): whether the cluster enforces ExternalAuth.
    pub gateway_support: Option<&'a external_auth::GatewaySupport>,
}

/// Where a live route is among [`LiveRoutes`]: its kind's list and its index there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LiveRef {
    pub kind: Kind,
    pub index: usize,
}

impl LiveRoutes<'_> {
    /// The live route `at` names.
    pub fn get(&self, at: LiveRef) -> Option<&Value> {
        match at.kind {
            Kind::Ingress => self.ingresses.get(at.index),
            Kind::SecurityPolicy => self.security_policies.items().get(at.index),
            _ => self.httproutes.items().get(at.index),
        }
    }
}

/// An updater with the live object it starts from (`None`: it does not exist).
pub type WithLive = (Updater, Option<LiveRef>);

/// The routes part of a plan: the updaters with the live object each starts from, and what
/// was decided.
#[derive(Debug)]
pub struct PlannedRoutes {
    pub updaters: Vec<WithLive>,
    pub summary: RoutesPlan,
}
