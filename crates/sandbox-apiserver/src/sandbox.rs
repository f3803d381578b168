//! The [`Sandbox`] handle: start/stop, kubeconfig, direct store access, faults, rollout mode,
//! the request log; and the `/sandbox/…` control surface that offers the same to standalone
//! runs.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::kinds::{self, Kind};
use crate::server::{self, Reply, Shared};
use crate::status::{self, StatusBody};
use crate::store::{FieldValidation, Selectors, State, WriteCtx};
use crate::{
    Counters, Fault, Identity, LoggedRequest, RequestLogSink, Rollout, SandboxOptions, Trigger,
};

/// Why a sandbox could not start.
#[derive(Debug)]
pub struct StartError(String);

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot start the sandbox API server: {}", self.0)
    }
}

impl std::error::Error for StartError {}

impl From<std::io::Error> for StartError {
    fn from(e: std::io::Error) -> Self {
        StartError(e.to_string())
    }
}

/// A running API server emulator. Dropping it stops the server.
pub struct Sandbox {
    shared: Arc<Shared>,
    url: String,
    ca_pem: Option<String>,
    ca_der: Option<Vec<u8>>,
    shutdown: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox").field("url", &self.url).finish()
    }
}

const MANAGER: &str = "sandbox-control";
/// The field manager of competing writes.
pub(crate) const COMPETITOR: &str = "sandbox-competitor";

fn random_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

impl Sandbox {
    /// Bind `127.0.0.1:<port>` and serve on a thread of its own until dropped.
    pub fn start(opts: SandboxOptions) -> Result<Sandbox, StartError> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", opts.port))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let tls = if opts.tls {
            Some(crate::tls::generate(opts.http1_only).map_err(StartError)?)
        } else {
            None
        };
        let mut tokens = HashMap::new();
        for id in [
            Identity::Admin,
            Identity::ReadOnly,
            Identity::NoPerm,
            Identity::Invalid,
        ] {
            tokens.insert(id, random_token());
        }
        let sink: Option<Box<dyn std::io::Write + Send>> = match &opts.request_log {
            None => None,
            Some(RequestLogSink::Stdout) => Some(Box::new(std::io::stdout())),
            Some(RequestLogSink::Stderr) => Some(Box::new(std::io::stderr())),
            Some(RequestLogSink::File(p)) => Some(Box::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)?,
            )),
        };
        let (sd_tx, sd_rx) = watch::channel(false);
        let shared = Arc::new(Shared::new(
            State::new(opts.initial_resource_version),
            tokens,
            addr,
            tls.is_some(),
            opts.rollout,
            sink,
            sd_rx.clone(),
        ));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .thread_name("sandbox-apiserver")
            .build()?;
        let url = format!("{}://{addr}", if tls.is_some() { "https" } else { "http" });
        let ca_pem = tls.as_ref().map(|t| t.ca_pem.clone());
        let ca_der = tls.as_ref().map(|t| t.ca_der.clone());
        let acceptor = tls.map(|t| tokio_rustls::TlsAcceptor::from(t.config));
        let thread_shared = shared.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
        let thread = std::thread::Builder::new()
            .name("sandbox-apiserver".into())
            .spawn(move || {
                rt.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e.to_string()));
                            return;
                        }
                    };
                    tokio::spawn(crate::rollout::run(thread_shared.clone()));
                    let _ = ready_tx.send(Ok(()));
                    accept_loop(listener, thread_shared, acceptor, sd_rx).await;
                });
                rt.shutdown_timeout(Duration::from_millis(200));
            })?;
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(StartError(e)),
            Err(_) => return Err(StartError("the server thread exited".into())),
        }
        Ok(Sandbox {
            shared,
            url,
            ca_pem,
            ca_der,
            shutdown: sd_tx,
            thread: Some(thread),
        })
    }

    /// `https://127.0.0.1:PORT` (or `http://…`).
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// The generated CA certificate (PEM), when serving TLS.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// The generated CA certificate (DER), when serving TLS.
    pub fn ca_der(&self) -> Option<&[u8]> {
        self.ca_der.as_deref()
    }

    /// The bearer token of an identity (`Invalid`: a token the server rejects).
    pub fn token(&self, id: Identity) -> String {
        self.shared.token_of.get(&id).cloned().unwrap_or_default()
    }

    /// A kubeconfig with contexts `sandbox` (admin, current), `sandbox-readonly`,
    /// `sandbox-noperm` and `sandbox-invalid`, each defaulting to `namespace`.
    pub fn kubeconfig_yaml(&self, namespace: &str) -> String {
        use base64::Engine;
        let q = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
        let mut y =
            String::from("apiVersion: v1\nkind: Config\nclusters:\n- name: sandbox\n  cluster:\n");
        y.push_str(&format!("    server: {}\n", q(&self.url)));
        if let Some(ca) = &self.ca_pem {
            let b64 = base64::engine::general_purpose::STANDARD.encode(ca.as_bytes());
            y.push_str(&format!("    certificate-authority-data: {b64}\n"));
        }
        y.push_str("contexts:\n");
        for (ctx, user) in [
            ("sandbox", "sandbox-admin"),
            ("sandbox-readonly", "sandbox-readonly"),
            ("sandbox-noperm", "sandbox-noperm"),
            ("sandbox-invalid", "sandbox-invalid"),
        ] {
            y.push_str(&format!("- name: {ctx}\n  context:\n    cluster: sandbox\n    user: {user}\n    namespace: {}\n", q(namespace)));
        }
        y.push_str("current-context: sandbox\nusers:\n");
        for (user, id) in [
            ("sandbox-admin", Identity::Admin),
            ("sandbox-readonly", Identity::ReadOnly),
            ("sandbox-noperm", Identity::NoPerm),
            ("sandbox-invalid", Identity::Invalid),
        ] {
            y.push_str(&format!(
                "- name: {user}\n  user:\n    token: {}\n",
                q(&self.token(id))
            ));
        }
        y.push_str("preferences: {}\n");
        y
    }

    pub fn write_kubeconfig(&self, path: impl AsRef<Path>, namespace: &str) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig_yaml(namespace))
    }

    /// Create an object through the same path as an HTTP POST (admin, manager
    /// `sandbox-control`), without a request-log entry. `collection_path` is e.g.
    /// `/apis/apps/v1/namespaces/shop/deployments`.
    pub fn create(&self, collection_path: &str, body: Value) -> Result<Value, StatusBody> {
        let (k, ns, _) = resolve(collection_path)?;
        let bytes = serde_json::to_vec(&body).map_err(|e| status::bad_request(e.to_string()))?;
        let ctx = WriteCtx {
            manager: MANAGER.into(),
            dry_run: false,
            field_validation: FieldValidation::Strict,
            inject_conflict: false,
        };
        self.shared
            .state
            .lock()
            .create(k, &ns, &bytes, &ctx)
            .map(|o| o.body)
    }

    /// The object at `object_path`, as a GET would return it.
    pub fn get(&self, object_path: &str) -> Option<Value> {
        let (k, ns, name) = resolve(object_path).ok()?;
        self.shared.state.lock().get(k, &ns, &name).ok()
    }

    /// The objects of a collection (`…/namespaces/shop/ingresses`, or all namespaces without
    /// one), with kind/apiVersion, in name order.
    pub fn list(&self, collection_path: &str) -> Vec<Value> {
        let Ok((k, ns, _)) = resolve(collection_path) else {
            return Vec::new();
        };
        let st = self.shared.state.lock();
        let ns = (!ns.is_empty()).then_some(ns.as_str());
        st.select(k, ns, &Selectors::default())
            .into_iter()
            .map(|o| kinds::with_type_meta(k, o))
            .collect()
    }

    /// A competing writer: mutate the object now (manager `sandbox-competitor`), with the usual
    /// resourceVersion, generation and managedFields rules.
    pub fn update(
        &self,
        object_path: &str,
        mutate: impl FnOnce(&mut Value),
    ) -> Result<Value, StatusBody> {
        let (k, ns, name) = resolve(object_path)?;
        let mut once = Some(mutate);
        self.shared
            .state
            .lock()
            .system_update(k, &ns, &name, COMPETITOR, "", &mut |obj| {
                if let Some(m) = once.take() {
                    m(obj);
                }
            })
    }

    /// Delete the object now.
    pub fn delete(&self, object_path: &str) -> Result<(), StatusBody> {
        let (k, ns, name) = resolve(object_path)?;
        self.shared
            .state
            .lock()
            .delete(k, &ns, &name, &json!({}), false, false)
            .map(|_| ())
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.state.lock().rv
    }

    /// Seed the demo application `app` in `namespace` (created if needed): Deployment, Service,
    /// HPA, two managed Ingresses (`app=<app>`, `identifier=<id>`) and one unmanaged Ingress
    /// labelled only `app=<app>`.
    pub fn seed_demo_app(&self, namespace: &str, app: &str) -> Result<(), StatusBody> {
        seed_demo_app(&self.shared, namespace, app)
    }

    /// Arm a fault (see [`Fault`]).
    pub fn inject(&self, fault: Fault) {
        let mut f = self.shared.faults.lock();
        match fault {
            Fault::Latency(d) => f.latency = d,
            other => f.active.push(other),
        }
    }

    /// Disarm every fault and reset the latency.
    pub fn clear_faults(&self) {
        let mut f = self.shared.faults.lock();
        f.active.clear();
        f.latency = Duration::ZERO;
    }

    pub fn set_rollout(&self, rollout: Rollout) {
        *self.shared.rollout.lock() = rollout;
        self.shared.rollout_changed.notify_one();
    }

    /// Every logged request so far.
    pub fn requests(&self) -> Vec<LoggedRequest> {
        self.shared.log.lock().entries.clone()
    }

    /// Forget the logged requests and reset the counters.
    pub fn clear_requests(&self) {
        let mut log = self.shared.log.lock();
        log.entries.clear();
        log.counters = Counters::default();
    }

    pub fn counters(&self) -> Counters {
        self.shared.log.lock().counters.clone()
    }

    /// Competing writers ([`Fault::CompetingWrite`] and friends) that fired but could not do
    /// what they were armed to do (the object was gone, the mutation was invalid or changed
    /// nothing). Dropping the handle panics when this is not empty, so a test whose competitor
    /// silently did nothing fails; call [`Sandbox::take_competing_write_failures`] to expect one.
    pub fn competing_write_failures(&self) -> Vec<String> {
        self.shared.competitor_failures.lock().clone()
    }

    /// How many requests a [`Fault::Hold`] is holding now.
    pub fn held(&self) -> u64 {
        self.shared.held.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Lets every request held by [`Fault::Hold`] go on: it is processed and answered.
    pub fn release_held(&self) {
        self.shared.hold_gate.send_modify(|g| *g += 1);
    }

    /// Returns and forgets the recorded competing-writer failures.
    pub fn take_competing_write_failures(&self) -> Vec<String> {
        std::mem::take(&mut *self.shared.competitor_failures.lock())
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let failures = self.take_competing_write_failures();
        if !failures.is_empty() && !std::thread::panicking() {
            let _ = self.shutdown.send(true);
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
            panic!(
                "sandbox-apiserver: a competing writer failed, so the test did not test what it meant to: {}",
                failures.join("; ")
            );
        }
        let _ = self.shutdown.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = crate::server::stopped(&mut shutdown) => return,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                let conn_id = shared.next_connection();
                let shared = shared.clone();
                let tls = tls.clone();
                tokio::spawn(async move {
                    let svc_shared = shared.clone();
                    let svc = hyper::service::service_fn(move |req| server::serve(svc_shared.clone(), conn_id, req));
                    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    // Go's net/http writes canonical header names (`Content-Type`, `Audit-Id`).
                    builder.http1().title_case_headers(true);
                    match tls {
                        Some(acceptor) => {
                            let Ok(stream) = acceptor.accept(stream).await else { return };
                            let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
                        }
                        None => {
                            let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
                        }
                    }
                });
            }
        }
    }
}

/// A path → (kind, namespace, name).
pub(crate) fn resolve(path: &str) -> Result<(&'static Kind, String, String), StatusBody> {
    let p = path.split('?').next().unwrap_or("");
    let parts: Vec<&str> = p
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, rest) = match parts.first() {
        Some(&"api") if parts.len() >= 3 => ("", &parts[1..]),
        Some(&"apis") if parts.len() >= 4 => (parts[1], &parts[2..]),
        _ => return Err(status::generic(404, "")),
    };
    let version = rest[0];
    let mut cur: Vec<&str> = rest[1..].to_vec();
    let mut ns = String::new();
    if cur.first() == Some(&"namespaces") && cur.len() > 2 {
        ns = cur[1].to_string();
        cur = cur[2..].to_vec();
    }
    let resource = cur.first().copied().unwrap_or("");
    let name = cur.get(1).copied().unwrap_or("").to_string();
    let k = kinds::lookup(group, version, resource).ok_or_else(|| status::generic(404, ""))?;
    Ok((k, ns, name))
}

fn write_ctx() -> WriteCtx {
    WriteCtx {
        manager: MANAGER.into(),
        dry_run: false,
        field_validation: FieldValidation::Strict,
        inject_conflict: false,
    }
}

fn create_if_missing(
    shared: &Shared,
    k: &'static Kind,
    ns: &str,
    name: &str,
    body: Value,
) -> Result<(), StatusBody> {
    let mut st = shared.state.lock();
    if st
        .get_object(k, if k.namespaced { ns } else { "" }, name)
        .is_some()
    {
        return Ok(());
    }
    let bytes = serde_json::to_vec(&body).map_err(|e| status::bad_request(e.to_string()))?;
    st.create(k, ns, &bytes, &write_ctx()).map(|_| ())
}

/// Identifier label values as kubectl-appupdate computes them (SHA-256 of the sorted scopes,
/// first 16 hex digits): the public group and the `[user]` group.
const PUBLIC_ID: &str = "e3b0c44298fc1c14";
const USER_ID: &str = "04f8996da763b7a9";

fn snippet(app: &str, scopes: &[&str]) -> String {
    let mut s = String::new();
    if !scopes.is_empty() {
        s.push_str(&format!("set $scopes \"{}\";\n", scopes.join(" ")));
        s.push_str("auth_request /external-auth;\n");
        s.push_str("auth_request_set $user_id $upstream_http_user_id;\n");
        s.push_str("auth_request_set $user_scopes $upstream_http_user_scopes;\n");
        s.push_str("proxy_set_header User-Id $user_id;\n");
        s.push_str("proxy_set_header User-Scopes $user_scopes;\n");
    }
    s.push_str(&format!(
        "rewrite ^/{}/(.*)$ /$1 break;\n",
        app.replace('.', "\\.")
    ));
    s
}

fn ingress(
    app: &str,
    name: &str,
    labels: Value,
    annotations: Option<String>,
    paths: &[&str],
) -> Value {
    let mut meta = json!({"name": name, "labels": labels});
    if let Some(a) = annotations {
        meta["annotations"] = json!({"nginx.ingress.kubernetes.io/configuration-snippet": a});
    }
    let paths: Vec<Value> = paths
        .iter()
        .map(|p| json!({"path": format!("/{app}{p}"), "pathType": "Prefix", "backend": {"service": {"name": app, "port": {"number": 80}}}}))
        .collect();
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta,
        "spec": {"ingressClassName": "nginx", "rules": [{"http": {"paths": paths}}]}})
}

pub(crate) fn seed_demo_app(shared: &Shared, namespace: &str, app: &str) -> Result<(), StatusBody> {
    let by = |kind: &str| kinds::by_kind(kind).ok_or_else(|| status::internal("unknown kind"));
    create_if_missing(
        shared,
        by("Namespace")?,
        "",
        namespace,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
    )?;
    create_if_missing(
        shared,
        by("Deployment")?,
        namespace,
        app,
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": app, "labels": {"app": app}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": app}},
                "template": {"metadata": {"labels": {"app": app}},
                    "spec": {"containers": [{"name": "app", "image": format!("registry.example.com/{app}:1.0"),
                        "ports": [{"name": "http", "containerPort": 8080}]}]}}}}),
    )?;
    create_if_missing(
        shared,
        by("Service")?,
        namespace,
        app,
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": app, "labels": {"app": app}},
            "spec": {"selector": {"app": app}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}),
    )?;
    create_if_missing(
        shared,
        by("HorizontalPodAutoscaler")?,
        namespace,
        app,
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": app, "labels": {"app": app}},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": app}, "minReplicas": 2, "maxReplicas": 5,
                "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]}}),
    )?;
    let ing = by("Ingress")?;
    let public = format!("{app}-{PUBLIC_ID}");
    create_if_missing(
        shared,
        ing,
        namespace,
        &public,
        ingress(
            app,
            &public,
            json!({"app": app, "identifier": PUBLIC_ID}),
            Some(snippet(app, &[])),
            &["/health", "/unprotected"],
        ),
    )?;
    let user = format!("{app}-{USER_ID}");
    create_if_missing(
        shared,
        ing,
        namespace,
        &user,
        ingress(
            app,
            &user,
            json!({"app": app, "identifier": USER_ID}),
            Some(snippet(app, &["user"])),
            &["/protected/user"],
        ),
    )?;
    let other = format!("{app}-unmanaged");
    create_if_missing(
        shared,
        ing,
        namespace,
        &other,
        ingress(app, &other, json!({"app": app}), None, &["/legacy"]),
    )?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// OpenAPI v3: just enough for kubectl's field-validation check (it asks whether the PATCH
// operation of the kind accepts `fieldValidation`, then leaves validation to the server).

fn openapi_gvs() -> Vec<(&'static str, &'static str)> {
    vec![
        ("", "v1"),
        ("apps", "v1"),
        ("autoscaling", "v2"),
        ("networking.k8s.io", "v1"),
    ]
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// A minimal `openapi_v2.Document` in protobuf (swagger "2.0", info, empty paths): kubectl
/// 1.28 loads it before validating `create -f`/`replace -f` input, finds no schema for the
/// kind and leaves validation to the server (`fieldValidation=Strict`).
pub(crate) fn openapi_v2_protobuf() -> Vec<u8> {
    fn field(tag: u8, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        let mut len = bytes.len();
        loop {
            let b = (len & 0x7f) as u8;
            len >>= 7;
            if len == 0 {
                out.push(b);
                break;
            }
            out.push(b | 0x80);
        }
        out.extend_from_slice(bytes);
        out
    }
    let mut info = field(0x0a, b"Kubernetes");
    info.extend(field(0x12, b"v1.28.0"));
    let mut doc = field(0x0a, b"2.0");
    doc.extend(field(0x12, &info));
    doc.extend(field(0x42, &[]));
    doc
}

pub(crate) fn openapi_v3_root() -> Value {
    let mut paths = serde_json::Map::new();
    for (g, v) in openapi_gvs() {
        let p = gv_path(g, v);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash=SANDBOX{}", p.len())}),
        );
    }
    json!({"paths": paths})
}

pub(crate) fn openapi_v3_doc(path: &str) -> Option<Value> {
    let (g, v) = openapi_gvs()
        .into_iter()
        .find(|(g, v)| gv_path(g, v) == path)?;
    let params = json!([
        {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}}
    ]);
    let mut paths = serde_json::Map::new();
    for k in kinds::KINDS
        .iter()
        .filter(|k| k.group == g && k.version == v)
    {
        let prefix = format!("/{}", gv_path(g, v));
        let item = if k.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", k.resource)
        } else {
            format!("{prefix}/{}/{{name}}", k.resource)
        };
        paths.insert(
            item,
            json!({"patch": {
                "operationId": format!("patch{}", k.kind),
                "parameters": params,
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": {"group": k.group, "kind": k.kind, "version": k.version}
            }}),
        );
    }
    Some(
        json!({"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.28.0"}, "paths": paths, "components": {"schemas": {}}}),
    )
}

// ---------------------------------------------------------------------------------------------
// The control surface

fn control_reply(code: u16, v: &Value) -> Reply {
    Reply {
        status: code,
        headers: vec![
            ("Content-Type".into(), "application/json".into()),
            ("Cache-Control".into(), "no-cache, private".into()),
        ],
        body: http_body_util::BodyExt::boxed(http_body_util::BodyExt::map_err(
            http_body_util::Full::new(Bytes::from(crate::gojson::encode(v, true))),
            |never: std::convert::Infallible| match never {},
        )),
        reason: None,
        cut: false,
    }
}

fn control_error(code: u16, msg: &str) -> Reply {
    control_reply(code, &json!({"error": msg}))
}

fn opt_u32(v: &Value, key: &str, default: u32) -> u32 {
    v.get(key)
        .and_then(Value::as_u64)
        .map(|n| n.min(u64::from(u32::MAX)) as u32)
        .unwrap_or(default)
}

fn opt_string(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// Parse a fault from its JSON form (see the crate README).
pub(crate) fn fault_from_json(v: &Value) -> Result<Fault, String> {
    let fault = fault_kind_from_json(v)?;
    Ok(match v.get("dryRun").and_then(Value::as_bool) {
        Some(dry_run) => Fault::Restrict {
            dry_run,
            fault: Box::new(fault),
        },
        None => fault,
    })
}

fn fault_kind_from_json(v: &Value) -> Result<Fault, String> {
    let kind = v
        .get("type")
        .and_then(Value::as_str)
        .ok_or("missing \"type\"")?;
    let path = |key: &str| opt_string(v, key).ok_or(format!("missing \"{key}\""));
    Ok(match kind {
        "conflicts" => Fault::Conflicts {
            object_path: path("objectPath")?,
            count: opt_u32(v, "count", 1),
        },
        "status" => Fault::Status {
            method: opt_string(v, "method"),
            path_prefix: path("pathPrefix")?,
            status: v
                .get("status")
                .and_then(Value::as_u64)
                .and_then(|s| u16::try_from(s).ok())
                .ok_or("missing \"status\"")?,
            count: opt_u32(v, "count", 1),
        },
        "latency" => Fault::Latency(Duration::from_millis(
            v.get("ms")
                .and_then(Value::as_u64)
                .ok_or("missing \"ms\"")?,
        )),
        "competingDelete" => Fault::CompetingDelete {
            object_path: path("objectPath")?,
            after: trigger(v)?,
        },
        "competingRecreate" => Fault::CompetingRecreate {
            object_path: path("objectPath")?,
            after: trigger(v)?,
            mutate: v.get("mergePatch").cloned().map(|patch| {
                Box::new(move |obj: &mut Value| *obj = crate::patch::merge_patch(obj, &patch))
                    as crate::Mutation
            }),
        },
        "competingCreate" => Fault::CompetingCreate {
            object_path: path("objectPath")?,
            after: trigger(v)?,
            body: v.get("body").cloned().ok_or("missing \"body\"")?,
        },
        "competingWrite" => {
            let after = trigger(v)?;
            let patch = v.get("mergePatch").cloned().unwrap_or_else(
                || json!({"metadata": {"annotations": {"sandbox/competing-write": "1"}}}),
            );
            Fault::CompetingWrite {
                object_path: path("objectPath")?,
                after,
                mutate: Box::new(move |obj| *obj = crate::patch::merge_patch(obj, &patch)),
            }
        }
        "dropConnection" => Fault::DropConnection {
            method: opt_string(v, "method"),
            path_prefix: path("pathPrefix")?,
            count: opt_u32(v, "count", 1),
        },
        "dropMidResponse" => Fault::DropMidResponse {
            method: opt_string(v, "method"),
            path_prefix: path("pathPrefix")?,
            count: opt_u32(v, "count", 1),
        },
        "hang" => Fault::Hang {
            path_prefix: path("pathPrefix")?,
            count: opt_u32(v, "count", 1),
        },
        "hold" => Fault::Hold {
            method: opt_string(v, "method"),
            path_prefix: path("pathPrefix")?,
            count: opt_u32(v, "count", 1),
        },
        other => return Err(format!("unknown fault type {other:?}")),
    })
}

/// `"after"` of a competing-writer fault (default `read`).
fn trigger(v: &Value) -> Result<Trigger, String> {
    match v.get("after").and_then(Value::as_str).unwrap_or("read") {
        "read" => Ok(Trigger::Read),
        "nextWrite" => Ok(Trigger::NextWrite),
        "nextRealWrite" => Ok(Trigger::NextRealWrite),
        other => Err(format!(
            "\"after\" must be \"read\", \"nextWrite\" or \"nextRealWrite\", not {other:?}"
        )),
    }
}

/// Parse `off`, `stuck`, `deadline`, `auto`, `auto:2s`, `auto:500ms`.
pub fn parse_rollout(s: &str) -> Result<Rollout, String> {
    match s {
        "off" => Ok(Rollout::Off),
        "stuck" => Ok(Rollout::Stuck),
        "deadline" | "progress-deadline-exceeded" => Ok(Rollout::ProgressDeadlineExceeded),
        "auto" => Ok(Rollout::Auto {
            delay: Duration::from_secs(2),
        }),
        other => {
            let d = other.strip_prefix("auto:").ok_or(format!(
                "unknown rollout mode {other:?}: use off, stuck, deadline, auto or auto:<duration>"
            ))?;
            let delay = if let Some(ms) = d.strip_suffix("ms") {
                ms.parse::<u64>()
                    .map(Duration::from_millis)
                    .map_err(|e| e.to_string())?
            } else if let Some(s) = d.strip_suffix('s') {
                s.parse::<f64>()
                    .map(Duration::from_secs_f64)
                    .map_err(|e| e.to_string())?
            } else {
                return Err(format!("bad duration {d:?}: use e.g. 2s or 500ms"));
            };
            Ok(Rollout::Auto { delay })
        }
    }
}

fn fault_summary(f: &Fault) -> Value {
    match f {
        Fault::Conflicts { object_path, count } => {
            json!({"type": "conflicts", "objectPath": object_path, "count": count})
        }
        Fault::Status {
            method,
            path_prefix,
            status,
            count,
        } => {
            json!({"type": "status", "method": method, "pathPrefix": path_prefix, "status": status, "count": count})
        }
        Fault::Latency(d) => json!({"type": "latency", "ms": d.as_millis() as u64}),
        Fault::CompetingWrite {
            object_path, after, ..
        } => json!({"type": "competingWrite", "objectPath": object_path, "after": after}),
        Fault::CompetingDelete { object_path, after } => {
            json!({"type": "competingDelete", "objectPath": object_path, "after": after})
        }
        Fault::CompetingRecreate {
            object_path, after, ..
        } => json!({"type": "competingRecreate", "objectPath": object_path, "after": after}),
        Fault::CompetingCreate {
            object_path, after, ..
        } => json!({"type": "competingCreate", "objectPath": object_path, "after": after}),
        Fault::DropConnection {
            method,
            path_prefix,
            count,
        } => {
            json!({"type": "dropConnection", "method": method, "pathPrefix": path_prefix, "count": count})
        }
        Fault::DropMidResponse {
            method,
            path_prefix,
            count,
        } => {
            json!({"type": "dropMidResponse", "method": method, "pathPrefix": path_prefix, "count": count})
        }
        Fault::Hang { path_prefix, count } => {
            json!({"type": "hang", "pathPrefix": path_prefix, "count": count})
        }
        Fault::Hold {
            method,
            path_prefix,
            count,
        } => {
            json!({"type": "hold", "method": method, "pathPrefix": path_prefix, "count": count})
        }
        Fault::Restrict { dry_run, fault } => {
            let mut v = fault_summary(fault);
            v["dryRun"] = json!(dry_run);
            v
        }
    }
}

/// `/sandbox/…`: admin token required; not logged.
pub(crate) async fn control(
    shared: &Arc<Shared>,
    id: Option<Identity>,
    method: &Method,
    path: &str,
    query: &[(String, String)],
    body: &Bytes,
) -> Reply {
    match id {
        None | Some(Identity::Invalid) => {
            return control_error(401, "an admin bearer token is required");
        }
        Some(Identity::Admin) => {}
        Some(_) => {
            return control_error(403, "only the admin identity may use the control surface");
        }
    }
    let parsed = if body.is_empty() {
        Ok(json!({}))
    } else {
        serde_json::from_slice::<Value>(body)
    };
    let Ok(payload) = parsed else {
        return control_error(400, "the body must be JSON");
    };
    match (method.as_str(), path.trim_end_matches('/')) {
        ("GET", "/sandbox/requests") => {
            let since: u64 = query
                .iter()
                .find(|(k, _)| k == "since")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0);
            let log = shared.log.lock();
            let entries: Vec<&LoggedRequest> =
                log.entries.iter().filter(|e| e.seq > since).collect();
            control_reply(200, &serde_json::to_value(entries).unwrap_or(json!([])))
        }
        ("DELETE", "/sandbox/requests") => {
            let mut log = shared.log.lock();
            log.entries.clear();
            log.counters = Counters::default();
            control_reply(200, &json!({}))
        }
        ("GET", "/sandbox/counters") => control_reply(
            200,
            &serde_json::to_value(shared.log.lock().counters.clone()).unwrap_or(json!({})),
        ),
        ("GET", "/sandbox/faults") => {
            let f = shared.faults.lock();
            let mut list: Vec<Value> = f.active.iter().map(fault_summary).collect();
            if !f.latency.is_zero() {
                list.push(fault_summary(&Fault::Latency(f.latency)));
            }
            control_reply(200, &Value::Array(list))
        }
        ("POST", "/sandbox/faults") => {
            let items = match &payload {
                Value::Array(a) => a.clone(),
                other => vec![other.clone()],
            };
            let mut parsed = Vec::new();
            for it in &items {
                match fault_from_json(it) {
                    Ok(f) => parsed.push(f),
                    Err(e) => return control_error(400, &e),
                }
            }
            let mut f = shared.faults.lock();
            for fault in parsed {
                match fault {
                    Fault::Latency(d) => f.latency = d,
                    other => f.active.push(other),
                }
            }
            control_reply(201, &json!({"armed": items.len()}))
        }
        ("DELETE", "/sandbox/faults") => {
            let mut f = shared.faults.lock();
            f.active.clear();
            f.latency = Duration::ZERO;
            control_reply(200, &json!({}))
        }
        ("GET", "/sandbox/rollout") => {
            let mode = match *shared.rollout.lock() {
                Rollout::Off => json!({"mode": "off"}),
                Rollout::Stuck => json!({"mode": "stuck"}),
                Rollout::ProgressDeadlineExceeded => json!({"mode": "deadline"}),
                Rollout::Auto { delay } => {
                    json!({"mode": "auto", "delayMs": delay.as_millis() as u64})
                }
            };
            control_reply(200, &mode)
        }
        ("PUT", "/sandbox/rollout") => {
            let mode = payload.get("mode").and_then(Value::as_str).unwrap_or("");
            let spec = match (mode, payload.get("delayMs").and_then(Value::as_u64)) {
                ("auto", Some(ms)) => format!("auto:{ms}ms"),
                (m, _) => m.to_string(),
            };
            match parse_rollout(&spec) {
                Ok(r) => {
                    *shared.rollout.lock() = r;
                    shared.rollout_changed.notify_one();
                    control_reply(200, &json!({"mode": mode}))
                }
                Err(e) => control_error(400, &e),
            }
        }
        ("POST", "/sandbox/seed") => {
            let ns = payload
                .get("namespace")
                .and_then(Value::as_str)
                .unwrap_or("demo");
            let app = payload.get("app").and_then(Value::as_str).unwrap_or("web");
            match seed_demo_app(shared, ns, app) {
                Ok(()) => control_reply(201, &json!({"namespace": ns, "app": app})),
                Err(e) => control_reply(e.code, &e.to_json()),
            }
        }
        ("GET", "/sandbox/kubeconfig") | ("GET", "/sandbox") => control_reply(
            200,
            &json!({"endpoints": ["GET/DELETE /sandbox/requests", "GET /sandbox/counters", "GET/POST/DELETE /sandbox/faults", "GET/PUT /sandbox/rollout", "POST /sandbox/seed"]}),
        ),
        _ => control_error(404, "unknown control endpoint; see the crate README"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rollout_modes_parse() {
        assert_eq!(parse_rollout("off"), Ok(Rollout::Off));
        assert_eq!(
            parse_rollout("auto:2s"),
            Ok(Rollout::Auto {
                delay: Duration::from_secs(2)
            })
        );
        assert_eq!(
            parse_rollout("auto:250ms"),
            Ok(Rollout::Auto {
                delay: Duration::from_millis(250)
            })
        );
        assert!(parse_rollout("sometimes").is_err());
    }

    #[test]
    fn faults_parse_from_json() {
        assert!(matches!(
            fault_from_json(
                &json!({"type": "status", "pathPrefix": "/apis", "status": 503, "count": 2})
            ),
            Ok(Fault::Status {
                status: 503,
                count: 2,
                ..
            })
        ));
        assert!(fault_from_json(&json!({"type": "nope"})).is_err());
    }
}
