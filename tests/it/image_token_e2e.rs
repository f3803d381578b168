//! The image check against distribution's own `auth: token`: a real registry (Debian's
//! `docker-registry`) that trusts the tests' token service ([`TokenService`]) and verifies
//! every token it is given — its signature against the `rootcertbundle`, its issuer, audience,
//! time and access. Anonymous pulls where the service allows them, anonymous pulls it refuses
//! (cannot tell), the docker config's credentials exchanged for a token, and wrong credentials
//! (cannot tell: a warning under `auto`, a refusal under `require`); `-v` names each request and
//! never a token or a credential.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::registry::{Registry, checked};
use common::token_auth::{self, PASSWORD, TokenService, USER};
use common::*;

/// The repository anyone may pull, and the one only [`USER`] may.
const OPEN: &str = "open";
const CLOSED: &str = "web";

/// A registry with `auth: token` and its token service, anonymous pulls allowed of [`OPEN`].
fn token_registry() -> Option<(Registry, TokenService)> {
    let tokens = TokenService::start(&[OPEN]);
    let reg = Registry::start_token(&tokens, &[OPEN, CLOSED])?;
    Some((reg, tokens))
}

/// Sets the live image with the check off, as in every other test.
fn set_live(env: &Env, image: &str) {
    let o = env.run(&["web", "--image", image, "--yes"]);
    assert_code(&o, 0);
    assert_eq!(env.image(), image);
}

/// A docker config directory whose `auths` give `user:password` for the registry.
fn docker_config(env: &Env, reg: &Registry, user: &str, password: &str) -> std::path::PathBuf {
    use base64::Engine as _;
    let dir = env
        .dir
        .path()
        .join(format!("docker-{user}-{}", password.len()));
    std::fs::create_dir_all(&dir).unwrap();
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    std::fs::write(
        dir.join("config.json"),
        format!(r#"{{"auths": {{"{}": {{"auth": "{auth}"}}}}}}"#, reg.addr),
    )
    .unwrap();
    dir
}

/// The plugin with the check on and `docker` as `DOCKER_CONFIG` (a directory without a
/// config when `None`).

#[test]
fn an_anonymous_token_lets_the_check_read_a_repository_anyone_may_pull() {
    let Some((reg, tokens)) = token_registry() else {
        return;
    };
    let env = Env::new();
    reg.push_index(OPEN, "1", &[("linux", "amd64")]);
    let digest = reg.push_index(OPEN, "2", &[("linux", "amd64"), ("linux", "arm64")]);
    set_live(&env, &reg.image("open:1"));
    let image = reg.image("open:2");
    let o = checked(
        &env,
        None,
        &[
            "web",
            "--image",
            &image,
            "--image-check",
            "require",
            "--yes",
        ],
    );
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(
        out.contains(&format!(
            "image {image} → {digest} (linux/amd64, linux/arm64)"
        )),
        "{out}\n{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("Warning"), "{}", stderr(&o));
    assert_eq!(env.image(), image);
    // Asked anonymously, for the scope the registry's challenge named.
    let asked = tokens.asked();
    assert!(!asked.is_empty());
    for a in &asked {
        assert_eq!(a.who, "anonymous", "{asked:?}");
        assert_eq!(a.service, token_auth::SERVICE, "{asked:?}");
        assert_eq!(
            a.scopes,
            vec![format!("repository:{OPEN}:pull")],
            "{asked:?}"
        );
        assert_eq!(a.status, 200, "{asked:?}");
    }
}

#[test]
fn a_repository_closed_to_anonymous_pulls_cannot_tell_a_warning_under_auto_a_refusal_under_require()
{
    let Some((reg, tokens)) = token_registry() else {
        return;
    };
    let env = Env::new();
    reg.push_index(CLOSED, "1", &[("linux", "amd64")]);
    reg.push_index(CLOSED, "2", &[("linux", "amd64")]);
    set_live(&env, &reg.image("web:1"));
    let image = reg.image("web:2");
    let o = checked(
        &env,
        None,
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
        err.contains(&format!(
            "--image {image}: the image could not be checked (--image-check require): the registry {} refuses to show web (401 Unauthorized) without credentials (none in the docker config); nothing was written",
            reg.addr
        )),
        "{err}"
    );
    assert_eq!(env.image(), reg.image("web:1"));
    // The service gave a token, without access: the registry itself said no.
    let asked = tokens.asked();
    assert!(
        asked
            .iter()
            .all(|a| a.who == "anonymous" && a.status == 200),
        "{asked:?}"
    );

    let o = checked(&env, None, &["web", "--image", &image, "--yes"]);
    assert_code(&o, 0);
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "Warning: the image {image} was not checked: the registry {} refuses to show web (401 Unauthorized) without credentials (none in the docker config); going on (--image-check auto)",
            reg.addr
        )),
        "{err}"
    );
    assert_eq!(err.matches("was not checked").count(), 1, "one line: {err}");
    assert_eq!(env.image(), image);
}

#[test]
fn the_docker_configs_credentials_are_exchanged_for_a_token_and_v_shows_no_secret() {
    let Some((reg, tokens)) = token_registry() else {
        return;
    };
    let env = Env::new();
    reg.push_index(CLOSED, "1", &[("linux", "amd64")]);
    let digest = reg.push_index(CLOSED, "2", &[("linux", "amd64")]);
    set_live(&env, &reg.image("web:1"));
    let docker = docker_config(&env, &reg, USER, PASSWORD);
    let image = reg.image("web:2");
    let o = checked(
        &env,
        Some(&docker),
        &[
            "web",
            "--image",
            &image,
            "--image-check",
            "require",
            "--yes",
            "-v",
        ],
    );
    assert_code(&o, 0);
    let out = stdout(&o);
    let err = stderr(&o);
    assert!(
        out.contains(&format!("image {image} → {digest} (linux/amd64)")),
        "{out}\n{err}"
    );
    assert!(
        out.contains(&format!(
            "platforms checked against the live image {} (linux/amd64)",
            reg.image("web:1")
        )),
        "{out}"
    );
    assert_eq!(env.image(), image);
    let asked = tokens.asked();
    assert!(!asked.is_empty());
    assert!(
        asked.iter().all(|a| a.who == USER && a.status == 200),
        "{asked:?}"
    );
    // -v: the registry's requests, as the cluster's are, with their status and time.
    let manifest = format!(
        "  GET http://{}/v2/web/manifests/2 (registry manifest): ",
        reg.addr
    );
    assert!(
        err.contains(&format!("{manifest}401 Unauthorized in ")),
        "{err}"
    );
    assert!(err.contains(&format!("{manifest}200 OK in ")), "{err}");
    assert!(
        err.contains(&format!(
            "  GET http://{}/token?service={}&scope=repository%3Aweb%3Apull (registry token): 200 OK in ",
            tokens.addr,
            token_auth::SERVICE.replace('-', "%2D")
        )),
        "{err}"
    );
    // Never a token or a credential, on either stream.
    let issued = tokens.issued();
    assert!(!issued.is_empty());
    use base64::Engine as _;
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
    for text in [&out, &err] {
        for t in &issued {
            assert!(!text.contains(t.as_str()), "a token was shown: {text}");
            let signature = t.rsplit('.').next().unwrap();
            assert!(!text.contains(signature), "a token was shown: {text}");
        }
        assert!(!text.contains(PASSWORD) && !text.contains(&basic), "{text}");
        assert!(
            !text.contains("Bearer ") && !text.contains("Basic "),
            "{text}"
        );
    }
}

#[test]
fn wrong_credentials_cannot_tell_a_warning_under_auto_a_refusal_under_require() {
    let Some((reg, tokens)) = token_registry() else {
        return;
    };
    let env = Env::new();
    reg.push_index(CLOSED, "1", &[("linux", "amd64")]);
    reg.push_index(CLOSED, "2", &[("linux", "amd64")]);
    set_live(&env, &reg.image("web:1"));
    let docker = docker_config(&env, &reg, USER, "not-the-password");
    let image = reg.image("web:2");
    let refused = format!(
        "the registry {} refuses to show web (401 Unauthorized) with the credentials of the docker config",
        reg.addr
    );
    let o = checked(
        &env,
        Some(&docker),
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
        err.contains(&format!(
            "--image {image}: the image could not be checked (--image-check require): {refused}; nothing was written"
        )),
        "{err}"
    );
    assert!(!err.contains("not-the-password"), "{err}");
    assert_eq!(env.image(), reg.image("web:1"));
    let asked = tokens.asked();
    assert!(
        asked
            .iter()
            .all(|a| a.who == format!("wrong:{USER}") && a.status == 401),
        "the token service refused them: {asked:?}"
    );
    assert!(tokens.issued().is_empty(), "no token was issued");

    let o = checked(&env, Some(&docker), &["web", "--image", &image, "--yes"]);
    assert_code(&o, 0);
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "Warning: the image {image} was not checked: {refused}; going on (--image-check auto)"
        )),
        "{err}"
    );
    assert_eq!(err.matches("was not checked").count(), 1, "one line: {err}");
    assert_eq!(env.image(), image);
}
