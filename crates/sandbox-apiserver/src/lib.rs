//! An in-memory Kubernetes API server that behaves like kube-apiserver v1.28 for the objects
//! kubectl-appupdate touches: namespaces, Deployments, Services, HorizontalPodAutoscalers,
//! Ingresses and IngressClasses, ConfigMaps, the Gateway API's custom resources — and the
//! ReplicaSets, Pods, Events and ResourceQuotas of a cluster that runs what it is given (as
//! v1.33 stores them), for explaining rollouts that fail.
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
//!
//! The modules are layers; each uses only the ones listed before it:
//!
//! 1. [`model`] — schema, names, quantities, time, Go-style JSON, Status errors, selectors;
//! 2. [`kinds`] — one file per kind implementing the [`kinds::Kind`] strategy trait;
//! 3. [`store`] — objects, revisions, watch events, managed fields, patches;
//! 4. [`controllers`] — the rollout simulation and the cluster it runs, clients of the store;
//! 5. [`api`] — the handlers: get, list, watch, writes, tables, discovery;
//! 6. [`http`] — connections, TLS, the request log, faults as a middleware, auth, routing;
//! 7. [`control`] — the `/sandbox/…` control surface and the demo application;
//! 8. [`sandbox`] — the [`Sandbox`] handle that assembles them.
//!
//! `scripts/module-cycles.py crates/sandbox-apiserver/src` checks that no module depends on
//! one above it in a cycle; `docs/architecture.md` says where each job lives and how to add a
//! kind.

// `StatusBody` is the error of most operations and mirrors metav1.Status; boxing it would only
// make call sites noisier.
#![allow(clippy::result_large_err)]

mod api;
mod control;
mod controllers;
mod http;
mod kinds;
mod model;
mod sandbox;
mod store;

pub use control::parse_rollout;
pub use controllers::cluster::{KubeletTimings, NODE_IP, NODE_NAME, SCHEDULER_INSTANCE};
pub use controllers::rollout::Rollout;
pub use http::auth::Identity;
pub use http::faults::{Fault, Mutation, Trigger};
pub use http::log::{Counters, LoggedRequest};
pub use http::tls::client_certificate;
pub use kinds::{GatewayApiChannel, GatewayApiVersion, IngressNginxWebhook};
pub use model::status::StatusBody;
pub use sandbox::{RequestLogSink, Sandbox, SandboxOptions, StartError};

/// The label and field selector parsers (apimachinery's grammar and error texts), public for
/// fuzzing: what `?labelSelector=` and `?fieldSelector=` go through.
pub use model::selector::{FieldSelector, LabelSelector};
