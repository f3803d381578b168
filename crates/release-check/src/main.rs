//! `release-check manifest FILE --name NAME [--version V] [--index-copy] [--archives DIR]`
//! checks a krew manifest; `release-check binary TRIPLE FILE` checks a release binary. Each
//! prints what it found on stdout and every problem on stderr, one line each that starts with
//! the file (and, for a binary, the target triple), and exits 1 if there is a problem.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use release_check::binary::{self, Target};
use release_check::krew::{self, Expected};

const USAGE: &str = "usage: release-check manifest FILE --name NAME [--version V] [--index-copy] [--archives DIR]\n       release-check binary TRIPLE FILE";

fn fail(msg: &str) -> ExitCode {
    eprintln!("release-check: {msg}");
    ExitCode::from(2)
}

fn report(what: &str, facts: &[String], problems: &[String]) -> ExitCode {
    for f in facts {
        println!("{what}: {f}");
    }
    for p in problems {
        eprintln!("{what}: {p}");
    }
    if problems.is_empty() {
        println!("{what}: ok");
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn manifest(args: &[String]) -> ExitCode {
    let mut file = None;
    let (mut name, mut version, mut index_copy, mut archives) = (None, None, false, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--name" => name = it.next().cloned(),
            "--version" => version = it.next().cloned(),
            "--index-copy" => index_copy = true,
            "--archives" => archives = it.next().map(PathBuf::from),
            _ if file.is_none() && !a.starts_with("--") => file = Some(PathBuf::from(a)),
            _ => return fail(&format!("unexpected argument {a}\n{USAGE}")),
        }
    }
    let (Some(file), Some(name)) = (file, name) else {
        return fail(USAGE);
    };
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) => return fail(&format!("{}: {e}", file.display())),
    };
    let file_name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let expected = Expected {
        name: &name,
        version: version.as_deref(),
        index_file_name: index_copy.then_some(file_name.as_str()),
    };
    let mut problems = krew::violations(&text, &expected);
    if let Some(dir) = archives {
        problems.extend(release_check::archives(&text, &dir));
    }
    let what = file.display().to_string();
    report(&what, &[], &problems)
}

fn binary(args: &[String]) -> ExitCode {
    let [triple, file] = args else {
        return fail(USAGE);
    };
    let Some(target) = Target::from_triple(triple) else {
        return fail(&format!("{triple} is not a release target"));
    };
    let data = match std::fs::read(Path::new(file)) {
        Ok(d) => d,
        Err(e) => return fail(&format!("{file}: {e}")),
    };
    let r = binary::check(target, &data);
    report(&format!("{file} ({triple})"), &r.facts, &r.problems)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.split_first() {
        Some((cmd, rest)) if cmd == "manifest" => manifest(rest),
        Some((cmd, rest)) if cmd == "binary" => binary(rest),
        _ => fail(USAGE),
    }
}
