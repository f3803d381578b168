//! The Markdown report and the PNG plot.

use std::fmt::Write as _;
use std::path::Path;

use appupdate_bench::scenario::Scenario;
#[cfg(feature = "plot")]
use plotters::prelude::*;

use crate::{Cell, Contender, Extras, Floor, Machine};

pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB ({bytes} bytes)", bytes as f64 / 1024.0 / 1024.0)
}

pub(crate) fn ms(x: f64) -> String {
    if x < 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.0}")
    }
}

/// Milliseconds to two decimals: start-up, where a tenth is a twentieth of the figure.
fn ms_fine(x: f64) -> String {
    format!("{x:.2}")
}

fn cell_text(c: &Cell, k: Contender) -> String {
    let s = c.summary(k);
    format!("**{}** ({}–{})", ms(s.median), ms(s.min), ms(s.max))
}

fn ratio(c: &Cell, k: Contender) -> String {
    let p = c.summary(Contender::Plugin).median;
    let o = c.summary(k).median;
    if p > 0.0 {
        format!("{:.1}×", o / p)
    } else {
        "–".into()
    }
}

const SETUP: &str = "\
* **Server**: the project's sandbox API server (`crates/sandbox-apiserver`, behaves like
  kube-apiserver v1.28) with TLS (generated CA, ALPN `h2` and `http/1.1`), in the benchmark's
  process.
* **Network**: a TCP latency proxy in front of it (`crates/bench/src/proxy.rs`): every chunk, in
  each direction, is written to the other side RTT/2 after it was read, in order; and nothing
  the client sends reaches the server before one RTT after the connection was accepted, which
  is what TCP's SYN/SYN-ACK costs. So a new connection pays one RTT for TCP and then the TLS
  handshake's round trips, as on a real network. The RTT is fixed per connection. Timers have
  millisecond granularity, so each hop may take up to ~1 ms more than RTT/2 (the same for both
  contenders).
* **kubectl-appupdate**: the release binary, `kubectl-appupdate web -n demo --image … [--min 3
  --max 9 --endpoints FILE] --image-check off --yes --color never`, one process (the image
  check asks the image's registry, which the benchmark does not serve).
* **kubectl**: the command sequence that ends in the same state, each a new process:
  `set image deployment/web app=…`; `patch hpa web --type merge -p '{\"spec\":{\"minReplicas\":3,\"maxReplicas\":9}}'`;
  `apply -f ingresses.yaml` (every desired Ingress — created, updated and unchanged ones — in one
  file and one process; the YAML is the plugin's own view of each desired Ingress, generated with
  the plugin's planner); `delete ingress <stale names…>` (one process; kubectl's default
  `--wait`). This is the *fewest* kubectl processes that can do it. The kubectl binary is the
  one the machine's version dispatcher would pick for a v1.28 server, called directly, so the
  dispatcher's own `/version` request and extra process are *not* charged to kubectl.
  *Cold cache*: a fresh `--cache-dir` for every sequence (a CI job on a new machine: the first
  command does discovery, the later ones reuse it). *Warm cache*: a `--cache-dir` filled by one
  untimed sequence before the timed ones (a developer's laptop).
* **Procedure**: for every RTT and scenario, the application is reset to the scenario's
  starting state before every run (untimed, through the sandbox handle); the contenders are
  alternated (plugin, cold, warm; then warm, cold, plugin; …); wall time is from process spawn
  to exit of the last process; cells show the **median** and the (min–max) range; the ratio is
  kubectl's median over the plugin's median, measured in the same run. After every run the end
  state (Deployment and HPA labels, annotations and spec; every Ingress of the namespace by
  name, with labels, annotations and spec, less kubectl's `last-applied-configuration`) is
  compared with the first run's; any difference fails the benchmark.";

const SCENARIOS: &str = "\
* **S** — `--image` only. Start: the sandbox demo application `web` in namespace `demo`
  (Deployment, Service, HPA 2–5, managed Ingresses for the public and `[user]` groups, one
  unmanaged Ingress).
* **M** — `--image --min 3 --max 9 --endpoints` with 5 scope groups: the demo application plus a
  managed Ingress for `[admin]`; the file changes the paths of the public and `[user]` groups
  (2 updates), adds `[admin, user]` and `[billing]` (2 creates) and no longer has `[admin]`
  (1 delete).
* **L** — `--image --min 3 --max 9 --endpoints` with 1 000 endpoints in 100 scope groups. Start:
  the demo Deployment, Service, HPA and unmanaged Ingress, and 100 managed Ingresses
  `[team-000]`…`[team-099]` with 10 paths each, as this tool would have created them. The file
  has groups 005–104: 50 groups with one path renamed (50 updates), 45 unchanged, 5 new
  (5 creates); groups 000–004 are gone (5 deletes). kubectl applies all 100 desired Ingresses.";

const FLOOR: &str = "\
The floor: one concurrent read round (S: the Deployment; M, L: Deployment, HPA, Service and
the managed-Ingress LIST); when the run changes more than one object, one dry-run request per
changed object, all in one round of its own, so that nothing is written until the server has
accepted every change (a run that writes one object, as S does, sends no dry run: its one write
is that check, and refused it leaves nothing written); one write per changed object, in as many
rounds as the dependencies between the writes force (`plan::write_order`): a route that stops
serving a path waits for the write that serves that path elsewhere (a create, or an update of
another group's route), and everything else — the Deployment, the HPA, creates, routes that gain
or keep their paths, routes whose dropped paths nobody serves any more — goes in the first write
round, so a path served before and after the run is served at every moment of it (the one
exception, paths that swap groups in a cycle, is in the README); then the change's history
record: the history ConfigMap's read and one SelfSubjectReview in the read round (two requests,
no round of their own: an image change names the revision its record will get in the
Deployment's change-cause annotation, and the record names the user) and one conditional write
of the record sent with the last write round (one request, no round: by then every earlier write
has landed, so the record says what the writes will have done; when one of that round's writes
does not land, one more write corrects the record, or takes it back with the records it pruned,
so the history never lists a change that was not made). No discovery; no read repeated without a
conflict; one connection (one TLS handshake). The \"other\" column counts the SelfSubjectReview.

Rounds are derived from the sandbox's request log: requests that overlap in time form one
round — sorted by arrival, a request joins the current round if it reached the server less than
RTT/2 after the round's last answer left, and starts a new round otherwise (a request that
needed an answer first arrives a full RTT after it; requests sent together arrive within a few
milliseconds, even when the server works through a burst of them one by one).
It is computed at the largest RTT measured, where rounds are unambiguous.";

#[allow(clippy::too_many_arguments)]
pub fn markdown(
    m: &Machine,
    cells: &[Cell],
    floors: &[(Scenario, Floor)],
    x: &Extras,
    mismatches: &[String],
    plot: &Path,
    rtts: &[u64],
    reps: usize,
    fleet: Option<&str>,
    xl: Option<&str>,
    image: Option<&str>,
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Performance\n");
    let _ = writeln!(
        s,
        "Generated by `appupdate-bench` on {} in {:.0} s ({} timed repetitions per scenario, RTT and contender). Regenerate with the command below; the numbers are from this machine only.\n",
        m.started, m.total_s, reps
    );
    let _ = writeln!(s, "## Reproduce\n");
    let _ = writeln!(
        s,
        "```sh\ncargo run --release -p appupdate-bench --features plot -- --out docs/performance.md\n```\n\n\
         One command: it builds the release plugin, runs the criterion benchmark \
         (`cargo bench -p kubectl-appupdate --bench plan`), runs every scenario at RTT {} ms, \
         measures peak RSS, start-up and size, and writes this file and `{}`. Options: \
         `--reps N`, `--rtt 0,5,20`, `--scenarios S,M,L,fleet,XL,image`, `--kubectl PATH`, `--plugin PATH`, \
         `--no-criterion`, for the fleet scenario `--fleet-sizes 1,4,16`, `--fleet-rtt 20`, \
         `--fleet-scenario S`, and for the image section `--image-rtt 20` (it needs `docker-registry` on PATH). The CPU benchmark alone: `cargo bench --bench plan`. Not part of \
         `cargo nextest run` (only the harness's unit tests and a proxy smoke test are).\n",
        rtts.iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        plot.file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default()
    );
    let _ = writeln!(s, "## Machine\n");
    let _ = writeln!(
        s,
        "| | |\n| --- | --- |\n| CPU | {} |\n| cores | {} (shared with other work: builds and tests of other engineers ran at the same time) |\n| load average before / after | {} / {} |\n| kernel | {} |\n| toolchain | {} |\n| kubectl | {} (`{}`) |\n| proxy | {} |\n",
        m.cpu,
        m.cores,
        m.load_before,
        m.load_after,
        m.kernel,
        m.rustc,
        m.kubectl,
        m.kubectl_path,
        m.proxy
    );
    let _ = writeln!(s, "## Setup\n\n{SETUP}\n\n### Scenarios\n\n{SCENARIOS}\n");

    let _ = writeln!(s, "## Wall time\n");
    let _ = writeln!(
        s,
        "Milliseconds, **median** (min–max) of {reps} runs. Ratio = kubectl median ÷ kubectl-appupdate median.\n"
    );
    let _ = writeln!(
        s,
        "| scenario | RTT | kubectl-appupdate | kubectl, cold cache | kubectl, warm cache | ratio (cold) | ratio (warm) |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    for c in cells {
        let _ = writeln!(
            s,
            "| {} | {} ms | {} | {} | {} | **{}** | **{}** |",
            c.scenario.name(),
            c.rtt_ms,
            cell_text(c, Contender::Plugin),
            cell_text(c, Contender::KubectlCold),
            cell_text(c, Contender::KubectlWarm),
            ratio(c, Contender::KubectlCold),
            ratio(c, Contender::KubectlWarm)
        );
    }
    let noisiest = cells
        .iter()
        .flat_map(|c| Contender::ALL.map(|k| (c, k, c.summary(k))))
        .filter(|(_, _, s)| s.median > 0.0)
        .map(|(c, k, s)| ((s.max - s.min) / s.median, c, k))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    if let Some((spread, c, k)) = noisiest {
        let _ = writeln!(
            s,
            "\nNoise: the widest range was {:.0} % of its median ({}, scenario {}, RTT {} ms). The machine's 2 cores were shared with other builds, so single runs can be slow; the medians and the ratios (same run, alternated) are what to read.",
            spread * 100.0,
            k.label(),
            c.scenario.name(),
            c.rtt_ms
        );
    }
    if mismatches.is_empty() {
        let _ = writeln!(
            s,
            "\nEnd states: every run of every contender ended in the same state as the first run of its scenario."
        );
    } else {
        let _ = writeln!(
            s,
            "\n**End states differed in {} run(s):**\n",
            mismatches.len()
        );
        for mm in mismatches {
            let _ = writeln!(s, "```\n{mm}\n```");
        }
    }
    let _ = writeln!(
        s,
        "\n![wall time versus RTT](./{})\n",
        plot.file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default()
    );
    // The image check's cost, beside the wall time it adds to.
    if let Some(section) = image {
        let _ = writeln!(s, "{section}");
    }

    let max_rtt = cells.iter().map(|c| c.rtt_ms).max().unwrap_or(0);
    let _ = writeln!(
        s,
        "## Requests, rounds and connections (at RTT {max_rtt} ms)\n"
    );
    let _ = writeln!(s, "{FLOOR}\n");
    let _ = writeln!(
        s,
        "| scenario | who | requests | discovery | reads | dry runs | writes | other | rounds | connections (TLS handshakes) | HTTP | processes | at the floor |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |"
    );
    for (sc, floor) in floors {
        let _ = writeln!(
            s,
            "| {} | **floor** | {} | 0 | {} | {} | {} | 0 | {} | 1 | | 1 | |",
            sc.name(),
            floor.requests(),
            floor.reads,
            floor.dry_runs(),
            floor.changes,
            floor.rounds()
        );
        let Some(cell) = cells
            .iter()
            .find(|c| c.scenario == *sc && c.rtt_ms == max_rtt)
        else {
            continue;
        };
        for k in Contender::ALL {
            let accs = cell.accountings(k);
            let Some((a, conns)) = accs.first() else {
                continue;
            };
            let consistent = accs
                .iter()
                .all(|(b, c)| b.requests == a.requests && b.rounds == a.rounds && c == conns);
            let verdict = if k == Contender::Plugin {
                let mut why = Vec::new();
                if a.requests != floor.requests() {
                    why.push(format!("{} requests", a.requests));
                }
                if a.rounds != floor.rounds() {
                    why.push(format!("{} rounds", a.rounds));
                }
                if *conns != 1 {
                    why.push(format!("{conns} connections"));
                }
                if a.discovery != 0 {
                    why.push("discovery".into());
                }
                if why.is_empty() {
                    "**yes**".to_owned()
                } else {
                    format!("no: {}", why.join(", "))
                }
            } else {
                String::new()
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {}{} |",
                sc.name(),
                k.label(),
                a.requests,
                a.discovery,
                a.reads,
                a.dry_runs,
                a.writes,
                a.other,
                a.rounds,
                conns,
                a.http_versions.join(", "),
                cell.first(k).map_or(0, |r| r.processes),
                verdict,
                if consistent {
                    ""
                } else {
                    " (runs differed; first shown)"
                }
            );
        }
    }

    let _ = writeln!(s, "\n## CPU, memory, start-up, size\n");
    if x.criterion.is_empty() {
        let _ = writeln!(s, "CPU: {}\n", x.criterion_note);
    } else {
        let _ = writeln!(
            s,
            "Pure CPU work for 10 000 endpoints in 1 000 scope groups against 1 000 live managed Ingresses (500 of them changed), criterion medians (`benches/plan.rs`):\n\n| step | median |\n| --- | ---: |"
        );
        for (id, ns) in &x.criterion {
            let _ = writeln!(s, "| {id} | {:.1} ms |", ns / 1e6);
        }
        let _ = writeln!(s);
    }
    let kib = |k: Option<(i64, f64)>| {
        k.map_or("not measured".to_owned(), |k| {
            format!("{:.1} MiB", k.0 as f64 / 1024.0)
        })
    };
    let cpu =
        |k: Option<(i64, f64)>| k.map_or("not measured".to_owned(), |k| format!("{:.0} ms", k.1));
    let _ = writeln!(
        s,
        "| measure | kubectl-appupdate | kubectl |\n| --- | ---: | ---: |\n| peak RSS, scenario L at RTT 0 (whole process; kubectl: the largest of its processes) | {} | {} |\n| CPU time (user + system), scenario L at RTT 0 (kubectl: its processes added up) | {} | {} |\n| process start (`--version` / `version --client`), median (min–max) of {} / {} | {} ms ({}–{}) | {} ms ({}–{}) |\n| release binary size | {} | |\n",
        kib(x.peak_rss_plugin_kib),
        kib(x.peak_rss_kubectl_kib),
        cpu(x.peak_rss_plugin_kib),
        cpu(x.peak_rss_kubectl_kib),
        x.start_plugin.n,
        x.start_kubectl.n,
        ms_fine(x.start_plugin.median),
        ms_fine(x.start_plugin.min),
        ms_fine(x.start_plugin.max),
        ms(x.start_kubectl.median),
        ms(x.start_kubectl.min),
        ms(x.start_kubectl.max),
        mib(x.binary_size),
    );
    if let Some(f) = &x.start_floor {
        let _ = writeln!(
            s,
            "Process start is the wall time from spawn to exit with the output read (`Command::output`, stdin from /dev/null). Each `--version` run was followed by one of a Rust program that starts and exits (`appupdate-noop`, `crates/bench/src/noop.rs`, same profile) started the same way: {} ms median ({}–{}), the floor on this machine at that moment; the plugin's own start-up is the difference.\n",
            ms_fine(f.median),
            ms_fine(f.min),
            ms_fine(f.max)
        );
    }
    let _ = writeln!(
        s,
        "Peak RSS is `getrusage(RUSAGE_CHILDREN).ru_maxrss` of a helper process that runs exactly one child. Release profile: fat LTO, 1 codegen unit, panic = abort, stripped. {}.\n",
        x.musl
    );
    if let Some(section) = xl {
        let _ = writeln!(s, "{section}");
    }
    if let Some(section) = fleet {
        let _ = writeln!(s, "{section}");
    }
    let _ = writeln!(s, "{}", crate::notes::NOTES);
    s
}

/// Without the `plot` feature there is no chart (`run` refuses before measuring anything).
#[cfg(not(feature = "plot"))]
pub fn plot(_path: &Path, _cells: &[Cell]) -> Result<(), Box<dyn std::error::Error>> {
    Err("built without the plot feature".into())
}

/// Wall time versus RTT, one panel per scenario, one line per contender.
#[cfg(feature = "plot")]
pub fn plot(path: &Path, cells: &[Cell]) -> Result<(), Box<dyn std::error::Error>> {
    register_font()?;
    let scenarios: Vec<Scenario> = Scenario::ALL
        .into_iter()
        .filter(|s| cells.iter().any(|c| c.scenario == *s))
        .collect();
    let width = 560 * scenarios.len().max(1) as u32;
    let root = BitMapBackend::new(path, (width, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let (title, body) = root.split_vertically(50);
    title.titled(
        "Wall time vs RTT: kubectl-appupdate and the equivalent kubectl sequence (median)",
        ("sans-serif", 24).into_font(),
    )?;
    let panels = body.split_evenly((1, scenarios.len().max(1)));
    let colors = [
        RGBColor(0, 114, 178),
        RGBColor(213, 94, 0),
        RGBColor(0, 158, 115),
    ];
    for (panel, sc) in panels.iter().zip(&scenarios) {
        let mine: Vec<&Cell> = cells.iter().filter(|c| c.scenario == *sc).collect();
        let max_rtt = mine.iter().map(|c| c.rtt_ms).max().unwrap_or(1).max(1) as f64;
        let max_ms = mine
            .iter()
            .flat_map(|c| Contender::ALL.map(|k| c.summary(k).median))
            .fold(1.0_f64, f64::max)
            * 1.12;
        let mut chart = ChartBuilder::on(panel)
            .caption(format!("{}: {}", sc.name(), short(*sc)), ("sans-serif", 19))
            .margin(14)
            .x_label_area_size(42)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5..max_rtt + 0.5, 0.0..max_ms)?;
        chart
            .configure_mesh()
            .x_desc("RTT (ms)")
            .y_desc("wall time (ms)")
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .label_style(("sans-serif", 15))
            .axis_desc_style(("sans-serif", 16))
            .draw()?;
        for (k, color) in Contender::ALL.into_iter().zip(colors) {
            let pts: Vec<(f64, f64)> = mine
                .iter()
                .map(|c| (c.rtt_ms as f64, c.summary(k).median))
                .collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(3)))?
                .label(k.label())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 22, y)], color.stroke_width(3))
                });
            chart.draw_series(pts.iter().map(|p| Circle::new(*p, 5, color.filled())))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 15))
            .draw()?;
    }
    root.present()?;
    Ok(())
}

#[cfg(feature = "plot")]
fn short(s: Scenario) -> &'static str {
    match s {
        Scenario::S => "image only",
        Scenario::M => "image, bounds, 5 Ingress changes",
        Scenario::L => "image, bounds, 100 scope groups",
    }
}

/// plotters' ab_glyph backend draws text with a font we hand it: DejaVu Sans or Liberation
/// Sans, wherever the system keeps them.
#[cfg(feature = "plot")]
pub(crate) fn register_font() -> Result<(), Box<dyn std::error::Error>> {
    const CANDIDATES: [&str; 5] = [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
        "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
        "/usr/share/fonts/liberation/LiberationSans-Regular.ttf",
    ];
    let bytes = CANDIDATES
        .iter()
        .find_map(|p| std::fs::read(p).ok())
        .ok_or("no TrueType font found (install fonts-dejavu-core)")?;
    let leaked: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, leaked)
        .map_err(|_| "the font cannot be read")?;
    Ok(())
}

/// `report` with the text from `begin` to `end` (a generated section's markers) replaced by
/// `section`, or, without those markers, `section` added at the end.
pub fn replace_marked(report: &str, section: &str, begin: &str, end: &str) -> String {
    match (report.find(begin), report.find(end)) {
        (Some(b), Some(e)) if e > b => {
            let after = &report[e + end.len()..];
            format!("{}{}{}", &report[..b], section.trim_end(), after)
        }
        _ => format!("{}\n\n{}", report.trim_end_matches('\n'), section),
    }
}

#[cfg(test)]
mod tests {
    use super::replace_marked;

    /// Each generated section (fleet, XL, image) through its own markers.
    #[test]
    fn only_the_section_between_the_markers_is_replaced() {
        for (begin, end, replace) in [
            (
                crate::fleet::BEGIN,
                crate::fleet::END,
                crate::fleet::replace_section as fn(&str, &str) -> String,
            ),
            (crate::xl::BEGIN, crate::xl::END, crate::xl::replace_section),
            (
                crate::image::BEGIN,
                crate::image::END,
                crate::image::replace_section,
            ),
        ] {
            let report = format!("# P\n\nbefore\n\n{begin}\nold\n{end}\n\nafter\n");
            let new = format!("{begin}\nnew\n{end}\n");
            assert_eq!(
                replace(&report, &new),
                format!("# P\n\nbefore\n\n{begin}\nnew\n{end}\n\nafter\n")
            );
            assert_eq!(
                replace("# P\n\ntext\n", &new),
                format!("# P\n\ntext\n\n{begin}\nnew\n{end}\n")
            );
            assert_eq!(
                replace_marked(&report, &new, begin, end),
                replace(&report, &new)
            );
        }
    }
}
