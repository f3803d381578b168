//! Try `kubectl appupdate` without a cluster: starts the embedded sandbox API server with a demo
//! application `web` in namespace `demo`, writes a kubeconfig for it, and runs the plugin.
//!
//!     cargo run --example sandbox                 # image, bounds and endpoints, interactive
//!     cargo run --example sandbox -- --dry-run    # extra flags go to the plugin
//!     cargo run --example sandbox -- --max 9 --yes
//!
//! With no plugin flags it proposes a new image, new autoscaler bounds and the endpoints in
//! `examples/endpoints.yaml`, published in the `nginx-auth` route style (the demo's Ingresses are
//! in the original snippet style, which today's ingress-nginx refuses by default, so they are
//! rewritten in place); with flags that name a change (`--image`, `--min`, `--max`,
//! `--endpoints`) it runs exactly those.

use std::ffi::OsString;
use std::time::Duration;

use sandbox_apiserver::{Rollout, Sandbox, SandboxOptions};

const NAMESPACE: &str = "demo";
const APP: &str = "web";

fn main() {
    let sandbox = match Sandbox::start(SandboxOptions {
        rollout: Rollout::Auto {
            delay: Duration::from_secs(2),
        },
        ..SandboxOptions::default()
    }) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot start the sandbox API server: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = sandbox.seed_demo_app(NAMESPACE, APP) {
        eprintln!("cannot seed the demo application: {}", e.message);
        std::process::exit(1);
    }
    let dir =
        std::env::temp_dir().join(format!("kubectl-appupdate-sandbox-{}", std::process::id()));
    let kubeconfig = dir.join("kubeconfig");
    if let Err(e) = std::fs::create_dir_all(&dir)
        .and_then(|()| sandbox.write_kubeconfig(&kubeconfig, NAMESPACE))
    {
        eprintln!("cannot write the kubeconfig: {e}");
        std::process::exit(1);
    }
    eprintln!(
        "Sandbox API server at {} with application {APP} in namespace {NAMESPACE}\n(kubeconfig {}; while the prompt waits, try `kubectl --kubeconfig {} get deploy,hpa,svc,ingress`)\n",
        sandbox.url(),
        kubeconfig.display(),
        kubeconfig.display()
    );

    let extra: Vec<OsString> = std::env::args_os().skip(1).collect();
    let names_a_change = extra.iter().any(|a| {
        let a = a.to_string_lossy();
        [
            "--image",
            "--min",
            "--max",
            "--endpoints",
            "--endpoint-config",
        ]
        .iter()
        .any(|f| a == *f || a.starts_with(&format!("{f}=")))
    });
    let mut args: Vec<OsString> = vec![
        "kubectl-appupdate".into(),
        APP.into(),
        "--kubeconfig".into(),
        kubeconfig.clone().into(),
    ];
    if !names_a_change {
        let endpoints = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/endpoints.yaml");
        for a in [
            "--image",
            "registry.example.com/web:1.1",
            "--min",
            "3",
            "--max",
            "8",
            "--endpoints",
            endpoints,
            // A style today's ingress-nginx accepts (snippet annotations are refused by
            // default): the demo's snippet Ingresses are rewritten in place.
            "--routes",
            "nginx-auth",
            "--auth-url",
            "http://oauth.auth.svc.cluster.local/check",
        ] {
            args.push(a.into());
        }
    }
    // The sandbox plays no registry, and nothing leaves the machine: no image check unless
    // asked for.
    if !extra
        .iter()
        .any(|a| a.to_string_lossy().starts_with("--image-check"))
    {
        args.extend(["--image-check".into(), "off".into()]);
    }
    args.extend(extra);
    let code = appupdate_shell::main_with_args(args);
    print_state(&sandbox);
    let _ = std::fs::remove_dir_all(&dir);
    std::process::exit(code);
}

/// What the sandbox holds now, so the effect of the run is visible before the sandbox stops.
fn print_state(sandbox: &Sandbox) {
    let ns = NAMESPACE;
    let deployment = sandbox.get(&format!("/apis/apps/v1/namespaces/{ns}/deployments/{APP}"));
    let hpa = sandbox.get(&format!(
        "/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers/{APP}"
    ));
    eprintln!("\nThe sandbox now holds (it stops when this command ends):");
    if let Some(d) = deployment {
        let images: Vec<&str> = d["spec"]["template"]["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["image"].as_str())
            .collect();
        eprintln!("  deployment.apps/{APP}: image {}", images.join(", "));
    }
    if let Some(h) = hpa {
        eprintln!(
            "  horizontalpodautoscaler.autoscaling/{APP}: minReplicas {}, maxReplicas {}",
            h["spec"]["minReplicas"], h["spec"]["maxReplicas"]
        );
    }
    for ing in sandbox.list(&format!(
        "/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses"
    )) {
        let paths: Vec<&str> = ing["spec"]["rules"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|r| r["http"]["paths"].as_array().into_iter().flatten())
            .filter_map(|p| p["path"].as_str())
            .collect();
        eprintln!(
            "  ingress.networking.k8s.io/{}: {}",
            ing["metadata"]["name"].as_str().unwrap_or_default(),
            paths.join(" ")
        );
    }
}
