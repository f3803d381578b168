//! The choices a run makes about its routes: the style, the auth provider, and the notes that
//! say what a migration does.

use std::collections::BTreeMap;

use serde_json::Value;

use super::refs::RouteFlags;
use super::{
    APP_LABEL, IDENTIFIER_LABEL, Listing, LiveRoutes, ScopeGroup, label, name_of, scope_identifier,
    style, style_of,
};
use super::{envoy_gateway, external_auth, gateway};
use appupdate_model::endpoints_file::EndpointsFile;
use appupdate_model::plan::{AuthProvider, Kind, PlanError, RouteStyle};

/// The style the run publishes in: the explicit one, else the live one, else the default.
/// Live routes in several styles without `--routes` are refused.
pub(super) fn choose_style(
    app: &str,
    explicit: Option<RouteStyle>,
    live_styles: &BTreeMap<RouteStyle, Vec<String>>,
) -> Result<(RouteStyle, Option<String>), PlanError> {
    if let Some(s) = explicit {
        return Ok((s, None));
    }
    let mut styles = live_styles.keys().copied();
    match (styles.next(), styles.next()) {
        (None, _) => Ok((
            RouteStyle::NginxSnippet,
            Some(format!(
                "Route style nginx-snippet, the default: {app} has no managed routes yet (choose another with --routes)."
            )),
        )),
        (Some(s), None) => Ok((s, None)),
        (Some(_), Some(_)) => Err(PlanError::Unexpected {
            reference: format!("routes of {app}"),
            message: format!(
                "the managed routes are in several styles ({}); choose the style to keep with --routes {}",
                live_styles
                    .iter()
                    .map(|(s, names)| format!("{s}: {}", names.join(", ")))
                    .collect::<Vec<_>>()
                    .join("; "),
                RouteStyle::ALL.map(RouteStyle::as_str).join("|")
            ),
        }),
    }
}

/// Whether the IngressClasses must be read: the style is an Ingress style, there is something
/// to publish, no managed Ingress exists to take a class from, and `--ingress-class` was not
/// given. Decided from the first read round; the read is one more request.
pub fn needs_ingress_classes(
    app: &str,
    file: &EndpointsFile,
    flags: &RouteFlags,
    ingresses: &[Value],
    httproutes: &Listing,
) -> bool {
    if flags.ingress_class.is_some() || file.endpoints.is_empty() || !ingresses.is_empty() {
        return false;
    }
    let live_styles = live_styles(ingresses, httproutes.items());
    matches!(
        choose_style(app, flags.style, &live_styles),
        Ok((s, _)) if style(s).kind() == Kind::Ingress
    )
}

/// The Gateways whose GatewayClasses must say whether they support ExternalAuth: the run
/// publishes scoped groups in the `gateway` style (`--routes gateway`, or live routes that are
/// HTTPRoutes only). `None` when no check is needed, or no Gateway is named (the plan refuses
/// that anyway). Decided from the first read round; see [`external_auth`].
pub fn needs_gateway_check(
    app: &str,
    file: &EndpointsFile,
    flags: &RouteFlags,
    ingresses: &[Value],
    httproutes: &Listing,
    namespace: &str,
) -> Option<Vec<external_auth::GatewayKey>> {
    if !file.endpoints.iter().any(|e| !e.scopes.is_empty()) {
        return None;
    }
    let live_styles = live_styles(ingresses, httproutes.items());
    if !matches!(
        choose_style(app, flags.style, &live_styles),
        Ok((RouteStyle::Gateway, _))
    ) || flags.auth_provider == Some(AuthProvider::EnvoyGateway)
    {
        return None;
    }
    let gateways =
        external_auth::attached_gateways(flags.gateway.as_ref(), httproutes.items(), namespace);
    (!gateways.is_empty()).then_some(gateways)
}

/// The style of a live managed route; an Ingress no flavour recognises counts as
/// `nginx-snippet`, the original format.
pub(super) fn live_style(kind: Kind, obj: &Value) -> RouteStyle {
    style_of(kind, obj).unwrap_or(match kind {
        Kind::HttpRoute => RouteStyle::Gateway,
        _ => RouteStyle::NginxSnippet,
    })
}

/// The live managed routes by style ([`live_style`]), names sorted.
pub(crate) fn live_styles(
    ingresses: &[Value],
    httproutes: &[Value],
) -> BTreeMap<RouteStyle, Vec<String>> {
    let mut out: BTreeMap<RouteStyle, Vec<String>> = BTreeMap::new();
    for (kind, objs) in [(Kind::Ingress, ingresses), (Kind::HttpRoute, httproutes)] {
        for obj in objs {
            out.entry(live_style(kind, obj))
                .or_default()
                .push(name_of(obj).unwrap_or_default().to_owned());
        }
    }
    for names in out.values_mut() {
        names.sort();
    }
    out
}

/// The managed object of `objs` with the smallest name (the first of them, if several).
pub(crate) fn first_sibling(objs: &[Value]) -> Option<&Value> {
    // Labels are looked up only for a name smaller than the smallest so far: a listing comes
    // sorted by name, and a run asks this several times of a thousand Ingresses.
    let managed = |o: &Value| label(o, APP_LABEL).is_some() && label(o, IDENTIFIER_LABEL).is_some();
    let mut first: Option<(&str, &Value)> = None;
    for o in objs {
        let Some(name) = name_of(o) else { continue };
        if first.is_none_or(|(smallest, _)| name < smallest) && managed(o) {
            first = Some((name, o));
        }
    }
    first.map(|(_, o)| o)
}

/// The auth provider of each live managed HTTPRoute that checks scopes (names sorted): a route
/// with the ExternalAuth filter is `filter`; one without it that a managed SecurityPolicy
/// targets is `envoy-gateway`; public routes (and scoped ones with neither) have none.
fn live_providers(live: &LiveRoutes<'_>) -> BTreeMap<AuthProvider, Vec<String>> {
    let targeted: std::collections::BTreeSet<&str> = live
        .security_policies
        .items()
        .iter()
        .flat_map(envoy_gateway::targets)
        .collect();
    let mut out: BTreeMap<AuthProvider, Vec<String>> = BTreeMap::new();
    for route in live.httproutes.items() {
        let Some(name) = name_of(route) else { continue };
        let provider = if gateway::has_external_auth(route) {
            AuthProvider::Filter
        } else if targeted.contains(name) {
            AuthProvider::EnvoyGateway
        } else {
            continue;
        };
        out.entry(provider).or_default().push(name.to_owned());
    }
    for names in out.values_mut() {
        names.sort();
    }
    out
}

/// The auth provider of a `gateway` run: `--auth-provider`, else the live routes'
/// ([`live_providers`]), else `filter`. Live routes with both, or scoped routes whose provider
/// cannot be read because SecurityPolicies may not be listed, are refused without the flag.
pub(crate) fn choose_provider(
    app: &str,
    explicit: Option<AuthProvider>,
    live: &LiveRoutes<'_>,
) -> Result<AuthProvider, PlanError> {
    if let Some(p) = explicit {
        return Ok(p);
    }
    let providers = live_providers(live);
    let mut found = providers.keys().copied();
    match (found.next(), found.next()) {
        (Some(one), None) => Ok(one),
        (Some(_), Some(_)) => Err(PlanError::Unexpected {
            reference: format!("routes of {app}"),
            message: format!(
                "the managed HTTPRoutes check scopes in two ways ({}); choose one with --auth-provider {}",
                providers
                    .iter()
                    .map(|(p, names)| format!("{p}: {}", names.join(", ")))
                    .collect::<Vec<_>>()
                    .join("; "),
                AuthProvider::ALL.map(AuthProvider::as_str).join("|")
            ),
        }),
        (None, _) => {
            let public = scope_identifier(&[]);
            let unreadable = *live.security_policies == Listing::Forbidden
                && live
                    .httproutes
                    .items()
                    .iter()
                    .any(|r| label(r, IDENTIFIER_LABEL).is_some_and(|id| id != public));
            if unreadable {
                return Err(PlanError::Unexpected {
                    reference: format!("routes of {app}"),
                    message: format!(
                        "listing SecurityPolicies is forbidden, so whether the HTTPRoutes with scopes are guarded by SecurityPolicies or need the ExternalAuth filter cannot be read; name the provider with --auth-provider {}, or ask for list permission on {}",
                        AuthProvider::ALL.map(AuthProvider::as_str).join("|"),
                        Kind::SecurityPolicy.resource_name()
                    ),
                });
            }
            Ok(AuthProvider::Filter)
        }
    }
}

/// What a plan that changes how the live HTTPRoutes check scopes says about it (when it
/// keeps routes with scopes).
pub(super) fn provider_notes(
    app: &str,
    run: Option<AuthProvider>,
    groups: &[ScopeGroup],
    live: &LiveRoutes<'_>,
) -> Vec<String> {
    let providers: Vec<AuthProvider> = live_providers(live).into_keys().collect();
    let (Some(run), [from], true) = (
        run,
        providers.as_slice(),
        groups.iter().any(|g| !g.is_public()),
    ) else {
        return Vec::new();
    };
    match (from, run) {
        (AuthProvider::Filter, AuthProvider::EnvoyGateway) => vec![format!(
            "Moving the scope checks of {app}'s HTTPRoutes from the ExternalAuth filter to Envoy Gateway SecurityPolicies: each policy is created before its HTTPRoute drops the filter."
        )],
        (AuthProvider::EnvoyGateway, AuthProvider::Filter) => vec![format!(
            "Moving the scope checks of {app}'s HTTPRoutes from Envoy Gateway SecurityPolicies to the ExternalAuth filter: each HTTPRoute gets the filter before its policy is deleted."
        )],
        _ => Vec::new(),
    }
}

/// What a plan that changes the style of live routes says about it.
pub(super) fn migration_notes(
    app: &str,
    run_style: RouteStyle,
    live_styles: &[RouteStyle],
    live: &LiveRoutes<'_>,
) -> Vec<String> {
    let kind = style(run_style).kind();
    let from: Vec<RouteStyle> = live_styles
        .iter()
        .copied()
        .filter(|s| *s != run_style)
        .collect();
    if from.is_empty() {
        return Vec::new();
    }
    let how = if from.iter().all(|s| style(*s).kind() == kind) {
        "each Ingress is rewritten in place, one write each".to_owned()
    } else {
        format!(
            "the new {} are created before the old routes are deleted",
            kind.plural_title()
        )
    };
    let names: Vec<&str> = from.iter().map(|s| s.as_str()).collect();
    let mut notes = vec![format!(
        "Migrating the routes of {app} from {} to {run_style}: {how}.",
        names.join(" and ")
    )];
    let with_tls = live
        .ingresses
        .iter()
        .any(|i| i["spec"].get("tls").is_some_and(|t| !t.is_null()));
    if kind == Kind::HttpRoute && with_tls {
        notes.push(
            "The Ingresses' TLS settings are not carried over: with the Gateway API, certificates belong to the Gateway's listeners.".to_owned(),
        );
    }
    notes
}
