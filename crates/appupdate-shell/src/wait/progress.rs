//! How the wait shows what it follows ([`Progress`]): indicatif bars on a terminal ([`Bar`]),
//! one plain line per change otherwise ([`Lines`]).

use std::io::Write;
use std::time::Duration;

use super::Followed;
use appupdate_model::rollout::RolloutState;
use appupdate_model::route_status::{RouteRef, RouteState};
use appupdate_model::text::Untrusted;

/// Receives each new state of what is followed.
pub trait Progress {
    fn update(&mut self, state: &RolloutState);
    /// A route's new state; never a refusal (the error says that, once).
    fn route(&mut self, route: &RouteRef, state: &RouteState);
    /// The wait ended; `state` is the last rollout state seen (complete or not).
    fn finish(&mut self, state: Option<&RolloutState>);
    /// Why the rollout is not done yet, from its new pods (escaped):
    /// `web-7d9c-x2kq: ImagePullBackOff`.
    fn reason(&mut self, reason: &str);
    /// The last reason told, if any.
    fn last_reason(&self) -> Option<String> {
        None
    }
}

/// A route's line: `<reference> accepted by …` once taken up, else `Waiting for <reference>: …`.
fn route_line(route: &RouteRef, state: &RouteState, color: bool) -> String {
    if state.is_ready() {
        let line = format!("{} {state}", route.reference());
        if color {
            console::style(line).green().force_styling(true).to_string()
        } else {
            line
        }
    } else {
        format!("Waiting for {}: {state}", route.reference())
    }
}

/// One plain line per change of state, for logs and pipelines.
pub struct Lines<W: Write> {
    out: W,
    reference: String,
    color: bool,
    last: Option<String>,
    /// The last reason told.
    last_reason: Option<String>,
    /// The last line of each route.
    last_route: Vec<(RouteRef, String)>,
}

impl<W: Write> Lines<W> {
    pub fn new(out: W, reference: &str, color: bool) -> Self {
        Lines {
            out,
            reference: reference.to_owned(),
            color,
            last: None,
            last_reason: None,
            last_route: Vec::new(),
        }
    }

    #[cfg(test)]
    pub fn into_inner(self) -> W {
        self.out
    }

    fn write_line(&mut self, line: &str) {
        // Progress is best effort: a closed stderr must not fail a run whose writes landed.
        let _ = writeln!(self.out, "{line}");
        let _ = self.out.flush();
    }
}

impl<W: Write> Progress for Lines<W> {
    fn update(&mut self, state: &RolloutState) {
        let text = Untrusted(state.to_string()).to_string();
        if self.last.as_deref() == Some(text.as_str()) {
            return;
        }
        let reference = Untrusted(&self.reference);
        let line = if state.is_complete() {
            let line = format!("{reference} {text}");
            if self.color {
                console::style(line).green().force_styling(true).to_string()
            } else {
                line
            }
        } else {
            format!("Waiting for the rollout of {reference}: {text}")
        };
        self.write_line(&line);
        self.last = Some(text);
    }

    fn route(&mut self, route: &RouteRef, state: &RouteState) {
        let line = route_line(route, state, self.color);
        match self.last_route.iter_mut().find(|(r, _)| r == route) {
            Some((_, last)) if *last == line => return,
            Some((_, last)) => *last = line.clone(),
            None => self.last_route.push((route.clone(), line.clone())),
        }
        self.write_line(&line);
    }

    fn finish(&mut self, _state: Option<&RolloutState>) {}

    fn reason(&mut self, reason: &str) {
        if self.last_reason.as_deref() == Some(reason) {
            return;
        }
        let line = format!(
            "Waiting for the rollout of {}: {reason}",
            Untrusted(&self.reference)
        );
        self.write_line(&line);
        self.last_reason = Some(reason.to_owned());
    }

    fn last_reason(&self) -> Option<String> {
        self.last_reason.clone()
    }
}

/// indicatif on the terminal (stderr): a bar for the rollout (updated replicas of the desired
/// count) and a spinner per route; the last lines go to `out` once they are cleared. Their
/// texts (the references, the states) are escaped: indicatif draws them as they are.
pub struct Bar {
    multi: indicatif::MultiProgress,
    rollout: Option<indicatif::ProgressBar>,
    /// Each route's spinner and, once taken up, its last line.
    routes: Vec<(RouteRef, indicatif::ProgressBar, Option<String>)>,
    reference: String,
    color: bool,
    out: Box<dyn Write + Send>,
    last_reason: Option<String>,
}

impl Bar {
    /// Bars for what `followed` holds; `reference` names the Deployment.
    pub fn new(
        reference: &str,
        followed: &Followed,
        color: bool,
        out: Box<dyn Write + Send>,
    ) -> Self {
        let multi =
            indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::stderr());
        let template = if color {
            "{spinner:.cyan} {prefix} [{bar:24.cyan/blue}] {pos}/{len} {msg}"
        } else {
            "{spinner} {prefix} [{bar:24}] {pos}/{len} {msg}"
        };
        let style = indicatif::ProgressStyle::with_template(template)
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> ");
        let rollout = followed.rollout.then(|| {
            let bar = multi.add(
                indicatif::ProgressBar::new(0)
                    .with_style(style)
                    .with_prefix(format!("rollout of {}", Untrusted(reference))),
            );
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        let spinner_template = if color {
            "{spinner:.cyan} {prefix} {msg}"
        } else {
            "{spinner} {prefix} {msg}"
        };
        let spinner = indicatif::ProgressStyle::with_template(spinner_template)
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner());
        let routes = followed
            .routes
            .iter()
            .map(|route| {
                let bar = multi.add(
                    indicatif::ProgressBar::new_spinner()
                        .with_style(spinner.clone())
                        .with_prefix(route.reference())
                        .with_message("waiting for its status"),
                );
                bar.enable_steady_tick(Duration::from_millis(120));
                (route.clone(), bar, None)
            })
            .collect();
        Bar {
            multi,
            rollout,
            routes,
            reference: reference.to_owned(),
            color,
            out,
            last_reason: None,
        }
    }
}

impl Progress for Bar {
    fn update(&mut self, state: &RolloutState) {
        let Some(bar) = &self.rollout else { return };
        if let Some((done, total)) = state.progress() {
            bar.set_length(total);
            bar.set_position(done);
        }
        bar.set_message(Untrusted(state.to_string()).to_string());
    }

    fn route(&mut self, route: &RouteRef, state: &RouteState) {
        let color = self.color;
        if let Some((_, bar, ready)) = self.routes.iter_mut().find(|(r, ..)| r == route) {
            bar.set_message(state.to_string());
            if state.is_ready() {
                bar.finish();
                *ready = Some(route_line(route, state, color));
            } else {
                *ready = None;
            }
        }
    }

    fn reason(&mut self, reason: &str) {
        if let Some(bar) = &self.rollout {
            bar.set_message(reason.to_owned());
        }
        self.last_reason = Some(reason.to_owned());
    }

    fn last_reason(&self) -> Option<String> {
        self.last_reason.clone()
    }

    fn finish(&mut self, state: Option<&RolloutState>) {
        if let Some(bar) = &self.rollout {
            bar.finish_and_clear();
        }
        for (_, bar, _) in &self.routes {
            bar.finish_and_clear();
        }
        let _ = self.multi.clear();
        let mut lines = Vec::new();
        if let Some(state @ RolloutState::Complete { .. }) = state {
            let line = format!("{} {state}", Untrusted(&self.reference));
            lines.push(if self.color {
                console::style(line).green().force_styling(true).to_string()
            } else {
                line
            });
        }
        lines.extend(self.routes.iter().filter_map(|(_, _, ready)| ready.clone()));
        for line in lines {
            let _ = writeln!(self.out, "{line}");
        }
        let _ = self.out.flush();
    }
}
