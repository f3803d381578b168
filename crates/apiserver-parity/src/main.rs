//! `apiserver-parity`: runs request sequences against two API servers (a real kube-apiserver
//! and the sandbox, or any two) and reports, per sequence, whether their normalised answers
//! are identical or where they first differ. With `--record` it writes the first server's
//! answers as fixtures for the conformance replay.

mod client;
mod compare;
mod normalize;
mod record;
mod run;
mod sequence;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use sandbox_apiserver::{Sandbox, SandboxOptions};

use crate::client::Server;
use crate::compare::{Verdict, compare};
use crate::sequence::{Sequence, Who};

#[derive(Parser)]
#[command(
    name = "apiserver-parity",
    version,
    about = "Differential check: the same request sequences against two API servers, normalised answers compared"
)]
struct Cli {
    /// Kubeconfig of the reference server (contexts admin, readonly, noperm by default).
    #[arg(long, value_name = "KUBECONFIG")]
    real: PathBuf,
    /// Context of an identity on the reference server, e.g. `readonly=my-viewer` (repeatable).
    #[arg(long, value_name = "WHO=CONTEXT", value_parser = parse_context)]
    real_context: Vec<(Who, String)>,
    /// Kubeconfig of the server under test (contexts sandbox, sandbox-readonly,
    /// sandbox-noperm by default). Without it, each sequence gets a fresh in-process sandbox.
    #[arg(long, value_name = "KUBECONFIG")]
    sandbox: Option<PathBuf>,
    /// Context of an identity on the server under test (repeatable).
    #[arg(long, value_name = "WHO=CONTEXT", value_parser = parse_context)]
    sandbox_context: Vec<(Who, String)>,
    /// Folder of the sequence files.
    #[arg(long, value_name = "DIR", default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/sequences"))]
    sequences: PathBuf,
    /// Write the reference server's answers as fixtures into DIR/<sequence>/ (replacing them).
    // `<sequence>` is the help text's own, not HTML.
    #[allow(rustdoc::invalid_html_tags)]
    #[arg(long, value_name = "DIR")]
    record: Option<PathBuf>,
    /// List every differing step (and up to six differences in each), not only the first of
    /// each sequence.
    #[arg(long)]
    all: bool,
    /// Leave the namespaces (and cluster-scoped objects) in place for inspection.
    #[arg(long)]
    keep: bool,
    /// Only these sequences (file names without `.yaml`).
    names: Vec<String>,
}

fn parse_context(s: &str) -> Result<(Who, String), String> {
    let (who, ctx) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected WHO=CONTEXT"))?;
    let who = match who {
        "admin" => Who::Admin,
        "readonly" => Who::Readonly,
        "noperm" => Who::Noperm,
        other => {
            return Err(format!(
                "{other:?}: the identities are admin, readonly, noperm"
            ));
        }
    };
    Ok((who, ctx.to_string()))
}

const INDEX_HEADER: &str = "# Parity fixtures\n\n\
Recorded by `apiserver-parity --record` (see the crate README) from an upstream kube-apiserver\n\
v1.28.0 without controllers, with the Gateway API v1.4.1 experimental CRDs installed. One folder\n\
per sequence (`crates/apiserver-parity/sequences/<name>.yaml`), run in a namespace of its own (`parity-<name>-<run>`), one\n\
file per request in order, `00-create-namespace.json` first. The format is the shared\n\
recording's; a watch adds `concurrent_requests`, the requests sent while it was open.\n\
`crates/apiserver-parity/tests/replay.rs` replays every folder on a fresh sandbox.\n";

fn clip(v: &serde_json::Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 1500 {
        format!("{}…", s.chars().take(1500).collect::<String>())
    } else {
        s
    }
}

fn print_difference(diff: &normalize::Difference) {
    let path = if diff.path.is_empty() {
        "/"
    } else {
        &diff.path
    };
    match &diff.key_order {
        Some((l, r)) => println!("        {path}: key order: real {l:?}, sandbox {r:?}"),
        None => {
            println!("        {path}:");
            println!(
                "          real:    {}",
                diff.left.as_ref().map_or("(absent)".into(), clip)
            );
            println!(
                "          sandbox: {}",
                diff.right.as_ref().map_or("(absent)".into(), clip)
            );
        }
    }
}

fn print_verdict(seq: &Sequence, v: &Verdict, all: bool) {
    if v.identical() {
        println!("identical  {} ({} steps)", seq.name, v.steps);
    } else {
        println!(
            "DIFFERENT  {} ({} steps, {} differ)",
            seq.name,
            v.steps,
            v.differences.len()
        );
    }
    let show = |s: Option<u16>| s.map_or_else(|| "none".to_string(), |s| s.to_string());
    for d in v.differences.iter().take(if all { usize::MAX } else { 1 }) {
        println!("    {:02}-{}: {}", d.index, d.step, d.request);
        println!(
            "        status: real {}, sandbox {}",
            show(d.left_status),
            show(d.right_status)
        );
        for diff in
            std::iter::once(&d.difference).chain(if all { d.more.iter() } else { [].iter() })
        {
            print_difference(diff);
        }
    }
    for p in &v.left_problems {
        println!("    real server problem: {p}");
    }
    for p in &v.right_problems {
        println!("    sandbox problem: {p}");
    }
    for u in &v.unexpected {
        println!("    sequence expectation not met on the real server: {u}");
    }
}

async fn run_sandbox_side(
    external: Option<&Server>,
    seq: &Sequence,
    ns: &str,
    run_id: &str,
    keep: bool,
) -> Result<Vec<run::Exchange>, String> {
    if let Some(server) = external {
        return Ok(run::run_sequence(server, seq, ns, run_id, keep).await);
    }
    let sb = Sandbox::start(SandboxOptions {
        tls: true,
        // Far from small numbers that messages contain, so versions are recognised in them.
        initial_resource_version: 1_000_000,
        // The reference server's Service range.
        service_cidr: normalize::REFERENCE_SERVICE_CIDR.into(),
        ..Default::default()
    })
    .map_err(|e| format!("cannot start a sandbox: {e}"))?;
    let server = Server::from_yaml("sandbox", &sb.kubeconfig_yaml("default")).await?;
    let out = run::run_sequence(&server, seq, ns, run_id, true).await;
    drop(server);
    drop(sb);
    Ok(out)
}

async fn main_inner(cli: Cli) -> Result<bool, String> {
    let mut sequences = sequence::load_dir(&cli.sequences)?;
    if !cli.names.is_empty() {
        for n in &cli.names {
            if !sequences.iter().any(|s| &s.name == n) {
                return Err(format!("no sequence {n:?} in {}", cli.sequences.display()));
            }
        }
        sequences.retain(|s| cli.names.contains(&s.name));
    }
    let real = Server::connect("real", &cli.real, &cli.real_context).await?;
    let external = match &cli.sandbox {
        Some(path) => Some(Server::connect("sandbox", path, &cli.sandbox_context).await?),
        None => None,
    };
    let run_id: String = uuid::Uuid::new_v4().simple().to_string()[..6].to_string();
    let (mut identical, mut steps, mut differing) = (0, 0, 0);
    for seq in &sequences {
        let ns = format!("parity-{}-{run_id}", seq.name);
        let left = run::run_sequence(&real, seq, &ns, &run_id, cli.keep).await;
        let right = run_sandbox_side(external.as_ref(), seq, &ns, &run_id, cli.keep).await?;
        let verdict = compare(&left, &right);
        print_verdict(seq, &verdict, cli.all);
        identical += usize::from(verdict.identical());
        steps += verdict.steps;
        differing += verdict.differences.len();
        if let Some(dir) = &cli.record {
            record::write_sequence(dir, seq, &left)?;
        }
    }
    if let Some(dir) = &cli.record {
        let all = sequence::load_dir(&cli.sequences)?;
        record::write_index(dir, &all, INDEX_HEADER)?;
    }
    println!(
        "parity: {} sequences, {identical} identical, {} different; {steps} requests, {differing} answered differently (run {run_id})",
        sequences.len(),
        sequences.len() - identical
    );
    Ok(identical == sequences.len())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match main_inner(cli).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("apiserver-parity: {e}");
            ExitCode::from(2)
        }
    }
}
