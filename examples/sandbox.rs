//! Try `kubectl appupdate` without a cluster: starts the embedded sandbox API server with a demo
//! application `web` in namespace `demo`, writes a kubeconfig for it, and runs the plugin.
//!
//!     cargo run --example sandbox                 # image, bounds and endpoints, interactive
//!     cargo run --example sandbox -- --dry-run    # extra flags go to the plugin
//!     cargo run --example sandbox -- --max 9 --yes
//!
//! With no plugin flags it proposes a new image, new autoscaler bounds and the endpoints in
//! `examples/endpoints.yaml`; with flags that name a change (`--image`, `--min`, `--max`,
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
        "Sandbox API server at {} with application {APP} in namespace {NAMESPACE}\n(kubeconfig {}; try `kubectl --kubeconfig {} get deploy,hpa,svc,ingress` while it runs)\n",
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
        ] {
            args.push(a.into());
        }
    }
    args.extend(extra);
    let code = kubectl_appupdate::main_with_args(args);
    let _ = std::fs::remove_dir_all(&dir);
    std::process::exit(code);
}
