//! The bad-input corpus: `tests/corpus/{endpoints,kubeconfig,flags}/`, one input per file with
//! its expectation beside it (`<case>.expect`): the exit code, whether the run may send any
//! request to the cluster, how many lines stderr has, and the exact first line of stderr.
//!
//! * `endpoints/<case>.yaml`: run as `web --endpoints <case>.yaml --yes` from that directory.
//! * `kubeconfig/<case>.yaml`: `${SERVER}`, `${CA_DATA}`, `${TOKEN}` and `${CLIENT_CERT_DATA}`
//!   are replaced with the sandbox's, then run as `web --max 9 --yes --kubeconfig <case>.yaml`.
//! * `flags/<case>.args`: the arguments, one per line, with `--kubeconfig kubeconfig` (the
//!   sandbox's) added unless the case names its own.
//!
//! Every case is rejected; none changes anything; all but the few that can only be found by
//! asking the cluster (`requests: some`) send no request at all (the request log is empty).
//! `UPDATE_CORPUS=1 cargo nextest run --test it bad_input_corpus::` rewrites the expectations from
//! the current output (review the diff).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};

use common::*;

fn corpus(dir: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(dir)
}

#[derive(Debug, PartialEq)]
struct Expect {
    exit: i32,
    requests: String,
    lines: String,
    first: String,
}

impl Expect {
    fn parse(text: &str) -> Expect {
        let mut it = text.lines();
        let mut field = |key: &str| {
            it.next()
                .and_then(|l| l.strip_prefix(key))
                .unwrap_or_else(|| panic!("{key} in {text:?}"))
                .to_owned()
        };
        Expect {
            exit: field("exit: ").parse().unwrap(),
            requests: field("requests: "),
            lines: field("lines: "),
            first: field(""),
        }
    }

    fn render(&self) -> String {
        format!(
            "exit: {}\nrequests: {}\nlines: {}\n{}\n",
            self.exit, self.requests, self.lines, self.first
        )
    }
}

struct Outcome {
    exit: i32,
    requests: usize,
    stderr: String,
}

fn check(env: &Env, case: &Path, got: Outcome, count: &mut usize) {
    *count += 1;
    let lines: Vec<&str> = got.stderr.trim_end().lines().collect();
    let first = lines.first().copied().unwrap_or_default().to_owned();
    let expect_path = case.with_extension("expect");
    let actual = Expect {
        exit: got.exit,
        requests: if got.requests == 0 { "none" } else { "some" }.into(),
        lines: if lines.len() == 1 {
            "1".into()
        } else {
            "several".into()
        },
        first,
    };
    if std::env::var_os("UPDATE_CORPUS").is_some() {
        std::fs::write(&expect_path, actual.render()).unwrap();
        return;
    }
    let text = std::fs::read_to_string(&expect_path)
        .unwrap_or_else(|_| panic!("missing {}", expect_path.display()));
    let want = Expect::parse(&text);
    assert_eq!(
        actual,
        want,
        "{}\n--- stderr\n{}",
        case.display(),
        got.stderr
    );
    assert!(
        [1, 3, 4].contains(&got.exit),
        "{}: rejected with nothing changed",
        case.display()
    );
    // Nothing changed, whatever the input.
    assert_eq!(env.bounds(), (2, 5), "{}", case.display());
    assert_eq!(env.image(), "registry.example.com/web:1.0");
    assert!(env.writes().is_empty(), "{}", case.display());
}

fn cases(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

fn run_in(env: &Env, cwd: &Path, args: &[String]) -> Outcome {
    env.sb.clear_requests();
    let o = plugin().current_dir(cwd).args(args).output().unwrap();
    Outcome {
        exit: code(&o),
        requests: env.sb.requests().len(),
        stderr: stderr(&o),
    }
}

#[test]
fn malformed_endpoints_files_are_rejected_before_any_request() {
    let env = Env::new();
    let dir = corpus("endpoints");
    let mut n = 0;
    for case in cases(&dir, "yaml") {
        let name = case.file_name().unwrap().to_str().unwrap().to_owned();
        let args: Vec<String> = [
            "web",
            "--endpoints",
            &name,
            "--yes",
            "--kubeconfig",
            env.kubeconfig.to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec();
        let got = run_in(&env, &dir, &args);
        check(&env, &case, got, &mut n);
    }
    println!("endpoints corpus: {n} cases");
    assert!(n >= 50, "{n}");
}

fn ca_data(env: &Env) -> String {
    env.sb
        .kubeconfig_yaml(NS)
        .lines()
        .find_map(|l| l.trim().strip_prefix("certificate-authority-data: "))
        .unwrap()
        .to_owned()
}

#[test]
fn broken_kubeconfigs_are_rejected_with_one_line_and_no_request() {
    let env = Env::new();
    let dir = corpus("kubeconfig");
    let ca = ca_data(&env);
    let token = env.sb.token(sandbox_apiserver::Identity::Admin);
    let mut n = 0;
    for case in cases(&dir, "yaml") {
        let name = case.file_name().unwrap().to_str().unwrap().to_owned();
        let text = std::fs::read_to_string(&case)
            .unwrap()
            .replace("${SERVER}", env.sb.url())
            .replace("${CA_DATA}", &ca)
            .replace("${CLIENT_CERT_DATA}", &ca)
            .replace("${TOKEN}", &token);
        std::fs::write(env.dir.path().join(&name), text).unwrap();
        let mut args: Vec<String> = ["web", "--max", "9", "--yes", "--kubeconfig", &name]
            .map(String::from)
            .to_vec();
        if let Ok(extra) = std::fs::read_to_string(case.with_extension("args")) {
            args.extend(extra.lines().map(String::from));
        }
        let got = run_in(&env, env.dir.path(), &args);
        check(&env, &case, got, &mut n);
    }
    println!("kubeconfig corpus: {n} cases");
    assert!(n >= 20, "{n}");
}

#[test]
fn bad_flag_combinations_are_rejected_before_any_request() {
    let env = Env::new();
    let dir = corpus("flags");
    let mut n = 0;
    for case in cases(&dir, "args") {
        let mut args: Vec<String> = std::fs::read_to_string(&case)
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        if !args.iter().any(|a| a == "--kubeconfig")
            && args.first().is_none_or(|a| a != "completion")
        {
            args.extend(["--kubeconfig".to_owned(), "kubeconfig".to_owned()]);
        }
        let got = run_in(&env, env.dir.path(), &args);
        check(&env, &case, got, &mut n);
    }
    println!("flags corpus: {n} cases");
    assert!(n >= 35, "{n}");
}
