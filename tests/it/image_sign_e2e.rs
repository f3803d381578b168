//! `--image-key` against a real registry on loopback (Debian's `docker-registry`,
//! distribution 2.8, which has no referrers API): cosign signatures in the tag layout
//! (`sha256-<hex>.sig`) and in v3's bundle layout (a Sigstore bundle through the referrers tag
//! schema), an image signed only by another key, an unsigned one, a signature copied from
//! another image, a registry that cannot be reached, a saved plan verified again at
//! `apply FILE`, a fleet that verifies once, and `--verify-key` given a public key.
//!
//! The cosign signatures are recorded fixtures (tests/data/cosign): cosign cannot be installed
//! here, so its make-fixtures.py writes what cosign v3.1.2 writes, as read in its source. One
//! test signs with an independent implementation instead, Sigstore's JavaScript client
//! (tests/it/signers, installed by `.ci/run`). The bundle found through the referrers API
//! itself is tested against a stand-in registry in `appupdate_kube::registry`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use crate::common;

use common::registry::Registry;
use common::*;
use serde_json::Value;

fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/cosign")
}

fn key(name: &str) -> String {
    fixtures_dir().join(name).display().to_string()
}

/// The recorded fixtures.
struct Fixtures {
    doc: Value,
}

impl Fixtures {
    fn load() -> Fixtures {
        let text = std::fs::read_to_string(fixtures_dir().join("fixtures.json")).unwrap();
        Fixtures {
            doc: serde_json::from_str(&text).unwrap(),
        }
    }

    /// `tagLayout` or `bundleLayout`: the image's tag and digest.
    fn image(&self, layout: &str) -> (String, String) {
        let i = &self.doc["images"][layout];
        (
            i["tag"].as_str().unwrap().to_owned(),
            i["digest"].as_str().unwrap().to_owned(),
        )
    }

    /// A recorded manifest's exact text, by its digest.
    fn manifest_text(&self, digest: &str) -> (String, String) {
        let m = self.doc["manifests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["digest"] == digest)
            .unwrap();
        (
            m["mediaType"].as_str().unwrap().to_owned(),
            m["text"].as_str().unwrap().to_owned(),
        )
    }

    fn signature(&self, layout: &str, field: &str) -> String {
        self.doc["signatures"][layout][field]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// Pushes every blob, then every manifest (images, then their signatures) byte for byte.
    fn push(&self, reg: &Registry) {
        let repo = self.doc["repository"].as_str().unwrap();
        for (digest, text) in self.doc["blobs"].as_object().unwrap() {
            assert_eq!(
                reg.push_blob(repo, text.as_str().unwrap().as_bytes()),
                *digest
            );
        }
        for m in self.doc["manifests"].as_array().unwrap() {
            push_text(
                reg,
                m["reference"].as_str().unwrap(),
                m["mediaType"].as_str().unwrap(),
                m["text"].as_str().unwrap(),
            );
        }
    }
}

/// PUTs a manifest's exact text under `reference` in `web`.
fn push_text(reg: &Registry, reference: &str, media: &str, text: &str) {
    let put = reg
        .request(
            "PUT",
            &format!("/v2/web/manifests/{reference}"),
            &[("Content-Type", media)],
            text.as_bytes(),
        )
        .unwrap();
    assert_eq!(put.status, 201, "manifest upload of web:{reference}");
}

/// Sets the live image (the check off) to a two-platform image of the registry.
fn live(env: &Env, reg: &Registry) {
    reg.push_index("web", "1", &[("linux", "amd64"), ("linux", "arm64")]);
    let o = env.run(&["web", "--image", &reg.image("web:1"), "--yes"]);
    assert_code(&o, 0);
}

/// The plugin with the check on (`auto` unless the args say otherwise), no docker config.
fn checked(env: &Env, args: &[&str]) -> std::process::Output {
    registry::checked(env, None, args)
}

fn started() -> Option<(Registry, Env, Fixtures)> {
    let reg = Registry::start()?;
    let env = Env::new();
    live(&env, &reg);
    let fx = Fixtures::load();
    fx.push(&reg);
    Some((reg, env, fx))
}

#[test]
fn a_tag_layout_signature_by_the_key_lets_the_image_be_written() {
    let Some((reg, env, fx)) = started() else {
        return;
    };
    let (tag, digest) = fx.image("tagLayout");
    let image = reg.image(&format!("web:{tag}"));
    let pub_key = key("cosign.pub");
    let o = checked(
        &env,
        &["web", "--image", &image, "--image-key", &pub_key, "--yes"],
    );
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(
        out.contains(&format!(
            "image {image} → {digest} (linux/amd64, linux/arm64)"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "signature: cosign, by --image-key {pub_key} (its sha256-….sig tag; no transparency log checked)"
        )),
        "{out}"
    );
    assert_eq!(env.image(), image);
}

#[test]
fn a_bundle_found_through_the_referrers_tag_schema_lets_the_pinned_image_be_written() {
    let Some((reg, env, fx)) = started() else {
        return;
    };
    let (tag, digest) = fx.image("bundleLayout");
    let image = reg.image(&format!("web:{tag}"));
    let pub_key = key("cosign.pub");
    let o = checked(
        &env,
        &[
            "web",
            "--image",
            &image,
            "--image-key",
            &pub_key,
            "--pin-digest",
            "--yes",
        ],
    );
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(
        out.contains(&format!(
            "signature: cosign, by --image-key {pub_key} (a Sigstore bundle found through the referrers tag sha256-…; no transparency log checked)"
        )),
        "{out}"
    );
    assert_eq!(env.image(), format!("{image}@{digest}"));
    // Distribution 2.8 has no referrers API: asked, then its tag schema's index.
    assert_eq!(reg.gets(&format!("/v2/web/referrers/{digest}")), 1);
    assert_eq!(
        reg.gets(&format!(
            "/v2/web/manifests/{}",
            fx.signature("bundleLayout", "tag")
        )),
        1
    );
}

#[test]
fn an_image_signed_only_by_another_key_is_refused() {
    let Some((reg, env, fx)) = started() else {
        return;
    };
    let other = key("other.pub");
    for layout in ["tagLayout", "bundleLayout"] {
        let (tag, digest) = fx.image(layout);
        let image = reg.image(&format!("web:{tag}"));
        let o = checked(
            &env,
            &["web", "--image", &image, "--image-key", &other, "--yes"],
        );
        assert_code(&o, 3);
        let err = stderr(&o);
        assert!(
            err.contains(&format!(
                "error: --image {image}: it is signed only by other keys: 1 cosign signature for {digest}, and none verifies with --image-key {other}; nothing was written"
            )),
            "{layout}: {err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    }
    assert_eq!(env.image(), reg.image("web:1"));
    assert_eq!(env.app_writes().len(), 1, "only the setup's write");
}

#[test]
fn an_unsigned_image_is_refused_even_under_auto() {
    let Some(reg) = Registry::start() else { return };
    let env = Env::new();
    live(&env, &reg);
    let digest = reg.push_index("web", "2", &[("linux", "amd64"), ("linux", "arm64")]);
    let image = reg.image("web:2");
    let pub_key = key("cosign.pub");
    let o = checked(
        &env,
        &["web", "--image", &image, "--image-key", &pub_key, "--yes"],
    );
    assert_code(&o, 3);
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "error: --image {image}: it is not signed: no cosign signature for {digest} (neither a sha256-….sig tag nor a Sigstore bundle among its referrers), and --image-key {pub_key} requires one; nothing was written"
        )),
        "{err}"
    );
    assert!(!err.contains("Warning"), "a refusal, not a warning: {err}");
    assert_eq!(env.image(), reg.image("web:1"));
}

/// Someone who may push to the repository copies a signed image's signature onto another
/// image: the key did sign it, but for the first image's digest.
#[test]
fn a_signature_copied_from_another_image_is_refused() {
    let Some((reg, env, fx)) = started() else {
        return;
    };
    let pub_key = key("cosign.pub");
    for (layout, tag, field) in [
        ("tagLayout", "3", "manifest"),
        ("bundleLayout", "4", "index"),
    ] {
        let (_, signed) = fx.image(layout);
        let digest = reg.push_index("web", tag, &[("linux", "amd64"), ("linux", "arm64")]);
        let hex = digest.trim_start_matches("sha256:");
        let copied_to = if layout == "tagLayout" {
            format!("sha256-{hex}.sig")
        } else {
            format!("sha256-{hex}")
        };
        let (media, text) = fx.manifest_text(&fx.signature(layout, field));
        push_text(&reg, &copied_to, &media, &text);
        let image = reg.image(&format!("web:{tag}"));
        let o = checked(
            &env,
            &["web", "--image", &image, "--image-key", &pub_key, "--yes"],
        );
        assert_code(&o, 3);
        let err = stderr(&o);
        assert!(
            err.contains(&format!(
                "error: --image {image}: its cosign signature by --image-key {pub_key} names another digest ({signed}), not {digest}, the one that would be written; nothing was written"
            )),
            "{layout}: {err}"
        );
    }
    assert_eq!(env.image(), reg.image("web:1"));
}

#[test]
fn a_registry_that_cannot_be_reached_is_a_refusal_with_a_key_under_auto() {
    let env = Env::new();
    let closed = registry::closed_addr();
    let image = format!("{closed}/web:2");
    let pub_key = key("cosign.pub");
    let o = checked(
        &env,
        &["web", "--image", &image, "--image-key", &pub_key, "--yes"],
    );
    assert_code(&o, 3);
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "error: --image {image}: the image could not be checked (--image-key {pub_key} needs its signature): cannot reach the registry {closed}: connection refused; nothing was written"
        )),
        "{err}"
    );
    assert!(!err.contains("going on"), "{err}");
    assert_eq!(env.image(), fleet::OLD_IMAGE);
}

#[test]
fn an_image_key_is_refused_with_the_check_off_and_when_it_is_no_public_key() {
    let env = Env::new();
    let pub_key = key("cosign.pub");
    let o = checked(
        &env,
        &[
            "web",
            "--image",
            "registry.example.com/web:2",
            "--image-key",
            &pub_key,
            "--image-check",
            "off",
        ],
    );
    assert_code(&o, 3);
    assert!(
        stderr(&o).contains(
            "error: --image-key requires a signature the image check verifies in the registry: drop --image-check off (or APPUPDATE_IMAGE_CHECK=off)"
        ),
        "{}",
        stderr(&o)
    );
    let secret = env.dir.path().join("plan.key");
    std::fs::write(&secret, "0123456789abcdef0123456789abcdef\n").unwrap();
    let secret = secret.display().to_string();
    let o = checked(
        &env,
        &[
            "web",
            "--image",
            "registry.example.com/web:2",
            "--image-key",
            &secret,
        ],
    );
    assert_code(&o, 3);
    assert!(
        stderr(&o).contains(&format!(
            "error: --image-key {secret}: it is not a PEM public key (no -----BEGIN PUBLIC KEY----- line); --image-key takes a cosign public key (PEM)"
        )),
        "{}",
        stderr(&o)
    );
    let o = checked(&env, &["web", "--max", "3", "--image-key", &pub_key]);
    assert_code(&o, 3);
    assert!(
        stderr(&o)
            .contains("--image-key requires a signature of the image --image writes; add --image"),
        "{}",
        stderr(&o)
    );
    assert!(env.app_writes().is_empty());
}

/// The saved plan's `--verify-key` takes the shared secret the plan was signed with: a cosign
/// public key given there is refused, pointing to `--image-key`.
#[test]
fn verify_key_refuses_a_pem_public_key() {
    let env = Env::new();
    let plan = env.dir.path().join("plan.json");
    let plan = plan.to_str().unwrap();
    let o = env.run(&[
        "web",
        "--image",
        "registry.example.com/web:2",
        "--plan-out",
        plan,
    ]);
    assert_code(&o, 0);
    let pub_key = key("cosign.pub");
    let o = env.run(&["apply", plan, "--verify-key", &pub_key, "--yes"]);
    assert_code(&o, 3);
    let err = stderr(&o);
    assert_eq!(
        err.trim_end(),
        format!(
            "error: --verify-key {pub_key}: it is a PEM public key, which anyone may read: this key is a shared secret (e.g. from openssl rand -hex 32); a cosign public key that images must be signed with goes to --image-key"
        ),
    );
    assert_eq!(env.image(), fleet::OLD_IMAGE);
}

/// A plan saved with `--image-key` records the key that verified the signature; `apply FILE
/// --image-key` verifies it again (a pinned plan by the digest it recorded), and another key
/// refuses it.
#[test]
fn a_saved_plan_is_verified_again_at_apply_with_a_key() {
    let Some((reg, env, fx)) = started() else {
        return;
    };
    let (tag, digest) = fx.image("tagLayout");
    let image = reg.image(&format!("web:{tag}"));
    let pub_key = key("cosign.pub");
    let plan = env.dir.path().join("plan.json");
    let plan = plan.to_str().unwrap();
    let o = checked(
        &env,
        &[
            "web",
            "--image",
            &image,
            "--image-key",
            &pub_key,
            "--pin-digest",
            "--plan-out",
            plan,
        ],
    );
    assert_code(&o, 0);
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(plan).unwrap()).unwrap();
    let recorded = &saved["content"]["clusters"][0]["image"];
    assert_eq!(recorded["digest"], digest.as_str());
    assert!(
        recorded["signedBy"]
            .as_str()
            .unwrap()
            .starts_with("sha256:"),
        "{recorded}"
    );
    // Another key: refused, nothing written.
    let other = key("other.pub");
    let o = checked(&env, &["apply", plan, "--image-key", &other, "--yes"]);
    assert_code(&o, 3);
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "{plan}: the image {image}: it is signed only by other keys: 1 cosign signature for {digest}, and none verifies with --image-key {other}; nothing was written"
        )),
        "{err}"
    );
    assert_eq!(env.image(), reg.image("web:1"));
    // The key that signed it: applied, pinned.
    let o = checked(&env, &["apply", plan, "--image-key", &pub_key, "--yes"]);
    assert_code(&o, 0);
    assert_eq!(env.image(), format!("{image}@{digest}"));
}

#[test]
fn a_fleet_verifies_the_signature_once() {
    let Some(reg) = Registry::start() else { return };
    let fx = Fixtures::load();
    fx.push(&reg);
    let fleet = fleet::Fleet::new(&["eu-1", "eu-2", "us-1"]);
    reg.push_index("web", "1", &[("linux", "amd64"), ("linux", "arm64")]);
    for name in ["eu-1", "eu-2", "us-1"] {
        fleet.set_image(name, &reg.image("web:1"));
    }
    let (tag, _) = fx.image("tagLayout");
    let image = reg.image(&format!("web:{tag}"));
    let mut c = fleet.cmd();
    c.env_remove(IMAGE_CHECK_VAR)
        .env("DOCKER_CONFIG", fleet.dir.path().join("none"))
        .args([
            "web",
            "--contexts",
            "eu-1,eu-2,us-1",
            "--image",
            &image,
            "--image-key",
            &key("cosign.pub"),
            "--yes",
        ]);
    let o = c.output().unwrap();
    assert_code(&o, 0);
    for name in ["eu-1", "eu-2", "us-1"] {
        assert_eq!(fleet.image(name), image);
    }
    let sig = format!("/v2/web/manifests/{}", fx.signature("tagLayout", "tag"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while reg.gets(&sig) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the registry logged the signature request"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(reg.gets(&sig), 1, "one verification for three clusters");
}

/// Where `.ci/run` installs the independent signer's packages (tests/it/signers).
fn signers() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/test-tools/signers");
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !node || !dir.join("node_modules/@sigstore/oci").is_dir() {
        eprintln!(
            "SKIPPED: the independent signer is not installed (node, and npm ci in target/test-tools/signers: see .ci/run)"
        );
        return None;
    }
    Some(dir)
}

/// An independent signer: Sigstore's JavaScript client signs the image as cosign v3 does (a
/// bundle with a DSSE envelope over an in-toto statement) with a key of its own and attaches
/// the bundle as a referrer, through the tag schema on this registry.
#[test]
fn a_bundle_made_by_sigstore_js_is_verified() {
    let Some(dir) = signers() else { return };
    let Some(reg) = Registry::start() else { return };
    let env = Env::new();
    live(&env, &reg);
    let digest = reg.push_index("web", "5", &[("linux", "amd64"), ("linux", "arm64")]);
    let pub_key = env.dir.path().join("sigstore-js.pub");
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/signers/sigstore-js-sign.mjs");
    let signed = std::process::Command::new("node")
        .arg(&script)
        .arg(format!("{}/web", reg.addr))
        .arg(&digest)
        .arg(&pub_key)
        .env("NODE_PATH", dir.join("node_modules"))
        .output()
        .unwrap();
    assert!(
        signed.status.success(),
        "sigstore-js signs: {}",
        String::from_utf8_lossy(&signed.stderr)
    );
    let image = reg.image("web:5");
    let pub_key = pub_key.display().to_string();
    let o = checked(
        &env,
        &["web", "--image", &image, "--image-key", &pub_key, "--yes"],
    );
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(
        out.contains("(a Sigstore bundle found through the referrers tag sha256-…; no transparency log checked)"),
        "{out}\n{}",
        stderr(&o)
    );
    assert_eq!(env.image(), image);
    // The fixtures' key did not sign it.
    let o = checked(
        &env,
        &[
            "web",
            "--image",
            &reg.image("web:5"),
            "--image-key",
            &key("cosign.pub"),
            "--dry-run",
        ],
    );
    assert_code(&o, 3);
    assert!(
        stderr(&o).contains("it is signed only by other keys"),
        "{}",
        stderr(&o)
    );
}
