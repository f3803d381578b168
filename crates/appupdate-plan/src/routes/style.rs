//! The route styles behind one interface ([`Style`]), and what they are given to plan with
//! ([`RouteContext`]).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use super::{Attachment, BackendPort, ScopeGroup, route_name, scope_groups};
use super::{envoy_gateway, gateway, ingress};
use crate::updaters::Updater;
use appupdate_model::endpoints_file::EndpointsFile;
use appupdate_model::plan::{AuthProvider, Kind, PlanError, RouteStyle};

/// Which parts of the [`Attachment`] came from flags. A part given as a flag is what every
/// managed route of the run's style gets, the live ones included (shown as updates); a part
/// not given is taken by new routes only, and live routes keep theirs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Forced {
    pub ingress_class: bool,
    pub hosts: bool,
    pub tls: bool,
    pub parent_refs: bool,
}

/// What a style needs to build a group's route.
#[derive(Clone, Debug)]
pub struct RouteContext {
    pub app: String,
    pub port: BackendPort,
    pub attachment: Attachment,
    pub forced: Forced,
    /// The scopes each live HTTPRoute without the ExternalAuth filter has checked by the live
    /// managed SecurityPolicy that targets it, by route name: what a route removed says it
    /// served (its own rules do not say).
    pub guarded_scopes: BTreeMap<String, Vec<String>>,
}

impl RouteContext {
    /// A context with nothing attached: no class, host, TLS, Gateway or auth service.
    pub fn new(app: &str, port: BackendPort) -> RouteContext {
        RouteContext {
            app: app.to_owned(),
            port,
            attachment: Attachment::default(),
            forced: Forced::default(),
            guarded_scopes: BTreeMap::new(),
        }
    }
}

/// The objects `s` creates for `file` when no route is live (what a first exposure with
/// `ctx` writes, SecurityPolicies included with the `envoy-gateway` provider): for seeding
/// clusters in tests and benchmarks, and for the examples.
pub fn create_bodies(
    s: RouteStyle,
    ctx: &RouteContext,
    file: &EndpointsFile,
    namespace: &str,
) -> Result<Vec<Value>, PlanError> {
    let groups = scope_groups(file);
    let chosen = style(s);
    chosen.check(ctx, &groups)?;
    let mut updaters = chosen.updaters(ctx, &groups, &[])?;
    if s == RouteStyle::Gateway && ctx.attachment.auth_provider == Some(AuthProvider::EnvoyGateway)
    {
        let names = groups
            .iter()
            .map(|g| route_name(Kind::HttpRoute, &ctx.app, &g.identifier))
            .collect::<Result<Vec<_>, _>>()?;
        updaters.extend(
            envoy_gateway::policy_updaters(ctx, &groups, &names, true, &[])
                .into_iter()
                .map(|(u, _)| u),
        );
    }
    let mut out = Vec::new();
    for u in updaters {
        if let Some(appupdate_model::plan::Write::Create { body }) = u.plan(namespace, None)?.write
        {
            out.push(Arc::unwrap_or_clone(body));
        }
    }
    Ok(out)
}

/// A route style: the objects it generates for the scope groups, and how it recognises its
/// live objects. One implementation per style; [`style`] lists them.
pub trait Style: Send + Sync + fmt::Debug {
    fn style(&self) -> RouteStyle;
    /// The kind of object its routes are.
    fn kind(&self) -> Kind;
    /// Whether a live managed object of [`Style::kind`] is in this style.
    fn recognizes(&self, live: &Value) -> bool;
    /// Refuses groups this style cannot publish with `ctx` (a scoped group without an auth
    /// service, more paths than a route holds), before any updater is built.
    fn check(&self, ctx: &RouteContext, groups: &[ScopeGroup]) -> Result<(), PlanError>;
    /// The updaters that bring the live managed objects of [`Style::kind`] (in any style of
    /// that kind) to the groups: creates, updates (in place, also from another style of the
    /// same kind) and deletes.
    fn updaters(
        &self,
        ctx: &RouteContext,
        groups: &[ScopeGroup],
        live: &[Value],
    ) -> Result<Vec<Updater>, PlanError>;
    /// The updater that deletes the live managed route `name` of this style (when the run
    /// moves to a style of another kind).
    fn removal(&self, app: &str, name: &str) -> Updater;
}

/// The implementation of a style.
pub fn style(s: RouteStyle) -> &'static dyn Style {
    match s {
        RouteStyle::NginxSnippet => &ingress::NGINX_SNIPPET,
        RouteStyle::NginxAuth => &ingress::NGINX_AUTH,
        RouteStyle::Gateway => &gateway::GATEWAY,
    }
}

/// The style of a live managed route, if it is recognisably one.
pub fn style_of(kind: Kind, live: &Value) -> Option<RouteStyle> {
    RouteStyle::ALL
        .into_iter()
        .find(|s| style(*s).kind() == kind && style(*s).recognizes(live))
}
