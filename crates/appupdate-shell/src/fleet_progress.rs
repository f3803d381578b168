//! Progress while a fleet applies: one line per cluster saying where it stands (dry run,
//! writing, updated, following the rollout, not started…). On a terminal indicatif draws the
//! lines in place; otherwise every change is one plain line on stderr (`context eu-1:
//! updated`), for logs. The text handed in is escaped by the caller; indicatif draws itself,
//! the plain lines go through the output layer's writer.
//!
//! A fleet of more than [`ONE_LINE_EACH_UP_TO`] clusters is told in counts instead
//! ([`Tally`]): one line for the whole fleet, `300 clusters: 120 dry run passed, 180 writing 1
//! change` — in place on a terminal, and in a log at most once a second and once at the end.
//! The report that follows names the clusters of every outcome.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::wait;
use appupdate_model::rollout::RolloutState;
use appupdate_model::route_status::{RouteRef, RouteState};
use appupdate_model::text::Untrusted;

enum Draw {
    Bars {
        multi: MultiProgress,
        bars: Vec<ProgressBar>,
    },
    Lines {
        out: Box<dyn Write + Send>,
        last: Vec<String>,
    },
    /// One line of counts for a large fleet: a spinner on a terminal (`bar`), else plain
    /// lines written to `out` at most every [`TALLY_EVERY`].
    Counts {
        tally: Tally,
        bar: Option<ProgressBar>,
        out: Box<dyn Write + Send>,
        /// When the last plain line was written, and what it said.
        written: Option<(Instant, String)>,
        /// [`TALLY_EVERY`].
        every: Duration,
    },
    /// Nothing shown: one cluster's writes are told by its report.
    Hidden,
}

/// Up to this many clusters, each has a line of its own; beyond, the fleet is told in counts.
pub const ONE_LINE_EACH_UP_TO: usize = 32;

/// A log gets a line of counts at most this often (and one more at the end).
const TALLY_EVERY: Duration = Duration::from_secs(1);

/// Where each cluster stands, told as counts: clusters are counted together when their status
/// is the same up to its first `": "` or `" ("` (`following the rollout: 2 of 3 updated` and
/// `…: 3 of 3 updated` are both "following the rollout"; `successfully rolled out (1 replica …)`
/// and `(3 replicas …)` both "successfully rolled out"), in the order of the first cluster that
/// stands there.
#[derive(Debug)]
pub struct Tally {
    statuses: Vec<Option<String>>,
}

impl Tally {
    pub fn new(clusters: usize) -> Tally {
        Tally {
            statuses: vec![None; clusters],
        }
    }

    /// Cluster `i` now stands at `status`.
    pub fn set(&mut self, i: usize, status: &str) {
        if let Some(slot) = self.statuses.get_mut(i) {
            let end = [": ", " ("]
                .iter()
                .filter_map(|sep| status.find(sep))
                .min()
                .unwrap_or(status.len());
            let group = &status[..end];
            *slot = Some(group.to_owned());
        }
    }

    /// `300 clusters: 120 dry run passed, 180 writing 1 change`; clusters with no status yet
    /// are `waiting`.
    pub fn line(&self) -> String {
        let mut groups: Vec<(&str, usize)> = Vec::new();
        for status in &self.statuses {
            let status = status.as_deref().unwrap_or("waiting");
            match groups.iter_mut().find(|(s, _)| *s == status) {
                Some((_, n)) => *n += 1,
                None => groups.push((status, 1)),
            }
        }
        let counts: Vec<String> = groups.iter().map(|(s, n)| format!("{n} {s}")).collect();
        format!("{} clusters: {}", self.statuses.len(), counts.join(", "))
    }
}

/// One line per cluster, in the order of the contexts.
pub struct FleetProgress {
    /// `context <name>`, escaped.
    names: Vec<String>,
    draw: Mutex<Draw>,
}

impl FleetProgress {
    /// Bars on a terminal (`terminal`), else plain lines written to `out`; one line of counts
    /// instead when there are more than [`ONE_LINE_EACH_UP_TO`] contexts and not `each`.
    pub fn new(
        contexts: &[String],
        order: &crate::fleet::FleetOrder,
        terminal: bool,
        color: bool,
        each: bool,
        out: Box<dyn Write + Send>,
    ) -> Arc<Self> {
        let names: Vec<String> = contexts
            .iter()
            .map(|c| {
                if order.canary.contains(c) {
                    format!("context {} (the canary)", Untrusted(c))
                } else if let Some(w) = order.wave_of(c) {
                    format!("context {} (wave {w})", Untrusted(c))
                } else {
                    format!("context {}", Untrusted(c))
                }
            })
            .collect();
        let draw = if contexts.len() > ONE_LINE_EACH_UP_TO && !each {
            let bar = terminal.then(|| {
                let template = if color {
                    "{spinner:.cyan} {msg}"
                } else {
                    "{spinner} {msg}"
                };
                let style = ProgressStyle::with_template(template)
                    .unwrap_or_else(|_| ProgressStyle::default_spinner());
                ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
                    .with_style(style)
                    .with_message(Tally::new(contexts.len()).line())
            });
            Draw::Counts {
                tally: Tally::new(contexts.len()),
                bar,
                out,
                written: None,
                every: TALLY_EVERY,
            }
        } else if terminal {
            let width = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
            let template = if color {
                "{spinner:.cyan} {prefix:.bold} {msg}"
            } else {
                "{spinner} {prefix} {msg}"
            };
            let style = ProgressStyle::with_template(template)
                .unwrap_or_else(|_| ProgressStyle::default_spinner());
            let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
            let bars = names
                .iter()
                .map(|n| {
                    let padded = format!("{n:width$}");
                    multi.add(
                        ProgressBar::new_spinner()
                            .with_style(style.clone())
                            .with_prefix(padded),
                    )
                })
                .collect();
            Draw::Bars { multi, bars }
        } else {
            Draw::Lines {
                out,
                last: vec![String::new(); names.len()],
            }
        };
        Arc::new(FleetProgress {
            names,
            draw: Mutex::new(draw),
        })
    }

    /// No lines: a run over one cluster, whose report says how its writes went; notices
    /// still go to stderr.
    pub fn hidden() -> Arc<Self> {
        Arc::new(FleetProgress {
            names: Vec::new(),
            draw: Mutex::new(Draw::Hidden),
        })
    }

    /// Cluster `i` is busy with `status` (escaped text): shown on a terminal only, where the
    /// line changes in place; plain lines say where each cluster got to, not every step.
    pub fn busy(&self, i: usize, status: &str) {
        let mut draw = self.draw.lock().unwrap_or_else(PoisonError::into_inner);
        match &mut *draw {
            Draw::Bars { bars, .. } => {
                if let Some(bar) = bars.get(i) {
                    bar.set_message(status.to_owned());
                }
            }
            Draw::Counts {
                tally,
                bar: Some(bar),
                ..
            } => {
                tally.set(i, status);
                bar.set_message(tally.line());
            }
            _ => {}
        }
    }

    /// Cluster `i` now stands at `status` (escaped text).
    pub fn set(&self, i: usize, status: &str) {
        let mut draw = self.draw.lock().unwrap_or_else(PoisonError::into_inner);
        match &mut *draw {
            Draw::Bars { bars, .. } => {
                if let Some(bar) = bars.get(i) {
                    bar.set_message(status.to_owned());
                }
            }
            Draw::Lines { out, last } => {
                if let (Some(last), Some(name)) = (last.get_mut(i), self.names.get(i))
                    && last != status
                {
                    status.clone_into(last);
                    let _ = writeln!(out, "{name}: {status}");
                    let _ = out.flush();
                }
            }
            Draw::Counts {
                tally,
                bar,
                out,
                written,
                every,
            } => {
                tally.set(i, status);
                match bar {
                    Some(bar) => bar.set_message(tally.line()),
                    // The line is made only when one may be written: with thousands of
                    // clusters, a count of them all at every step would add up.
                    None if written
                        .as_ref()
                        .is_none_or(|(at, _)| at.elapsed() >= *every) =>
                    {
                        let line = tally.line();
                        if written.as_ref().is_none_or(|(_, last)| *last != line) {
                            let _ = writeln!(out, "{line}");
                            let _ = out.flush();
                            *written = Some((Instant::now(), line));
                        }
                    }
                    None => {}
                }
            }
            Draw::Hidden => {}
        }
    }

    /// A notice (our own text) above the lines, or as a plain line.
    pub fn notice(&self, line: &str) {
        let draw = self.draw.lock().unwrap_or_else(PoisonError::into_inner);
        match &*draw {
            Draw::Bars { multi, .. } => {
                let _ = multi.println(line.trim_start_matches('\n'));
            }
            Draw::Counts { bar: Some(bar), .. } => {
                bar.suspend(|| crate::streams::notice(line));
            }
            Draw::Lines { .. } | Draw::Counts { bar: None, .. } | Draw::Hidden => {
                crate::streams::notice(line)
            }
        }
    }

    /// Moves the spinners on (called a few times a second while the fleet applies).
    pub fn tick(&self) {
        let draw = self.draw.lock().unwrap_or_else(PoisonError::into_inner);
        match &*draw {
            Draw::Bars { bars, .. } => {
                for bar in bars {
                    bar.tick();
                }
            }
            Draw::Counts { bar: Some(bar), .. } => bar.tick(),
            _ => {}
        }
    }

    /// Clears the lines from the terminal (the report follows); a log gets the last counts if
    /// it has not had them yet.
    pub fn finish(&self) {
        let mut draw = self.draw.lock().unwrap_or_else(PoisonError::into_inner);
        match &mut *draw {
            Draw::Bars { multi, bars } => {
                for bar in bars {
                    bar.finish_and_clear();
                }
                let _ = multi.clear();
            }
            Draw::Counts { bar: Some(bar), .. } => bar.finish_and_clear(),
            Draw::Counts {
                tally,
                bar: None,
                out,
                written,
                ..
            } => {
                let line = tally.line();
                if written.as_ref().is_some_and(|(_, last)| *last != line) {
                    let _ = writeln!(out, "{line}");
                    let _ = out.flush();
                    *written = Some((Instant::now(), line));
                }
            }
            Draw::Lines { .. } | Draw::Hidden => {}
        }
    }

    /// Ticks every 120 ms until dropped (a task on the current runtime).
    pub fn ticking(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let me = self.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_millis(120));
            loop {
                every.tick().await;
                me.tick();
            }
        })
    }
}

/// The rollout of one cluster's Deployment and its routes, shown on its line.
pub struct RolloutLine {
    pub progress: Arc<FleetProgress>,
    pub index: usize,
}

impl wait::Progress for RolloutLine {
    fn update(&mut self, state: &RolloutState) {
        self.progress.set(
            self.index,
            &format!("following the rollout: {}", Untrusted(state.to_string())),
        );
    }

    fn route(&mut self, route: &RouteRef, state: &RouteState) {
        self.progress.set(
            self.index,
            &format!("following {}: {state}", route.reference()),
        );
    }

    fn finish(&mut self, state: Option<&RolloutState>) {
        if let Some(state @ RolloutState::Complete { .. }) = state {
            self.progress
                .set(self.index, &Untrusted(state.to_string()).to_string());
        }
    }

    fn reason(&mut self, reason: &str) {
        self.progress
            .set(self.index, &format!("following the rollout: {reason}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer the test reads back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner))
                .into_owned()
        }
    }

    fn contexts(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("c{i:04}")).collect()
    }

    #[test]
    fn the_counts_group_statuses_by_what_precedes_their_details() {
        let mut tally = Tally::new(5);
        assert_eq!(tally.line(), "5 clusters: 5 waiting");
        tally.set(0, "dry run passed");
        tally.set(1, "following the rollout: 1 of 3 updated");
        tally.set(2, "following the rollout: 2 of 3 updated");
        tally.set(3, "NOT updated: refused by the dry run");
        assert_eq!(
            tally.line(),
            "5 clusters: 1 dry run passed, 2 following the rollout, 1 NOT updated, 1 waiting"
        );
        tally.set(
            1,
            "successfully rolled out (1 replica updated and available)",
        );
        tally.set(
            2,
            "successfully rolled out (3 replicas updated and available)",
        );
        assert_eq!(
            tally.line(),
            "5 clusters: 1 dry run passed, 2 successfully rolled out, 1 NOT updated, 1 waiting"
        );
        tally.set(0, "updated");
        tally.set(9, "out of range"); // ignored
        assert_eq!(
            tally.line(),
            "5 clusters: 1 updated, 2 successfully rolled out, 1 NOT updated, 1 waiting"
        );
    }

    #[test]
    fn a_large_fleet_logs_counts_at_most_once_a_second_and_the_last_at_the_end() {
        let out = Shared::default();
        let n = ONE_LINE_EACH_UP_TO + 1;
        let progress = FleetProgress::new(
            &contexts(n),
            &crate::fleet::FleetOrder::default(),
            false,
            false,
            false,
            Box::new(out.clone()),
        );
        // A second that never ends, however slow the machine.
        if let Draw::Counts { every, .. } =
            &mut *progress.draw.lock().unwrap_or_else(PoisonError::into_inner)
        {
            *every = Duration::from_secs(3600);
        }
        for i in 0..n {
            progress.set(i, "dry run passed");
        }
        for i in 0..n {
            progress.set(i, "updated");
        }
        // The first change is logged at once; the rest within the interval are not.
        assert_eq!(
            out.text(),
            format!("{n} clusters: 1 dry run passed, 32 waiting\n")
        );
        progress.finish();
        assert_eq!(
            out.text(),
            format!("{n} clusters: 1 dry run passed, 32 waiting\n{n} clusters: {n} updated\n")
        );
        // Nothing new, nothing more.
        progress.finish();
        assert_eq!(out.text().lines().count(), 2);
    }

    #[test]
    fn up_to_the_limit_or_verbose_each_cluster_has_its_line() {
        for (n, each) in [
            (ONE_LINE_EACH_UP_TO, false),
            (ONE_LINE_EACH_UP_TO + 1, true),
        ] {
            let out = Shared::default();
            let progress = FleetProgress::new(
                &contexts(n),
                &crate::fleet::FleetOrder::default(),
                false,
                false,
                each,
                Box::new(out.clone()),
            );
            for i in 0..n {
                progress.set(i, "updated");
            }
            progress.finish();
            let text = out.text();
            assert_eq!(text.lines().count(), n, "{text}");
            assert!(text.starts_with("context c0000: updated\n"), "{text}");
        }
    }
}
