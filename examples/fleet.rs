//! Try a run over several clusters (a fleet) without any cluster: starts three embedded
//! sandbox API servers — contexts `eu-1`, `eu-2` and `us-1`, each with the demo application
//! `web` in namespace `demo` and Deployments that roll out in two seconds — writes one
//! kubeconfig with a context per cluster, and runs the plugin over all three with `eu-1` as
//! the canary.
//!
//!     cargo run --example fleet                   # interactive: the combined plan, one question
//!     cargo run --example fleet -- --dry-run      # extra flags go to the plugin
//!     cargo run --example fleet -- --yes -o json
//!
//! `us-1` already runs `web:1.1` while the other two run `web:1.0`, so the plan shows two
//! sections: `eu-1` and `eu-2` folded into one, `us-1` on its own.

use std::ffi::OsString;
use std::time::Duration;

use sandbox_apiserver::{Rollout, Sandbox, SandboxOptions};

#[path = "../tests/common/kubeconfig.rs"]
mod kubeconfig;

const NAMESPACE: &str = "demo";
const APP: &str = "web";
const CLUSTERS: [&str; 3] = ["eu-1", "eu-2", "us-1"];

fn deployment_path() -> String {
    format!("/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{APP}")
}

fn start(name: &str) -> Result<Sandbox, String> {
    let sandbox = Sandbox::start(SandboxOptions {
        rollout: Rollout::Auto {
            delay: Duration::from_secs(2),
        },
        ..SandboxOptions::default()
    })
    .map_err(|e| e.to_string())?;
    sandbox
        .seed_demo_app(NAMESPACE, APP)
        .map_err(|e| e.message)?;
    if name == "us-1" {
        sandbox
            .update(&deployment_path(), |d| {
                d["spec"]["template"]["spec"]["containers"][0]["image"] =
                    "registry.example.com/web:1.1".into();
            })
            .map_err(|e| e.message)?;
    }
    Ok(sandbox)
}

fn main() {
    let sandboxes: Vec<Sandbox> = match CLUSTERS.iter().map(|n| start(n)).collect() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot start the sandbox API servers: {e}");
            std::process::exit(1);
        }
    };
    let dir = std::env::temp_dir().join(format!("kubectl-appupdate-fleet-{}", std::process::id()));
    let kubeconfig = dir.join("kubeconfig");
    let pairs: Vec<(&str, &Sandbox)> = CLUSTERS.iter().copied().zip(&sandboxes).collect();
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| {
        std::fs::write(
            &kubeconfig,
            kubeconfig::merged_kubeconfig(&pairs, NAMESPACE),
        )
    }) {
        eprintln!("cannot write the kubeconfig: {e}");
        std::process::exit(1);
    }
    eprintln!(
        "Three sandbox API servers (contexts {}), each with {APP} in namespace {NAMESPACE}\n(kubeconfig {})\n",
        CLUSTERS.join(", "),
        kubeconfig.display()
    );
    let mut args: Vec<OsString> = vec![
        "kubectl-appupdate".into(),
        APP.into(),
        "--kubeconfig".into(),
        kubeconfig.clone().into(),
        "--contexts".into(),
        CLUSTERS.join(",").into(),
        "--image".into(),
        "registry.example.com/web:2.0".into(),
        "--canary".into(),
        "eu-1".into(),
    ];
    args.extend(std::env::args_os().skip(1));
    let code = kubectl_appupdate::main_with_args(args);
    eprintln!("\nThe clusters now run (they stop when this command ends):");
    for (name, sandbox) in &pairs {
        let image = sandbox
            .get(&deployment_path())
            .and_then(|d| {
                d["spec"]["template"]["spec"]["containers"][0]["image"]
                    .as_str()
                    .map(str::to_owned)
            })
            .unwrap_or_default();
        eprintln!("  {name}: deployment.apps/{APP} image {image}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::process::exit(code);
}
