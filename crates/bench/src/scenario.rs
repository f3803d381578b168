//! The benchmark scenarios: the starting state each run is reset to, the plugin's command line,
//! the kubectl command sequence that produces the same end state, and the end state itself.
//!
//! * **S** — image only. Start: the sandbox's demo application.
//! * **M** — image + min + max + endpoints in 5 scope groups: 2 Ingress creates, 2 updates,
//!   1 delete. Start: the demo application (managed Ingresses for the public and `[user]`
//!   groups, one unmanaged Ingress) plus a managed Ingress for `[admin]`; the endpoints file
//!   changes the paths of the public and `[user]` groups, adds `[admin, user]` and `[billing]`,
//!   and drops `[admin]`.
//! * **L** — image + min + max + 1 000 endpoints in 100 scope groups. Start: the demo
//!   Deployment, Service, HPA and unmanaged Ingress, and 100 managed Ingresses for the groups
//!   `[team-000]` … `[team-099]`, 10 paths each (as this tool would have created them). The
//!   file keeps groups 005–099 and adds 100–104: 50 groups (005–054) get one path renamed
//!   (update), 45 are unchanged, 5 are created, 5 (000–004) deleted.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use appupdate_model::endpoints_file;
use appupdate_model::plan::RouteStyle;
use appupdate_model::plan::{Action, Kind};
use appupdate_plan::live::LiveState;
use appupdate_plan::planner::{self, UpdateRequest};
use appupdate_plan::routes::refs::RouteFlags;
use appupdate_plan::routes::{self, Attachment, BackendPort, IDENTIFIER_LABEL, RouteContext};
use appupdate_plan::updaters::Plan;
use appupdate_plan::updaters::{AutoscalerUpdate, ContainerUpdate};
use sandbox_apiserver::Sandbox;
use serde_json::{Value, json};

pub const NAMESPACE: &str = "demo";
pub const APP: &str = "web";
pub const CONTAINER: &str = "app";
/// The image every scenario writes.
pub const IMAGE: &str = "registry.example.com/web:2.0";

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
const CHANGE_CAUSE: &str = "kubernetes.io/change-cause";

/// One benchmark scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    S,
    M,
    L,
}

impl Scenario {
    pub const ALL: [Scenario; 3] = [Scenario::S, Scenario::M, Scenario::L];

    pub fn name(self) -> &'static str {
        match self {
            Scenario::S => "S",
            Scenario::M => "M",
            Scenario::L => "L",
        }
    }

    pub fn parse(s: &str) -> Option<Scenario> {
        Scenario::ALL
            .into_iter()
            .find(|x| x.name().eq_ignore_ascii_case(s))
    }

    pub fn describe(self) -> &'static str {
        match self {
            Scenario::S => "image only",
            Scenario::M => {
                "image + min + max + endpoints, 5 scope groups (2 Ingress creates, 2 updates, 1 delete)"
            }
            Scenario::L => {
                "image + min + max + 1 000 endpoints in 100 scope groups (5 creates, 50 updates, 45 unchanged, 5 deletes)"
            }
        }
    }

    fn bounds(self) -> AutoscalerUpdate {
        match self {
            Scenario::S => AutoscalerUpdate::default(),
            Scenario::M | Scenario::L => AutoscalerUpdate {
                min_replicas: Some(3),
                max_replicas: Some(9),
            },
        }
    }

    /// The endpoints file of the run, if the scenario has one.
    pub fn endpoints(self) -> Option<String> {
        match self {
            Scenario::S => None,
            Scenario::M => Some(
                "endpoints:\n\
                 \x20 - path: /health\n\
                 \x20 - path: /unprotected\n\
                 \x20 - path: /v2/public\n\
                 \x20 - path: /protected/user\n\
                 \x20   scopes: [user]\n\
                 \x20 - path: /protected/profile\n\
                 \x20   scopes: [user]\n\
                 \x20 - path: /admin/users\n\
                 \x20   scopes: [admin, user]\n\
                 \x20 - path: /billing/invoices\n\
                 \x20   scopes: [billing]\n"
                    .to_owned(),
            ),
            Scenario::L => Some(team_endpoints(5..105, |k, j| {
                if (5..55).contains(&k) && j == 9 {
                    "e9-v2".to_owned()
                } else {
                    format!("e{j}")
                }
            })),
        }
    }

    /// The plugin's arguments (after the binary).
    pub fn plugin_args(self, kubeconfig: &Path, endpoints: Option<&Path>) -> Vec<String> {
        let mut a = vec![
            APP.to_owned(),
            "--kubeconfig".into(),
            kubeconfig.display().to_string(),
            "-n".into(),
            NAMESPACE.into(),
            "--image".into(),
            IMAGE.into(),
        ];
        let b = self.bounds();
        if let Some(min) = b.min_replicas {
            a.extend(["--min".into(), min.to_string()]);
        }
        if let Some(max) = b.max_replicas {
            a.extend(["--max".into(), max.to_string()]);
        }
        if let Some(e) = endpoints {
            a.extend(["--endpoints".into(), e.display().to_string()]);
        }
        // The image check asks the image's registry, which the benchmark does not serve:
        // measured without it.
        a.extend([
            "--image-check".into(),
            "off".into(),
            "--yes".into(),
            "--color".into(),
            "never".into(),
        ]);
        a
    }

    /// Deletes the application's objects and seeds this scenario's starting state.
    pub fn reset(self, sb: &Sandbox) -> Result<(), String> {
        for path in [
            deployment_path(),
            hpa_path(),
            format!("/api/v1/namespaces/{NAMESPACE}/services/{APP}"),
        ] {
            let _ = sb.delete(&path);
        }
        for ing in sb.list(&ingress_collection()) {
            if let Some(name) = ing["metadata"]["name"].as_str() {
                let _ = sb.delete(&format!("{}/{name}", ingress_collection()));
            }
        }
        sb.seed_demo_app(NAMESPACE, APP).map_err(|e| e.message)?;
        match self {
            Scenario::S => Ok(()),
            Scenario::M => create_managed(
                sb,
                "endpoints:\n  - path: /admin/old\n    scopes: [admin]\n",
                &[],
            ),
            Scenario::L => {
                let demo_managed: Vec<String> = managed_ingresses(sb)
                    .iter()
                    .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_owned))
                    .collect();
                let inherit_from = managed_ingresses(sb);
                for name in demo_managed {
                    sb.delete(&format!("{}/{name}", ingress_collection()))
                        .map_err(|e| e.message)?;
                }
                create_managed(
                    sb,
                    &team_endpoints(0..100, |_, j| format!("e{j}")),
                    &inherit_from,
                )
            }
        }
    }

    /// The plan the plugin computes against the sandbox's current state (the pure planner, as
    /// the plugin runs it).
    pub fn plan(self, sb: &Sandbox) -> Result<Plan, String> {
        let file = self
            .endpoints()
            .map(|t| endpoints_file::parse(&t, "endpoints.yaml"))
            .transpose()
            .map_err(|e| e.to_string())?;
        let container_update = ContainerUpdate {
            image: Some(IMAGE.to_owned()),
        };
        let autoscaler_update = self.bounds();
        let req = UpdateRequest {
            app: APP,
            namespace: NAMESPACE,
            context: "sandbox",
            container: None,
            container_update: &container_update,
            autoscaler_update: &autoscaler_update,
            endpoints: file.as_ref(),
            routes: &RouteFlags::default(),
            undo_of: None,
        };
        let mut live = live_state(sb);
        planner::build_plan(&req, &mut live).map_err(|e| e.to_string())
    }

    /// kubectl commands (arguments after `kubectl`, without `--kubeconfig`/`--cache-dir`) that
    /// produce the plugin's end state from the current state: `set image`, `patch` the HPA,
    /// `apply -f` every desired Ingress (one file, one process), `delete` the stale ones (one
    /// process). Writes the Ingress manifests to `manifest`.
    pub fn kubectl_sequence(
        self,
        sb: &Sandbox,
        manifest: &Path,
    ) -> Result<Vec<Vec<String>>, String> {
        let plan = self.plan(sb)?;
        let ns = |mut v: Vec<String>| {
            v.extend(["-n".into(), NAMESPACE.into()]);
            v
        };
        let mut cmds = vec![ns(vec![
            "set".into(),
            "image".into(),
            format!("deployment/{APP}"),
            format!("{CONTAINER}={IMAGE}"),
        ])];
        let b = self.bounds();
        if b.min_replicas.is_some() || b.max_replicas.is_some() {
            let mut spec = serde_json::Map::new();
            if let Some(min) = b.min_replicas {
                spec.insert("minReplicas".into(), json!(min));
            }
            if let Some(max) = b.max_replicas {
                spec.insert("maxReplicas".into(), json!(max));
            }
            cmds.push(ns(vec![
                "patch".into(),
                "hpa".into(),
                APP.into(),
                "--type".into(),
                "merge".into(),
                "-p".into(),
                json!({ "spec": spec }).to_string(),
            ]));
        }
        if self.endpoints().is_some() {
            let mut yaml = String::new();
            let mut deletes = Vec::new();
            for p in &plan.objects {
                let c = &p.change;
                if c.kind != Kind::Ingress {
                    continue;
                }
                match c.action() {
                    Action::Delete => deletes.push(c.name.clone()),
                    Action::Create | Action::Update | Action::Unchanged => {
                        // The focused view is exactly what the tool owns plus class, rules and
                        // TLS: a complete manifest of the desired Ingress.
                        let view = c.after.as_ref().ok_or("an Ingress change without a view")?;
                        yaml.push_str("---\n");
                        yaml.push_str(&serde_saphyr::to_string(view).map_err(|e| e.to_string())?);
                    }
                }
            }
            std::fs::write(manifest, yaml).map_err(|e| e.to_string())?;
            cmds.push(ns(vec![
                "apply".into(),
                "-f".into(),
                manifest.display().to_string(),
            ]));
            if !deletes.is_empty() {
                let mut d = vec!["delete".into(), "ingress".into()];
                d.extend(deletes);
                cmds.push(ns(d));
            }
        }
        Ok(cmds)
    }
}

pub fn deployment_path() -> String {
    format!("/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{APP}")
}

pub fn hpa_path() -> String {
    format!("/apis/autoscaling/v2/namespaces/{NAMESPACE}/horizontalpodautoscalers/{APP}")
}

pub fn ingress_collection() -> String {
    format!("/apis/networking.k8s.io/v1/namespaces/{NAMESPACE}/ingresses")
}

/// `n` groups `[team-NNN]` with 10 paths `/tNNN/<path(k, j)>` each.
pub fn team_endpoints(
    groups: std::ops::Range<usize>,
    path: impl Fn(usize, usize) -> String,
) -> String {
    let mut s = String::from("endpoints:\n");
    for k in groups {
        for j in 0..10 {
            let _ = write!(
                s,
                "  - path: /t{k:03}/{}\n    scopes: [team-{k:03}]\n",
                path(k, j)
            );
        }
    }
    s
}

pub fn managed_ingresses(sb: &Sandbox) -> Vec<Value> {
    sb.list(&ingress_collection())
        .into_iter()
        .filter(|i| {
            let l = &i["metadata"]["labels"];
            l["app"].as_str() == Some(APP) && l[IDENTIFIER_LABEL].is_string()
        })
        .collect()
}

/// The live state the plugin would read.
pub fn live_state(sb: &Sandbox) -> LiveState {
    LiveState {
        deployment: sb.get(&deployment_path()),
        autoscaler: sb.get(&hpa_path()),
        service: sb.get(&format!("/api/v1/namespaces/{NAMESPACE}/services/{APP}")),
        ingresses: managed_ingresses(sb),
        ..LiveState::default()
    }
}

/// Creates the managed Ingresses this tool would create for `endpoints`, inheriting class,
/// hosts and TLS from `inherit_from` (default: the live managed Ingresses).
pub fn create_managed(sb: &Sandbox, endpoints: &str, inherit_from: &[Value]) -> Result<(), String> {
    let file = endpoints_file::parse(endpoints, "seed.yaml").map_err(|e| e.to_string())?;
    let live = managed_ingresses(sb);
    let mut ctx = RouteContext::new(APP, BackendPort::Number(80));
    ctx.attachment = Attachment::of_ingress_siblings(if inherit_from.is_empty() {
        &live
    } else {
        inherit_from
    });
    let bodies = routes::create_bodies(RouteStyle::NginxSnippet, &ctx, &file, NAMESPACE)
        .map_err(|e| e.to_string())?;
    for body in bodies {
        sb.create(&ingress_collection(), body)
            .map_err(|e| e.message)?;
    }
    Ok(())
}

/// The application's state as far as either contender could change it: the Deployment's and
/// HPA's labels, annotations and spec, and every Ingress in the namespace by name (labels,
/// annotations, spec). kubectl's `last-applied-configuration` annotation is left out: it is
/// `apply`'s bookkeeping, not part of the application; so is the plugin's
/// `kubernetes.io/change-cause` on the Deployment, its note of what the change did (no
/// annotations left is no annotations).
pub fn end_state(sb: &Sandbox) -> Value {
    fn essentials(obj: &Value) -> Value {
        let mut annotations = obj["metadata"]["annotations"].clone();
        if let Some(a) = annotations.as_object_mut() {
            a.remove(LAST_APPLIED);
            a.remove(CHANGE_CAUSE);
            if a.is_empty() {
                annotations = Value::Null;
            }
        }
        json!({
            "labels": obj["metadata"]["labels"],
            "annotations": annotations,
            "spec": obj["spec"],
        })
    }
    let ingresses: BTreeMap<String, Value> = sb
        .list(&ingress_collection())
        .iter()
        .filter_map(|i| Some((i["metadata"]["name"].as_str()?.to_owned(), essentials(i))))
        .collect();
    json!({
        "deployment": sb.get(&deployment_path()).map(|d| essentials(&d)),
        "hpa": sb.get(&hpa_path()).map(|h| essentials(&h)),
        "ingresses": ingresses,
    })
}
