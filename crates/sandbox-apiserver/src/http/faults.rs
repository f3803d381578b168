//! Faults, as a middleware around the API handlers: request faults (a status, a dropped or
//! hung connection, a response cut midway, latency, requests held until released) act before a
//! request reaches the handlers; injected conflicts and competing writers act inside them,
//! through [`crate::api::Hooks`], at the moment a real race would happen.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::api::request::RequestInfo;
use crate::api::{Hooks, stopped};
use crate::kinds::{self, Kind};
use crate::model::status::{self, StatusBody};
use crate::store::{FieldValidation, Store, WriteCtx};

/// The field manager of competing writes.
pub const COMPETITOR: &str = "sandbox-competitor";

/// When a [`Fault::CompetingWrite`] fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Trigger {
    /// Right after our next GET of the object has been served.
    Read,
    /// Right before our next write to the object is processed: a PUT, PATCH or DELETE of it,
    /// or a POST to its collection that creates it (by `metadata.name`). Dry runs count.
    NextWrite,
    /// Like [`Trigger::NextWrite`], but dry runs do not count: right before the next write
    /// that would change the object (e.g. after a client's `dryRun=All` preflight).
    NextRealWrite,
}

/// A mutation applied by a competing writer.
pub type Mutation = Box<dyn FnOnce(&mut serde_json::Value) + Send>;

/// Injected misbehaviour. Each fault is consumed as it fires; the request log marks faulted
/// requests in `fault`.
pub enum Fault {
    /// The next `count` writes (PUT/PATCH/DELETE, dry runs included) to `object_path` get the
    /// exact 409 Conflict of a stale resourceVersion, after authorization, decoding and the
    /// existence check, as a real conflict would.
    Conflicts { object_path: String, count: u32 },
    /// The next `count` requests whose path starts with `path_prefix` (and method matches, when
    /// given) get a Status with this code and the reason kube uses for it.
    Status {
        method: Option<String>,
        path_prefix: String,
        status: u16,
        count: u32,
    },
    /// Delay every request by this much (`Duration::ZERO` turns it off).
    Latency(Duration),
    /// Another writer (manager `sandbox-competitor`) modifies the object, bumping its
    /// resourceVersion, at the given moment. A mutation that fails (the object is gone, the
    /// result is invalid) or changes nothing is loud: the request log marks the request
    /// `competing-write-failed`, `Sandbox::competing_write_failures` lists it, and
    /// dropping the `Sandbox` panics — a test whose competitor did nothing fails.
    CompetingWrite {
        object_path: String,
        after: Trigger,
        mutate: Mutation,
    },
    /// Another writer deletes the object at the given moment (loud on failure, as above).
    CompetingDelete { object_path: String, after: Trigger },
    /// Another writer deletes the object and creates it again under the same name: a new uid,
    /// the same labels, annotations and spec (server-set metadata and status reset), with
    /// `mutate` applied to the new object before it is created (loud on failure, as above).
    CompetingRecreate {
        object_path: String,
        after: Trigger,
        mutate: Option<Mutation>,
    },
    /// Another writer creates the object at `object_path` from `body` (its name and
    /// namespace are taken from the path) at the given moment — with
    /// [`Trigger::NextWrite`]/[`Trigger::NextRealWrite`], right before our POST that creates
    /// the same name, which then meets `AlreadyExists` (loud on failure, as above).
    CompetingCreate {
        object_path: String,
        after: Trigger,
        body: serde_json::Value,
    },
    /// Close the connection without any response for the next `count` matching requests
    /// (the request is not processed).
    DropConnection {
        method: Option<String>,
        path_prefix: String,
        count: u32,
    },
    /// Process the next `count` matching requests, then close the connection halfway through
    /// the response body.
    DropMidResponse {
        method: Option<String>,
        path_prefix: String,
        count: u32,
    },
    /// Never answer the next `count` matching requests (for client timeouts).
    Hang { path_prefix: String, count: u32 },
    /// Hold the next `count` matching requests before they are processed, until
    /// `Sandbox::release_held`; then they are processed and answered as usual. The
    /// request log gets each entry when it is answered; `Sandbox::held` counts the
    /// requests waiting now (a request whose client gave up stops counting) — so a test can act
    /// (send a signal) while a request is in flight.
    Hold {
        method: Option<String>,
        path_prefix: String,
        count: u32,
    },
    /// `fault` (a `Status`, `DropConnection`, `DropMidResponse`, `Hang` or `Hold`) that only
    /// matches requests with (`dry_run: true`) or without (`false`) `dryRun`: e.g. fail the real
    /// write of an object but not the dry-run preflight before it.
    Restrict { dry_run: bool, fault: Box<Fault> },
}

impl std::fmt::Debug for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Conflicts { object_path, count } => f
                .debug_struct("Conflicts")
                .field("object_path", object_path)
                .field("count", count)
                .finish(),
            Fault::Status {
                method,
                path_prefix,
                status,
                count,
            } => f
                .debug_struct("Status")
                .field("method", method)
                .field("path_prefix", path_prefix)
                .field("status", status)
                .field("count", count)
                .finish(),
            Fault::Latency(d) => f.debug_tuple("Latency").field(d).finish(),
            Fault::CompetingWrite {
                object_path, after, ..
            } => f
                .debug_struct("CompetingWrite")
                .field("object_path", object_path)
                .field("after", after)
                .finish(),
            Fault::CompetingDelete { object_path, after } => f
                .debug_struct("CompetingDelete")
                .field("object_path", object_path)
                .field("after", after)
                .finish(),
            Fault::CompetingRecreate {
                object_path, after, ..
            } => f
                .debug_struct("CompetingRecreate")
                .field("object_path", object_path)
                .field("after", after)
                .finish(),
            Fault::CompetingCreate {
                object_path, after, ..
            } => f
                .debug_struct("CompetingCreate")
                .field("object_path", object_path)
                .field("after", after)
                .finish(),
            Fault::DropConnection {
                method,
                path_prefix,
                count,
            } => f
                .debug_struct("DropConnection")
                .field("method", method)
                .field("path_prefix", path_prefix)
                .field("count", count)
                .finish(),
            Fault::DropMidResponse {
                method,
                path_prefix,
                count,
            } => f
                .debug_struct("DropMidResponse")
                .field("method", method)
                .field("path_prefix", path_prefix)
                .field("count", count)
                .finish(),
            Fault::Hang { path_prefix, count } => f
                .debug_struct("Hang")
                .field("path_prefix", path_prefix)
                .field("count", count)
                .finish(),
            Fault::Hold {
                method,
                path_prefix,
                count,
            } => f
                .debug_struct("Hold")
                .field("method", method)
                .field("path_prefix", path_prefix)
                .field("count", count)
                .finish(),
            Fault::Restrict { dry_run, fault } => f
                .debug_struct("Restrict")
                .field("dry_run", dry_run)
                .field("fault", fault)
                .finish(),
        }
    }
}

/// The armed faults of an instance, and what they left behind.
pub struct Faults {
    state: Mutex<FaultState>,
    /// Competing writers that could not do what they were armed to do.
    failures: Mutex<Vec<String>>,
    /// Requests held by [`Fault::Hold`] now, and the gate that releases them.
    held: AtomicU64,
    hold_gate: watch::Sender<u64>,
}

#[derive(Default)]
struct FaultState {
    active: Vec<Fault>,
    latency: Duration,
}

/// A fault that shapes a whole request, before it reaches the handlers.
pub enum RequestFault {
    /// Answer with this status code.
    Status(u16),
    /// Close the connection without a response.
    Drop,
    /// Process the request, then cut the response midway.
    DropMid,
    /// Never answer.
    Hang,
    /// Wait until released.
    Hold,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            state: Mutex::new(FaultState::default()),
            failures: Mutex::new(Vec::new()),
            held: AtomicU64::new(0),
            hold_gate: watch::channel(0).0,
        }
    }
}

impl Faults {
    /// Arm a fault ([`Fault::Latency`] replaces the latency).
    pub fn arm(&self, fault: Fault) {
        let mut f = self.state.lock();
        match fault {
            Fault::Latency(d) => f.latency = d,
            other => f.active.push(other),
        }
    }

    /// Disarm every fault and reset the latency.
    pub fn clear(&self) {
        let mut f = self.state.lock();
        f.active.clear();
        f.latency = Duration::ZERO;
    }

    /// The latency every request waits first.
    pub fn latency(&self) -> Duration {
        self.state.lock().latency
    }

    /// Look at the armed faults and the latency.
    pub fn inspect<R>(&self, f: impl FnOnce(&[Fault], Duration) -> R) -> R {
        let s = self.state.lock();
        f(&s.active, s.latency)
    }

    /// Competing writers that fired but could not act.
    pub fn failures(&self) -> Vec<String> {
        self.failures.lock().clone()
    }

    /// Return and forget the competing writers' failures.
    pub fn take_failures(&self) -> Vec<String> {
        std::mem::take(&mut *self.failures.lock())
    }

    /// How many requests a [`Fault::Hold`] holds now.
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::SeqCst)
    }

    /// Let every held request go on.
    pub fn release_held(&self) {
        self.hold_gate.send_modify(|g| *g += 1);
    }

    /// Wait while a [`Fault::Hold`] holds this request: until released or the sandbox stops.
    /// Counted while waiting, also when the client gives up and the future is dropped.
    pub async fn hold(&self, shutdown: &watch::Receiver<bool>) {
        let mut gate = self.hold_gate.subscribe();
        let generation = *gate.borrow_and_update();
        struct Held<'a>(&'a AtomicU64);
        impl Drop for Held<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        self.held.fetch_add(1, Ordering::SeqCst);
        let _held = Held(&self.held);
        let mut sd = shutdown.clone();
        tokio::select! {
            _ = gate.wait_for(|g| *g != generation) => {}
            _ = stopped(&mut sd) => {}
        }
    }

    /// The request fault for this request, if one matches: one firing of the first that does.
    pub fn take(&self, method: &str, path: &str, dry_run: bool) -> Option<RequestFault> {
        fn matches(fault: &Fault, method: &str, path: &str, dry_run: bool) -> bool {
            match fault {
                Fault::Status {
                    method: m,
                    path_prefix,
                    count,
                    ..
                }
                | Fault::DropConnection {
                    method: m,
                    path_prefix,
                    count,
                }
                | Fault::DropMidResponse {
                    method: m,
                    path_prefix,
                    count,
                }
                | Fault::Hold {
                    method: m,
                    path_prefix,
                    count,
                } => *count > 0 && method_matches(m, method) && prefix_matches(path_prefix, path),
                Fault::Hang { path_prefix, count } => {
                    *count > 0 && prefix_matches(path_prefix, path)
                }
                Fault::Restrict { dry_run: d, fault } => {
                    *d == dry_run && matches(fault, method, path, dry_run)
                }
                _ => false,
            }
        }
        fn fire(fault: &mut Fault) -> Option<RequestFault> {
            match fault {
                Fault::Status { status, count, .. } => {
                    *count -= 1;
                    Some(RequestFault::Status(*status))
                }
                Fault::DropConnection { count, .. } => {
                    *count -= 1;
                    Some(RequestFault::Drop)
                }
                Fault::DropMidResponse { count, .. } => {
                    *count -= 1;
                    Some(RequestFault::DropMid)
                }
                Fault::Hang { count, .. } => {
                    *count -= 1;
                    Some(RequestFault::Hang)
                }
                Fault::Hold { count, .. } => {
                    *count -= 1;
                    Some(RequestFault::Hold)
                }
                Fault::Restrict { fault, .. } => fire(fault),
                _ => None,
            }
        }
        fn spent(fault: &Fault) -> bool {
            match fault {
                Fault::Status { count, .. }
                | Fault::DropConnection { count, .. }
                | Fault::DropMidResponse { count, .. }
                | Fault::Hang { count, .. }
                | Fault::Hold { count, .. }
                | Fault::Conflicts { count, .. } => *count == 0,
                Fault::Restrict { fault, .. } => spent(fault),
                _ => false,
            }
        }
        let mut f = self.state.lock();
        let pos = f
            .active
            .iter()
            .position(|fault| matches(fault, method, path, dry_run))?;
        let fired = fire(&mut f.active[pos])?;
        f.active.retain(|fault| !spent(fault));
        Some(fired)
    }

    fn conflict_pending(&self, path: &str) -> bool {
        self.state.lock().active.iter().any(|f| matches!(f, Fault::Conflicts { object_path, count } if *count > 0 && same_path(object_path, path)))
    }

    fn consume_conflict(&self, path: &str) {
        let mut f = self.state.lock();
        if let Some(Fault::Conflicts { count, .. }) =
            f.active.iter_mut().find(|f| matches!(f, Fault::Conflicts { object_path, count } if *count > 0 && same_path(object_path, path)))
        {
            *count -= 1;
        }
        f.active
            .retain(|x| !matches!(x, Fault::Conflicts { count: 0, .. }));
    }

    /// Removes and returns the first competing-writer fault armed for `path` at `trigger`.
    /// `dry_run`: the request that triggers it is a dry run ([`Trigger::NextRealWrite`] waits
    /// for a real one).
    fn take_competitor(&self, path: &str, trigger: Trigger, dry_run: bool) -> Option<Fault> {
        let fires = |after: Trigger, object_path: &str| {
            same_path(object_path, path)
                && match trigger {
                    Trigger::Read => after == Trigger::Read,
                    Trigger::NextWrite | Trigger::NextRealWrite => {
                        after == Trigger::NextWrite || (after == Trigger::NextRealWrite && !dry_run)
                    }
                }
        };
        let mut f = self.state.lock();
        let pos = f.active.iter().position(|x| match x {
            Fault::CompetingWrite {
                object_path, after, ..
            }
            | Fault::CompetingDelete { object_path, after }
            | Fault::CompetingRecreate {
                object_path, after, ..
            }
            | Fault::CompetingCreate {
                object_path, after, ..
            } => fires(*after, object_path),
            _ => false,
        })?;
        Some(f.active.remove(pos))
    }

    /// Runs a competing writer taken by [`Faults::take_competitor`] against the object
    /// `ns`/`name` of kind `k`. Returns the request-log mark: `competing-…` when it did what it
    /// was armed to do, `competing-write-failed` (and a recorded failure) otherwise.
    pub fn run_competitor(
        &self,
        store: &Store,
        k: &'static dyn Kind,
        ns: &str,
        name: &str,
        fault: Fault,
    ) -> String {
        let (mark, result) = match fault {
            Fault::CompetingWrite { mutate, .. } => (
                "competing-write",
                competing_write(store, k, ns, name, mutate),
            ),
            Fault::CompetingDelete { .. } => (
                "competing-delete",
                store
                    .write()
                    .delete(k, ns, name, &json!({}), false, false)
                    .map(|_| ())
                    .map_err(|e| e.message),
            ),
            Fault::CompetingRecreate { mutate, .. } => (
                "competing-recreate",
                competing_recreate(store, k, ns, name, mutate),
            ),
            Fault::CompetingCreate { body, .. } => (
                "competing-create",
                competing_create(store, k, ns, name, body),
            ),
            _ => return String::new(),
        };
        match result {
            Ok(()) => mark.to_owned(),
            Err(why) => {
                self.failures
                    .lock()
                    .push(format!("{mark} of {} {ns}/{name}: {why}", k.api().resource));
                "competing-write-failed".to_owned()
            }
        }
    }
}

/// The fault middleware's part inside one request: injected conflicts and competing writers,
/// with the request-log mark of what fired.
pub struct RequestHooks<'a> {
    pub faults: &'a Faults,
    /// What fired (`conflict`, `competing-write`, …), for the request log.
    pub mark: Option<String>,
}

impl Hooks for RequestHooks<'_> {
    fn conflict_armed(&mut self, object_path: &str) -> bool {
        self.faults.conflict_pending(object_path)
    }

    fn conflict_sent(&mut self, object_path: &str) {
        self.faults.consume_conflict(object_path);
        self.mark = Some("conflict".into());
    }

    fn before_write(
        &mut self,
        store: &Store,
        k: &'static dyn Kind,
        ns: &str,
        name: &str,
        object_path: &str,
        dry_run: bool,
    ) {
        if let Some(c) = self
            .faults
            .take_competitor(object_path, Trigger::NextWrite, dry_run)
        {
            self.mark = Some(self.faults.run_competitor(store, k, ns, name, c));
        }
    }

    fn after_read(
        &mut self,
        store: &Store,
        k: &'static dyn Kind,
        ns: &str,
        name: &str,
        object_path: &str,
    ) {
        if let Some(c) = self
            .faults
            .take_competitor(object_path, Trigger::Read, false)
        {
            self.mark = Some(self.faults.run_competitor(store, k, ns, name, c));
        }
    }
}

fn prefix_matches(prefix: &str, path: &str) -> bool {
    path.starts_with(prefix)
}

fn method_matches(want: &Option<String>, method: &str) -> bool {
    want.as_deref()
        .is_none_or(|m| m.eq_ignore_ascii_case(method))
}

/// Apply a competing writer's mutation to the object; an error when it cannot be applied
/// or changes nothing.
fn competing_write(
    store: &Store,
    k: &'static dyn Kind,
    ns: &str,
    name: &str,
    mutate: Mutation,
) -> Result<(), String> {
    let mut once = Some(mutate);
    let mut st = store.write();
    let before = st.rv;
    st.system_update(k, ns, name, COMPETITOR, "", &mut |obj| {
        if let Some(m) = once.take() {
            m(obj);
        }
    })
    .map_err(|e| e.message)?;
    if st.rv == before {
        return Err("the mutation changed nothing".into());
    }
    Ok(())
}

fn competing_recreate(
    store: &Store,
    k: &'static dyn Kind,
    ns: &str,
    name: &str,
    mutate: Option<Mutation>,
) -> Result<(), String> {
    let mut st = store.write();
    let old = st.get(k, ns, name).map_err(|e| e.message)?;
    let mut fresh = old.clone();
    if let Some(meta) = fresh.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generation",
            "managedFields",
            "deletionTimestamp",
            "selfLink",
        ] {
            meta.remove(field);
        }
    }
    if let Some(m) = fresh.as_object_mut() {
        m.remove("status");
    }
    if let Some(m) = mutate {
        m(&mut fresh);
    }
    st.delete(k, ns, name, &json!({}), false, false)
        .map_err(|e| e.message)?;
    let bytes = serde_json::to_vec(&fresh).map_err(|e| e.to_string())?;
    st.create(k, ns, &bytes, &competitor_ctx())
        .map(|_| ())
        .map_err(|e| e.message)
}

fn competing_create(
    store: &Store,
    k: &'static dyn Kind,
    ns: &str,
    name: &str,
    mut body: Value,
) -> Result<(), String> {
    if let Some(m) = body.as_object_mut() {
        let meta = m.entry("metadata").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert("name".into(), json!(name));
            if k.api().namespaced {
                meta.insert("namespace".into(), json!(ns));
            }
        }
    }
    let bytes = serde_json::to_vec(&body).map_err(|e| e.to_string())?;
    store
        .write()
        .create(k, ns, &bytes, &competitor_ctx())
        .map(|_| ())
        .map_err(|e| e.message)
}

fn competitor_ctx() -> WriteCtx {
    WriteCtx {
        manager: COMPETITOR.into(),
        dry_run: false,
        field_validation: FieldValidation::Strict,
        inject_conflict: false,
        skip_webhooks: false,
    }
}

fn same_path(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

/// The Status a `Fault::Status` answers with: the reason kube uses for the code, and the
/// message a real failure of that code has.
pub fn status_for(code: u16, info: &RequestInfo, user: &str) -> StatusBody {
    let kind = kinds::lookup(&info.group, &info.version, &info.resource);
    match code {
        401 => status::unauthorized(),
        403 if info.resource_request => super::auth::forbidden(user, info),
        404 if kind.is_some() && !info.name.is_empty() => kind
            .map(|k| status::not_found(k.api(), &info.name))
            .unwrap_or_else(|| status::generic(404, "")),
        409 if kind.is_some() && !info.name.is_empty() => kind
            .map(|k| status::conflict_modified(k.api(), &info.name))
            .unwrap_or_else(|| status::generic(409, "")),
        422 if kind.is_some() => kind
            .map(|k| {
                status::invalid(
                    k.api(),
                    &info.name,
                    &[status::FieldError::invalid(
                        "metadata",
                        "\"sandbox\"",
                        "injected fault",
                    )],
                )
            })
            .unwrap_or_else(|| status::generic(422, "")),
        400 => status::bad_request("injected fault"),
        500 => status::internal("injected fault"),
        503 => StatusBody::new(
            503,
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
            None,
        ),
        504 => StatusBody::new(
            504,
            "Timeout",
            "Timeout: request did not complete within requested timeout - context deadline exceeded",
            Some(json!({})),
        ),
        c => status::generic(c, "injected fault"),
    }
}
