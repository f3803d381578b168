//! The image check against a real registry on loopback (Debian's `docker-registry`, the CNCF
//! distribution registry): a missing tag and a missing platform refused before any write, a
//! registry that cannot be reached or cannot tell (a warning under `auto`, a refusal under
//! `require`), a private registry with and without the docker config's credentials,
//! `--pin-digest`, an image pinned by an admission controller that is the same image, and a
//! fleet that checks the image once. Only these tests turn the check on.
//!
//! The sandbox serves no node list, so the platforms are checked against the live image's, except
//! behind a [`Front`] that answers the node list as a real API server does; every live image is
//! on the test's registry (nothing leaves the machine).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::front::{Front, Refusal};
use common::registry::{self, Registry};
use common::*;
use sandbox_apiserver::{Sandbox, SandboxOptions};
use serde_json::{Value, json};

/// Sets the live image (the check off, as in every other test).
fn set_live(env: &Env, image: &str) {
    let o = env.run(&["web", "--image", image, "--yes"]);
    assert_code(&o, 0);
    assert_eq!(env.image(), image);
}

/// The plugin with the check on (`auto` unless the args say otherwise), no docker config.
fn checked(env: &Env, args: &[&str]) -> std::process::Output {
    registry::checked(env, None, args)
}

#[test]
fn a_tag_the_registry_does_not_have_is_refused_before_any_write() {
    let Some(reg) = Registry::start() else { return };
    let env = Env::new();
    reg.push_index("web", "1", &[("linux", "amd64"), ("linux", "arm64")]);
    set_live(&env, &reg.image("web:1"));
    let missing = reg.image("web:9");
    let o = checked(&env, &["web", "--image", &missing, "--yes"]);
    assert_code(&o, 3);
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "--image {missing}: {missing} does not exist: the registry has no tag 9 in web; nothing was written"
        )),
        "{err}"
    );
    assert_eq!(env.image(), reg.image("web:1"));
    assert_eq!(env.app_writes().len(), 1, "only the setup's write");
}

#[test]
fn an_image_that_exists_is_shown_with_its_digest_and_platforms() {
    let Some(reg) = Registry::start() else { return };
    let env = Env::new();
    reg.push_index("web", "1", &[("linux", "amd64"), ("linux", "arm64")]);
    let digest = reg.push_index("web", "2", &[("linux", "amd64"), ("linux", "arm64")]);
    set_live(&env, &reg.image("web:1"));
    let new = reg.image("web:2");
    let o = checked(&env, &["web", "--image", &new, "--yes"]);
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(
        out.contains(&format!(
            "image {new} → {digest} (linux/amd64, linux/arm64)"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "platforms checked against the live image {} (linux/amd64, linux/arm64)",
            reg.image("web:1")
        )),
        "{out}"
    );
    assert!(!stderr(&o).contains("Warning"), "{}", stderr(&o));
    assert_eq!(env.image(), new);
}

#[test]
fn an_image_without_a_platform_the_live_one_has_is_refused() {
    let Some(reg) = Registry::start() else { return };
    let env = Env::new();
    reg.push_index("web", "1", &[("linux", "amd64"), ("linux", "arm64")]);
    reg.push_single("web", "3", "linux", "amd64");
    set_live(&env, &reg.image("web:1"));
    let new = reg.image("web:3");
    let o = checked(&env, &["web", "--image", &new, "--yes"]);
    assert_code(&o, 3);
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "--image {new}: it has no image for linux/arm64, which the live image {} has",
            reg.image("web:1")
        )),
        "{err}"
    );
    assert!(err.contains("it is built for linux/amd64"), "{err}");
    assert!(err.contains("nothing was written"), "{err}");
    assert_eq!(env.image(), reg.image("web:1"));
}

#[test]
fn an_unreachable_registry_is_a_warning_under_auto_and_a_refusal_under_require() {
    let env = Env::new();
    let closed = registry::closed_addr();
    let image = format!("{closed}/web:2");
    let o = checked(
        &env,
        &[
            "web",
            "--image",
            &image,
            "--image-check",
            "require",
            "--yes",
        ],
    );
    assert_code(&o, 3);
    let err = stderr(&o);
    assert!(
        err.contains(&format!("--image {image}: the image could not be checked (--image-check require): cannot reach the registry {closed}: connection refused; nothing was written")),
        "{err}"
    );
    assert_eq!(env.image(), fleet::OLD_IMAGE);

    let o = checked(&env, &["web", "--image", &image, "--yes"]);
    assert_code(&o, 0);
    let err = stderr(&o);
    assert!(
        err.contains(&format!("Warning: the image {image} was not checked: cannot reach the registry {closed}: connection refused; going on (--image-check auto)")),
        "{err}"
    );
    assert_eq!(err.matches("was not checked").count(), 1, "one line: {err}");
    assert_eq!(env.image(), image);
}

#[test]
fn a_private_registry_cannot_tell_without_credentials_and_passes_with_the_docker_config() {
    let Some(reg) = Registry::start_private() else {
        return;
    };
    let env = Env::new();
    reg.push_index("web", "1", &[("linux", "amd64")]);
    let digest = reg.push_index("web", "2", &[("linux", "amd64")]);
    set_live(&env, &reg.image("web:1"));
    let image = reg.image("web:2");
    // Without credentials: a warning under auto, a refusal under require.
    let o = checked(&env, &["web", "--image", &image, "--dry-run"]);
    assert_code(&o, 0);
    let err = stderr(&o);
    assert!(
        err.contains(&format!("Warning: the image {image} was not checked: the registry {} refuses to show web (401 Unauthorized) without credentials (none in the docker config); going on (--image-check auto)", reg.addr)),
        "{err}"
    );
    let o = checked(
        &env,
        &[
            "web",
            "--image",
            &image,
            "--image-check",
            "require",
            "--yes",
        ],
    );
    assert_code(&o, 3);
    assert!(
        stderr(&o).contains(&format!("--image {image}: the image could not be checked (--image-check require): the registry {} refuses to show web (401 Unauthorized) without credentials", reg.addr)),
        "{}",
        stderr(&o)
    );
    assert_eq!(env.image(), reg.image("web:1"));

    // With the docker config's credentials (DOCKER_CONFIG/config.json, `auths`).
    let docker = env.dir.path().join("docker");
    std::fs::create_dir_all(&docker).unwrap();
    use base64::Engine as _;
    let auth = base64::engine::general_purpose::STANDARD.encode(format!(
        "{}:{}",
        registry::USER,
        registry::PASSWORD
    ));
    std::fs::write(
        docker.join("config.json"),
        format!(r#"{{"auths": {{"{}": {{"auth": "{auth}"}}}}}}"#, reg.addr),
    )
    .unwrap();
    let mut c = env.cmd();
    c.env_remove(IMAGE_CHECK_VAR)
        .env("DOCKER_CONFIG", &docker)
        .args([
            "web",
            "--image",
            &image,
            "--image-check",
            "require",
            "--yes",
        ]);
    let o = c.output().unwrap();
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(
        out.contains(&format!("image {image} → {digest} (linux/amd64)")),
        "{out}"
    );
    assert!(
        out.contains("platforms checked against the live image"),
        "{out}"
    );
    assert!(!stderr(&o).contains("Warning"), "{}", stderr(&o));
    assert!(!stderr(&o).contains(registry::PASSWORD), "no secret shown");
    assert_eq!(env.image(), image);
}

#[test]
fn pin_digest_writes_the_tag_with_its_digest() {
    let Some(reg) = Registry::start() else { return };
    let env = Env::new();
    reg.push_index("web", "1", &[("linux", "amd64")]);
    let digest = reg.push_index("web", "2", &[("linux", "amd64"), ("linux", "arm64")]);
    set_live(&env, &reg.image("web:1"));
    let o = checked(
        &env,
        &[
            "web",
            "--image",
            &reg.image("web:2"),
            "--pin-digest",
            "--yes",
        ],
    );
    assert_code(&o, 0);
    assert_eq!(env.image(), format!("{}@{digest}", reg.image("web:2")));
    // Without the check there is no digest to pin.
    let o = env.run(&["web", "--image", &reg.image("web:2"), "--pin-digest"]);
    assert_code(&o, 3);
    assert!(stderr(&o).contains("--pin-digest writes the digest the image check finds"));
}

#[test]
fn a_live_image_pinned_to_the_tags_digest_is_no_change() {
    let Some(reg) = Registry::start() else { return };
    let env = Env::new();
    let digest = reg.push_index("web", "2", &[("linux", "amd64")]);
    let tag = reg.image("web:2");
    // As an admission controller that pins tags (Kyverno's mutateDigest) would have left it.
    set_live(&env, &format!("{tag}@{digest}"));
    let o = checked(&env, &["web", "--image", &tag, "--yes"]);
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(out.contains("No changes."), "{out}");
    assert!(
        out.contains("is this image (the tag's digest): no change"),
        "{out}"
    );
    assert_eq!(env.image(), format!("{tag}@{digest}"));
    // Another digest is a change.
    let moved = reg.push_index("web", "2", &[("linux", "amd64"), ("linux", "arm64")]);
    assert_ne!(moved, digest);
    let o = checked(&env, &["web", "--image", &tag, "--yes"]);
    assert_code(&o, 0);
    assert_eq!(env.image(), tag);
}

#[test]
fn a_fleet_checks_the_image_once() {
    let Some(reg) = Registry::start() else { return };
    let fleet = fleet::Fleet::new(&["eu-1", "eu-2", "us-1"]);
    reg.push_index("web", "1", &[("linux", "amd64")]);
    let digest = reg.push_index("web", "2", &[("linux", "amd64")]);
    let image = reg.image("web:2");
    // Live images on this registry too: the sandboxes list no nodes, so each cluster compares
    // with its live image (resolved per cluster; the new one once for all).
    for name in ["eu-1", "eu-2", "us-1"] {
        fleet.set_image(name, &reg.image("web:1"));
    }
    let mut c = fleet.cmd();
    c.env_remove(IMAGE_CHECK_VAR)
        .env("DOCKER_CONFIG", fleet.dir.path().join("none"))
        .args([
            "web",
            "--contexts",
            "eu-1,eu-2,us-1",
            "--image",
            &image,
            "--yes",
        ]);
    let o = c.output().unwrap();
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(
        out.contains(&format!("image {image} → {digest} (linux/amd64)")),
        "{out}"
    );
    for name in ["eu-1", "eu-2", "us-1"] {
        assert_eq!(fleet.image(name), image);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while reg.gets("/v2/web/manifests/2") == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the registry logged the check"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(
        reg.gets("/v2/web/manifests/2"),
        1,
        "one check for three clusters"
    );
}

/// `--plan-out` then `apply FILE`, each with the check on; the tag moves in between.
fn plan_then_move_then_apply(pin: bool) -> (Env, Registry, String, std::process::Output) {
    let reg = Registry::start().expect("checked by the caller");
    let env = Env::new();
    reg.push_index("web", "1", &[("linux", "amd64")]);
    let reviewed = reg.push_index("web", "2", &[("linux", "amd64")]);
    set_live(&env, &reg.image("web:1"));
    let plan = env.dir.path().join("plan.json");
    let plan = plan.to_str().unwrap();
    let image = reg.image("web:2");
    let mut args = vec!["web", "--image", &image, "--plan-out", plan];
    if pin {
        args.push("--pin-digest");
    }
    let o = checked(&env, &args);
    assert_code(&o, 0);
    let saved = std::fs::read_to_string(plan).unwrap();
    assert!(
        saved.contains(&reviewed),
        "the file records the digest: {saved}"
    );
    let moved = reg.push_index("web", "2", &[("linux", "amd64"), ("linux", "arm64")]);
    assert_ne!(moved, reviewed);
    let o = checked(&env, &["apply", plan, "--yes"]);
    (env, reg, reviewed, o)
}

#[test]
fn an_unpinned_saved_plan_whose_tag_moved_is_refused() {
    if registry::binary().is_none() {
        eprintln!("SKIPPED: docker-registry is not installed");
        return;
    }
    let (env, reg, reviewed, o) = plan_then_move_then_apply(false);
    assert_code(&o, 5);
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "was made when the image {} was {reviewed}, and the tag now names sha256:",
            reg.image("web:2")
        )),
        "{err}"
    );
    assert!(
        err.contains("what was reviewed is no longer what the tag means, so nothing was written"),
        "{err}"
    );
    assert_eq!(env.image(), reg.image("web:1"));
}

#[test]
fn a_pinned_saved_plan_is_applied_after_its_tag_moved() {
    if registry::binary().is_none() {
        eprintln!("SKIPPED: docker-registry is not installed");
        return;
    }
    let (env, reg, reviewed, o) = plan_then_move_then_apply(true);
    assert_code(&o, 0);
    assert_eq!(env.image(), format!("{}@{reviewed}", reg.image("web:2")));
}

/// The demo application behind a [`Front`] that answers `GET /api/v1/nodes` with `code` and
/// `body`, through a kubeconfig of context `front`.
pub(crate) fn behind_front(code: u16, body: Value) -> (Env, Front) {
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
        code,
        status: body,
        count: 100,
    });
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let config = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "front", "cluster": {"server": format!("http://{}", front.addr)}}],
        "users": [{"name": "admin", "user": {"token": sb.token(sandbox_apiserver::Identity::Admin)}}],
        "contexts": [{"name": "front", "context": {"cluster": "front", "user": "admin", "namespace": NS}}],
        "current-context": "front",
    });
    std::fs::write(&kubeconfig, serde_json::to_string(&config).unwrap()).unwrap();
    (
        Env {
            sb,
            dir,
            kubeconfig,
        },
        front,
    )
}

/// Nodes as a `PartialObjectMetadataList`: names and the os/arch labels.
pub(crate) fn nodes(platforms: &[(&str, &str)]) -> Value {
    let items: Vec<Value> = platforms
        .iter()
        .enumerate()
        .map(|(i, (os, arch))| {
            json!({"metadata": {"name": format!("node-{i}"), "labels": {
                "kubernetes.io/os": os, "kubernetes.io/arch": arch, "kubernetes.io/hostname": format!("node-{i}")
            }}})
        })
        .collect();
    json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": {}, "items": items})
}

#[test]
fn an_image_without_the_platform_of_nodes_the_pods_can_land_on_is_refused() {
    let Some(reg) = Registry::start() else { return };
    let (env, _front) = behind_front(200, nodes(&[("linux", "amd64"), ("linux", "arm64")]));
    reg.push_single("web", "3", "linux", "amd64");
    let new = reg.image("web:3");
    let o = checked(&env, &["web", "--image", &new, "--yes"]);
    assert_code(&o, 3);
    let err = stderr(&o);
    assert!(
        err.contains(&format!("--image {new}: it has no image for linux/arm64, the platform of nodes the pods of web can land on in context front (it is built for linux/amd64)")),
        "{err}"
    );
    assert!(err.contains("nothing was written"), "{err}");
    assert!(env.app_writes().is_empty());
}

#[test]
fn a_template_pinned_to_one_architecture_needs_only_that_platform() {
    let Some(reg) = Registry::start() else { return };
    let (env, _front) = behind_front(200, nodes(&[("linux", "amd64"), ("linux", "arm64")]));
    env.sb
        .update(
            &format!("/apis/apps/v1/namespaces/{NS}/deployments/{APP}"),
            |d: &mut Value| {
                d["spec"]["template"]["spec"]["nodeSelector"] =
                    json!({"kubernetes.io/arch": "amd64"});
            },
        )
        .unwrap();
    let digest = reg.push_single("web", "3", "linux", "amd64");
    let new = reg.image("web:3");
    let o = checked(&env, &["web", "--image", &new, "--yes"]);
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(
        out.contains(&format!("image {new} → {digest} (linux/amd64)")),
        "{out}"
    );
    assert!(
        out.contains("platforms checked against the nodes the pods can land on: linux/amd64"),
        "{out}"
    );
    assert_eq!(env.image(), new);
}

#[test]
fn where_nodes_may_not_be_listed_the_live_image_decides_and_the_plan_says_so() {
    let Some(reg) = Registry::start() else { return };
    let forbidden = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": "nodes is forbidden: User \"admin\" cannot list resource \"nodes\" in API group \"\" at the cluster scope",
        "reason": "Forbidden", "code": 403});
    let (env, _front) = behind_front(403, forbidden);
    reg.push_index("web", "1", &[("linux", "amd64")]);
    reg.push_single("web", "2", "linux", "amd64");
    set_live(&env, &reg.image("web:1"));
    let o = checked(&env, &["web", "--image", &reg.image("web:2"), "--yes"]);
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(
        out.contains(&format!(
            "platforms checked against the live image {} (linux/amd64): nodes may not be listed (403)",
            reg.image("web:1")
        )),
        "{out}"
    );
}

#[test]
fn a_credential_helper_gives_the_private_registrys_credentials() {
    let Some(reg) = Registry::start_private() else {
        return;
    };
    let env = Env::new();
    reg.push_index("web", "1", &[("linux", "amd64")]);
    let digest = reg.push_index("web", "2", &[("linux", "amd64")]);
    set_live(&env, &reg.image("web:1"));
    // `docker-credential-apptest get`: the registry's address on stdin, JSON on stdout.
    let bin = env.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let asked = env.dir.path().join("asked");
    let helper = bin.join("docker-credential-apptest");
    std::fs::write(
        &helper,
        format!(
            "#!/bin/sh\n[ \"$1\" = get ] || exit 1\nread server\nprintf '%s' \"$server\" > '{}'\nprintf '{{\"ServerURL\":\"%s\",\"Username\":\"{}\",\"Secret\":\"{}\"}}' \"$server\"\n",
            asked.display(),
            registry::USER,
            registry::PASSWORD
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let docker = env.dir.path().join("docker");
    std::fs::create_dir_all(&docker).unwrap();
    std::fs::write(docker.join("config.json"), r#"{"credsStore": "apptest"}"#).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let image = reg.image("web:2");
    let mut c = env.cmd();
    c.env_remove(IMAGE_CHECK_VAR)
        .env("DOCKER_CONFIG", &docker)
        .env("PATH", path)
        .args([
            "web",
            "--image",
            &image,
            "--image-check",
            "require",
            "--yes",
        ]);
    let o = c.output().unwrap();
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(
        out.contains(&format!("image {image} → {digest} (linux/amd64)")),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(&asked).unwrap(),
        reg.addr.to_string()
    );
    assert!(!stderr(&o).contains(registry::PASSWORD));
    assert_eq!(env.image(), image);
}

#[test]
fn the_registry_is_reached_through_the_proxy_the_environment_names() {
    let Some(reg) = Registry::start() else { return };
    let env = Env::new();
    reg.push_index("web", "1", &[("linux", "amd64")]);
    let digest = reg.push_index("web", "2", &[("linux", "amd64")]);
    // A name only the proxy can reach (it sends everything to the registry), spoken to in plain
    // HTTP as --insecure-registry allows.
    let host = format!("registry.test:{}", reg.addr.port());
    let proxy = test_proxies::TestProxy::start(
        test_proxies::Kind::Http,
        test_proxies::Options {
            upstream: Some(reg.addr),
            ..test_proxies::Options::default()
        },
    )
    .unwrap();
    set_live(&env, &format!("{host}/web:1"));
    let image = format!("{host}/web:2");
    let mut c = env.cmd();
    c.env_remove(IMAGE_CHECK_VAR)
        .env("DOCKER_CONFIG", env.dir.path().join("none"))
        .env("HTTP_PROXY", proxy.url())
        .args([
            "web",
            "--image",
            &image,
            "--insecure-registry",
            &host,
            "--dry-run",
        ]);
    let o = c.output().unwrap();
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(
        out.contains(&format!("image {image} → {digest} (linux/amd64)")),
        "{out}\n{}",
        stderr(&o)
    );
    let stats = proxy.stats();
    assert!(
        stats.targets.iter().all(|t| *t == host) && !stats.targets.is_empty(),
        "{:?}",
        stats.targets
    );
}

/// An admission controller that pins tags (Kyverno's `mutateDigest`) rewrote the image written:
/// undo takes it as the image the record wrote, and writes back the exact string it recorded.
#[test]
fn an_undo_over_an_image_pinned_at_admission_is_not_drift() {
    let env = Env::new();
    let o = env.run(&["web", "--image", "registry.example.com/web:2.0", "--yes"]);
    assert_code(&o, 0);
    let pinned = format!("registry.example.com/web:2.0@sha256:{}", "ab".repeat(32));
    env.sb
        .update(
            &format!("/apis/apps/v1/namespaces/{NS}/deployments/{APP}"),
            |d: &mut Value| {
                d["spec"]["template"]["spec"]["containers"][0]["image"] = json!(pinned);
            },
        )
        .unwrap();
    let o = env.run(&["web", "--undo", "--yes"]);
    assert_code(&o, 0);
    assert_eq!(env.image(), fleet::OLD_IMAGE);
    // Another image is still drift.
    let o = env.run(&["web", "--image", "registry.example.com/web:3.0", "--yes"]);
    assert_code(&o, 0);
    env.sb
        .update(
            &format!("/apis/apps/v1/namespaces/{NS}/deployments/{APP}"),
            |d: &mut Value| {
                d["spec"]["template"]["spec"]["containers"][0]["image"] = json!(format!(
                    "registry.example.com/web:4.0@sha256:{}",
                    "ab".repeat(32)
                ));
            },
        )
        .unwrap();
    let o = env.run(&["web", "--undo", "--yes"]);
    assert_code(&o, 5);
}
