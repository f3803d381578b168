//! Fuzzing on the stable toolchain: proptest-driven, with a case count in CI and a time budget
//! outside it. (cargo-fuzz needs nightly's sanitizers; this project builds with stable only.)
//!
//! Targets — every parser fed by users or by clients of the sandbox:
//! * the endpoints file parser: arbitrary bytes, YAML-shaped token noise, and mutations of the
//!   bad-input corpus and of valid files (byte flips, inserted tokens, deleted ranges);
//! * the command line: arbitrary argument vectors through clap and `Settings::resolve` (with
//!   a fuzzed endpoints file behind `--endpoints`);
//! * durations (`--request-timeout`, `--timeout`) and image references (`--image`);
//! * kubeconfig YAML through kube's parser and our error translation;
//! * the sandbox's label and field selector parsers (`?labelSelector=`, `?fieldSelector=`),
//!   and matching a parsed selector against arbitrary labels.
//!
//! Properties: never a panic (a panic is a crash); every error is one line (and, for the
//! endpoints file, starts with `FILE:LINE:`); accepted paths and scopes carry no nginx syntax.
//!
//! CI: `cargo nextest run --test it fuzz::` (2 000 cases per target, 500 for corpus mutations).
//! Long: `FUZZ_SECONDS=600 cargo nextest run --test it fuzz:: --no-capture` (that many seconds per
//! target; prints executions and crashes per target).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use appupdate_model::endpoints_file;
use appupdate_plan::updaters::validate_image_reference;
use appupdate_shell::cli::{Cli, parse_duration};
use appupdate_shell::settings::{Environment, FileReader, Settings};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use sandbox_apiserver::{FieldSelector, LabelSelector};

const CI_CASES: u32 = 2_000;

/// Runs `check` on values of `strategy`: `CI_CASES` of them, or batches until `FUZZ_SECONDS`
/// run out. A panic or a failed property fails the test with the input (shrunk).
fn fuzz<S: Strategy>(name: &str, strategy: S, check: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: std::fmt::Debug,
{
    fuzz_n(name, CI_CASES, strategy, check);
}

/// [`fuzz`] with its own CI case count (for slow targets).
fn fuzz_n<S: Strategy>(
    name: &str,
    ci_cases: u32,
    strategy: S,
    check: impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S::Value: std::fmt::Debug,
{
    let seconds: Option<u64> = std::env::var("FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok());
    let deadline = seconds.map(|s| Instant::now() + Duration::from_secs(s));
    let executions = AtomicU64::new(0);
    loop {
        let mut runner = TestRunner::new(Config {
            cases: if deadline.is_some() { 10_000 } else { ci_cases },
            failure_persistence: None,
            max_shrink_iters: 10_000,
            ..Config::default()
        });
        let result = runner.run(&strategy, |v| {
            executions.fetch_add(1, Ordering::Relaxed);
            check(v)
        });
        match result {
            Ok(()) => {}
            Err(TestError::Fail(why, input)) => panic!(
                "fuzz {name}: crash or property failure after {} executions: {why}; minimal input: {input:?}",
                executions.load(Ordering::Relaxed)
            ),
            Err(e) => panic!("fuzz {name}: {e}"),
        }
        if deadline.is_none_or(|d| Instant::now() >= d) {
            break;
        }
    }
    println!(
        "fuzz {name}: {} executions, 0 crashes",
        executions.load(Ordering::Relaxed)
    );
}

fn one_line(s: &str) -> bool {
    !s.contains('\n') && !s.contains('\r')
}

/// What the parser accepted carries nothing nginx reads specially.
fn check_accepted(file: &endpoints_file::EndpointsFile) -> Result<(), TestCaseError> {
    for e in &file.endpoints {
        prop_assert!(e.path.starts_with('/'));
        for s in std::iter::once(&e.path).chain(&e.scopes) {
            prop_assert!(
                !s.chars().any(|c| !c.is_ascii()
                    || c.is_ascii_control()
                    || c.is_whitespace()
                    || ";\"'`{}$#\\%()*+?[]^|<>".contains(c)),
                "{:?}",
                s
            );
        }
    }
    Ok(())
}

fn check_endpoints(text: &str) -> Result<(), TestCaseError> {
    match endpoints_file::parse(text, "fuzz.yaml") {
        Ok(file) => check_accepted(&file),
        Err(e) => {
            let line = e.to_string();
            prop_assert!(line.starts_with("fuzz.yaml:"), "{}", line);
            prop_assert!(one_line(&line), "{:?}", line);
            // YAML's line breaks: LF, CRLF and a lone CR.
            let lines = 1 + text.matches('\n').count() + text.matches('\r').count()
                - text.matches("\r\n").count();
            prop_assert!(e.line >= 1 && e.line <= lines, "{:?} ({} lines)", e, lines);
            Ok(())
        }
    }
}

const TOKENS: &[&str] = &[
    "endpoints",
    "path",
    "scopes",
    ":",
    ": ",
    "-",
    "- ",
    "[",
    "]",
    "{",
    "}",
    ",",
    " ",
    "  ",
    "\n",
    "\t",
    "/a",
    "/b/",
    "'",
    "\"",
    "&a ",
    "*a",
    "!!str ",
    "!!binary ",
    "#",
    "? ",
    "---\n",
    "...\n",
    "<<: ",
    "~",
    "null",
    "true",
    "1e3",
    ".inf",
    "0x1F",
    "|\n",
    ">-\n",
    "%YAML 1.2\n",
    "\\",
    "é",
    "\u{0}",
    "\u{feff}",
    ";",
    "$",
    "..",
    "//",
    "%2F",
    "\u{2028}",
    "\r\n",
    "user",
    "orders:read",
    "https://x/y",
    "!",
    "@",
    "=",
    "&",
];

/// Seeds for mutation: the corpus and a few valid files.
fn seeds() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/endpoints");
    let mut v: Vec<Vec<u8>> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| std::fs::read(p).unwrap())
        .filter(|b| b.len() < 4096)
        .collect();
    v.push(
        b"endpoints:\n  - path: /unprotected\n  - path: /protected/user\n    scopes: [user]\n  - path: /protected/admin\n    scopes: [user, admin]\n"
            .to_vec(),
    );
    v.push(
        b"endpoints:\n- path: /a\n  scopes:\n  - orders:read\n  - https://x.example/auth\n"
            .to_vec(),
    );
    v.push(b"{\"endpoints\": [{\"path\": \"/a\"}, {\"path\": \"/b\", \"scopes\": []}]}\n".to_vec());
    v
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Insert(usize, &'static str),
    Delete(usize, usize),
    Duplicate(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), prop::sample::select(TOKENS)).prop_map(|(i, t)| Mutation::Insert(i, t)),
        (any::<usize>(), 0usize..16).prop_map(|(i, n)| Mutation::Delete(i, n)),
        (any::<usize>(), 0usize..32).prop_map(|(i, n)| Mutation::Duplicate(i, n)),
    ]
}

fn mutate(seed: &[u8], muts: &[Mutation]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for m in muts {
        let at = |i: usize, len: usize| if len == 0 { 0 } else { i % (len + 1) };
        match m {
            Mutation::Flip(i, x) if !b.is_empty() => {
                let i = i % b.len();
                b[i] ^= x;
            }
            Mutation::Flip(..) => {}
            Mutation::Insert(i, t) => {
                let i = at(*i, b.len());
                b.splice(i..i, t.bytes());
            }
            Mutation::Delete(i, n) => {
                let i = at(*i, b.len());
                let end = (i + n).min(b.len());
                b.drain(i..end);
            }
            Mutation::Duplicate(i, n) => {
                let i = at(*i, b.len());
                let end = (i + n).min(b.len());
                let chunk = b[i..end].to_vec();
                b.splice(end..end, chunk);
            }
        }
    }
    b
}

#[test]
fn endpoints_parser_arbitrary_bytes() {
    fuzz(
        "endpoints parser (bytes)",
        prop::collection::vec(any::<u8>(), 0..1024),
        |bytes| check_endpoints(&String::from_utf8_lossy(&bytes)),
    );
}

#[test]
fn endpoints_parser_yaml_noise() {
    fuzz(
        "endpoints parser (YAML tokens)",
        prop::collection::vec(prop::sample::select(TOKENS), 0..80),
        |tokens| check_endpoints(&tokens.concat()),
    );
}

#[test]
fn endpoints_parser_corpus_mutations() {
    let seeds = seeds();
    let n = seeds.len();
    // Some seeds (the alias bomb) hit the parser's limits on every mutation: slower.
    fuzz_n(
        "endpoints parser (corpus mutations)",
        500,
        (0..n, prop::collection::vec(mutation(), 1..8)),
        |(i, muts)| check_endpoints(&String::from_utf8_lossy(&mutate(&seeds[i], &muts))),
    );
}

/// The endpoints file behind `--endpoints`, fuzzed too.
struct Files(String);

impl FileReader for Files {
    fn read(
        &self,
        _path: &Path,
        _kind: appupdate_kube::files::FileKind,
    ) -> std::io::Result<String> {
        Ok(self.0.clone())
    }
}

const ARGS: &[&str] = &[
    "web",
    "--image",
    "--container",
    "--min",
    "--max",
    "--endpoints",
    "--endpoint-config",
    "--allow-empty-endpoints",
    "-n",
    "--namespace",
    "--context",
    "--kubeconfig",
    "--cluster",
    "--user",
    "--as",
    "--as-group",
    "--request-timeout",
    "--yes",
    "-y",
    "--dry-run",
    "--detailed-exitcode",
    "-o",
    "json",
    "yaml",
    "diff",
    "--color",
    "always",
    "never",
    "--retries",
    "--wait",
    "--timeout",
    "-v",
    "-vv",
    "completion",
    "bash",
    "--",
    "-",
    "0",
    "1",
    "5",
    "-1",
    "99999999999",
    "1.5s",
    "2m",
    "nginx:1",
    "registry.example.com/web:2.1",
    "Web",
    "a-b",
    "",
    "é",
    "--help",
    "--version",
    "=",
    "--min=3",
    "--image=x",
    "proxy",
    "shop",
    "e.yaml",
];

#[test]
fn command_line_and_settings() {
    fuzz(
        "command line + settings",
        (
            prop::collection::vec(
                prop_oneof![
                    4 => prop::sample::select(ARGS).prop_map(String::from),
                    1 => "\\PC{0,12}",
                ],
                0..12,
            ),
            prop::collection::vec(prop::sample::select(TOKENS), 0..30),
        ),
        |(args, file)| {
            let mut argv = vec!["kubectl-appupdate".to_owned()];
            argv.extend(args);
            let Ok(cli) = Cli::try_parse_args(argv) else {
                return Ok(());
            };
            let files = Files(file.concat());
            if let Err(e) = Settings::resolve(cli.update, &Environment::default(), &files) {
                let text = e.to_string();
                prop_assert!(one_line(&text), "{:?}", text);
            }
            Ok(())
        },
    );
}

#[test]
fn durations_and_image_references() {
    fuzz(
        "durations + image references",
        ("\\PC{0,24}", "[0-9a-zA-Z.:/@_+-]{0,40}"),
        |(free, image)| {
            for text in [free.as_str(), image.as_str()] {
                if let Ok(d) = parse_duration(text) {
                    prop_assert!(d.as_secs() <= 1_000_000_000);
                }
                if let Err(why) = validate_image_reference(text) {
                    prop_assert!(one_line(&why), "{:?}", why);
                }
            }
            Ok(())
        },
    );
}

const KUBECONFIG_TOKENS: &[&str] = &[
    "apiVersion: v1\n",
    "kind: Config\n",
    "clusters:\n",
    "contexts:\n",
    "users:\n",
    "current-context: a\n",
    "- name: a\n",
    "  cluster:\n",
    "  context:\n",
    "  user:\n",
    "    server: https://127.0.0.1:1\n",
    "    cluster: a\n",
    "    user: a\n",
    "    token: t\n",
    "    certificate-authority-data: %%%\n",
    "    client-key-data: aGk=\n",
    "    exec:\n",
    "      command: x\n",
    "      apiVersion: client.authentication.k8s.io/v1\n",
    "[",
    "]",
    "{",
    "}",
    ": ",
    "- ",
    "\n",
    "  ",
    "&a ",
    "*a",
    "null",
    "~",
    "'",
    "\"",
];

#[test]
fn kubeconfig_yaml() {
    fuzz(
        "kubeconfig YAML",
        prop::collection::vec(prop::sample::select(KUBECONFIG_TOKENS), 0..40),
        |tokens| {
            let text = tokens.concat();
            if let Err(e) = kube::config::Kubeconfig::from_yaml(&text) {
                let said = appupdate_kube::kube_context::describe_kubeconfig_error(&e);
                prop_assert!(one_line(&said), "{:?}", said);
            }
            Ok(())
        },
    );
}

const SELECTOR_TOKENS: &[&str] = &[
    "app",
    "identifier",
    "a.b/c",
    "x",
    "=",
    "==",
    "!=",
    "!",
    "in",
    "notin",
    " in ",
    " notin ",
    "(",
    ")",
    ",",
    " ",
    "gt",
    "lt",
    ">",
    "<",
    "1",
    "-",
    "_",
    ".",
    "/",
    "\\",
    "é",
    "",
    "\t",
    "metadata.name",
    "metadata.namespace",
    "status.phase",
];

#[test]
fn sandbox_label_and_field_selectors() {
    fuzz(
        "sandbox selectors",
        (
            prop::collection::vec(prop::sample::select(SELECTOR_TOKENS), 0..24),
            "\\PC{0,24}",
            prop::collection::btree_map("[a-z./]{1,6}", "[a-z0-9]{0,4}", 0..4),
        ),
        |(tokens, free, labels)| {
            let labels: serde_json::Map<String, serde_json::Value> = labels
                .into_iter()
                .map(|(k, v)| (k, serde_json::Value::String(v)))
                .collect();
            for text in [tokens.concat(), free] {
                match LabelSelector::parse(&text) {
                    Ok(sel) => {
                        let _ = sel.matches(Some(&labels));
                        let _ = sel.matches(None);
                    }
                    Err(e) => prop_assert!(one_line(&e) || text.contains('\n'), "{:?}", e),
                }
                let _ = FieldSelector::parse(&text);
            }
            Ok(())
        },
    );
}

#[test]
fn the_managed_ingress_selector_parses_and_matches_exactly_the_managed_ones() {
    fuzz(
        "managed-ingress selector",
        "[a-z]([a-z0-9-]{0,20}[a-z0-9])?",
        |app| {
            let text = appupdate_plan::routes::managed_selector(&app);
            let sel = LabelSelector::parse(&text).map_err(TestCaseError::fail)?;
            let labels = |pairs: &[(&str, &str)]| {
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), serde_json::Value::String((*v).to_owned())))
                    .collect::<serde_json::Map<_, _>>()
            };
            prop_assert!(sel.matches(Some(&labels(&[("app", &app), ("identifier", "x")]))));
            prop_assert!(!sel.matches(Some(&labels(&[("app", &app)]))));
            prop_assert!(!sel.matches(Some(&labels(&[("app", "other"), ("identifier", "x")]))));
            Ok(())
        },
    );
}
