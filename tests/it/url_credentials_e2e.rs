//! Credentials in URLs never leave the plugin: a password in the kubeconfig's `server` URL is
//! neither printed nor saved in a plan file (the URL is shown and saved as `https://…@host`),
//! and an `--auth-url` or `--verify-url` with user information is refused (it would be written
//! into a route or sent) without being quoted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;

const SECRET: &str = "hunter2-secret";

/// A copy of the env's kubeconfig whose server URL carries `userinfo@`.
fn kubeconfig_with(env: &Env, name: &str, userinfo: &str) -> std::path::PathBuf {
    let text = std::fs::read_to_string(&env.kubeconfig).unwrap();
    let with = text.replacen(
        "server: \"https://",
        &format!("server: \"https://{userinfo}@"),
        1,
    );
    assert_ne!(with, text);
    env.write_file(name, &with)
}

/// The sandbox's URL as the plugin shows it when the kubeconfig gave it credentials.
fn shown_server(env: &Env) -> String {
    format!("{}/", env.sb.url().replacen("https://", "https://…@", 1))
}

#[track_caller]
fn assert_no_secret(o: &std::process::Output) {
    assert!(!stdout(o).contains(SECRET), "{}", stdout(o));
    assert!(!stderr(o).contains(SECRET), "{}", stderr(o));
}

#[test]
fn a_password_in_the_server_url_is_neither_printed_nor_saved() {
    let env = Env::new();
    let kubeconfig = kubeconfig_with(&env, "kubeconfig-pw", &format!("admin:{SECRET}"));
    let plan = env.dir.path().join("plan.json");
    let o = plugin()
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args([
            "web",
            "--max",
            "9",
            "-v",
            "--plan-out",
            plan.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_code(&o, 0);
    assert_no_secret(&o);
    let text = std::fs::read_to_string(&plan).unwrap();
    assert!(!text.contains(SECRET), "{text}");
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["content"]["clusters"][0]["server"], shown_server(&env));

    // Applied through the same kubeconfig: the plan is matched to its cluster by the URL as
    // saved, without the credentials.
    let o = plugin()
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["apply", plan.to_str().unwrap(), "--yes", "-v"])
        .output()
        .unwrap();
    assert_code(&o, 0);
    assert_no_secret(&o);
    assert_eq!(env.bounds().1, 9);
}

#[test]
fn a_plan_applied_where_the_url_has_no_credentials_names_both_without_the_password() {
    let env = Env::new();
    let kubeconfig = kubeconfig_with(&env, "kubeconfig-pw", &format!("admin:{SECRET}"));
    let plan = env.dir.path().join("plan.json");
    let o = plugin()
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["web", "--max", "9", "--plan-out", plan.to_str().unwrap()])
        .output()
        .unwrap();
    assert_code(&o, 0);
    // Through a context whose URL has no credentials, the URLs differ: refused, each shown
    // as it is saved or connected.
    let o = env.run(&["apply", plan.to_str().unwrap(), "--yes"]);
    assert_code(&o, 3);
    assert_no_secret(&o);
    assert_eq!(
        stderr(&o),
        format!(
            "error: {} was made against the API server {} (context \"sandbox\", namespace \"shop\"), but context \"sandbox\" points at {}/; to apply it there anyway, name its context: --context sandbox\n",
            plan.display(),
            shown_server(&env),
            env.sb.url()
        )
    );
    assert_eq!(env.bounds().1, 5);
    assert!(env.app_writes().is_empty());
}

#[test]
fn a_password_in_the_url_of_an_unreachable_server_is_not_in_the_error() {
    let env = Env::new();
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let text = std::fs::read_to_string(&env.kubeconfig).unwrap();
    let moved = text.replacen(
        &format!("server: \"{}\"", env.sb.url()),
        &format!("server: \"https://admin:{SECRET}@127.0.0.1:{port}\""),
        1,
    );
    assert_ne!(moved, text);
    let kubeconfig = env.write_file("kubeconfig-closed", &moved);
    let o = plugin()
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["web", "--max", "9", "--yes", "-v"])
        .output()
        .unwrap();
    assert_code(&o, 1);
    assert_no_secret(&o);
}

#[test]
fn an_auth_url_with_user_information_is_refused_without_quoting_it() {
    let env = Env::new();
    let ingresses = env.ingresses();
    let endpoints = env.write_file(
        "endpoints.yaml",
        "endpoints:\n  - path: /a\n    scopes: [user]\n",
    );
    for url in [
        format!("http://user:{SECRET}@auth.example/verify"),
        format!("http://user:{SECRET}/x@auth.example/verify"),
        format!("http://{SECRET}@auth.example"),
    ] {
        let o = env.run(&[
            "web",
            "--endpoints",
            endpoints.to_str().unwrap(),
            "--routes",
            "nginx-auth",
            "--auth-url",
            &url,
            "--yes",
        ]);
        assert_code(&o, 3);
        assert_no_secret(&o);
        let err = stderr(&o);
        assert!(
            err.starts_with("error: --auth-url \"http://…@auth.example"),
            "{url}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    assert_eq!(
        stderr(&env.run(&[
            "web",
            "--endpoints",
            endpoints.to_str().unwrap(),
            "--routes",
            "nginx-auth",
            "--auth-url",
            &format!("http://user:{SECRET}@auth.example/verify"),
        ])),
        "error: --auth-url \"http://…@auth.example/verify\": it must not carry user information (user@host)\n"
    );
    assert!(env.sb.requests().is_empty());
    assert_eq!(env.ingresses(), ingresses);
}

#[test]
fn a_verify_url_with_user_information_is_refused_without_quoting_it() {
    let env = Env::new();
    let endpoints = env.write_file(
        "endpoints.yaml",
        "endpoints:\n  - path: /a\n    scopes: [user]\n",
    );
    for url in [
        format!("https://user:{SECRET}@gw.example"),
        format!("https://user:{SECRET}/x@gw.example"),
    ] {
        let o = env.run(&[
            "web",
            "--max",
            "9",
            "--endpoints",
            endpoints.to_str().unwrap(),
            "--yes",
            "--verify-url",
            &url,
        ]);
        assert_code(&o, 3);
        assert_no_secret(&o);
        assert_eq!(
            stderr(&o),
            "error: --verify-url \"https://…@gw.example\": it has user information (…@); the requests are sent without credentials: give the gateway's or ingress controller's address as http://HOST[:PORT] or https://HOST[:PORT]\n"
        );
    }
    assert!(env.sb.requests().is_empty());
    assert_eq!(env.bounds().1, 5);
}

#[test]
fn proxy_credentials_are_never_printed() {
    let env = Env::new();
    let with_proxy = |name: &str, url: &str| {
        let text = std::fs::read_to_string(&env.kubeconfig).unwrap();
        let with = text.replacen(
            "    server: ",
            &format!("    proxy-url: {url}\n    server: "),
            1,
        );
        assert_ne!(with, text);
        env.write_file(name, &with)
    };
    let run = |kubeconfig: &std::path::Path| {
        plugin()
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["web", "--max", "9", "--yes", "-v"])
            .output()
            .unwrap()
    };
    // A proxy that does not answer: the run fails, naming the proxy without its credentials.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let o = run(&with_proxy(
        "kubeconfig-proxy",
        &format!("http://user:{SECRET}@127.0.0.1:{port}"),
    ));
    assert_code(&o, 1);
    assert_no_secret(&o);
    assert!(
        stderr(&o).contains(&format!(
            "via proxy http://127.0.0.1:{port} (the kubeconfig's proxy-url)"
        )),
        "{}",
        stderr(&o)
    );
    // A password holding a '/': the URL is refused, and not quoted back.
    let o = run(&with_proxy(
        "kubeconfig-bad-proxy",
        &format!("socks5://user:{SECRET}/x@proxy.example:1080"),
    ));
    assert_code(&o, 3);
    assert_no_secret(&o);
    assert_eq!(env.bounds().1, 5);
}
