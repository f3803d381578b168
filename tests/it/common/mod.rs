//! Shared harness: a sandbox API server per test, a kubeconfig written for it, and the real
//! `kubectl-appupdate` binary run with a scrubbed environment.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod fleet;
pub mod front;
pub mod gate;
pub mod kubeconfig;
pub mod pty;
pub mod registry;
pub mod running;
pub mod token_auth;

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use sandbox_apiserver::{Sandbox, SandboxOptions};
use serde_json::Value;

pub const NS: &str = "shop";
pub const APP: &str = "web";

pub struct Env {
    pub sb: Sandbox,
    pub dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
}

impl Env {
    /// A TLS sandbox with the demo application `web` in namespace `shop`.
    pub fn new() -> Env {
        Env::with_options(SandboxOptions::default())
    }

    pub fn with_options(opts: SandboxOptions) -> Env {
        let sb = Sandbox::start(opts).expect("sandbox starts");
        sb.seed_demo_app(NS, APP).expect("demo app seeded");
        let dir = tempfile::tempdir().expect("temp dir");
        let kubeconfig = dir.path().join("kubeconfig");
        sb.write_kubeconfig(&kubeconfig, NS)
            .expect("kubeconfig written");
        Env {
            sb,
            dir,
            kubeconfig,
        }
    }

    /// The plugin with `--kubeconfig` and a scrubbed environment (no KUBECONFIG, HOME, colour
    /// or terminal variables).
    pub fn cmd(&self) -> Command {
        let mut c = plugin();
        c.arg("--kubeconfig").arg(&self.kubeconfig);
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        let mut c = self.cmd();
        c.args(args);
        c.output().expect("binary runs")
    }

    pub fn deployment(&self) -> Value {
        self.sb
            .get(&format!("/apis/apps/v1/namespaces/{NS}/deployments/{APP}"))
            .expect("deployment exists")
    }

    pub fn hpa(&self) -> Value {
        self.sb
            .get(&format!(
                "/apis/autoscaling/v2/namespaces/{NS}/horizontalpodautoscalers/{APP}"
            ))
            .expect("hpa exists")
    }

    pub fn image(&self) -> String {
        self.deployment()["spec"]["template"]["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    pub fn bounds(&self) -> (i64, i64) {
        let h = self.hpa();
        (
            h["spec"]["minReplicas"].as_i64().unwrap_or(-1),
            h["spec"]["maxReplicas"].as_i64().unwrap_or(-1),
        )
    }

    pub fn ingresses(&self) -> Vec<Value> {
        self.sb.list(&format!(
            "/apis/networking.k8s.io/v1/namespaces/{NS}/ingresses"
        ))
    }

    /// Writes sent by clients (not dry runs), from the request log. A SelfSubjectReview (a
    /// POST that asks who the client is) is not a write.
    pub fn writes(&self) -> Vec<sandbox_apiserver::LoggedRequest> {
        self.sb
            .requests()
            .into_iter()
            .filter(|r| {
                !r.dry_run
                    && r.user == "admin"
                    && matches!(r.method.as_str(), "POST" | "PUT" | "PATCH" | "DELETE")
                    && !r.path.ends_with("/selfsubjectreviews")
            })
            .collect()
    }

    /// [`Env::writes`] to the application's objects: without the history's ConfigMap.
    pub fn app_writes(&self) -> Vec<sandbox_apiserver::LoggedRequest> {
        self.writes()
            .into_iter()
            .filter(|r| !r.path.contains("/configmaps"))
            .collect()
    }

    pub fn write_file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).expect("file written");
        p
    }
}

/// Variables that change what the plugin does; every test run starts without them.
pub const BEHAVIOUR_VARS: &[&str] = &[
    "KUBECONFIG",
    "HOME",
    "NO_COLOR",
    "CLICOLOR",
    "CLICOLOR_FORCE",
    "TERM",
    "KUBE_RS_DEBUG_IMPERSONATE_USER",
    "KUBE_RS_DEBUG_OVERRIDE_URL",
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "NO_PROXY",
    "no_proxy",
    "REQUEST_METHOD",
    "APPUPDATE_PLAN_KEY_FILE",
    "APPUPDATE_HISTORY_KEY_FILE",
    "KUBERC",
    "KUBECTL_KUBERC",
];

/// Removes [`BEHAVIOUR_VARS`] from a command's environment.
pub fn scrub(cmd: &mut std::process::Command) -> &mut std::process::Command {
    for var in BEHAVIOUR_VARS {
        cmd.env_remove(var);
    }
    cmd.env(IMAGE_CHECK_VAR, "off")
}

/// The image check is off in every test but the image tests (tests/it/image_e2e.rs), which
/// turn it on against a registry of their own on loopback: the tests' images are on no
/// registry, and nothing may leave the machine.
pub const IMAGE_CHECK_VAR: &str = "APPUPDATE_IMAGE_CHECK";

/// The binary with a scrubbed environment (and the image check off).
pub fn plugin() -> Command {
    let mut c = Command::cargo_bin("kubectl-appupdate").expect("binary built");
    for var in BEHAVIOUR_VARS {
        c.env_remove(var);
    }
    c.env(IMAGE_CHECK_VAR, "off");
    c
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// Asserts an exit code and shows both streams when it differs.
#[track_caller]
pub fn assert_code(o: &Output, expected: i32) {
    assert_eq!(
        code(o),
        expected,
        "exit code\n--- stdout\n{}\n--- stderr\n{}",
        stdout(o),
        stderr(o)
    );
}

pub fn path_exists(p: &Path) -> bool {
    p.exists()
}

/// The HTTP paths an Ingress routes, over all its rules, sorted.
pub fn paths_of(ingress: &Value) -> Vec<String> {
    let mut v: Vec<String> = ingress["spec"]["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["http"]["paths"].as_array().cloned().unwrap_or_default())
        .map(|p| p["path"].as_str().unwrap_or_default().to_owned())
        .collect();
    v.sort();
    v
}

/// The API path of the Ingress `name` in namespace `shop`.
pub fn ingress_path(name: &str) -> String {
    format!("/apis/networking.k8s.io/v1/namespaces/{NS}/ingresses/{name}")
}

/// A plan file's checksum made again over its (edited) content, as anyone can: sha256 over the
/// content with every object's keys sorted, compact. The checksum guards against accidents only.
pub fn reseal_plan(doc: &mut Value) {
    use sha2::Digest as _;
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&m[k])))
                        .collect(),
                )
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    let canonical = serde_json::to_vec(&sorted(&doc["content"])).unwrap_or_default();
    let hex: String = sha2::Sha256::digest(canonical)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    doc["checksum"] = Value::String(format!("sha256:{hex}"));
}
