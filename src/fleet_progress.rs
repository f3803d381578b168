//! Progress while a fleet applies: one line per cluster saying where it stands (dry run,
//! writing, updated, following the rollout, not started…). On a terminal indicatif draws the
//! lines in place; otherwise every change is one plain line on stderr (`context eu-1:
//! updated`), for logs. The text handed in is escaped by the caller; indicatif draws itself,
//! the plain lines go through the output layer's writer.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

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
    /// Nothing shown: one cluster's writes are told by its report.
    Hidden,
}

/// One line per cluster, in the order of the contexts.
pub struct FleetProgress {
    /// `context <name>`, escaped.
    names: Vec<String>,
    draw: Mutex<Draw>,
}

impl FleetProgress {
    /// Bars on a terminal (`terminal`), else plain lines written to `out`.
    pub fn new(
        contexts: &[String],
        order: &crate::fleet::FleetOrder,
        terminal: bool,
        color: bool,
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
        let draw = if terminal {
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
        let draw = self.draw.lock().unwrap_or_else(PoisonError::into_inner);
        if let Draw::Bars { bars, .. } = &*draw
            && let Some(bar) = bars.get(i)
        {
            bar.set_message(status.to_owned());
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
            Draw::Lines { .. } | Draw::Hidden => crate::streams::notice(line),
        }
    }

    /// Moves the spinners on (called a few times a second while the fleet applies).
    pub fn tick(&self) {
        let draw = self.draw.lock().unwrap_or_else(PoisonError::into_inner);
        if let Draw::Bars { bars, .. } = &*draw {
            for bar in bars {
                bar.tick();
            }
        }
    }

    /// Clears the lines from the terminal (the report follows).
    pub fn finish(&self) {
        let draw = self.draw.lock().unwrap_or_else(PoisonError::into_inner);
        if let Draw::Bars { multi, bars } = &*draw {
            for bar in bars {
                bar.finish_and_clear();
            }
            let _ = multi.clear();
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
