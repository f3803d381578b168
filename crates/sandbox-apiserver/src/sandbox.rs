//! The top layer: the [`Sandbox`] handle. It assembles the layers below — a store, the rollout
//! controller, the HTTP server with its control surface — on a thread and tokio runtime of its
//! own, and gives Rust tests what the control surface gives standalone runs: the kubeconfig,
//! direct store access (as a client or as a competing writer), faults, the rollout mode and the
//! request log.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

use crate::control::{Control, demo};
use crate::controllers::cluster::KubeletTimings;
use crate::controllers::rollout::{self, Controller, Rollout};
use crate::http::auth::{Identity, Tokens};
use crate::http::faults::{COMPETITOR, Fault};
use crate::http::log::{Counters, LoggedRequest, RequestLog};
use crate::http::{Server, conn, tls};
use crate::kinds::{
    self, GatewayApiChannel, GatewayApiVersion, IngressNginxWebhook, Kind, Registry,
};
use crate::model::status::{self, StatusBody};
use crate::store::{FieldValidation, Selectors, State, Store, WriteCtx};

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
    /// How the simulated kubelet paces repeated failures in `Rollout::Auto` (default: as the
    /// reference cluster's stand-in kubelet, a restart every 2 s, ImagePullBackOff after 1.5 s).
    pub kubelet: KubeletTimings,
    /// Also write each logged request as one JSON line here.
    pub request_log: Option<RequestLogSink>,
    /// With TLS, offer only `http/1.1` by ALPN (default: `h2` and `http/1.1`), for clients'
    /// HTTP/1.1 paths.
    pub http1_only: bool,
    /// Serve the kinds that a real cluster gets from CustomResourceDefinitions (default: yes).
    /// `false` is a cluster without those CRDs: their groups answer 404 and discovery does not
    /// list them.
    pub install_crds: bool,
    /// Which channel of the Gateway API CRDs is installed (with `install_crds`; default:
    /// experimental). [`GatewayApiChannel::Standard`] is a cluster whose HTTPRoutes have no
    /// `ExternalAuth` filter.
    pub gateway_api_channel: GatewayApiChannel,
    /// Which release of the Gateway API CRDs is installed (with `install_crds`; default:
    /// v1.4.1). [`GatewayApiVersion::V1_6_1`] is what current clusters install, whose CEL rules
    /// need Kubernetes ≥ 1.30.
    pub gateway_api_version: GatewayApiVersion,
    /// Also serve Envoy Gateway v1.9.0's `SecurityPolicy` CRD (`gateway.envoyproxy.io/v1alpha1`;
    /// default: no, so its group answers 404 as on a cluster without Envoy Gateway).
    pub install_envoy_gateway: bool,
    /// Run ingress-nginx v1.12's validating admission webhook (default: none). Running it is
    /// having ingress-nginx installed: its IngressClass `nginx` exists. See
    /// [`IngressNginxWebhook`].
    pub ingress_nginx_webhook: Option<IngressNginxWebhook>,
    /// The Service IP range (`a.b.c.d/n`, IPv4 single-stack; default `10.96.0.0/12`): cluster
    /// IPs are allocated from it, a requested one outside it is refused.
    pub service_cidr: String,
    /// The server's runtime: this many worker threads (default 2); 0 serves on the sandbox's
    /// one thread (a current-thread runtime), for a benchmark that runs hundreds of sandboxes
    /// in one process.
    pub worker_threads: usize,
    /// The nodes `GET /api/v1/nodes` lists (also as `PartialObjectMetadataList`), one per
    /// `(os, arch)`, labelled as a kubelet labels its Node (default: none, as a cluster without
    /// nodes). Nodes are not stored: the list is fixed.
    pub node_platforms: Vec<(String, String)>,
    /// Serve on this runtime instead of a thread and runtime of the sandbox's own (default:
    /// `None`, a runtime of its own with `worker_threads`): a benchmark that runs thousands of
    /// sandboxes in one process shares one runtime between them. Each keeps its own CA, store
    /// and listener; dropping the sandbox stops its tasks on the shared runtime.
    pub runtime: Option<tokio::runtime::Handle>,
}

impl Default for SandboxOptions {
    fn default() -> Self {
        SandboxOptions {
            tls: true,
            port: 0,
            initial_resource_version: 100,
            rollout: Rollout::Off,
            kubelet: KubeletTimings::default(),
            request_log: None,
            http1_only: false,
            install_crds: true,
            gateway_api_channel: GatewayApiChannel::Experimental,
            gateway_api_version: GatewayApiVersion::V1_4_1,
            install_envoy_gateway: false,
            ingress_nginx_webhook: None,
            service_cidr: "10.96.0.0/12".into(),
            worker_threads: 2,
            node_platforms: Vec::new(),
            runtime: None,
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
    server: Arc<Server>,
    rollout: Arc<Controller>,
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

impl Sandbox {
    /// Bind `127.0.0.1:<port>` and serve on a thread of its own until dropped.
    pub fn start(opts: SandboxOptions) -> Result<Sandbox, StartError> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", opts.port))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let tls = if opts.tls {
            Some(tls::generate(opts.http1_only).map_err(StartError)?)
        } else {
            None
        };
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
        let mut state = State::new(opts.initial_resource_version);
        state.set_service_cidr(&opts.service_cidr);
        let store: Arc<Store> = Arc::new(Store::new(state));
        let rollout = Controller::new(opts.rollout, opts.kubelet);
        let server = Arc::new(Server::new(
            store.clone(),
            Tokens::generate(tls.is_some()),
            RequestLog::new(sink),
            Registry::with_gateway_api(
                opts.install_crds,
                opts.gateway_api_version,
                opts.gateway_api_channel,
            )
            .with_envoy_gateway(opts.install_envoy_gateway)
            .with_nodes(&opts.node_platforms),
            addr,
            sd_rx.clone(),
            Some(Box::new(Control {
                rollout: rollout.clone(),
            })),
        ));
        let url = format!("{}://{addr}", if tls.is_some() { "https" } else { "http" });
        let ca_pem = tls.as_ref().map(|t| t.ca_pem.clone());
        let ca_der = tls.as_ref().map(|t| t.ca_der.clone());
        let acceptor = tls.map(|t| tokio_rustls::TlsAcceptor::from(t.config));
        let thread_server = server.clone();
        let thread_rollout = rollout.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
        let serve = async move {
            let listener = match tokio::net::TcpListener::from_std(listener) {
                Ok(l) => l,
                Err(e) => {
                    let _ = ready_tx.send(Err(e.to_string()));
                    return;
                }
            };
            tokio::spawn(rollout::run(store, thread_rollout, sd_rx.clone()));
            let _ = ready_tx.send(Ok(()));
            conn::accept_loop(listener, thread_server, acceptor, sd_rx).await;
        };
        let thread = match &opts.runtime {
            Some(handle) => {
                handle.spawn(serve);
                None
            }
            None => {
                let rt = match opts.worker_threads {
                    0 => tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()?,
                    n => tokio::runtime::Builder::new_multi_thread()
                        .worker_threads(n)
                        .enable_all()
                        .thread_name("sandbox-apiserver")
                        .build()?,
                };
                Some(
                    std::thread::Builder::new()
                        .name("sandbox-apiserver".into())
                        .spawn(move || {
                            rt.block_on(serve);
                            rt.shutdown_timeout(Duration::from_millis(200));
                        })?,
                )
            }
        };
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(StartError(e)),
            Err(_) => return Err(StartError("the server thread exited".into())),
        }
        let sandbox = Sandbox {
            server,
            rollout,
            url,
            ca_pem,
            ca_der,
            shutdown: sd_tx,
            thread,
        };
        if opts.ingress_nginx_webhook.is_some() {
            sandbox
                .set_ingress_nginx_webhook(opts.ingress_nginx_webhook)
                .map_err(|e| StartError(e.message))?;
        }
        Ok(sandbox)
    }

    /// `https://127.0.0.1:PORT` (or `http://…`).
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.addr
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
        self.server.tokens.token(id)
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
        let (k, ns, _) = resolve(&self.server.registry, collection_path)?;
        let bytes = serde_json::to_vec(&body).map_err(|e| status::bad_request(e.to_string()))?;
        let ctx = WriteCtx {
            manager: demo::MANAGER.into(),
            dry_run: false,
            field_validation: FieldValidation::Strict,
            inject_conflict: false,
            skip_webhooks: false,
        };
        self.server
            .store
            .write()
            .create(k, &ns, &bytes, &ctx)
            .map(|o| o.body)
    }

    /// The object at `object_path`, as a GET would return it.
    pub fn get(&self, object_path: &str) -> Option<Value> {
        let (k, ns, name) = resolve(&self.server.registry, object_path).ok()?;
        self.server.store.read().get(k, &ns, &name).ok()
    }

    /// The objects of a collection (`…/namespaces/shop/ingresses`, or all namespaces without
    /// one), with kind/apiVersion, in name order.
    pub fn list(&self, collection_path: &str) -> Vec<Value> {
        let Ok((k, ns, _)) = resolve(&self.server.registry, collection_path) else {
            return Vec::new();
        };
        let st = self.server.store.read();
        let ns = (!ns.is_empty()).then_some(ns.as_str());
        st.select(k, ns, &Selectors::default())
            .into_iter()
            .map(|o| kinds::to_wire(k, o))
            .collect()
    }

    /// A competing writer: mutate the object now (manager `sandbox-competitor`), with the usual
    /// resourceVersion, generation and managedFields rules.
    pub fn update(
        &self,
        object_path: &str,
        mutate: impl FnOnce(&mut Value),
    ) -> Result<Value, StatusBody> {
        let (k, ns, name) = resolve(&self.server.registry, object_path)?;
        let mut once = Some(mutate);
        self.server
            .store
            .write()
            .system_update(k, &ns, &name, COMPETITOR, "", &mut |obj| {
                if let Some(m) = once.take() {
                    m(obj);
                }
            })
    }

    /// Server-side apply `config` (a whole configuration, with `apiVersion` and `kind`) to the
    /// object at `object_path` as field manager `manager`, as a PATCH with `Content-Type:
    /// application/apply-patch+yaml` and `?fieldManager=<manager>` would — creating the object
    /// when it does not exist. How a test makes an object the way Helm 4 (`helm`), Argo CD
    /// with server-side apply (`argocd-controller`) or `kubectl apply --server-side` make it:
    /// an `Apply` managedFields entry owning exactly what `config` sets. Another manager's
    /// field that the apply would change is the 409 Conflict a client would get (see
    /// [`Sandbox::force_apply`]). Not logged.
    pub fn apply(
        &self,
        object_path: &str,
        manager: &str,
        config: Value,
    ) -> Result<Value, StatusBody> {
        self.apply_as(object_path, manager, config, false)
    }

    /// [`Sandbox::apply`] with `force=true`: the fields other managers own are taken from them.
    pub fn force_apply(
        &self,
        object_path: &str,
        manager: &str,
        config: Value,
    ) -> Result<Value, StatusBody> {
        self.apply_as(object_path, manager, config, true)
    }

    fn apply_as(
        &self,
        object_path: &str,
        manager: &str,
        config: Value,
        force: bool,
    ) -> Result<Value, StatusBody> {
        let (k, ns, name) = resolve(&self.server.registry, object_path)?;
        let bytes = serde_json::to_vec(&config).map_err(|e| status::bad_request(e.to_string()))?;
        let ctx = WriteCtx {
            manager: manager.into(),
            dry_run: false,
            field_validation: FieldValidation::Strict,
            inject_conflict: false,
            skip_webhooks: false,
        };
        self.server
            .store
            .write()
            .apply(k, &ns, &name, &bytes, &ctx, force)
            .map(|o| o.body)
    }

    /// A controller's status write: mutate the object now through its `status` subresource
    /// (manager `sandbox-controller`; only `status` is kept from the mutation) — how a test
    /// publishes a GatewayClass's `status.supportedFeatures`.
    pub fn update_status(
        &self,
        object_path: &str,
        mutate: impl FnOnce(&mut Value),
    ) -> Result<Value, StatusBody> {
        let (k, ns, name) = resolve(&self.server.registry, object_path)?;
        let mut once = Some(mutate);
        self.server.store.write().system_update(
            k,
            &ns,
            &name,
            "sandbox-controller",
            "status",
            &mut |obj| {
                if let Some(m) = once.take() {
                    m(obj);
                }
            },
        )
    }

    /// Delete the object now.
    pub fn delete(&self, object_path: &str) -> Result<(), StatusBody> {
        let (k, ns, name) = resolve(&self.server.registry, object_path)?;
        self.server.store.write().delete_now(k, &ns, &name)
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.server.store.read().rv
    }

    /// Seed the demo application `app` in `namespace` (created if needed): Deployment, Service,
    /// HPA, two managed Ingresses (`app=<app>`, `identifier=<id>`) and one unmanaged Ingress
    /// labelled only `app=<app>`.
    pub fn seed_demo_app(&self, namespace: &str, app: &str) -> Result<(), StatusBody> {
        demo::seed(&self.server.store, namespace, app)
    }

    /// Create the IngressClass `name` of ingress-nginx (controller `k8s.io/ingress-nginx`),
    /// annotated `ingressclass.kubernetes.io/is-default-class: "true"` when `default` (what
    /// DefaultIngressClass admission gives a new Ingress without a class). An existing class of
    /// that name is left alone.
    pub fn create_ingress_class(&self, name: &str, default: bool) -> Result<(), StatusBody> {
        demo::ingress_class(&self.server.store, name, default)
    }

    /// Run (`Some`) or stop (`None`) ingress-nginx's admission webhook; running it creates
    /// ingress-nginx's IngressClass `nginx` if missing.
    pub fn set_ingress_nginx_webhook(
        &self,
        mode: Option<IngressNginxWebhook>,
    ) -> Result<(), StatusBody> {
        demo::set_ingress_nginx_webhook(&self.server.store, mode)
    }

    /// Arm a fault (see [`Fault`]).
    pub fn inject(&self, fault: Fault) {
        self.server.faults.arm(fault);
    }

    /// Disarm every fault and reset the latency.
    pub fn clear_faults(&self) {
        self.server.faults.clear();
    }

    /// Switch the rollout simulation; existing Deployments are considered again.
    pub fn set_rollout(&self, rollout: Rollout) {
        self.rollout.set_mode(rollout);
    }

    /// Change how the simulated kubelet paces repeated failures (from its next step).
    pub fn set_kubelet_timings(&self, timings: KubeletTimings) {
        self.rollout.set_kubelet(timings);
    }

    /// The rollout simulation has nothing left to do: every change so far has been considered
    /// and no status write is pending. Poll it instead of sleeping to see that a mode leaves a
    /// Deployment where it is.
    pub fn rollout_settled(&self) -> bool {
        self.rollout.settled(&self.server.store)
    }

    /// Every logged request so far.
    pub fn requests(&self) -> Vec<LoggedRequest> {
        self.server.log.entries_since(0)
    }

    /// Forget the logged requests and reset the counters.
    pub fn clear_requests(&self) {
        self.server.log.clear();
    }

    /// The request counters.
    pub fn counters(&self) -> Counters {
        self.server.log.counters()
    }

    /// Competing writers ([`Fault::CompetingWrite`] and friends) that fired but could not do
    /// what they were armed to do (the object was gone, the mutation was invalid or changed
    /// nothing). Dropping the handle panics when this is not empty, so a test whose competitor
    /// silently did nothing fails; call [`Sandbox::take_competing_write_failures`] to expect one.
    pub fn competing_write_failures(&self) -> Vec<String> {
        self.server.faults.failures()
    }

    /// How many requests a [`Fault::Hold`] is holding now.
    pub fn held(&self) -> u64 {
        self.server.faults.held()
    }

    /// Lets every request held by [`Fault::Hold`] go on: it is processed and answered.
    pub fn release_held(&self) {
        self.server.faults.release_held();
    }

    /// Returns and forgets the recorded competing-writer failures.
    pub fn take_competing_write_failures(&self) -> Vec<String> {
        self.server.faults.take_failures()
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

/// A path → (kind, namespace, name).
fn resolve(
    registry: &Registry,
    path: &str,
) -> Result<(&'static dyn Kind, String, String), StatusBody> {
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
    let k = registry
        .lookup(group, version, resource)
        .ok_or_else(|| status::generic(404, ""))?;
    Ok((k, ns, name))
}
