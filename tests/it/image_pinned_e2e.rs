//! A saved plan re-checked after an admission controller pinned its image: the plan wrote
//! `name:tag`, the live Deployment reads `name:tag@sha256:D` (Kyverno's `mutateDigest`), and D
//! is the digest the plan recorded. `apply FILE` takes that for the plan's own value — applied
//! already, or nothing left to write — never for drift; another digest is drift.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::registry::Registry;
use common::*;
use serde_json::{Value, json};

/// The plugin with the check on, no docker config.
fn checked(env: &Env, args: &[&str]) -> std::process::Output {
    registry::checked(env, None, args)
}

/// What an admission controller that pins tags does to the Deployment after a write.
fn pin_at_admission(env: &Env, image: &str) {
    env.sb
        .update(
            &format!("/apis/apps/v1/namespaces/{NS}/deployments/{APP}"),
            |d: &mut Value| {
                d["spec"]["template"]["spec"]["containers"][0]["image"] = json!(image);
            },
        )
        .unwrap();
    assert_eq!(env.image(), image);
}

/// The registry with `web:1` live and a plan for `web:2` saved with the check on: the env,
/// the registry, the plan's path and the digest it recorded.
fn saved_plan() -> Option<(Env, Registry, String, String)> {
    let reg = Registry::start()?;
    let env = Env::new();
    reg.push_index("web", "1", &[("linux", "amd64")]);
    let digest = reg.push_index("web", "2", &[("linux", "amd64")]);
    let o = env.run(&["web", "--image", &reg.image("web:1"), "--yes"]);
    assert_code(&o, 0);
    let plan = env.dir.path().join("plan.json").display().to_string();
    let o = checked(
        &env,
        &["web", "--image", &reg.image("web:2"), "--plan-out", &plan],
    );
    assert_code(&o, 0);
    let saved = std::fs::read_to_string(&plan).unwrap();
    assert!(saved.contains(&digest), "the plan records the digest");
    Some((env, reg, plan, digest))
}

#[test]
fn a_saved_plan_applied_then_pinned_at_admission_is_applied_already_not_changed() {
    let Some((env, reg, plan, digest)) = saved_plan() else {
        return;
    };
    let tag = reg.image("web:2");
    let o = checked(&env, &["apply", &plan, "--yes"]);
    assert_code(&o, 0);
    assert_eq!(env.image(), tag);
    pin_at_admission(&env, &format!("{tag}@{digest}"));
    let writes = env.app_writes().len();

    // With the check on (the tag still names D) and off (the recorded digest alone decides).
    for check in ["auto", "off"] {
        let o = checked(&env, &["apply", &plan, "--yes", "--image-check", check]);
        assert_code(&o, 5);
        let err = stderr(&o);
        assert!(
            err.contains("was applied already: the objects of web in namespace shop"),
            "--image-check {check}: {err}"
        );
        assert!(
            !err.contains("then changed"),
            "--image-check {check}: {err}"
        );
        assert_eq!(env.image(), format!("{tag}@{digest}"));
        assert_eq!(env.app_writes().len(), writes, "nothing written");
    }

    // Pinned to another digest, the image is not the one the plan wrote: changed since.
    let other = format!("sha256:{}", "9a".repeat(32));
    pin_at_admission(&env, &format!("{tag}@{other}"));
    let o = checked(&env, &["apply", &plan, "--yes", "--image-check", "off"]);
    assert_code(&o, 5);
    assert!(
        stderr(&o).contains("was applied already, then changed: deployment.apps/web"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_saved_plan_whose_tag_someone_else_wrote_and_admission_pinned_has_nothing_left_to_write() {
    let Some((env, reg, plan, digest)) = saved_plan() else {
        return;
    };
    let tag = reg.image("web:2");
    // Another run wrote the same tag (no plan), and the controller pinned it.
    let o = env.run(&["web", "--image", &tag, "--yes"]);
    assert_code(&o, 0);
    pin_at_admission(&env, &format!("{tag}@{digest}"));
    let writes = env.app_writes().len();
    let o = checked(&env, &["apply", &plan, "--yes"]);
    assert_code(&o, 0);
    let err = stderr(&o);
    assert!(!err.contains("changed since"), "not drift: {err}");
    assert!(stdout(&o).contains("No changes."), "{}", stdout(&o));
    assert_eq!(env.image(), format!("{tag}@{digest}"), "left as it is");
    assert_eq!(env.app_writes().len(), writes, "nothing written");

    // Another digest is someone else's image: the plan is refused.
    let other = format!("sha256:{}", "9a".repeat(32));
    pin_at_admission(&env, &format!("{tag}@{other}"));
    let o = checked(&env, &["apply", &plan, "--yes", "--image-check", "off"]);
    assert_code(&o, 5);
    assert_eq!(env.image(), format!("{tag}@{other}"));
}
