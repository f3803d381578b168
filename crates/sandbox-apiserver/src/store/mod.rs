//! The third layer: the object store and the request paths of the real registry (create,
//! update, patch, delete, get, list, subresources), with their order of checks: body decoding
//! (400) → existence (404) → preconditions (409) → validation (422). One revision counter is
//! shared by every object; every change is a watch [`Event`] and stays in the history.
//!
//! * [`decode`] — request bodies into a kind's canonical object;
//! * [`patch`] — JSON merge patch, JSON patch and strategic merge patch;
//! * [`managed_fields`] — `metadata.managedFields` as structured-merge-diff computes them;
//! * [`select`] — label and field selectors for a kind.
//!
//! Uses [`crate::kinds`] (each kind's strategy) and [`crate::model`].

mod decode;
pub mod managed_fields;
pub mod patch;
mod select;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::kinds::{self, Admission, Allocators, Deletion, Kind, Objects, Subresource, Webhooks};
use crate::model::gojson;
use crate::model::object::{meta_mut, meta_str};
use crate::model::schema;
use crate::model::status::{self, FieldError, StatusBody};
use crate::model::time;
use patch::SmpError;

pub use decode::{FieldValidation, decode_body};
pub use select::Selectors;

/// The store of one sandbox: everything that reads or writes objects takes this lock.
pub type Store = parking_lot::Mutex<State>;

/// One change, as watchers see it.
#[derive(Debug, Clone)]
pub struct Event {
    pub rv: u64,
    pub kind: &'static dyn Kind,
    pub event_type: &'static str,
    pub namespace: String,
    pub name: String,
    /// The object after the change (for DELETED: the last state, with the deletion revision).
    pub object: Value,
    /// The object before the change (MODIFIED only), for selector transitions.
    pub old: Option<Value>,
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
    /// Write as if no admission webhook ran (objects the sandbox seeds existed before any
    /// webhook was installed).
    pub skip_webhooks: bool,
}

/// A successful response: status code, body and `Warning` texts.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub code: u16,
    pub body: Value,
    pub warnings: Vec<String>,
}

/// (resource, group, namespace, name): sorted like etcd keys within a kind.
type Key = (&'static str, &'static str, String, String);

/// The store key of an object: cluster-scoped kinds are stored without a namespace, whatever
/// namespace the request path named.
fn key(k: &dyn Kind, ns: &str, name: &str) -> Key {
    let a = k.api();
    let ns = if a.namespaced { ns } else { "" };
    (a.resource, a.group, ns.to_string(), name.to_string())
}

pub struct State {
    pub rv: u64,
    objects: BTreeMap<Key, Value>,
    pub history: Vec<Arc<Event>>,
    alloc: Allocators,
    /// The admission webhooks the cluster runs.
    pub webhooks: Webhooks,
    /// Watchers subscribe while holding the state lock, so no event is missed or duplicated.
    pub events: tokio::sync::broadcast::Sender<Arc<Event>>,
}

const HISTORY_LIMIT: usize = 100_000;

fn random_suffix(n: usize) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let bytes = *uuid::Uuid::new_v4().as_bytes();
    (0..n)
        .map(|i| char::from(ALPHABET[bytes[i % 16] as usize % ALPHABET.len()]))
        .collect()
}

fn etcd_key(k: &dyn Kind, ns: &str, name: &str) -> String {
    let prefix = k.storage_prefix();
    if ns.is_empty() {
        format!("/registry/{prefix}/{name}")
    } else {
        format!("/registry/{prefix}/{ns}/{name}")
    }
}

impl State {
    pub fn new(start_rv: u64) -> Self {
        let (events, _) = tokio::sync::broadcast::channel(8192);
        State {
            rv: start_rv,
            objects: BTreeMap::new(),
            history: Vec::new(),
            alloc: Allocators::default(),
            webhooks: Webhooks::default(),
            events,
        }
    }

    pub fn get_object(&self, k: &dyn Kind, ns: &str, name: &str) -> Option<&Value> {
        self.objects.get(&key(k, ns, name))
    }

    fn emit(
        &mut self,
        k: &'static dyn Kind,
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
            object: kinds::to_wire(k, obj),
            old: old.map(|o| kinds::to_wire(k, &o)),
        });
        self.history.push(ev.clone());
        if self.history.len() > HISTORY_LIMIT {
            let drop = self.history.len() - HISTORY_LIMIT;
            self.history.drain(..drop);
        }
        // No receiver is fine: nobody is watching.
        let _ = self.events.send(ev);
    }

    fn admission(&self) -> Admission<'_> {
        Admission {
            objects: self,
            webhooks: &self.webhooks,
        }
    }

    fn namespace_exists(&self, ns: &str) -> bool {
        self.objects.contains_key(&key(&kinds::NAMESPACE, "", ns))
    }

    /// POST a collection.
    pub fn create(
        &mut self,
        k: &'static dyn Kind,
        ns: &str,
        body: &[u8],
        ctx: &WriteCtx,
    ) -> Result<Outcome, StatusBody> {
        let (obj, warnings) = decode_body(k, body, ctx.field_validation)?;
        self.create_decoded(k, ns, obj, warnings.clone(), ctx)
            .map_err(|e| with_warnings(e, &warnings))
    }

    pub fn create_decoded(
        &mut self,
        k: &'static dyn Kind,
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
            if k.api().namespaced {
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
        kinds::default_and_normalize(k, &mut obj);
        let now = time::now_rfc3339();
        managed_fields::apply_update(
            &managed_fields::Update {
                root_type: k.schema(),
                manager: &ctx.manager,
                api_version: k.api().api_version,
                subresource: "",
                now: &now,
            },
            None,
            &mut obj,
        );
        k.admit_create(&mut obj, &self.admission());
        obj = schema::normalize(k.schema(), &obj);
        if k.api().namespaced && !self.namespace_exists(ns) {
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
        k.allocate(&mut obj, None, &mut self.alloc, ctx.dry_run);
        obj = schema::normalize(k.schema(), &obj);
        let errs = kinds::validate(k, &obj, None);
        let name = meta_str(&obj, "name").to_string();
        if !errs.is_empty() {
            return Err(status::invalid(k.api(), &name, &errs));
        }
        if !ctx.skip_webhooks {
            k.validate_admission(&obj, None, &self.admission())?;
        }
        let mut warnings = warnings;
        warnings.extend(k.warnings_on_create(&obj));
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
            return Err(status::already_exists(k.api(), &name));
        }
        if ctx.dry_run {
            return Ok(Outcome {
                code: 201,
                body: kinds::to_wire(k, &obj),
                warnings,
            });
        }
        // An allocator persisting its bitmap in etcd (Service IPs) costs one more revision.
        self.rv += k.allocator_revisions();
        self.rv += 1;
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(self.rv.to_string()));
        obj = schema::normalize(k.schema(), &obj);
        self.objects.insert(key, obj.clone());
        self.emit(k, "ADDED", &obj, None);
        Ok(Outcome {
            code: 201,
            body: kinds::to_wire(k, &obj),
            warnings,
        })
    }

    /// PUT an object.
    pub fn update(
        &mut self,
        k: &'static dyn Kind,
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
        if k.api().namespaced && !obj_ns.is_empty() && obj_ns != ns {
            return Err(status::bad_request(format!(
                "the namespace of the object ({obj_ns}) does not match the namespace on the request ({ns})"
            )));
        }
        self.update_decoded(k, ns, name, obj, warnings.clone(), ctx)
            .map_err(|e| with_warnings(e, &warnings))
    }

    fn update_decoded(
        &mut self,
        k: &'static dyn Kind,
        ns: &str,
        name: &str,
        mut obj: Value,
        warnings: Vec<String>,
        ctx: &WriteCtx,
    ) -> Result<Outcome, StatusBody> {
        let key = key(k, ns, name);
        if k.api().namespaced {
            meta_mut(&mut obj).insert("namespace".into(), json!(ns));
        } else {
            meta_mut(&mut obj).remove("namespace");
        }
        kinds::default_and_normalize(k, &mut obj);
        let Some(old) = self.objects.get(&key).cloned() else {
            let rv = meta_str(&obj, "resourceVersion");
            if k.create_on_update() && rv.is_empty() {
                return self.create_decoded(k, ns, obj, warnings, ctx);
            }
            return Err(status::not_found(k.api(), name));
        };
        self.check_update_preconditions(ctx.inject_conflict, k, ns, name, &obj, &old)?;
        if !k.allow_unconditional_update() && meta_str(&obj, "resourceVersion").is_empty() {
            return Err(status::invalid_kind(
                k.api().group,
                k.api().resource,
                name,
                &[FieldError::invalid(
                    "metadata.resourceVersion",
                    "0x0",
                    "must be specified for an update",
                )],
            ));
        }
        self.finish_update(k, key, obj, old, warnings, ctx)
    }

    fn check_update_preconditions(
        &self,
        inject_conflict: bool,
        k: &dyn Kind,
        ns: &str,
        name: &str,
        obj: &Value,
        old: &Value,
    ) -> Result<(), StatusBody> {
        if inject_conflict {
            return Err(status::conflict_modified(k.api(), name));
        }
        let uid = meta_str(obj, "uid");
        if !uid.is_empty() && uid != meta_str(old, "uid") {
            return Err(status::conflict(
                k.api().group,
                k.api().resource,
                name,
                &format!(
                    "StorageError: invalid object, Code: 4, Key: {}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    etcd_key(k, if k.api().namespaced { ns } else { "" }, name),
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
                return Err(status::conflict_modified(k.api(), name));
            }
        }
        Ok(())
    }

    fn finish_update(
        &mut self,
        k: &'static dyn Kind,
        key: Key,
        mut obj: Value,
        old: Value,
        warnings: Vec<String>,
        ctx: &WriteCtx,
    ) -> Result<Outcome, StatusBody> {
        let name = key.3.clone();
        kinds::prepare_update(k, &mut obj, &old);
        meta_mut(&mut obj).insert(
            "resourceVersion".into(),
            json!(meta_str(&old, "resourceVersion")),
        );
        k.allocate(&mut obj, Some(&old), &mut self.alloc, ctx.dry_run);
        obj = schema::normalize(k.schema(), &obj);
        let errs = kinds::validate(k, &obj, Some(&old));
        if !errs.is_empty() {
            return Err(status::invalid(k.api(), &name, &errs));
        }
        if !ctx.skip_webhooks {
            k.validate_admission(&obj, Some(&old), &self.admission())?;
        }
        let now = time::now_rfc3339();
        managed_fields::apply_update(
            &managed_fields::Update {
                root_type: k.schema(),
                manager: &ctx.manager,
                api_version: k.api().api_version,
                subresource: "",
                now: &now,
            },
            Some(&old),
            &mut obj,
        );
        obj = schema::normalize(k.schema(), &obj);
        if obj == old {
            return Ok(Outcome {
                code: 200,
                body: kinds::to_wire(k, &old),
                warnings,
            });
        }
        if ctx.dry_run {
            return Ok(Outcome {
                code: 200,
                body: kinds::to_wire(k, &obj),
                warnings,
            });
        }
        self.rv += 1;
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(self.rv.to_string()));
        self.objects.insert(key, obj.clone());
        self.emit(k, "MODIFIED", &obj, Some(old));
        Ok(Outcome {
            code: 200,
            body: kinds::to_wire(k, &obj),
            warnings,
        })
    }

    /// PATCH an object. `content_type` is the media type without parameters.
    pub fn patch(
        &mut self,
        k: &'static dyn Kind,
        ns: &str,
        name: &str,
        content_type: &str,
        body: &[u8],
        ctx: &WriteCtx,
    ) -> Result<Outcome, StatusBody> {
        let key = key(k, ns, name);
        let Some(old) = self.objects.get(&key).cloned() else {
            return Err(status::not_found(k.api(), name));
        };
        let current = kinds::to_wire(k, &old);
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
                match patch::strategic_merge(&current, &p, k.schema()) {
                    Ok(v) => v,
                    Err(SmpError::BadRequest(m)) => return Err(status::bad_request(m)),
                    Err(SmpError::Internal(m)) => return Err(status::internal(&m)),
                }
            }
            _ => return Err(status::generic(415, "415: Unsupported Media Type")),
        };
        let decoded = match k.decode(&patched) {
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
        if k.api().namespaced {
            meta_mut(&mut obj).insert("namespace".into(), json!(ns));
        }
        kinds::default_and_normalize(k, &mut obj);
        self.check_update_preconditions(ctx.inject_conflict, k, ns, name, &obj, &old)
            .map_err(|e| with_warnings(e, &warnings))?;
        self.finish_update(k, key, obj, old, warnings.clone(), ctx)
            .map_err(|e| with_warnings(e, &warnings))
    }

    /// DELETE an object.
    pub fn delete(
        &mut self,
        k: &'static dyn Kind,
        ns: &str,
        name: &str,
        options: &Value,
        dry_run: bool,
        inject_conflict: bool,
    ) -> Result<Outcome, StatusBody> {
        let key = key(k, ns, name);
        let Some(old) = self.objects.get(&key).cloned() else {
            return Err(status::not_found(k.api(), name));
        };
        if inject_conflict {
            return Err(status::conflict_modified(k.api(), name));
        }
        let pre = options.get("preconditions").unwrap_or(&Value::Null);
        if let Some(uid) = pre.get("uid").and_then(Value::as_str)
            && uid != meta_str(&old, "uid")
        {
            return Err(status::conflict(
                k.api().group,
                k.api().kind,
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
                k.api().group,
                k.api().kind,
                name,
                &format!(
                    "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). The object might have been modified",
                    meta_str(&old, "resourceVersion")
                ),
            ));
        }
        let uid = meta_str(&old, "uid").to_string();
        if k.deletion() == Deletion::Namespace {
            return Ok(self.delete_namespace(k, key, old, dry_run));
        }
        if dry_run {
            return Ok(Outcome {
                code: 200,
                body: status::delete_success(k.api(), name, &uid),
                warnings: vec![],
            });
        }
        self.objects.remove(&key);
        self.rv += 1;
        let mut gone = old;
        meta_mut(&mut gone).insert("resourceVersion".into(), json!(self.rv.to_string()));
        self.emit(k, "DELETED", &gone, None);
        // Releasing an allocation rewrites the allocator's bitmap: one more revision.
        k.release(&gone, &mut self.alloc);
        self.rv += k.allocator_revisions();
        Ok(Outcome {
            code: 200,
            body: status::delete_success(k.api(), name, &uid),
            warnings: vec![],
        })
    }

    /// DELETE of a namespace: returned `Terminating`, then its content removed (as the namespace
    /// controller of a full cluster would) and the namespace itself.
    fn delete_namespace(
        &mut self,
        k: &'static dyn Kind,
        key: Key,
        old: Value,
        dry_run: bool,
    ) -> Outcome {
        let mut term = old.clone();
        meta_mut(&mut term).insert("deletionTimestamp".into(), json!(time::now_rfc3339()));
        if let Some(st) = term.get_mut("status").and_then(Value::as_object_mut) {
            st.insert("phase".into(), json!("Terminating"));
        }
        if dry_run {
            return Outcome {
                code: 200,
                body: kinds::to_wire(k, &schema::normalize(k.schema(), &term)),
                warnings: vec![],
            };
        }
        self.rv += 1;
        meta_mut(&mut term).insert("resourceVersion".into(), json!(self.rv.to_string()));
        term = schema::normalize(k.schema(), &term);
        self.objects.insert(key.clone(), term.clone());
        self.emit(k, "MODIFIED", &term, Some(old));
        let children: Vec<Key> = self
            .objects
            .keys()
            .filter(|(_, _, n, _)| *n == key.3)
            .cloned()
            .collect();
        for ck in children {
            if let Some(obj) = self.objects.remove(&ck)
                && let Some(ck_kind) = kinds::all()
                    .iter()
                    .copied()
                    .find(|x| x.api().resource == ck.0 && x.api().group == ck.1)
            {
                self.rv += 1;
                let mut gone = obj;
                meta_mut(&mut gone).insert("resourceVersion".into(), json!(self.rv.to_string()));
                self.emit(ck_kind, "DELETED", &gone, None);
            }
        }
        self.objects.remove(&key);
        self.rv += 1;
        let mut gone = term.clone();
        meta_mut(&mut gone).insert("resourceVersion".into(), json!(self.rv.to_string()));
        self.emit(k, "DELETED", &gone, None);
        Outcome {
            code: 200,
            body: kinds::to_wire(k, &term),
            warnings: vec![],
        }
    }

    pub fn get(&self, k: &'static dyn Kind, ns: &str, name: &str) -> Result<Value, StatusBody> {
        let ns = if k.api().namespaced { ns } else { "" };
        self.get_object(k, ns, name)
            .map(|o| kinds::to_wire(k, o))
            .ok_or_else(|| status::not_found(k.api(), name))
    }

    /// Objects of `k` in `ns` (`None`: all namespaces), in storage (key) order.
    pub fn select(&self, k: &'static dyn Kind, ns: Option<&str>, sel: &Selectors) -> Vec<&Value> {
        self.objects
            .iter()
            .filter(|((r, g, n, _), _)| {
                let a = k.api();
                *r == a.resource && *g == a.group && ns.is_none_or(|ns| !a.namespaced || n == ns)
            })
            .map(|(_, v)| v)
            .filter(|v| sel.matches(k, v))
            .collect()
    }

    /// PUT or PATCH of the `status` or `scale` subresource. `patch_type` is `None` for PUT.
    #[allow(clippy::too_many_arguments)]
    pub fn update_subresource(
        &mut self,
        k: &'static dyn Kind,
        ns: &str,
        name: &str,
        sub: Subresource,
        patch_type: Option<&str>,
        body: &[u8],
        ctx: &WriteCtx,
    ) -> Result<Outcome, StatusBody> {
        let key = key(k, ns, name);
        let Some(old) = self.objects.get(&key).cloned() else {
            return Err(status::not_found(k.api(), name));
        };
        let current = if sub == Subresource::Scale {
            kinds::scale_of(&old)
        } else {
            kinds::to_wire(k, &old)
        };
        let incoming = subresource_body(k, sub, &current, patch_type, body)?;
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
        let manager_sub = sub.path();
        if sub == Subresource::Scale {
            let replicas = scale_replicas(&incoming, name)?;
            if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
                spec.insert("replicas".into(), json!(replicas));
            }
            kinds::prepare_update(k, &mut new, &old);
        } else {
            let decoded = k.decode(&incoming).map_err(|e| {
                status::bad_request(format!(
                    "{} in version \"{}\" cannot be handled as a {}: {e}",
                    k.api().kind,
                    k.api().version,
                    k.api().kind
                ))
            })?;
            // The body is decoded with defaulting, as every request body is.
            let mut incoming = decoded.value;
            kinds::default_and_normalize(k, &mut incoming);
            if let (Some(m), Some(s)) = (new.as_object_mut(), incoming.get("status")) {
                m.insert("status".into(), s.clone());
            }
        }
        new = schema::normalize(k.schema(), &new);
        let errs = kinds::validate(k, &new, Some(&old));
        if !errs.is_empty() {
            return Err(status::invalid(k.api(), name, &errs));
        }
        let now = time::now_rfc3339();
        managed_fields::apply_update(
            &managed_fields::Update {
                root_type: k.schema(),
                manager: &ctx.manager,
                api_version: k.api().api_version,
                subresource: manager_sub,
                now: &now,
            },
            Some(&old),
            &mut new,
        );
        new = schema::normalize(k.schema(), &new);
        let render = |obj: &Value| {
            if sub == Subresource::Scale {
                kinds::scale_of(obj)
            } else {
                kinds::to_wire(k, obj)
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
        k: &'static dyn Kind,
        ns: &str,
        name: &str,
        manager: &str,
        subresource: &str,
        mutate: &mut dyn FnMut(&mut Value),
    ) -> Result<Value, StatusBody> {
        let key = key(k, ns, name);
        let Some(old) = self.objects.get(&key).cloned() else {
            return Err(status::not_found(k.api(), name));
        };
        let mut obj = kinds::to_wire(k, &old);
        mutate(&mut obj);
        let mut obj = match k.decode(&obj) {
            Ok(d) => d.value,
            Err(e) => return Err(status::bad_request(e.to_string())),
        };
        kinds::default_and_normalize(k, &mut obj);
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
        obj = schema::normalize(k.schema(), &obj);
        let errs = kinds::validate(k, &obj, Some(&old));
        if !errs.is_empty() {
            return Err(status::invalid(k.api(), name, &errs));
        }
        let now = time::now_rfc3339();
        managed_fields::apply_update(
            &managed_fields::Update {
                root_type: k.schema(),
                manager,
                api_version: k.api().api_version,
                subresource,
                now: &now,
            },
            Some(&old),
            &mut obj,
        );
        obj = schema::normalize(k.schema(), &obj);
        if obj == old {
            return Ok(kinds::to_wire(k, &old));
        }
        self.rv += 1;
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(self.rv.to_string()));
        self.objects.insert(key, obj.clone());
        self.emit(k, "MODIFIED", &obj, Some(old));
        Ok(kinds::to_wire(k, &obj))
    }
}

/// An error answered after decoding carries the decoder's warnings too.
fn with_warnings(mut e: StatusBody, warnings: &[String]) -> StatusBody {
    for w in warnings {
        e.headers
            .push(("Warning".into(), format!("299 - {}", status::go_quote(w))));
    }
    e
}

impl Objects for State {
    fn all(&self, k: &'static dyn Kind) -> Vec<&Value> {
        self.select(k, None, &Selectors::default())
    }
}

/// The object a subresource PUT or PATCH asks for: the body (PUT) or `current` patched.
fn subresource_body(
    k: &dyn Kind,
    sub: Subresource,
    current: &Value,
    patch_type: Option<&str>,
    body: &[u8],
) -> Result<Value, StatusBody> {
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
            patch::json_patch(current, &ops).map_err(|_| status::generic(422, ""))?
        }
        Some("application/merge-patch+json") => {
            let p = gojson::parse(body).map_err(|_| status::bad_request("Invalid JSON Patch"))?;
            patch::merge_patch(current, &p)
        }
        Some(_) => {
            let p =
                gojson::parse(body).map_err(|_| status::bad_request("invalid JSON document"))?;
            if sub == Subresource::Scale {
                // Scale has no list fields: a strategic merge is a plain merge.
                patch::merge_patch(current, &p)
            } else {
                match patch::strategic_merge(current, &p, k.schema()) {
                    Ok(v) => v,
                    Err(SmpError::BadRequest(m)) => return Err(status::bad_request(m)),
                    Err(SmpError::Internal(m)) => return Err(status::internal(&m)),
                }
            }
        }
    };
    Ok(incoming)
}

/// `spec.replicas` of a Scale (absent: 0), as autoscaling/v1 decodes and validates it.
fn scale_replicas(incoming: &Value, name: &str) -> Result<i64, StatusBody> {
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
    Ok(replicas)
}
