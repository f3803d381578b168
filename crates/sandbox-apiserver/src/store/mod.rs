//! The third layer: the object store and the request paths of the real registry (create,
//! update, patch, delete, get, list, subresources), with their order of checks: body decoding
//! (400) → existence (404) → preconditions (409) → validation (422). One revision counter is
//! shared by every object; every change is a watch [`Event`] and stays in the history.
//!
//! * [`decode`] — request bodies into a kind's canonical object;
//! * [`patch`] — JSON merge patch, JSON patch and strategic merge patch;
//! * [`managed_fields`] — `metadata.managedFields` as structured-merge-diff computes them;
//! * [`apply`] — server-side apply: merging, field ownership, conflicts;
//! * [`select`] — label and field selectors for a kind.
//!
//! Uses [`crate::kinds`] (each kind's strategy) and [`crate::model`].

pub mod apply;
mod decode;
pub mod managed_fields;
pub mod patch;
mod select;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::kinds::{self, Admission, Allocators, Deletion, Kind, Objects, Subresource, Webhooks};
use crate::model::gojson;
use crate::model::names::random_suffix;
use crate::model::object::{meta_mut, meta_str};
use crate::model::schema;
use crate::model::status::{self, FieldError, StatusBody};
use crate::model::time;
use patch::SmpError;

pub use decode::{FieldValidation, decode_body, decode_patch, internal_package, summarize};
pub use select::Selectors;

/// The store of one sandbox: everything that reads or writes objects takes this lock, shared to
/// read and exclusive to write.
pub type Store = parking_lot::RwLock<State>;

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
    /// The object before the change (MODIFIED and DELETED), for selector transitions and
    /// past snapshots.
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

/// A write computed against one revision of its object, waiting to be stored.
enum Computed {
    /// Nothing to store (a dry run, or no change): the answer as it is.
    Answer(Outcome),
    /// Store the object, replacing `old`.
    Modify {
        k: &'static dyn Kind,
        key: Key,
        obj: Value,
        old: Value,
        warnings: Vec<String>,
    },
    /// The update took the last finalizer of an object being deleted: it goes.
    Remove {
        k: &'static dyn Kind,
        key: Key,
        old: Value,
        answer: Outcome,
    },
}

impl Computed {
    /// The stored object this write was computed from, if it writes.
    fn base(&self) -> Option<(&Key, &Value)> {
        match self {
            Computed::Answer(_) => None,
            Computed::Modify { key, old, .. } | Computed::Remove { key, old, .. } => {
                Some((key, old))
            }
        }
    }
}

/// PATCH with the store shared while the patch is computed, as the real server computes an
/// update outside its storage transaction: concurrent patches (and dry runs, which store
/// nothing) run side by side; only the commit is exclusive. A patch whose object changed
/// while it was computed is computed again against the new revision, as the real registry's
/// `GuaranteedUpdate` does. Kinds whose writes allocate (Service IPs and ports) patch under the
/// exclusive lock, so two of them never draw the same value.
pub fn patch_shared(
    store: &Store,
    k: &'static dyn Kind,
    ns: &str,
    name: &str,
    content_type: &str,
    body: &[u8],
    ctx: &WriteCtx,
) -> Result<Outcome, StatusBody> {
    if k.allocates() && !ctx.dry_run {
        return store.write().patch(k, ns, name, content_type, body, ctx);
    }
    loop {
        let computed = {
            // Not behind a waiting writer: the writes of a burst (creates, deletes, commits)
            // wait for the patches being computed instead of holding up the ones after them.
            let st = store.read_recursive();
            // A dry run's allocations are never kept: it draws from a copy.
            let mut alloc = st.alloc.clone();
            st.compute_patch(k, ns, name, content_type, body, ctx, &mut alloc)?
        };
        // A dry run, or a patch that changes nothing, answers without the exclusive lock.
        if let Computed::Answer(answer) = computed {
            return Ok(answer);
        }
        let mut st = store.write();
        let unchanged = computed.base().is_none_or(|(key, old)| {
            st.objects.get(key).is_some_and(|now| {
                meta_str(now, "resourceVersion") == meta_str(old, "resourceVersion")
            })
        });
        if unchanged {
            return Ok(st.commit(computed));
        }
    }
}

/// Whether an update records its managed fields as an `Update` of its manager, or comes with
/// them (a server-side apply computed them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tracking {
    Update,
    Given,
}

/// The body of an apply patch: YAML (JSON is YAML) into a map, as `yaml.Unmarshal` decodes it
/// (numbers are float64 there: an integral one is written as an integer).
fn decode_apply_body(body: &[u8]) -> Result<Value, StatusBody> {
    let text = String::from_utf8_lossy(body);
    let mut v: Value = if text.trim().is_empty() {
        Value::Null
    } else {
        serde_saphyr::from_str(&text).map_err(|e| {
            status::bad_request(format!(
                "error decoding YAML: error converting YAML to JSON: yaml: {e}"
            ))
        })?
    };
    match &v {
        Value::Object(_) => {}
        Value::Null => v = json!({}),
        other => {
            let what = match other {
                Value::Array(_) => "array",
                Value::String(_) => "string",
                Value::Number(_) => "number",
                _ => "bool",
            };
            return Err(status::bad_request(format!(
                "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {what} into Go value of type map[string]interface {{}}"
            )));
        }
    }
    apply::integral_numbers(&mut v);
    Ok(v)
}

/// `schema.ParseGroupVersion` (a malformed one: the empty group/version).
fn parse_group_version(av: &str) -> (String, String) {
    let parts: Vec<&str> = av.split('/').collect();
    match parts.as_slice() {
        [""] => (String::new(), String::new()),
        [v] => (String::new(), (*v).to_string()),
        [g, v] => ((*g).to_string(), (*v).to_string()),
        _ => (String::new(), String::new()),
    }
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
    /// The revision the sandbox started at.
    start_rv: u64,
    objects: BTreeMap<Key, Value>,
    pub history: Vec<Arc<Event>>,
    alloc: Allocators,
    /// The admission webhooks the cluster runs.
    pub webhooks: Webhooks,
    /// Watchers subscribe while holding the state lock, so no event is missed or duplicated.
    pub events: tokio::sync::broadcast::Sender<Arc<Event>>,
}

const HISTORY_LIMIT: usize = 100_000;

fn etcd_key(k: &dyn Kind, ns: &str, name: &str) -> String {
    let prefix = k.storage_prefix();
    if ns.is_empty() {
        format!("/registry/{prefix}/{name}")
    } else {
        format!("/registry/{prefix}/{ns}/{name}")
    }
}

impl State {
    /// Service IPs come from `cidr` (`a.b.c.d/n`).
    pub fn set_service_cidr(&mut self, cidr: &str) {
        self.alloc = Allocators::with_service_cidr(cidr);
    }

    pub fn new(start_rv: u64) -> Self {
        let (events, _) = tokio::sync::broadcast::channel(8192);
        State {
            rv: start_rv,
            start_rv,
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
        obj: Value,
        warnings: Vec<String>,
        ctx: &WriteCtx,
    ) -> Result<Outcome, StatusBody> {
        self.create_decoded_with(k, ns, obj, warnings, ctx, None)
    }

    /// A create by a component whose writes the field manager records differently from what
    /// this version's fields would give: the scheduler posts `events.k8s.io/v1` Events, whose
    /// managedFields name that API's fields (`fields`: the `fieldsV1` recorded, `time` set).
    pub fn create_with_fields(
        &mut self,
        k: &'static dyn Kind,
        ns: &str,
        obj: Value,
        ctx: &WriteCtx,
        fields: Value,
    ) -> Result<Outcome, StatusBody> {
        self.create_decoded_with(k, ns, obj, Vec::new(), ctx, Some(fields))
    }

    fn create_decoded_with(
        &mut self,
        k: &'static dyn Kind,
        ns: &str,
        mut obj: Value,
        warnings: Vec<String>,
        ctx: &WriteCtx,
        fields: Option<Value>,
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
        match fields {
            Some(Value::Array(a)) if a.is_empty() => {
                meta_mut(&mut obj).remove("managedFields");
            }
            Some(f) => {
                meta_mut(&mut obj).insert("managedFields".into(), f);
            }
            None => {}
        }
        k.admit_create(&mut obj, &self.admission());
        obj = schema::normalize(k.schema(), &obj);
        if k.api().namespaced && !self.namespace_exists(ns) {
            return Err(status::namespace_not_found(ns));
        }
        if k.api().namespaced && self.namespace_terminating(ns) {
            return Err(status::namespace_terminating(
                k.api(),
                meta_str(&obj, "name"),
                ns,
            ));
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
        let name = meta_str(&obj, "name").to_string();
        k.allocate(&mut obj, None, &mut self.alloc, ctx.dry_run)
            .map_err(|errs| status::invalid(k.api(), &name, &errs))?;
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
        check_namespace_and_name(k, ns, name, &obj).map_err(|e| with_warnings(e, &warnings))?;
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
        self.check_update_preconditions(ctx.inject_conflict, true, k, ns, name, &obj, &old)?;
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

    #[allow(clippy::too_many_arguments)]
    fn check_update_preconditions(
        &self,
        inject_conflict: bool,
        uid_precondition: bool,
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
        // A PUT's uid is a precondition (409); a patched uid is checked by validation (422).
        if uid_precondition && !uid.is_empty() && uid != meta_str(old, "uid") {
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
                // The storage layer's bare error: no reason, no details.
                return Err(StatusBody::new(
                    500,
                    "",
                    format!(
                        "strconv.ParseUint: parsing {}: invalid syntax",
                        status::go_quote(rv)
                    ),
                    None,
                ));
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
        obj: Value,
        old: Value,
        warnings: Vec<String>,
        ctx: &WriteCtx,
    ) -> Result<Outcome, StatusBody> {
        self.exclusively(|st, alloc| {
            st.compute_update(k, key, obj, old, warnings, ctx, alloc, Tracking::Update)
        })
    }

    /// Computes a write with the store's allocators at hand (the computation only reads the
    /// rest of the store), then stores it.
    fn exclusively(
        &mut self,
        compute: impl FnOnce(&State, &mut Allocators) -> Result<Computed, StatusBody>,
    ) -> Result<Outcome, StatusBody> {
        let mut alloc = std::mem::take(&mut self.alloc);
        let computed = compute(self, &mut alloc);
        self.alloc = alloc;
        Ok(self.commit(computed?))
    }

    /// Everything an update does before it is stored: the object as it would be written
    /// (defaulted, allocated, validated, admitted, with its managed fields), or the answer when
    /// nothing is to be stored. Reads the store only.
    #[allow(clippy::too_many_arguments)]
    fn compute_update(
        &self,
        k: &'static dyn Kind,
        key: Key,
        mut obj: Value,
        old: Value,
        warnings: Vec<String>,
        ctx: &WriteCtx,
        alloc: &mut Allocators,
        tracking: Tracking,
    ) -> Result<Computed, StatusBody> {
        let name = key.3.clone();
        kinds::prepare_update(k, &mut obj, &old);
        meta_mut(&mut obj).insert(
            "resourceVersion".into(),
            json!(meta_str(&old, "resourceVersion")),
        );
        // The field manager sees the object before the REST layer's allocations (a node port
        // allocated for a type change is nobody's field).
        let mut tracked = obj.clone();
        k.allocate(&mut obj, Some(&old), alloc, ctx.dry_run)
            .map_err(|errs| status::invalid(k.api(), &name, &errs))?;
        obj = schema::normalize(k.schema(), &obj);
        let errs = kinds::validate(k, &obj, Some(&old));
        if !errs.is_empty() {
            return Err(status::invalid(k.api(), &name, &errs));
        }
        if !ctx.skip_webhooks {
            k.validate_admission(&obj, Some(&old), &self.admission())?;
        }
        let now = time::now_rfc3339();
        tracked = schema::normalize(k.schema(), &tracked);
        if tracking == Tracking::Update {
            managed_fields::apply_update(
                &managed_fields::Update {
                    root_type: k.schema(),
                    manager: &ctx.manager,
                    api_version: k.api().api_version,
                    subresource: "",
                    now: &now,
                },
                Some(&old),
                &mut tracked,
            );
        }
        match tracked.pointer("/metadata/managedFields") {
            Some(mf) => {
                meta_mut(&mut obj).insert("managedFields".into(), mf.clone());
            }
            None => {
                meta_mut(&mut obj).remove("managedFields");
            }
        }
        obj = schema::normalize(k.schema(), &obj);
        let answer = |obj: &Value| Outcome {
            code: 200,
            body: kinds::to_wire(k, obj),
            warnings: warnings.clone(),
        };
        if should_delete_during_update(k, &obj, &old) {
            // The last finalizer of an object being deleted is gone: it goes now, and the
            // update answers with the object as sent (the stored revision).
            let answer = answer(&obj);
            return Ok(if ctx.dry_run {
                Computed::Answer(answer)
            } else {
                Computed::Remove {
                    k,
                    key,
                    old,
                    answer,
                }
            });
        }
        if obj == old {
            return Ok(Computed::Answer(answer(&old)));
        }
        if ctx.dry_run {
            return Ok(Computed::Answer(answer(&obj)));
        }
        Ok(Computed::Modify {
            k,
            key,
            obj,
            old,
            warnings,
        })
    }

    /// Stores what [`State::compute_update`] computed.
    fn commit(&mut self, computed: Computed) -> Outcome {
        match computed {
            Computed::Answer(answer) => answer,
            Computed::Remove {
                k,
                key,
                old,
                answer,
            } => {
                self.remove(k, key, old);
                answer
            }
            Computed::Modify {
                k,
                key,
                mut obj,
                old,
                warnings,
            } => {
                self.rv += 1;
                meta_mut(&mut obj).insert("resourceVersion".into(), json!(self.rv.to_string()));
                self.objects.insert(key, obj.clone());
                self.emit(k, "MODIFIED", &obj, Some(old));
                Outcome {
                    code: 200,
                    body: kinds::to_wire(k, &obj),
                    warnings,
                }
            }
        }
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
        self.exclusively(|st, alloc| st.compute_patch(k, ns, name, content_type, body, ctx, alloc))
    }

    /// A PATCH up to its commit ([`State::compute_update`]).
    #[allow(clippy::too_many_arguments)]
    fn compute_patch(
        &self,
        k: &'static dyn Kind,
        ns: &str,
        name: &str,
        content_type: &str,
        body: &[u8],
        ctx: &WriteCtx,
        alloc: &mut Allocators,
    ) -> Result<Computed, StatusBody> {
        let key = key(k, ns, name);
        let Some(old) = self.objects.get(&key).cloned() else {
            return Err(status::not_found(k.api(), name));
        };
        let current = kinds::to_wire(k, &old);
        let (mut obj, warnings) =
            decode_patch(k, &current, content_type, body, ctx.field_validation)?;
        check_namespace_and_name(k, ns, name, &obj).map_err(|e| with_warnings(e, &warnings))?;
        if k.api().namespaced {
            meta_mut(&mut obj).insert("namespace".into(), json!(ns));
        }
        kinds::default_and_normalize(k, &mut obj);
        self.check_update_preconditions(ctx.inject_conflict, false, k, ns, name, &obj, &old)
            .map_err(|e| with_warnings(e, &warnings))?;
        self.compute_update(
            k,
            key,
            obj,
            old,
            warnings.clone(),
            ctx,
            alloc,
            Tracking::Update,
        )
        .map_err(|e| with_warnings(e, &warnings))
    }

    /// PATCH with `application/apply-patch+yaml`: server-side apply as `ctx.manager` (the
    /// field manager's checks, then [`apply::apply`]), then the registry's update — or its
    /// create, when the object does not exist.
    pub fn apply(
        &mut self,
        k: &'static dyn Kind,
        ns: &str,
        name: &str,
        body: &[u8],
        ctx: &WriteCtx,
        force: bool,
    ) -> Result<Outcome, StatusBody> {
        if k.encoding() == kinds::Encoding::Unstructured {
            // Custom resources' apply is not emulated: the 415 of a type they do not take.
            let mut accepted: Vec<&str> = k.patch_types().to_vec();
            accepted.push("application/apply-patch+yaml");
            return Err(StatusBody::new(
                415,
                "UnsupportedMediaType",
                format!(
                    "the body of the request was in an unknown format - accepted media types include: {}",
                    accepted.join(", ")
                ),
                None,
            ));
        }
        let mut config = decode_apply_body(body)?;
        let text =
            |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_string();
        let api = k.api();
        let (group, version) = parse_group_version(&text(&config, "apiVersion"));
        let kind = text(&config, "kind");
        if (group.as_str(), version.as_str(), kind.as_str()) != (api.group, api.version, api.kind) {
            return Err(status::bad_request(format!(
                "invalid object type: {group}/{version}, Kind={kind}"
            )));
        }
        if config
            .pointer("/metadata/managedFields")
            .is_some_and(|v| !v.is_null())
        {
            return Err(status::bad_request("metadata.managedFields must be nil"));
        }
        if let Some(m) = config.as_object_mut() {
            m.remove("apiVersion");
            m.remove("kind");
        }
        let gvk = format!("{}/{}, Kind={}", api.group, api.version, api.kind);
        if let Some(errs) = apply::validate(&config, &schema::T::Obj(k.schema())) {
            let meta = config.get("metadata").cloned().unwrap_or(Value::Null);
            return Err(status::unknown_error(&format!(
                "failed to create typed patch object ({}/{}; {gvk}): {errs}",
                text(&meta, "namespace"),
                text(&meta, "name")
            )));
        }
        let key = key(k, ns, name);
        let live = self.objects.get(&key).cloned();
        let now = time::now_rfc3339();
        let applied = apply::apply(
            &apply::Apply {
                root_type: k.schema(),
                manager: &ctx.manager,
                api_version: api.api_version,
                force,
                now: &now,
            },
            live.as_ref(),
            &config,
        )
        .map_err(|c| apply::conflict_status(&c))?;
        let mut obj = applied.object;
        if applied.changed {
            obj = schema::from_unstructured(k.schema(), &obj)
                .map_err(|e| {
                    status::unknown_error(&format!(
                        "failed to convert new object ({ns}/{name}; {gvk}) to proper version ({}): {e}",
                        api.api_version
                    ))
                })?
                .value;
            kinds::default_and_normalize(k, &mut obj);
        }
        managed_fields::set_entries(&mut obj, applied.entries);
        check_namespace_and_name(k, ns, name, &obj)?;
        match live {
            None => {
                let fields = obj
                    .pointer("/metadata/managedFields")
                    .cloned()
                    .unwrap_or_else(|| json!([]));
                self.create_decoded_with(k, ns, obj, Vec::new(), ctx, Some(fields))
            }
            Some(old) => {
                if k.api().namespaced {
                    meta_mut(&mut obj).insert("namespace".into(), json!(ns));
                }
                self.check_update_preconditions(
                    ctx.inject_conflict,
                    false,
                    k,
                    ns,
                    name,
                    &obj,
                    &old,
                )?;
                self.exclusively(|st, alloc| {
                    st.compute_update(k, key, obj, old, Vec::new(), ctx, alloc, Tracking::Given)
                })
            }
        }
    }

    /// DELETE an object with `options` (a DeleteOptions object). Objects with finalizers, or
    /// deleted with `propagationPolicy` `Foreground`/`Orphan` (whose finalizers a garbage
    /// collector would act on; none runs), are only marked deleting (`deletionTimestamp`,
    /// `deletionGracePeriodSeconds: 0`) and returned; they go once their finalizers are removed.
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
        if k.deletion() == Deletion::Namespace {
            return self.delete_namespace(k, key, old, options, dry_run);
        }
        check_delete_preconditions(k, name, &old, options)?;
        let orphan_option = options.get("orphanDependents").and_then(Value::as_bool);
        let policy = options.get("propagationPolicy").and_then(Value::as_str);
        let old_finalizers: Vec<String> = old
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let first_gc = old_finalizers
            .iter()
            .find(|f| *f == "orphan" || *f == "foregroundDeletion")
            .cloned();
        // deletionFinalizersForGarbageCollection: an explicit option, else the finalizer.
        let orphan = match (orphan_option, policy) {
            (Some(o), _) => o,
            (None, Some(p)) => p == "Orphan",
            (None, None) => first_gc.as_deref() == Some("orphan"),
        };
        let foreground = match (orphan_option, policy) {
            (Some(_), _) => false,
            (None, Some(p)) => p == "Foreground",
            (None, None) => first_gc.as_deref() == Some("foregroundDeletion"),
        };
        let mut finalizers: Vec<String> = old_finalizers
            .iter()
            .filter(|f| *f != "orphan" && *f != "foregroundDeletion")
            .cloned()
            .collect();
        if orphan {
            finalizers.push("orphan".into());
        }
        if foreground {
            finalizers.push("foregroundDeletion".into());
        }
        let same_set = {
            let (mut a, mut b) = (finalizers.clone(), old_finalizers.clone());
            a.sort();
            a.dedup();
            b.sort();
            b.dedup();
            a == b
        };
        if !same_set || !old_finalizers.is_empty() {
            let mut marked = old.clone();
            if !same_set {
                meta_mut(&mut marked).insert("finalizers".into(), json!(finalizers));
            }
            if !finalizers.is_empty() {
                // markAsDeleting: the object stays until its finalizers are gone.
                let meta = meta_mut(&mut marked);
                if meta.get("deletionTimestamp").is_none_or(Value::is_null) {
                    if let Some(g) = meta.get("generation").and_then(Value::as_i64)
                        && g > 0
                    {
                        meta.insert("generation".into(), json!(g + 1));
                    }
                    meta.insert("deletionTimestamp".into(), json!(time::now_rfc3339()));
                }
                meta.insert("deletionGracePeriodSeconds".into(), json!(0));
                marked = schema::normalize(k.schema(), &marked);
                let code = if orphan_option == Some(false) {
                    202
                } else {
                    200
                };
                if marked == old || dry_run {
                    return Ok(Outcome {
                        code,
                        body: kinds::to_wire(k, &marked),
                        warnings: vec![],
                    });
                }
                self.rv += 1;
                meta_mut(&mut marked).insert("resourceVersion".into(), json!(self.rv.to_string()));
                self.objects.insert(key, marked.clone());
                self.emit(k, "MODIFIED", &marked, Some(old));
                return Ok(Outcome {
                    code,
                    body: kinds::to_wire(k, &marked),
                    warnings: vec![],
                });
            }
        }
        if dry_run {
            return Ok(self.deleted_reply(k, &old));
        }
        let gone = self.remove(k, key, old);
        Ok(self.deleted_reply(k, &gone))
    }

    /// Remove an object now: the DELETED event (with the deletion's revision, which the
    /// returned object carries), then whatever the kind releases.
    fn remove(&mut self, k: &'static dyn Kind, key: Key, old: Value) -> Value {
        self.objects.remove(&key);
        self.rv += 1;
        let mut gone = old.clone();
        meta_mut(&mut gone).insert("resourceVersion".into(), json!(self.rv.to_string()));
        self.emit(k, "DELETED", &gone, Some(old));
        // Releasing an allocation rewrites the allocator's bitmap: one more revision.
        k.release(&gone, &mut self.alloc);
        self.rv += k.allocator_revisions();
        gone
    }

    /// What a DELETE that removed the object answers: the object for kinds that return it,
    /// else a Success Status naming it.
    fn deleted_reply(&self, k: &'static dyn Kind, gone: &Value) -> Outcome {
        Outcome {
            code: 200,
            body: if k.returns_deleted_object() {
                kinds::to_wire(k, gone)
            } else {
                status::delete_success(k.api(), meta_str(gone, "name"), meta_str(gone, "uid"))
            },
            warnings: vec![],
        }
    }

    /// DELETE of a namespace (its own REST logic): the first one marks it `Terminating` (with
    /// a deletion timestamp) and returns it; it stays, with its content, until its
    /// `spec.finalizers` are emptied through `finalize` (the namespace controller's job; none
    /// runs); a DELETE after that removes it.
    fn delete_namespace(
        &mut self,
        k: &'static dyn Kind,
        key: Key,
        old: Value,
        options: &Value,
        dry_run: bool,
    ) -> Result<Outcome, StatusBody> {
        let pre = options.get("preconditions").unwrap_or(&Value::Null);
        let name = key.3.clone();
        for (field, what) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
            if let Some(v) = pre.get(field).and_then(Value::as_str)
                && v != meta_str(&old, field)
            {
                return Err(status::conflict(
                    "",
                    "namespaces",
                    &name,
                    &format!(
                        "Precondition failed: {what} in precondition: {v}, {what} in object meta: {}",
                        meta_str(&old, field)
                    ),
                ));
            }
        }
        let orphan_option = options.get("orphanDependents").and_then(Value::as_bool);
        let code = if orphan_option == Some(false) {
            202
        } else {
            200
        };
        let deleting = old
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null());
        if !deleting {
            let policy = options.get("propagationPolicy").and_then(Value::as_str);
            let has = |f: &str| {
                old.pointer("/metadata/finalizers")
                    .and_then(Value::as_array)
                    .is_some_and(|a| a.iter().any(|x| x == f))
            };
            let want_orphan = match (orphan_option, policy) {
                (Some(o), _) => o,
                (None, Some(p)) => p == "Orphan",
                (None, None) => has("orphan"),
            };
            let want_foreground = match (orphan_option, policy) {
                (Some(o), _) => !o,
                (None, Some(p)) => p == "Foreground",
                (None, None) => has("foregroundDeletion"),
            };
            let mut term = old.clone();
            {
                let meta = meta_mut(&mut term);
                meta.insert("deletionTimestamp".into(), json!(time::now_rfc3339()));
                let mut fins: Vec<Value> = meta
                    .get("finalizers")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                fins.retain(|f| f != "orphan" && f != "foregroundDeletion");
                if want_orphan {
                    fins.push(json!("orphan"));
                }
                if want_foreground {
                    fins.push(json!("foregroundDeletion"));
                }
                if fins.is_empty() {
                    meta.remove("finalizers");
                } else {
                    meta.insert("finalizers".into(), Value::Array(fins));
                }
            }
            if let Some(st) = term.get_mut("status").and_then(Value::as_object_mut) {
                st.insert("phase".into(), json!("Terminating"));
            }
            term = schema::normalize(k.schema(), &term);
            if !dry_run {
                self.rv += 1;
                meta_mut(&mut term).insert("resourceVersion".into(), json!(self.rv.to_string()));
                self.objects.insert(key, term.clone());
                self.emit(k, "MODIFIED", &term, Some(old));
            }
            return Ok(Outcome {
                code,
                body: kinds::to_wire(k, &term),
                warnings: vec![],
            });
        }
        let spec_finalizers = old
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
        let meta_finalizers = old
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
        if spec_finalizers || meta_finalizers || dry_run {
            return Ok(Outcome {
                code,
                body: kinds::to_wire(k, &old),
                warnings: vec![],
            });
        }
        let gone = self.remove(k, key, old);
        Ok(Outcome {
            code: 200,
            body: kinds::to_wire(k, &gone),
            warnings: vec![],
        })
    }

    /// Remove an object now, whatever its finalizers (the handle's delete): a namespace with
    /// everything in it, as the namespace controller would.
    pub fn delete_now(
        &mut self,
        k: &'static dyn Kind,
        ns: &str,
        name: &str,
    ) -> Result<(), StatusBody> {
        let key = key(k, ns, name);
        let Some(old) = self.objects.get(&key).cloned() else {
            return Err(status::not_found(k.api(), name));
        };
        if k.deletion() == Deletion::Namespace {
            let children: Vec<Key> = self
                .objects
                .keys()
                .filter(|(_, _, n, _)| *n == key.3)
                .cloned()
                .collect();
            for ck in children {
                if let Some(obj) = self.objects.get(&ck).cloned()
                    && let Some(ck_kind) =
                        kinds::every().find(|x| x.api().resource == ck.0 && x.api().group == ck.1)
                {
                    self.remove(ck_kind, ck, obj);
                }
            }
        }
        self.remove(k, key, old);
        Ok(())
    }

    /// Is `ns` being deleted (`Terminating`)?
    pub fn namespace_terminating(&self, ns: &str) -> bool {
        self.objects
            .get(&key(&kinds::NAMESPACE, "", ns))
            .and_then(|n| n.pointer("/status/phase"))
            .is_some_and(|p| p == "Terminating")
    }

    pub fn get(&self, k: &'static dyn Kind, ns: &str, name: &str) -> Result<Value, StatusBody> {
        let ns = if k.api().namespaced { ns } else { "" };
        self.get_object(k, ns, name)
            .map(|o| kinds::to_wire(k, o))
            .ok_or_else(|| status::not_found(k.api(), name))
    }

    /// The oldest revision a watch may start from: the sandbox's first, or the one before the
    /// oldest change the history still holds.
    pub fn watch_start(&self) -> u64 {
        match self.history.first() {
            Some(e) if self.history.len() >= HISTORY_LIMIT => e.rv.saturating_sub(1),
            _ => self.start_rv,
        }
    }

    /// The revision before the oldest change the history still holds (0: it reaches back to
    /// the start).
    pub fn history_start(&self) -> u64 {
        match self.history.first() {
            Some(e) if self.history.len() >= HISTORY_LIMIT => e.rv.saturating_sub(1),
            _ => 0,
        }
    }

    /// The objects of `k` selected as at revision `rv` (as stored, like [`State::select`]), in
    /// key order: the current ones with every later change undone. `None` when the history no
    /// longer reaches back that far.
    pub fn select_at(
        &self,
        k: &'static dyn Kind,
        ns: Option<&str>,
        sel: &Selectors,
        rv: u64,
    ) -> Option<Vec<Value>> {
        if rv < self.history_start() {
            return None;
        }
        let a = k.api();
        let mut objs: BTreeMap<(String, String), Value> = self
            .objects
            .iter()
            .filter(|((r, g, _, _), _)| *r == a.resource && *g == a.group)
            .map(|((_, _, n, name), v)| ((n.clone(), name.clone()), v.clone()))
            .collect();
        let stored = |wire: &Value| {
            let mut v = wire.clone();
            if k.encoding() == kinds::Encoding::GoStruct
                && let Some(m) = v.as_object_mut()
            {
                m.remove("kind");
                m.remove("apiVersion");
            }
            v
        };
        for ev in self.history.iter().rev().take_while(|e| e.rv > rv) {
            if !kinds::same(ev.kind, k) {
                continue;
            }
            let ns_key = if a.namespaced {
                ev.namespace.clone()
            } else {
                String::new()
            };
            let key = (ns_key, ev.name.clone());
            match (ev.event_type, &ev.old) {
                ("ADDED", _) => {
                    objs.remove(&key);
                }
                (_, Some(old)) => {
                    objs.insert(key, stored(old));
                }
                _ => {}
            }
        }
        Some(
            objs.into_iter()
                .filter(|((n, _), _)| ns.is_none_or(|ns| !a.namespaced || n == ns))
                .map(|(_, v)| v)
                .filter(|v| sel.matches(k, v))
                .collect(),
        )
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
            return Err(if sub == Subresource::Scale {
                status::subresource_not_found(k.api(), "scale", name)
            } else {
                status::not_found(k.api(), name)
            });
        };
        let current = if sub == Subresource::Scale {
            kinds::scale_of(&old)
        } else {
            kinds::to_wire(k, &old)
        };
        let incoming = match (sub, patch_type) {
            (Subresource::Status, Some(ct)) => {
                let (mut v, _) = decode_patch(k, &current, ct, body, ctx.field_validation)?;
                if let Some(m) = v.as_object_mut() {
                    m.insert("kind".into(), json!(k.api().kind));
                }
                v
            }
            _ => subresource_body(k, sub, &current, patch_type, body)?,
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
        self.check_update_preconditions(ctx.inject_conflict, true, k, ns, name, &check, &old)?;
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
            if sub == Subresource::Finalize {
                let fins = incoming.pointer("/spec/finalizers").cloned();
                if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
                    match fins {
                        Some(f) if !f.is_null() => spec.insert("finalizers".into(), f),
                        _ => spec.remove("finalizers"),
                    };
                }
            } else if let (Some(m), Some(s)) = (new.as_object_mut(), incoming.get("status")) {
                m.insert("status".into(), s.clone());
            }
        }
        new = schema::normalize(k.schema(), &new);
        let errs = if sub == Subresource::Status {
            kinds::validate_status(k, &new, &old)
        } else {
            kinds::validate(k, &new, Some(&old))
        };
        if !errs.is_empty() {
            return Err(status::invalid(k.api(), name, &errs));
        }
        // The scale subresource's entry comes back from the Scale conversion without a time.
        let now = if sub == Subresource::Scale {
            String::new()
        } else {
            time::now_rfc3339()
        };
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
        if should_delete_during_update(k, &new, &old) {
            if !ctx.dry_run {
                self.remove(k, key, old);
            }
            return Ok(Outcome {
                code: 200,
                body: kinds::to_wire(k, &new),
                warnings: vec![],
            });
        }
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

impl State {
    /// A write the field manager does not record (the `binding` subresource: the scheduler
    /// setting a pod's node and its PodScheduled condition).
    pub fn untracked_update(
        &mut self,
        k: &'static dyn Kind,
        ns: &str,
        name: &str,
        mutate: &mut dyn FnMut(&mut Value),
    ) -> Result<Value, StatusBody> {
        let key = key(k, ns, name);
        let Some(old) = self.objects.get(&key).cloned() else {
            return Err(status::not_found(k.api(), name));
        };
        let mut obj = old.clone();
        mutate(&mut obj);
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

    /// A controller's write to the `status` subresource of an `apps/v1` kind, whose status
    /// strategy keeps the annotations the write carries (the deployment controller records
    /// `deployment.kubernetes.io/revision` with its status): `mutate` may change `status` and
    /// `metadata.annotations`, nothing else is kept.
    pub fn system_status_update(
        &mut self,
        k: &'static dyn Kind,
        ns: &str,
        name: &str,
        manager: &str,
        mutate: &mut dyn FnMut(&mut Value),
    ) -> Result<Value, StatusBody> {
        let key = key(k, ns, name);
        let Some(old) = self.objects.get(&key).cloned() else {
            return Err(status::not_found(k.api(), name));
        };
        let mut wire = kinds::to_wire(k, &old);
        mutate(&mut wire);
        let decoded = match k.decode(&wire) {
            Ok(d) => d.value,
            Err(e) => return Err(status::bad_request(e.to_string())),
        };
        let mut obj = old.clone();
        if let Some(m) = obj.as_object_mut() {
            m.insert(
                "status".into(),
                decoded.get("status").cloned().unwrap_or(Value::Null),
            );
        }
        match decoded.pointer("/metadata/annotations") {
            Some(a) if a.as_object().is_some_and(|m| !m.is_empty()) => {
                meta_mut(&mut obj).insert("annotations".into(), a.clone());
            }
            _ => {
                meta_mut(&mut obj).remove("annotations");
            }
        }
        obj = schema::normalize(k.schema(), &obj);
        let errs = kinds::validate_status(k, &obj, &old);
        if !errs.is_empty() {
            return Err(status::invalid(k.api(), name, &errs));
        }
        let now = time::now_rfc3339();
        managed_fields::apply_status_update_with_annotations(
            &managed_fields::Update {
                root_type: k.schema(),
                manager,
                api_version: k.api().api_version,
                subresource: "status",
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

/// `shouldDeleteDuringUpdate`: an update leaves no finalizers on an object whose deletion
/// only waited for them.
fn should_delete_during_update(k: &dyn Kind, new: &Value, old: &Value) -> bool {
    // A namespace also waits for its `spec.finalizers` (ShouldDeleteNamespaceDuringUpdate).
    if k.deletion() == Deletion::Namespace
        && new
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty())
    {
        return false;
    }
    let no_finalizers = new
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    let deleting = old
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null());
    let grace = old
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    no_finalizers && deleting && grace == 0
}

/// `BeforeDelete`'s preconditions: the uid and resourceVersion of a DeleteOptions.
fn check_delete_preconditions(
    k: &dyn Kind,
    name: &str,
    old: &Value,
    options: &Value,
) -> Result<(), StatusBody> {
    let pre = options.get("preconditions").unwrap_or(&Value::Null);
    for (field, what, why) in [
        ("uid", "UID", "deleted and then recreated"),
        ("resourceVersion", "ResourceVersion", "modified"),
    ] {
        if let Some(v) = pre.get(field).and_then(Value::as_str)
            && v != meta_str(old, field)
        {
            return Err(status::conflict(
                k.api().group,
                k.api().kind,
                name,
                &format!(
                    "the {what} in the precondition ({v}) does not match the {what} in record ({}). The object might have been {why}",
                    meta_str(old, field)
                ),
            ));
        }
    }
    Ok(())
}

/// `EnsureObjectNamespaceMatchesRequestNamespace`, then `checkName`: the body of a PUT or the
/// result of a PATCH names the object of the request.
fn check_namespace_and_name(
    k: &dyn Kind,
    ns: &str,
    name: &str,
    obj: &Value,
) -> Result<(), StatusBody> {
    let obj_ns = meta_str(obj, "namespace");
    if k.api().namespaced && !obj_ns.is_empty() && obj_ns != ns {
        return Err(status::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let obj_name = meta_str(obj, "name");
    if obj_name != name {
        return Err(status::bad_request(format!(
            "the name of the object ({obj_name}) does not match the name on the URL ({name})"
        )));
    }
    Ok(())
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
                    Err(SmpError::Internal(m)) => return Err(status::unknown_error(&m)),
                }
            }
        }
    };
    Ok(incoming)
}

/// The managedFields a create records for `obj`, an object that is answered rather than
/// stored (a review): compared with the zero object, as on any create.
pub fn created_fields(k: &dyn Kind, manager: &str, obj: &mut Value) {
    let now = time::now_rfc3339();
    managed_fields::apply_update(
        &managed_fields::Update {
            root_type: k.schema(),
            manager,
            api_version: k.api().api_version,
            subresource: "",
            now: &now,
        },
        None,
        obj,
    );
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::FieldValidation;

    fn ctx(dry_run: bool) -> WriteCtx {
        WriteCtx {
            manager: "test".into(),
            dry_run,
            field_validation: FieldValidation::Strict,
            inject_conflict: false,
            skip_webhooks: false,
        }
    }

    fn store_with_config_map() -> (Store, &'static dyn Kind) {
        let mut st = State::new(100);
        let ns = kinds::lookup("", "v1", "namespaces").unwrap();
        let cm = kinds::lookup("", "v1", "configmaps").unwrap();
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}});
        st.create(ns, "", body.to_string().as_bytes(), &ctx(false))
            .unwrap();
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        st.create(cm, "demo", body.to_string().as_bytes(), &ctx(false))
            .unwrap();
        (Store::new(st), cm)
    }

    #[test]
    fn patches_computed_side_by_side_lose_no_update() {
        let (store, cm) = store_with_config_map();
        let rv_before = store.read().rv;
        let n = 16;
        std::thread::scope(|s| {
            for i in 0..n {
                let store = &store;
                s.spawn(move || {
                    let patch = json!({"metadata": {"labels": {format!("l{i}"): "x"}}});
                    patch_shared(
                        store,
                        cm,
                        "demo",
                        "c",
                        "application/merge-patch+json",
                        patch.to_string().as_bytes(),
                        &ctx(false),
                    )
                    .unwrap();
                });
            }
        });
        let st = store.read();
        let obj = st.get_object(cm, "demo", "c").unwrap();
        let labels = obj["metadata"]["labels"].as_object().unwrap();
        assert_eq!(labels.len(), n, "{labels:?}");
        assert_eq!(st.rv, rv_before + n as u64);
        assert_eq!(meta_str(obj, "resourceVersion"), st.rv.to_string());
    }

    #[test]
    fn a_dry_run_patch_answers_the_change_and_stores_nothing() {
        let (store, cm) = store_with_config_map();
        let before = store.read().get_object(cm, "demo", "c").unwrap().clone();
        let rv = store.read().rv;
        let answer = patch_shared(
            &store,
            cm,
            "demo",
            "c",
            "application/merge-patch+json",
            br#"{"data": {"k": "v"}}"#,
            &ctx(true),
        )
        .unwrap();
        assert_eq!(answer.body["data"]["k"], "v");
        let st = store.read();
        assert_eq!(st.rv, rv);
        assert_eq!(st.get_object(cm, "demo", "c").unwrap(), &before);
    }

    #[test]
    fn a_patch_with_a_stale_resource_version_is_refused_after_a_concurrent_change() {
        let (store, cm) = store_with_config_map();
        let rv = store.read().rv.to_string();
        let first =
            format!(r#"{{"metadata": {{"resourceVersion": "{rv}"}}, "data": {{"a": "1"}}}}"#);
        let patch = |body: &str| {
            patch_shared(
                &store,
                cm,
                "demo",
                "c",
                "application/merge-patch+json",
                body.as_bytes(),
                &ctx(false),
            )
        };
        patch(&first).unwrap();
        let second = first.replace(r#""a": "1""#, r#""b": "2""#);
        let refused = patch(&second).unwrap_err();
        assert_eq!(refused.code, 409);
    }
}
