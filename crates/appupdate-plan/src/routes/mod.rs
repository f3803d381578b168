//! Endpoints → routes: the scope groups of an endpoints file, published in one of the route
//! styles, and the create / update / delete updaters that bring the live managed routes to
//! them.
//!
//! Pure: [`plan_routes`] takes the parsed [`EndpointsFile`], the route flags and the live
//! objects (the Service, the managed Ingresses and HTTPRoutes, listed with the selector
//! `app=<app>,identifier`, and — only on a first exposure in an Ingress style without
//! `--ingress-class` — the IngressClasses) and returns the updaters with the live object each
//! one starts from, and what the plan decided about the routes ([`RoutesPlan`]).
//!
//! # What every style shares
//!
//! * **Groups.** Endpoints are grouped by their scope *set*: sorted by bytes, duplicates
//!   removed, so `[user, admin]` and `[admin, user, user]` are one group; no scopes is the
//!   public group. One route per group ([`scope_groups`]).
//! * **The identifier label.** Each route is labelled `app=<app>` and `identifier=<id>`, where
//!   `<id>` is the first 16 lowercase hex digits of SHA-256 over the sorted, de-duplicated scopes
//!   joined by `"\n"` (the public group hashes the empty string): `[]` → `e3b0c44298fc1c14`,
//!   `[user]` → `04f8996da763b7a9`, `[admin, user]` → `4f515e078b8f8861`
//!   ([`scope_identifier`]).
//! * **Names.** A new route is named `<app>-<id>`, which must be a DNS subdomain
//!   ([`route_name`]). Live routes are matched by the identifier label, never by name; when
//!   several carry one identifier, the one named `<app>-<id>` (else the smallest name) is kept
//!   and the others are deleted ([`match_live`]).
//! * **Managed.** Only routes labelled both `app=<app>` and `identifier` are managed; anything
//!   else is never updated or deleted. A managed route the run updates is taken over whoever
//!   made it: what of the routing layer's its style does not write (ingress-nginx annotations,
//!   HTTPRoute filters) is removed and shown, and named in `RouteInfo::foreign` so that the shell
//!   can refuse to remove it unseen (`--yes`).
//! * **The scope token.** Where a style sends the scope set to an auth service in a URL (the
//!   `nginx-auth` query, the `gateway` auth path), it sends the *scope token*: the sorted,
//!   de-duplicated scopes joined by one space, encoded as base64url without padding (RFC 4648
//!   §5): `[admin, user]` → `YWRtaW4gdXNlcg`, `[user]` → `dXNlcg` ([`scope_token`]). Its alphabet
//!   (`A-Z a-z 0-9 - _`) has nothing a URL, an nginx configuration or a path normaliser treats
//!   specially, and it can never be a `.` or `..` segment, whatever the scopes are.
//!
//! # Styles
//!
//! One [`Style`] per route style, one module each: [`nginx_snippet`] and [`nginx_auth`] are
//! flavours of Ingress ([`ingress`]), [`gateway`] writes HTTPRoutes. The style of a run is the
//! explicit `--routes`, else the style of the live managed routes (an Ingress is recognised by
//! its annotations, an HTTPRoute is `gateway`), else `nginx-snippet`. Live routes in a style
//! other than the run's are migrated: Ingresses between the two nginx styles are rewritten in
//! place (one write each, no moment without a route), routes of another kind are deleted after
//! the new ones are created ([`appupdate_model::plan::write_order`]).
//!
//! # Modules
//!
//! This module plans ([`plan_routes`]); the shared parts live beside it, re-exported here:
//! `group` (scope groups, identifiers, tokens, names, the backend port), `managed` (which live
//! routes are ours, matching them to groups, deleting the rest), `attachment` (where new routes
//! attach and how they authenticate), `choose` (the style, the auth provider, the notes of a
//! migration), `style` (the [`Style`] interface), `live` (the live objects planned against)
//! and `saved` (the checks of a saved plan's routes).

mod attachment;
mod choose;
pub mod envoy_gateway;
pub mod external_auth;
pub mod gateway;
mod group;
pub mod ingress;
mod live;
mod managed;
pub mod nginx_auth;
pub mod nginx_snippet;
mod saved;
mod style;
pub use appupdate_model::refs;

use std::collections::HashMap;

use serde_json::Value;

use appupdate_model::endpoints_file::EndpointsFile;
use appupdate_model::plan::{AuthProvider, Kind, PlanError, RouteStyle, RoutesPlan};
use refs::RouteFlags;

pub use self::attachment::Attachment;
use self::attachment::attachment;
pub(crate) use self::choose::{choose_provider, first_sibling, live_styles};
use self::choose::{choose_style, live_style, migration_notes, provider_notes};
pub use self::choose::{needs_gateway_check, needs_ingress_classes};
pub use self::group::{
    APP_LABEL, AUTH_RESPONSE_HEADERS, BackendPort, DEFAULT_CLASS_ANNOTATION, IDENTIFIER_LABEL,
    ScopeGroup, backend_port, managed_selector, normalize_scopes, path_core, route_name,
    scope_groups, scope_identifier, scope_token, scopes_of_token,
};
pub use self::live::{Listing, LiveRef, LiveRoutes, PlannedRoutes, WithLive};
pub use self::managed::{Matched, match_live};
pub(crate) use self::managed::{check_managed, deletion, label, label_fields, name_of};
pub(crate) use self::saved::{saved_group, saved_name, saved_owned, saved_port};
pub use self::style::{Forced, RouteContext, Style, create_bodies, style, style_of};

/// The updaters of the run's style for its kind's live routes, and the removal of every live
/// route of the other kind, each with the live object it starts from.
fn route_updaters(
    app: &str,
    chosen: &dyn Style,
    ctx: &RouteContext,
    groups: &[ScopeGroup],
    live: &LiveRoutes<'_>,
) -> Result<Vec<WithLive>, PlanError> {
    let mut updaters: Vec<WithLive> = Vec::new();
    for kind in [Kind::Ingress, Kind::HttpRoute] {
        let objs: &[Value] = match kind {
            Kind::Ingress => live.ingresses,
            _ => live.httproutes.items(),
        };
        let at = |index| Some(LiveRef { kind, index });
        if kind == chosen.kind() {
            // The first live object of each name (a map: thousands of groups are common).
            let mut by_name: HashMap<&str, usize> = HashMap::with_capacity(objs.len());
            for (i, o) in objs.iter().enumerate() {
                if let Some(name) = name_of(o) {
                    by_name.entry(name).or_insert(i);
                }
            }
            for u in chosen.updaters(ctx, groups, objs)? {
                let current = by_name.get(u.name()).copied().and_then(at);
                updaters.push((u, current));
            }
            continue;
        }
        for (i, obj) in objs.iter().enumerate() {
            let Some(name) = name_of(obj) else { continue };
            let removal = match kind {
                Kind::HttpRoute => gateway::GATEWAY.removal_in(ctx, name),
                _ => style(live_style(kind, obj)).removal(app, name),
            };
            updaters.push((removal, at(i)));
        }
    }
    // The SecurityPolicies: one per scoped HTTPRoute with the envoy-gateway provider, named
    // like it (the live route's name when one matched); every other managed one goes.
    let enforced = ctx.attachment.auth_provider == Some(AuthProvider::EnvoyGateway);
    let route_names: Vec<String> = if enforced {
        let matched = match_live(app, Kind::HttpRoute, groups, live.httproutes.items());
        groups
            .iter()
            .zip(matched.groups)
            .map(|(g, name)| match name {
                Some(n) => Ok(n),
                None => route_name(Kind::HttpRoute, app, &g.identifier),
            })
            .collect::<Result<_, _>>()?
    } else {
        Vec::new()
    };
    let policies = live.security_policies.items();
    for (u, index) in envoy_gateway::policy_updaters(ctx, groups, &route_names, enforced, policies)
    {
        let at = index.map(|index| LiveRef {
            kind: Kind::SecurityPolicy,
            index,
        });
        updaters.push((u, at));
    }
    Ok(updaters)
}

/// Plans the routes of `file` (see the module docs).
pub fn plan_routes(
    app: &str,
    file: &EndpointsFile,
    flags: &RouteFlags,
    live: &LiveRoutes<'_>,
) -> Result<PlannedRoutes, PlanError> {
    let styles = live_styles(live.ingresses, live.httproutes.items());
    let (run_style, default_note) = choose_style(app, flags.style, &styles)?;
    let mut notes: Vec<String> = default_note.into_iter().collect();
    let source = if flags.style.is_some() {
        "chosen with --routes".to_owned()
    } else {
        "read from the live routes".to_owned()
    };
    if let Some((flag, belongs)) = flags.foreign_to(run_style).first() {
        return Err(PlanError::Unexpected {
            reference: format!("routes of {app}"),
            message: format!(
                "{flag} applies to the {belongs} route style, but the style is {run_style} ({source}); drop {flag}, or change the style with --routes"
            ),
        });
    }
    match (run_style, live.httproutes) {
        (RouteStyle::Gateway, Listing::NotServed) => {
            return Err(PlanError::Unexpected {
                reference: format!("routes of {app}"),
                message: "the cluster does not serve gateway.networking.k8s.io/v1 HTTPRoutes; install the Gateway API CRDs (experimental channel for ExternalAuth), or choose --routes nginx-auth".to_owned(),
            });
        }
        (RouteStyle::Gateway, Listing::Forbidden) => {
            return Err(PlanError::Unexpected {
                reference: format!("routes of {app}"),
                message: "listing HTTPRoutes is forbidden, and the gateway style must see the live ones; ask for list permission on httproutes.gateway.networking.k8s.io".to_owned(),
            });
        }
        (_, Listing::Forbidden) => notes.push(format!(
            "HTTPRoutes could not be listed (forbidden), so managed HTTPRoutes of {app}, if any, are left out of this plan."
        )),
        _ => {}
    }
    let provider = match run_style {
        RouteStyle::Gateway => Some(choose_provider(app, flags.auth_provider, live)?),
        _ => None,
    };
    match (provider, live.security_policies) {
        (Some(AuthProvider::EnvoyGateway), Listing::NotServed) => {
            return Err(PlanError::Unexpected {
                reference: format!("routes of {app}"),
                message: "the cluster does not serve gateway.envoyproxy.io/v1alpha1 SecurityPolicies, which the envoy-gateway auth provider writes to guard the paths with scopes; install Envoy Gateway (its CRDs), or choose --auth-provider filter".to_owned(),
            });
        }
        (Some(AuthProvider::EnvoyGateway), Listing::Forbidden) => {
            return Err(PlanError::Unexpected {
                reference: format!("routes of {app}"),
                message: format!(
                    "listing SecurityPolicies is forbidden, and the envoy-gateway auth provider must see the live ones; ask for list permission on {}",
                    Kind::SecurityPolicy.resource_name()
                ),
            });
        }
        (_, Listing::Forbidden) => notes.push(format!(
            "SecurityPolicies could not be listed (forbidden), so managed SecurityPolicies of {app}, if any, are left out of this plan."
        )),
        _ => {}
    }
    let port = backend_port(live.service, app)?;
    let groups = scope_groups(file);
    let (attachment, forced) = attachment(app, run_style, flags, live, &groups, &mut notes)?;
    let ctx = RouteContext {
        app: app.to_owned(),
        port,
        attachment,
        forced,
        guarded_scopes: envoy_gateway::guarded_scopes(
            live.httproutes.items(),
            live.security_policies.items(),
        ),
    };
    let chosen = style(run_style);
    chosen.check(&ctx, &groups)?;
    // The ExternalAuth filter's support matters only where the filter checks the scopes (not
    // where Envoy Gateway's SecurityPolicies do).
    if run_style == RouteStyle::Gateway
        && ctx.attachment.auth_provider != Some(AuthProvider::EnvoyGateway)
        && groups.iter().any(|g| !g.is_public())
        && let Some(support) = live.gateway_support
    {
        use external_auth::Verdict;
        match external_auth::verdict(support) {
            Verdict::Supported => {}
            Verdict::Unsupported { class, gateway } => {
                return Err(PlanError::Unexpected {
                    reference: format!("routes of {app}"),
                    message: external_auth::unsupported_message(&class, &gateway),
                });
            }
            Verdict::Unverified(reasons) => notes.push(external_auth::unverified_note(&reasons)),
        }
    }

    let live_styles: Vec<RouteStyle> = styles.keys().copied().collect();
    notes.extend(migration_notes(app, run_style, &live_styles, live));
    notes.extend(provider_notes(app, provider, &groups, live));
    let updaters = route_updaters(app, chosen, &ctx, &groups, live)?;
    let header = header(app, run_style, &live_styles, live, &ctx.attachment);
    Ok(PlannedRoutes {
        updaters,
        summary: RoutesPlan {
            style: run_style,
            live_styles,
            notes,
            header,
        },
    })
}

/// The style and attachment of the live routes (a single style; what new routes would take
/// from them without flags) and the run's: what a history record keeps of them.
fn header(
    app: &str,
    run_style: RouteStyle,
    live_styles: &[RouteStyle],
    live: &LiveRoutes<'_>,
    run: &Attachment,
) -> appupdate_model::intent::RoutesHeader {
    use appupdate_model::intent::RoutesHeader;
    let style_before = match live_styles {
        [one] => Some(*one),
        _ => None,
    };
    let attachment_before = style_before
        .and_then(|s| attachment(app, s, &RouteFlags::default(), live, &[], &mut Vec::new()).ok())
        .map(|(a, _)| a.record())
        .unwrap_or_default();
    RoutesHeader {
        style_before,
        style: Some(run_style),
        attachment_before,
        attachment: run.record(),
    }
}

/// What to add to the message of a write the cluster refused, when the refusal is ingress-nginx
/// turning down this style's annotations (its admission webhook says "Snippet directives are
/// disabled" or that an annotation "is too risky"): the styles that avoid them; or a Gateway API
/// without the ExternalAuth filter (the standard channel): the auth provider that needs none.
pub fn refusal_hint(style: RouteStyle, message: &str) -> Option<&'static str> {
    let snippets = message.contains("Snippet directives are disabled");
    let risky = message.contains("too risky") || message.contains("risky annotation");
    match style {
        RouteStyle::NginxSnippet if snippets || risky => Some(
            "; this cluster's ingress-nginx refuses snippet annotations: publish the endpoints without them with --routes nginx-auth (auth-url and rewrite-target annotations) or --routes gateway (Gateway API HTTPRoutes)",
        ),
        RouteStyle::NginxAuth if risky => Some(
            "; this cluster's ingress-nginx refuses the auth-url annotation at its annotations-risk-level: publish the endpoints as Gateway API HTTPRoutes with --routes gateway, or ask for the risk level High (the default)",
        ),
        RouteStyle::Gateway if message.contains("Unsupported value: \"ExternalAuth\"") => Some(
            "; this cluster's Gateway API has no ExternalAuth filter (its standard channel): check the scopes with Envoy Gateway SecurityPolicies (--auth-provider envoy-gateway), or install the experimental channel",
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
