//! Behind a proxy, as kubectl: the cluster's `proxy-url`, or `HTTPS_PROXY`/`HTTP_PROXY` with
//! `NO_PROXY` exceptions and never for loopback; HTTP `CONNECT`, forwarding and SOCKS5 proxies
//! (the in-process proxies of `crates/test-proxies`, which count tunnels and requests). Through
//! a proxy a run is the same run: one HTTP/2 connection (one tunnel), the same requests.
//!
//! Loopback servers are never proxied by the environment's rules, so the proxied-by-environment
//! cases reach the sandbox as `https://0.0.0.0:PORT` (not a loopback address; connecting to it
//! reaches the local listener) or by a name that does not resolve (the proxy sends every tunnel
//! to the sandbox), with `tls-server-name: localhost` to match the sandbox's certificate.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::PathBuf;
use std::process::Output;

use common::*;
use sandbox_apiserver::{Rollout, SandboxOptions};
use test_proxies::{Kind, Options, TestProxy};

const IMAGE: &str = "registry.example.com/web:2.0";
/// A name that resolves nowhere: only a proxy (sending it to the sandbox) can reach it.
const UNRESOLVABLE: &str = "apiserver.proxy-test.invalid";

fn proxy(kind: Kind) -> TestProxy {
    TestProxy::start(kind, Options::default()).unwrap()
}

/// A proxy that sends every tunnel to the sandbox, and a kubeconfig naming the server
/// [`UNRESOLVABLE`]; with the server's `host:port`.
fn via_unresolvable_name(env: &Env, kind: Kind) -> (TestProxy, PathBuf, String) {
    let p = TestProxy::start(
        kind,
        Options {
            upstream: Some(env.sb.addr()),
            ..Options::default()
        },
    )
    .unwrap();
    let target = format!("{UNRESOLVABLE}:{}", env.sb.addr().port());
    let kc = kubeconfig(
        env,
        "kubeconfig-name",
        &format!("https://{target}"),
        TLS_NAME,
    );
    (p, kc, target)
}

/// The sandbox's kubeconfig with the cluster's server set to `server` and `extra` cluster
/// fields (each `    key: value\n`).
fn kubeconfig(env: &Env, name: &str, server: &str, extra: &str) -> PathBuf {
    let yaml = env.sb.kubeconfig_yaml(NS);
    let old = format!("    server: \"{}\"\n", env.sb.url());
    assert!(yaml.contains(&old), "{yaml}");
    env.write_file(
        name,
        &yaml.replace(&old, &format!("    server: \"{server}\"\n{extra}")),
    )
}

/// `https://0.0.0.0:PORT` (or `http://`), a server address the environment's rules proxy.
fn non_loopback(env: &Env) -> String {
    env.sb.url().replace("127.0.0.1", "0.0.0.0")
}

const TLS_NAME: &str = "    tls-server-name: localhost\n";

fn run(kubeconfig: &PathBuf, vars: &[(&str, &str)], args: &[&str]) -> Output {
    let mut c = plugin();
    c.arg("--kubeconfig").arg(kubeconfig);
    for (k, v) in vars {
        c.env(k, v);
    }
    c.args(args);
    c.output().expect("binary runs")
}

fn dry_run(kubeconfig: &PathBuf, vars: &[(&str, &str)]) -> Output {
    run(kubeconfig, vars, &["web", "--max", "9", "--dry-run"])
}

/// The whole happy path of the end-to-end suite: image, bounds and endpoints, applied.
fn full_run(env: &Env, kubeconfig: &PathBuf, vars: &[(&str, &str)]) -> Output {
    let endpoints = env.write_file(
        "endpoints.yaml",
        "endpoints:\n  - path: /health\n  - path: /v2\n  - path: /protected/user\n    scopes: [user]\n  - path: /admin\n    scopes: [admin]\n",
    );
    run(
        kubeconfig,
        vars,
        &[
            "web",
            "--image",
            IMAGE,
            "--min",
            "3",
            "--max",
            "9",
            "--endpoints",
            endpoints.to_str().unwrap(),
            "--yes",
        ],
    )
}

/// The requests a run sent, as (method, path, query, dry run), sorted (concurrent requests
/// of a round arrive in any order).
fn requests(env: &Env) -> Vec<(String, String, String, bool)> {
    let mut v: Vec<_> = env
        .sb
        .requests()
        .into_iter()
        .map(|r| (r.method, r.path, r.query, r.dry_run))
        .collect();
    v.sort();
    v
}

/// Every request of the run on one HTTP/2 connection.
#[track_caller]
fn assert_one_http2_connection(env: &Env) {
    let log = env.sb.requests();
    assert!(!log.is_empty());
    assert!(log.iter().all(|r| r.http_version == "HTTP/2.0"), "{log:?}");
    assert_eq!(env.sb.counters().connections, 1, "{log:?}");
}

#[test]
fn proxy_url_in_the_kubeconfig_carries_the_whole_run_over_one_tunnel_at_the_request_floor() {
    // The same run without a proxy, for the request accounting.
    let direct = Env::new();
    direct.sb.clear_requests();
    let o = full_run(&direct, &direct.kubeconfig, &[]);
    assert_code(&o, 0);

    let env = Env::new();
    let p = proxy(Kind::Http);
    // kubectl honours proxy-url even for a loopback server.
    let kc = kubeconfig(
        &env,
        "kubeconfig-proxied",
        env.sb.url(),
        &format!("    proxy-url: {}\n", p.url()),
    );
    env.sb.clear_requests();
    let o = full_run(&env, &kc, &[]);
    assert_code(&o, 0);
    assert_eq!(env.image(), IMAGE);
    assert_eq!(env.bounds(), (3, 9));
    let s = p.stats();
    assert_eq!(s.tunnels, 1, "{:?}", s.log);
    assert_eq!(s.targets, vec![env.sb.addr().to_string()]);
    assert_one_http2_connection(&env);
    assert_eq!(requests(&env), requests(&direct));
}

#[test]
fn https_proxy_carries_a_non_loopback_server_and_lower_case_works_too() {
    for var in ["HTTPS_PROXY", "https_proxy"] {
        let env = Env::new();
        let p = proxy(Kind::Http);
        let kc = kubeconfig(&env, "kubeconfig-0", &non_loopback(&env), TLS_NAME);
        env.sb.clear_requests();
        let o = full_run(&env, &kc, &[(var, &p.url())]);
        assert_code(&o, 0);
        assert_eq!(env.image(), IMAGE);
        let s = p.stats();
        assert_eq!(s.tunnels, 1, "{var}: {:?}", s.log);
        assert_eq!(s.targets, vec![format!("0.0.0.0:{}", env.sb.addr().port())]);
        assert_one_http2_connection(&env);
    }
}

#[test]
fn no_proxy_exempts_the_server_by_address_cidr_port_and_star() {
    let env = Env::new();
    let p = proxy(Kind::Http);
    let kc = kubeconfig(&env, "kubeconfig-0", &non_loopback(&env), TLS_NAME);
    let port = env.sb.addr().port();
    let with_port = format!("other.example,0.0.0.0:{port}");
    for no_proxy in ["0.0.0.0", "0.0.0.0/8", "*", with_port.as_str()] {
        for var in ["NO_PROXY", "no_proxy"] {
            let o = dry_run(&kc, &[("HTTPS_PROXY", &p.url()), (var, no_proxy)]);
            assert_code(&o, 0);
            assert_eq!(p.stats().requests, 0, "{var}={no_proxy}");
        }
    }
    // Entries that do not match: another address, another port, a name, another range.
    let other_port = format!("0.0.0.0:{}", port.wrapping_add(1));
    for no_proxy in [
        "0.0.0.1",
        other_port.as_str(),
        ".example,0.0.0",
        "10.0.0.0/8",
    ] {
        let before = p.stats().tunnels;
        let o = dry_run(&kc, &[("HTTPS_PROXY", &p.url()), ("NO_PROXY", no_proxy)]);
        assert_code(&o, 0);
        assert_eq!(p.stats().tunnels, before + 1, "NO_PROXY={no_proxy}");
    }
}

#[test]
fn no_proxy_exempts_a_host_name_and_its_subdomains() {
    let env = Env::new();
    let (p, kc, target) = via_unresolvable_name(&env, Kind::Http);
    // Not matching (a different suffix, a part of a label, a subdomain-only form of another
    // name): through the proxy, which alone can reach the name.
    for no_proxy in [
        "other.invalid",
        "test.invalid.example",
        ".apiserver.proxy-test.invalid",
    ] {
        let o = dry_run(&kc, &[("HTTPS_PROXY", &p.url()), ("NO_PROXY", no_proxy)]);
        assert_code(&o, 0);
    }
    assert_eq!(p.stats().tunnels, 3);
    assert_eq!(p.stats().targets, vec![target; 3]);
    // Matching (the domain, a leading-dot or `*.` suffix, the name itself): straight to the
    // name, which does not resolve — the proxy sees nothing.
    for no_proxy in [
        "invalid",
        ".proxy-test.invalid",
        "*.proxy-test.invalid",
        UNRESOLVABLE,
    ] {
        let o = dry_run(&kc, &[("HTTPS_PROXY", &p.url()), ("NO_PROXY", no_proxy)]);
        assert_code(&o, 1);
        assert!(
            stderr(&o).contains("cannot resolve the server name"),
            "NO_PROXY={no_proxy}: {}",
            stderr(&o)
        );
    }
    assert_eq!(p.stats().requests, 3);
}

#[test]
fn loopback_and_localhost_servers_are_never_proxied_by_the_environment() {
    let env = Env::new();
    let p = proxy(Kind::Http);
    let localhost = kubeconfig(
        &env,
        "kubeconfig-localhost",
        &env.sb.url().replace("127.0.0.1", "localhost"),
        "",
    );
    for kc in [&env.kubeconfig, &localhost] {
        let o = dry_run(kc, &[("HTTPS_PROXY", &p.url()), ("HTTP_PROXY", &p.url())]);
        assert_code(&o, 0);
    }
    assert_eq!(p.stats().connections, 0);
}

#[test]
fn socks5_proxies_from_the_kubeconfig_and_the_environment_with_credentials() {
    let env = Env::new();
    let p = TestProxy::start(
        Kind::Socks5,
        Options {
            credentials: Some(("alice".into(), "s0cks-pass".into())),
            ..Options::default()
        },
    )
    .unwrap();
    let url = p.url_with_credentials("alice", "s0cks-pass");
    let kc = kubeconfig(
        &env,
        "kubeconfig-socks",
        env.sb.url(),
        &format!("    proxy-url: {url}\n"),
    );
    env.sb.clear_requests();
    let o = full_run(&env, &kc, &[]);
    assert_code(&o, 0);
    assert_eq!(env.image(), IMAGE);
    assert_one_http2_connection(&env);
    let s = p.stats();
    assert_eq!(s.tunnels, 1, "{:?}", s.log);
    assert_eq!(s.credentials, vec![Some("alice:s0cks-pass".to_owned())]);

    // socks5h:// (the proxy resolves the name) from the environment, for a name only the
    // proxy can reach.
    let (q, kc, target) = via_unresolvable_name(&env, Kind::Socks5);
    let url = q.url().replace("socks5://", "socks5h://");
    let o = dry_run(&kc, &[("HTTPS_PROXY", &url)]);
    assert_code(&o, 0);
    assert_eq!(q.stats().targets, vec![target]);
}

#[test]
fn a_proxy_that_answers_407_stops_the_run_with_one_line_and_changes_nothing() {
    let env = Env::new();
    let p = TestProxy::start(
        Kind::Http,
        Options {
            credentials: Some(("bob".into(), "corp-pass".into())),
            ..Options::default()
        },
    )
    .unwrap();
    let kc = kubeconfig(&env, "kubeconfig-0", &non_loopback(&env), TLS_NAME);
    let before = env.image();
    let args = ["web", "--image", IMAGE, "--yes"];

    let o = run(&kc, &[("HTTPS_PROXY", &p.url())], &args);
    assert_code(&o, 1);
    assert_eq!(
        stderr(&o),
        format!(
            "error: cannot reach the cluster of context \"sandbox\" for deployment.apps/web: the proxy {} (HTTPS_PROXY) requires authentication (407 Proxy Authentication Required); put the credentials in the proxy URL (http://USER:PASSWORD@HOST:PORT)\n",
            p.url()
        )
    );
    let wrong = p.url_with_credentials("bob", "wrong-pass");
    let o = run(&kc, &[("HTTPS_PROXY", &wrong)], &args);
    assert_code(&o, 1);
    assert!(
        stderr(&o).contains(&format!(
            "the proxy {} (HTTPS_PROXY) rejected the credentials in its URL (407 Proxy Authentication Required)",
            p.url()
        )),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("wrong-pass"));
    assert_eq!(env.image(), before);
    assert!(env.writes().is_empty());

    let right = p.url_with_credentials("bob", "corp-pass");
    let o = run(&kc, &[("HTTPS_PROXY", &right)], &args);
    assert_code(&o, 0);
    assert_eq!(env.image(), IMAGE);
    let s = p.stats();
    assert_eq!(
        s.credentials.last(),
        Some(&Some("bob:corp-pass".to_owned()))
    );
}

#[test]
fn a_proxy_that_refuses_the_tunnel_or_is_down_is_named_and_nothing_changes() {
    let env = Env::new();
    let refusing = TestProxy::start(
        Kind::Http,
        Options {
            refuse_with: Some(403),
            ..Options::default()
        },
    )
    .unwrap();
    let kc = kubeconfig(&env, "kubeconfig-0", &non_loopback(&env), TLS_NAME);
    let port = env.sb.addr().port();
    let o = run(
        &kc,
        &[("HTTPS_PROXY", &refusing.url())],
        &["web", "--max", "9", "--yes"],
    );
    assert_code(&o, 1);
    assert_eq!(
        stderr(&o),
        format!(
            "error: cannot reach the cluster of context \"sandbox\" for horizontalpodautoscaler.autoscaling/web: the proxy {} (HTTPS_PROXY) refused the tunnel to 0.0.0.0:{port}: 403 Forbidden\n",
            refusing.url()
        )
    );

    let down = format!("http://127.0.0.1:{}", test_proxies::closed_port().unwrap());
    let socks_down = down.replace("http://", "socks5://user:hunter2-secret@");
    for (url, shown) in [
        (down.clone(), down.clone()),
        (socks_down, down.replace("http", "socks5")),
    ] {
        let kc = kubeconfig(
            &env,
            "kubeconfig-down",
            env.sb.url(),
            &format!("    proxy-url: {url}\n"),
        );
        let o = run(&kc, &[], &["web", "--max", "9", "--yes"]);
        assert_code(&o, 1);
        assert_eq!(
            stderr(&o),
            format!(
                "error: cannot reach the cluster of context \"sandbox\" for horizontalpodautoscaler.autoscaling/web: cannot connect to the proxy {shown} (the kubeconfig's proxy-url): connection refused\n"
            )
        );
    }
    assert_eq!(env.bounds(), (2, 5));
    assert!(env.writes().is_empty());
}

#[test]
fn an_invalid_proxy_url_is_a_kubeconfig_error_that_hides_the_credentials() {
    let env = Env::new();
    let kc = kubeconfig(
        &env,
        "kubeconfig-bad",
        env.sb.url(),
        "    proxy-url: socks4://user:hunter2-secret@proxy:1080\n",
    );
    let o = dry_run(&kc, &[]);
    assert_code(&o, 3);
    assert_eq!(
        stderr(&o),
        format!(
            "error: kubeconfig {}, cluster \"sandbox\": the cluster's proxy-url is not valid: unsupported scheme \"socks4\", must be http, https, or socks5\n",
            kc.display()
        )
    );
}

#[test]
fn wait_follows_the_rollout_through_the_proxy_on_the_same_connection() {
    let env = Env::with_options(SandboxOptions {
        rollout: Rollout::Auto {
            delay: std::time::Duration::from_millis(300),
        },
        ..SandboxOptions::default()
    });
    let p = proxy(Kind::Http);
    let kc = kubeconfig(&env, "kubeconfig-0", &non_loopback(&env), TLS_NAME);
    env.sb.clear_requests();
    let o = run(
        &kc,
        &[("HTTPS_PROXY", &p.url())],
        &[
            "web",
            "--image",
            IMAGE,
            "--yes",
            "--wait",
            "--timeout",
            "2m",
        ],
    );
    assert_code(&o, 0);
    assert!(
        stderr(&o).contains("successfully rolled out"),
        "{}",
        stderr(&o)
    );
    assert_eq!(p.stats().tunnels, 1);
    assert_one_http2_connection(&env);
}

#[test]
fn an_http_server_gets_its_requests_forwarded_with_the_proxys_credentials() {
    let env = Env::with_options(SandboxOptions {
        tls: false,
        ..SandboxOptions::default()
    });
    let p = TestProxy::start(
        Kind::Http,
        Options {
            credentials: Some(("carol".into(), "fwd-pass".into())),
            ..Options::default()
        },
    )
    .unwrap();
    let kc = kubeconfig(&env, "kubeconfig-0", &non_loopback(&env), "");
    let o = run(
        &kc,
        &[
            ("HTTP_PROXY", &p.url_with_credentials("carol", "fwd-pass")),
            ("HTTPS_PROXY", "http://127.0.0.1:1"),
        ],
        &["web", "--max", "9", "--yes"],
    );
    assert_code(&o, 0);
    assert_eq!(env.bounds(), (2, 9));
    let s = p.stats();
    assert!(s.forwarded >= 1, "{:?}", s.log);
    assert_eq!(s.tunnels, 0);
    assert!(
        s.credentials
            .iter()
            .all(|c| c.as_deref() == Some("carol:fwd-pass"))
    );
}

#[test]
fn verbose_names_the_proxy_without_its_credentials() {
    let env = Env::new();
    let p = proxy(Kind::Http);
    let kc = kubeconfig(&env, "kubeconfig-0", &non_loopback(&env), TLS_NAME);
    let url = p.url_with_credentials("dave", "verbose-secret");
    let o = run(
        &kc,
        &[("HTTPS_PROXY", &url)],
        &["web", "--max", "9", "--dry-run", "-v"],
    );
    assert_code(&o, 0);
    let err = stderr(&o);
    assert!(
        err.contains(&format!("  via proxy {} (HTTPS_PROXY)\n", p.url())),
        "{err}"
    );
    assert!(
        !err.contains("verbose-secret") && !err.contains("dave"),
        "{err}"
    );
}

#[test]
fn kubectl_goes_through_the_same_proxy_the_same_way() {
    let env = Env::new();
    let p = proxy(Kind::Http);
    let kc = kubeconfig(
        &env,
        "kubeconfig-proxied",
        env.sb.url(),
        &format!("    proxy-url: {}\n", p.url()),
    );
    let mut k = std::process::Command::new("kubectl");
    scrub(&mut k);
    let o = k
        .arg("--kubeconfig")
        .arg(&kc)
        .args(["get", "deployment", "web", "-o", "name"])
        .env("HOME", env.dir.path())
        .output()
        .expect("kubectl runs");
    assert_code(&o, 0);
    assert_eq!(stdout(&o), "deployment.apps/web\n");
    let kubectl = p.stats();
    assert!(kubectl.tunnels >= 1);
    let o = dry_run(&kc, &[]);
    assert_code(&o, 0);
    let both = p.stats();
    assert_eq!(both.tunnels, kubectl.tunnels + 1);
    // The same CONNECT target for both clients.
    assert!(both.targets.iter().all(|t| *t == env.sb.addr().to_string()));
}

#[test]
fn an_https_proxy_is_verified_with_the_clusters_ca_and_tunnels_as_the_others_do() {
    use base64::Engine;
    let env = Env::new();
    let p = proxy(Kind::Https);
    let b64 = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
    let sandbox_ca = env.sb.ca_pem().unwrap();
    let yaml = env.sb.kubeconfig_yaml(NS).replace(
        &format!("    server: \"{}\"\n", env.sb.url()),
        &format!(
            "    server: \"{}\"\n    proxy-url: {}\n",
            env.sb.url(),
            p.url()
        ),
    );
    // As with kubectl, the proxy's certificate is checked against the cluster's CA data: with
    // the sandbox's CA alone it is not trusted; with both CAs in the bundle it is.
    let alone = env.write_file("kubeconfig-ca-alone", &yaml);
    let o = dry_run(&alone, &[]);
    assert_code(&o, 1);
    assert!(
        stderr(&o).contains(&format!(
            "TLS with the proxy {} (the kubeconfig's proxy-url) failed",
            p.url()
        )),
        "{}",
        stderr(&o)
    );
    let both = env.write_file(
        "kubeconfig-ca-both",
        &yaml.replace(
            &b64(sandbox_ca),
            &b64(&format!("{sandbox_ca}{}", p.ca_pem().unwrap())),
        ),
    );
    env.sb.clear_requests();
    let o = full_run(&env, &both, &[]);
    assert_code(&o, 0);
    assert_eq!(env.image(), IMAGE);
    assert_eq!(p.stats().tunnels, 1);
    assert_one_http2_connection(&env);
}
