//! The fault matrix: for each step of a run (kubeconfig load, read round, dry-run round, each
//! write round) and each fault (connection refused, connection reset mid-response, connection
//! dropped before any answer, timeout, 500, a 503 storm, 401, 403, 422), the exit code, the
//! one-line message, and the cluster state: before the first write nothing changed; after it,
//! the report lists exactly what was applied and the cluster agrees.
//!
//! One plan exercises three write rounds, a chain of paths moving between scope groups: an image
//! change and an Ingress create (round 1), the public Ingress's update that gives `/unprotected`
//! to the created one and takes `/protected/user` (round 2: after the create), and the user
//! Ingress's delete (round 3: after the update). A fault aimed at a real write is wrapped in
//! `Fault::Restrict { dry_run: false }` so the preflight passes.
//!
//! The client retries 429/503/504 by itself below the conflict handling (kube's retry layer with
//! our bounds, `transport::retry_layer`: 4 retries from 100 ms, doubling, capped
//! at 2 s, or the server's `Retry-After`). So a 503 burst within that budget is absorbed
//! (`a_503_burst_within_the_clients_retries…`), and a storm beyond it fails after 5 attempts
//! with the server's answer — in seconds, not the minutes kube's default policy would take.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::fmt::Write as _;

use common::*;
use sandbox_apiserver::Fault;

const DEPLOY_PATH: &str = "/apis/apps/v1/namespaces/shop/deployments/web";
const INGRESSES: &str = "/apis/networking.k8s.io/v1/namespaces/shop/ingresses";
const PUBLIC: &str = "web-e3b0c44298fc1c14"; // updated (round 2)
const USER: &str = "web-04f8996da763b7a9"; // deleted (round 3)
const ADMIN_USER: &str = "web-4f515e078b8f8861"; // created (round 1)
const NEW_IMAGE: &str = "registry.example.com/web:2.0";

const ENDPOINTS: &str = "endpoints:
  - path: /health
  - path: /protected/user
  - path: /unprotected
    scopes: [admin, user]
";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Step {
    Read,
    DryRun,
    /// Write round 1: the Deployment patch (the Ingress create runs beside it).
    Write1,
    /// Write round 2: the Ingress update.
    Write2,
    /// Write round 3: the Ingress delete.
    Write3,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// The request is processed, then the connection is cut halfway through the answer.
    ResetMidResponse,
    /// The connection is closed before any answer; the request is not processed.
    Dropped,
    /// No answer at all; `--request-timeout 2s` ends the wait.
    Timeout,
    Status500,
    /// 503 on every attempt: more than the client retries; it gives up after 5 attempts.
    Storm503,
    Status401,
    Status403,
    Status422,
}

const KINDS: [Kind; 8] = [
    Kind::ResetMidResponse,
    Kind::Dropped,
    Kind::Timeout,
    Kind::Status500,
    Kind::Storm503,
    Kind::Status401,
    Kind::Status403,
    Kind::Status422,
];

fn ingress(name: &str) -> String {
    format!("{INGRESSES}/{name}")
}

/// Method and path of the request a step's fault hits.
fn aim(step: Step) -> (&'static str, String) {
    match step {
        Step::Read | Step::DryRun | Step::Write1 => (
            if step == Step::Read { "GET" } else { "PATCH" },
            DEPLOY_PATH.to_owned(),
        ),
        Step::Write2 => ("PATCH", ingress(PUBLIC)),
        Step::Write3 => ("DELETE", ingress(USER)),
    }
}

fn fault(step: Step, kind: Kind) -> Fault {
    let (method, path) = aim(step);
    let method = Some(method.to_owned());
    let status = |status: u16, count: u32| Fault::Status {
        method: method.clone(),
        path_prefix: path.clone(),
        status,
        count,
    };
    let inner = match kind {
        Kind::ResetMidResponse => Fault::DropMidResponse {
            method: method.clone(),
            path_prefix: path.clone(),
            count: 1,
        },
        Kind::Dropped => Fault::DropConnection {
            method: method.clone(),
            path_prefix: path.clone(),
            count: 1,
        },
        Kind::Timeout => Fault::Hold {
            method: method.clone(),
            path_prefix: path.clone(),
            count: 1,
        },
        Kind::Status500 => status(500, 1),
        Kind::Storm503 => status(503, 10_000),
        Kind::Status401 => status(401, 1),
        Kind::Status403 => status(403, 1),
        Kind::Status422 => status(422, 1),
    };
    match step {
        Step::Read => inner,
        Step::DryRun => Fault::Restrict {
            dry_run: true,
            fault: Box::new(inner),
        },
        _ => Fault::Restrict {
            dry_run: false,
            fault: Box::new(inner),
        },
    }
}

fn timeout_flag(kind: Kind) -> &'static str {
    match kind {
        Kind::Timeout => "2s",
        _ => "60s",
    }
}

/// The four objects the plan changes, as the test compares them.
#[derive(Debug, PartialEq, Clone)]
struct State {
    image: String,
    public_paths: Vec<String>,
    user_exists: bool,
    admin_exists: bool,
}

fn state(env: &Env) -> State {
    State {
        image: env.image(),
        public_paths: env
            .sb
            .get(&ingress(PUBLIC))
            .map(|i| paths_of(&i))
            .unwrap_or_default(),
        user_exists: env.sb.get(&ingress(USER)).is_some(),
        admin_exists: env.sb.get(&ingress(ADMIN_USER)).is_some(),
    }
}

fn initial() -> State {
    State {
        image: "registry.example.com/web:1.0".into(),
        public_paths: vec!["/web/health".into(), "/web/unprotected".into()],
        user_exists: true,
        admin_exists: false,
    }
}

/// State after the writes of rounds before `step`, plus the faulted write when it was processed.
fn expected_state(step: Step, kind: Kind) -> State {
    let processed = kind == Kind::ResetMidResponse;
    let mut s = initial();
    let round = match step {
        Step::Read | Step::DryRun => return s,
        Step::Write1 => 1,
        Step::Write2 => 2,
        Step::Write3 => 3,
    };
    // Round 1: the create always lands (it runs beside the Deployment patch).
    s.admin_exists = true;
    if round > 1 || processed {
        s.image = NEW_IMAGE.into();
    }
    if round > 2 || (round == 2 && processed) {
        s.public_paths = vec!["/web/health".into(), "/web/protected/user".into()];
    }
    if round == 3 && processed {
        s.user_exists = false;
    }
    s
}

/// What the one-line message must say for a fault (lower-cased substring).
fn message_says(kind: Kind, verb: &str) -> String {
    match kind {
        Kind::ResetMidResponse | Kind::Dropped => {
            "the connection was closed before the response arrived".into()
        }
        // Our bound or the transport's read timeout (both set to --request-timeout) fires first.
        Kind::Timeout => "timed out".into(),
        Kind::Storm503 => "the cluster answered 503 serviceunavailable".into(),
        Kind::Status500 => "the cluster answered 500 internalerror".into(),
        Kind::Status401 => {
            "rejected the credentials of context \"sandbox\" (401 unauthorized)".into()
        }
        Kind::Status403 => format!("forbidden: you cannot {verb}"),
        Kind::Status422 => "the cluster rejected the change to".into(),
    }
}

struct Case {
    step: Step,
    kind: Kind,
    code: i32,
    line: String,
}

fn run_case(step: Step, kind: Kind) -> Case {
    run_case_on(Env::new(), step, kind)
}

fn run_case_on(env: Env, step: Step, kind: Kind) -> Case {
    let file = env.write_file("endpoints.yaml", ENDPOINTS);
    env.sb.inject(fault(step, kind));
    let o = env.run(&[
        "web",
        "--image",
        NEW_IMAGE,
        "--endpoints",
        file.to_str().unwrap(),
        "--yes",
        "--color",
        "never",
        "--request-timeout",
        timeout_flag(kind),
    ]);
    let (out, err) = (stdout(&o), stderr(&o));
    let log: Vec<String> = env
        .sb
        .requests()
        .iter()
        .map(|r| {
            format!(
                "{} {} {} {:?} {}",
                r.method, r.path, r.status, r.fault, r.http_version
            )
        })
        .collect();
    let ctx = format!(
        "{step:?} × {kind:?}\n--- stdout\n{out}\n--- stderr\n{err}\n--- requests\n{}",
        log.join("\n")
    );
    if kind == Kind::Timeout {
        env.sb.release_held();
    }
    let code = code(&o);
    let (_, path) = aim(step);
    let verb = match step {
        Step::Read => "get",
        Step::Write3 => "delete",
        _ => "patch",
    };
    let want = message_says(kind, verb);
    let writes = env.writes();
    let line = match step {
        Step::Read => {
            assert_eq!(code, 1, "{ctx}");
            let e = err.trim();
            assert_eq!(e.lines().count(), 1, "one line: {ctx}");
            assert!(e.starts_with("error: "), "{ctx}");
            assert!(e.to_lowercase().contains(&want), "wants {want:?}: {ctx}");
            if kind != Kind::Status401 {
                assert!(e.contains("deployment.apps/web"), "names the object: {ctx}");
            }
            assert!(out.is_empty(), "no plan was shown: {ctx}");
            e.to_owned()
        }
        Step::DryRun => {
            assert_eq!(code, 1, "{ctx}");
            let l = err
                .lines()
                .find(|l| l.starts_with("deployment.apps/web NOT updated: "))
                .unwrap_or_else(|| panic!("report line: {ctx}"));
            assert!(l.to_lowercase().contains(&want), "wants {want:?}: {ctx}");
            assert!(err.contains("Nothing was changed."), "{ctx}");
            assert!(
                !err.contains("MAYBE"),
                "a dry run never changes anything: {ctx}"
            );
            l.to_owned()
        }
        Step::Write1 | Step::Write2 | Step::Write3 => {
            assert_eq!(code, 6, "{ctx}");
            let (reference, past) = match step {
                Step::Write1 => ("deployment.apps/web", "updated"),
                Step::Write2 => (
                    &*format!("ingress.networking.k8s.io/{PUBLIC}").leak(),
                    "updated",
                ),
                _ => (
                    &*format!("ingress.networking.k8s.io/{USER}").leak(),
                    "deleted",
                ),
            };
            let unknown = matches!(kind, Kind::ResetMidResponse | Kind::Dropped | Kind::Timeout);
            let prefix = if unknown {
                format!("{reference} MAYBE {past}: ")
            } else {
                format!("{reference} NOT {past}: ")
            };
            let l = err
                .lines()
                .find(|l| l.starts_with(&prefix))
                .unwrap_or_else(|| panic!("wants {prefix:?}: {ctx}"));
            assert!(l.to_lowercase().contains(&want), "wants {want:?}: {ctx}");
            // Exactly what was applied, and nothing after the failed round.
            let applied =
                |r: &str, p: &str| out.lines().any(|l| l.starts_with(&format!("{r} {p}")));
            let not_attempted =
                |r: &str, p: &str| err.contains(&format!("{r} NOT {p}: not attempted"));
            let dep = "deployment.apps/web";
            let (pub_, usr, adm) = (
                format!("ingress.networking.k8s.io/{PUBLIC}"),
                format!("ingress.networking.k8s.io/{USER}"),
                format!("ingress.networking.k8s.io/{ADMIN_USER}"),
            );
            assert!(applied(&adm, "created"), "{ctx}");
            match step {
                Step::Write1 => {
                    assert!(not_attempted(&pub_, "updated"), "{ctx}");
                    assert!(not_attempted(&usr, "deleted"), "{ctx}");
                }
                Step::Write2 => {
                    assert!(applied(dep, "updated"), "{ctx}");
                    assert!(not_attempted(&usr, "deleted"), "{ctx}");
                }
                _ => {
                    assert!(applied(dep, "updated"), "{ctx}");
                    assert!(applied(&pub_, "updated"), "{ctx}");
                }
            }
            assert!(err.contains("The application is partly updated:"), "{ctx}");
            l.to_owned()
        }
    };
    if matches!(step, Step::Read | Step::DryRun) {
        assert!(writes.is_empty(), "nothing was written: {writes:?}\n{ctx}");
    }
    assert_eq!(state(&env), expected_state(step, kind), "{ctx}");
    let _ = path;
    Case {
        step,
        kind,
        code,
        line,
    }
}

fn table(cases: &[Case]) -> String {
    let mut t = String::new();
    for c in cases {
        let _ = writeln!(
            t,
            "| {:?} | {:?} | {} | {} |",
            c.step, c.kind, c.code, c.line
        );
    }
    t
}

fn run_step(step: Step) {
    let cases: Vec<Case> = KINDS.iter().map(|&k| run_case(step, k)).collect();
    // `cargo nextest run --test it fault_matrix_e2e:: --no-capture` prints the table.
    println!("{}", table(&cases));
}

#[test]
fn faults_in_the_read_round_change_nothing_and_say_so_in_one_line() {
    run_step(Step::Read);
}

#[test]
fn faults_in_the_dry_run_round_change_nothing_and_say_so() {
    run_step(Step::DryRun);
}

#[test]
fn faults_in_the_first_write_round_are_reported_exactly() {
    run_step(Step::Write1);
}

#[test]
fn faults_in_the_second_write_round_are_reported_exactly() {
    run_step(Step::Write2);
}

#[test]
fn faults_in_the_third_write_round_are_reported_exactly() {
    run_step(Step::Write3);
}

/// The same connection faults when the server speaks only HTTP/1.1 (the plugin's fallback
/// transport): a TLS connection closed mid-response is not a "TLS failure".
#[test]
fn connection_faults_over_http1_read_the_same() {
    for step in [Step::Read, Step::DryRun, Step::Write1] {
        for kind in [Kind::ResetMidResponse, Kind::Dropped, Kind::Timeout] {
            let env = Env::with_options(sandbox_apiserver::SandboxOptions {
                http1_only: true,
                ..Default::default()
            });
            let case = run_case_on(env, step, kind);
            println!("HTTP/1.1 {}", table(&[case]).trim());
        }
    }
}

#[test]
fn connection_refused_before_the_first_request_is_one_line_and_changes_nothing() {
    // A port that was just free: bind, note it, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let env = Env::new();
    let kc = std::fs::read_to_string(&env.kubeconfig)
        .unwrap()
        .replace(env.sb.url(), &format!("https://127.0.0.1:{port}"));
    let kc = env.write_file("refused", &kc);
    let o = plugin()
        .arg("--kubeconfig")
        .arg(&kc)
        .args([
            "web",
            "--image",
            NEW_IMAGE,
            "--yes",
            "--request-timeout",
            "60s",
        ])
        .output()
        .unwrap();
    assert_code(&o, 1);
    assert_eq!(
        stderr(&o).trim(),
        "error: cannot reach the cluster of context \"sandbox\" for deployment.apps/web: connection refused"
    );
    assert_eq!(state(&env), initial());
}

#[test]
fn kubeconfig_load_failures_send_no_request() {
    // The kubeconfig step makes no request: every way it fails is exit 3 with nothing sent.
    // (Each failure kind, with its exact message, is in tests/corpus/kubeconfig.)
    let env = Env::new();
    for (name, text) in [
        ("bad-yaml", "apiVersion: v1\nkind: Config\nclusters: [\n"),
        (
            "no-context",
            "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n",
        ),
    ] {
        let kc = env.write_file(name, text);
        let o = plugin()
            .arg("--kubeconfig")
            .arg(&kc)
            .args(["web", "--image", NEW_IMAGE, "--yes"])
            .output()
            .unwrap();
        assert_code(&o, 3);
        assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
    }
    assert!(env.sb.requests().is_empty());
}

#[test]
fn a_503_burst_within_the_clients_retries_is_absorbed() {
    let env = Env::new();
    env.sb.inject(Fault::Status {
        method: Some("GET".into()),
        path_prefix: DEPLOY_PATH.into(),
        status: 503,
        count: 3,
    });
    let o = env.run(&["web", "--image", NEW_IMAGE, "--yes"]);
    assert_code(&o, 0);
    assert_eq!(env.image(), NEW_IMAGE);
    let gets = env
        .sb
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path == DEPLOY_PATH)
        .count();
    assert_eq!(gets, 4, "three 503s, then the fourth attempt succeeds");
}

/// A 503 storm without `--request-timeout`: the client gives up after 5 attempts (kube's own
/// default would make 16 over several minutes) and the run fails with the server's answer,
/// nothing changed.
#[test]
fn a_503_storm_without_a_timeout_fails_after_5_attempts() {
    let env = Env::new();
    env.sb.inject(Fault::Status {
        method: Some("GET".into()),
        path_prefix: DEPLOY_PATH.into(),
        status: 503,
        count: 16,
    });
    let o = env.run(&["web", "--image", NEW_IMAGE, "--yes"]);
    assert_code(&o, 1);
    assert!(
        stderr(&o).contains("the cluster answered 503 ServiceUnavailable"),
        "{}",
        stderr(&o)
    );
    let gets = env
        .sb
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path == DEPLOY_PATH)
        .count();
    assert_eq!(gets, 5);
    assert!(env.writes().is_empty());
}
