//! Try a run over several clusters (a fleet) without any cluster: starts three embedded
//! sandbox API servers — contexts `eu-1`, `eu-2` and `us-1`, each with the demo application
//! `web` in namespace `demo` and Deployments that roll out in two seconds — writes one
//! kubeconfig with a context per cluster, and runs the plugin over all three with `eu-1` as
//! the canary.
//!
//!     cargo run --example fleet                   # interactive: the combined plan, one question
//!     cargo run --example fleet -- --dry-run      # extra flags go to the plugin
//!     cargo run --example fleet -- --yes -o json
//!     cargo run --example fleet -- --waves-demo   # three waves: save, stop after one, resume, undo
//!
//! `us-1` already runs `web:1.1` while the other two run `web:1.0`, so the plan shows two
//! sections: `eu-1` and `eu-2` folded into one, `us-1` on its own.

use std::ffi::OsString;
use std::time::Duration;

use sandbox_apiserver::{Rollout, Sandbox, SandboxOptions};

#[path = "../tests/it/common/kubeconfig.rs"]
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
    let code = if std::env::args().nth(1).as_deref() == Some("--waves-demo") {
        waves_demo(&kubeconfig, &dir)
    } else {
        one_run(&kubeconfig)
    };
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

/// The plugin over the three clusters, `eu-1` as the canary, with the extra flags given.
fn one_run(kubeconfig: &std::path::Path) -> i32 {
    let mut args: Vec<OsString> = vec![
        "kubectl-appupdate".into(),
        APP.into(),
        "--kubeconfig".into(),
        kubeconfig.into(),
        "--contexts".into(),
        CLUSTERS.join(",").into(),
        "--image".into(),
        "registry.example.com/web:2.0".into(),
        "--canary".into(),
        "eu-1".into(),
        // The sandboxes play no registry, and nothing leaves the machine.
        "--image-check".into(),
        "off".into(),
    ];
    args.extend(std::env::args_os().skip(1));
    appupdate_shell::main_with_args(args)
}

/// A staged rollout in three waves (one cluster each): the plan saved, applied up to the first
/// wave, resumed, then the whole fleet run undone — each command shown before it runs.
fn waves_demo(kubeconfig: &std::path::Path, dir: &std::path::Path) -> i32 {
    let plan = dir.join("rollout.json");
    let plan = plan.to_string_lossy().into_owned();
    let waves = ["--wave", "eu-1", "--wave", "eu-2", "--wave", "us-1"];
    let mut steps: Vec<Vec<&str>> = Vec::new();
    let mut save = vec![APP];
    save.extend(waves);
    save.extend([
        "--image",
        "registry.example.com/web:2.0",
        "--plan-out",
        &plan,
        "--image-check",
        "off",
    ]);
    steps.push(save);
    steps.push(vec!["apply", &plan, "--stop-after-wave", "1", "--yes"]);
    steps.push(vec!["apply", &plan, "--yes"]);
    let mut undo = vec![APP];
    undo.extend(waves);
    undo.extend(["--undo", "--yes"]);
    steps.push(undo);
    let mut worst = 0;
    for step in steps {
        eprintln!("\n$ kubectl appupdate {}", step.join(" "));
        let mut args: Vec<OsString> = vec![
            "kubectl-appupdate".into(),
            "--kubeconfig".into(),
            kubeconfig.into(),
        ];
        args.extend(step.iter().map(OsString::from));
        let code = appupdate_shell::main_with_args(args);
        eprintln!("(exit {code})");
        worst = worst.max(code);
    }
    worst
}
