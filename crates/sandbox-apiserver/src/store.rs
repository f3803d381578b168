//! The object store and the request paths of the real handlers (create, update, patch, delete,
//! get, list), with their order of checks: body decoding (400) → existence (404) →
//! preconditions (409) → validation (422). One revision counter is shared by every object.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::fieldset;
use crate::gojson;
use crate::kinds::{self, Kind};
use crate::patch::{self, SmpError};
use crate::schema;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::{self, FieldError, StatusBody};
use crate::timefmt;

/// One change, as watchers see it.
#[derive(Debug, Clone)]
pub struct Event {
    pub rv: u64,
    pub kind: &'static Kind,
    pub event_type: &'static str,
    pub namespace: String,
    pub name: String,
    /// The object after the change (for DELETED: the last state, with the deletion revision).
    pub object: Value,
    /// The object before the change (MODIFIED only), for selector transitions.
    pub old: Option<Value>,
}

/// `?fieldValidation=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

/// Who is writing and how.
#[derive(Debug, Clone)]
pub struct WriteCtx {
    pub manager: String,
    pub dry_run: bool,
    pub field_validation: FieldValidation,
    /// An injected conflict: answer the stale-resourceVersion 409 where the precondition check
    /// happens (after decoding and the existence check).
    pub inject_conflict: bool,
}

/// A successful response: status code, body and `Warning` texts.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub code: u16,
    pub body: Value,
    pub warnings: Vec<String>,
}

type Key = (&'static str, String, String);

/// The store key of an object: cluster-scoped kinds are stored without a namespace, whatever
/// namespace the request path named.
fn key(k: &'static Kind, ns: &str, name: &str) -> Key {
    let ns = if k.namespaced { ns } else { "" };
    (k.resource, ns.to_string(), name.to_string())
}

pub struct State {
    pub rv: u64,
    objects: BTreeMap<Key, Value>,
    pub history: Vec<Arc<Event>>,
    cluster_ips: Vec<String>,
    node_ports: Vec<i64>,
    /// Watchers subscribe while holding the state lock, so no event is missed or duplicated.
    pub events: tokio::sync::broadcast::Sender<Arc<Event>>,
}

const HISTORY_LIMIT: usize = 100_000;

fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let Value::Object(root) = obj else {
        unreachable!("made an object above")
    };
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    let Value::Object(m) = meta else {
        unreachable!("made an object above")
    };
    m
}

fn random_suffix(n: usize) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let bytes = *uuid::Uuid::new_v4().as_bytes();
    (0..n)
        .map(|i| char::from(ALPHABET[bytes[i % 16] as usize % ALPHABET.len()]))
        .collect()
}

fn etcd_key(k: &Kind, ns: &str, name: &str) -> String {
    let prefix = match k.resource {
        "services" => "services/specs",
        "ingresses" => "ingress",
        other => other,
    };
    if ns.is_empty() {
        format!("/registry/{prefix}/{name}")
    } else {
        format!("/registry/{prefix}/{ns}/{name}")
    }
}

/// Registered API versions per kind (what the scheme could decode).
fn registered_versions(k: &Kind) -> &'static [&'static str] {
    match k.kind {
        "HorizontalPodAutoscaler" => &["autoscaling/v2", "autoscaling/v1"],
        _ => &[],
    }
}

fn internal_pkg(k: &Kind) -> &'static str {
    match k.group {
        "" => "core",
        "networking.k8s.io" => "networking",
        other => other,
    }
}

/// Decode a request body into the kind's canonical form (`transformDecodeError` texts).
pub fn decode_body(
    k: &Kind,
    body: &[u8],
    fv: FieldValidation,
) -> Result<(Value, Vec<String>), StatusBody> {
    let unrecognized = |err: &str| {
        status::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): {err} ({})",
            k.kind,
            summarize(body)
        ))
    };
    let value = gojson::parse(body)
        .map_err(|e| unrecognized(&format!("couldn't get version/kind; json parse error: {e}")))?;
    let Value::Object(m) = &value else {
        let what = match &value {
            Value::Array(_) => "array",
            Value::String(_) => "string",
            Value::Number(_) => "number",
            Value::Bool(_) => "bool",
            _ => "null",
        };
        if value.is_null() {
            return Err(status::bad_request(format!(
                "Object 'Kind' is missing in '{}'",
                String::from_utf8_lossy(body).trim_end()
            )));
        }
        return Err(unrecognized(&format!(
            "couldn't get version/kind; json parse error: json: cannot unmarshal {what} into Go value of type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}"
        )));
    };
    for f in ["apiVersion", "kind"] {
        if let Some(v) = m.get(f)
            && !v.is_string()
            && !v.is_null()
        {
            let what = match v {
                Value::Array(_) => "array",
                Value::Object(_) => "object",
                Value::Number(_) => "number",
                _ => "bool",
            };
            return Err(unrecognized(&format!(
                "couldn't get version/kind; json parse error: json: cannot unmarshal {what} into Go struct field .{f} of type string"
            )));
        }
    }
    let body_kind = m
        .get("kind")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or(k.kind);
    let body_av = m
        .get("apiVersion")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or(k.api_version);
    let version = body_av.rsplit('/').next().unwrap_or(body_av);
    let prefix = format!(
        "{body_kind} in version \"{version}\" cannot be handled as a {}",
        k.kind
    );
    if body_kind != k.kind {
        let msg = match kinds::by_kind(body_kind) {
            Some(other) if other.api_version == body_av => format!(
                "{prefix}: converting ({version}.{body_kind}) to ({}.{}): unknown conversion",
                internal_pkg(k),
                k.kind
            ),
            _ => format!(
                "{prefix}: no kind \"{body_kind}\" is registered for version \"{body_av}\" in scheme \"pkg/api/legacyscheme/scheme.go:30\""
            ),
        };
        return Err(status::bad_request(msg));
    }
    if body_av != k.api_version {
        if registered_versions(k).contains(&body_av) {
            return Err(status::bad_request(format!(
                "the API version in the data ({body_av}) does not match the expected API version ({})",
                k.api_version
            )));
        }
        return Err(status::bad_request(format!(
            "{prefix}: no kind \"{body_kind}\" is registered for version \"{body_av}\" in scheme \"pkg/api/legacyscheme/scheme.go:30\""
        )));
    }
    let decoded = schema::canonicalize(k.type_idx, &value)
        .map_err(|e| status::bad_request(format!("{prefix}: {e}")))?;
    let mut warnings = Vec::new();
    if !decoded.unknown.is_empty() {
        let texts: Vec<String> = decoded
            .unknown
            .iter()
            .map(|f| format!("unknown field \"{f}\""))
            .collect();
        match fv {
            FieldValidation::Strict => {
                return Err(status::bad_request(format!(
                    "{prefix}: strict decoding error: {}",
                    texts.join(", ")
                )));
            }
            FieldValidation::Warn => warnings = texts,
            FieldValidation::Ignore => {}
        }
    }
    Ok((decoded.value, warnings))
}

/// `summarizeData(body, 30)`.
fn summarize(body: &[u8]) -> String {
    if body.is_empty() {
        return "<empty>".into();
    }
    if body[0] == b'{' {
        if body.len() > 30 {
            return format!("{} ...", String::from_utf8_lossy(&body[..30]));
        }
        return String::from_utf8_lossy(body).into_owned();
    }
    let hex: String = body.iter().take(30).map(|b| format!("{b:02x}")).collect();
    if body.len() > 30 {
        format!("{hex} ...")
    } else {
        hex
    }
}

/// Defaulting happens at decode time; re-encode to restore Go field order.
fn default_and_normalize(k: &Kind, obj: &mut Value) {
    kinds::apply_defaults(k, obj);
    *obj = schema::normalize(k.type_idx, obj);
}

impl State {
    pub fn new(start_rv: u64) -> Self {
        let (events, _) = tokio::sync::broadcast::channel(8192);
        State {
            rv: start_rv,
            objects: BTreeMap::new(),
            history: Vec::new(),
            cluster_ips: Vec::new(),
            node_ports: Vec::new(),
            events,
        }
    }

    pub fn get_object(&self, k: &'static Kind, ns: &str, name: &str) -> Option<&Value> {
        self.objects
            .get(&(k.resource, ns.to_string(), name.to_string()))
    }

    fn emit(
        &mut self,
        k: &'static Kind,
        event_type: &'static str,
        obj: &Value,
        old: Option<Value>,
    ) {
        let ev = Arc::new(Event {
            rv: self.rv,
            kind: k,
            event_type,
            namespace: meta_str(obj, "namespace").to_string(),
            name: meta_str(obj, "name").to_string(),
            object: kinds::with_type_meta(k, obj),
            old: old.map(|o| kinds::with_type_meta(k, &o)),
        });
        self.history.push(ev.clone());
        if self.history.len() > HISTORY_LIMIT {
            let drop = self.history.len() - HISTORY_LIMIT;
            self.history.drain(..drop);
        }
        // No receiver is fine: nobody is watching.
        let _ = self.events.send(ev);
    }

    fn namespace_exists(&self, ns: &str) -> bool {
        self.objects
            .contains_key(&("namespaces", String::new(), ns.to_string()))
    }

    fn allocate_cluster_ip(&mut self) -> String {
        loop {
            let b = *uuid::Uuid::new_v4().as_bytes();
            // 10.96.0.0/12 without the network, the first (kubernetes) and broadcast addresses.
            let n = (u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2])) & 0x000F_FFFF;
            if n < 2 || n == 0x000F_FFFF {
                continue;
            }
            let ip = format!("10.{}.{}.{}", 96 + (n >> 16), (n >> 8) & 0xFF, n & 0xFF);
            if !self.cluster_ips.contains(&ip) {
                return ip;
            }
        }
    }

    fn allocate_node_port(&mut self) -> i64 {
        loop {
            let b = *uuid::Uuid::new_v4().as_bytes();
            let p = 30000 + i64::from(u16::from_be_bytes([b[0], b[1]]) % 2768);
            if !self.node_ports.contains(&p) {
                return p;
            }
        }
    }

    /// The Service REST layer: cluster IPs, IP families, node ports (after the field manager,
    /// so none of it shows in managedFields). `old` on update: keep what was allocated.
    fn allocate_service(&mut self, obj: &mut Value, old: Option<&Value>, dry_run: bool) {
        let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
            return;
        };
        let ty = spec
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("ClusterIP")
            .to_string();
        if ty == "ExternalName" {
            return;
        }
        let old_spec = old.and_then(|o| o.get("spec"));
        for f in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            if spec
                .get(f)
                .is_none_or(|v| v.is_null() || v == "" || v.as_array().is_some_and(Vec::is_empty))
                && let Some(v) = old_spec.and_then(|s| s.get(f))
            {
                spec.insert(f.into(), v.clone());
            }
        }
        let ip = match spec.get("clusterIP").and_then(Value::as_str) {
            Some(ip) if !ip.is_empty() => ip.to_string(),
            _ => {
                let ip = self.allocate_cluster_ip();
                if !dry_run {
                    self.cluster_ips.push(ip.clone());
                }
                ip
            }
        };
        spec.insert("clusterIP".into(), json!(ip));
        if spec
            .get("clusterIPs")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
        {
            spec.insert("clusterIPs".into(), json!([ip]));
        }
        if spec
            .get("ipFamilies")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
        {
            spec.insert("ipFamilies".into(), json!(["IPv4"]));
        }
        if spec.get("ipFamilyPolicy").is_none() {
            spec.insert("ipFamilyPolicy".into(), json!("SingleStack"));
        }
        if ty == "NodePort" || ty == "LoadBalancer" {
            let old_ports: Vec<Value> = old_spec
                .and_then(|s| s.get("ports"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let mut allocated = Vec::new();
            if let Some(Value::Array(ports)) = spec.get_mut("ports") {
                for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                    if p.get("nodePort").and_then(Value::as_i64).unwrap_or(0) == 0 {
                        let reuse = old_ports
                            .iter()
                            .find(|o| o.get("port") == p.get("port"))
                            .and_then(|o| o.get("nodePort"))
                            .cloned();
                        match reuse {
                            Some(np) => {
                                p.insert("nodePort".into(), np);
                            }
                            None => allocated.push(p),
                        }
                    }
                }
            }
            for p in allocated {
                let np = self.allocate_node_port();
                if !dry_run {
                    self.node_ports.push(np);
                }
                p.insert("nodePort".into(), json!(np));
            }
        }
        *obj = schema::normalize(schema::SERVICE, obj);
    }

    /// POST a collection.
    pub fn create(
        &mut self,
        k: &'static Kind,
        ns: &str,
        body: &[u8],
        ctx: &WriteCtx,
    ) -> Result<Outcome, StatusBody> {
        let (obj, warnings) = decode_body(k, body, ctx.field_validation)?;
        self.create_decoded(k, ns, obj, warnings, ctx)
    }

    pub fn create_decoded(
        &mut self,
        k: &'static Kind,
        ns: &str,
        mut obj: Value,
        warnings: Vec<String>,
        ctx: &WriteCtx,
    ) -> Result<Outcome, StatusBody> {
        {
            let meta = meta_mut(&mut obj);
            let obj_ns = meta
                .get("namespace")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if k.namespaced {
                if !obj_ns.is_empty() && obj_ns != ns {
                    return Err(status::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                meta.insert("namespace".into(), json!(ns));
            } else {
                meta.remove("namespace");
            }
        }
        default_and_normalize(k, &mut obj);
        let now = timefmt::now_rfc3339();
        fieldset::apply_update(
            &fieldset::Update {
                root_type: k.type_idx,
                manager: &ctx.manager,
                api_version: k.api_version,
                subresource: "",
                now: &now,
            },
            None,
            &mut obj,
        );
        if k.namespaced && !self.namespace_exists(ns) {
            return Err(status::namespace_not_found(ns));
        }
        {
            let meta = meta_mut(&mut obj);
            let name = meta
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let gen_name = meta
                .get("generateName")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if name.is_empty() && !gen_name.is_empty() {
                meta.insert(
                    "name".into(),
                    json!(format!("{gen_name}{}", random_suffix(5))),
                );
            }
            meta.remove("deletionTimestamp");
            meta.remove("deletionGracePeriodSeconds");
        }
        kinds::prepare_create(k, &mut obj);
        {
            let meta = meta_mut(&mut obj);
            meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
            meta.insert("creationTimestamp".into(), json!(now));
        }
        if k.kind == "Service" {
            self.allocate_service(&mut obj, None, ctx.dry_run);
        }
        obj = schema::normalize(k.type_idx, &obj);
        let errs = crate::validation::validate(k, &obj, None);
        let name = meta_str(&obj, "name").to_string();
        if !errs.is_empty() {
            return Err(status::invalid(k, &name, &errs));
        }
        let key = key(k, ns, &name);
        // etcd3's Create refuses a resourceVersion with a plain error (500, no reason) before it
        // looks for an existing key; the dry-run storage does not check it.
        if !ctx.dry_run && !meta_str(&obj, "resourceVersion").is_empty() {
            return Err(StatusBody::new(
                500,
                "",
                "resourceVersion should not be set on objects to be created",
                None,
            ));
        }
        if self.objects.contains_key(&key) {
            return Err(status::already_exists(k, &name));
        }
        if ctx.dry_run {
            return Ok(Outcome {
                code: 201,
                body: kinds::with_type_meta(k, &obj),
                warnings,
            });
        }
        if k.kind == "Service" {
            // The ClusterIP allocator persists its bitmap in etcd: one more revision.
            self.rv += 1;
        }
        self.rv += 1;
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(self.rv.to_string()));
        obj = schema::normalize(k.type_idx, &obj);
        self.objects.insert(key, obj.clone());
        self.emit(k, "ADDED", &obj, None);
        Ok(Outcome {
            code: 201,
            body: kinds::with_type_meta(k, &obj),
            warnings,
        })
    }

    /// PUT an object.
    pub fn update(
        &mut self,
        k: &'static Kind,
        ns: &str,
        name: &str,
        body: &[u8],
        ctx: &WriteCtx,
    ) -> Result<Outcome, StatusBody> {
        let (obj, warnings) = decode_body(k, body, ctx.field_validation)?;
        let obj_name = meta_str(&obj, "name");
        if obj_name != name {
            return Err(status::bad_request(format!(
                "the name of the object ({obj_name}) does not match the name on the URL ({name})"
            )));
        }
        let obj_ns = meta_str(&obj, "namespace");
        if k.namespaced && !obj_ns.is_empty() && obj_ns != ns {
            return Err(status::bad_request(format!(
                "the namespace of the object ({obj_ns}) does not match the namespace on the request ({ns})"
            )));
        }
        self.update_decoded(k, ns, name, obj, warnings, ctx)
    }

    fn update_decoded(
        &mut self,
        k: &'static Kind,
        ns: &str,
        name: &str,
        mut obj: Value,
        warnings: Vec<String>,
        ctx: &WriteCtx,
    ) -> Result<Outcome, StatusBody> {
        let key = key(k, ns, name);
        if k.namespaced {
            meta_mut(&mut obj).insert("namespace".into(), json!(ns));
        } else {
            meta_mut(&mut obj).remove("namespace");
        }
        default_and_normalize(k, &mut obj);
        let Some(old) = self.objects.get(&key).cloned() else {
            let rv = meta_str(&obj, "resourceVersion");
            if k.create_on_update && rv.is_empty() {
                return self.create_decoded(k, ns, obj, warnings, ctx);
            }
            return Err(status::not_found(k, name));
        };
        self.check_update_preconditions(ctx.inject_conflict, k, ns, name, &obj, &old)?;
        self.finish_update(k, key, obj, old, warnings, ctx)
    }

    fn check_update_preconditions(
        &self,
        inject_conflict: bool,
        k: &Kind,
        ns: &str,
        name: &str,
        obj: &Value,
        old: &Value,
    ) -> Result<(), StatusBody> {
        if inject_conflict {
            return Err(status::conflict_modified(k, name));
        }
        let uid = meta_str(obj, "uid");
        if !uid.is_empty() && uid != meta_str(old, "uid") {
            return Err(status::conflict(
                k.group,
                k.resource,
                name,
                &format!(
                    "StorageError: invalid object, Code: 4, Key: {}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    etcd_key(k, if k.namespaced { ns } else { "" }, name),
                    meta_str(old, "uid")
                ),
            ));
        }
        let rv = meta_str(obj, "resourceVersion");
        if !rv.is_empty() {
            if rv.parse::<u64>().is_err() {
                return Err(status::internal(&format!(
                    "resourceVersion: Invalid value: {}: strconv.ParseUint: parsing {}: invalid syntax",
                    status::go_quote(rv),
                    status::go_quote(rv)
                )));
            }
            if rv != meta_str(old, "resourceVersion") {
                return Err(status::conflict_modified(k, name));
            }
        }
        Ok(())
    }

    fn finish_update(
        &mut self,
        k: &'static Kind,
        key: Key,
        mut obj: Value,
        old: Value,
        warnings: Vec<String>,
        ctx: &WriteCtx,
    ) -> Result<Outcome, StatusBody> {
        let name = key.2.clone();
        kinds::prepare_update(k, &mut obj, &old);
        meta_mut(&mut obj).insert(
            "resourceVersion".into(),
            json!(meta_str(&old, "resourceVersion")),
        );
        if k.kind == "Service" {
            self.allocate_service(&mut obj, Some(&old), ctx.dry_run);
        }
        obj = schema::normalize(k.type_idx, &obj);
        let errs = crate::validation::validate(k, &obj, Some(&old));
        if !errs.is_empty() {
            return Err(status::invalid(k, &name, &errs));
        }
        let now = timefmt::now_rfc3339();
        fieldset::apply_update(
            &fieldset::Update {
                root_type: k.type_idx,
                manager: &ctx.manager,
                api_version: k.api_version,
                subresource: "",
                now: &now,
            },
            Some(&old),
            &mut obj,
        );
        obj = schema::normalize(k.type_idx, &obj);
        if obj == old {
            return Ok(Outcome {
                code: 200,
                body: kinds::with_type_meta(k, &old),
                warnings,
            });
        }
        if ctx.dry_run {
            return Ok(Outcome {
                code: 200,
                body: kinds::with_type_meta(k, &obj),
                warnings,
            });
        }
        self.rv += 1;
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(self.rv.to_string()));
        self.objects.insert(key, obj.clone());
        self.emit(k, "MODIFIED", &obj, Some(old));
        Ok(Outcome {
            code: 200,
            body: kinds::with_type_meta(k, &obj),
            warnings,
        })
    }

    /// PATCH an object. `content_type` is the media type without parameters.
    pub fn patch(
        &mut self,
        k: &'static Kind,
        ns: &str,
        name: &str,
        content_type: &str,
        body: &[u8],
        ctx: &WriteCtx,
    ) -> Result<Outcome, StatusBody> {
        let key = key(k, ns, name);
        let Some(old) = self.objects.get(&key).cloned() else {
            return Err(status::not_found(k, name));
        };
        let current = kinds::with_type_meta(k, &old);
        let patched = match content_type {
            "application/json-patch+json" => {
                let ops = gojson::parse(body).map_err(status::bad_request)?;
                let Value::Array(ops) = ops else {
                    return Err(status::bad_request(
                        "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
                    ));
                };
                // The real server loses the cause: a generic 422.
                patch::json_patch(&current, &ops).map_err(|_| status::generic(422, ""))?
            }
            "application/merge-patch+json" => {
                let p =
                    gojson::parse(body).map_err(|_| status::bad_request("Invalid JSON Patch"))?;
                if let Value::Array(_) = &p {
                    // evanphx/json-patch returns the array itself, which then fails to decode.
                    return Err(status::invalid_kind(
                        "",
                        "",
                        "",
                        &[FieldError::invalid(
                            "patch",
                            &status::go_quote(&serde_json::to_string(&p).unwrap_or_default()),
                            "couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }",
                        )],
                    ));
                }
                if !p.is_object() {
                    return Err(status::bad_request("Invalid JSON Patch"));
                }
                patch::merge_patch(&current, &p)
            }
            "application/strategic-merge-patch+json" => {
                let p = gojson::parse(body)
                    .map_err(|_| status::bad_request("invalid JSON document"))?;
                match patch::strategic_merge(&current, &p, k.type_idx) {
                    Ok(v) => v,
                    Err(SmpError::BadRequest(m)) => return Err(status::bad_request(m)),
                    Err(SmpError::Internal(m)) => return Err(status::internal(&m)),
                }
            }
            _ => return Err(status::generic(415, "415: Unsupported Media Type")),
        };
        let decoded = match schema::canonicalize(k.type_idx, &patched) {
            Ok(d) => d,
            Err(e) => {
                let compact = serde_json::to_string(&patched).unwrap_or_default();
                return Err(status::invalid_kind(
                    "",
                    "",
                    "",
                    &[FieldError::invalid(
                        "patch",
                        &status::go_quote(&compact),
                        &e.to_string(),
                    )],
                ));
            }
        };
        let mut warnings = Vec::new();
        if !decoded.unknown.is_empty() {
            let texts: Vec<String> = decoded
                .unknown
                .iter()
                .map(|f| format!("unknown field \"{f}\""))
                .collect();
            match ctx.field_validation {
                FieldValidation::Strict => {
                    return Err(status::bad_request(format!(
                        "strict decoding error: {}",
                        texts.join(", ")
                    )));
                }
                FieldValidation::Warn => warnings = texts,
                FieldValidation::Ignore => {}
            }
        }
        let obj = decoded.value;
        let obj_name = meta_str(&obj, "name");
        if obj_name != name {
            return Err(status::bad_request(format!(
                "the name of the object ({obj_name}) does not match the name on the URL ({name})"
            )));
        }
        let mut obj = obj;
        if k.namespaced {
            meta_mut(&mut obj).insert("namespace".into(), json!(ns));
        }
        default_and_normalize(k, &mut obj);
        self.check_update_preconditions(ctx.inject_conflict, k, ns, name, &obj, &old)?;
        self.finish_update(k, key, obj, old, warnings, ctx)
    }

    /// DELETE an object.
    pub fn delete(
        &mut self,
        k: &'static Kind,
        ns: &str,
        name: &str,
        options: &Value,
        dry_run: bool,
        inject_conflict: bool,
    ) -> Result<Outcome, StatusBody> {
        let key = key(k, ns, name);
        let Some(old) = self.objects.get(&key).cloned() else {
            return Err(status::not_found(k, name));
        };
        if inject_conflict {
            return Err(status::conflict_modified(k, name));
        }
        let pre = options.get("preconditions").unwrap_or(&Value::Null);
        if let Some(uid) = pre.get("uid").and_then(Value::as_str)
            && uid != meta_str(&old, "uid")
        {
            return Err(status::conflict(
                k.group,
                k.kind,
                name,
                &format!(
                    "the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated",
                    meta_str(&old, "uid")
                ),
            ));
        }
        if let Some(rv) = pre.get("resourceVersion").and_then(Value::as_str)
            && rv != meta_str(&old, "resourceVersion")
        {
            return Err(status::conflict(
                k.group,
                k.kind,
                name,
                &format!(
                    "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). The object might have been modified",
                    meta_str(&old, "resourceVersion")
                ),
            ));
        }
        let uid = meta_str(&old, "uid").to_string();
        if k.kind == "Namespace" {
            // The namespace is returned Terminating; its content goes away as the namespace
            // controller of a full cluster would remove it.
            let mut term = old.clone();
            meta_mut(&mut term).insert("deletionTimestamp".into(), json!(timefmt::now_rfc3339()));
            if let Some(st) = term.get_mut("status").and_then(Value::as_object_mut) {
                st.insert("phase".into(), json!("Terminating"));
            }
            if dry_run {
                return Ok(Outcome {
                    code: 200,
                    body: kinds::with_type_meta(k, &schema::normalize(k.type_idx, &term)),
                    warnings: vec![],
                });
            }
            self.rv += 1;
            meta_mut(&mut term).insert("resourceVersion".into(), json!(self.rv.to_string()));
            term = schema::normalize(k.type_idx, &term);
            self.objects.insert(key.clone(), term.clone());
            self.emit(k, "MODIFIED", &term, Some(old));
            let children: Vec<Key> = self
                .objects
                .keys()
                .filter(|(_, n, _)| n == name)
                .cloned()
                .collect();
            for ck in children {
                if let Some(obj) = self.objects.remove(&ck)
                    && let Some(ck_kind) = kinds::KINDS.iter().find(|x| x.resource == ck.0)
                {
                    self.rv += 1;
                    let mut gone = obj;
                    meta_mut(&mut gone)
                        .insert("resourceVersion".into(), json!(self.rv.to_string()));
                    self.emit(ck_kind, "DELETED", &gone, None);
                }
            }
            self.objects.remove(&key);
            self.rv += 1;
            let mut gone = term.clone();
            meta_mut(&mut gone).insert("resourceVersion".into(), json!(self.rv.to_string()));
            self.emit(k, "DELETED", &gone, None);
            return Ok(Outcome {
                code: 200,
                body: kinds::with_type_meta(k, &term),
                warnings: vec![],
            });
        }
        if dry_run {
            return Ok(Outcome {
                code: 200,
                body: status::delete_success(k, name, &uid),
                warnings: vec![],
            });
        }
        self.objects.remove(&key);
        self.rv += 1;
        let mut gone = old;
        meta_mut(&mut gone).insert("resourceVersion".into(), json!(self.rv.to_string()));
        self.emit(k, "DELETED", &gone, None);
        if k.kind == "Service" {
            // Releasing the ClusterIP rewrites the allocator bitmap: one more revision.
            let ip = gone
                .pointer("/spec/clusterIP")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            self.cluster_ips.retain(|x| *x != ip);
            self.rv += 1;
        }
        Ok(Outcome {
            code: 200,
            body: status::delete_success(k, name, &uid),
            warnings: vec![],
        })
    }

    pub fn get(&self, k: &'static Kind, ns: &str, name: &str) -> Result<Value, StatusBody> {
        let ns = if k.namespaced { ns } else { "" };
        self.get_object(k, ns, name)
            .map(|o| kinds::with_type_meta(k, o))
            .ok_or_else(|| status::not_found(k, name))
    }

    /// Objects of `k` in `ns` (`None`: all namespaces), in storage (key) order.
    pub fn select(&self, k: &'static Kind, ns: Option<&str>, sel: &Selectors) -> Vec<&Value> {
        self.objects
            .iter()
            .filter(|((r, n, _), _)| {
                *r == k.resource && ns.is_none_or(|ns| !k.namespaced || n == ns)
            })
            .map(|(_, v)| v)
            .filter(|v| sel.matches(k, v))
            .collect()
    }

    /// PUT or PATCH of the `status` or `scale` subresource. `patch_type` is `None` for PUT.
    #[allow(clippy::too_many_arguments)]
    pub fn update_subresource(
        &mut self,
        k: &'static Kind,
        ns: &str,
        name: &str,
        sub: &str,
        patch_type: Option<&str>,
        body: &[u8],
        ctx: &WriteCtx,
    ) -> Result<Outcome, StatusBody> {
        let key = key(k, ns, name);
        let Some(old) = self.objects.get(&key).cloned() else {
            return Err(status::not_found(k, name));
        };
        let current = if sub == "scale" {
            scale_of(&old)
        } else {
            kinds::with_type_meta(k, &old)
        };
        let incoming = match patch_type {
            None => gojson::parse(body).map_err(|e| {
                status::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
            })?,
            Some("application/json-patch+json") => {
                let Value::Array(ops) = gojson::parse(body).map_err(status::bad_request)? else {
                    return Err(status::bad_request(
                        "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
                    ));
                };
                patch::json_patch(&current, &ops).map_err(|_| status::generic(422, ""))?
            }
            Some("application/merge-patch+json") => {
                let p =
                    gojson::parse(body).map_err(|_| status::bad_request("Invalid JSON Patch"))?;
                patch::merge_patch(&current, &p)
            }
            Some(_) => {
                let p = gojson::parse(body)
                    .map_err(|_| status::bad_request("invalid JSON document"))?;
                if sub == "scale" {
                    // Scale has no list fields: a strategic merge is a plain merge.
                    patch::merge_patch(&current, &p)
                } else {
                    match patch::strategic_merge(&current, &p, k.type_idx) {
                        Ok(v) => v,
                        Err(SmpError::BadRequest(m)) => return Err(status::bad_request(m)),
                        Err(SmpError::Internal(m)) => return Err(status::internal(&m)),
                    }
                }
            }
        };
        let in_name = incoming
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        if patch_type.is_none() && in_name != name {
            return Err(status::bad_request(format!(
                "the name of the object ({in_name}) does not match the name on the URL ({name})"
            )));
        }
        let mut check = json!({"metadata": {}});
        for f in ["uid", "resourceVersion"] {
            if let Some(v) = incoming.pointer(&format!("/metadata/{f}")) {
                check["metadata"][f] = v.clone();
            }
        }
        self.check_update_preconditions(ctx.inject_conflict, k, ns, name, &check, &old)?;
        let mut new = old.clone();
        let manager_sub = if sub == "scale" { "scale" } else { "status" };
        if sub == "scale" {
            let replicas = match incoming.pointer("/spec/replicas") {
                None | Some(Value::Null) => 0,
                Some(Value::Number(n)) if n.as_i64().is_some_and(|r| i32::try_from(r).is_ok()) => {
                    n.as_i64().unwrap_or(0)
                }
                Some(other) => {
                    return Err(status::bad_request(format!(
                        "Scale in version \"v1\" cannot be handled as a Scale: json: cannot unmarshal {} into Go struct field ScaleSpec.spec.replicas of type int32",
                        if other.is_string() {
                            "string".to_string()
                        } else {
                            format!("number {other}")
                        }
                    )));
                }
            };
            if replicas < 0 {
                return Err(status::invalid_kind(
                    "autoscaling",
                    "Scale",
                    name,
                    &[FieldError::invalid(
                        "spec.replicas",
                        &replicas.to_string(),
                        "must be greater than or equal to 0",
                    )],
                ));
            }
            if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
                spec.insert("replicas".into(), json!(replicas));
            }
            kinds::prepare_update(k, &mut new, &old);
        } else {
            let decoded = schema::canonicalize(k.type_idx, &incoming).map_err(|e| {
                status::bad_request(format!(
                    "{} in version \"{}\" cannot be handled as a {}: {e}",
                    k.kind, k.version, k.kind
                ))
            })?;
            if let (Some(m), Some(s)) = (new.as_object_mut(), decoded.value.get("status")) {
                m.insert("status".into(), s.clone());
            }
        }
        new = schema::normalize(k.type_idx, &new);
        let errs = crate::validation::validate(k, &new, Some(&old));
        if !errs.is_empty() {
            return Err(status::invalid(k, name, &errs));
        }
        let now = timefmt::now_rfc3339();
        fieldset::apply_update(
            &fieldset::Update {
                root_type: k.type_idx,
                manager: &ctx.manager,
                api_version: k.api_version,
                subresource: manager_sub,
                now: &now,
            },
            Some(&old),
            &mut new,
        );
        new = schema::normalize(k.type_idx, &new);
        let render = |obj: &Value| {
            if sub == "scale" {
                scale_of(obj)
            } else {
                kinds::with_type_meta(k, obj)
            }
        };
        if new == old || ctx.dry_run {
            let shown = if new == old { &old } else { &new };
            return Ok(Outcome {
                code: 200,
                body: render(shown),
                warnings: vec![],
            });
        }
        self.rv += 1;
        meta_mut(&mut new).insert("resourceVersion".into(), json!(self.rv.to_string()));
        self.objects.insert(key, new.clone());
        self.emit(k, "MODIFIED", &new, Some(old));
        Ok(Outcome {
            code: 200,
            body: render(&new),
            warnings: vec![],
        })
    }

    /// A server-side change (rollout controller, competing writer): mutate and store, bumping the
    /// revision, with the usual generation rules and managedFields for `manager`.
    pub fn system_update(
        &mut self,
        k: &'static Kind,
        ns: &str,
        name: &str,
        manager: &str,
        subresource: &str,
        mutate: &mut dyn FnMut(&mut Value),
    ) -> Result<Value, StatusBody> {
        let key = key(k, ns, name);
        let Some(old) = self.objects.get(&key).cloned() else {
            return Err(status::not_found(k, name));
        };
        let mut obj = kinds::with_type_meta(k, &old);
        mutate(&mut obj);
        let mut obj = match schema::canonicalize(k.type_idx, &obj) {
            Ok(d) => d.value,
            Err(e) => return Err(status::bad_request(e.to_string())),
        };
        default_and_normalize(k, &mut obj);
        let status_after = obj.get("status").cloned();
        if subresource == "status" {
            // Status writes keep everything else.
            let mut kept = old.clone();
            if let (Some(m), Some(s)) = (kept.as_object_mut(), status_after) {
                m.insert("status".into(), s);
            }
            obj = kept;
        } else {
            kinds::prepare_update(k, &mut obj, &old);
        }
        meta_mut(&mut obj).insert(
            "resourceVersion".into(),
            json!(meta_str(&old, "resourceVersion")),
        );
        obj = schema::normalize(k.type_idx, &obj);
        let errs = crate::validation::validate(k, &obj, Some(&old));
        if !errs.is_empty() {
            return Err(status::invalid(k, name, &errs));
        }
        let now = timefmt::now_rfc3339();
        fieldset::apply_update(
            &fieldset::Update {
                root_type: k.type_idx,
                manager,
                api_version: k.api_version,
                subresource,
                now: &now,
            },
            Some(&old),
            &mut obj,
        );
        obj = schema::normalize(k.type_idx, &obj);
        if obj == old {
            return Ok(kinds::with_type_meta(k, &old));
        }
        self.rv += 1;
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(self.rv.to_string()));
        self.objects.insert(key, obj.clone());
        self.emit(k, "MODIFIED", &obj, Some(old));
        Ok(kinds::with_type_meta(k, &obj))
    }
}

/// The `autoscaling/v1` Scale of a Deployment (the `scale` subresource).
pub fn scale_of(obj: &Value) -> Value {
    let mut meta = Map::new();
    for f in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = obj.pointer(&format!("/metadata/{f}")) {
            meta.insert(f.into(), v.clone());
        }
    }
    let mut terms: Vec<String> = Vec::new();
    if let Some(ml) = obj
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
    {
        for (k, v) in ml {
            terms.push(format!("{k}={}", v.as_str().unwrap_or("")));
        }
    }
    for e in obj
        .pointer("/spec/selector/matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        let values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        terms.push(
            match e.get("operator").and_then(Value::as_str).unwrap_or("") {
                "In" => format!("{key} in ({})", values.join(",")),
                "NotIn" => format!("{key} notin ({})", values.join(",")),
                "Exists" => key.to_string(),
                _ => format!("!{key}"),
            },
        );
    }
    terms.sort();
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": meta,
        "spec": {"replicas": obj.pointer("/spec/replicas").cloned().unwrap_or(json!(0))},
        "status": {"replicas": obj.pointer("/status/replicas").cloned().unwrap_or(json!(0)), "selector": terms.join(",")},
    })
}

/// Parsed `labelSelector` + `fieldSelector`.
#[derive(Debug, Default, Clone)]
pub struct Selectors {
    pub label: LabelSelector,
    pub field: FieldSelector,
}

impl Selectors {
    pub fn parse(
        k: &Kind,
        label: Option<&str>,
        field: Option<&str>,
    ) -> Result<Selectors, StatusBody> {
        let label = LabelSelector::parse(label.unwrap_or("")).map_err(status::bad_request)?;
        let field = FieldSelector::parse(field.unwrap_or("")).map_err(status::bad_request)?;
        for t in &field.terms {
            if !kinds::field_label_supported(k, &t.field) {
                return Err(status::bad_request(format!(
                    "field label not supported: {}",
                    t.field
                )));
            }
        }
        Ok(Selectors { label, field })
    }

    pub fn matches(&self, k: &Kind, obj: &Value) -> bool {
        let labels = obj
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object);
        self.label.matches(labels) && self.field.matches(&|f| kinds::field_value(k, obj, f))
    }
}

/// A LIST response body.
pub fn list_body(k: &Kind, items: Vec<Value>, rv: u64, cont: Option<(String, usize)>) -> Value {
    let mut meta = Map::new();
    meta.insert("resourceVersion".into(), json!(rv.to_string()));
    if let Some((token, remaining)) = cont {
        meta.insert("continue".into(), json!(token));
        meta.insert("remainingItemCount".into(), json!(remaining));
    }
    json!({"kind": k.list_kind, "apiVersion": k.api_version, "metadata": meta, "items": items})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_match_go() {
        assert_eq!(
            summarize(br#"{"apiVersion":"apps/v1","kind":"Deployment"}"#),
            r#"{"apiVersion":"apps/v1","kind" ..."#
        );
        assert_eq!(summarize(b""), "<empty>");
        assert_eq!(summarize(b"[1]"), "5b315d");
    }
}
