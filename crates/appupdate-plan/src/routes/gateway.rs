//! The `gateway` style: one Gateway API `HTTPRoute` (`gateway.networking.k8s.io/v1`) per scope
//! group instead of an Ingress, with the same labels, identifier and name (`<app>-<id>`).
//!
//! ```yaml
//! spec:
//!   parentRefs:                       # --gateway [NAMESPACE/]NAME, else the live routes'
//!   - {group: gateway.networking.k8s.io, kind: Gateway, name: public, namespace: gateways}
//!   hostnames: [shop.example.com]     # --host, else the live routes' (absent: any host)
//!   rules:                            # one per endpoint path, sorted
//!   - matches:
//!     - path: {type: PathPrefix, value: /web/protected/admin}
//!     filters:
//!     - type: ExternalAuth            # scoped groups, --auth-provider filter (experimental
//!                                     # channel, GEP-1494)
//!       externalAuth:
//!         protocol: HTTP
//!         backendRef: {group: "", kind: Service, name: oauth, namespace: auth, port: 8080}
//!         http:
//!           path: /scopes/YWRtaW4gdXNlcg          # "/scopes/" + the scope token
//!           allowedResponseHeaders: [User-Id, User-Scopes]
//!     - type: URLRewrite
//!       urlRewrite:
//!         path: {type: ReplacePrefixMatch, replacePrefixMatch: /protected/admin}
//!     backendRefs:
//!     - {group: "", kind: Service, name: web, port: 80, weight: 1}
//! ```
//!
//! The values the API server would default (`group`, `kind`, `weight`) are written out, so a
//! converged route reads back exactly as planned. A rule's `ReplacePrefixMatch` needs exactly
//! one `PathPrefix` match, hence one rule per path, and an HTTPRoute holds at most 16 rules: a
//! scope group with more than 16 paths is refused (merge paths under a common prefix). The
//! endpoint `/` matches `PathPrefix /web` and is rewritten to `/`; a trailing `/` of an endpoint
//! path is dropped.
//!
//! The auth Service gets the request's path behind `/scopes/<scope token>` (the ExternalAuth
//! `http.path` is a prefix), answers 2xx with `User-Id` and `User-Scopes` (copied to the
//! backend request) or 401/403. An auth Service in another namespace needs a ReferenceGrant
//! there, as every cross-namespace reference does.
//!
//! With `--auth-provider envoy-gateway` a scoped route has no ExternalAuth filter: an Envoy
//! Gateway SecurityPolicy of the route's name sends the same request to the auth Service
//! ([`super::envoy_gateway`]). The provider is the flag, else the live routes' (a scoped route
//! with the filter is `filter`; one without it that a managed SecurityPolicy targets is
//! `envoy-gateway`), else `filter`.
//!
//! # Updates
//!
//! Owned: the `app`/`identifier` labels and the rules' `matches`, `filters` and `backendRefs`
//! (rules are matched by their path; a rule's other fields — `name`, `timeouts`, fields this
//! tool does not know — are kept); with `--gateway` or `--host` also `parentRefs` and
//! `hostnames`. A live value counts as unchanged when it holds everything planned (the server
//! may add defaults of its own) — except the filters, an allowlist ([`FILTER_TYPES`]): a rule's
//! are exactly the planned ones and a backendRef has none, so any other filter is removed with
//! its rule's rewrite, shown in the diff and named in the change's `RouteInfo::foreign`.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::refs::ServiceRef;
use super::{
    APP_LABEL, AUTH_RESPONSE_HEADERS, Forced, IDENTIFIER_LABEL, RouteContext, ScopeGroup, Style,
    check_managed, deletion, label, label_fields, match_live, normalize_scopes, path_core,
    route_name, scope_token, scopes_of_token,
};
use appupdate_model::plan::{
    AuthProvider, Base, FieldChange, Kind, ObjectChange, PatchType, PlanError, RouteInfo,
    RouteStyle, Write,
};

use crate::updaters::{Refusal, Updater};

/// The most rules an HTTPRoute holds.
pub const MAX_RULES: usize = 16;
/// What the ExternalAuth `http.path` starts with; the scope token follows.
pub const AUTH_PATH_PREFIX: &str = "/scopes/";

/// The `gateway` style.
#[derive(Debug)]
pub struct Gateway;

pub static GATEWAY: Gateway = Gateway;

/// The parts of a rule this tool owns.
const RULE_KEYS: [&str; 3] = ["matches", "filters", "backendRefs"];

/// The filters this style writes: every other one, and any filter of a backendRef, is removed
/// when the tool updates a route (an allowlist, not a list of dangerous filters).
pub const FILTER_TYPES: [&str; 2] = ["ExternalAuth", "URLRewrite"];

/// The filters of a live rule that this style does not write, each named by its field:
/// `spec.rules[path=/web/a].filters[RequestMirror]`,
/// `spec.rules[path=/web/a].backendRefs[0].filters[RequestHeaderModifier]`.
fn foreign_filters(rule: &Value) -> Vec<String> {
    let at = rule_field(rule_key(rule).unwrap_or("?"));
    let kind = |f: &Value| f["type"].as_str().unwrap_or("?").to_owned();
    let mut out: Vec<String> = rule["filters"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| !FILTER_TYPES.contains(&f["type"].as_str().unwrap_or_default()))
        .map(|f| format!("{at}.filters[{}]", kind(f)))
        .collect();
    for (i, b) in rule["backendRefs"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for f in b["filters"].as_array().into_iter().flatten() {
            out.push(format!("{at}.backendRefs[{i}].filters[{}]", kind(f)));
        }
    }
    out
}

/// Whether a live rule already is `wanted` in the parts this tool owns: its matches and
/// backendRefs hold everything planned (the server adds defaults), its filters are exactly the
/// planned ones, and no backendRef has filters of its own.
fn same_rule(live: &Value, wanted: &Value) -> bool {
    let backend_filters = live["backendRefs"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|b| b["filters"].as_array().is_some_and(|f| !f.is_empty()));
    covers(&owned_rule(live), wanted)
        && live.get("filters") == wanted.get("filters")
        && !backend_filters
}

/// The PathPrefix of an endpoint path.
pub fn match_prefix(app: &str, path: &str) -> String {
    match path_core(path) {
        "/" => format!("/{app}"),
        core => format!("/{app}{core}"),
    }
}

/// The rule of one endpoint path.
pub fn rule(ctx: &RouteContext, group: &ScopeGroup, path: &str) -> Value {
    let app = ctx.app.as_str();
    let mut filters = Vec::new();
    let filter = ctx.attachment.auth_provider != Some(AuthProvider::EnvoyGateway);
    if let (false, true, Some(svc)) = (group.is_public(), filter, &ctx.attachment.auth_service) {
        filters.push(json!({
            "type": "ExternalAuth",
            "externalAuth": {
                "protocol": "HTTP",
                "backendRef": svc.backend_ref(),
                "http": {
                    "path": format!("{AUTH_PATH_PREFIX}{}", scope_token(&group.scopes)),
                    "allowedResponseHeaders": AUTH_RESPONSE_HEADERS,
                },
            },
        }));
    }
    filters.push(json!({
        "type": "URLRewrite",
        "urlRewrite": { "path": { "type": "ReplacePrefixMatch", "replacePrefixMatch": path_core(path) } },
    }));
    json!({
        "matches": [{ "path": { "type": "PathPrefix", "value": match_prefix(app, path) } }],
        "filters": filters,
        "backendRefs": [{
            "group": "",
            "kind": "Service",
            "name": app,
            "port": ctx.port.number(),
            "weight": 1,
        }],
    })
}

/// The auth Service of a live managed HTTPRoute (the first ExternalAuth filter's backend).
pub fn auth_service_of(live: &Value) -> Option<ServiceRef> {
    rules_of(live)
        .iter()
        .flat_map(|r| r["filters"].as_array().into_iter().flatten())
        .find(|f| f["type"] == "ExternalAuth")
        .and_then(|f| ServiceRef::of_backend_ref(&f["externalAuth"]["backendRef"]))
}

/// Whether any rule of a live HTTPRoute has an ExternalAuth filter.
pub fn has_external_auth(live: &Value) -> bool {
    rules_of(live)
        .iter()
        .flat_map(|r| r["filters"].as_array().into_iter().flatten())
        .any(|f| f["type"] == "ExternalAuth")
}

fn rules_of(obj: &Value) -> &[Value] {
    obj["spec"]["rules"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The path a rule matches (its first match's path value): the key rules are matched by.
fn rule_key(rule: &Value) -> Option<&str> {
    rule["matches"][0]["path"]["value"].as_str()
}

/// The owned parts of a rule.
fn owned_rule(rule: &Value) -> Value {
    let mut m = Map::new();
    for key in RULE_KEYS {
        if let Some(v) = rule.get(key) {
            m.insert(key.into(), v.clone());
        }
    }
    Value::Object(m)
}

/// `live` holds everything `desired` has: objects key by key, arrays element by element (same
/// length), scalars equal. Fields only `live` has (server defaults) do not count.
pub fn covers(live: &Value, desired: &Value) -> bool {
    match (live, desired) {
        (Value::Object(l), Value::Object(d)) => d
            .iter()
            .all(|(k, dv)| l.get(k).is_some_and(|lv| covers(lv, dv))),
        (Value::Array(l), Value::Array(d)) => {
            l.len() == d.len() && l.iter().zip(d).all(|(lv, dv)| covers(lv, dv))
        }
        _ => live == desired,
    }
}

/// The endpoint paths an HTTPRoute serves: its rules' path prefixes without `/<app>`, sorted.
pub fn served_paths(route: &Value, app: &str) -> Vec<String> {
    let prefix = format!("/{app}");
    let paths: BTreeSet<String> = rules_of(route)
        .iter()
        .filter_map(rule_key)
        .map(|p| match p.strip_prefix(&prefix) {
            Some("") => "/".to_owned(),
            Some(rest) if rest.starts_with('/') => rest.to_owned(),
            _ => p.to_owned(),
        })
        .collect();
    paths.into_iter().collect()
}

/// The scopes a live HTTPRoute requires, from its ExternalAuth path.
fn live_scopes(live: &Value) -> Vec<String> {
    rules_of(live)
        .iter()
        .flat_map(|r| r["filters"].as_array().into_iter().flatten())
        .find(|f| f["type"] == "ExternalAuth")
        .and_then(|f| f["externalAuth"]["http"]["path"].as_str())
        .and_then(|p| p.strip_prefix(AUTH_PATH_PREFIX))
        .and_then(scopes_of_token)
        .unwrap_or_default()
}

/// The order of keys in a view: these first, in this order, then the rest alphabetically.
const VIEW_ORDER: [&str; 20] = [
    "parentRefs",
    "hostnames",
    "rules",
    "matches",
    "filters",
    "backendRefs",
    "type",
    "protocol",
    "backendRef",
    "http",
    "path",
    "value",
    "replacePrefixMatch",
    "allowedResponseHeaders",
    "group",
    "kind",
    "name",
    "namespace",
    "port",
    "weight",
];

/// `v` with the keys of every object in one canonical order ([`VIEW_ORDER`]): the API server
/// returns custom resources with their keys sorted, this tool writes them in another order, and
/// a rule must read the same in a diff whichever side it comes from.
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            let rank = |k: &str| {
                VIEW_ORDER
                    .iter()
                    .position(|o| *o == k)
                    .unwrap_or(VIEW_ORDER.len())
            };
            keys.sort_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| a.cmp(b)));
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&m[k])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// What the diff shows of an HTTPRoute: identity, owned labels, parents, hostnames and the
/// owned parts of each rule (the spec's keys in one canonical order, [`sorted`]).
pub fn focused_view(obj: &Value, namespace: &str, name: &str) -> Value {
    let mut meta = Map::new();
    meta.insert("name".into(), json!(name));
    meta.insert("namespace".into(), json!(namespace));
    let mut labels = Map::new();
    for key in [APP_LABEL, IDENTIFIER_LABEL] {
        if let Some(v) = obj["metadata"]["labels"].get(key) {
            labels.insert(key.into(), v.clone());
        }
    }
    if !labels.is_empty() {
        meta.insert("labels".into(), Value::Object(labels));
    }
    let mut spec = Map::new();
    for key in ["parentRefs", "hostnames"] {
        if let Some(v) = obj["spec"].get(key).filter(|v| !v.is_null()) {
            spec.insert(key.into(), v.clone());
        }
    }
    if obj["spec"].get("rules").is_some() {
        spec.insert(
            "rules".into(),
            Value::Array(rules_of(obj).iter().map(owned_rule).collect()),
        );
    }
    json!({
        "apiVersion": Kind::HttpRoute.api_version(),
        "kind": Kind::HttpRoute.to_string(),
        "metadata": meta,
        "spec": sorted(&Value::Object(spec)),
    })
}

/// One group's HTTPRoute as it should be.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DesiredRoute {
    pub app: String,
    /// Name used when it has to be created: `<app>-<identifier>`.
    pub name: String,
    pub identifier: String,
    pub scopes: Vec<String>,
    /// Endpoint paths, sorted.
    pub paths: Vec<String>,
    /// One rule per path, in the order of `paths`.
    pub rules: Vec<Value>,
    pub parent_refs: Value,
    pub hostnames: Vec<String>,
    pub forced: Forced,
}

impl DesiredRoute {
    pub fn new(ctx: &RouteContext, group: &ScopeGroup) -> Result<DesiredRoute, PlanError> {
        Ok(DesiredRoute {
            app: ctx.app.clone(),
            name: route_name(Kind::HttpRoute, &ctx.app, &group.identifier)?,
            identifier: group.identifier.clone(),
            scopes: group.scopes.clone(),
            paths: group.paths.clone(),
            rules: group.paths.iter().map(|p| rule(ctx, group, p)).collect(),
            parent_refs: ctx.attachment.parent_refs.clone().unwrap_or(json!([])),
            hostnames: ctx.attachment.hosts.clone(),
            forced: ctx.forced,
        })
    }

    /// Whether its rules check scopes themselves (the ExternalAuth filter): `false` for the
    /// public group and for the `envoy-gateway` provider.
    pub fn has_filter(&self) -> bool {
        has_external_auth(&json!({"spec": {"rules": self.rules}}))
    }

    /// The complete object to create.
    pub fn create_body(&self, namespace: &str) -> Value {
        self.create_body_named(&self.name, namespace)
    }

    /// [`DesiredRoute::create_body`] under another name.
    fn create_body_named(&self, name: &str, namespace: &str) -> Value {
        let mut spec = Map::new();
        spec.insert("parentRefs".into(), self.parent_refs.clone());
        if !self.hostnames.is_empty() {
            spec.insert("hostnames".into(), json!(self.hostnames));
        }
        spec.insert("rules".into(), json!(self.rules));
        json!({
            "apiVersion": Kind::HttpRoute.api_version(),
            "kind": Kind::HttpRoute.to_string(),
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": { APP_LABEL: self.app, IDENTIFIER_LABEL: self.identifier },
            },
            "spec": Value::Object(spec),
        })
    }
}

impl Style for Gateway {
    fn style(&self) -> RouteStyle {
        RouteStyle::Gateway
    }

    fn kind(&self) -> Kind {
        Kind::HttpRoute
    }

    fn recognizes(&self, _live: &Value) -> bool {
        true
    }

    fn check(&self, ctx: &RouteContext, groups: &[ScopeGroup]) -> Result<(), PlanError> {
        let reference = format!("routes of {}", ctx.app);
        if let Some(g) = groups.iter().find(|g| g.paths.len() > MAX_RULES) {
            return Err(PlanError::Unexpected {
                reference,
                message: format!(
                    "the scope group {} has {} paths, and an HTTPRoute holds at most {MAX_RULES} (one rule per path); publish fewer paths with these scopes, e.g. one prefix for several",
                    if g.is_public() {
                        "public".to_owned()
                    } else {
                        format!("[{}]", g.scopes.join(" "))
                    },
                    g.paths.len()
                ),
            });
        }
        if ctx.attachment.auth_service.is_none()
            && let Some(g) = groups.iter().find(|g| !g.is_public())
        {
            let live = match ctx.attachment.auth_provider {
                Some(AuthProvider::EnvoyGateway) => "managed SecurityPolicy or HTTPRoute",
                _ => "managed HTTPRoute",
            };
            return Err(PlanError::Unexpected {
                reference,
                message: format!(
                    "the paths with scopes ({}: {}) need an auth service, and no {live} has one to take; name it with --auth-service [NAMESPACE/]NAME:PORT",
                    g.scopes.join(" "),
                    g.paths.join(", ")
                ),
            });
        }
        Ok(())
    }

    fn updaters(
        &self,
        ctx: &RouteContext,
        groups: &[ScopeGroup],
        live: &[Value],
    ) -> Result<Vec<Updater>, PlanError> {
        let matched = match_live(&ctx.app, Kind::HttpRoute, groups, live);
        let mut out: Vec<Updater> = Vec::new();
        for (group, live_name) in groups.iter().zip(matched.groups) {
            let desired = DesiredRoute::new(ctx, group)?;
            out.push(Updater::HttpRoute(HttpRouteUpdater {
                name: live_name.unwrap_or_else(|| desired.name.clone()),
                desired,
            }));
        }
        for name in matched.extra {
            out.push(self.removal_in(ctx, &name));
        }
        Ok(out)
    }

    fn removal(&self, app: &str, name: &str) -> Updater {
        Updater::HttpRouteRemoval(HttpRouteRemoval {
            app: app.to_owned(),
            name: name.to_owned(),
            scopes: None,
        })
    }
}

impl Gateway {
    /// [`Style::removal`] of the live route `name`, with the scopes its SecurityPolicy checks
    /// when its rules have no ExternalAuth filter ([`RouteContext::guarded_scopes`]).
    pub fn removal_in(&self, ctx: &RouteContext, name: &str) -> Updater {
        Updater::HttpRouteRemoval(HttpRouteRemoval {
            app: ctx.app.clone(),
            name: name.to_owned(),
            scopes: ctx.guarded_scopes.get(name).cloned(),
        })
    }
}

/// Creates a group's HTTPRoute, or updates the owned parts of the live one.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpRouteUpdater {
    /// The live route's name when one matched, else `desired.name`.
    pub name: String,
    pub desired: DesiredRoute,
}

impl HttpRouteUpdater {
    fn reference(&self) -> String {
        format!("{}/{}", Kind::HttpRoute.kubectl_name(), self.name)
    }

    fn info(&self, paths_before: Vec<String>, foreign: Vec<String>) -> RouteInfo {
        RouteInfo {
            style: RouteStyle::Gateway,
            identifier: self.desired.identifier.clone(),
            scopes: self.desired.scopes.clone(),
            paths: self.desired.paths.clone(),
            paths_before,
            foreign,
        }
    }

    fn create(&self, namespace: &str) -> ObjectChange {
        // Under the updater's name (a saved plan's may differ from the desired one), without
        // copying the desired route to rename it, as the Ingress updater does.
        let d = &self.desired;
        let body = d.create_body_named(&self.name, namespace);
        let mut fields = label_fields(&d.app, &d.identifier);
        fields.push(FieldChange::new(
            "spec.parentRefs",
            None,
            Some(d.parent_refs.clone()),
        ));
        if !d.hostnames.is_empty() {
            fields.push(FieldChange::new(
                "spec.hostnames",
                None,
                Some(json!(d.hostnames)),
            ));
        }
        for r in &d.rules {
            fields.push(FieldChange::new(
                rule_field(rule_key(r).unwrap_or_default()),
                None,
                Some(r.clone()),
            ));
        }
        ObjectChange {
            kind: Kind::HttpRoute,
            namespace: namespace.to_owned(),
            name: self.name.clone(),
            live: None,
            fields,
            before: None,
            after: Some(Arc::new(focused_view(&body, namespace, &self.name)).into()),
            write: Some(Write::Create { body: body.into() }),
            route: Some(self.info(Vec::new(), Vec::new())),
        }
    }

    /// The rules, matched by path: changed fields, and the new `spec.rules` when any changed.
    fn plan_rules(&self, live: &Value, fields: &mut Vec<FieldChange>) -> Option<Vec<Value>> {
        let live_rules = rules_of(live);
        let find = |key: &str| live_rules.iter().find(|r| rule_key(r) == Some(key));
        let mut changed = live_rules.len() != self.desired.rules.len();
        let mut rules = Vec::with_capacity(self.desired.rules.len());
        for wanted in &self.desired.rules {
            let key = rule_key(wanted).unwrap_or_default();
            let current = find(key);
            let same = current.is_some_and(|c| same_rule(c, wanted));
            if !same {
                changed = true;
                fields.push(FieldChange::new(
                    rule_field(key),
                    current.map(owned_rule),
                    Some(wanted.clone()),
                ));
            }
            let mut rule = current.cloned().unwrap_or_else(|| json!({}));
            if !same || !rule.is_object() {
                if !rule.is_object() {
                    rule = json!({});
                }
                for k in RULE_KEYS {
                    rule[k] = wanted[k].clone();
                }
            }
            rules.push(rule);
        }
        let wanted_keys: BTreeSet<&str> = self.desired.rules.iter().filter_map(rule_key).collect();
        for r in live_rules {
            let key = rule_key(r);
            if !key.is_some_and(|k| wanted_keys.contains(k)) {
                changed = true;
                fields.push(FieldChange::new(
                    rule_field(key.unwrap_or("?")),
                    Some(owned_rule(r)),
                    None,
                ));
            }
        }
        changed.then_some(rules)
    }

    fn update(&self, namespace: &str, live: &Value) -> Result<ObjectChange, PlanError> {
        let d = &self.desired;
        check_managed(Kind::HttpRoute, live, &self.name, &d.app, &d.identifier)?;
        let mut fields = Vec::new();
        let mut spec = Map::new();
        let mut after = json!({
            "metadata": { "labels": live["metadata"]["labels"].clone() },
            "spec": live["spec"].clone(),
        });
        if d.forced.parent_refs {
            let current = live["spec"].get("parentRefs");
            if !current.is_some_and(|c| covers(c, &d.parent_refs)) {
                fields.push(FieldChange::new(
                    "spec.parentRefs",
                    current.cloned(),
                    Some(d.parent_refs.clone()),
                ));
                spec.insert("parentRefs".into(), d.parent_refs.clone());
                after["spec"]["parentRefs"] = d.parent_refs.clone();
            }
        }
        if d.forced.hosts {
            let current = live["spec"].get("hostnames").filter(|v| !v.is_null());
            let wanted = (!d.hostnames.is_empty()).then(|| json!(d.hostnames));
            if current != wanted.as_ref() {
                fields.push(FieldChange::new(
                    "spec.hostnames",
                    current.cloned(),
                    wanted.clone(),
                ));
                let v = wanted.unwrap_or(Value::Null);
                spec.insert("hostnames".into(), v.clone());
                after["spec"]["hostnames"] = v;
            }
        }
        if let Some(rules) = self.plan_rules(live, &mut fields) {
            spec.insert("rules".into(), json!(rules));
            after["spec"]["rules"] = json!(rules);
        }
        let write = if fields.is_empty() {
            None
        } else {
            Some(Write::Patch {
                base: Base::required(live, &self.reference())?,
                patch_type: PatchType::Merge,
                body: json!({ "spec": spec }).into(),
            })
        };
        Ok(ObjectChange {
            kind: Kind::HttpRoute,
            namespace: namespace.to_owned(),
            name: self.name.clone(),
            live: Base::of(live),
            fields,
            before: Some(Arc::new(focused_view(live, namespace, &self.name)).into()),
            after: Some(Arc::new(focused_view(&after, namespace, &self.name)).into()),
            write,
            route: Some(self.info(
                served_paths(live, &d.app),
                rules_of(live).iter().flat_map(foreign_filters).collect(),
            )),
        })
    }
}

fn rule_field(path: &str) -> String {
    format!("spec.rules[path={path}]")
}

impl HttpRouteUpdater {
    /// The change against `live` (`None`: the route does not exist).
    pub fn plan(&self, namespace: &str, live: Option<&Value>) -> Result<ObjectChange, PlanError> {
        match live {
            None => Ok(self.create(namespace)),
            Some(live) => self.update(namespace, live),
        }
    }
}

/// Deletes a managed HTTPRoute whose scope group is gone, or that an Ingress replaces.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpRouteRemoval {
    pub app: String,
    pub name: String,
    /// The scopes its SecurityPolicy checks (`envoy-gateway`): the route's own rules name none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
}

impl HttpRouteRemoval {
    /// Refuses a saved removal of an object that cannot be one of `app`'s routes.
    pub fn check_saved(&self, app: &str) -> Result<(), Refusal> {
        super::saved_owned(&self.app, app, &self.name)?;
        if let Some(scopes) = &self.scopes {
            let id = super::scope_identifier(scopes);
            super::saved_group(scopes, &id, &["/".to_owned()])?;
        }
        Ok(())
    }

    /// The scopes the live route serves its paths with: its ExternalAuth filter's, else (a
    /// route of the `envoy-gateway` provider) its policy's when they are the ones of its
    /// identifier.
    fn scopes_of(&self, live: &Value) -> Vec<String> {
        let own = normalize_scopes(&live_scopes(live));
        match &self.scopes {
            Some(s)
                if own.is_empty()
                    && label(live, IDENTIFIER_LABEL) == Some(&super::scope_identifier(s)) =>
            {
                normalize_scopes(s)
            }
            _ => own,
        }
    }
}

impl HttpRouteUpdater {
    /// Refuses a saved updater (a plan file's) that is not exactly what the gateway style
    /// generates for a scope group of `app`: every value checked as its flag or file is, then
    /// the desired route made again from them and compared; a new route (`creates`) only under
    /// the name the style gives it ([`super::saved_name`]).
    pub fn check_saved(&self, app: &str, creates: bool) -> Result<(), Refusal> {
        let d = &self.desired;
        super::saved_owned(&d.app, app, &self.name)?;
        let group = super::saved_group(&d.scopes, &d.identifier, &d.paths)?;
        let port = super::saved_port(&d.rules[0]["backendRefs"][0]["port"])?;
        for h in &d.hostnames {
            super::refs::parse_host(h)?;
        }
        check_saved_parent_refs(&d.parent_refs)?;
        let auth_service = auth_service_of(&json!({"spec": {"rules": d.rules}}));
        if let Some(svc) = &auth_service {
            super::refs::ServiceRef::parse(&svc.to_string())?;
        }
        // A scoped route without the filter is the `envoy-gateway` provider's: its auth is the
        // SecurityPolicy of its name, which the plan must hold too (`plan_file` checks).
        let provider = if group.is_public() || auth_service.is_some() {
            AuthProvider::Filter
        } else {
            AuthProvider::EnvoyGateway
        };
        let ctx = RouteContext {
            app: app.to_owned(),
            port: super::BackendPort::Number(port),
            attachment: super::Attachment {
                ingress_class: None,
                hosts: d.hostnames.clone(),
                tls: None,
                parent_refs: Some(d.parent_refs.clone()),
                auth_url: None,
                auth_service,
                auth_provider: Some(provider),
            },
            forced: d.forced,
            guarded_scopes: Default::default(),
        };
        if provider == AuthProvider::Filter {
            GATEWAY
                .check(&ctx, std::slice::from_ref(&group))
                .map_err(|e| e.to_string())?;
        } else if d.paths.len() > MAX_RULES {
            return Err(Refusal::TooManyPaths(d.paths.len()));
        }
        let expected = DesiredRoute::new(&ctx, &group).map_err(|e| e.to_string())?;
        if expected != *d {
            return Err(Refusal::NotAsItsStyleMakes {
                kind: Kind::HttpRoute,
                style: RouteStyle::Gateway,
            });
        }
        super::saved_name(Kind::HttpRoute, app, &d.identifier, &self.name, creates)
    }
}

/// Saved `parentRefs`: Gateways by valid names, nothing else.
fn check_saved_parent_refs(refs: &Value) -> Result<(), String> {
    let refs = refs.as_array().ok_or("its parentRefs is not a list")?;
    if refs.is_empty() || refs.len() > 32 {
        return Err("its parentRefs must name 1 to 32 Gateways".into());
    }
    for r in refs {
        let r = r
            .as_object()
            .ok_or("its parentRefs has an entry that is not an object")?;
        for (k, v) in r {
            let text = v.as_str();
            let ok = match k.as_str() {
                "group" => text == Some("gateway.networking.k8s.io"),
                "kind" => text == Some("Gateway"),
                "namespace" => text.is_some_and(appupdate_model::names::is_dns1123_label),
                "name" | "sectionName" => {
                    text.is_some_and(appupdate_model::names::is_dns1123_subdomain)
                }
                "port" => v.as_u64().is_some_and(|p| (1..=65535).contains(&p)),
                _ => false,
            };
            if !ok {
                return Err(format!("its parentRefs has an invalid {k:?}"));
            }
        }
        if !r.contains_key("name") {
            return Err("its parentRefs has an entry without a name".into());
        }
    }
    Ok(())
}

impl HttpRouteRemoval {
    /// The deletion of `live` (nothing to do when it is gone).
    pub fn plan(&self, namespace: &str, live: Option<&Value>) -> Result<ObjectChange, PlanError> {
        deletion(
            Kind::HttpRoute,
            namespace,
            &self.app,
            &self.name,
            live,
            |live| {
                let info = RouteInfo {
                    style: RouteStyle::Gateway,
                    identifier: label(live, IDENTIFIER_LABEL).unwrap_or_default().to_owned(),
                    scopes: self.scopes_of(live),
                    paths: Vec::new(),
                    paths_before: served_paths(live, &self.app),
                    foreign: Vec::new(),
                };
                (focused_view(live, namespace, &self.name), Some(info))
            },
        )
    }
}
