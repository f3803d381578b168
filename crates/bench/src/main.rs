//! `appupdate-bench`: kubectl-appupdate against the equivalent kubectl command sequence, side by
//! side, over TLS through a latency proxy in front of the sandbox API server.
//!
//! ```text
//! cargo run --release -p appupdate-bench --features plot -- --out docs/performance.md
//! ```
//!
//! builds the release plugin, runs the criterion CPU benchmark (`cargo bench --bench plan`),
//! starts the sandbox with TLS, puts the latency proxy in front of it, and for every RTT and
//! scenario alternates the plugin with kubectl (cold and warm discovery cache), resetting the
//! application between runs. It checks that every run ends in the same state, accounts for the
//! requests from the sandbox's log, measures peak RSS, start-up time and binary size, and writes
//! the report and its plot. Not part of the test suite. The plot needs the `plot` feature (its
//! PNG encoder and font rasteriser are not built for the tests).

// The sandbox API server runs in this process. Its answers are trees of small JSON values, which
// glibc's malloc is slow to free (consolidating its bins took about a third of a large LIST);
// the plugin uses mimalloc on Linux for the same reason. Both contenders talk to this server.
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use appupdate_bench::accounting::{self, Accounting};
use appupdate_bench::proxy::LatencyProxy;
use appupdate_bench::scenario::{NAMESPACE, Scenario};
use appupdate_bench::{Summary, summarize};
use appupdate_plan::updaters::Plan;
use clap::Parser;
use sandbox_apiserver::{LoggedRequest, Sandbox, SandboxOptions};
use serde_json::Value;

mod fleet;
mod image;
mod notes;
mod report;
mod xl;

#[derive(Parser, Debug)]
#[command(
    name = "appupdate-bench",
    about = "kubectl-appupdate vs kubectl, through a latency proxy"
)]
struct Args {
    /// Where to write the report (Markdown); the plot goes next to it (`<stem>.png`).
    #[arg(long, default_value = "docs/performance.md")]
    out: PathBuf,
    /// Timed repetitions per scenario, RTT and contender.
    #[arg(long, default_value_t = 7)]
    reps: usize,
    /// Round-trip times to add, in milliseconds.
    #[arg(long, value_delimiter = ',', default_value = "0,5,20")]
    rtt: Vec<u64>,
    /// Scenarios to run (S, M, L, `fleet`: one update on several clusters, `XL`: a dry run
    /// over 1 000 Ingresses, with the core's growth from 1 000 to 100 000 endpoints, and
    /// `image`: M with the image check off and on against a loopback `docker-registry`).
    /// `fleet`, `XL` or `image` alone measures only that and replaces its section of an existing
    /// report.
    #[arg(long, value_delimiter = ',', default_value = "S,M,L,fleet,XL,image")]
    scenarios: Vec<String>,
    /// Image scenario: the RTT to the cluster and to the registry, in milliseconds.
    #[arg(long, default_value_t = 20)]
    image_rtt: u64,
    /// Fleet scenario: the cluster counts.
    #[arg(long, value_delimiter = ',', default_value = "1,16,256,2000")]
    fleet_sizes: Vec<usize>,
    /// Fleet scenario: the RTT to every cluster, in milliseconds.
    #[arg(long, default_value_t = 20)]
    fleet_rtt: u64,
    /// Fleet scenario: the update (S, M or L).
    #[arg(long, default_value = "S")]
    fleet_scenario: String,
    /// The kubectl binary (default: `kubectl.1.28` beside the `kubectl` on PATH when that is
    /// the version dispatcher, else `kubectl`).
    #[arg(long)]
    kubectl: Option<PathBuf>,
    /// The plugin binary (default: build it with `cargo build --release`).
    #[arg(long)]
    plugin: Option<PathBuf>,
    /// Skip the criterion benchmark (the report then quotes the last saved results, if any).
    #[arg(long)]
    no_criterion: bool,
    /// Put a proxy between both contenders and the latency proxy, named by the kubeconfig's
    /// `proxy-url` (kubectl honours it for loopback servers too): `http` (CONNECT tunnels) or
    /// `socks5`. The report notes it; the request accounting is the server's, unchanged.
    #[arg(long, value_parser = ["none", "http", "socks5"], default_value = "none")]
    through_proxy: String,
    /// Print the request log of every plugin run (timings relative to the process start).
    #[arg(long)]
    dump_log: bool,
    /// Internal: seed the XL scenario's sandbox, write its kubeconfig and endpoints file into
    /// DIR, print the plugin's command line, and serve until standard input closes.
    #[arg(long, hide = true, value_name = "DIR")]
    xl_serve: Option<PathBuf>,
    /// Internal, before `--peak-rss`: also sample the command's open file descriptors and
    /// threads while it runs, and print their largest counts; pass its standard error through.
    #[arg(long, hide = true)]
    sample_usage: bool,
    /// Internal: run a command and print its peak RSS (KiB) and exit code.
    #[arg(long, hide = true, num_args = 1.., allow_hyphen_values = true)]
    peak_rss: Option<Vec<String>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Contender {
    Plugin,
    KubectlCold,
    KubectlWarm,
}

impl Contender {
    pub const ALL: [Contender; 3] = [
        Contender::Plugin,
        Contender::KubectlCold,
        Contender::KubectlWarm,
    ];

    /// The contenders of repetition `rep`, alternated: plugin first, then plugin last.
    pub fn order(rep: usize) -> Vec<Contender> {
        let mut order = Contender::ALL.to_vec();
        if rep % 2 == 1 {
            order.reverse();
        }
        order
    }

    pub fn label(self) -> &'static str {
        match self {
            Contender::Plugin => "kubectl-appupdate",
            Contender::KubectlCold => "kubectl, cold cache",
            Contender::KubectlWarm => "kubectl, warm cache",
        }
    }
}

/// One timed run.
pub struct Run {
    pub wall_ms: f64,
    pub log: Vec<LoggedRequest>,
    /// TCP connections the sandbox accepted during the run (= TLS handshakes).
    pub connections: u64,
    pub processes: usize,
}

/// Everything measured for one scenario at one RTT.
pub struct Cell {
    pub scenario: Scenario,
    pub rtt_ms: u64,
    pub runs: Vec<(Contender, Run)>,
}

impl Cell {
    pub fn summary(&self, c: Contender) -> Summary {
        let xs: Vec<f64> = self
            .runs
            .iter()
            .filter(|(k, _)| *k == c)
            .map(|(_, r)| r.wall_ms)
            .collect();
        summarize(&xs)
    }

    pub fn first(&self, c: Contender) -> Option<&Run> {
        self.runs.iter().find(|(k, _)| *k == c).map(|(_, r)| r)
    }

    /// Accounting of every run of `c`, to check they agree.
    pub fn accountings(&self, c: Contender) -> Vec<(Accounting, u64)> {
        self.runs
            .iter()
            .filter(|(k, _)| *k == c)
            .map(|(_, r)| {
                (
                    accounting::account(&r.log, self.rtt_ms as f64),
                    r.connections,
                )
            })
            .collect()
    }
}

/// The request floor of a plan: one concurrent read round, one dry run per changed object in
/// a round of its own when there are several (a run that writes one object sends none: its
/// write is the check), one write per changed object in the write rounds the dependencies
/// between the writes force (`plan::write_order`: a route that stops serving a path waits for
/// the write that serves it elsewhere), one connection; and the history of the change: its
/// ConfigMap read and one SelfSubjectReview with the reads (two requests, no round), then one
/// conditional write of the record, sent with the last write round (no round).
#[derive(Clone, Debug, Default)]
pub struct Floor {
    pub reads: usize,
    pub changes: usize,
    pub write_rounds: usize,
}

impl Floor {
    pub fn of(plan: &Plan, reads: usize) -> Floor {
        Floor {
            reads,
            changes: plan.changes().filter(|c| c.is_change()).count(),
            write_rounds: plan.write_order().round_count(),
        }
    }

    /// Dry runs: one per change when there are several. (An HTTPRoute's create or patch is
    /// dry-run even alone; no scenario has one.)
    pub fn dry_runs(&self) -> usize {
        if self.changes > 1 { self.changes } else { 0 }
    }

    pub fn requests(&self) -> usize {
        self.reads + self.dry_runs() + self.changes + HISTORY_REQUESTS
    }

    pub fn rounds(&self) -> usize {
        1 + usize::from(self.dry_runs() > 0) + self.write_rounds
    }
}

/// What recording the change in the application's history adds to an applying run: the
/// ConfigMap read and the SelfSubjectReview (in the read round) and the record's write.
pub const HISTORY_REQUESTS: usize = 3;

/// The one-off measurements.
#[derive(Default)]
pub struct Extras {
    /// Peak RSS (KiB) and CPU time (ms) for scenario L.
    pub peak_rss_plugin_kib: Option<(i64, f64)>,
    pub peak_rss_kubectl_kib: Option<(i64, f64)>,
    pub start_plugin: Summary,
    /// `appupdate-noop`, started the same way in the same loop as `start_plugin`.
    pub start_floor: Option<Summary>,
    pub start_kubectl: Summary,
    pub binary_size: u64,
    pub musl: String,
    /// (benchmark id, median ns) from criterion's saved estimates.
    pub criterion: Vec<(String, f64)>,
    pub criterion_note: String,
}

/// The machine and the tools.
#[derive(Default)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub load_before: String,
    pub load_after: String,
    pub kernel: String,
    pub rustc: String,
    pub kubectl: String,
    pub kubectl_path: String,
    pub started: String,
    pub total_s: f64,
    /// Which proxy, if any, both contenders went through (and the tunnels it opened).
    pub proxy: String,
}

pub struct Context {
    pub sb: Sandbox,
    pub proxy: LatencyProxy,
    pub dir: PathBuf,
    pub kubeconfig: PathBuf,
    pub plugin: PathBuf,
    pub kubectl: PathBuf,
    pub home: PathBuf,
    pub warm_cache: PathBuf,
    /// `--through-proxy`: the proxy named by the kubeconfig's `proxy-url`.
    pub client_proxy: Option<test_proxies::TestProxy>,
}

fn main() {
    let args = Args::parse();
    if let Some(cmd) = &args.peak_rss {
        std::process::exit(peak_rss_child(cmd, args.sample_usage));
    }
    if let Some(dir) = &args.xl_serve {
        if let Err(e) = xl::serve(dir) {
            eprintln!("appupdate-bench: {e}");
            std::process::exit(1);
        }
        return;
    }
    if let Err(e) = run(args) {
        eprintln!("appupdate-bench: {e}");
        std::process::exit(1);
    }
}

/// `--peak-rss CMD…`: runs CMD (output discarded), prints `<max RSS KiB> <exit code> <CPU ms>
/// <wall ms>`. A process of its own, so that RUSAGE_CHILDREN sees exactly one child.
///
/// With `--sample-usage`, CMD's standard error passes through, and while it runs a thread reads
/// `/proc/<pid>/fd` (the entries: open file descriptors) and the `Threads:` line of
/// `/proc/<pid>/status` every 2 ms; the line gets `<max fds> <max threads>` added (the largest
/// counts over the samples, so a peak shorter than that can be missed).
fn peak_rss_child(cmd: &[String], sample: bool) -> i32 {
    let Some((prog, rest)) = cmd.split_first() else {
        return 2;
    };
    let started = Instant::now();
    let child = Command::new(prog)
        .args(rest)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(if sample {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(_) => return 2,
    };
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = sample.then(|| {
        let (pid, done) = (child.id(), done.clone());
        std::thread::spawn(move || sample_usage(pid, &done))
    });
    let status = child.wait();
    let wall_ms = started.elapsed().as_secs_f64() * 1000.0;
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let sampled = sampler.and_then(|t| t.join().ok());
    let code = match status {
        Ok(s) => s.code().unwrap_or(-1),
        Err(_) => return 2,
    };
    match nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN) {
        Ok(u) => {
            let ms = |t: nix::sys::time::TimeVal| {
                t.tv_sec() as f64 * 1000.0 + t.tv_usec() as f64 / 1000.0
            };
            let extra = sampled.map_or(String::new(), |(fds, threads)| format!(" {fds} {threads}"));
            println!(
                "{} {code} {:.1} {wall_ms:.1}{extra}",
                u.max_rss(),
                ms(u.user_time()) + ms(u.system_time())
            );
            0
        }
        Err(_) => 2,
    }
}

/// The largest counts of open file descriptors and of threads of process `pid`, sampled every
/// 2 ms until `done`. A sample counts only while `pid` is still this process's child
/// (`PPid:`), so that a reused process ID is never read.
fn sample_usage(pid: u32, done: &std::sync::atomic::AtomicBool) -> (usize, usize) {
    let me = std::process::id().to_string();
    let status_path = format!("/proc/{pid}/status");
    let fd_path = format!("/proc/{pid}/fd");
    let (mut fds, mut threads) = (0, 0);
    while !done.load(std::sync::atomic::Ordering::SeqCst) {
        if let Ok(status) = std::fs::read_to_string(&status_path) {
            let field = |name: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(str::trim)
            };
            if field("PPid:") == Some(me.as_str()) {
                if let Some(n) = field("Threads:").and_then(|t| t.parse().ok()) {
                    threads = threads.max(n);
                }
                if let Ok(dir) = std::fs::read_dir(&fd_path) {
                    fds = fds.max(dir.count());
                }
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    (fds, threads)
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn target_release_dir() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find myself: {e}"))?;
    exe.parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| "cannot find the target directory".into())
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

fn run(args: Args) -> Result<(), String> {
    if !cfg!(feature = "plot") {
        return Err("this build cannot draw the plot that goes with the report; run it as `cargo run --release -p appupdate-bench --features plot -- …`".into());
    }
    let t_start = Instant::now();
    let with_fleet = args
        .scenarios
        .iter()
        .any(|s| s.eq_ignore_ascii_case("fleet"));
    let with_xl = args.scenarios.iter().any(|s| s.eq_ignore_ascii_case("xl"));
    let with_image = args
        .scenarios
        .iter()
        .any(|s| s.eq_ignore_ascii_case("image"));
    let scenarios: Vec<Scenario> = args
        .scenarios
        .iter()
        .filter(|s| {
            !s.eq_ignore_ascii_case("fleet")
                && !s.eq_ignore_ascii_case("xl")
                && !s.eq_ignore_ascii_case("image")
        })
        .map(|s| {
            Scenario::parse(s)
                .ok_or_else(|| format!("unknown scenario {s:?} (S, M, L, fleet, XL, image)"))
        })
        .collect::<Result<_, _>>()?;
    let fleet_scenario = Scenario::parse(&args.fleet_scenario).ok_or_else(|| {
        format!(
            "unknown --fleet-scenario {:?} (S, M, L)",
            args.fleet_scenario
        )
    })?;
    if args.reps == 0 || args.rtt.is_empty() {
        return Err("--reps must be ≥ 1 and --rtt must name at least one RTT".into());
    }
    if with_fleet && (args.fleet_sizes.is_empty() || args.fleet_sizes.contains(&0)) {
        return Err("--fleet-sizes must name cluster counts of at least 1".into());
    }
    let fleet_only = with_fleet && !with_xl && !with_image && scenarios.is_empty();
    let xl_only = with_xl && !with_fleet && !with_image && scenarios.is_empty();
    let image_only = with_image && !with_fleet && !with_xl && scenarios.is_empty();
    let mut machine = Machine {
        load_before: load_average(),
        started: now_utc(),
        ..Machine::default()
    };

    let release = target_release_dir()?;
    let plugin = match &args.plugin {
        Some(p) => p.clone(),
        None => {
            eprintln!("building the release plugin…");
            let ok = Command::new(cargo())
                .args([
                    "build",
                    "--release",
                    "-p",
                    "kubectl-appupdate",
                    "--bin",
                    "kubectl-appupdate",
                ])
                .current_dir(workspace_root())
                .status()
                .map_err(|e| format!("cannot run cargo: {e}"))?
                .success();
            if !ok {
                return Err("cargo build --release failed".into());
            }
            release.join("kubectl-appupdate")
        }
    };
    let mut extras = Extras::default();
    if !args.no_criterion && !fleet_only && !image_only {
        eprintln!("running the criterion benchmark (cargo bench --bench plan)…");
        let ok = Command::new(cargo())
            .args(["bench", "-p", "kubectl-appupdate", "--bench", "plan"])
            .current_dir(workspace_root())
            .status()
            .map_err(|e| format!("cannot run cargo: {e}"))?
            .success();
        if !ok {
            return Err("cargo bench --bench plan failed".into());
        }
    }
    read_criterion(&release, &mut extras);
    let criterion_root = release
        .parent()
        .map(|t| t.join("criterion"))
        .unwrap_or_default();
    if xl_only {
        let dir = std::env::temp_dir().join(format!("appupdate-bench-{}", std::process::id()));
        let home = dir.join("home");
        std::fs::create_dir_all(&home).map_err(|e| e.to_string())?;
        let section = xl_section(&plugin, &home, &dir, args.reps, &criterion_root, &args.out)?;
        write_section(&args.out, &section, xl::replace_section, "XL")?;
        let _ = std::fs::remove_dir_all(&dir);
        return Ok(());
    }

    let kubectl = match &args.kubectl {
        Some(k) => k.clone(),
        None => find_kubectl(),
    };
    machine.kubectl_path = kubectl.display().to_string();
    machine.kubectl = Command::new(&kubectl)
        .args(["version", "--client", "-o", "json"])
        .output()
        .ok()
        .and_then(|o| serde_json::from_slice::<Value>(&o.stdout).ok())
        .and_then(|v| v["clientVersion"]["gitVersion"].as_str().map(str::to_owned))
        .unwrap_or_else(|| "unknown".into());
    fill_machine(&mut machine);

    let dir = std::env::temp_dir().join(format!("appupdate-bench-{}", std::process::id()));
    let home = dir.join("home");
    let warm_cache = dir.join("kube-cache-warm");
    std::fs::create_dir_all(&home).map_err(|e| e.to_string())?;

    let sb = Sandbox::start(SandboxOptions {
        tls: true,
        // Listed by the image check only (the image section); nothing else lists nodes.
        node_platforms: vec![
            ("linux".into(), "amd64".into()),
            ("linux".into(), "amd64".into()),
        ],
        ..SandboxOptions::default()
    })
    .map_err(|e| format!("cannot start the sandbox: {e}"))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let proxy = rt
        .block_on(LatencyProxy::start(sb.addr(), Duration::ZERO))
        .map_err(|e| format!("cannot start the latency proxy: {e}"))?;
    let kubeconfig = dir.join("kubeconfig");
    let server = format!("https://{}", proxy.addr());
    let mut yaml = sb.kubeconfig_yaml(NAMESPACE).replace(sb.url(), &server);
    let client_proxy = match args.through_proxy.as_str() {
        "http" => Some(test_proxies::Kind::Http),
        "socks5" => Some(test_proxies::Kind::Socks5),
        _ => None,
    }
    .map(|kind| test_proxies::TestProxy::start(kind, test_proxies::Options::default()))
    .transpose()
    .map_err(|e| format!("cannot start the client proxy: {e}"))?;
    if let Some(p) = &client_proxy {
        yaml = yaml.replace(
            &format!("    server: \"{server}\"\n"),
            &format!("    server: \"{server}\"\n    proxy-url: {}\n", p.url()),
        );
        if !yaml.contains("proxy-url") {
            return Err("cannot add proxy-url to the kubeconfig".into());
        }
    }
    std::fs::write(&kubeconfig, yaml).map_err(|e| e.to_string())?;
    let ctx = Context {
        sb,
        proxy,
        dir: dir.clone(),
        kubeconfig,
        plugin,
        kubectl,
        home,
        warm_cache,
        client_proxy,
    };
    eprintln!(
        "sandbox {} behind latency proxy {}; kubectl {} ({})",
        ctx.sb.url(),
        ctx.proxy.addr(),
        machine.kubectl,
        machine.kubectl_path
    );

    let fleet_plan = fleet::Plan {
        sizes: args.fleet_sizes.clone(),
        rtt_ms: args.fleet_rtt,
        reps: args.reps,
        scenario: fleet_scenario,
    };
    if image_only {
        let results = image::measure(&rt, &ctx, args.reps, args.image_rtt)?;
        let section = image::markdown(&results, machine.cores);
        write_section(&args.out, &section, image::replace_section, "image")?;
        let _ = std::fs::remove_dir_all(&dir);
        return Ok(());
    }
    if fleet_only && !with_xl {
        let results = fleet::measure(fleet_plan, &rt, &ctx)?;
        let section = fleet::markdown(&results, machine.cores);
        write_section(&args.out, &section, fleet::replace_section, "fleet")?;
        let _ = std::fs::remove_dir_all(&dir);
        return Ok(());
    }

    let mut cells: Vec<Cell> = Vec::new();
    let mut floors: Vec<(Scenario, Floor)> = Vec::new();
    let mut reference: Vec<(Scenario, Value)> = Vec::new();
    let mut mismatches: Vec<String> = Vec::new();
    for &rtt in &args.rtt {
        ctx.proxy.set_rtt(Duration::from_millis(rtt));
        for &s in &scenarios {
            s.reset(&ctx.sb)?;
            if !floors.iter().any(|(x, _)| *x == s) {
                let plan = s.plan(&ctx.sb)?;
                // With endpoints: Deployment, HPA, Service, Ingresses and HTTPRoutes.
                let reads = if s.endpoints().is_some() { 5 } else { 1 };
                floors.push((s, Floor::of(&plan, reads)));
            }
            // Warm kubectl's cache (discovery, OpenAPI) with one untimed sequence.
            let _ = std::fs::remove_dir_all(&ctx.warm_cache);
            run_kubectl(&ctx, s, &ctx.warm_cache)?;
            let mut cell = Cell {
                scenario: s,
                rtt_ms: rtt,
                runs: Vec::new(),
            };
            for rep in 0..args.reps {
                for c in Contender::order(rep) {
                    let run = match c {
                        Contender::Plugin => {
                            let r = run_plugin(&ctx, s)?;
                            if args.dump_log {
                                dump(&r);
                            }
                            r
                        }
                        Contender::KubectlWarm => run_kubectl(&ctx, s, &ctx.warm_cache)?,
                        Contender::KubectlCold => {
                            let cold = ctx.dir.join("kube-cache-cold");
                            let _ = std::fs::remove_dir_all(&cold);
                            run_kubectl(&ctx, s, &cold)?
                        }
                    };
                    let state = appupdate_bench::scenario::end_state(&ctx.sb);
                    match reference.iter().find(|(x, _)| *x == s) {
                        None => reference.push((s, state)),
                        Some((_, r)) if *r != state => mismatches.push(format!(
                            "scenario {} at RTT {rtt} ms, {} run {rep}: the end state differs from the first run's\nexpected: {r}\n     got: {state}",
                            s.name(),
                            c.label()
                        )),
                        Some(_) => {}
                    }
                    cell.runs.push((c, run));
                }
            }
            eprintln!(
                "RTT {rtt:>2} ms, {}: plugin {:.0} ms, kubectl cold {:.0} ms, warm {:.0} ms (medians)",
                s.name(),
                cell.summary(Contender::Plugin).median,
                cell.summary(Contender::KubectlCold).median,
                cell.summary(Contender::KubectlWarm).median
            );
            cells.push(cell);
        }
    }

    let fleet_section = if with_fleet {
        let results = fleet::measure(fleet_plan, &rt, &ctx)?;
        Some(fleet::markdown(&results, machine.cores))
    } else {
        None
    };

    let image_section = if with_image {
        let results = image::measure(&rt, &ctx, args.reps, args.image_rtt)?;
        Some(image::markdown(&results, machine.cores))
    } else {
        None
    };

    let xl_section = if with_xl {
        Some(xl_section(
            &ctx.plugin,
            &ctx.home,
            &ctx.dir,
            args.reps,
            &criterion_root,
            &args.out,
        )?)
    } else {
        None
    };

    eprintln!("peak RSS, start-up, size…");
    ctx.proxy.set_rtt(Duration::ZERO);
    if scenarios.contains(&Scenario::L) {
        extras.peak_rss_plugin_kib = peak_rss_plugin(&ctx, Scenario::L)?;
        extras.peak_rss_kubectl_kib = peak_rss_kubectl(&ctx, Scenario::L)?;
    }
    let floor = build_noop(&target_release_dir()?);
    (extras.start_plugin, extras.start_floor) = time_start_up(&ctx.plugin, floor.as_deref(), 101)?;
    extras.start_kubectl = time_command(&ctx.kubectl, &["version", "--client"], 11)?;
    extras.binary_size = std::fs::metadata(&ctx.plugin).map(|m| m.len()).unwrap_or(0);
    extras.musl = musl_note();

    machine.proxy = match &ctx.client_proxy {
        None => "none: both contenders connect to the latency proxy directly (the benchmark clears the environment, so no HTTPS_PROXY applies)".into(),
        Some(p) => {
            let s = p.stats();
            format!(
                "`--through-proxy {}`: both contenders go through `{}` (crates/test-proxies) named by the kubeconfig's `proxy-url`; {} tunnels, {} requests to it in the whole benchmark. Request accounting is the server's and counts the same requests",
                args.through_proxy,
                p.url(),
                s.tunnels,
                s.requests
            )
        }
    };
    machine.load_after = load_average();
    machine.total_s = t_start.elapsed().as_secs_f64();
    if let Some(parent) = args.out.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    let plot = args.out.with_extension("png");
    report::plot(&plot, &cells).map_err(|e| format!("cannot draw {}: {e}", plot.display()))?;
    let text = report::markdown(
        &machine,
        &cells,
        &floors,
        &extras,
        &mismatches,
        &plot,
        &args.rtt,
        args.reps,
        fleet_section.as_deref(),
        xl_section.as_deref(),
        image_section.as_deref(),
    );
    if let Some(parent) = args.out.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    std::fs::write(&args.out, text)
        .map_err(|e| format!("cannot write {}: {e}", args.out.display()))?;
    eprintln!("wrote {} and {}", args.out.display(), plot.display());
    let _ = std::fs::remove_dir_all(&dir);
    if mismatches.is_empty() {
        Ok(())
    } else {
        for m in &mismatches {
            eprintln!("{m}");
        }
        Err(format!(
            "{} run(s) ended in a different state",
            mismatches.len()
        ))
    }
}

/// Measures the XL scenario and draws the core's growth next to `out` (`<stem>-scaling.png`).
fn xl_section(
    plugin: &Path,
    home: &Path,
    dir: &Path,
    reps: usize,
    criterion_root: &Path,
    out: &Path,
) -> Result<String, String> {
    eprintln!("scenario XL (1 000 Ingresses, 10 000 endpoints, --dry-run -o json)…");
    let r = xl::measure(plugin, home, dir, reps, criterion_root)?;
    eprintln!(
        "XL: CPU {:.0} ms, peak RSS {:.1} MiB, wall {:.0} ms (medians)",
        r.cpu.median, r.rss.median, r.wall.median
    );
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "performance".into());
    let plot = out.with_file_name(format!("{stem}-scaling.png"));
    if let Some(parent) = plot.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    if !r.core.is_empty() {
        xl::plot(&plot, &r).map_err(|e| format!("cannot draw {}: {e}", plot.display()))?;
    }
    Ok(xl::markdown(
        &r,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        &plot,
    ))
}

fn scrubbed(program: &Path, home: &Path) -> Command {
    let mut c = Command::new(program);
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("NO_COLOR", "1")
        // The sandbox plays no registry: the image check is measured on its own
        // (docs/images.md), and nothing leaves the machine.
        .env("APPUPDATE_IMAGE_CHECK", "off")
        .stdin(Stdio::null());
    c
}

fn run_plugin(ctx: &Context, s: Scenario) -> Result<Run, String> {
    s.reset(&ctx.sb)?;
    let endpoints = match s.endpoints() {
        Some(text) => {
            let p = ctx.dir.join(format!("endpoints-{}.yaml", s.name()));
            std::fs::write(&p, text).map_err(|e| e.to_string())?;
            Some(p)
        }
        None => None,
    };
    let args = s.plugin_args(&ctx.kubeconfig, endpoints.as_deref());
    ctx.sb.clear_requests();
    let t = Instant::now();
    let out = scrubbed(&ctx.plugin, &ctx.home)
        .args(&args)
        .output()
        .map_err(|e| format!("cannot run the plugin: {e}"))?;
    let wall_ms = t.elapsed().as_secs_f64() * 1000.0;
    if !out.status.success() {
        return Err(format!(
            "the plugin failed ({}) in scenario {}: {}",
            out.status,
            s.name(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(Run {
        wall_ms,
        log: ctx.sb.requests(),
        connections: ctx.sb.counters().connections,
        processes: 1,
    })
}

fn dump(r: &Run) {
    eprintln!("plugin run: {:.1} ms wall", r.wall_ms);
    let t0 = r.log.first().map_or(0.0, |l| l.started_ms);
    for l in &r.log {
        eprintln!(
            "  +{:7.1} ms {:5.1} ms conn {} {} {} {}{}",
            l.started_ms - t0,
            l.duration_ms,
            l.connection_id,
            l.http_version,
            l.method,
            l.path,
            if l.dry_run { " (dry run)" } else { "" }
        );
    }
}

fn kubectl_commands(ctx: &Context, s: Scenario, cache: &Path) -> Result<Vec<Vec<String>>, String> {
    let manifest = ctx.dir.join(format!("ingresses-{}.yaml", s.name()));
    let cmds = s.kubectl_sequence(&ctx.sb, &manifest)?;
    Ok(cmds
        .into_iter()
        .map(|c| {
            let mut full = vec![
                "--kubeconfig".to_owned(),
                ctx.kubeconfig.display().to_string(),
                "--cache-dir".to_owned(),
                cache.display().to_string(),
            ];
            full.extend(c);
            full
        })
        .collect())
}

fn run_kubectl(ctx: &Context, s: Scenario, cache: &Path) -> Result<Run, String> {
    s.reset(&ctx.sb)?;
    let cmds = kubectl_commands(ctx, s, cache)?;
    ctx.sb.clear_requests();
    let t = Instant::now();
    for c in &cmds {
        let out = scrubbed(&ctx.kubectl, &ctx.home)
            .args(c)
            .output()
            .map_err(|e| format!("cannot run kubectl: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "kubectl {} failed ({}): {}",
                c[4..].join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    let wall_ms = t.elapsed().as_secs_f64() * 1000.0;
    Ok(Run {
        wall_ms,
        log: ctx.sb.requests(),
        connections: ctx.sb.counters().connections,
        processes: cmds.len(),
    })
}

/// What one process used, measured by the `--peak-rss` helper.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    /// Peak RSS (`ru_maxrss`), KiB.
    pub rss_kib: i64,
    /// CPU time, user + system, ms.
    pub cpu_ms: f64,
    pub wall_ms: f64,
    /// With `--sample-usage`: the most open file descriptors and threads seen.
    pub fds: usize,
    pub threads: usize,
}

/// Runs `prog args…` under `--peak-rss` in a child of its own; returns the peak RSS (KiB), the
/// CPU time (user + system, ms) and the wall time (ms).
fn peak_rss_of(prog: &Path, args: &[String], home: &Path) -> Result<(i64, f64, f64), String> {
    usage_of(prog, args, home, false).map(|u| (u.rss_kib, u.cpu_ms, u.wall_ms))
}

/// [`peak_rss_of`], and with `sample` the most file descriptors and threads `prog` had open.
fn usage_of(prog: &Path, args: &[String], home: &Path, sample: bool) -> Result<Usage, String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = scrubbed(&me, home);
    if sample {
        cmd.arg("--sample-usage");
    }
    let out = cmd
        .arg("--peak-rss")
        .arg(prog)
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut parts = text.split_whitespace();
    let rss_kib: i64 = parts
        .next()
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| format!("--peak-rss printed {text:?}"))?;
    let code = parts.next();
    let mut float = || {
        parts
            .next()
            .and_then(|p| p.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    let (cpu_ms, wall_ms, fds, threads) = (float(), float(), float(), float());
    match code {
        Some("0") => Ok(Usage {
            rss_kib,
            cpu_ms,
            wall_ms,
            fds: if fds.is_finite() { fds as usize } else { 0 },
            threads: if threads.is_finite() {
                threads as usize
            } else {
                0
            },
        }),
        other => Err(format!(
            "{} exited with {other:?} under --peak-rss: {}",
            prog.display(),
            String::from_utf8_lossy(&out.stderr)
        )),
    }
}

fn peak_rss_plugin(ctx: &Context, s: Scenario) -> Result<Option<(i64, f64)>, String> {
    s.reset(&ctx.sb)?;
    let p = ctx.dir.join("endpoints-rss.yaml");
    std::fs::write(&p, s.endpoints().unwrap_or_default()).map_err(|e| e.to_string())?;
    let args = s.plugin_args(&ctx.kubeconfig, s.endpoints().map(|_| p.as_path()));
    peak_rss_of(&ctx.plugin, &args, &ctx.home).map(|(kib, cpu, _)| Some((kib, cpu)))
}

/// The largest peak RSS of the sequence's processes, and their CPU time added up.
fn peak_rss_kubectl(ctx: &Context, s: Scenario) -> Result<Option<(i64, f64)>, String> {
    s.reset(&ctx.sb)?;
    let cmds = kubectl_commands(ctx, s, &ctx.warm_cache)?;
    let (mut max, mut cpu) = (0, 0.0);
    for c in &cmds {
        let (kib, ms, _) = peak_rss_of(&ctx.kubectl, c, &ctx.home)?;
        max = max.max(kib);
        cpu += ms;
    }
    Ok(Some((max, cpu)))
}

fn time_command(prog: &Path, args: &[&str], n: usize) -> Result<Summary, String> {
    let xs = (0..n)
        .map(|_| time_once(prog, args))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(summarize(&xs))
}

/// `--version` of the plugin `n` times, each run followed by one of `floor` (a Rust program
/// that starts and exits, `src/noop.rs`) started the same way: what starting any Rust program
/// costs on this machine at that moment, so that a busy machine shows in the floor and not
/// only in the plugin's figure.
fn time_start_up(
    plugin: &Path,
    floor: Option<&Path>,
    n: usize,
) -> Result<(Summary, Option<Summary>), String> {
    let mut xs = Vec::with_capacity(n);
    let mut fs = Vec::with_capacity(n);
    for _ in 0..n {
        xs.push(time_once(plugin, &["--version"])?);
        if let Some(floor) = floor {
            fs.push(time_once(floor, &[])?);
        }
    }
    Ok((summarize(&xs), floor.map(|_| summarize(&fs))))
}

/// Builds the start-up floor (`appupdate-noop`) with the release profile; `None` when that
/// fails (the report then has no floor).
fn build_noop(release: &Path) -> Option<PathBuf> {
    let ok = Command::new(cargo())
        .args([
            "build",
            "--release",
            "-p",
            "appupdate-bench",
            "--bin",
            "appupdate-noop",
        ])
        .current_dir(workspace_root())
        .status()
        .is_ok_and(|s| s.success());
    ok.then(|| release.join("appupdate-noop"))
}

/// Wall time of one run in ms: spawned with stdin from /dev/null, its output read to the end.
fn time_once(prog: &Path, args: &[&str]) -> Result<f64, String> {
    let t = Instant::now();
    let out = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", prog.display()))?;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    if !out.status.success() {
        return Err(format!("{} {} failed", prog.display(), args.join(" ")));
    }
    Ok(ms)
}

/// Writes one generated section into the report at `out`: replaced between its markers by
/// `replace`, or the whole file when there is no report yet.
fn write_section(
    out: &Path,
    section: &str,
    replace: fn(&str, &str) -> String,
    name: &str,
) -> Result<(), String> {
    let report = std::fs::read_to_string(out).unwrap_or_default();
    let text = if report.is_empty() {
        section.to_owned()
    } else {
        replace(&report, section)
    };
    std::fs::write(out, text).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    eprintln!("wrote the {name} section of {}", out.display());
    Ok(())
}

/// `kubectl` on PATH; when it is the version dispatcher with a `kubectl.1.28` beside it, that
/// one: the client the dispatcher would pick for the sandbox (v1.28), without the dispatcher's
/// own `/version` request and process per command.
fn find_kubectl() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let k = dir.join("kubectl");
        if k.is_file() {
            let real = std::fs::canonicalize(&k).unwrap_or(k.clone());
            if let Some(parent) = real.parent() {
                let direct = parent.join("kubectl.1.28");
                if direct.is_file() {
                    return direct;
                }
            }
            return k;
        }
    }
    PathBuf::from("kubectl")
}

fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// The 1, 5 and 15 minute load averages.
fn load_average() -> String {
    read_trim("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn now_utc() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

fn fill_machine(m: &mut Machine) {
    m.cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    m.cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into());
    m.kernel = read_trim("/proc/sys/kernel/osrelease");
    m.rustc = Command::new("rustc")
        .arg("-V")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
}

/// Criterion's saved medians for the `plan_10k` group.
fn read_criterion(release: &Path, extras: &mut Extras) {
    let root = release
        .parent()
        .map(|t| t.join("criterion").join("plan_10k"))
        .unwrap_or_default();
    for id in ["parse", "build_plan", "render_plan", "parse+plan+render"] {
        let p = root.join(id).join("new").join("estimates.json");
        if let Some(ns) = std::fs::read(&p)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .and_then(|v| v["median"]["point_estimate"].as_f64())
        {
            extras.criterion.push((id.to_owned(), ns));
        }
    }
    extras.criterion_note = if extras.criterion.is_empty() {
        format!("no criterion results found under {}", root.display())
    } else {
        String::new()
    };
}

/// A static musl build only when the toolchain already has the target.
fn musl_note() -> String {
    let sysroot = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let target = "x86_64-unknown-linux-musl";
    if Path::new(&sysroot)
        .join("lib/rustlib")
        .join(target)
        .is_dir()
    {
        let ok = Command::new(cargo())
            .args([
                "build",
                "--release",
                "--target",
                target,
                "--bin",
                "kubectl-appupdate",
            ])
            .current_dir(workspace_root())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        let bin = workspace_root()
            .join("target")
            .join(target)
            .join("release/kubectl-appupdate");
        match (ok, std::fs::metadata(&bin)) {
            (true, Ok(m)) => format!("static musl build: {}", report::mib(m.len())),
            _ => "static musl build: the target is installed but the build failed".into(),
        }
    } else {
        format!(
            "static musl build: not measured — the toolchain ({sysroot}) has no {target} target installed, and this benchmark does not download one"
        )
    }
}
