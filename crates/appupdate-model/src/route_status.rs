//! `--wait` for routes: whether the routing layer has taken a route the run wrote, read from
//! the route's `status` — a pure function of the live object, as [`crate::rollout::rollout_state`]
//! is for the Deployment. The plugin's `wait` does the watching and calls [`route_state`] on every
//! version of the object it sees.
//!
//! | kind | taken (ready) when | refused when |
//! | --- | --- | --- |
//! | `HTTPRoute` | every `spec.parentRefs` entry has at least one `status.parents[]` entry, and every entry for those parents has `Accepted=True` and `ResolvedRefs=True`, each condition's `observedGeneration` ≥ the route's `metadata.generation` | such a current condition is `False` |
//! | `Ingress` | `status.loadBalancer.ingress[]` holds an address (`ip` or `hostname`) | never: an Ingress has no condition that says no |
//!
//! A condition older than the route's generation says nothing about the route as written (its
//! controller has not seen it yet), so it is neither taken nor refused: the wait goes on. A
//! condition without `observedGeneration` counts as old: fail closed. Parent entries for
//! parents the route no longer names (a controller's stale entry) are ignored; `parentRef`s
//! are compared with the API's defaults filled in (group `gateway.networking.k8s.io`, kind
//! `Gateway`, the route's namespace).
//!
//! # Adding a kind
//!
//! One function `fn(&Value) -> RouteState` and one arm in [`state_function`]. A Gateway API
//! policy (`status.ancestors[]`, each with an `ancestorRef` and conditions) reuses
//! [`holders_state`] with [`Holders::ANCESTORS`] and [`Expected::AtLeastOne`]:
//!
//! ```ignore
//! fn security_policy_state(policy: &Value) -> RouteState {
//!     holders_state(policy, &Holders::ANCESTORS, &Expected::AtLeastOne)
//! }
//! // in state_function: Kind::SecurityPolicy => Some(security_policy_state),
//! ```

use std::fmt;

use serde_json::Value;

use crate::plan::Kind;
use crate::text::Untrusted;

/// An object `--wait` follows besides the Deployment: its kind and name (in the run's
/// namespace).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RouteRef {
    pub kind: Kind,
    pub name: String,
}

impl RouteRef {
    /// `httproute.gateway.networking.k8s.io/web-e3b0c44298fc1c14`, escaped.
    pub fn reference(&self) -> String {
        format!("{}/{}", self.kind.kubectl_name(), Untrusted(&self.name))
    }
}

/// Where a followed route stands. The texts hold values from the cluster as they are: escape
/// them where they are printed (every `Display` here does).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RouteState {
    /// Taken: what took it, in words (`accepted by Gateway gateways/public`).
    Ready(String),
    /// Not yet: what it waits for, in words.
    Pending(String),
    /// A parent said no.
    Refused(Refusal),
}

/// The condition a parent set to `False`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The parent, in words: `Gateway gateways/public`.
    pub parent: String,
    /// The condition's type: `Accepted`, `ResolvedRefs`.
    pub condition: String,
    pub reason: String,
    /// The condition's message, on one line.
    pub message: String,
}

impl RouteState {
    pub fn is_ready(&self) -> bool {
        matches!(self, RouteState::Ready(_))
    }
}

impl fmt::Display for RouteState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RouteState::Ready(what) | RouteState::Pending(what) => {
                write!(f, "{}", Untrusted(what))
            }
            RouteState::Refused(r) => write!(f, "{r}"),
        }
    }
}

impl fmt::Display for Refusal {
    /// `Gateway gateways/public set ResolvedRefs=False (BackendNotFound: "Service \"web\" not found")`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} set {}=False ({}",
            Untrusted(&self.parent),
            Untrusted(&self.condition),
            Untrusted(&self.reason)
        )?;
        if !self.message.is_empty() {
            write!(f, ": {:?}", Untrusted(&self.message))?;
        }
        write!(f, ")")
    }
}

/// The state function of each kind `--wait` follows as a route; `None` for the kinds it does
/// not (the Deployment has [`crate::rollout::rollout_state`]). The one place to add a kind.
pub fn state_function(kind: Kind) -> Option<fn(&Value) -> RouteState> {
    match kind {
        Kind::HttpRoute => Some(http_route_state),
        Kind::Ingress => Some(ingress_state),
        Kind::SecurityPolicy => Some(security_policy_state),
        Kind::Deployment | Kind::HorizontalPodAutoscaler => None,
    }
}

/// Where an Envoy Gateway SecurityPolicy stands: every ancestor (the Gateway of the route it
/// targets) in its `status.ancestors` must have accepted it.
pub fn security_policy_state(p: &Value) -> RouteState {
    holders_state(p, &Holders::ANCESTORS, &Expected::AtLeastOne)
}

/// Where the route `obj` of `kind` stands; `None` for a kind `--wait` does not follow as a
/// route.
pub fn route_state(kind: Kind, obj: &Value) -> Option<RouteState> {
    state_function(kind).map(|state| state(obj))
}

/// An HTTPRoute: accepted and resolved by every parent it names.
pub fn http_route_state(route: &Value) -> RouteState {
    let namespace = text(route, "/metadata/namespace");
    let parents: Vec<ParentKey> = route
        .pointer("/spec/parentRefs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|r| ParentKey::of(r, namespace))
        .collect();
    if parents.is_empty() {
        return RouteState::Pending("it names no parent Gateway".into());
    }
    holders_state(route, &Holders::PARENTS, &Expected::Each(parents))
}

/// An Ingress: its controller gave it an address.
pub fn ingress_state(ingress: &Value) -> RouteState {
    let addresses: Vec<&str> = ingress
        .pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|entry| {
            ["ip", "hostname"]
                .into_iter()
                .filter_map(|k| entry.get(k).and_then(Value::as_str))
                .find(|a| !a.is_empty())
        })
        .collect();
    if addresses.is_empty() {
        RouteState::Pending("no address from its Ingress controller yet".into())
    } else {
        RouteState::Ready(format!("has an address: {}", addresses.join(", ")))
    }
}

/// Where an object's controllers report on it: a list of entries, each naming what it is
/// about (a parent, an ancestor) and holding conditions.
#[derive(Clone, Copy, Debug)]
pub struct Holders {
    /// JSON pointer of the list: `/status/parents`.
    pub list: &'static str,
    /// The key of an entry's reference: `parentRef`.
    pub reference: &'static str,
    /// The conditions that must be `True`, in the order they are checked.
    pub required: &'static [&'static str],
}

impl Holders {
    /// A Gateway API route's `status.parents[]` (`RouteParentStatus`).
    pub const PARENTS: Holders = Holders {
        list: "/status/parents",
        reference: "parentRef",
        required: &["Accepted", "ResolvedRefs"],
    };
    /// A Gateway API policy's `status.ancestors[]` (`PolicyAncestorStatus`).
    pub const ANCESTORS: Holders = Holders {
        list: "/status/ancestors",
        reference: "ancestorRef",
        required: &["Accepted"],
    };
}

/// Which entries must be there.
#[derive(Clone, Debug)]
pub enum Expected {
    /// At least one for each of these (a route's `parentRefs`).
    Each(Vec<ParentKey>),
    /// At least one, about anything (a policy's ancestors are the controller's to find).
    AtLeastOne,
}

/// Whether the controllers reporting on `obj` in its `holders` list took it: a current `False`
/// required condition refuses it; a missing entry, condition or a condition of an older
/// generation keeps it pending; otherwise it is ready.
pub fn holders_state(obj: &Value, holders: &Holders, expected: &Expected) -> RouteState {
    let namespace = text(obj, "/metadata/namespace");
    let generation = obj
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let entries: Vec<(ParentKey, &Value)> = obj
        .pointer(holders.list)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|e| {
            let key = ParentKey::of(e.get(holders.reference).unwrap_or(&Value::Null), namespace);
            (key, e)
        })
        .filter(|(key, _)| match expected {
            Expected::Each(parents) => parents.contains(key),
            Expected::AtLeastOne => true,
        })
        .collect();
    let condition = |entry: &Value, kind: &str| -> Option<Condition> {
        entry
            .get("conditions")
            .and_then(Value::as_array)?
            .iter()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
            .map(|c| Condition {
                status: text(c, "/status").to_owned(),
                reason: text(c, "/reason").to_owned(),
                // On one line; escaped where it is shown.
                message: text(c, "/message")
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" "),
                current: c
                    .get("observedGeneration")
                    .and_then(Value::as_i64)
                    .is_some_and(|observed| observed >= generation),
                observed: c.get("observedGeneration").and_then(Value::as_i64),
            })
    };
    // A refusal anywhere is final, whatever else is still pending.
    for (key, entry) in &entries {
        for kind in holders.required {
            if let Some(c) = condition(entry, kind)
                && c.current
                && c.status == "False"
            {
                return RouteState::Refused(Refusal {
                    parent: key.to_string(),
                    condition: (*kind).to_owned(),
                    reason: c.reason,
                    message: c.message,
                });
            }
        }
    }
    let missing = match expected {
        Expected::Each(parents) => parents
            .iter()
            .find(|p| !entries.iter().any(|(k, _)| k == *p)),
        Expected::AtLeastOne => None,
    };
    if let Some(parent) = missing {
        return RouteState::Pending(format!("{parent} has not reported on it yet"));
    }
    if entries.is_empty() {
        return RouteState::Pending("no controller has reported on it yet".into());
    }
    for (key, entry) in &entries {
        for kind in holders.required {
            let pending = match condition(entry, kind) {
                None => format!("{key} has not set {kind} yet"),
                Some(c) if !c.current => match c.observed {
                    Some(observed) => format!(
                        "{key} has not yet seen generation {generation}: its {kind} is for generation {observed}"
                    ),
                    None => format!(
                        "{key} has not yet seen generation {generation}: its {kind} names no generation"
                    ),
                },
                Some(c) if c.status != "True" => {
                    let mut s = format!("{key} has {kind}={}", c.status);
                    if !c.reason.is_empty() {
                        s.push_str(&format!(", reason {}", c.reason));
                    }
                    s
                }
                Some(_) => continue,
            };
            return RouteState::Pending(pending);
        }
    }
    let mut parents: Vec<String> = Vec::new();
    for (key, _) in &entries {
        let key = key.to_string();
        if !parents.contains(&key) {
            parents.push(key);
        }
    }
    RouteState::Ready(format!("accepted by {}", parents.join(" and ")))
}

struct Condition {
    status: String,
    reason: String,
    message: String,
    /// Its `observedGeneration` is at least the object's generation.
    current: bool,
    observed: Option<i64>,
}

fn text<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// A Gateway API `ParentReference` with its defaults filled in, for comparing the references
/// a route names with those its controllers report on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParentKey {
    group: String,
    kind: String,
    namespace: String,
    name: String,
    section: String,
    port: Option<i64>,
}

impl ParentKey {
    /// `reference` (a `parentRef`) of an object in `namespace`.
    pub fn of(reference: &Value, namespace: &str) -> ParentKey {
        let field = |k: &str| reference.get(k).and_then(Value::as_str);
        ParentKey {
            group: field("group")
                .unwrap_or("gateway.networking.k8s.io")
                .to_owned(),
            kind: field("kind").unwrap_or("Gateway").to_owned(),
            namespace: field("namespace").unwrap_or(namespace).to_owned(),
            name: field("name").unwrap_or_default().to_owned(),
            section: field("sectionName").unwrap_or_default().to_owned(),
            port: reference.get("port").and_then(Value::as_i64),
        }
    }
}

impl fmt::Display for ParentKey {
    /// `Gateway gateways/public`, `Gateway gateways/public (listener https)`; not escaped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)?;
        if !self.section.is_empty() {
            write!(f, " (listener {})", self.section)?;
        }
        if let Some(port) = self.port {
            write!(f, " (port {port})")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn condition(kind: &str, status: &str, reason: &str, generation: i64) -> Value {
        json!({"type": kind, "status": status, "reason": reason, "message": "",
               "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": generation})
    }

    /// An HTTPRoute of generation 2 attached to `gateways/public`, with `parents` as status.
    fn route(parents: Value) -> Value {
        json!({
            "metadata": {"name": "web-x", "namespace": "shop", "generation": 2},
            "spec": {"parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                     "name": "public", "namespace": "gateways"}]},
            "status": {"parents": parents},
        })
    }

    fn parent(conditions: Value) -> Value {
        json!({"parentRef": {"name": "public", "namespace": "gateways"},
               "controllerName": "example.com/gateway", "conditions": conditions})
    }

    #[test]
    fn a_route_accepted_and_resolved_by_its_gateway_is_ready() {
        let r = route(json!([parent(json!([
            condition("Accepted", "True", "Accepted", 2),
            condition("ResolvedRefs", "True", "ResolvedRefs", 2),
        ]))]));
        let state = http_route_state(&r);
        assert_eq!(
            state,
            RouteState::Ready("accepted by Gateway gateways/public".into())
        );
        assert!(state.is_ready());
        assert_eq!(route_state(Kind::HttpRoute, &r), Some(state));
    }

    #[test]
    fn a_route_accepted_but_not_yet_resolved_is_pending() {
        let missing = route(json!([parent(json!([condition(
            "Accepted", "True", "Accepted", 2
        )]))]));
        assert_eq!(
            http_route_state(&missing),
            RouteState::Pending("Gateway gateways/public has not set ResolvedRefs yet".into())
        );
        let unknown = route(json!([parent(json!([
            condition("Accepted", "True", "Accepted", 2),
            condition("ResolvedRefs", "Unknown", "Pending", 2),
        ]))]));
        assert_eq!(
            http_route_state(&unknown),
            RouteState::Pending(
                "Gateway gateways/public has ResolvedRefs=Unknown, reason Pending".into()
            )
        );
    }

    #[test]
    fn a_false_condition_refuses_the_route_with_its_parent_reason_and_message() {
        let mut refused = condition("ResolvedRefs", "False", "BackendNotFound", 2);
        refused["message"] = json!("Service \"web\"\nnot found");
        let r = route(json!([parent(json!([
            condition("Accepted", "True", "Accepted", 2),
            refused
        ]))]));
        let state = http_route_state(&r);
        assert_eq!(
            state,
            RouteState::Refused(Refusal {
                parent: "Gateway gateways/public".into(),
                condition: "ResolvedRefs".into(),
                reason: "BackendNotFound".into(),
                message: "Service \"web\" not found".into(),
            })
        );
        assert_eq!(
            state.to_string(),
            r#"Gateway gateways/public set ResolvedRefs=False (BackendNotFound: "Service \"web\" not found")"#
        );
        // Accepted is checked first.
        let r = route(json!([parent(json!([
            condition("Accepted", "False", "NotAllowedByListeners", 2),
            condition("ResolvedRefs", "False", "BackendNotFound", 2),
        ]))]));
        assert!(matches!(
            http_route_state(&r),
            RouteState::Refused(Refusal { ref condition, .. }) if condition == "Accepted"
        ));
    }

    #[test]
    fn conditions_of_an_older_generation_neither_accept_nor_refuse() {
        let stale = route(json!([parent(json!([
            condition("Accepted", "True", "Accepted", 1),
            condition("ResolvedRefs", "True", "ResolvedRefs", 1),
        ]))]));
        assert_eq!(
            http_route_state(&stale),
            RouteState::Pending(
                "Gateway gateways/public has not yet seen generation 2: its Accepted is for generation 1"
                    .into()
            )
        );
        let stale_refusal = route(json!([parent(json!([
            condition("Accepted", "False", "NoMatchingParent", 1),
            condition("ResolvedRefs", "True", "ResolvedRefs", 2),
        ]))]));
        assert!(matches!(
            http_route_state(&stale_refusal),
            RouteState::Pending(_)
        ));
        // No observedGeneration at all: old (fail closed).
        let mut c = condition("Accepted", "True", "Accepted", 2);
        c.as_object_mut().unwrap().remove("observedGeneration");
        let unnamed = route(json!([parent(json!([
            c,
            condition("ResolvedRefs", "True", "ResolvedRefs", 2)
        ]))]));
        assert_eq!(
            http_route_state(&unnamed),
            RouteState::Pending(
                "Gateway gateways/public has not yet seen generation 2: its Accepted names no generation"
                    .into()
            )
        );
    }

    #[test]
    fn a_route_without_parent_status_is_pending_for_each_parent_it_names() {
        let none = json!({
            "metadata": {"name": "web-x", "namespace": "shop", "generation": 1},
            "spec": {"parentRefs": [{"name": "public"}]},
        });
        assert_eq!(
            http_route_state(&none),
            RouteState::Pending("Gateway shop/public has not reported on it yet".into())
        );
        // Two parents, one reported on: still waiting for the other.
        let mut two = route(json!([parent(json!([
            condition("Accepted", "True", "Accepted", 2),
            condition("ResolvedRefs", "True", "ResolvedRefs", 2),
        ]))]));
        two["spec"]["parentRefs"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "internal", "namespace": "gateways", "sectionName": "https"}));
        assert_eq!(
            http_route_state(&two),
            RouteState::Pending(
                "Gateway gateways/internal (listener https) has not reported on it yet".into()
            )
        );
        // A stale entry for a parent the route no longer names does not count.
        let other = json!({"parentRef": {"name": "old", "namespace": "gateways"},
                           "controllerName": "example.com/gateway",
                           "conditions": [condition("Accepted", "False", "NotAllowedByListeners", 2)]});
        let r = route(json!([other]));
        assert_eq!(
            http_route_state(&r),
            RouteState::Pending("Gateway gateways/public has not reported on it yet".into())
        );
        let no_parents = json!({"metadata": {"namespace": "shop", "generation": 1}, "spec": {}});
        assert!(matches!(
            http_route_state(&no_parents),
            RouteState::Pending(_)
        ));
    }

    #[test]
    fn an_ingress_is_ready_once_it_has_an_address() {
        let ingress = |status: Value| json!({"metadata": {"name": "web-x"}, "status": status});
        assert_eq!(
            ingress_state(&ingress(json!({"loadBalancer": {}}))),
            RouteState::Pending("no address from its Ingress controller yet".into())
        );
        assert!(matches!(
            ingress_state(&json!({"metadata": {}})),
            RouteState::Pending(_)
        ));
        assert!(matches!(
            ingress_state(&ingress(json!({"loadBalancer": {"ingress": [{"ip": ""}]}}))),
            RouteState::Pending(_)
        ));
        assert_eq!(
            ingress_state(&ingress(json!({"loadBalancer": {"ingress": [
                {"ip": "203.0.113.7"}, {"hostname": "lb.example.com"}
            ]}}))),
            RouteState::Ready("has an address: 203.0.113.7, lb.example.com".into())
        );
        assert_eq!(
            route_state(
                Kind::Ingress,
                &ingress(json!({"loadBalancer": {"ingress": [{"hostname": "lb.example.com"}]}}))
            ),
            Some(RouteState::Ready("has an address: lb.example.com".into()))
        );
    }

    #[test]
    fn only_routes_have_a_route_state() {
        assert!(state_function(Kind::HttpRoute).is_some());
        assert!(state_function(Kind::Ingress).is_some());
        assert!(state_function(Kind::Deployment).is_none());
        assert!(state_function(Kind::HorizontalPodAutoscaler).is_none());
    }

    #[test]
    fn a_policy_is_ready_once_an_ancestor_accepted_it() {
        let policy = |ancestors: Value| {
            json!({"metadata": {"name": "web-x", "namespace": "shop", "generation": 3},
                   "status": {"ancestors": ancestors}})
        };
        let ancestor = |status: &str, generation: i64| {
            json!({"ancestorRef": {"name": "public", "namespace": "gateways"},
                   "controllerName": "gateway.envoyproxy.io/gatewayclass-controller",
                   "conditions": [condition("Accepted", status, "Accepted", generation)]})
        };
        let state = |p: &Value| holders_state(p, &Holders::ANCESTORS, &Expected::AtLeastOne);
        assert_eq!(
            state(&policy(json!([]))),
            RouteState::Pending("no controller has reported on it yet".into())
        );
        assert!(matches!(
            state(&policy(json!([ancestor("True", 2)]))),
            RouteState::Pending(_)
        ));
        assert!(matches!(
            state(&policy(json!([ancestor("False", 3)]))),
            RouteState::Refused(_)
        ));
        assert_eq!(
            state(&policy(json!([ancestor("True", 3)]))),
            RouteState::Ready("accepted by Gateway gateways/public".into())
        );
    }

    #[test]
    fn values_from_the_cluster_are_escaped_when_shown() {
        let r = RouteState::Refused(Refusal {
            parent: "Gateway gateways/pub\u{1b}]0;x\u{7}".into(),
            condition: "Accepted".into(),
            reason: "R\u{202e}".into(),
            message: "m\u{1b}[2J".into(),
        });
        let shown = r.to_string();
        assert!(
            !shown.contains('\u{1b}') && !shown.contains('\u{202e}'),
            "{shown}"
        );
        assert_eq!(
            RouteRef {
                kind: Kind::HttpRoute,
                name: "a\u{1b}".into()
            }
            .reference(),
            "httproute.gateway.networking.k8s.io/a\\e"
        );
    }
}
