//! `--verify-url`: after the writes, one request without a token per path with scopes and host,
//! to the address given, must be refused with 401 or 403 — else exit 9, one line per path, and
//! the way back. Against the sandbox and a stand-in gateway ([`gate::Gate`]) that answers 401,
//! 200, a redirect or never, over HTTP or HTTPS, directly or through the test proxies
//! (`HTTP_PROXY`/`HTTPS_PROXY` as kubectl applies them, `NO_PROXY` honoured).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::common::gate;

use std::process::Output;
use std::time::Duration;

use common::running::{Running, wait_until};
use common::*;
use gate::{Gate, Reply};
use sandbox_apiserver::{Rollout, SandboxOptions};
use serde_json::Value;
use test_proxies::{Kind, Options, TestProxy};

const ENDPOINTS: &str = "endpoints:
  - path: /health
  - path: /unprotected
  - path: /protected/user
    scopes: [user]
  - path: /admin
    scopes: [admin]
";

const HOST: &str = "shop.example.com";

/// The demo app without its managed Ingresses (the unmanaged one stays): a first exposure.
fn unexposed() -> Env {
    unexposed_with(SandboxOptions::default())
}

fn unexposed_with(opts: SandboxOptions) -> Env {
    let env = Env::with_options(opts);
    for name in ["web-e3b0c44298fc1c14", "web-04f8996da763b7a9"] {
        env.sb.delete(&ingress_path(name)).unwrap();
    }
    env
}

/// The endpoints as HTTPRoutes for `shop.example.com`, with `extra` flags.
fn gateway_args(env: &Env, extra: &[&str]) -> Vec<String> {
    let file = env.write_file("endpoints.yaml", ENDPOINTS);
    let mut args: Vec<String> = [
        "web",
        "--endpoints",
        file.to_str().unwrap(),
        "--routes",
        "gateway",
        "--gateway",
        "gateways/public",
        "--auth-service",
        "auth/oauth:8080",
        "--host",
        HOST,
        "--yes",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

fn run(env: &Env, args: &[String], vars: &[(&str, &str)]) -> Output {
    let mut c = env.cmd();
    c.args(args);
    for (k, v) in vars {
        c.env(k, v);
    }
    // Whatever the gate does, the run ends well within this.
    c.timeout(Duration::from_secs(90));
    c.output().expect("binary runs")
}

fn expose(env: &Env, url: &str, extra: &[&str]) -> Output {
    let mut flags = vec!["--verify-url", url];
    flags.extend_from_slice(extra);
    run(env, &gateway_args(env, &flags), &[])
}

fn httproutes(env: &Env) -> Vec<Value> {
    env.sb.list(&format!(
        "/apis/gateway.networking.k8s.io/v1/namespaces/{NS}/httproutes"
    ))
}

/// The two scoped paths, asked for the routes' host.
fn asked_for_host() -> Vec<(String, String)> {
    vec![
        (HOST.into(), "/web/admin".into()),
        (HOST.into(), "/web/protected/user".into()),
    ]
}

#[test]
fn a_gateway_that_refuses_requests_without_a_token_passes_and_each_path_is_listed() {
    let env = unexposed();
    let gate = Gate::start(Reply::Status(401));
    let o = expose(&env, &gate.url(), &[]);
    assert_code(&o, 0);
    let (out, err) = (stdout(&o), stderr(&o));
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("auth ")).collect();
    assert_eq!(
        lines,
        [
            "auth enforced on shop.example.com/web/admin (HTTP 401)",
            "auth enforced on shop.example.com/web/protected/user (HTTP 401)",
        ],
        "{out}"
    );
    // After the writes: the report's lines come first.
    let created = out.find("created").unwrap();
    assert!(created < out.find("auth enforced").unwrap(), "{out}");
    assert_eq!(
        err.trim(),
        format!(
            "Checking auth at {}: a request without a token to each of 2 paths with scopes must get 401 or 403",
            gate.url()
        )
    );
    // Only the scoped paths, each once, as GET, for the routes' host, without credentials.
    assert_eq!(gate.asked(), asked_for_host());
    assert!(
        gate.seen()
            .iter()
            .all(|s| s.method == "GET" && !s.credentials),
        "{:?}",
        gate.seen()
    );
    assert_eq!(httproutes(&env).len(), 3);
}

#[test]
fn a_path_served_without_a_token_exits_9_with_its_line_and_an_undo_that_works() {
    let env = unexposed();
    let gate = Gate::start(Reply::Status(200));
    let o = expose(&env, &gate.url(), &[]);
    assert_code(&o, 9);
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(!out.contains("auth "), "{out}");
    assert!(out.contains("recorded as revision 1"), "{out}");
    let lines: Vec<&str> = err.lines().collect();
    let undo = "kubectl appupdate web -n shop --context sandbox --undo";
    assert_eq!(
        lines[1..],
        [
            "auth NOT enforced on shop.example.com/web/admin (HTTP 200)",
            "auth NOT enforced on shop.example.com/web/protected/user (HTTP 200)",
            &format!(
                "error: auth is not enforced: 2 of 2 requests without a token to paths with scopes at {} were not refused with 401 or 403 (listed above); the routes this run wrote are live: undo the run with `{undo}`, or check that the gateway or ingress controller implements the routes' auth (Gateway API: the experimental channel's ExternalAuth filter)",
                gate.url()
            ),
        ],
        "{err}"
    );
    // The routes are written, and the command the hint gives takes them back.
    assert_eq!(httproutes(&env).len(), 3);
    let mut args: Vec<String> = undo.split(' ').skip(2).map(str::to_owned).collect();
    args.push("--yes".into());
    let undone = run(&env, &args, &[]);
    assert_code(&undone, 0);
    assert!(httproutes(&env).is_empty());
}

#[test]
fn a_redirect_is_a_failure_named_with_its_location_and_is_not_followed() {
    let env = unexposed();
    let probe = Gate::start(Reply::Status(401));
    // A header can carry a bidi override as UTF-8: it is shown escaped.
    let login = format!("{}/login?next=/web\u{202e}", probe.url());
    let gate = Gate::start(Reply::Redirect(login.clone()));
    let o = expose(&env, &gate.url(), &[]);
    assert_code(&o, 9);
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "auth NOT enforced on shop.example.com/web/admin (HTTP 302, redirected to \"{}/login?next=/web\\u{{202e}}\")",
            probe.url()
        )),
        "{err}"
    );
    assert_eq!(gate.asked(), asked_for_host());
    // Nothing went where the redirect pointed.
    assert!(probe.seen().is_empty(), "{:?}", probe.seen());
}

#[test]
fn a_gateway_that_never_answers_fails_within_the_request_bound() {
    let env = unexposed();
    let gate = Gate::start(Reply::Never);
    let o = expose(&env, &gate.url(), &["--request-timeout", "1s"]);
    assert_code(&o, 9);
    let err = stderr(&o);
    for path in ["/web/admin", "/web/protected/user"] {
        assert!(
            err.contains(&format!(
                "auth NOT verified on shop.example.com{path} (no answer within 1s)"
            )),
            "{err}"
        );
    }
    assert!(err.contains("2 of 2 requests"), "{err}");
    assert_eq!(gate.asked(), asked_for_host());
}

#[test]
fn a_gateway_that_is_not_there_fails_with_the_reason() {
    let env = unexposed();
    let port = test_proxies::closed_port().unwrap();
    let o = expose(&env, &format!("http://127.0.0.1:{port}"), &[]);
    assert_code(&o, 9);
    assert!(
        stderr(&o).contains(
            "auth NOT verified on shop.example.com/web/admin (no answer: connection refused)"
        ),
        "{}",
        stderr(&o)
    );
}

#[test]
fn through_http_proxy_the_requests_go_through_the_proxy() {
    let env = unexposed();
    let gate = Gate::start(Reply::Status(403));
    let proxy = TestProxy::start(Kind::Http, Options::default()).unwrap();
    // 0.0.0.0 reaches the local gate and, unlike 127.0.0.1, is not exempt from the proxy.
    let url = format!("http://0.0.0.0:{}", gate.addr().port());
    let o = run(
        &env,
        &gateway_args(&env, &["--verify-url", &url]),
        &[("HTTP_PROXY", &proxy.url())],
    );
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("auth enforced on shop.example.com/web/admin (HTTP 403)"),
        "{}",
        stdout(&o)
    );
    let stats = proxy.stats();
    let target = format!("0.0.0.0:{}", gate.addr().port());
    assert!(stats.forwarded >= 1, "{stats:?}");
    assert!(!stats.targets.is_empty(), "{stats:?}");
    assert!(stats.targets.iter().all(|t| *t == target), "{stats:?}");
    assert_eq!(gate.asked(), asked_for_host());
}

#[test]
fn through_https_proxy_an_https_gateway_is_tunnelled_and_checked_for_the_routes_host() {
    let env = unexposed();
    let gate = Gate::start_tls(Reply::Status(401), &[HOST]);
    let ca = env.write_file("gate-ca.pem", gate.ca_pem());
    let proxy = TestProxy::start(Kind::Http, Options::default()).unwrap();
    let url = format!("https://0.0.0.0:{}", gate.addr().port());
    let vars = [("HTTPS_PROXY", proxy.url())];
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let o = run(
        &env,
        &gateway_args(
            &env,
            &[
                "--verify-url",
                &url,
                "--verify-url-ca",
                ca.to_str().unwrap(),
            ],
        ),
        &vars,
    );
    assert_code(&o, 0);
    let stats = proxy.stats();
    assert!(stats.tunnels >= 1, "{stats:?}");
    let target = format!("0.0.0.0:{}", gate.addr().port());
    assert!(stats.targets.iter().all(|t| *t == target), "{stats:?}");
    // TLS named the routes' host, whose certificate the gate has.
    assert_eq!(gate.asked(), asked_for_host());
    assert!(
        gate.seen().iter().all(|s| s.sni.as_deref() == Some(HOST)),
        "{:?}",
        gate.seen()
    );
}

#[test]
fn an_https_gateway_whose_certificate_is_not_trusted_is_not_verified() {
    let env = unexposed();
    let gate = Gate::start_tls(Reply::Status(401), &[HOST]);
    let o = expose(&env, &gate.url(), &[]);
    assert_code(&o, 9);
    let err = stderr(&o);
    assert!(
        err.contains("auth NOT verified on shop.example.com/web/admin (no answer: TLS failure ("),
        "{err}"
    );
    assert!(gate.seen().is_empty());
}

#[test]
fn no_proxy_sends_the_requests_straight_to_the_gateway() {
    let env = unexposed();
    let gate = Gate::start(Reply::Status(401));
    let proxy = TestProxy::start(Kind::Http, Options::default()).unwrap();
    let url = format!("http://0.0.0.0:{}", gate.addr().port());
    let o = run(
        &env,
        &gateway_args(&env, &["--verify-url", &url]),
        &[("HTTP_PROXY", &proxy.url()), ("NO_PROXY", "0.0.0.0")],
    );
    assert_code(&o, 0);
    assert_eq!(proxy.stats().requests, 0);
    assert_eq!(gate.asked(), asked_for_host());
}

#[test]
fn a_run_with_nothing_to_change_still_checks_and_says_it_changed_nothing() {
    let env = unexposed();
    let open = Gate::start(Reply::Status(200));
    assert_code(&run(&env, &gateway_args(&env, &[]), &[]), 0);
    let writes = env.writes().len();
    let o = expose(&env, &open.url(), &[]);
    assert_code(&o, 9);
    assert!(stdout(&o).contains("No changes."), "{}", stdout(&o));
    let last = stderr(&o).lines().last().unwrap_or_default().to_owned();
    assert!(
        last.contains("2 of 2 requests") && last.contains("this run changed nothing"),
        "{last}"
    );
    assert_eq!(env.writes().len(), writes);
    assert_eq!(open.asked(), asked_for_host());
}

#[test]
fn routes_without_hosts_are_asked_at_the_address_with_its_own_host() {
    // The demo app's Ingresses have no host.
    let env = Env::new();
    let gate = Gate::start(Reply::Status(403));
    let file = env.write_file("endpoints.yaml", ENDPOINTS);
    let o = env.run(&[
        "web",
        "--endpoints",
        file.to_str().unwrap(),
        "--yes",
        "--verify-url",
        &gate.url(),
    ]);
    assert_code(&o, 0);
    let authority = gate.addr().to_string();
    assert!(
        stdout(&o).contains(&format!(
            "auth enforced on {authority}/web/protected/user (HTTP 403)"
        )),
        "{}",
        stdout(&o)
    );
    assert_eq!(
        gate.asked(),
        [
            (authority.clone(), "/web/admin".to_owned()),
            (authority, "/web/protected/user".to_owned())
        ]
    );
}

#[test]
fn with_json_output_stdout_is_the_document_and_the_lines_go_to_stderr() {
    let env = unexposed();
    let gate = Gate::start(Reply::Status(401));
    let o = expose(&env, &gate.url(), &["-o", "json"]);
    assert_code(&o, 0);
    let doc: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(doc["app"], "web");
    assert!(
        stderr(&o).contains("auth enforced on shop.example.com/web/admin (HTTP 401)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_bad_address_is_refused_in_one_line_before_any_request() {
    let env = unexposed();
    // The password is not repeated.
    let o = expose(&env, "https://user:secret@gw.example.com", &[]);
    assert_code(&o, 3);
    assert!(
        stderr(&o).starts_with(
            "error: --verify-url \"https://…@gw.example.com\": it has user information"
        ),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("secret"));
    for (url, why) in [
        ("gw.example.com", "it has no scheme"),
        ("https://gw.example.com/shop?x=1", "it has a query"),
        (
            "ftp://gw.example.com",
            "the scheme \"ftp\" is not http or https",
        ),
    ] {
        let o = expose(&env, url, &[]);
        assert_code(&o, 3);
        assert_eq!(stdout(&o), "");
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with(&format!("error: --verify-url \"{url}\": {why}")),
            "{err}"
        );
    }
    assert!(env.sb.requests().is_empty());
}

#[test]
fn with_wait_the_check_follows_the_rollout_and_an_open_path_outranks_a_stuck_rollout() {
    let stuck = || {
        unexposed_with(SandboxOptions {
            rollout: Rollout::Stuck,
            ..SandboxOptions::default()
        })
    };
    let wait = [
        "--image",
        "registry.example.com/web:2.0",
        "--wait",
        "--timeout",
        "1s",
    ];
    // Refused: the rollout's failure decides (7), and the check was still made.
    let env = stuck();
    let gate = Gate::start(Reply::Status(401));
    let o = expose(&env, &gate.url(), &wait);
    assert_code(&o, 7);
    assert!(stdout(&o).contains("auth enforced on shop.example.com/web/admin (HTTP 401)"));
    // Open: both failures are told, the rollout's first, and the exit code is 9.
    let env = stuck();
    let gate = Gate::start(Reply::Status(200));
    let o = expose(&env, &gate.url(), &wait);
    assert_code(&o, 9);
    let err = stderr(&o);
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 2, "{err}");
    assert!(
        errors[0].starts_with("error: timed out after 1s waiting for the rollout"),
        "{err}"
    );
    assert!(
        errors[1].starts_with("error: auth is not enforced: 2 of 2"),
        "{err}"
    );
    // The rollout was followed before the requests went out.
    let waited = err.find("Waiting for the rollout").unwrap();
    assert!(waited < err.find("Checking auth at").unwrap(), "{err}");
}

#[test]
fn a_signal_while_checking_stops_the_check_and_says_the_changes_were_applied() {
    let env = unexposed();
    let gate = Gate::start(Reply::Never);
    let args = gateway_args(
        &env,
        &["--verify-url", &gate.url(), "--request-timeout", "60s"],
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = Running::start(&env, &args);
    wait_until("the requests reach the gate", || gate.seen().len() == 2);
    run.signal("INT");
    let (code, out, err) = run.finish();
    assert_eq!(code, 130, "{err}");
    assert!(out.contains("recorded as revision 1"), "{out}");
    assert_eq!(
        err.lines().last().unwrap_or_default(),
        format!(
            "error: stopped checking auth at {}: the changes were applied, and whether the paths with scopes refuse requests without a token is not known",
            gate.url()
        )
    );
    assert_eq!(httproutes(&env).len(), 3);
}
