//! Routes as Ingresses (`networking.k8s.io/v1`): what the two nginx styles share. A style of
//! this kind is a [`Flavor`] — its annotations and the shape of one HTTP path — in a module of
//! its own ([`super::nginx_snippet`], [`super::nginx_auth`]); everything else is here.
//!
//! # Shape
//!
//! One Ingress per scope group, named `<app>-<id>`, labelled `app` and `identifier`, with the
//! flavour's annotations and one HTTP path per endpoint (the flavour's path and `pathType`,
//! sorted by endpoint path), all pointing at the Service `<app>` on the backend port (by
//! number). One rule per host (a rule without host when there is none). A new Ingress takes
//! `ingressClassName`, hosts and `spec.tls` from the flags, else from the managed sibling with
//! the smallest name (see [`super::Attachment`]).
//!
//! # Updates
//!
//! A matched Ingress is updated in the parts the tool owns: the `app`/`identifier` labels, the
//! flavour's annotations (set, or removed when the group does not need one), and `http.paths` of
//! every rule; with `--ingress-class`, `--host` or `--tls-secret` also `ingressClassName`, the
//! rules' hosts and `spec.tls`. Everything else (other labels and annotations, fields this tool
//! does not know, also inside rules) is kept — but for ingress-nginx's own annotations: the
//! flavour's are an allowlist, and every other `nginx.ingress.kubernetes.io/*` annotation is
//! removed in the same write (a `null` in the merge patch), shown in both views and named in
//! the change's `RouteInfo::foreign` (an adopted route's `auth-snippet` must not stay unseen).
//! An Ingress of the other flavour is rewritten in place: that flavour's annotations are
//! removed in the same write (they are its own, not foreign). Paths equal up to order
//! count as unchanged. The write is a JSON merge patch with only what changes, and, if any rule
//! changes, the whole `spec.rules` array rebuilt from the live object.
//!
//! An Ingress whose labels do not say it is this group's (a create that met an existing
//! unmanaged Ingress of the same name) is refused, never updated.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::nginx_auth::NginxAuth;
use super::nginx_snippet::NginxSnippet;
use super::{
    APP_LABEL, Forced, IDENTIFIER_LABEL, RouteContext, ScopeGroup, Style, check_managed, deletion,
    label, label_fields, match_live, normalize_scopes, route_name,
};
use crate::updaters::{Refusal, Updater};
use appupdate_model::compact_json::{copy, copy_all};
use appupdate_model::plan::{
    Base, FieldChange, FieldValue, Kind, MakeView, ObjectChange, PatchType, PlanError, RouteInfo,
    RouteStyle, View, Write,
};
use appupdate_model::view_parts::Part;

/// What makes an Ingress style: its annotations and its HTTP paths.
pub trait Flavor: Send + Sync + fmt::Debug {
    fn style(&self) -> RouteStyle;
    /// Every annotation the flavour writes; one absent from [`Flavor::annotations`] for a
    /// group is removed.
    fn owned_annotations(&self) -> &'static [&'static str];
    /// Whether a live Ingress is in this flavour (by its annotations).
    fn recognizes(&self, live: &Value) -> bool;
    /// Refuses what the flavour cannot publish with `ctx`.
    fn check(&self, ctx: &RouteContext, groups: &[ScopeGroup]) -> Result<(), PlanError>;
    /// The annotations of a group's Ingress.
    fn annotations(&self, ctx: &RouteContext, group: &ScopeGroup) -> BTreeMap<String, String>;
    /// The `path` and `pathType` of one endpoint path's `http.paths` entry
    /// ([`http_path_entry`]).
    fn http_path(&self, app: &str, path: &str) -> (String, &'static str);
    /// The endpoint path an `http.paths[].path` of this flavour serves (the inverse of
    /// [`Flavor::http_path`]); `None` when it is not one.
    fn endpoint_of(&self, app: &str, path: &str) -> Option<String>;
    /// The scopes a live Ingress of this flavour requires.
    fn live_scopes(&self, live: &Value) -> Vec<String>;
}

/// The Ingress flavours, for recognising live Ingresses. A new flavour is one line here.
pub static FLAVORS: [&dyn Flavor; 2] = [&NginxSnippet, &NginxAuth];

/// The flavour of an Ingress style (`None` for a style of another kind).
pub fn flavor(style: RouteStyle) -> Option<&'static dyn Flavor> {
    FLAVORS.iter().copied().find(|f| f.style() == style)
}

/// The flavour a live Ingress is in, if any.
pub fn flavor_of(live: &Value) -> Option<&'static dyn Flavor> {
    FLAVORS.iter().copied().find(|f| f.recognizes(live))
}

/// A route style made of Ingresses of one flavour.
#[derive(Debug)]
pub struct IngressStyle(pub &'static dyn Flavor);

pub static NGINX_SNIPPET: IngressStyle = IngressStyle(&NginxSnippet);
pub static NGINX_AUTH: IngressStyle = IngressStyle(&NginxAuth);

impl Style for IngressStyle {
    fn style(&self) -> RouteStyle {
        self.0.style()
    }

    fn kind(&self) -> Kind {
        Kind::Ingress
    }

    fn recognizes(&self, live: &Value) -> bool {
        self.0.recognizes(live)
    }

    fn check(&self, ctx: &RouteContext, groups: &[ScopeGroup]) -> Result<(), PlanError> {
        self.0.check(ctx, groups)
    }

    fn updaters(
        &self,
        ctx: &RouteContext,
        groups: &[ScopeGroup],
        live: &[Value],
    ) -> Result<Vec<Updater>, PlanError> {
        let matched = match_live(&ctx.app, Kind::Ingress, groups, live);
        let mut out: Vec<Updater> = Vec::new();
        let backend = backend(ctx);
        for (group, live_name) in groups.iter().zip(matched.groups) {
            let desired = desired_ingress_to(self.0, ctx, group, &backend)?;
            out.push(Updater::Ingress(IngressUpdater {
                style: self.0.style(),
                name: live_name.unwrap_or_else(|| desired.name.clone()),
                desired,
            }));
        }
        for name in matched.extra {
            out.push(self.removal(&ctx.app, &name));
        }
        Ok(out)
    }

    fn removal(&self, app: &str, name: &str) -> Updater {
        Updater::IngressRemoval(IngressRemoval::new(app, name))
    }
}

/// One group's Ingress as it should be.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DesiredIngress {
    pub app: String,
    /// Name used when it has to be created: `<app>-<identifier>`.
    pub name: String,
    pub identifier: String,
    /// Sorted, de-duplicated.
    pub scopes: Vec<String>,
    /// Endpoint paths as written in the file (without `/<app>`), sorted.
    pub paths: Vec<String>,
    /// Where every path goes: `{"service": {"name", "port"}}`. The `http.paths` entries are
    /// built from `paths` when they are compared or written ([`DesiredIngress::http_paths`]),
    /// not kept: for a large application they were a fifth of the memory a plan takes. One
    /// value shared by every group.
    pub backend: Arc<Value>,
    /// The flavour's annotations for this group.
    pub annotations: BTreeMap<String, String>,
    pub ingress_class: Option<String>,
    /// Distinct hosts; empty: one rule without host.
    pub hosts: Vec<String>,
    pub tls: Option<Value>,
    /// Which of class, hosts and TLS every Ingress gets (not only new ones).
    pub forced: Forced,
}

/// The desired Ingress of `group` in `flavor`.
pub fn desired_ingress(
    flavor: &dyn Flavor,
    ctx: &RouteContext,
    group: &ScopeGroup,
) -> Result<DesiredIngress, PlanError> {
    desired_ingress_to(flavor, ctx, group, &backend(ctx))
}

/// Where every path of the application goes: its Service's port.
fn backend(ctx: &RouteContext) -> Arc<Value> {
    let app = ctx.app.as_str();
    Arc::new(json!({ "service": { "name": app, "port": ctx.port.to_json() } }))
}

/// [`desired_ingress`] with its paths going to `backend` ([`backend`], shared).
fn desired_ingress_to(
    flavor: &dyn Flavor,
    ctx: &RouteContext,
    group: &ScopeGroup,
    backend: &Arc<Value>,
) -> Result<DesiredIngress, PlanError> {
    let app = ctx.app.as_str();
    Ok(DesiredIngress {
        app: app.to_owned(),
        name: route_name(Kind::Ingress, app, &group.identifier)?,
        identifier: group.identifier.clone(),
        scopes: group.scopes.clone(),
        paths: group.paths.clone(),
        backend: Arc::clone(backend),
        annotations: flavor.annotations(ctx, group),
        ingress_class: ctx.attachment.ingress_class.clone(),
        hosts: ctx.attachment.hosts.clone(),
        tls: ctx.attachment.tls.clone(),
        forced: ctx.forced,
    })
}

impl DesiredIngress {
    /// The `http.paths` entries `flavor` writes, in the order of `paths`.
    pub fn http_paths(&self, flavor: &dyn Flavor) -> Vec<Value> {
        self.entries(self.wanted_paths(flavor))
    }

    /// The `http.paths` entries of `wanted` ([`DesiredIngress::wanted_paths`]).
    fn entries(&self, wanted: Vec<(String, &'static str)>) -> Vec<Value> {
        wanted
            .into_iter()
            .map(|(path, path_type)| http_path_entry(path, path_type, &self.backend))
            .collect()
    }

    /// The `path` and `pathType` of each of [`DesiredIngress::http_paths`]: enough to compare
    /// live entries with them without building them.
    fn wanted_paths(&self, flavor: &dyn Flavor) -> Vec<(String, &'static str)> {
        self.paths
            .iter()
            .map(|p| flavor.http_path(&self.app, p))
            .collect()
    }

    fn labels(&self) -> Value {
        json!({ APP_LABEL: self.app, IDENTIFIER_LABEL: self.identifier })
    }

    /// The rules of a new Ingress in `flavor`: one per host with every path.
    fn rules(&self, flavor: &dyn Flavor) -> Vec<Value> {
        let mut http = Map::with_capacity(1);
        http.insert("paths".into(), Value::Array(self.http_paths(flavor)));
        let http = Value::Object(http);
        let rule = |host: Option<&String>| {
            let mut rule = Map::with_capacity(2);
            if let Some(h) = host {
                rule.insert("host".into(), Value::String(h.clone()));
            }
            rule.insert("http".into(), copy(&http));
            Value::Object(rule)
        };
        if self.hosts.is_empty() {
            vec![rule(None)]
        } else {
            self.hosts.iter().map(|h| rule(Some(h))).collect()
        }
    }

    /// The complete object to create in `flavor`, under `name` (a saved plan's may differ from
    /// the desired one).
    fn create_body(&self, flavor: &dyn Flavor, name: &str, namespace: &str) -> Value {
        let mut spec = Map::new();
        if let Some(class) = &self.ingress_class {
            spec.insert("ingressClassName".into(), json!(class));
        }
        spec.insert("rules".into(), Value::Array(self.rules(flavor)));
        if let Some(tls) = &self.tls {
            spec.insert("tls".into(), tls.clone());
        }
        json!({
            "apiVersion": Kind::Ingress.api_version(),
            "kind": Kind::Ingress.to_string(),
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": self.labels(),
                "annotations": self.annotations,
            },
            "spec": Value::Object(spec),
        })
    }
}

/// One `http.paths` entry: `{path, pathType, backend}`, built as a map (the `json!` macro would
/// run `backend` through serde, the most expensive step of planning a large application).
pub(crate) fn http_path_entry(path: String, path_type: &str, backend: &Value) -> Value {
    let mut m = Map::with_capacity(3);
    m.insert("path".into(), Value::String(path));
    m.insert("pathType".into(), Value::String(path_type.to_owned()));
    m.insert("backend".into(), copy(backend));
    Value::Object(m)
}

/// Readable path of a rule's paths: `spec.rules[host=<h>].http.paths`, or by index without host.
fn rule_field(rule: &Value, index: usize) -> String {
    match rule["host"].as_str() {
        Some(h) if !h.is_empty() => format!("spec.rules[host={h}].http.paths"),
        _ => format!("spec.rules[{index}].http.paths"),
    }
}

/// `rule` (an object) with `http.paths` set to `paths`, its other fields copied in their order;
/// the live paths it replaces are not copied.
fn with_http_paths(rule: &Value, paths: Value) -> Value {
    let http = with_entry(rule["http"].as_object(), "paths", paths);
    with_entry(rule.as_object(), "http", http)
}

/// `map`'s entries, copied in their order, with `key` set to `value`: where it was, or last.
/// The value it replaces is not copied.
fn with_entry(map: Option<&Map<String, Value>>, key: &str, value: Value) -> Value {
    let mut out = Map::with_capacity(map.map_or(1, |m| m.len() + 1));
    let mut value = Some(value);
    for (k, v) in map.into_iter().flatten() {
        let v = match value.take_if(|_| k == key) {
            Some(new) => new,
            None => v.clone(),
        };
        out.insert(k.clone(), v);
    }
    if let Some(v) = value {
        out.insert(key.into(), v);
    }
    Value::Object(out)
}

fn annotation_field(key: &str) -> String {
    format!("metadata.annotations[{key}]")
}

/// `a == b`, decided without hashing a key when every object on the way lists its keys in the
/// same order — an entry this tool wrote, read back (the server keeps the order of its own
/// types' fields). serde_json's map equality looks each key up in the other map.
pub(crate) fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && (x
                    .iter()
                    .zip(y)
                    .all(|((kx, vx), (ky, vy))| kx == ky && same_value(vx, vy))
                    || x == y)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_value(p, q))
        }
        _ => a == b,
    }
}

/// `entry == http_path_entry(path, path_type, backend)`, decided without building the entry:
/// an object of exactly those three keys (a map's keys are distinct), each with its value.
pub(crate) fn is_http_path_entry(
    entry: &Value,
    path: &str,
    path_type: &str,
    backend: &Value,
) -> bool {
    entry.as_object().is_some_and(|m| {
        m.len() == 3
            && m.iter().all(|(k, v)| match k.as_str() {
                "path" => v.as_str() == Some(path),
                "pathType" => v.as_str() == Some(path_type),
                "backend" => same_value(v, backend),
                _ => false,
            })
    })
}

/// The same entries as `desired`, in any order and as many times, `same` deciding whether a
/// live entry is a desired one.
pub(crate) fn same_entries_by<D>(
    live: &[Value],
    desired: &[D],
    same: impl Fn(&Value, &D) -> bool,
) -> bool {
    if live.len() != desired.len() {
        return false;
    }
    // The usual case: a route this tool wrote lists its paths in the order it wrote them.
    if live.iter().zip(desired).all(|(l, d)| same(l, d)) {
        return true;
    }
    let mut used = vec![false; live.len()];
    desired.iter().all(|d| {
        match live
            .iter()
            .enumerate()
            .position(|(i, l)| !used[i] && same(l, d))
        {
            Some(i) => {
                used[i] = true;
                true
            }
            None => false,
        }
    })
}

/// The prefix of ingress-nginx's annotations: every one of them that the route's style does
/// not write is removed when the tool updates a route ([`foreign_annotations`]).
pub const NGINX_PREFIX: &str = "nginx.ingress.kubernetes.io/";

/// The `nginx.ingress.kubernetes.io/*` annotations of `obj` that are not in `allowed`, sorted:
/// what an update removes, the allowlist being the annotations the style writes (and, for a
/// route rewritten from the other flavour, that flavour's).
fn foreign_annotations<'a>(obj: &'a Value, allowed: &BTreeSet<&str>) -> Vec<&'a str> {
    let mut keys: Vec<&str> = obj["metadata"]["annotations"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.keys())
        .map(String::as_str)
        .filter(|k| k.starts_with(NGINX_PREFIX) && !allowed.contains(k))
        .collect();
    keys.sort_unstable();
    keys
}

/// The annotations shown for an Ingress: those of its own flavour and of `also`, and every
/// other `nginx.ingress.kubernetes.io/*` one it has (an update removes those).
fn shown_annotations(obj: &Value, also: Option<&dyn Flavor>) -> Vec<Cow<'static, str>> {
    let mut keys: BTreeSet<&'static str> = BTreeSet::new();
    for f in flavor_of(obj).into_iter().chain(also) {
        keys.extend(f.owned_annotations().iter().copied());
    }
    let foreign: Vec<Cow<'static, str>> = foreign_annotations(obj, &keys)
        .into_iter()
        .map(|k| Cow::Owned(k.to_owned()))
        .collect();
    let mut shown: Vec<Cow<'static, str>> = keys.into_iter().map(Cow::Borrowed).collect();
    shown.extend(foreign);
    shown.sort();
    shown
}

/// `keys` as the views take them.
fn key_strs<'a>(keys: &'a [Cow<'static, str>]) -> Vec<&'a str> {
    keys.iter().map(AsRef::as_ref).collect()
}

/// The part of an Ingress the diff shows: identity, owned labels, the annotations `keys`
/// present, class, rules (host and paths only) and TLS. Server-managed fields and foreign
/// labels are left out.
pub fn focused_view(obj: &Value, namespace: &str, name: &str, keys: &[&str]) -> Value {
    patched_view(obj, None, namespace, name, keys)
}

/// [`focused_view`] of `obj` with the JSON merge `patch` of an update applied (its `null`s
/// remove), read through without applying it: only what the view shows is copied.
fn patched_view(
    obj: &Value,
    patch: Option<&Map<String, Value>>,
    namespace: &str,
    name: &str,
    keys: &[&str],
) -> Value {
    patched_parts(obj, patch, namespace, name, keys).to_value()
}

/// [`patched_view`] as the parts of `obj` and `patch` it is made of (nothing copied).
fn patched_parts<'a>(
    obj: &'a Value,
    patch: Option<&'a Map<String, Value>>,
    namespace: &'a str,
    name: &'a str,
    keys: &[&'a str],
) -> Part<'a> {
    // `Some(v)`: the patch sets the field at `path` (`None` inside: removes it).
    let patched = |path: &[&str]| -> Option<Option<&'a Value>> {
        let (first, rest) = path.split_first()?;
        let mut v = patch?.get(*first)?;
        for key in rest {
            v = v.get(*key)?;
        }
        Some(Some(v).filter(|v| !v.is_null()))
    };
    let meta = &obj["metadata"];
    let mut m = Vec::with_capacity(4);
    m.push(("name", Part::Str(name)));
    m.push(("namespace", Part::Str(namespace)));
    let labels: Vec<_> = [APP_LABEL, IDENTIFIER_LABEL]
        .into_iter()
        .filter_map(|key| Some((key, Part::Value(meta["labels"].get(key)?))))
        .collect();
    if !labels.is_empty() {
        m.push(("labels", Part::Map(labels)));
    }
    let annotations: Vec<_> = keys
        .iter()
        .filter_map(|key| {
            let value = patched(&["metadata", "annotations", key])
                .unwrap_or_else(|| meta["annotations"].get(*key));
            Some((*key, Part::Value(value?)))
        })
        .collect();
    if !annotations.is_empty() {
        m.push(("annotations", Part::Map(annotations)));
    }
    let spec = &obj["spec"];
    let field = |key: &str| {
        patched(&["spec", key]).unwrap_or_else(|| spec.get(key).filter(|v| !v.is_null()))
    };
    let class = field("ingressClassName");
    let rules = patched(&["spec", "rules"]).unwrap_or_else(|| spec.get("rules"));
    let rules = rules.and_then(Value::as_array);
    let tls = field("tls");
    let mut s = Vec::with_capacity(3);
    if let Some(class) = class {
        s.push(("ingressClassName", Part::Value(class)));
    }
    if let Some(rules) = rules {
        let rules = rules
            .iter()
            .map(|r| {
                let mut rule = Vec::with_capacity(2);
                if let Some(h) = r.get("host").filter(|v| !v.is_null()) {
                    rule.push(("host", Part::Value(h)));
                }
                if let Some(p) = r["http"].get("paths") {
                    rule.push(("http", Part::Map(vec![("paths", Part::Value(p))])));
                }
                Part::Map(rule)
            })
            .collect();
        s.push(("rules", Part::Seq(rules)));
    }
    if let Some(tls) = tls {
        s.push(("tls", Part::Value(tls)));
    }
    Part::Map(vec![
        ("apiVersion", Part::Str(Kind::Ingress.api_version())),
        ("kind", Part::Str(Kind::Ingress.name())),
        ("metadata", Part::Map(m)),
        ("spec", Part::Map(s)),
    ])
}

/// What the views of a live Ingress read of it ([`patched_parts`]): its labels, annotations and
/// spec, moved out of it; the rest (status, what the server keeps in metadata) is freed with
/// it. A change holds this instead of a copy of its before-view.
fn view_source(mut live: Value) -> Value {
    let mut meta = Map::with_capacity(2);
    if let Some(m) = live.get_mut("metadata") {
        for key in ["labels", "annotations"] {
            if let Some(v) = m.get_mut(key) {
                meta.insert(key.into(), v.take());
            }
        }
    }
    let mut source = Map::with_capacity(2);
    source.insert("metadata".into(), Value::Object(meta));
    if let Some(spec) = live.get_mut("spec") {
        source.insert("spec".into(), spec.take());
    }
    Value::Object(source)
}

/// The focused view of an Ingress read from `from` (a create's body, or the live object), with
/// a merge patch applied, made when read: a before-view (no patch), or the after-view of a
/// create or an update. Focusing a focused view again changes nothing, so an update's
/// after-view read through the live object is the one read through its before-view.
struct Viewed {
    from: Arc<Value>,
    /// An update's before-view, which the after-view is the patched view of (read once by a
    /// caller that needs both, [`MakeView::make_from`]).
    before: Option<View>,
    patch: Option<Arc<Value>>,
    namespace: String,
    name: String,
    keys: Vec<Cow<'static, str>>,
}

impl MakeView for Viewed {
    fn make(&self) -> Value {
        self.make_from(&self.from)
    }

    fn base(&self) -> Option<&View> {
        self.before.as_ref()
    }

    fn make_from(&self, object: &Value) -> Value {
        let patch = self.patch.as_deref().and_then(Value::as_object);
        patched_view(
            object,
            patch,
            &self.namespace,
            &self.name,
            &key_strs(&self.keys),
        )
    }

    fn parts(&self) -> Option<Part<'_>> {
        let patch = self.patch.as_deref().and_then(Value::as_object);
        Some(patched_parts(
            &self.from,
            patch,
            &self.namespace,
            &self.name,
            &key_strs(&self.keys),
        ))
    }
}

/// The endpoint paths an Ingress (live object or focused view) serves, in the flavour it is
/// in: every rule's HTTP paths read back to endpoint paths, de-duplicated and sorted. A path
/// no flavour wrote is shown as it is.
pub fn served_paths(ingress: &Value, app: &str) -> Vec<String> {
    let flavor = flavor_of(ingress);
    // Sorted once, not kept sorted in a tree: a large application asks this of every route.
    let mut paths: Vec<String> = ingress["spec"]["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["http"]["paths"].as_array().into_iter().flatten())
        .filter_map(|p| p["path"].as_str())
        .map(|p| {
            flavor
                .and_then(|f| f.endpoint_of(app, p))
                .or_else(|| FLAVORS.iter().find_map(|f| f.endpoint_of(app, p)))
                .unwrap_or_else(|| p.to_owned())
        })
        .collect();
    paths.sort_unstable();
    paths.dedup();
    paths
}

/// A paths field of an update whose values are the views' (no copy of them): the field at
/// `field` changes the paths of rule `rule`, which the after-view holds at its place, and the
/// before-view too when `before_in_view`.
struct PathsField {
    field: usize,
    rule: usize,
    before_in_view: bool,
}

/// Creates a group's Ingress, or updates the owned parts of the live one.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IngressUpdater {
    /// The style, an Ingress flavour ([`flavor`]).
    pub style: RouteStyle,
    /// The live Ingress's name when one matched, else `desired.name`.
    pub name: String,
    pub desired: DesiredIngress,
}

impl IngressUpdater {
    fn reference(&self) -> String {
        format!("{}/{}", Kind::Ingress.kubectl_name(), self.name)
    }

    /// The flavour of the style; a style of another kind (only from a hand-edited saved plan)
    /// is refused.
    fn flavor(&self) -> Result<&'static dyn Flavor, PlanError> {
        flavor(self.style).ok_or_else(|| PlanError::Unexpected {
            reference: self.reference(),
            message: format!("the route style {} does not make Ingresses", self.style),
        })
    }

    fn info(&self, paths_before: Vec<String>, foreign: Vec<String>) -> RouteInfo {
        RouteInfo {
            style: self.style,
            identifier: self.desired.identifier.clone(),
            scopes: self.desired.scopes.clone(),
            paths: self.desired.paths.clone(),
            paths_before,
            foreign,
        }
    }

    fn create(&self, namespace: &str, flavor: &'static dyn Flavor) -> ObjectChange {
        // Under the updater's name (a saved plan's may differ from the desired one), without
        // copying the desired Ingress to rename it.
        let d = &self.desired;
        let body = d.create_body(flavor, &self.name, namespace);
        let mut fields = label_fields(&d.app, &d.identifier);
        for (key, value) in &d.annotations {
            fields.push(FieldChange::new(
                annotation_field(key),
                None,
                Some(json!(value)),
            ));
        }
        let keys = shown_annotations(&body, Some(flavor));
        let body = Arc::new(body);
        let shared = View::from(Arc::clone(&body));
        // Each rule's paths: the body's (held once).
        for (i, rule) in body["spec"]["rules"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let mut field = FieldChange::new(rule_field(rule, i), None, None);
            let pointer = format!("/spec/rules/{i}/http/paths");
            field.after = FieldValue::in_view(&shared, &body, &pointer);
            fields.push(field);
        }
        let after = View::made(Viewed {
            from: Arc::clone(&body),
            before: None,
            patch: None,
            namespace: namespace.to_owned(),
            name: self.name.clone(),
            keys,
        });
        ObjectChange {
            kind: Kind::Ingress,
            namespace: namespace.to_owned(),
            name: self.name.clone(),
            live: None,
            fields,
            before: None,
            after: Some(after),
            write: Some(Write::Create { body }),
            route: Some(self.info(Vec::new(), Vec::new())),
        }
    }

    /// The owned annotations: set the flavour's, remove those it does not want, those of the
    /// flavour the live Ingress is in now, and every other `nginx.ingress.kubernetes.io/*` one
    /// (an allowlist: what the style writes, not a list of dangerous keys). Returns the fields
    /// of those others: what the route carried that no style of it writes.
    fn plan_annotations(
        &self,
        flavor: &dyn Flavor,
        live: &Value,
        fields: &mut Vec<FieldChange>,
        patch: &mut Map<String, Value>,
    ) -> Vec<String> {
        let mut keys: BTreeSet<&str> = flavor.owned_annotations().iter().copied().collect();
        if let Some(from) = flavor_of(live) {
            keys.extend(from.owned_annotations().iter().copied());
        }
        let foreign = foreign_annotations(live, &keys);
        keys.extend(foreign.iter().copied());
        let mut changed = Map::new();
        for key in keys {
            let wanted = self.desired.annotations.get(key).map(|v| json!(v));
            let current = live["metadata"]["annotations"].get(key).cloned();
            if current == wanted {
                continue;
            }
            fields.push(FieldChange::new(
                annotation_field(key),
                current,
                wanted.clone(),
            ));
            changed.insert(key.to_owned(), wanted.unwrap_or(Value::Null));
        }
        if !changed.is_empty() {
            let mut meta = Map::with_capacity(1);
            meta.insert("annotations".into(), Value::Object(changed));
            patch.insert("metadata".into(), Value::Object(meta));
        }
        foreign.into_iter().map(annotation_field).collect()
    }

    /// The rules: with `--host`, one per host (a live rule of the same host keeps its other
    /// fields); each rule's `http.paths` set to the group's, `http_paths` (moved into the last
    /// rule that needs them). `None` when the live rules are already so (found without copying
    /// them). The paths fields it adds are left for the views to hold (`in_views`).
    fn plan_rules(
        &self,
        flavor: &dyn Flavor,
        live: &Value,
        fields: &mut Vec<FieldChange>,
        in_views: &mut Vec<PathsField>,
    ) -> Option<Vec<Value>> {
        let d = &self.desired;
        let wanted = d.wanted_paths(flavor);
        let live_rules = live["spec"]["rules"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        let paths_ok = |rule: &Value| {
            !rule.is_object()
                || rule["http"]
                    .get("paths")
                    .and_then(Value::as_array)
                    .is_some_and(|p| {
                        same_entries_by(p, &wanted, |l, (path, path_type)| {
                            is_http_path_entry(l, path, path_type, &d.backend)
                        })
                    })
        };
        let mut base: Option<Vec<Value>> = None;
        if d.forced.hosts {
            let live_hosts: Vec<Option<&str>> =
                live_rules.iter().map(|r| r["host"].as_str()).collect();
            let wanted: Vec<Option<&str>> = if d.hosts.is_empty() {
                vec![None]
            } else {
                d.hosts.iter().map(|h| Some(h.as_str())).collect()
            };
            if live_hosts != wanted {
                let hosts = |v: &[Option<&str>]| {
                    json!(v.iter().map(|h| h.unwrap_or("*")).collect::<Vec<_>>())
                };
                fields.push(FieldChange::new(
                    "spec.rules[].host",
                    Some(hosts(&live_hosts)),
                    Some(hosts(&wanted)),
                ));
                base = Some(
                    wanted
                        .iter()
                        .map(|h| {
                            let kept = live_rules
                                .iter()
                                .find(|r| r["host"].as_str() == *h)
                                .cloned();
                            let mut rule = kept.unwrap_or_else(|| json!({}));
                            match h {
                                Some(h) => rule["host"] = json!(h),
                                None => {
                                    if let Some(m) = rule.as_object_mut() {
                                        m.remove("host");
                                    }
                                }
                            }
                            rule
                        })
                        .collect(),
                );
            }
        }
        let no_rule;
        let rules = match &base {
            Some(base) => base.as_slice(),
            None if live_rules.is_empty() => {
                no_rule = [json!({})];
                &no_rule[..]
            }
            None if live_rules.iter().all(paths_ok) => return None,
            None => live_rules,
        };
        // Without a change of hosts, rule `i` is the live rule `i`, which the before-view
        // holds at the same place.
        let before_in_view = base.is_none();
        let to_set: Vec<bool> = rules.iter().map(|r| !paths_ok(r)).collect();
        let last = to_set.iter().rposition(|&set| set);
        // Built when a rule needs them (the desired entries, moved into the last).
        let mut http_paths = last.map(|_| d.entries(wanted));
        let rules: Vec<Value> = rules
            .iter()
            .enumerate()
            .map(|(i, rule)| {
                if !to_set[i] {
                    return rule.clone();
                }
                let paths = match http_paths.take_if(|_| Some(i) == last) {
                    Some(paths) => paths,
                    None => http_paths.as_deref().map(copy_all).unwrap_or_default(),
                };
                let before = match before_in_view {
                    true => None,
                    false => rule["http"].get("paths").map(copy),
                };
                in_views.push(PathsField {
                    field: fields.len(),
                    rule: i,
                    before_in_view,
                });
                fields.push(FieldChange::new(rule_field(rule, i), before, None));
                with_http_paths(rule, Value::Array(paths))
            })
            .collect();
        Some(rules)
    }

    /// The update of the live Ingress, lent or given up: a live Ingress given up is held by the
    /// change, which reads its views from it ([`view_source`]) instead of copying the
    /// before-view.
    fn update(
        &self,
        namespace: &str,
        given: Cow<'_, Value>,
        flavor: &'static dyn Flavor,
    ) -> Result<ObjectChange, PlanError> {
        let live: &Value = &given;
        let d = &self.desired;
        check_managed(Kind::Ingress, live, &self.name, &d.app, &d.identifier)?;
        let mut fields = Vec::new();
        let keys = shown_annotations(live, Some(flavor));
        let mut patch = Map::new();

        let foreign = self.plan_annotations(flavor, live, &mut fields, &mut patch);

        let mut spec = Map::new();
        if d.forced.ingress_class {
            let wanted = d.ingress_class.as_ref().map(|c| json!(c));
            let current = live["spec"].get("ingressClassName").cloned();
            if current != wanted {
                fields.push(FieldChange::new(
                    "spec.ingressClassName",
                    current,
                    wanted.clone(),
                ));
                spec.insert("ingressClassName".into(), wanted.unwrap_or(Value::Null));
            }
        }
        let mut in_views = Vec::new();
        if let Some(rules) = self.plan_rules(flavor, live, &mut fields, &mut in_views) {
            spec.insert("rules".into(), Value::Array(rules));
        }
        if d.forced.tls {
            let current = live["spec"].get("tls").cloned();
            if current != d.tls {
                fields.push(FieldChange::new("spec.tls", current, d.tls.clone()));
                spec.insert("tls".into(), d.tls.clone().unwrap_or(Value::Null));
            }
        }
        if !spec.is_empty() {
            patch.insert("spec".into(), Value::Object(spec));
        }
        let body = Arc::new(Value::Object(patch));
        let write = if fields.is_empty() {
            None
        } else {
            Some(Write::Patch {
                base: Base::required(live, &self.reference())?,
                patch_type: PatchType::Merge,
                body: Arc::clone(&body),
            })
        };
        let base = Base::of(live);
        let route = self.info(served_paths(live, &d.app), foreign);
        let viewed = |from: Arc<Value>, before: Option<View>, patch: Option<Arc<Value>>| Viewed {
            from,
            before,
            patch,
            namespace: namespace.to_owned(),
            name: self.name.clone(),
            keys: keys.clone(),
        };
        // The before-view: read from the live object when the plan holds it (a large
        // application's before-views were a tenth of its CPU, copied), else a copy of its
        // focused parts. `from`: what the after-view is read from (the same parts).
        let (before, from) = match given {
            Cow::Owned(live) => {
                let held = Arc::new(view_source(live));
                (View::made(viewed(Arc::clone(&held), None, None)), held)
            }
            Cow::Borrowed(live) => {
                let copy = Arc::new(patched_view(
                    live,
                    None,
                    namespace,
                    &self.name,
                    &key_strs(&keys),
                ));
                (View::from(Arc::clone(&copy)), copy)
            }
        };
        let patch = View::from(Arc::clone(&body));
        for f in in_views {
            // Rule `i` of the patch is rule `i` of the after-view.
            let pointer = format!("/spec/rules/{}/http/paths", f.rule);
            let field = &mut fields[f.field];
            field.after = FieldValue::in_view(&patch, &body, &pointer);
            if f.before_in_view {
                // Rule `i` of the before-view is rule `i` of the live object, with its paths:
                // read from what the before-view is read from, not by making the view.
                field.before = FieldValue::in_view(&View::from(Arc::clone(&from)), &from, &pointer);
            }
        }
        // The after-view: the before-view as the patch leaves it (the view holds every field a
        // change touches), made when read; when nothing changes, the before-view itself.
        let after = match &write {
            None => before.clone(),
            Some(_) => View::made(viewed(from, Some(before.clone()), Some(body))),
        };
        Ok(ObjectChange {
            kind: Kind::Ingress,
            namespace: namespace.to_owned(),
            name: self.name.clone(),
            live: base,
            after: Some(after),
            fields,
            before: Some(before),
            write,
            route: Some(route),
        })
    }
}

impl IngressUpdater {
    /// Refuses a saved updater (a plan file's) that is not exactly what the style generates for
    /// a scope group of `app`: every value checked as its flag or file is, then the desired
    /// Ingress made again from them and compared; a new Ingress (`creates`) only under the name
    /// the style gives it ([`super::saved_name`]).
    pub fn check_saved(&self, app: &str, creates: bool) -> Result<(), Refusal> {
        let d = &self.desired;
        super::saved_owned(&d.app, app, &self.name)?;
        let flavor = flavor(self.style).ok_or(Refusal::NoIngressStyle(self.style))?;
        let group = super::saved_group(&d.scopes, &d.identifier, &d.paths)?;
        let port = super::saved_port(&d.backend["service"]["port"]["number"])?;
        let auth_url = match d.annotations.get(super::nginx_auth::AUTH_URL) {
            Some(v) => Some(
                super::refs::AuthUrl::of_annotation(v).ok_or("its auth-url is not a valid one")?,
            ),
            None => None,
        };
        let attachment = appupdate_model::intent::AttachmentRecord {
            ingress_class: d.ingress_class.clone(),
            hosts: d.hosts.clone(),
            ..Default::default()
        };
        attachment.check()?;
        if let Some(tls) = &d.tls {
            check_saved_tls(tls)?;
        }
        let ctx = RouteContext {
            app: app.to_owned(),
            port: super::BackendPort::Number(port),
            attachment: super::Attachment {
                ingress_class: d.ingress_class.clone(),
                hosts: d.hosts.clone(),
                tls: d.tls.clone(),
                parent_refs: None,
                auth_url,
                auth_service: None,
                auth_provider: None,
            },
            forced: d.forced,
            guarded_scopes: Default::default(),
        };
        flavor
            .check(&ctx, std::slice::from_ref(&group))
            .map_err(|e| e.to_string())?;
        let expected = desired_ingress(flavor, &ctx, &group).map_err(|e| e.to_string())?;
        if expected != *d {
            return Err(Refusal::NotAsItsStyleMakes {
                kind: Kind::Ingress,
                style: self.style,
            });
        }
        super::saved_name(Kind::Ingress, app, &d.identifier, &self.name, creates)
    }
}

/// A saved `spec.tls`: entries of hosts and a Secret name, nothing else.
fn check_saved_tls(tls: &Value) -> Result<(), String> {
    let entries = tls.as_array().ok_or("its TLS is not a list")?;
    if entries.len() > 100 {
        return Err("its TLS has more than 100 entries".into());
    }
    for e in entries {
        let e = e
            .as_object()
            .ok_or("its TLS has an entry that is not an object")?;
        for (k, v) in e {
            match (k.as_str(), v) {
                ("secretName", Value::String(s)) => {
                    super::refs::parse_object_name(s)?;
                }
                ("hosts", Value::Array(hosts)) => {
                    for h in hosts {
                        super::refs::parse_host(h.as_str().ok_or("its TLS hosts are not names")?)?;
                    }
                }
                _ => return Err(format!("its TLS has the field {k:?}")),
            }
        }
    }
    Ok(())
}

impl IngressUpdater {
    /// The change against `live` (`None`: the Ingress does not exist).
    pub fn plan(&self, namespace: &str, live: Option<&Value>) -> Result<ObjectChange, PlanError> {
        self.plan_given(namespace, live.map(Cow::Borrowed))
    }

    /// [`IngressUpdater::plan`] against a live object lent, or given up to the change, which
    /// then holds what its views read of it ([`IngressUpdater::update`]).
    pub fn plan_given(
        &self,
        namespace: &str,
        live: Option<Cow<'_, Value>>,
    ) -> Result<ObjectChange, PlanError> {
        let flavor = self.flavor()?;
        match live {
            None => Ok(self.create(namespace, flavor)),
            Some(live) => self.update(namespace, live, flavor),
        }
    }
}

/// Deletes a managed Ingress whose scope group is gone, or that a route of another kind
/// replaces.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IngressRemoval {
    pub app: String,
    pub name: String,
}

impl IngressRemoval {
    pub fn new(app: impl Into<String>, name: impl Into<String>) -> Self {
        IngressRemoval {
            app: app.into(),
            name: name.into(),
        }
    }
}

impl IngressRemoval {
    /// Refuses a saved removal of an object that cannot be one of `app`'s routes.
    pub fn check_saved(&self, app: &str) -> Result<(), Refusal> {
        super::saved_owned(&self.app, app, &self.name)
    }

    /// The deletion of `live` (nothing to do when it is gone).
    pub fn plan(&self, namespace: &str, live: Option<&Value>) -> Result<ObjectChange, PlanError> {
        deletion(
            Kind::Ingress,
            namespace,
            &self.app,
            &self.name,
            live,
            |live| {
                let flavor = flavor_of(live);
                let keys = shown_annotations(live, None);
                let info = RouteInfo {
                    style: flavor.map_or(RouteStyle::NginxSnippet, |f| f.style()),
                    identifier: label(live, IDENTIFIER_LABEL).unwrap_or_default().to_owned(),
                    scopes: normalize_scopes(
                        &flavor.map(|f| f.live_scopes(live)).unwrap_or_default(),
                    ),
                    paths: Vec::new(),
                    paths_before: served_paths(live, &self.app),
                    foreign: Vec::new(),
                };
                (
                    focused_view(live, namespace, &self.name, &key_strs(&keys)),
                    Some(info),
                )
            },
        )
    }
}
