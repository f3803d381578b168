//! Endpoints → Ingresses: the desired set, and the create / update / delete updaters that bring
//! the live managed Ingresses to it.
//!
//! Pure: the caller passes the parsed [`EndpointsFile`], the live Service (for the port) and the
//! live managed Ingresses (listed with the selector `app=<app>,identifier`), and gets back
//! [`Updater`]s for the plan; `plan.rs` and the apply step do the rest.
//!
//! # Groups and the identifier label
//!
//! Endpoints are grouped by their scope *set*: sorted, duplicates removed, so `[user, admin]`
//! and `[admin, user, user]` are one group; no scopes is the public group. One Ingress per
//! group, labelled `app=<app>` and `identifier=<id>` where
//!
//! > `<id>` = the first 16 lowercase hex digits of SHA-256 over the UTF-8 bytes of the sorted,
//! > de-duplicated scopes joined by `"\n"` (the public group hashes the empty string).
//!
//! Sorting is by bytes (scopes are ASCII, see `endpoints_file`). The value is a valid label
//! value (16 characters of `[0-9a-f]`), identical on every machine and every version of this
//! tool — the unit tests pin it to fixed vectors, e.g. `[]` → `e3b0c44298fc1c14`,
//! `[user]` → `04f8996da763b7a9`, `[admin, user]` → `4f515e078b8f8861`.
//!
//! # Names
//!
//! A new Ingress is named `<app>-<id>` (e.g. `web-04f8996da763b7a9`), checked to be a valid
//! DNS subdomain (lowercase letters, digits, `-`, `.`, alphanumeric at both ends of each label,
//! at most 253 characters). Live Ingresses are matched by the identifier label, never by name,
//! so Ingresses created under other names (`web-admin`) keep their names when updated.
//!
//! # Shape
//!
//! Each group's Ingress has one HTTP path per endpoint, `/<app><path>` with `pathType: Prefix`,
//! sorted by path so that the order of the file does not matter, all pointing at the Service
//! `<app>` on the [`backend_port`]. Its `nginx.ingress.kubernetes.io/configuration-snippet`
//! annotation is exactly (public group):
//!
//! ```text
//! rewrite ^/web/(.*)$ /$1 break;
//! ```
//!
//! and for a scoped group (scopes sorted, separated by one space):
//!
//! ```text
//! set $scopes "admin user";
//! auth_request /external-auth;
//! auth_request_set $user_id $upstream_http_user_id;
//! auth_request_set $user_scopes $upstream_http_user_scopes;
//! proxy_set_header User-Id $user_id;
//! proxy_set_header User-Scopes $user_scopes;
//! rewrite ^/web/(.*)$ /$1 break;
//! ```
//!
//! each line ending in `\n`. Dots in the application name are escaped in the regex (`my\.app`).
//!
//! # Backend port
//!
//! [`backend_port`]: a Service with one port → that port; with several → the port named `http`,
//! else the first one listed; with none → an error. The port is referenced by number.
//!
//! # Inheritance
//!
//! New Ingresses take `ingressClassName`, hosts and TLS from the managed sibling with the
//! lexicographically smallest name ([`inherited_from`]): its class, the distinct hosts of its
//! rules (one rule per host, in its order; a sibling with no hosts gives one rule without host)
//! and its whole `spec.tls`. Without siblings: no class, one rule without host, no TLS.
//!
//! # Planning
//!
//! Live managed Ingresses are matched to groups by the identifier label value:
//!
//! * matched → [`IngressUpdater`] that owns only the `app`/`identifier` labels, the
//!   configuration-snippet annotation and `http.paths` of every rule; everything else (other
//!   labels and annotations, `ingressClassName`, hosts, TLS, `defaultBackend`, unknown fields,
//!   also inside rules) is preserved. Paths equal up to order count as unchanged. The write is a
//!   JSON merge patch with only the changed annotation and, if any rule changes, the whole
//!   `spec.rules` array rebuilt from the live object.
//! * group without a live Ingress → [`IngressUpdater`] creating `<app>-<id>`.
//! * live managed Ingress without a group → [`IngressRemoval`]. When several live Ingresses
//!   carry the same identifier, the one named `<app>-<id>` (else the smallest name) is updated
//!   and the others are removed.
//!
//! An Ingress without both labels (`app=<app>` and `identifier`) is never matched, updated or
//! deleted; an [`IngressUpdater`] refuses to update an object whose labels do not say it is this
//! group's Ingress (e.g. when a create met an existing unmanaged Ingress of the same name).
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::endpoints_file::EndpointsFile;
use crate::names;
use crate::plan::{
    Base, FieldChange, IngressInfo, Kind, ObjectChange, PatchType, PlanError, SavedUpdater,
    Updater, Write,
};
use crate::text::Untrusted;

/// The label whose value identifies the scope group of a managed Ingress.
pub const IDENTIFIER_LABEL: &str = "identifier";
/// The label every object of the application carries.
pub const APP_LABEL: &str = "app";
/// The nginx ingress controller annotation this tool owns.
pub const SNIPPET_ANNOTATION: &str = "nginx.ingress.kubernetes.io/configuration-snippet";
/// Where nginx sends the token for scoped groups.
pub const AUTH_LOCATION: &str = "/external-auth";

const SCOPES_PREFIX: &str = "set $scopes \"";

/// Scopes as a set: sorted by bytes, duplicates removed.
pub fn normalize_scopes(scopes: &[String]) -> Vec<String> {
    scopes
        .iter()
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// The identifier label value of a scope set: the first 16 lowercase hex digits of SHA-256 over
/// the sorted, de-duplicated scopes joined by `"\n"`.
pub fn scope_identifier(scopes: &[String]) -> String {
    let joined = normalize_scopes(scopes).join("\n");
    let digest = Sha256::digest(joined.as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// The name of a new Ingress: `<app>-<identifier>`, which must be a valid DNS subdomain.
pub fn ingress_name(app: &str, identifier: &str) -> Result<String, PlanError> {
    let name = format!("{app}-{identifier}");
    if names::is_dns1123_subdomain(&name) {
        Ok(name)
    } else {
        Err(PlanError::Unexpected {
            reference: format!("{}/{name}", Kind::Ingress.kubectl_name()),
            message: format!(
                "the Ingress name derived from the application name {app:?} is not a valid DNS subdomain (lowercase letters, digits, '-' and '.', at most 253 characters); the application name must be one too",
                app = Untrusted(app)
            ),
        })
    }
}

/// The `configuration-snippet` annotation for a group (`scopes` sorted and de-duplicated here).
pub fn configuration_snippet(app: &str, scopes: &[String]) -> String {
    let mut s = String::new();
    let scopes = normalize_scopes(scopes);
    if !scopes.is_empty() {
        s.push_str(&format!("{SCOPES_PREFIX}{}\";\n", scopes.join(" ")));
        s.push_str(&format!("auth_request {AUTH_LOCATION};\n"));
        s.push_str("auth_request_set $user_id $upstream_http_user_id;\n");
        s.push_str("auth_request_set $user_scopes $upstream_http_user_scopes;\n");
        s.push_str("proxy_set_header User-Id $user_id;\n");
        s.push_str("proxy_set_header User-Scopes $user_scopes;\n");
    }
    let app_re = app.replace('.', "\\.");
    s.push_str(&format!("rewrite ^/{app_re}/(.*)$ /$1 break;\n"));
    s
}

/// The scopes a snippet written by [`configuration_snippet`] requires: the words of its
/// `set $scopes "…";` line, or empty when there is none (public).
pub fn snippet_scopes(snippet: &str) -> Vec<String> {
    snippet
        .lines()
        .find_map(|l| l.trim().strip_prefix(SCOPES_PREFIX)?.strip_suffix("\";"))
        .map(|words| words.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The Service port Ingress backends point at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendPort {
    Number(i32),
}

impl BackendPort {
    /// The `backend.service.port` object.
    pub fn to_json(self) -> Value {
        match self {
            BackendPort::Number(n) => json!({ "number": n }),
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
            message: "has no ports, so the Ingresses have no port to send traffic to; add a port to the Service".to_owned(),
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

/// What new Ingresses take from their existing managed siblings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inherited {
    pub ingress_class_name: Option<String>,
    /// Distinct hosts, in the sibling's rule order; empty: one rule without host.
    pub hosts: Vec<String>,
    /// The sibling's whole `spec.tls`.
    pub tls: Option<Value>,
}

fn name_of(obj: &Value) -> Option<&str> {
    obj["metadata"]["name"].as_str()
}

fn label<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj["metadata"]["labels"][key].as_str()
}

/// Class, hosts and TLS of the managed sibling with the smallest name (see the module docs).
pub fn inherited_from(live_managed: &[Value]) -> Inherited {
    let Some(sibling) = live_managed
        .iter()
        .filter(|o| label(o, APP_LABEL).is_some() && label(o, IDENTIFIER_LABEL).is_some())
        .filter_map(|o| Some((name_of(o)?, o)))
        .min_by(|a, b| a.0.cmp(b.0))
        .map(|(_, o)| o)
    else {
        return Inherited::default();
    };
    let spec = &sibling["spec"];
    let mut hosts: Vec<String> = Vec::new();
    for rule in spec["rules"].as_array().into_iter().flatten() {
        if let Some(h) = rule["host"].as_str().filter(|h| !h.is_empty())
            && !hosts.iter().any(|x| x == h)
        {
            hosts.push(h.to_owned());
        }
    }
    Inherited {
        ingress_class_name: spec["ingressClassName"].as_str().map(str::to_owned),
        hosts,
        tls: spec.get("tls").filter(|t| !t.is_null()).cloned(),
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
    /// The `http.paths` entries, in the order of `paths`.
    pub http_paths: Vec<Value>,
    /// The configuration-snippet annotation value.
    pub snippet: String,
    /// Class, hosts and TLS for a create.
    pub inherited: Inherited,
}

impl DesiredIngress {
    /// The owned labels.
    fn labels(&self) -> Value {
        json!({ APP_LABEL: self.app, IDENTIFIER_LABEL: self.identifier })
    }

    fn info(&self) -> IngressInfo {
        IngressInfo {
            identifier: self.identifier.clone(),
            scopes: self.scopes.clone(),
            paths: self.paths.clone(),
        }
    }

    /// The complete object to create, with the inherited class, hosts and TLS.
    pub fn create_body(&self, namespace: &str) -> Value {
        let http = json!({ "paths": self.http_paths });
        let rules: Vec<Value> = if self.inherited.hosts.is_empty() {
            vec![json!({ "http": http })]
        } else {
            self.inherited
                .hosts
                .iter()
                .map(|h| json!({ "host": h, "http": http }))
                .collect()
        };
        let mut spec = Map::new();
        if let Some(class) = &self.inherited.ingress_class_name {
            spec.insert("ingressClassName".into(), json!(class));
        }
        spec.insert("rules".into(), Value::Array(rules));
        if let Some(tls) = &self.inherited.tls {
            spec.insert("tls".into(), tls.clone());
        }
        json!({
            "apiVersion": Kind::Ingress.api_version(),
            "kind": Kind::Ingress.to_string(),
            "metadata": {
                "name": self.name,
                "namespace": namespace,
                "labels": self.labels(),
                "annotations": { SNIPPET_ANNOTATION: self.snippet },
            },
            "spec": Value::Object(spec),
        })
    }
}

/// The desired Ingresses, one per scope group, sorted by name.
pub fn desired_ingresses(
    app: &str,
    endpoints: &EndpointsFile,
    port: &BackendPort,
    inherited: &Inherited,
) -> Result<Vec<DesiredIngress>, PlanError> {
    let mut groups: BTreeMap<Vec<String>, Vec<&str>> = BTreeMap::new();
    for e in &endpoints.endpoints {
        groups
            .entry(normalize_scopes(&e.scopes))
            .or_default()
            .push(&e.path);
    }
    let mut desired = Vec::with_capacity(groups.len());
    for (scopes, mut paths) in groups {
        paths.sort_unstable();
        paths.dedup();
        let identifier = scope_identifier(&scopes);
        let name = ingress_name(app, &identifier)?;
        let http_paths = paths
            .iter()
            .map(|p| {
                json!({
                    "path": format!("/{app}{p}"),
                    "pathType": "Prefix",
                    "backend": { "service": { "name": app, "port": port.to_json() } },
                })
            })
            .collect();
        desired.push(DesiredIngress {
            app: app.to_owned(),
            name,
            snippet: configuration_snippet(app, &scopes),
            identifier,
            scopes,
            paths: paths.into_iter().map(str::to_owned).collect(),
            http_paths,
            inherited: inherited.clone(),
        });
    }
    desired.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(desired)
}

/// Updaters bringing `live_managed` to `desired`: matched by identifier → update (or
/// unchanged), unmatched desired → create, unmatched live → delete. Live objects without both
/// `app=<app>` and the identifier label are ignored.
pub fn plan_ingresses(
    app: &str,
    desired: Vec<DesiredIngress>,
    live_managed: &[Value],
) -> Vec<Arc<dyn Updater>> {
    // identifier → live names, sorted.
    let mut live: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for obj in live_managed {
        if label(obj, APP_LABEL) != Some(app) {
            continue;
        }
        if let (Some(id), Some(name)) = (label(obj, IDENTIFIER_LABEL), name_of(obj)) {
            live.entry(id).or_default().push(name);
        }
    }
    for names in live.values_mut() {
        names.sort_unstable();
        names.dedup();
    }

    let mut updaters: Vec<Arc<dyn Updater>> = Vec::new();
    let mut removals: Vec<Arc<dyn Updater>> = Vec::new();
    for d in desired {
        let name = match live.remove(d.identifier.as_str()) {
            None => d.name.clone(),
            Some(names) => {
                let keep = names
                    .iter()
                    .copied()
                    .find(|n| *n == d.name)
                    .or_else(|| names.first().copied())
                    .unwrap_or(d.name.as_str())
                    .to_owned();
                for extra in names.into_iter().filter(|n| *n != keep) {
                    removals.push(Arc::new(IngressRemoval::new(app, extra)));
                }
                keep
            }
        };
        updaters.push(Arc::new(IngressUpdater { name, desired: d }));
    }
    for names in live.into_values() {
        for name in names {
            removals.push(Arc::new(IngressRemoval::new(app, name)));
        }
    }
    updaters.extend(removals);
    updaters
}

/// Readable path of a rule's paths: `spec.rules[host=<h>].http.paths`, or by index without host.
fn rule_field(rule: &Value, index: usize) -> String {
    match rule["host"].as_str() {
        Some(h) if !h.is_empty() => format!("spec.rules[host={h}].http.paths"),
        _ => format!("spec.rules[{index}].http.paths"),
    }
}

fn label_field(key: &str) -> String {
    format!("metadata.labels[{key}]")
}

fn annotation_field() -> String {
    format!("metadata.annotations[{SNIPPET_ANNOTATION}]")
}

/// Same entries, in any order.
fn same_entries(live: &[Value], desired: &[Value]) -> bool {
    if live.len() != desired.len() {
        return false;
    }
    let mut used = vec![false; live.len()];
    desired.iter().all(|d| {
        match live
            .iter()
            .enumerate()
            .position(|(i, l)| !used[i] && l == d)
        {
            Some(i) => {
                used[i] = true;
                true
            }
            None => false,
        }
    })
}

/// The part of an Ingress the diff shows: identity, owned labels and annotation, class, rules
/// (host and paths only) and TLS. Server-managed fields and foreign labels are left out.
pub fn focused_view(obj: &Value, namespace: &str, name: &str) -> Value {
    let meta = &obj["metadata"];
    let mut m = Map::new();
    m.insert("name".into(), json!(name));
    m.insert("namespace".into(), json!(namespace));
    let mut labels = Map::new();
    for key in [APP_LABEL, IDENTIFIER_LABEL] {
        if let Some(v) = meta["labels"].get(key) {
            labels.insert(key.into(), v.clone());
        }
    }
    if !labels.is_empty() {
        m.insert("labels".into(), Value::Object(labels));
    }
    if let Some(v) = meta["annotations"].get(SNIPPET_ANNOTATION) {
        m.insert(
            "annotations".into(),
            json!({ SNIPPET_ANNOTATION: v.clone() }),
        );
    }
    let spec = &obj["spec"];
    let mut s = Map::new();
    if let Some(class) = spec.get("ingressClassName").filter(|v| !v.is_null()) {
        s.insert("ingressClassName".into(), class.clone());
    }
    if let Some(rules) = spec["rules"].as_array() {
        let rules = rules
            .iter()
            .map(|r| {
                let mut rule = Map::new();
                if let Some(h) = r.get("host").filter(|v| !v.is_null()) {
                    rule.insert("host".into(), h.clone());
                }
                if let Some(p) = r["http"].get("paths") {
                    rule.insert("http".into(), json!({ "paths": p.clone() }));
                }
                Value::Object(rule)
            })
            .collect();
        s.insert("rules".into(), Value::Array(rules));
    }
    if let Some(tls) = spec.get("tls").filter(|v| !v.is_null()) {
        s.insert("tls".into(), tls.clone());
    }
    let mut view = Map::new();
    view.insert("apiVersion".into(), json!(Kind::Ingress.api_version()));
    view.insert("kind".into(), json!(Kind::Ingress.to_string()));
    view.insert("metadata".into(), Value::Object(m));
    view.insert("spec".into(), Value::Object(s));
    Value::Object(view)
}

/// The type names of the updaters here in a saved plan.
pub const SAVED_INGRESS: &str = "ingress";
pub const SAVED_INGRESS_REMOVAL: &str = "ingress-removal";

/// Creates a group's Ingress, or updates the owned parts of the live one.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IngressUpdater {
    /// The live Ingress's name when one matched, else `desired.name`.
    pub name: String,
    pub desired: DesiredIngress,
}

impl IngressUpdater {
    fn reference(&self) -> String {
        format!("{}/{}", Kind::Ingress.kubectl_name(), self.name)
    }

    fn create(&self, namespace: &str) -> ObjectChange {
        let mut d = self.desired.clone();
        d.name = self.name.clone();
        let body = d.create_body(namespace);
        let mut fields = vec![
            FieldChange::new(label_field(APP_LABEL), None, Some(json!(d.app))),
            FieldChange::new(
                label_field(IDENTIFIER_LABEL),
                None,
                Some(json!(d.identifier)),
            ),
            FieldChange::new(annotation_field(), None, Some(json!(d.snippet))),
        ];
        for (i, rule) in body["spec"]["rules"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            fields.push(FieldChange::new(
                rule_field(rule, i),
                None,
                Some(json!(d.http_paths)),
            ));
        }
        ObjectChange {
            kind: Kind::Ingress,
            namespace: namespace.to_owned(),
            name: self.name.clone(),
            live: None,
            fields,
            before: None,
            after: Some(focused_view(&body, namespace, &self.name)),
            write: Some(Write::Create { body }),
            ingress: Some(d.info()),
        }
    }

    fn update(&self, namespace: &str, live: &Value) -> Result<ObjectChange, PlanError> {
        let d = &self.desired;
        if label(live, APP_LABEL) != Some(d.app.as_str())
            || label(live, IDENTIFIER_LABEL) != Some(d.identifier.as_str())
        {
            return Err(PlanError::Unexpected {
                reference: self.reference(),
                message: format!(
                    "exists but is not the managed Ingress of this scope group (it lacks the labels {APP_LABEL}={} and {IDENTIFIER_LABEL}={}), so it is left alone; rename or remove it and run again",
                    d.app, d.identifier
                ),
            });
        }
        let mut fields = Vec::new();
        let mut after = view_source(live);
        let mut patch = Map::new();

        let wanted = json!(d.snippet);
        let current = live["metadata"]["annotations"].get(SNIPPET_ANNOTATION);
        if current != Some(&wanted) {
            fields.push(FieldChange::new(
                annotation_field(),
                current.cloned(),
                Some(wanted.clone()),
            ));
            patch.insert(
                "metadata".into(),
                json!({ "annotations": { SNIPPET_ANNOTATION: wanted.clone() } }),
            );
            set_path(
                &mut after,
                &["metadata", "annotations", SNIPPET_ANNOTATION],
                wanted,
            );
        }

        let desired_http_paths = json!(d.http_paths);
        let live_rules = live["spec"]["rules"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        let mut rules_changed = false;
        let new_rules: Vec<Value> = if live_rules.is_empty() {
            rules_changed = true;
            fields.push(FieldChange::new(
                rule_field(&Value::Null, 0),
                None,
                Some(desired_http_paths.clone()),
            ));
            vec![json!({ "http": { "paths": desired_http_paths.clone() } })]
        } else {
            live_rules
                .iter()
                .enumerate()
                .map(|(i, rule)| {
                    let current = rule["http"].get("paths");
                    let same = current
                        .and_then(Value::as_array)
                        .is_some_and(|p| same_entries(p, &d.http_paths));
                    if same || !rule.is_object() {
                        return rule.clone();
                    }
                    rules_changed = true;
                    fields.push(FieldChange::new(
                        rule_field(rule, i),
                        current.cloned(),
                        Some(desired_http_paths.clone()),
                    ));
                    let mut rule = rule.clone();
                    if !rule["http"].is_object() {
                        rule["http"] = json!({});
                    }
                    rule["http"]["paths"] = desired_http_paths.clone();
                    rule
                })
                .collect()
        };
        if rules_changed {
            patch.insert("spec".into(), json!({ "rules": new_rules.clone() }));
            set_path(&mut after, &["spec", "rules"], Value::Array(new_rules));
        }

        let write = if fields.is_empty() {
            None
        } else {
            Some(Write::Patch {
                base: Base::required(live, &self.reference())?,
                patch_type: PatchType::Merge,
                body: Value::Object(patch),
            })
        };
        Ok(ObjectChange {
            kind: Kind::Ingress,
            namespace: namespace.to_owned(),
            name: self.name.clone(),
            live: Base::of(live),
            fields,
            before: Some(focused_view(live, namespace, &self.name)),
            after: Some(focused_view(&after, namespace, &self.name)),
            write,
            ingress: Some(d.info()),
        })
    }
}

/// The parts of an Ingress that [`focused_view`] reads (labels, annotations, spec), copied
/// without the rest (managedFields, status…): what an update's after-view is computed from, so
/// that planning a large application does not copy every live object whole.
fn view_source(live: &Value) -> Value {
    let mut meta = Map::new();
    for key in ["labels", "annotations"] {
        if let Some(v) = live["metadata"].get(key) {
            meta.insert(key.into(), v.clone());
        }
    }
    let mut obj = Map::new();
    obj.insert("metadata".into(), Value::Object(meta));
    if let Some(spec) = live.get("spec") {
        obj.insert("spec".into(), spec.clone());
    }
    Value::Object(obj)
}

/// Sets `obj[path…] = value`, creating (or replacing non-object) intermediate objects.
fn set_path(obj: &mut Value, path: &[&str], value: Value) {
    let mut cur = obj;
    for key in &path[..path.len().saturating_sub(1)] {
        if !cur.get(*key).is_some_and(Value::is_object) {
            cur[*key] = json!({});
        }
        cur = &mut cur[*key];
    }
    if let Some(last) = path.last() {
        if !cur.is_object() {
            *cur = json!({});
        }
        cur[*last] = value;
    }
}

impl Updater for IngressUpdater {
    fn name(&self) -> &str {
        &self.name
    }

    fn save(&self) -> Option<SavedUpdater> {
        SavedUpdater::new(SAVED_INGRESS, self)
    }

    fn plan(&self, namespace: &str, live: Option<&Value>) -> Result<ObjectChange, PlanError> {
        match live {
            None => Ok(self.create(namespace)),
            Some(live) => self.update(namespace, live),
        }
    }
}

/// Deletes a managed Ingress whose scope group is gone.
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

    /// What the live Ingress serves, in endpoint terms.
    fn info(&self, live: &Value) -> IngressInfo {
        let scopes = live["metadata"]["annotations"][SNIPPET_ANNOTATION]
            .as_str()
            .map(snippet_scopes)
            .unwrap_or_default();
        IngressInfo {
            identifier: label(live, IDENTIFIER_LABEL).unwrap_or_default().to_owned(),
            scopes: normalize_scopes(&scopes),
            paths: served_paths(live, &self.app),
        }
    }
}

/// The endpoint paths an Ingress (live object or focused view) serves: every rule's HTTP paths
/// with the `/<app>` prefix removed, de-duplicated and sorted.
pub fn served_paths(ingress: &Value, app: &str) -> Vec<String> {
    let prefix = format!("/{app}");
    let paths: BTreeSet<String> = ingress["spec"]["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["http"]["paths"].as_array().into_iter().flatten())
        .filter_map(|p| p["path"].as_str())
        .map(|p| match p.strip_prefix(&prefix) {
            Some(rest) if rest.starts_with('/') => rest.to_owned(),
            _ => p.to_owned(),
        })
        .collect();
    paths.into_iter().collect()
}

impl Updater for IngressRemoval {
    fn name(&self) -> &str {
        &self.name
    }

    fn save(&self) -> Option<SavedUpdater> {
        SavedUpdater::new(SAVED_INGRESS_REMOVAL, self)
    }

    fn plan(&self, namespace: &str, live: Option<&Value>) -> Result<ObjectChange, PlanError> {
        let Some(live) = live else {
            return Ok(ObjectChange {
                kind: Kind::Ingress,
                namespace: namespace.to_owned(),
                name: self.name.clone(),
                live: None,
                fields: Vec::new(),
                before: None,
                after: None,
                write: None,
                ingress: None,
            });
        };
        let view = focused_view(live, namespace, &self.name);
        let reference = format!("{}/{}", Kind::Ingress.kubectl_name(), self.name);
        Ok(ObjectChange {
            kind: Kind::Ingress,
            namespace: namespace.to_owned(),
            name: self.name.clone(),
            live: Base::of(live),
            fields: vec![FieldChange::new(".", Some(view.clone()), None)],
            before: Some(view),
            after: None,
            write: Some(Write::Delete {
                base: Base::required(live, &reference)?,
            }),
            ingress: Some(self.info(live)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoints_file::Endpoint;
    use crate::plan::{Action, Recheck, recheck};
    use pretty_assertions::assert_eq;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    fn file(entries: &[(&str, &[&str])]) -> EndpointsFile {
        EndpointsFile {
            endpoints: entries
                .iter()
                .enumerate()
                .map(|(i, (p, sc))| Endpoint {
                    path: (*p).to_owned(),
                    scopes: s(sc),
                    line: i + 2,
                })
                .collect(),
        }
    }

    fn desired(entries: &[(&str, &[&str])], inherited: &Inherited) -> Vec<DesiredIngress> {
        desired_ingresses("web", &file(entries), &BackendPort::Number(80), inherited).unwrap()
    }

    fn http_path(p: &str) -> Value {
        json!({"path": p, "pathType": "Prefix",
               "backend": {"service": {"name": "web", "port": {"number": 80}}}})
    }

    /// The fixture 30/31 annotation texts, byte for byte.
    const FIXTURE_30_SNIPPET: &str = "rewrite ^/web/(.*)$ /$1 break;\n";
    const FIXTURE_31_SNIPPET: &str = "set $scopes \"admin user\";\nauth_request /external-auth;\nauth_request_set $user_id $upstream_http_user_id;\nauth_request_set $user_scopes $upstream_http_user_scopes;\nproxy_set_header User-Id $user_id;\nproxy_set_header User-Scopes $user_scopes;\nrewrite ^/web/(.*)$ /$1 break;\n";

    /// A live Ingress as the server stores it (fixture 31's response shape), with the given
    /// identifier, snippet and paths, plus whatever `extra` merges in.
    fn live(name: &str, identifier: &str, snippet: &str, paths: &[&str]) -> Value {
        json!({
            "kind": "Ingress",
            "apiVersion": "networking.k8s.io/v1",
            "metadata": {
                "name": name,
                "namespace": "shop",
                "uid": format!("uid-{name}"),
                "resourceVersion": "203",
                "generation": 1,
                "creationTimestamp": "2026-11-30T11:48:26Z",
                "labels": {"app": "web", "identifier": identifier},
                "annotations": {SNIPPET_ANNOTATION: snippet},
                "managedFields": [{"manager": "curl", "operation": "Update"}]
            },
            "spec": {
                "ingressClassName": "nginx",
                "rules": [{"http": {"paths": paths.iter().map(|p| http_path(p)).collect::<Vec<_>>()}}]
            },
            "status": {"loadBalancer": {}}
        })
    }

    #[test]
    fn identifier_fixed_vectors() {
        assert_eq!(scope_identifier(&[]), "e3b0c44298fc1c14");
        assert_eq!(scope_identifier(&s(&["user"])), "04f8996da763b7a9");
        assert_eq!(scope_identifier(&s(&["admin", "user"])), "4f515e078b8f8861");
        assert_eq!(scope_identifier(&s(&["user", "admin"])), "4f515e078b8f8861");
        assert_eq!(
            scope_identifier(&s(&["user", "admin", "user"])),
            "4f515e078b8f8861"
        );
        assert_eq!(
            scope_identifier(&s(&[
                "read",
                "write",
                "admin",
                "orders:write",
                "https://example.com/auth/x",
                "user",
                "api.read",
                "z-1"
            ])),
            "a33421533a5ed598"
        );
    }

    #[test]
    fn identifiers_are_valid_label_values() {
        for scopes in [s(&[]), s(&["user"]), s(&["a", "b", "c"])] {
            let id = scope_identifier(&scopes);
            assert_eq!(id.len(), 16);
            assert!(
                id.chars()
                    .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
            );
        }
    }

    #[test]
    fn names_are_app_dash_identifier_and_checked() {
        assert_eq!(
            ingress_name("web", "04f8996da763b7a9").unwrap(),
            "web-04f8996da763b7a9"
        );
        assert_eq!(
            ingress_name("shop.web", "04f8996da763b7a9").unwrap(),
            "shop.web-04f8996da763b7a9"
        );
        assert_eq!(
            ingress_name("Web_App", "04f8996da763b7a9")
                .unwrap_err()
                .to_string(),
            "ingress.networking.k8s.io/Web_App-04f8996da763b7a9: the Ingress name derived from the application name \"Web_App\" is not a valid DNS subdomain (lowercase letters, digits, '-' and '.', at most 253 characters); the application name must be one too"
        );
        assert!(ingress_name(&"a".repeat(237), "04f8996da763b7a9").is_err());
        assert!(ingress_name(&"a".repeat(236), "04f8996da763b7a9").is_ok());
        assert!(!names::is_dns1123_subdomain("a..b"));
        assert!(!names::is_dns1123_subdomain("-a"));
    }

    #[test]
    fn backend_port_rule() {
        let svc = |ports: Value| json!({"spec": {"ports": ports}});
        assert_eq!(
            backend_port(&svc(json!([{"port": 80, "targetPort": 8080}])), "web").unwrap(),
            BackendPort::Number(80)
        );
        assert_eq!(
            backend_port(
                &svc(json!([{"name": "metrics", "port": 9090}, {"name": "http", "port": 8080}])),
                "web"
            )
            .unwrap(),
            BackendPort::Number(8080)
        );
        assert_eq!(
            backend_port(
                &svc(json!([{"name": "grpc", "port": 9000}, {"name": "metrics", "port": 9090}])),
                "web"
            )
            .unwrap(),
            BackendPort::Number(9000)
        );
        assert_eq!(
            backend_port(&svc(json!([])), "web")
                .unwrap_err()
                .to_string(),
            "service/web: has no ports, so the Ingresses have no port to send traffic to; add a port to the Service"
        );
        assert_eq!(
            backend_port(&json!({"spec": {}}), "web")
                .unwrap_err()
                .to_string(),
            "service/web: has no ports, so the Ingresses have no port to send traffic to; add a port to the Service"
        );
        assert_eq!(
            backend_port(&svc(json!([{"port": "http"}])), "web")
                .unwrap_err()
                .to_string(),
            "service/web: has a port without a valid number (\"http\"); fix the Service"
        );
    }

    #[test]
    fn snippets_match_the_fixtures_byte_for_byte() {
        assert_eq!(configuration_snippet("web", &[]), FIXTURE_30_SNIPPET);
        assert_eq!(
            configuration_snippet("web", &s(&["user", "admin", "user"])),
            FIXTURE_31_SNIPPET
        );
        assert_eq!(
            configuration_snippet("my.app", &[]),
            "rewrite ^/my\\.app/(.*)$ /$1 break;\n"
        );
        assert_eq!(snippet_scopes(FIXTURE_31_SNIPPET), s(&["admin", "user"]));
        assert_eq!(snippet_scopes(FIXTURE_30_SNIPPET), Vec::<String>::new());
    }

    #[test]
    fn endpoints_are_grouped_by_scope_set() {
        let d = desired(
            &[
                ("/unprotected", &[]),
                ("/protected/user", &["user"]),
                ("/protected/admin", &["user", "admin"]),
                ("/health", &[]),
                ("/protected/ops", &["admin", "user", "user"]),
            ],
            &Inherited::default(),
        );
        let summary: Vec<(String, String, Vec<String>, Vec<String>)> = d
            .iter()
            .map(|g| {
                (
                    g.name.clone(),
                    g.identifier.clone(),
                    g.scopes.clone(),
                    g.paths.clone(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                (
                    "web-04f8996da763b7a9".into(),
                    "04f8996da763b7a9".into(),
                    s(&["user"]),
                    s(&["/protected/user"])
                ),
                (
                    "web-4f515e078b8f8861".into(),
                    "4f515e078b8f8861".into(),
                    s(&["admin", "user"]),
                    s(&["/protected/admin", "/protected/ops"])
                ),
                (
                    "web-e3b0c44298fc1c14".into(),
                    "e3b0c44298fc1c14".into(),
                    s(&[]),
                    s(&["/health", "/unprotected"])
                ),
            ]
        );
        assert_eq!(
            d[2].http_paths,
            vec![http_path("/web/health"), http_path("/web/unprotected")]
        );
        assert_eq!(d[1].snippet, FIXTURE_31_SNIPPET);
    }

    #[test]
    fn an_empty_file_desires_nothing() {
        assert!(desired(&[], &Inherited::default()).is_empty());
    }

    #[test]
    fn create_sends_the_whole_object() {
        let d = desired(
            &[("/protected/admin", &["admin", "user"])],
            &Inherited::default(),
        );
        let updaters = plan_ingresses("web", d, &[]);
        assert_eq!(updaters.len(), 1);
        let c = updaters[0].plan("shop", None).unwrap();
        assert_eq!(c.action(), Action::Create);
        assert_eq!(c.name, "web-4f515e078b8f8861");
        assert_eq!(c.live, None);
        let body = json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": {
                "name": "web-4f515e078b8f8861",
                "namespace": "shop",
                "labels": {"app": "web", "identifier": "4f515e078b8f8861"},
                "annotations": {SNIPPET_ANNOTATION: FIXTURE_31_SNIPPET}
            },
            "spec": {"rules": [{"http": {"paths": [http_path("/web/protected/admin")]}}]}
        });
        assert_eq!(c.write, Some(Write::Create { body: body.clone() }));
        assert_eq!(
            c.after,
            Some(focused_view(&body, "shop", "web-4f515e078b8f8861"))
        );
        assert_eq!(
            c.fields,
            vec![
                FieldChange::new("metadata.labels[app]", None, Some(json!("web"))),
                FieldChange::new(
                    "metadata.labels[identifier]",
                    None,
                    Some(json!("4f515e078b8f8861"))
                ),
                FieldChange::new(
                    "metadata.annotations[nginx.ingress.kubernetes.io/configuration-snippet]",
                    None,
                    Some(json!(FIXTURE_31_SNIPPET))
                ),
                FieldChange::new(
                    "spec.rules[0].http.paths",
                    None,
                    Some(json!([http_path("/web/protected/admin")]))
                ),
            ]
        );
        assert_eq!(
            c.ingress,
            Some(IngressInfo {
                identifier: "4f515e078b8f8861".into(),
                scopes: s(&["admin", "user"]),
                paths: s(&["/protected/admin"]),
            })
        );
    }

    #[test]
    fn new_ingresses_inherit_class_hosts_and_tls_from_the_first_sibling() {
        let mut a = live("web-b", "x1", FIXTURE_30_SNIPPET, &["/web/a"]);
        a["spec"] = json!({
            "ingressClassName": "internal",
            "rules": [{"host": "b.example.com", "http": {"paths": []}}]
        });
        let mut b = live("web-a", "x2", FIXTURE_30_SNIPPET, &["/web/b"]);
        b["spec"] = json!({
            "ingressClassName": "nginx",
            "rules": [
                {"host": "shop.example.com", "http": {"paths": []}},
                {"host": "www.example.com", "http": {"paths": []}},
                {"host": "shop.example.com", "http": {"paths": []}}
            ],
            "tls": [{"hosts": ["shop.example.com"], "secretName": "shop-tls"}]
        });
        let mut unmanaged = live("aaa", "x3", "", &[]);
        unmanaged["metadata"]["labels"] = json!({"app": "web"});
        let inherited = inherited_from(&[a, b, unmanaged]);
        assert_eq!(
            inherited,
            Inherited {
                ingress_class_name: Some("nginx".into()),
                hosts: s(&["shop.example.com", "www.example.com"]),
                tls: Some(json!([{"hosts": ["shop.example.com"], "secretName": "shop-tls"}])),
            }
        );
        assert_eq!(inherited_from(&[]), Inherited::default());

        let d = desired(&[("/x", &[])], &inherited);
        let c = IngressUpdater {
            name: d[0].name.clone(),
            desired: d[0].clone(),
        }
        .plan("shop", None)
        .unwrap();
        let Some(Write::Create { body }) = c.write else {
            panic!("not a create")
        };
        assert_eq!(
            body["spec"],
            json!({
                "ingressClassName": "nginx",
                "rules": [
                    {"host": "shop.example.com", "http": {"paths": [http_path("/web/x")]}},
                    {"host": "www.example.com", "http": {"paths": [http_path("/web/x")]}}
                ],
                "tls": [{"hosts": ["shop.example.com"], "secretName": "shop-tls"}]
            })
        );
        let paths: Vec<&str> = c.fields.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths[3..],
            [
                "spec.rules[host=shop.example.com].http.paths",
                "spec.rules[host=www.example.com].http.paths"
            ]
        );
    }

    #[test]
    fn a_converged_ingress_is_unchanged_even_with_paths_in_another_order() {
        let d = desired(
            &[("/unprotected", &[]), ("/health", &[])],
            &Inherited::default(),
        );
        // Fixture 30 lists the paths in file order, not sorted.
        let l = live(
            "web-public",
            "e3b0c44298fc1c14",
            FIXTURE_30_SNIPPET,
            &["/web/unprotected", "/web/health"],
        );
        let updaters = plan_ingresses("web", d, std::slice::from_ref(&l));
        assert_eq!(updaters.len(), 1);
        assert_eq!(updaters[0].name(), "web-public");
        let c = updaters[0].plan("shop", Some(&l)).unwrap();
        assert_eq!(c.action(), Action::Unchanged);
        assert!(c.fields.is_empty() && c.write.is_none());
        assert_eq!(c.before, c.after);
    }

    #[test]
    fn update_patches_only_owned_parts_and_keeps_everything_else() {
        let mut l = live(
            "web-admin",
            "4f515e078b8f8861",
            FIXTURE_31_SNIPPET,
            &["/web/protected/admin"],
        );
        l["metadata"]["labels"]["team"] = json!("payments");
        l["metadata"]["annotations"]["cert-manager.io/cluster-issuer"] = json!("letsencrypt");
        l["spec"] = json!({
            "ingressClassName": "nginx",
            "defaultBackend": {"service": {"name": "fallback", "port": {"number": 80}}},
            "futureField": {"x": 1},
            "rules": [
                {"host": "shop.example.com", "futureRuleField": true,
                 "http": {"futureHttpField": 1, "paths": [http_path("/web/protected/admin")]}},
                {"host": "www.example.com",
                 "http": {"paths": [http_path("/web/protected/admin"), http_path("/web/protected/ops")]}}
            ],
            "tls": [{"hosts": ["shop.example.com"], "secretName": "shop-tls"}]
        });
        let d = desired(
            &[
                ("/protected/admin", &["admin", "user"]),
                ("/protected/ops", &["user", "admin"]),
            ],
            &Inherited::default(),
        );
        let updaters = plan_ingresses("web", d, std::slice::from_ref(&l));
        assert_eq!(updaters.len(), 1);
        let c = updaters[0].plan("shop", Some(&l)).unwrap();
        assert_eq!(c.action(), Action::Update);
        assert_eq!(c.name, "web-admin");
        assert_eq!(c.live.as_ref().unwrap().uid(), "uid-web-admin");
        let both = json!([
            http_path("/web/protected/admin"),
            http_path("/web/protected/ops")
        ]);
        // Only the first rule changes; the second already has both paths.
        assert_eq!(
            c.fields,
            vec![FieldChange::new(
                "spec.rules[host=shop.example.com].http.paths",
                Some(json!([http_path("/web/protected/admin")])),
                Some(both.clone())
            )]
        );
        assert_eq!(
            c.write,
            Some(Write::Patch {
                base: Base::new("203", "uid-web-admin").unwrap(),
                patch_type: PatchType::Merge,
                body: json!({"spec": {"rules": [
                    {"host": "shop.example.com", "futureRuleField": true,
                     "http": {"futureHttpField": 1, "paths": both.clone()}},
                    {"host": "www.example.com", "http": {"paths": both.clone()}}
                ]}})
            })
        );
        assert_eq!(
            c.after.as_ref().unwrap()["spec"],
            json!({
                "ingressClassName": "nginx",
                "rules": [
                    {"host": "shop.example.com", "http": {"paths": both.clone()}},
                    {"host": "www.example.com", "http": {"paths": both}}
                ],
                "tls": [{"hosts": ["shop.example.com"], "secretName": "shop-tls"}]
            })
        );
        // The view shows only the owned labels and annotation.
        assert_eq!(
            c.before.as_ref().unwrap()["metadata"],
            json!({
                "name": "web-admin",
                "namespace": "shop",
                "labels": {"app": "web", "identifier": "4f515e078b8f8861"},
                "annotations": {SNIPPET_ANNOTATION: FIXTURE_31_SNIPPET}
            })
        );
        assert_eq!(
            c.ingress.unwrap().paths,
            s(&["/protected/admin", "/protected/ops"])
        );
    }

    #[test]
    fn update_rewrites_a_changed_snippet_as_a_merge_key() {
        let l = live(
            "web-admin",
            "4f515e078b8f8861",
            "rewrite ^/web/(.*)$ /$1 last;\n",
            &["/web/protected/admin"],
        );
        let d = desired(
            &[("/protected/admin", &["admin", "user"])],
            &Inherited::default(),
        );
        let c = plan_ingresses("web", d, std::slice::from_ref(&l))[0]
            .plan("shop", Some(&l))
            .unwrap();
        assert_eq!(
            c.fields,
            vec![FieldChange::new(
                "metadata.annotations[nginx.ingress.kubernetes.io/configuration-snippet]",
                Some(json!("rewrite ^/web/(.*)$ /$1 last;\n")),
                Some(json!(FIXTURE_31_SNIPPET))
            )]
        );
        assert_eq!(
            c.write,
            Some(Write::Patch {
                base: Base::new("203", "uid-web-admin").unwrap(),
                patch_type: PatchType::Merge,
                body: json!({"metadata": {"annotations": {SNIPPET_ANNOTATION: FIXTURE_31_SNIPPET}}})
            })
        );
    }

    #[test]
    fn an_ingress_without_rules_gets_one_without_host() {
        let mut l = live("web-public", "e3b0c44298fc1c14", FIXTURE_30_SNIPPET, &[]);
        l["spec"] = json!({"ingressClassName": "nginx"});
        let d = desired(&[("/a", &[])], &Inherited::default());
        let c = plan_ingresses("web", d, std::slice::from_ref(&l))[0]
            .plan("shop", Some(&l))
            .unwrap();
        assert_eq!(
            c.fields,
            vec![FieldChange::new(
                "spec.rules[0].http.paths",
                None,
                Some(json!([http_path("/web/a")]))
            )]
        );
        assert_eq!(
            c.write,
            Some(Write::Patch {
                base: Base::new("203", "uid-web-public").unwrap(),
                patch_type: PatchType::Merge,
                body: json!({"spec": {"rules": [{"http": {"paths": [http_path("/web/a")]}}]}})
            })
        );
    }

    #[test]
    fn removed_groups_are_deleted_and_unmanaged_ingresses_ignored() {
        let public = live(
            "web-public",
            "e3b0c44298fc1c14",
            FIXTURE_30_SNIPPET,
            &["/web/a"],
        );
        let admin = live(
            "web-admin",
            "4f515e078b8f8861",
            FIXTURE_31_SNIPPET,
            &["/web/protected/admin", "/web/protected/ops"],
        );
        let mut other = live("other", "", "", &["/other"]);
        other["metadata"]["labels"] = json!({"app": "web"});
        let mut foreign = live("shop-x", "4f515e078b8f8861", "", &["/shop"]);
        foreign["metadata"]["labels"]["app"] = json!("shop");
        let all = [public.clone(), admin.clone(), other, foreign];
        let d = desired(&[("/a", &[])], &Inherited::default());
        let updaters = plan_ingresses("web", d, &all);
        let names: Vec<&str> = updaters.iter().map(|u| u.name()).collect();
        assert_eq!(names, ["web-public", "web-admin"]);

        let c = updaters[1].plan("shop", Some(&admin)).unwrap();
        assert_eq!(c.action(), Action::Delete);
        assert_eq!(
            c.write,
            Some(Write::Delete {
                base: Base::new("203", "uid-web-admin").unwrap()
            })
        );
        assert_eq!(c.after, None);
        let view = focused_view(&admin, "shop", "web-admin");
        assert_eq!(c.before, Some(view.clone()));
        assert_eq!(c.fields, vec![FieldChange::new(".", Some(view), None)]);
        assert_eq!(
            c.ingress,
            Some(IngressInfo {
                identifier: "4f515e078b8f8861".into(),
                scopes: s(&["admin", "user"]),
                paths: s(&["/protected/admin", "/protected/ops"]),
            })
        );
        let gone = updaters[1].plan("shop", None).unwrap();
        assert_eq!(gone.action(), Action::Unchanged);
        assert!(gone.write.is_none());
    }

    #[test]
    fn several_live_ingresses_with_one_identifier_keep_one() {
        let a = live(
            "web-zzz",
            "e3b0c44298fc1c14",
            FIXTURE_30_SNIPPET,
            &["/web/a"],
        );
        let b = live(
            "web-aaa",
            "e3b0c44298fc1c14",
            FIXTURE_30_SNIPPET,
            &["/web/a"],
        );
        let c = live(
            "web-e3b0c44298fc1c14",
            "e3b0c44298fc1c14",
            FIXTURE_30_SNIPPET,
            &["/web/a"],
        );
        let d = desired(&[("/a", &[])], &Inherited::default());
        // Each updater planned against the live object of its name: the one kept is already
        // converged, the others are deleted.
        let fates = |live: &[Value]| -> Vec<String> {
            plan_ingresses("web", d.clone(), live)
                .iter()
                .map(|u| {
                    let obj = live.iter().find(|o| name_of(o) == Some(u.name()));
                    let change = u.plan("shop", obj).unwrap();
                    format!("{}:{}", u.name(), change.action())
                })
                .collect()
        };
        assert_eq!(
            fates(&[a.clone(), b.clone(), c]),
            [
                "web-e3b0c44298fc1c14:unchanged",
                "web-aaa:delete",
                "web-zzz:delete"
            ]
        );
        assert_eq!(fates(&[a, b]), ["web-aaa:unchanged", "web-zzz:delete"]);
    }

    #[test]
    fn an_updater_refuses_an_object_that_is_not_this_groups_ingress() {
        let d = desired(&[("/a", &[])], &Inherited::default());
        let u = IngressUpdater {
            name: d[0].name.clone(),
            desired: d[0].clone(),
        };
        let mut l = live(&d[0].name, "e3b0c44298fc1c14", "", &[]);
        l["metadata"]["labels"] = json!({"app": "web"});
        assert_eq!(
            u.plan("shop", Some(&l)).unwrap_err().to_string(),
            "ingress.networking.k8s.io/web-e3b0c44298fc1c14: exists but is not the managed Ingress of this scope group (it lacks the labels app=web and identifier=e3b0c44298fc1c14), so it is left alone; rename or remove it and run again"
        );
    }

    #[test]
    fn the_guard_sees_competing_changes_to_owned_parts() {
        let l = live(
            "web-public",
            "e3b0c44298fc1c14",
            FIXTURE_30_SNIPPET,
            &["/web/a"],
        );
        let d = desired(&[("/a", &[]), ("/b", &[])], &Inherited::default());
        let u = &plan_ingresses("web", d, std::slice::from_ref(&l))[0];
        let approved = u.plan("shop", Some(&l)).unwrap();
        assert_eq!(approved.action(), Action::Update);

        // A foreign label changed: the same change proceeds.
        let mut relabelled = l.clone();
        relabelled["metadata"]["labels"]["team"] = json!("x");
        relabelled["metadata"]["resourceVersion"] = json!("300");
        assert!(matches!(
            recheck(&approved, u.plan("shop", Some(&relabelled)).unwrap()),
            Recheck::Proceed(_)
        ));
        // Someone else changed the paths: tripped.
        let mut moved = l.clone();
        moved["spec"]["rules"][0]["http"]["paths"] = json!([http_path("/web/c")]);
        assert!(matches!(
            recheck(&approved, u.plan("shop", Some(&moved)).unwrap()),
            Recheck::Tripped(_)
        ));
        // Someone already wrote the desired paths.
        let mut done = l.clone();
        done["spec"]["rules"][0]["http"]["paths"] =
            json!([http_path("/web/a"), http_path("/web/b")]);
        assert_eq!(
            recheck(&approved, u.plan("shop", Some(&done)).unwrap()),
            Recheck::AlreadyDone
        );

        // A delete trips when the owned view changed, proceeds when only foreign parts did.
        let r = IngressRemoval::new("web", "web-public");
        let approved = r.plan("shop", Some(&l)).unwrap();
        assert!(matches!(
            recheck(&approved, r.plan("shop", Some(&relabelled)).unwrap()),
            Recheck::Proceed(_)
        ));
        assert!(matches!(
            recheck(&approved, r.plan("shop", Some(&moved)).unwrap()),
            Recheck::Tripped(_)
        ));
    }
}
