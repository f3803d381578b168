//! No credential ever reaches stdout or stderr.
//!
//! The kubeconfig's user carries the sandbox admin's bearer token (what authenticates the
//! runs) and a client certificate and key (a generated self-signed pair with a recognisable
//! common name; the sandbox does not ask for client certificates, so the runs keep working on
//! the token). Every scenario — success, dry run, `-o json`/`-o yaml`, the guard tripping,
//! conflicts exhausted, each failure kind (401, 403, 422, 500, dropped connection, timeout),
//! not found, bad flags, bad endpoints file, kubeconfig errors, an interrupt, a failing exec
//! credential plugin that was handed a secret and printed a token — runs with and without
//! `-v`, and neither stream may contain any 24-byte window of the token, the certificate, the
//! key, their base64 (as in the kubeconfig) or their DER. Proxy credentials (in the
//! kubeconfig's `proxy-url` or in `HTTPS_PROXY`) are secrets too: through a proxy that accepts
//! them, one that rejects them, one that refuses the tunnel, one that is down and a proxy URL
//! that is not valid, neither stream contains the password or the `Proxy-Authorization` value.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use sandbox_apiserver::{Fault, Identity, Trigger};
use serde_json::json;

const DEPLOY_PATH: &str = "/apis/apps/v1/namespaces/shop/deployments/web";
const HPA_PATH: &str = "/apis/autoscaling/v2/namespaces/shop/horizontalpodautoscalers/web";
/// Handed to an exec credential plugin as an argument (as `kubelogin --oidc-client-secret`).
const EXEC_SECRET: &str = "exec-client-secret-7f3a9c1e5b2d4f6a8c0e";
/// What that plugin prints on stdout before failing (a token).
const EXEC_TOKEN: &str = "printed-token-0d9e8f7a6b5c4d3e2f1a";

fn base64(bytes: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn unbase64(text: &str) -> Vec<u8> {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let vals: Vec<u32> = text
        .bytes()
        .filter_map(|c| T.iter().position(|&t| t == c).map(|p| p as u32))
        .collect();
    let mut out = Vec::new();
    for q in vals.chunks(4) {
        let n = q
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, v)| n | (v << (18 - 6 * i)));
        for i in 0..q.len().saturating_sub(1) {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    out
}

/// The body of a PEM block, decoded.
fn pem_der(pem: &str) -> Vec<u8> {
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    unbase64(&body)
}

struct Secrets {
    /// Byte strings none of whose 24-byte windows may appear in any output.
    needles: Vec<(String, Vec<u8>)>,
    kubeconfig: std::path::PathBuf,
}

fn secrets(env: &Env) -> Secrets {
    let token = env.sb.token(Identity::Admin);
    let (cert, key) = sandbox_apiserver::client_certificate("secret-test-client").unwrap();
    let cert_data = base64(cert.as_bytes());
    let key_data = base64(key.as_bytes());
    let original = std::fs::read_to_string(&env.kubeconfig).unwrap();
    let user = format!(
        "- name: sandbox-admin\n  user:\n    token: \"{token}\"\n    client-certificate-data: {cert_data}\n    client-key-data: {key_data}\n"
    );
    let mut text = original.replace(
        &format!("- name: sandbox-admin\n  user:\n    token: \"{token}\"\n"),
        &user,
    );
    assert_ne!(text, original, "the admin user was rewritten");
    // Extra users go at the end of the users list, before `preferences`.
    let prefs = text.find("preferences: {}").unwrap();
    let tail = text.split_off(prefs);
    // A user whose exec plugin is handed a secret and prints a token, then fails.
    text.push_str(&format!(
        "- name: exec-user\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: sh\n      args: [\"-c\", \"echo {EXEC_TOKEN}; echo 'login expired' >&2; exit 1\", \"--client-secret={EXEC_SECRET}\"]\n      interactiveMode: Never\n"
    ));
    // A user whose key data is not a key (recognisable bytes).
    let bad_key = base64(b"-----BEGIN PRIVATE KEY-----\nbad-key-material-55aa55aa55aa55aa55aa\n-----END PRIVATE KEY-----\n");
    text.push_str(&format!(
        "- name: bad-key-user\n  user:\n    client-certificate-data: {cert_data}\n    client-key-data: {bad_key}\n"
    ));
    text.push_str(&tail);
    text = text.replace(
        "current-context: sandbox\n",
        "- name: exec\n  context:\n    cluster: sandbox\n    user: exec-user\n    namespace: shop\n- name: bad-key\n  context:\n    cluster: sandbox\n    user: bad-key-user\n    namespace: shop\ncurrent-context: sandbox\n",
    );
    let kubeconfig = env.write_file("kubeconfig-with-secrets", &text);

    let mut needles: Vec<(String, Vec<u8>)> = vec![
        ("token".into(), token.clone().into_bytes()),
        ("token base64".into(), base64(token.as_bytes()).into_bytes()),
        ("certificate PEM".into(), cert.clone().into_bytes()),
        ("certificate DER".into(), pem_der(&cert)),
        ("certificate data".into(), cert_data.into_bytes()),
        ("key PEM".into(), key.clone().into_bytes()),
        ("key DER".into(), pem_der(&key)),
        ("key data".into(), key_data.into_bytes()),
        ("exec argument".into(), EXEC_SECRET.as_bytes().to_vec()),
        ("exec stdout".into(), EXEC_TOKEN.as_bytes().to_vec()),
        ("bad key data".into(), bad_key.into_bytes()),
        (
            "bad key material".into(),
            b"bad-key-material-55aa55aa55aa55aa55aa".to_vec(),
        ),
    ];
    // PEM bodies are also checked line by line (a message could quote one line).
    for (what, pem) in [("certificate", &cert), ("key", &key)] {
        for line in pem.lines().filter(|l| !l.starts_with("-----")) {
            needles.push((format!("{what} PEM line"), line.as_bytes().to_vec()));
        }
    }
    Secrets {
        needles,
        kubeconfig,
    }
}

const WINDOW: usize = 24;

fn assert_clean(s: &Secrets, what: &str, output: &[u8]) {
    for (name, secret) in &s.needles {
        let w = WINDOW.min(secret.len());
        for window in secret.windows(w) {
            if output.windows(w).any(|o| o == window) {
                panic!(
                    "{what}: the output contains {w} bytes of the {name}:\n{}",
                    String::from_utf8_lossy(output)
                );
            }
        }
    }
}

/// Runs the plugin with the secret-bearing kubeconfig, with and without `-v`; checks both
/// streams; returns the exit codes (for a sanity check that the scenario did what it says).
fn scenario(env: &Env, s: &Secrets, name: &str, args: &[&str], arm: &dyn Fn(&Env)) -> Vec<i32> {
    let mut codes = Vec::new();
    for verbose in [false, true] {
        arm(env);
        let mut c = plugin();
        c.arg("--kubeconfig").arg(&s.kubeconfig).args(args);
        if verbose {
            c.arg("-v");
        }
        let o = c.output().unwrap();
        let what = format!("{name}{}", if verbose { " -v" } else { "" });
        assert_clean(s, &format!("{what} stdout"), &o.stdout);
        assert_clean(s, &format!("{what} stderr"), &o.stderr);
        codes.push(code(&o));
        env.sb.clear_faults();
        env.sb.release_held();
    }
    codes
}

#[test]
fn no_token_certificate_or_key_bytes_reach_any_output() {
    let env = Env::new();
    let s = secrets(&env);
    let none = |_: &Env| {};
    let mut ran = 0;
    let mut check = |name: &str, args: &[&str], arm: &dyn Fn(&Env), want: &[i32]| {
        let codes = scenario(&env, &s, name, args, arm);
        for c in &codes {
            assert!(
                want.contains(c),
                "{name}: exit {c}, expected one of {want:?}"
            );
        }
        ran += codes.len();
    };

    // Success, with every output format, and a dry run.
    check("success", &["web", "--max", "9", "--yes"], &none, &[0]);
    check(
        "success json",
        &["web", "--max", "10", "--yes", "-o", "json"],
        &none,
        &[0],
    );
    check(
        "dry run yaml",
        &["web", "--max", "11", "--dry-run", "-o", "yaml"],
        &none,
        &[0],
    );
    check(
        "dry run diff",
        &[
            "web",
            "--image",
            "registry.example.com/web:9",
            "--dry-run",
            "--color",
            "always",
        ],
        &none,
        &[0],
    );
    // The guard trips.
    check(
        "guard trip",
        &["web", "--image", "registry.example.com/web:2.0", "--yes"],
        &|e: &Env| {
            e.sb.inject(Fault::CompetingWrite {
                object_path: DEPLOY_PATH.into(),
                after: Trigger::Read,
                mutate: Box::new(|d| {
                    let img = d["spec"]["template"]["spec"]["containers"][0]["image"]
                        .as_str()
                        .unwrap()
                        .to_owned();
                    d["spec"]["template"]["spec"]["containers"][0]["image"] =
                        json!(format!("{img}-hotfix"));
                }),
            })
        },
        &[5],
    );
    // Conflicts exhausted.
    check(
        "conflicts exhausted",
        &["web", "--max", "12", "--yes", "--retries", "2"],
        &|e: &Env| {
            e.sb.inject(Fault::Conflicts {
                object_path: HPA_PATH.into(),
                count: 10,
            })
        },
        &[1],
    );
    // Every failure kind the server can answer with, on the read and on the write.
    for status in [401u16, 403, 422, 500] {
        for (step, dry_run) in [("read", None), ("write", Some(false))] {
            let fault = move || {
                let f = Fault::Status {
                    method: Some(if dry_run.is_some() { "PATCH" } else { "GET" }.into()),
                    path_prefix: HPA_PATH.into(),
                    status,
                    count: 1,
                };
                match dry_run {
                    Some(d) => Fault::Restrict {
                        dry_run: d,
                        fault: Box::new(f),
                    },
                    None => f,
                }
            };
            check(
                &format!("{status} on the {step}"),
                &["web", "--max", "13", "--yes", "-o", "json"],
                &|e: &Env| e.sb.inject(fault()),
                &[1],
            );
        }
    }
    check(
        "dropped connection",
        &["web", "--max", "14", "--yes"],
        &|e: &Env| {
            e.sb.inject(Fault::Restrict {
                dry_run: false,
                fault: Box::new(Fault::DropConnection {
                    method: Some("PATCH".into()),
                    path_prefix: HPA_PATH.into(),
                    count: 1,
                }),
            })
        },
        &[6],
    );
    check(
        "timeout",
        &["web", "--max", "15", "--yes", "--request-timeout", "1s"],
        &|e: &Env| {
            e.sb.inject(Fault::Hold {
                method: Some("GET".into()),
                path_prefix: HPA_PATH.into(),
                count: 1,
            })
        },
        &[1],
    );
    // Input and kubeconfig errors.
    check(
        "not found",
        &["shop-api", "--max", "3", "--yes"],
        &none,
        &[1],
    );
    check("bad flag", &["web", "--min", "0"], &none, &[3]);
    let bad = env.write_file("bad.yaml", "endpoints:\n  - path: /a;b\n");
    check(
        "bad endpoints",
        &["web", "--endpoints", bad.to_str().unwrap()],
        &none,
        &[3],
    );
    check(
        "unknown context",
        &["web", "--max", "3", "--context", "prod"],
        &none,
        &[3],
    );
    check(
        "failing exec plugin",
        &["web", "--max", "3", "--context", "exec"],
        &none,
        &[1, 3],
    );
    check(
        "unusable client key",
        &["web", "--max", "3", "--context", "bad-key"],
        &none,
        &[1, 3],
    );
    check(
        "readonly (403 on the write)",
        &[
            "web",
            "--max",
            "3",
            "--yes",
            "--context",
            "sandbox-readonly",
        ],
        &none,
        &[1],
    );

    // An interrupt while a write is in flight.
    for verbose in [false, true] {
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("kubectl-appupdate"));
        scrub(&mut cmd);
        cmd.arg("--kubeconfig")
            .arg(&s.kubeconfig)
            .args(["web", "--max", if verbose { "17" } else { "16" }, "--yes"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if verbose {
            cmd.arg("-v");
        }
        // The previous scenario's held request may still be on its way out.
        let deadline = Instant::now() + Duration::from_secs(60);
        while env.sb.held() != 0 {
            assert!(Instant::now() < deadline, "nothing held");
            std::thread::sleep(Duration::from_millis(10));
        }
        env.sb.inject(Fault::Restrict {
            dry_run: false,
            fault: Box::new(Fault::Hold {
                method: Some("PATCH".into()),
                path_prefix: HPA_PATH.into(),
                count: 1,
            }),
        });
        let mut child = cmd.spawn().unwrap();
        let err = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
        std::thread::spawn(move || {
            use std::io::BufRead;
            let mut r = std::io::BufReader::new(err);
            loop {
                let mut line = Vec::new();
                match r.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        while env.sb.held() == 0 {
            assert!(Instant::now() < deadline, "the write is held");
            std::thread::sleep(Duration::from_millis(10));
        }
        let st = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
        // Let the write go once the plugin says it has the signal.
        let mut errout: Vec<u8> = Vec::new();
        while !String::from_utf8_lossy(&errout).contains("interrupt received") {
            let line = rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .expect("the plugin acknowledges the signal");
            errout.extend(line);
        }
        env.sb.release_held();
        let o = child.wait_with_output().unwrap();
        errout.extend(rx.iter().flatten());
        assert_eq!(code(&o), 143, "{}", String::from_utf8_lossy(&errout));
        assert_clean(&s, "interrupt stdout", &o.stdout);
        assert_clean(&s, "interrupt stderr", &errout);
        ran += 1;
    }
    println!("secrets: {ran} runs, no credential bytes in any output");
}

/// The proxy's password (24 bytes or more, for the window check).
const PROXY_PASSWORD: &str = "proxy-password-4e1d2c3b5a69788f";
const PROXY_USER: &str = "proxy-user-9a8b7c";

#[test]
fn no_proxy_credentials_reach_any_output() {
    use test_proxies::{Kind, Options, TestProxy};
    let env = Env::new();
    let creds = Some((PROXY_USER.to_owned(), PROXY_PASSWORD.to_owned()));
    let accepting = TestProxy::start(
        Kind::Http,
        Options {
            credentials: creds.clone(),
            ..Options::default()
        },
    )
    .unwrap();
    let socks = TestProxy::start(
        Kind::Socks5,
        Options {
            credentials: creds,
            ..Options::default()
        },
    )
    .unwrap();
    let refusing = TestProxy::start(
        Kind::Http,
        Options {
            refuse_with: Some(403),
            ..Options::default()
        },
    )
    .unwrap();
    let basic = base64(format!("{PROXY_USER}:{PROXY_PASSWORD}").as_bytes());
    let s = Secrets {
        needles: vec![
            ("proxy password".into(), PROXY_PASSWORD.as_bytes().to_vec()),
            ("proxy Basic credentials".into(), basic.into_bytes()),
        ],
        kubeconfig: env.kubeconfig.clone(),
    };
    let yaml = env.sb.kubeconfig_yaml(NS);
    let server = format!("    server: \"{}\"\n", env.sb.url());
    let with = |name: &str, server_line: &str, extra: String| {
        env.write_file(
            name,
            &yaml.replace(&server, &format!("{server_line}{extra}")),
        )
    };
    let non_loopback = format!(
        "    server: \"{}\"\n    tls-server-name: localhost\n",
        env.sb.url().replace("127.0.0.1", "0.0.0.0")
    );
    let down = test_proxies::closed_port().unwrap();
    let url = |p: &TestProxy, password: &str| p.url_with_credentials(PROXY_USER, password);
    let cases: Vec<(&str, std::path::PathBuf, Option<String>, i32)> = vec![
        (
            "proxy-url accepted",
            with(
                "kc-1",
                &server,
                format!("    proxy-url: {}\n", url(&accepting, PROXY_PASSWORD)),
            ),
            None,
            0,
        ),
        (
            "SOCKS5 proxy-url accepted",
            with(
                "kc-2",
                &server,
                format!("    proxy-url: {}\n", url(&socks, PROXY_PASSWORD)),
            ),
            None,
            0,
        ),
        (
            "HTTPS_PROXY accepted",
            with("kc-3", &non_loopback, String::new()),
            Some(url(&accepting, PROXY_PASSWORD)),
            0,
        ),
        (
            "HTTPS_PROXY with a password the proxy rejects (407)",
            with("kc-3", &non_loopback, String::new()),
            Some(url(&accepting, &format!("{PROXY_PASSWORD}-wrong"))),
            1,
        ),
        (
            "SOCKS5 with a password the proxy rejects",
            with(
                "kc-4",
                &server,
                format!(
                    "    proxy-url: {}\n",
                    url(&socks, &format!("{PROXY_PASSWORD}-wrong"))
                ),
            ),
            None,
            1,
        ),
        (
            "a proxy that refuses the tunnel",
            with(
                "kc-5",
                &server,
                format!("    proxy-url: {}\n", url(&refusing, PROXY_PASSWORD)),
            ),
            None,
            1,
        ),
        (
            "a proxy that is down",
            with(
                "kc-6",
                &server,
                format!("    proxy-url: http://{PROXY_USER}:{PROXY_PASSWORD}@127.0.0.1:{down}\n"),
            ),
            None,
            1,
        ),
        (
            "a proxy-url that is not valid",
            with(
                "kc-7",
                &server,
                format!("    proxy-url: gopher://{PROXY_USER}:{PROXY_PASSWORD}@proxy:70\n"),
            ),
            None,
            3,
        ),
    ];
    for (name, kubeconfig, https_proxy, want) in &cases {
        for verbose in [false, true] {
            let mut c = plugin();
            c.arg("--kubeconfig").arg(kubeconfig).args([
                "web",
                "--max",
                "7",
                "--dry-run",
                "-o",
                "json",
            ]);
            if let Some(p) = https_proxy {
                c.env("HTTPS_PROXY", p);
            }
            if verbose {
                c.arg("-v");
            }
            let o = c.output().unwrap();
            let what = format!("{name}{}", if verbose { " -v" } else { "" });
            assert_eq!(code(&o), *want, "{what}: {}", stderr(&o));
            assert_clean(&s, &format!("{what} stdout"), &o.stdout);
            assert_clean(&s, &format!("{what} stderr"), &o.stderr);
        }
    }
    // The runs did reach the proxies with the credentials (the check above is not vacuous).
    assert!(
        accepting
            .stats()
            .credentials
            .contains(&Some(format!("{PROXY_USER}:{PROXY_PASSWORD}")))
    );
    assert!(socks.stats().tunnels >= 2);
}

#[test]
fn the_window_check_would_see_a_leak() {
    let env = Env::new();
    let s = secrets(&env);
    let token = env.sb.token(Identity::Admin);
    let leaked = format!("error: Authorization: Bearer {}", &token[10..40]);
    let caught = std::panic::catch_unwind(|| assert_clean(&s, "self-test", leaked.as_bytes()));
    assert!(caught.is_err());
    let (_, key) = (0, s.needles.iter().find(|(n, _)| n == "key DER").unwrap());
    let mut out = b"binary: ".to_vec();
    out.extend_from_slice(&key.1[5..40]);
    assert!(std::panic::catch_unwind(|| assert_clean(&s, "self-test", &out)).is_err());
}
