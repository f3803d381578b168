//! Who else owns the application: an object whose labels or managedFields name another owner
//! of a field the run changes is refused under `--yes` (exit 3, nothing written) unless
//! `--force-conflicts`; the owner is named after the plan either way.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;

use crate::common::{Env, assert_code, stderr};

const DEPLOY: &str = "/apis/apps/v1/namespaces/shop/deployments/web";
const NEW: &str = "registry.example.com/web:2.0";

fn helm_managed(env: &Env) {
    env.sb
        .update(DEPLOY, |d| {
            d["metadata"]["labels"]["app.kubernetes.io/managed-by"] = json!("Helm");
            d["metadata"]["annotations"]["meta.helm.sh/release-name"] = json!("web");
            d["metadata"]["annotations"]["meta.helm.sh/release-namespace"] = json!("shop");
        })
        .unwrap();
}

#[test]
fn a_helm_release_is_named_and_yes_is_refused_before_any_write() {
    let env = Env::new();
    helm_managed(&env);
    let before = env.image();
    let o = env.run(&["web", "--image", NEW, "--yes"]);
    assert_code(&o, 3);
    let err = stderr(&o);
    assert!(err.contains("owner: deployment.apps/web"), "{err}");
    assert!(err.contains("Helm release shop/web"), "{err}");
    assert!(err.contains("--force-conflicts"), "{err}");
    assert!(err.contains("nothing was written"), "{err}");
    assert!(env.app_writes().is_empty(), "{:?}", env.app_writes());
    assert_eq!(env.image(), before);
}

#[test]
fn force_conflicts_writes_anyway() {
    let env = Env::new();
    helm_managed(&env);
    let o = env.run(&["web", "--image", NEW, "--yes", "--force-conflicts"]);
    assert_code(&o, 0);
    assert!(
        stderr(&o).contains("Helm release shop/web"),
        "{}",
        stderr(&o)
    );
    assert_eq!(env.image(), NEW);
}

#[test]
fn a_dry_run_names_the_owner_and_writes_nothing() {
    let env = Env::new();
    helm_managed(&env);
    let o = env.run(&["web", "--image", NEW, "--dry-run"]);
    assert_code(&o, 0);
    assert!(stderr(&o).contains("object-owned"), "{}", stderr(&o));
    assert!(env.app_writes().is_empty());
}

#[test]
fn an_argo_cd_tracking_id_copied_from_another_object_is_not_an_owner() {
    let env = Env::new();
    env.sb
        .update(DEPLOY, |d| {
            d["metadata"]["labels"]["app.kubernetes.io/instance"] = json!("shop-apps");
            d["metadata"]["annotations"]["argocd.argoproj.io/tracking-id"] =
                json!("shop-apps:apps/Deployment:shop/api");
        })
        .unwrap();
    let o = env.run(&["web", "--image", NEW, "--yes"]);
    assert_code(&o, 0);
    assert!(!stderr(&o).contains("owner:"), "{}", stderr(&o));
    assert_eq!(env.image(), NEW);
}

#[test]
fn an_argo_cd_tracked_deployment_is_refused() {
    let env = Env::new();
    env.sb
        .update(DEPLOY, |d| {
            d["metadata"]["annotations"]["argocd.argoproj.io/tracking-id"] =
                json!("shop-apps:apps/Deployment:shop/web");
        })
        .unwrap();
    let o = env.run(&["web", "--image", NEW, "--yes"]);
    assert_code(&o, 3);
    assert!(
        stderr(&o).contains("Argo CD application shop-apps may revert this"),
        "{}",
        stderr(&o)
    );
    assert!(env.app_writes().is_empty());
}

#[test]
fn objects_changed_by_people_and_by_this_tool_have_no_owner() {
    let env = Env::new();
    // kubectl set image, then this tool itself, twice.
    env.sb
        .update(DEPLOY, |d| {
            d["spec"]["template"]["spec"]["containers"][0]["image"] =
                json!("registry.example.com/web:1.5");
        })
        .unwrap();
    let o = env.run(&["web", "--image", NEW, "--yes"]);
    assert_code(&o, 0);
    let o = env.run(&["web", "--image", "registry.example.com/web:3.0", "--yes"]);
    assert_code(&o, 0);
    assert!(!stderr(&o).contains("owner:"), "{}", stderr(&o));
}

/// Helm 4: the Helm labels, and managedFields in which `helm` applies. Only what its apply
/// holds blocks: here the labels, not the image.
#[test]
fn a_helm_4_apply_manager_holding_only_labels_does_not_block_the_image() {
    let env = Env::new();
    helm_managed(&env);
    env.sb
        .update(DEPLOY, |d| {
            let fields = d["metadata"]["managedFields"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let mut fields = fields;
            fields.push(json!({
                "manager": "helm", "operation": "Apply", "apiVersion": "apps/v1",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {"f:app.kubernetes.io/managed-by": {}}}},
            }));
            d["metadata"]["managedFields"] = json!(fields);
        })
        .unwrap();
    let managers: Vec<String> = env.deployment()["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["manager"].as_str().map(str::to_owned))
        .collect();
    assert!(managers.iter().any(|m| m == "helm"), "{managers:?}");
    let o = env.run(&["web", "--image", NEW, "--yes"]);
    assert_code(&o, 0);
    assert_eq!(env.image(), NEW);
}

/// Helm 4 with the image in its apply: the next `helm upgrade` would conflict on it.
#[test]
fn a_helm_4_apply_manager_holding_the_image_blocks_it() {
    let env = Env::new();
    helm_managed(&env);
    env.sb
        .update(DEPLOY, |d| {
            let mut fields = d["metadata"]["managedFields"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            fields.push(json!({
                "manager": "helm", "operation": "Apply", "apiVersion": "apps/v1",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": {
                    "k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:name": {}}
                }}}}},
            }));
            d["metadata"]["managedFields"] = json!(fields);
        })
        .unwrap();
    let o = env.run(&["web", "--image", NEW, "--yes"]);
    assert_code(&o, 3);
    let err = stderr(&o);
    assert!(err.contains("(apply-conflict)"), "{err}");
    assert!(
        err.contains("the next `helm upgrade` of release shop/web will conflict on .spec.template.spec.containers[name=app].image"),
        "{err}"
    );
    assert!(env.app_writes().is_empty());
}

/// `-o json` carries the owners with a machine-readable reason, as the schema says.
#[test]
fn the_json_plan_names_the_owner_with_a_reason() {
    let env = Env::new();
    helm_managed(&env);
    let o = env.run(&["web", "--image", NEW, "--dry-run", "-o", "json"]);
    assert_code(&o, 0);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        doc["owners"],
        json!([{
            "object": "deployment.apps/web",
            "tool": "helm",
            "name": "shop/web",
            "fields": [],
            "reason": "object-owned",
            "consequence": "the next `helm upgrade` of release shop/web may revert this",
        }])
    );
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/schema/plan.schema.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    // Nobody else: no owners at all in the document.
    let env = Env::new();
    let o = env.run(&["web", "--image", NEW, "--dry-run", "-o", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(doc.get("owners").is_none(), "{doc}");
}

/// A Deployment as a Helm 4 chart renders it (the labels and annotations Helm sets), for
/// `kubectl apply --server-side --field-manager helm`: what Helm 4 sends.
const HELM_4_DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    app: web
    app.kubernetes.io/name: web
    app.kubernetes.io/instance: web
    app.kubernetes.io/managed-by: Helm
    helm.sh/chart: web-0.1.0
  annotations:
    meta.helm.sh/release-name: web
    meta.helm.sh/release-namespace: shop
spec:
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: app
        image: registry.example.com/web:1.0
        ports:
        - name: http
          containerPort: 8080
";

/// Helm 4 for real: the Deployment is made by a server-side apply as `helm` (the real
/// kubectl's `apply --server-side --field-manager helm`), not by writing managedFields by hand.
/// Its apply holds the image: the change is refused under `--yes`; with `--force-conflicts`
/// it is written, and Helm's next apply of the same chart then conflicts on the image, as the
/// plan said it would.
#[test]
fn a_deployment_applied_server_side_by_helm_is_owned_and_helms_next_apply_conflicts() {
    let env = Env::new();
    let manifest = env.write_file("web.yaml", HELM_4_DEPLOYMENT);
    let helm_apply = || {
        let mut c = std::process::Command::new("kubectl");
        crate::common::scrub(&mut c)
            .env("HOME", env.dir.path())
            .arg("--kubeconfig")
            .arg(&env.kubeconfig)
            .args(["apply", "--server-side", "--field-manager", "helm", "-f"])
            .arg(&manifest)
            .output()
            .unwrap()
    };
    env.sb.delete(DEPLOY).unwrap();
    let o = helm_apply();
    assert!(o.status.success(), "{}", stderr(&o));
    let entries = env.deployment()["metadata"]["managedFields"].clone();
    assert_eq!(entries.as_array().map(Vec::len), Some(1), "{entries}");
    assert_eq!(entries[0]["manager"], "helm");
    assert_eq!(entries[0]["operation"], "Apply");
    env.sb.clear_requests();

    let o = env.run(&["web", "--image", NEW, "--yes"]);
    assert_code(&o, 3);
    let err = stderr(&o);
    assert!(err.contains("owner: deployment.apps/web"), "{err}");
    assert!(err.contains("(apply-conflict)"), "{err}");
    assert!(
        err.contains("the next `helm upgrade` of release shop/web will conflict on .spec.template.spec.containers[name=app].image"),
        "{err}"
    );
    assert!(env.app_writes().is_empty(), "{:?}", env.app_writes());
    assert_eq!(env.image(), "registry.example.com/web:1.0");

    let o = env.run(&["web", "--image", NEW, "--yes", "--force-conflicts"]);
    assert_code(&o, 0);
    assert_eq!(env.image(), NEW);
    let o = helm_apply();
    assert!(!o.status.success(), "helm's next apply goes through");
    let err = stderr(&o);
    assert!(
        err.contains("conflict with \"kubectl-appupdate\" using apps/v1: .spec.template.spec.containers[name=\"app\"].image"),
        "{err}"
    );
}

/// The seeded public Ingress (scopes []), which an endpoints change that adds a path updates.
const PUBLIC: &str = "web-e3b0c44298fc1c14";

/// The seeded endpoints, and one path more for the public group.
const MORE: &str = "endpoints:
  - path: /health
  - path: /unprotected
  - path: /more
  - path: /protected/user
    scopes: [user]
";

/// A route the plan changes is read in a list, which drops managedFields: what owner detection
/// needs of them is kept while the list is read. A Helm 4 release takes the Ingress over (a
/// server-side apply as `helm`, with Helm's labels and the same rules): it owns the rules the
/// run changes.
#[test]
fn the_owner_of_an_ingress_is_named_and_yes_is_refused() {
    let env = Env::new();
    let path = crate::common::ingress_path(PUBLIC);
    let live = env.sb.get(&path).unwrap();
    let mut labels = live["metadata"]["labels"].clone();
    labels["app.kubernetes.io/managed-by"] = json!("Helm");
    env.sb
        .force_apply(
            &path,
            "helm",
            json!({
                "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                "metadata": {"name": PUBLIC, "namespace": "shop", "labels": labels,
                             "annotations": {"meta.helm.sh/release-name": "web",
                                             "meta.helm.sh/release-namespace": "shop"}},
                "spec": live["spec"].clone(),
            }),
        )
        .unwrap();
    let helm: Vec<serde_json::Value> = env.sb.get(&path).unwrap()["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["manager"] == "helm")
        .cloned()
        .collect();
    assert_eq!(helm.len(), 1, "{helm:?}");
    assert_eq!(helm[0]["operation"], json!("Apply"));
    assert!(
        helm[0]["fieldsV1"]["f:spec"]["f:rules"].is_object(),
        "{helm:?}"
    );
    let before = env.ingresses();
    let file = env.write_file("endpoints.yaml", MORE);
    let o = env.run(&["web", "--endpoints", file.to_str().unwrap(), "--yes"]);
    assert_code(&o, 3);
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "owner: ingress.networking.k8s.io/{PUBLIC}: Helm release shop/web holds .spec.rules"
        )),
        "{err}"
    );
    assert!(err.contains("(apply-conflict)"), "{err}");
    assert!(
        err.contains("the next `helm upgrade` of release shop/web will conflict on .spec.rules"),
        "{err}"
    );
    assert!(err.contains("--force-conflicts"), "{err}");
    assert!(env.app_writes().is_empty(), "{:?}", env.app_writes());
    assert_eq!(env.ingresses(), before);
    // The same list, no request more: one LIST of Ingresses, and no GET of one.
    let reads: Vec<String> = env
        .sb
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path.contains("/ingresses"))
        .map(|r| r.path)
        .collect();
    assert_eq!(
        reads,
        ["/apis/networking.k8s.io/v1/namespaces/shop/ingresses"],
        "{reads:?}"
    );
    // The plan as data names it too.
    let o = env.run(&[
        "web",
        "--endpoints",
        file.to_str().unwrap(),
        "--dry-run",
        "-o",
        "json",
    ]);
    assert_code(&o, 0);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        doc["owners"][0]["object"],
        json!(format!("ingress.networking.k8s.io/{PUBLIC}"))
    );
    assert_eq!(doc["owners"][0]["reason"], json!("apply-conflict"));
    // --force-conflicts writes the path.
    let o = env.run(&[
        "web",
        "--endpoints",
        file.to_str().unwrap(),
        "--yes",
        "--force-conflicts",
    ]);
    assert_code(&o, 0);
    let public = env
        .ingresses()
        .into_iter()
        .find(|i| i["metadata"]["name"] == PUBLIC)
        .unwrap();
    assert!(
        crate::common::paths_of(&public)
            .iter()
            .any(|p| p.contains("/more")),
        "{:?}",
        crate::common::paths_of(&public)
    );
}

/// An Argo CD tracking id copied onto an Ingress from another object names that object's
/// owner, not this one's.
#[test]
fn an_argo_cd_tracking_id_copied_onto_an_ingress_is_not_an_owner() {
    let env = Env::new();
    env.sb
        .update(&crate::common::ingress_path(PUBLIC), |i| {
            i["metadata"]["annotations"]["argocd.argoproj.io/tracking-id"] =
                json!("shop-apps:networking.k8s.io/Ingress:shop/web-04f8996da763b7a9");
        })
        .unwrap();
    let file = env.write_file("endpoints.yaml", MORE);
    let o = env.run(&["web", "--endpoints", file.to_str().unwrap(), "--yes"]);
    assert_code(&o, 0);
    assert!(!stderr(&o).contains("owner:"), "{}", stderr(&o));
    // Its own id, on the same Ingress, is an owner.
    env.sb
        .update(&crate::common::ingress_path(PUBLIC), |i| {
            i["metadata"]["annotations"]["argocd.argoproj.io/tracking-id"] =
                json!(format!("shop-apps:networking.k8s.io/Ingress:shop/{PUBLIC}"));
        })
        .unwrap();
    let file = env.write_file(
        "endpoints.yaml",
        &MORE.replace("  - path: /more\n", "  - path: /more\n  - path: /most\n"),
    );
    let o = env.run(&["web", "--endpoints", file.to_str().unwrap(), "--yes"]);
    assert_code(&o, 3);
    assert!(
        stderr(&o).contains("Argo CD application shop-apps may revert this"),
        "{}",
        stderr(&o)
    );
}

/// A saved plan records the owners it saw, and `apply FILE` finds them again in the objects as
/// they are: an object that became Helm-managed after the plan was written is refused under
/// `--yes`, saying the plan did not show that owner; `--force-conflicts` writes it.
#[test]
fn a_saved_plan_whose_object_became_helm_managed_since_is_refused() {
    let env = Env::new();
    let file = env.dir.path().join("plan.json");
    let o = env.run(&["web", "--image", NEW, "--plan-out", file.to_str().unwrap()]);
    assert_code(&o, 0);
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert!(
        saved["content"]["clusters"][0].get("owners").is_none(),
        "{saved}"
    );
    helm_managed(&env);
    let before = env.image();
    let o = env.run(&["apply", file.to_str().unwrap(), "--yes"]);
    assert_code(&o, 3);
    let err = stderr(&o);
    assert!(
        err.contains(
            "owner: deployment.apps/web: Helm release shop/web owns the whole object (object-owned)"
        ),
        "{err}"
    );
    assert!(
        err.contains(&format!("deployment.apps/web is owned by Helm release shop/web (the next `helm upgrade` of release shop/web may revert this), which {} did not show: it became an owner after the plan was written", file.display())),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "(not in {}: an owner since the plan was written)",
            file.display()
        )),
        "{err}"
    );
    assert!(err.contains("--force-conflicts"), "{err}");
    assert!(env.app_writes().is_empty(), "{:?}", env.app_writes());
    assert_eq!(env.image(), before);
    let o = env.run(&[
        "apply",
        file.to_str().unwrap(),
        "--yes",
        "--force-conflicts",
    ]);
    assert_code(&o, 0);
    assert_eq!(env.image(), NEW);
}

/// A plan made of a Helm-managed object records the owner inside its checksum; applying it
/// under `--yes` still needs `--force-conflicts`, as the plan said.
#[test]
fn a_saved_plan_that_showed_the_owner_still_needs_force_conflicts() {
    let env = Env::new();
    helm_managed(&env);
    let file = env.dir.path().join("plan.json");
    let o = env.run(&["web", "--image", NEW, "--plan-out", file.to_str().unwrap()]);
    assert_code(&o, 0);
    assert!(
        stderr(&o).contains("owner: deployment.apps/web"),
        "{}",
        stderr(&o)
    );
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(
        saved["content"]["clusters"][0]["owners"],
        json!([{"object": "deployment.apps/web", "tool": "helm", "name": "shop/web",
                "fields": [], "reason": "object-owned"}])
    );
    assert_eq!(
        saved["content"]["clusters"][0]["plan"]["owners"][0]["tool"],
        json!("helm")
    );
    let o = env.run(&["apply", file.to_str().unwrap(), "--yes"]);
    assert_code(&o, 3);
    let err = stderr(&o);
    assert!(
        err.contains(&format!(", as {} showed;", file.display())),
        "{err}"
    );
    assert!(
        !err.contains("an owner since the plan was written"),
        "{err}"
    );
    assert!(env.app_writes().is_empty(), "{:?}", env.app_writes());
    let o = env.run(&[
        "apply",
        file.to_str().unwrap(),
        "--yes",
        "--force-conflicts",
    ]);
    assert_code(&o, 0);
    assert_eq!(env.image(), NEW);
}

/// A fleet with one Helm-managed cluster: its owner is named after the plan and in the
/// question, its plan in the fleet document carries it, and under `--yes` that cluster is
/// refused (exit 3, reason `owned`) while the others are not started: nothing is written
/// anywhere. `--force-conflicts` writes every cluster.
#[test]
fn a_fleet_with_one_helm_managed_cluster_is_refused_there_and_written_nowhere() {
    use crate::common::fleet::{DEPLOY as FLEET_DEPLOY, Fleet, NEW_IMAGE, OLD_IMAGE, writes};
    let fleet = Fleet::new(&["eu-1", "us-1"]);
    fleet
        .sb("us-1")
        .update(FLEET_DEPLOY, |d| {
            d["metadata"]["labels"]["app.kubernetes.io/managed-by"] = json!("Helm");
            d["metadata"]["annotations"]["meta.helm.sh/release-name"] = json!("web");
            d["metadata"]["annotations"]["meta.helm.sh/release-namespace"] = json!("shop");
        })
        .unwrap();
    let args = [
        "web",
        "--contexts",
        "eu-1,us-1",
        "--image",
        NEW_IMAGE,
        "--yes",
    ];
    let o = fleet.run(&args);
    assert_code(&o, 3);
    let err = stderr(&o);
    assert!(
        err.contains("owner: deployment.apps/web in context \"us-1\": Helm release shop/web owns the whole object (object-owned)"),
        "{err}"
    );
    assert!(!err.contains("in context \"eu-1\": Helm"), "{err}");
    assert!(
        err.contains("context us-1 (namespace shop): NOT updated: not applied: deployment.apps/web in context \"us-1\" is owned by Helm release shop/web"),
        "{err}"
    );
    assert!(
        err.contains("context eu-1 (namespace shop): NOT started: another cluster's change is to fields another tool owns (--yes without --force-conflicts), so nothing was written anywhere"),
        "{err}"
    );
    for name in ["eu-1", "us-1"] {
        assert!(writes(fleet.sb(name)).is_empty(), "{name}");
        assert_eq!(fleet.image(name), OLD_IMAGE, "{name}");
    }
    // The fleet document: the owner in us-1's plan, and each cluster's outcome.
    let mut json_args = args.to_vec();
    json_args.extend(["-o", "json"]);
    let o = fleet.run(&json_args);
    assert_code(&o, 3);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    crate::fleet_e2e::assert_valid_fleet_document(&doc);
    let cluster = |name: &str| {
        doc["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["context"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(
        cluster("us-1")["plan"]["owners"],
        json!([{"object": "deployment.apps/web", "tool": "helm", "name": "shop/web", "fields": [],
                "reason": "object-owned",
                "consequence": "the next `helm upgrade` of release shop/web may revert this"}])
    );
    assert!(cluster("eu-1")["plan"].get("owners").is_none(), "{doc}");
    assert_eq!(cluster("us-1")["outcome"]["status"], json!("failed"));
    assert_eq!(cluster("us-1")["outcome"]["reason"], json!("owned"));
    assert_eq!(cluster("eu-1")["outcome"]["status"], json!("not-started"));
    // Written everywhere with --force-conflicts.
    let mut forced = args.to_vec();
    forced.push("--force-conflicts");
    let o = fleet.run(&forced);
    assert_code(&o, 0);
    for name in ["eu-1", "us-1"] {
        assert_eq!(fleet.image(name), NEW_IMAGE, "{name}");
    }
}

/// The history record names the owners a run overrode, and `history` shows them; a run that
/// overrode nobody says nothing of owners.
#[test]
fn the_history_record_names_the_owners_overridden() {
    let env = Env::new();
    let o = env.run(&["web", "--max", "7", "--yes"]);
    assert_code(&o, 0);
    helm_managed(&env);
    let o = env.run(&["web", "--image", NEW, "--yes", "--force-conflicts"]);
    assert_code(&o, 0);
    let o = env.run(&["history", "web"]);
    assert_code(&o, 0);
    let table = crate::common::stdout(&o);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "{table}");
    assert!(!lines[1].contains("overrode"), "{table}");
    assert!(
        lines[2].ends_with(&format!(
            "image registry.example.com/web:1.0 → {NEW}; overrode Helm release shop/web (deployment.apps/web)"
        )),
        "{table}"
    );
    let o = env.run(&["history", "web", "-o", "json"]);
    assert_code(&o, 0);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(doc["records"][0].get("overridden").is_none(), "{doc}");
    assert_eq!(
        doc["records"][1]["overridden"],
        json!([{"object": "deployment.apps/web", "tool": "helm", "name": "shop/web",
                "reason": "object-owned"}])
    );
}
