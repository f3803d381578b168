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

pub mod envoy_gateway;
pub mod external_auth;
pub mod gateway;
pub mod ingress;
pub mod nginx_auth;
pub mod nginx_snippet;
pub use appupdate_model::refs;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::updaters::{Refusal, Updater};
use appupdate_model::endpoints_file::EndpointsFile;
use appupdate_model::intent::AttachmentRecord;
use appupdate_model::names;
use appupdate_model::plan::{AuthProvider, Kind, PlanError, RouteStyle, RoutesPlan};
use refs::{AuthUrl, ObjectRef, RouteFlags, ServiceRef};

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
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
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

pub(crate) fn name_of(obj: &Value) -> Option<&str> {
    obj["metadata"]["name"].as_str()
}

pub(crate) fn label<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj["metadata"]["labels"][key].as_str()
}

/// Refuses a live object under a route's name that is not this group's managed route (a create
/// that met an unmanaged object of the same name): it is never updated.
pub(crate) fn check_managed(
    kind: Kind,
    live: &Value,
    name: &str,
    app: &str,
    identifier: &str,
) -> Result<(), PlanError> {
    if label(live, APP_LABEL) == Some(app) && label(live, IDENTIFIER_LABEL) == Some(identifier) {
        return Ok(());
    }
    Err(PlanError::Unexpected {
        reference: format!("{}/{name}", kind.kubectl_name()),
        message: format!(
            "exists but is not the managed {kind} of this scope group (it lacks the labels {APP_LABEL}={app} and {IDENTIFIER_LABEL}={identifier}), so it is left alone; rename or remove it and run again"
        ),
    })
}

/// The owned labels of a new route, as field changes.
pub(crate) fn label_fields(app: &str, identifier: &str) -> Vec<appupdate_model::plan::FieldChange> {
    use appupdate_model::plan::FieldChange;
    vec![
        FieldChange::new(
            format!("metadata.labels[{APP_LABEL}]"),
            None,
            Some(json!(app)),
        ),
        FieldChange::new(
            format!("metadata.labels[{IDENTIFIER_LABEL}]"),
            None,
            Some(json!(identifier)),
        ),
    ]
}

/// Refuses a live object that is not one of `app`'s managed routes (it lacks the label `app`
/// with the application's name or the `identifier` label): a saved plan or an undo never
/// deletes or changes it.
pub(crate) fn fence(kind: Kind, live: &Value, name: &str, app: &str) -> Result<(), PlanError> {
    if label(live, APP_LABEL) == Some(app) && label(live, IDENTIFIER_LABEL).is_some() {
        return Ok(());
    }
    Err(PlanError::Unexpected {
        reference: format!("{}/{name}", kind.kubectl_name()),
        message: format!(
            "is not a managed route of {app} (it lacks the labels {APP_LABEL}={app} and {IDENTIFIER_LABEL}), so it is left alone; nothing was written"
        ),
    })
}

/// The change that deletes a live route (or SecurityPolicy) of `app`, or nothing when it is gone
/// already. `view` is what the diff shows of it, `info` what it serves (a route's). A live object that is not one of the
/// application's managed routes is refused ([`fence`]).
pub(crate) fn deletion(
    kind: Kind,
    namespace: &str,
    app: &str,
    name: &str,
    live: Option<&Value>,
    view_and_info: impl FnOnce(&Value) -> (Value, Option<appupdate_model::plan::RouteInfo>),
) -> Result<appupdate_model::plan::ObjectChange, PlanError> {
    use appupdate_model::plan::{Base, FieldChange, ObjectChange, View, Write};
    let Some(live) = live else {
        return Ok(ObjectChange {
            kind,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            live: None,
            fields: Vec::new(),
            before: None,
            after: None,
            write: None,
            route: None,
        });
    };
    fence(kind, live, name, app)?;
    let (view, info) = view_and_info(live);
    let view = View::from(view);
    let reference = format!("{}/{name}", kind.kubectl_name());
    Ok(ObjectChange {
        kind,
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        live: Base::of(live),
        fields: vec![FieldChange::whole(Some(&view), None)],
        before: Some(view),
        after: None,
        write: Some(Write::Delete {
            base: Base::required(live, &reference)?,
        }),
        route: info,
    })
}

/// The route each group gets: the live route it updates (by name) or none (a create), and the
/// live managed routes no group keeps (deleted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Matched {
    /// Per group, in the order given: the live name, if one matched.
    pub groups: Vec<Option<String>>,
    /// Live managed routes to delete, sorted.
    pub extra: Vec<String>,
}

/// Matches live managed routes to groups by the identifier label (see the module docs). Live
/// objects without both `app=<app>` and the identifier label are ignored.
pub fn match_live(app: &str, kind: Kind, groups: &[ScopeGroup], live: &[Value]) -> Matched {
    let mut by_id: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for obj in live {
        if label(obj, APP_LABEL) != Some(app) {
            continue;
        }
        if let (Some(id), Some(name)) = (label(obj, IDENTIFIER_LABEL), name_of(obj)) {
            by_id.entry(id).or_default().push(name);
        }
    }
    for names in by_id.values_mut() {
        names.sort_unstable();
        names.dedup();
    }
    let mut extra = Vec::new();
    let matched = groups
        .iter()
        .map(|g| {
            let names = by_id.remove(g.identifier.as_str())?;
            let wanted = route_name(kind, app, &g.identifier).ok();
            let keep = names
                .iter()
                .copied()
                .find(|n| Some(*n) == wanted.as_deref())
                .or_else(|| names.first().copied())?
                .to_owned();
            extra.extend(names.into_iter().filter(|n| *n != keep).map(str::to_owned));
            Some(keep)
        })
        .collect();
    extra.extend(by_id.into_values().flatten().map(str::to_owned));
    extra.sort();
    Matched {
        groups: matched,
        extra,
    }
}

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

/// A saved route's scope group, checked as an endpoints file is: its paths and scopes through
/// the endpoints file's guard, its scopes a set, its identifier theirs.
pub(crate) fn saved_group(
    scopes: &[String],
    identifier: &str,
    paths: &[String],
) -> Result<ScopeGroup, Refusal> {
    let set = appupdate_model::intent::RouteSet {
        groups: vec![appupdate_model::intent::GroupRecord {
            scopes: scopes.to_vec(),
            paths: paths.to_vec(),
        }],
        ..Default::default()
    };
    set.endpoints_file("the saved route")?;
    if normalize_scopes(scopes) != scopes {
        return Err(Refusal::ScopesNotASet);
    }
    if identifier != scope_identifier(scopes) {
        return Err(Refusal::Identifier(identifier.to_owned()));
    }
    let mut sorted = paths.to_vec();
    sorted.sort();
    sorted.dedup();
    if sorted != paths || paths.is_empty() {
        return Err(Refusal::PathsNotASet);
    }
    Ok(ScopeGroup {
        scopes: scopes.to_vec(),
        identifier: identifier.to_owned(),
        paths: paths.to_vec(),
    })
}

/// A saved route object (to write or to remove): planned for the application, under a valid
/// object name.
pub(crate) fn saved_owned(owner: &str, app: &str, name: &str) -> Result<(), Refusal> {
    if owner != app {
        return Err(Refusal::OtherApplication {
            owner: owner.to_owned(),
            app: app.to_owned(),
        });
    }
    if !names::is_dns1123_subdomain(name) {
        return Err(Refusal::ObjectName(name.to_owned()));
    }
    Ok(())
}

/// A saved route's (or SecurityPolicy's) name: the one its style gives a new route of the group
/// (`<app>-<identifier>`), or — only where its approved change updates a live object
/// (`creates` is false) — the name of the live route it matched, which the live object's labels
/// must then show is the group's ([`check_managed`]). A saved plan therefore never creates an
/// object under a name of its own.
pub(crate) fn saved_name(
    kind: Kind,
    app: &str,
    identifier: &str,
    name: &str,
    creates: bool,
) -> Result<(), Refusal> {
    let generated = route_name(kind, app, identifier).map_err(|e| e.to_string())?;
    if creates && name != generated {
        return Err(Refusal::NameNotGenerated {
            kind,
            name: name.to_owned(),
            generated,
        });
    }
    Ok(())
}

/// A saved route's backend port (`port` is where its style keeps it): a port number.
pub(crate) fn saved_port(port: &Value) -> Result<i32, Refusal> {
    port.as_i64()
        .and_then(|n| i32::try_from(n).ok())
        .filter(|n| (1..=65535).contains(n))
        .ok_or(Refusal::NoPort)
}

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
    /// The cluster's IngressClasses, when they were read ([`needs_ingress_classes`]).
    pub ingress_classes: Option<&'a [Value]>,
    /// The Gateways the scoped HTTPRoutes attach to and their classes, when they were read
    /// ([`needs_gateway_check`]): whether the cluster enforces ExternalAuth.
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

/// The style the run publishes in: the explicit one, else the live one, else the default.
/// Live routes in several styles without `--routes` are refused.
fn choose_style(
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
fn live_style(kind: Kind, obj: &Value) -> RouteStyle {
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

/// The managed object of `objs` with the smallest name.
pub(crate) fn first_sibling(objs: &[Value]) -> Option<&Value> {
    objs.iter()
        .filter(|o| label(o, APP_LABEL).is_some() && label(o, IDENTIFIER_LABEL).is_some())
        .filter_map(|o| Some((name_of(o)?, o)))
        .min_by(|a, b| a.0.cmp(b.0))
        .map(|(_, o)| o)
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
fn attachment(
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
fn provider_notes(
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
fn migration_notes(
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
