//! Several sandboxes at once, one per cluster of a fleet, each with the demo application `web`
//! in namespace `shop`, and one kubeconfig with a context per cluster: `<name>` (admin),
//! `<name>-readonly` and `<name>-noperm` (`common::kubeconfig`).

use std::path::PathBuf;
use std::process::Output;

use assert_cmd::Command;
use sandbox_apiserver::{LoggedRequest, Sandbox, SandboxOptions};

use super::kubeconfig::merged_kubeconfig;
use serde_json::Value;

use super::{APP, NS, plugin};

pub const DEPLOY: &str = "/apis/apps/v1/namespaces/shop/deployments/web";
pub const HPA: &str = "/apis/autoscaling/v2/namespaces/shop/horizontalpodautoscalers/web";
pub const OLD_IMAGE: &str = "registry.example.com/web:1.0";
pub const NEW_IMAGE: &str = "registry.example.com/web:2.0";

pub struct Fleet {
    pub names: Vec<String>,
    pub sandboxes: Vec<Sandbox>,
    pub dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
}

impl Fleet {
    /// A TLS sandbox per name.
    pub fn new(names: &[&str]) -> Fleet {
        Fleet::with(names, |_| SandboxOptions::default())
    }

    pub fn with(names: &[&str], options: impl Fn(&str) -> SandboxOptions) -> Fleet {
        let sandboxes: Vec<Sandbox> = names
            .iter()
            .map(|n| {
                let sb = Sandbox::start(options(n)).expect("sandbox starts");
                sb.seed_demo_app(NS, APP).expect("demo app seeded");
                sb
            })
            .collect();
        let dir = tempfile::tempdir().expect("temp dir");
        let kubeconfig = dir.path().join("kubeconfig");
        let pairs: Vec<(&str, &Sandbox)> = names.iter().copied().zip(&sandboxes).collect();
        std::fs::write(&kubeconfig, merged_kubeconfig(&pairs, NS)).expect("kubeconfig written");
        Fleet {
            names: names.iter().map(|n| (*n).to_owned()).collect(),
            sandboxes,
            dir,
            kubeconfig,
        }
    }

    pub fn sb(&self, name: &str) -> &Sandbox {
        let i = self
            .names
            .iter()
            .position(|n| n == name)
            .expect("a cluster of the fleet");
        &self.sandboxes[i]
    }

    pub fn cmd(&self) -> Command {
        let mut c = plugin();
        c.arg("--kubeconfig").arg(&self.kubeconfig);
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().expect("binary runs")
    }

    pub fn image(&self, name: &str) -> String {
        self.sb(name)
            .get(DEPLOY)
            .and_then(|d| {
                d["spec"]["template"]["spec"]["containers"][0]["image"]
                    .as_str()
                    .map(str::to_owned)
            })
            .unwrap_or_default()
    }

    pub fn max(&self, name: &str) -> i64 {
        self.sb(name)
            .get(HPA)
            .and_then(|h| h["spec"]["maxReplicas"].as_i64())
            .unwrap_or(-1)
    }

    /// Writes to the application's objects in cluster `name` (not dry runs, not the history).
    pub fn app_writes(&self, name: &str) -> Vec<LoggedRequest> {
        writes(self.sb(name))
            .into_iter()
            .filter(|r| !r.path.contains("/configmaps"))
            .collect()
    }

    /// Writes of any kind in every cluster.
    pub fn all_writes(&self) -> usize {
        self.sandboxes.iter().map(|sb| writes(sb).len()).sum()
    }

    /// Sets the image of cluster `name` as another writer would.
    pub fn set_image(&self, name: &str, image: &str) {
        self.sb(name)
            .update(DEPLOY, |d: &mut Value| {
                d["spec"]["template"]["spec"]["containers"][0]["image"] = Value::from(image);
            })
            .expect("image set");
    }
}

/// Writes sent by clients (not dry runs, not a SelfSubjectReview).
pub fn writes(sb: &Sandbox) -> Vec<LoggedRequest> {
    sb.requests()
        .into_iter()
        .filter(|r| {
            !r.dry_run
                && matches!(r.method.as_str(), "POST" | "PUT" | "PATCH" | "DELETE")
                && !r.path.ends_with("/selfsubjectreviews")
        })
        .collect()
}
