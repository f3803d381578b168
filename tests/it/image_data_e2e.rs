//! What the image check found, as data and per cluster: `images[]` of the `-o json` plan
//! (against the nodes, against the live image, not checked, pinned), and a fleet whose clusters'
//! nodes have different platforms, whose folded sections each show the notes that hold for
//! them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::image_e2e::{behind_front, nodes};

use common::front::{Front, Refusal};
use common::registry::Registry;
use common::*;
use sandbox_apiserver::{Sandbox, SandboxOptions};
use serde_json::{Value, json};

/// The plugin with the check on, no docker config.
fn checked(env: &Env, args: &[&str]) -> std::process::Output {
    registry::checked(env, None, args)
}

fn plan_schema() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schema/plan.schema.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[track_caller]
fn valid_plan(doc: &Value) {
    let schema = plan_schema();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}\n{doc:#}");
}

fn document(o: &std::process::Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(o), stderr(o)))
}

#[test]
fn the_json_plan_names_the_image_its_digest_platforms_and_the_nodes_check() {
    let Some(reg) = Registry::start() else { return };
    let (env, _front) = behind_front(200, nodes(&[("linux", "amd64")]));
    let digest = reg.push_index("web", "2", &[("linux", "amd64"), ("linux", "arm64")]);
    let image = reg.image("web:2");
    let o = checked(&env, &["web", "--image", &image, "--dry-run", "-o", "json"]);
    assert_code(&o, 0);
    let doc = document(&o);
    valid_plan(&doc);
    assert_eq!(
        doc["images"],
        json!([{
            "reference": image,
            "written": image,
            "digest": digest,
            "platforms": ["linux/amd64", "linux/arm64"],
            "platformCheck": "nodes",
            "checkedAgainst": ["linux/amd64"],
            "liveImage": null,
            "pinned": false,
            "notChecked": null,
        }])
    );
    // --pin-digest: the digest is what the plan writes.
    let o = checked(
        &env,
        &[
            "web",
            "--image",
            &image,
            "--pin-digest",
            "--dry-run",
            "-o",
            "json",
        ],
    );
    assert_code(&o, 0);
    let doc = document(&o);
    valid_plan(&doc);
    assert_eq!(doc["images"][0]["pinned"], json!(true));
    assert_eq!(
        doc["images"][0]["written"],
        json!(format!("{image}@{digest}"))
    );
    // The check off: no images at all.
    let o = env.run(&["web", "--image", &image, "--dry-run", "-o", "json"]);
    assert_code(&o, 0);
    assert!(document(&o).get("images").is_none(), "{}", stdout(&o));
}

#[test]
fn the_json_plan_says_when_the_live_image_decided_and_when_nothing_was_checked() {
    let Some(reg) = Registry::start() else { return };
    let env = Env::new();
    reg.push_index("web", "1", &[("linux", "amd64")]);
    let digest = reg.push_single("web", "2", "linux", "amd64");
    let live = reg.image("web:1");
    let o = env.run(&["web", "--image", &live, "--yes"]);
    assert_code(&o, 0);
    let image = reg.image("web:2");
    // The sandbox's nodes carry no labels: the live image decides.
    let o = checked(&env, &["web", "--image", &image, "--dry-run", "-o", "json"]);
    assert_code(&o, 0);
    let doc = document(&o);
    valid_plan(&doc);
    assert_eq!(
        doc["images"],
        json!([{
            "reference": image,
            "written": image,
            "digest": digest,
            "platforms": ["linux/amd64"],
            "platformCheck": "live-image",
            "checkedAgainst": ["linux/amd64"],
            "liveImage": live,
            "pinned": false,
            "notChecked": null,
        }])
    );
    // A registry that cannot be reached: not checked, and why (the run went on under auto).
    let closed = registry::closed_addr();
    let unreachable = format!("{closed}/web:2");
    let o = checked(
        &env,
        &["web", "--image", &unreachable, "--dry-run", "-o", "json"],
    );
    assert_code(&o, 0);
    let doc = document(&o);
    valid_plan(&doc);
    assert_eq!(
        doc["images"],
        json!([{
            "reference": unreachable,
            "written": unreachable,
            "digest": null,
            "platforms": [],
            "platformCheck": "none",
            "checkedAgainst": [],
            "liveImage": null,
            "pinned": false,
            "notChecked": format!("cannot reach the registry {closed}: connection refused"),
        }])
    );
}

/// Three clusters, each behind a [`Front`] that lists its nodes: `eu-1` and `eu-2` amd64 only,
/// `us-1` amd64 and arm64.
struct NodeFleet {
    _clusters: Vec<(Sandbox, Front)>,
    dir: tempfile::TempDir,
    kubeconfig: std::path::PathBuf,
}

fn node_fleet() -> NodeFleet {
    let platforms: [(&str, &[(&str, &str)]); 3] = [
        ("eu-1", &[("linux", "amd64")]),
        ("eu-2", &[("linux", "amd64")]),
        ("us-1", &[("linux", "amd64"), ("linux", "arm64")]),
    ];
    let mut clusters = Vec::new();
    let (mut kube_clusters, mut users, mut contexts) = (Vec::new(), Vec::new(), Vec::new());
    for (name, nodes_of) in platforms {
        let sb = Sandbox::start(SandboxOptions {
            tls: false,
            ..SandboxOptions::default()
        })
        .unwrap();
        sb.seed_demo_app(NS, APP).unwrap();
        let front = Front::start(sb.addr());
        front.refuse(Refusal {
            method: "GET",
            path: "/api/v1/nodes".into(),
            dry_run: None,
            code: 200,
            status: nodes(nodes_of),
            count: 100,
        });
        kube_clusters
            .push(json!({"name": name, "cluster": {"server": format!("http://{}", front.addr)}}));
        users.push(
            json!({"name": name, "user": {"token": sb.token(sandbox_apiserver::Identity::Admin)}}),
        );
        contexts.push(
            json!({"name": name, "context": {"cluster": name, "user": name, "namespace": NS}}),
        );
        clusters.push((sb, front));
    }
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let config = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": kube_clusters, "users": users, "contexts": contexts,
        "current-context": "eu-1",
    });
    std::fs::write(&kubeconfig, serde_json::to_string(&config).unwrap()).unwrap();
    NodeFleet {
        _clusters: clusters,
        dir,
        kubeconfig,
    }
}

impl NodeFleet {
    fn run(&self, args: &[&str]) -> std::process::Output {
        let mut c = plugin();
        c.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .env_remove(IMAGE_CHECK_VAR)
            .env("DOCKER_CONFIG", self.dir.path().join("no-docker-config"))
            .args(args);
        c.output().expect("binary runs")
    }
}

#[test]
fn a_fleet_folds_only_clusters_whose_platform_checks_agree() {
    let Some(reg) = Registry::start() else { return };
    let fleet = node_fleet();
    let digest = reg.push_index("web", "2", &[("linux", "amd64"), ("linux", "arm64")]);
    let image = reg.image("web:2");
    let args = [
        "web",
        "--contexts",
        "eu-1,eu-2,us-1",
        "--image",
        &image,
        "--dry-run",
    ];
    let o = fleet.run(&args);
    assert_code(&o, 0);
    let out = stdout(&o);
    let resolved = format!("image {image} → {digest} (linux/amd64, linux/arm64)");
    let amd64 = "platforms checked against the nodes the pods can land on: linux/amd64\n";
    let both =
        "platforms checked against the nodes the pods can land on: linux/amd64, linux/arm64\n";
    // Two sections: each with its own platform note, the image's resolution in both.
    let eu = out
        .find("=== contexts eu-1, eu-2 (the same plan on 2 clusters)")
        .unwrap_or_else(|| panic!("eu-1 and eu-2 folded: {out}"));
    let us = out
        .find("=== context us-1:")
        .unwrap_or_else(|| panic!("us-1 on its own: {out}"));
    assert!(eu < us, "{out}");
    let (eu_section, us_section) = (&out[eu..us], &out[us..]);
    assert!(
        eu_section.contains(&resolved) && eu_section.contains(amd64),
        "{out}"
    );
    assert!(!eu_section.contains(both), "{out}");
    assert!(
        us_section.contains(&resolved) && us_section.contains(both),
        "{out}"
    );
    assert!(!us_section.contains(amd64), "{out}");
    // The fleet document: each cluster's own check, and the sections as folded.
    let mut json_args = args.to_vec();
    json_args.extend(["-o", "json"]);
    let o = fleet.run(&json_args);
    assert_code(&o, 0);
    let doc = document(&o);
    let clusters = doc["clusters"].as_array().unwrap();
    let by = |name: &str| {
        clusters
            .iter()
            .find(|c| c["context"] == json!(name))
            .unwrap()
    };
    for (name, against, section) in [
        ("eu-1", json!(["linux/amd64"]), 0),
        ("eu-2", json!(["linux/amd64"]), 0),
        ("us-1", json!(["linux/amd64", "linux/arm64"]), 1),
    ] {
        let c = by(name);
        valid_plan(&c["plan"]);
        assert_eq!(c["section"], json!(section), "{name}: {c:#}");
        let images = &c["plan"]["images"];
        assert_eq!(images[0]["platformCheck"], json!("nodes"), "{name}");
        assert_eq!(images[0]["checkedAgainst"], against, "{name}");
        assert_eq!(images[0]["digest"], json!(digest), "{name}");
    }
}
