//! `sandbox-apiserver serve`: the emulator on loopback, optionally with the demo application, a
//! kubeconfig and a request log, until SIGINT/SIGTERM.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sandbox_apiserver::{
    GatewayApiChannel, GatewayApiVersion, IngressNginxWebhook, RequestLogSink, Rollout, Sandbox,
    SandboxOptions,
};

#[derive(Parser)]
#[command(
    name = "sandbox-apiserver",
    version,
    about = "An in-memory Kubernetes API server (kube-apiserver v1.28 behaviour) for tests, demos and benchmarks"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve on 127.0.0.1 until interrupted.
    Serve(ServeArgs),
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Seed the demo application (Deployment, Service, HPA, two managed Ingresses, one unmanaged).
    #[arg(long)]
    demo: bool,
    /// Name of the demo application.
    #[arg(long, default_value = "web")]
    app: String,
    /// Namespace of the demo application and of the kubeconfig contexts.
    #[arg(long, default_value = "demo")]
    namespace: String,
    /// Port on 127.0.0.1 (0: any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Plain HTTP instead of TLS with a generated CA.
    #[arg(long)]
    plain: bool,
    /// Write a kubeconfig here (contexts sandbox, sandbox-readonly, sandbox-noperm, sandbox-invalid).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Append one JSON line per request to FILE (`-`: stdout).
    #[arg(long, value_name = "FILE")]
    request_log: Option<String>,
    /// Deployment rollout simulation: off, auto, auto:2s, auto:500ms, stuck, deadline.
    #[arg(long, default_value = "off", value_parser = parse_rollout)]
    rollout: Rollout,
    /// Leave out the kinds a cluster gets from CustomResourceDefinitions: their groups answer 404.
    #[arg(long)]
    without_crds: bool,
    /// Which channel of the Gateway API CRDs to serve: experimental (HTTPRoute has the
    /// ExternalAuth filter) or standard (it has not).
    #[arg(long, value_name = "CHANNEL", default_value = "experimental", value_parser = parse_channel)]
    gateway_api_channel: GatewayApiChannel,
    /// Which release of the Gateway API CRDs to serve: v1.4.1 or v1.6.1.
    #[arg(long, value_name = "VERSION", default_value = "v1.4.1", value_parser = parse_gateway_api_version)]
    gateway_api_version: GatewayApiVersion,
    /// Also serve Envoy Gateway's SecurityPolicy CRD (gateway.envoyproxy.io/v1alpha1).
    #[arg(long)]
    with_envoy_gateway: bool,
    /// Run ingress-nginx's admission webhook, which refuses `*-snippet` annotations on the
    /// Ingresses of its IngressClass `nginx` (created): snippets-disabled (allow-snippet-annotations
    /// false) or risky-annotations (annotations-risk-level High).
    #[arg(long, value_name = "MODE", value_parser = parse_webhook)]
    ingress_nginx_webhook: Option<IngressNginxWebhook>,
    /// Create an ingress-nginx IngressClass NAME annotated as the cluster's default class.
    #[arg(long, value_name = "NAME")]
    default_ingress_class: Option<String>,
}

fn parse_webhook(s: &str) -> Result<IngressNginxWebhook, String> {
    match IngressNginxWebhook::parse(s) {
        Some(Some(mode)) => Ok(mode),
        _ => Err(format!(
            "unknown webhook mode {s:?}: use snippets-disabled or risky-annotations"
        )),
    }
}

fn parse_channel(s: &str) -> Result<GatewayApiChannel, String> {
    GatewayApiChannel::parse(s)
        .ok_or_else(|| format!("unknown channel {s:?}: use experimental or standard"))
}

fn parse_gateway_api_version(s: &str) -> Result<GatewayApiVersion, String> {
    GatewayApiVersion::parse(s)
        .ok_or_else(|| format!("unknown Gateway API release {s:?}: use v1.4.1 or v1.6.1"))
}

fn parse_rollout(s: &str) -> Result<Rollout, String> {
    sandbox_apiserver::parse_rollout(s)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => match serve(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("sandbox-apiserver: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

fn serve(args: ServeArgs) -> Result<(), Box<dyn std::error::Error>> {
    let request_log = args.request_log.as_deref().map(|p| {
        if p == "-" {
            RequestLogSink::Stdout
        } else {
            RequestLogSink::File(p.into())
        }
    });
    let sb = Sandbox::start(SandboxOptions {
        tls: !args.plain,
        port: args.port,
        rollout: args.rollout,
        request_log,
        install_crds: !args.without_crds,
        gateway_api_channel: args.gateway_api_channel,
        gateway_api_version: args.gateway_api_version,
        install_envoy_gateway: args.with_envoy_gateway,
        ingress_nginx_webhook: args.ingress_nginx_webhook,
        ..Default::default()
    })?;
    if let Some(class) = &args.default_ingress_class {
        sb.create_ingress_class(class, true)?;
    }
    if args.demo {
        sb.seed_demo_app(&args.namespace, &args.app)?;
    }
    match &args.kubeconfig {
        Some(path) => {
            sb.write_kubeconfig(path, &args.namespace)?;
            eprintln!(
                "sandbox-apiserver: serving {} — kubeconfig {}",
                sb.url(),
                path.display()
            );
        }
        None => eprintln!(
            "sandbox-apiserver: serving {} (no kubeconfig written; pass --kubeconfig PATH)",
            sb.url()
        ),
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        #[cfg(unix)]
        {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
            tokio::select! {
                r = tokio::signal::ctrl_c() => r?,
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        tokio::signal::ctrl_c().await?;
        Ok::<(), std::io::Error>(())
    })?;
    drop(sb);
    Ok(())
}
