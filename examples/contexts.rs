//! A fleet of many clusters on one machine, for trying how a run over thousands of contexts
//! behaves (descriptors, memory, the grouped plan and report): one sandbox API server with the
//! demo application `web` in N namespaces `c0000`, `c0001`, …, and a kubeconfig with a context
//! per namespace, named after it. It serves until interrupted. With ROLLOUT_MS its Deployments
//! roll out that long after each change (for `--wait`); without, they are never rolled out.
//!
//!     cargo run --release --example contexts -- 300 /tmp/fleet.kubeconfig [ROLLOUT_MS]
//!     kubectl-appupdate web --kubeconfig /tmp/fleet.kubeconfig --context-selector 'c.*' \
//!         --image registry.example.com/web:2.0 --image-check off --dry-run

use sandbox_apiserver::{Rollout, Sandbox, SandboxOptions};

#[path = "../tests/it/common/kubeconfig.rs"]
#[allow(dead_code)] // its merged_kubeconfig is for examples/fleet.rs
mod kubeconfig;

const APP: &str = "web";

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(n), Some(path)) = (
        args.next().and_then(|n| n.parse::<usize>().ok()),
        args.next(),
    ) else {
        eprintln!("usage: contexts N KUBECONFIG [ROLLOUT_MS]");
        std::process::exit(2);
    };
    let rollout = match args.next().map(|ms| ms.parse::<u64>()) {
        None => Rollout::Off,
        Some(Ok(ms)) => Rollout::Auto {
            delay: std::time::Duration::from_millis(ms),
        },
        Some(Err(_)) => {
            eprintln!("usage: contexts N KUBECONFIG [ROLLOUT_MS]");
            std::process::exit(2);
        }
    };
    let sandbox = match Sandbox::start(SandboxOptions {
        rollout,
        ..SandboxOptions::default()
    }) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot start the sandbox API server: {e}");
            std::process::exit(1);
        }
    };
    let namespaces: Vec<String> = (0..n).map(|i| format!("c{i:04}")).collect();
    for ns in &namespaces {
        if let Err(e) = sandbox.seed_demo_app(ns, APP) {
            eprintln!("cannot seed {APP} in {ns}: {}", e.message);
            std::process::exit(1);
        }
    }
    if let Err(e) = std::fs::write(
        &path,
        kubeconfig::namespaces_kubeconfig(&sandbox, &namespaces),
    ) {
        eprintln!("cannot write {path}: {e}");
        std::process::exit(1);
    }
    eprintln!(
        "{} serves {APP} in {n} namespaces c0000…; kubeconfig {path} has a context per namespace. Ctrl-C stops it.",
        sandbox.url()
    );
    loop {
        std::thread::park();
    }
}
