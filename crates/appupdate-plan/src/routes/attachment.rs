//! Where new routes are attached and how they authenticate ([`Attachment`]): from the flags,
//! else from the live managed routes, else from the cluster's default IngressClass.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::refs::{AuthUrl, ObjectRef, RouteFlags, ServiceRef};
use super::{
    DEFAULT_CLASS_ANNOTATION, Forced, LiveRoutes, ScopeGroup, choose_provider, first_sibling,
    name_of, style, style_of,
};
use super::{envoy_gateway, gateway, nginx_auth};
use appupdate_model::intent::AttachmentRecord;
use appupdate_model::plan::{AuthProvider, Kind, PlanError, RouteStyle};

/// Where new routes are attached, and how they authenticate: each part from its flag, else
/// from the live managed routes, else (the IngressClass) from the cluster's default.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Attachment {
    /// Ingress `spec.ingressClassName`.
    pub ingress_class: Option<String>,
    /// Ingress rule hosts / HTTPRoute `hostnames`; empty: any host.
    pub hosts: Vec<String>,
    /// Ingress `spec.tls`.
    pub tls: Option<Value>,
    /// HTTPRoute `spec.parentRefs`.
    pub parent_refs: Option<Value>,
    /// `nginx-auth`: the auth service URL.
    pub auth_url: Option<AuthUrl>,
    /// `gateway`: the auth Service.
    pub auth_service: Option<ServiceRef>,
    /// `gateway`: how scopes are checked (`None` for the other styles).
    pub auth_provider: Option<AuthProvider>,
}

impl Attachment {
    /// The parts of the attachment that a flag can express: what a history record keeps.
    pub fn record(&self) -> AttachmentRecord {
        let tls_secret = self.tls.as_ref().and_then(|tls| {
            let [entry] = tls.as_array()?.as_slice() else {
                return None;
            };
            let secret = entry["secretName"].as_str()?;
            let hosts_ok = match entry.get("hosts") {
                None => self.hosts.is_empty(),
                Some(h) => *h == json!(self.hosts),
            };
            let only = entry
                .as_object()?
                .keys()
                .all(|k| k == "hosts" || k == "secretName");
            (hosts_ok && only).then(|| secret.to_owned())
        });
        let gateway = self.parent_refs.as_ref().and_then(|p| {
            let [entry] = p.as_array()?.as_slice() else {
                return None;
            };
            let r = ObjectRef {
                namespace: entry["namespace"].as_str().map(str::to_owned),
                name: entry["name"].as_str()?.to_owned(),
            };
            (r.parent_ref() == *entry).then(|| r.to_string())
        });
        AttachmentRecord {
            ingress_class: self.ingress_class.clone(),
            hosts: self.hosts.clone(),
            tls_secret,
            gateway,
            auth_url: self.auth_url.as_ref().map(|u| u.as_str().to_owned()),
            auth_service: self.auth_service.as_ref().map(ServiceRef::to_string),
            auth_provider: self.auth_provider,
        }
    }
}

impl Attachment {
    /// What new Ingresses take from the managed Ingress with the smallest name: its class,
    /// the distinct hosts of its rules and its whole `spec.tls` (nothing without one).
    pub fn of_ingress_siblings(live: &[Value]) -> Attachment {
        let Some(s) = first_sibling(live) else {
            return Attachment::default();
        };
        Attachment {
            ingress_class: s["spec"]["ingressClassName"].as_str().map(str::to_owned),
            hosts: ingress_hosts(s),
            tls: s["spec"].get("tls").filter(|t| !t.is_null()).cloned(),
            ..Attachment::default()
        }
    }
}

/// Distinct hosts of an Ingress's rules, in order.
fn ingress_hosts(ing: &Value) -> Vec<String> {
    let mut hosts: Vec<String> = Vec::new();
    for rule in ing["spec"]["rules"].as_array().into_iter().flatten() {
        if let Some(h) = rule["host"].as_str().filter(|h| !h.is_empty())
            && !hosts.iter().any(|x| x == h)
        {
            hosts.push(h.to_owned());
        }
    }
    hosts
}

fn httproute_hosts(route: &Value) -> Vec<String> {
    route["spec"]["hostnames"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

/// The IngressClass for new Ingresses when neither a flag nor a sibling gives one: the
/// cluster's only default class.
fn default_class(app: &str, classes: &[Value]) -> Result<(String, String), PlanError> {
    let all: Vec<&str> = classes.iter().filter_map(name_of).collect();
    let defaults: Vec<&str> = classes
        .iter()
        .filter(|c| c["metadata"]["annotations"][DEFAULT_CLASS_ANNOTATION].as_str() == Some("true"))
        .filter_map(name_of)
        .collect();
    let listed = if all.is_empty() {
        "the cluster has no IngressClass".to_owned()
    } else {
        format!("IngressClasses: {}", all.join(", "))
    };
    match defaults.as_slice() {
        [one] => Ok((
            (*one).to_owned(),
            format!(
                "New Ingresses get the IngressClass {one}, the cluster's default ({DEFAULT_CLASS_ANNOTATION}): {app} has no managed Ingress to take a class from and --ingress-class was not given."
            ),
        )),
        [] => Err(PlanError::Unexpected {
            reference: format!("routes of {app}"),
            message: format!(
                "no managed Ingress exists to take an IngressClass from and the cluster has no default IngressClass ({listed}), so no controller would serve new Ingresses; choose one with --ingress-class NAME"
            ),
        }),
        several => Err(PlanError::Unexpected {
            reference: format!("routes of {app}"),
            message: format!(
                "no managed Ingress exists to take an IngressClass from and {} IngressClasses are marked default ({}); choose one with --ingress-class NAME",
                several.len(),
                several.join(", ")
            ),
        }),
    }
}

/// The IngressClass and TLS of new Ingresses: the flags, else the managed Ingress with the
/// smallest name, else (the class) the cluster's default IngressClass, noted.
fn ingress_attachment(
    app: &str,
    flags: &RouteFlags,
    live: &LiveRoutes<'_>,
    groups: &[ScopeGroup],
    a: &mut Attachment,
    notes: &mut Vec<String>,
) -> Result<(), PlanError> {
    let sibling = first_sibling(live.ingresses);
    a.ingress_class = match (&flags.ingress_class, sibling) {
        (Some(c), _) => Some(c.clone()),
        (None, Some(s)) => s["spec"]["ingressClassName"].as_str().map(str::to_owned),
        (None, None) if groups.is_empty() => None,
        (None, None) => {
            let classes = live.ingress_classes.unwrap_or_default();
            let (class, note) = default_class(app, classes)?;
            notes.push(note);
            Some(class)
        }
    };
    a.tls = match &flags.tls_secret {
        Some(secret) if a.hosts.is_empty() => Some(json!([{ "secretName": secret }])),
        Some(secret) => Some(json!([{ "hosts": a.hosts, "secretName": secret }])),
        None => sibling.and_then(|s| s["spec"].get("tls").filter(|t| !t.is_null()).cloned()),
    };
    Ok(())
}

/// The run's attachment (see [`Attachment`] and [`Forced`]), and the notes that explain what
/// was taken from where.
pub(super) fn attachment(
    app: &str,
    run_style: RouteStyle,
    flags: &RouteFlags,
    live: &LiveRoutes<'_>,
    groups: &[ScopeGroup],
    notes: &mut Vec<String>,
) -> Result<(Attachment, Forced), PlanError> {
    let ing_sibling = first_sibling(live.ingresses);
    let route_sibling = first_sibling(live.httproutes.items());
    let mut a = Attachment::default();
    let forced = Forced {
        ingress_class: flags.ingress_class.is_some(),
        hosts: !flags.hosts.is_empty(),
        tls: flags.tls_secret.is_some(),
        parent_refs: flags.gateway.is_some(),
    };
    a.hosts = if forced.hosts {
        flags.hosts.clone()
    } else {
        let from_ingress = ing_sibling.map(ingress_hosts);
        let from_route = route_sibling.map(httproute_hosts);
        match style(run_style).kind() {
            Kind::HttpRoute => from_route.or(from_ingress),
            _ => from_ingress.or(from_route),
        }
        .unwrap_or_default()
    };
    match style(run_style).kind() {
        Kind::Ingress => ingress_attachment(app, flags, live, groups, &mut a, notes)?,
        Kind::HttpRoute => {
            a.parent_refs = match &flags.gateway {
                Some(g) => Some(json!([g.parent_ref()])),
                None => route_sibling
                    .and_then(|s| s["spec"].get("parentRefs"))
                    .filter(|p| p.as_array().is_some_and(|a| !a.is_empty()))
                    .cloned(),
            };
            if a.parent_refs.is_none() && !groups.is_empty() {
                return Err(PlanError::Unexpected {
                    reference: format!("routes of {app}"),
                    message: "no managed HTTPRoute exists to take a Gateway from; name the Gateway the HTTPRoutes attach to with --gateway [NAMESPACE/]NAME".to_owned(),
                });
            }
        }
        _ => {}
    }
    if run_style == RouteStyle::NginxAuth {
        a.auth_url = flags.auth_url.clone().or_else(|| {
            live.ingresses
                .iter()
                .filter(|o| style_of(Kind::Ingress, o) == Some(RouteStyle::NginxAuth))
                .filter_map(|o| Some((name_of(o)?, o)))
                .collect::<BTreeMap<_, _>>()
                .into_values()
                .find_map(nginx_auth::auth_url_of)
        });
    }
    if run_style == RouteStyle::Gateway {
        let provider = choose_provider(app, flags.auth_provider, live)?;
        fn by_name(objs: &[Value]) -> BTreeMap<&str, &Value> {
            objs.iter().filter_map(|o| Some((name_of(o)?, o))).collect()
        }
        let routes = by_name(live.httproutes.items());
        let policies = by_name(live.security_policies.items());
        let from_routes = || routes.values().find_map(|o| gateway::auth_service_of(o));
        let from_policies = || {
            policies
                .values()
                .find_map(|o| envoy_gateway::auth_service_of(o))
        };
        a.auth_service = flags.auth_service.clone().or_else(|| match provider {
            AuthProvider::Filter => from_routes().or_else(from_policies),
            AuthProvider::EnvoyGateway => from_policies().or_else(from_routes),
        });
        a.auth_provider = Some(provider);
    }
    Ok((a, forced))
}
