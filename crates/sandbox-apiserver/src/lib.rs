//! An in-memory Kubernetes API server that behaves like kube-apiserver v1.28 for the objects
//! kubectl-appupdate touches: namespaces, Deployments, Services, HorizontalPodAutoscalers and
//! Ingresses.
//!
//! It is test, demo and benchmark infrastructure. [`Sandbox::start`] runs one instance on its own
//! thread and tokio runtime on `127.0.0.1:0` (TLS with a generated CA, or plain HTTP), writes a
//! kubeconfig with one context per identity, and gives tests a handle to seed objects, act as a
//! competing writer, inject faults, drive Deployment rollouts and read the request log. The
//! `sandbox-apiserver serve` binary runs the same server standalone with a demo application.
//!
//! How a request is handled, in the real server's order: faults and latency → authentication
//! (bearer token, 401) → authorization (403, also under `dryRun=All`) → routing (404/405/415) →
//! body decoding (400) → object existence (404) → preconditions (409) → validation (422) →
//! defaulting, managedFields, resourceVersion, watch events.

// `StatusBody` is the error of most operations and mirrors metav1.Status; boxing it would only
// make call sites noisier.
#![allow(clippy::result_large_err)]

mod discovery;
mod fieldset;
mod gojson;
mod kinds;
mod patch;
mod quantity;
mod rollout;
mod sandbox;
mod schema;
mod selector;
mod server;
mod status;
mod store;
mod timefmt;
mod tls;
mod validation;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use sandbox::{Sandbox, StartError, parse_rollout};
pub use status::StatusBody;
pub use tls::client_certificate;

/// The label and field selector parsers (apimachinery's grammar and error texts), public for
/// fuzzing: what `?labelSelector=` and `?fieldSelector=` go through.
pub use selector::{FieldSelector, LabelSelector};

/// How to start a sandbox.
#[derive(Debug, Clone)]
pub struct SandboxOptions {
    /// Serve HTTPS with a generated CA (`true`) or plain HTTP.
    pub tls: bool,
    /// Port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// The revision counter before the first write (the recorded fixtures start at 192).
    pub initial_resource_version: u64,
    /// Deployment rollout simulation (default: off, like a cluster without controllers).
    pub rollout: Rollout,
    /// Also write each logged request as one JSON line here.
    pub request_log: Option<RequestLogSink>,
    /// With TLS, offer only `http/1.1` by ALPN (default: `h2` and `http/1.1`), for clients'
    /// HTTP/1.1 paths.
    pub http1_only: bool,
}

impl Default for SandboxOptions {
    fn default() -> Self {
        SandboxOptions {
            tls: true,
            port: 0,
            initial_resource_version: 100,
            rollout: Rollout::Off,
            request_log: None,
            http1_only: false,
        }
    }
}

/// Where `--request-log` lines go.
#[derive(Debug, Clone)]
pub enum RequestLogSink {
    Stdout,
    Stderr,
    File(std::path::PathBuf),
}

/// The identities the sandbox knows (bearer tokens are random per instance).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Identity {
    /// Everything (like `system:masters`); kubeconfig context `sandbox`.
    Admin,
    /// get/list/watch on every resource, 403 on every write (dry runs too); context `sandbox-readonly`.
    ReadOnly,
    /// Authenticated, no RBAC bindings: only discovery; context `sandbox-noperm`.
    NoPerm,
    /// A token the server does not know: 401; context `sandbox-invalid`.
    Invalid,
}

impl Identity {
    /// The user name the server reports (`User "readonly" cannot …`).
    pub fn user_name(self) -> &'static str {
        match self {
            Identity::Admin => "admin",
            Identity::ReadOnly => "readonly",
            Identity::NoPerm => "noperm",
            Identity::Invalid => "invalid-token",
        }
    }
}

/// Deployment rollout simulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rollout {
    /// Status is never touched (the recorded cluster had no controllers).
    Off,
    /// After a spec change, the status advances in two steps and completes after `delay`.
    Auto { delay: Duration },
    /// observedGeneration advances, but updated/available replicas never reach spec.replicas.
    Stuck,
    /// Like `Stuck`, with Progressing=False reason ProgressDeadlineExceeded.
    ProgressDeadlineExceeded,
}

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
    /// `competing-write-failed`, [`crate::Sandbox::competing_write_failures`] lists it, and
    /// dropping the [`crate::Sandbox`] panics — a test whose competitor did nothing fails.
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
    /// [`crate::Sandbox::release_held`]; then they are processed and answered as usual. The
    /// request log gets each entry when it is answered; [`crate::Sandbox::held`] counts the
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

/// One request as the sandbox saw it. Printed as one JSON object per line by `--request-log`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggedRequest {
    /// 1, 2, 3… in arrival order.
    pub seq: u64,
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The query, decoded (`labelSelector=app=web&watch=true`); empty when none.
    pub query: String,
    /// `admin`, `readonly`, `noperm`, `invalid-token`, `system:anonymous`, or `sandbox-control`
    /// for objects written through the [`Sandbox`] handle.
    pub user: String,
    /// `dryRun=All` was given.
    pub dry_run: bool,
    /// HTTP status sent (0: none, the connection was dropped or the request hung).
    pub status: u16,
    /// The Status `reason` of an error response.
    pub reason: Option<String>,
    /// The fault that shaped this response, if any (`conflict`, `status`, `latency`,
    /// `competing-write`, `competing-delete`, `competing-recreate`, `competing-create`,
    /// `competing-write-failed`, `drop-connection`, `drop-mid-response`, `hang`, `hold`).
    pub fault: Option<String>,
    /// Milliseconds since the sandbox started.
    pub started_ms: f64,
    pub duration_ms: f64,
    /// The TCP connection (1, 2, …): how many connections/TLS handshakes a client made.
    pub connection_id: u64,
    /// `HTTP/1.1` or `HTTP/2.0`.
    pub http_version: String,
    pub user_agent: String,
}

/// Request counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    pub requests: u64,
    pub by_method: BTreeMap<String, u64>,
    pub by_status: BTreeMap<u16, u64>,
    /// POST/PUT/PATCH/DELETE requests, dry runs included.
    pub writes: u64,
    pub dry_run_writes: u64,
    /// 409 responses with reason Conflict (injected or real).
    pub conflicts: u64,
    pub faults: u64,
    pub watches: u64,
    /// TCP connections accepted.
    pub connections: u64,
}
