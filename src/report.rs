//! What happened to each object after apply, as data, and its lines (one per object, then a
//! closing line when something did not go as planned). Each line says whether it reports
//! something done or not done; which stream that is, is [`crate::streams`]'s decision.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use console::Style;
use serde_json::Value;

use crate::plan::{Action, ObjectChange};

/// The fate of one planned object.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Written: created, updated or deleted as planned.
    Applied,
    /// Nothing left to write: the live object already held the approved values.
    AlreadyDone,
    /// The approved-diff guard stopped this object: a field it changes moved since the plan was
    /// shown. `fresh` is what the run would now do (not applied).
    Tripped {
        reason: String,
        fresh: Option<Box<ObjectChange>>,
    },
    /// The request failed; `message` is one line.
    Failed { message: String },
    /// The write was sent but no answer came back (timeout, connection lost): it may or may
    /// not have been applied.
    Unknown { message: String },
    /// Not attempted because an earlier step failed or the run was interrupted.
    NotAttempted,
    /// Planned as unchanged: nothing to do.
    Unchanged,
}

/// Why the run ended early, if it did: SIGINT (Ctrl-C) or SIGTERM (on Windows, Ctrl-Break
/// or the console closing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interruption {
    Sigint,
    Sigterm,
}

/// The result of applying a plan.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub entries: Vec<(ObjectChange, Outcome)>,
    /// The server-side dry run failed or tripped: nothing was written.
    pub stopped_in_preflight: bool,
    pub interrupted: Option<Interruption>,
}

impl Report {
    /// Every change was applied (or already held): nothing tripped, failed or was left out,
    /// and no signal cut the run short.
    pub fn went_as_planned(&self) -> bool {
        self.interrupted.is_none()
            && self.entries.iter().all(|(_, o)| {
                matches!(
                    o,
                    Outcome::Applied | Outcome::AlreadyDone | Outcome::Unchanged
                )
            })
    }

    /// Whether any object was (or may have been) written.
    pub fn any_written(&self) -> bool {
        self.entries.iter().any(|(c, o)| {
            c.action() != Action::Unchanged
                && matches!(o, Outcome::Applied | Outcome::Unknown { .. })
        })
    }
}

fn short(v: &Option<Value>) -> String {
    match v {
        None => "(none)".into(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// What a change does, in a few words: `image web:1 → web:2`, `minReplicas 2 → 3`.
pub fn describe_fields(change: &ObjectChange) -> String {
    if let Some(info) = &change.route {
        let scopes = if info.scopes.is_empty() {
            "public".to_owned()
        } else {
            format!("scopes {}", info.scopes.join(" "))
        };
        let n = if change.action() == Action::Delete {
            info.paths_before.len()
        } else {
            info.paths.len()
        };
        return format!("{scopes}, {n} path{}", if n == 1 { "" } else { "s" });
    }
    change
        .fields
        .iter()
        .map(|f| {
            let leaf = f
                .path
                .rsplit('.')
                .next()
                .unwrap_or(f.path.as_str())
                .to_owned();
            format!("{leaf} {} → {}", short(&f.before), short(&f.after))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn past_tense(action: Action) -> &'static str {
    match action {
        Action::Create => "created",
        Action::Update => "updated",
        Action::Delete => "deleted",
        Action::Unchanged => "unchanged",
    }
}

/// What a line of the report says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Something was done, or already was as planned.
    Done,
    /// Something was not done, or may not have been; or the closing line of a run that did
    /// not go as planned.
    NotDone,
}

/// One line of the report: its text, and the style it takes when colour is on.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub fate: Fate,
    pub style: Style,
    pub text: String,
}

impl Line {
    fn new(fate: Fate, style: Style, text: String) -> Line {
        Line { fate, style, text }
    }

    /// The text, styled when `color` is on.
    pub fn render(&self, color: bool) -> String {
        if color {
            self.style
                .clone()
                .force_styling(true)
                .apply_to(&self.text)
                .to_string()
        } else {
            self.text.clone()
        }
    }
}

/// One line per object, then a closing line when something did not go as planned.
pub fn lines(report: &Report) -> Vec<Line> {
    let mut lines = Vec::new();
    let mut not_applied = 0;
    for (change, outcome) in &report.entries {
        let what = describe_fields(change);
        let what = if what.is_empty() {
            String::new()
        } else {
            format!(" ({what})")
        };
        let reference = change.reference();
        let done = past_tense(change.action());
        let line = match outcome {
            Outcome::Unchanged => continue,
            Outcome::Applied => Line::new(
                Fate::Done,
                Style::new().green(),
                format!("{reference} {done}{what}"),
            ),
            Outcome::AlreadyDone => Line::new(
                Fate::Done,
                Style::new(),
                format!("{reference} already as planned (someone else made the same change){what}"),
            ),
            Outcome::Tripped { reason, .. } => Line::new(
                Fate::NotDone,
                Style::new().red().bold(),
                format!("{reference} NOT {done}: {reason}"),
            ),
            Outcome::Failed { message } => Line::new(
                Fate::NotDone,
                Style::new().red(),
                format!("{reference} NOT {done}: {message}"),
            ),
            Outcome::Unknown { message } => Line::new(
                Fate::NotDone,
                Style::new().red().bold(),
                format!(
                    "{reference} MAYBE {done}: {message}; it may or may not have been applied — run again to see the state"
                ),
            ),
            Outcome::NotAttempted => Line::new(
                Fate::NotDone,
                Style::new().yellow(),
                format!("{reference} NOT {done}: not attempted{what}"),
            ),
        };
        if line.fate == Fate::NotDone {
            not_applied += 1;
        }
        lines.push(line);
    }
    if not_applied > 0 {
        let msg = if report.stopped_in_preflight || !report.any_written() {
            "Nothing was changed.".to_owned()
        } else {
            format!(
                "The application is partly updated: {not_applied} change{} not applied (listed above).",
                if not_applied == 1 { " was" } else { "s were" }
            )
        };
        lines.push(Line::new(Fate::NotDone, Style::new().bold(), msg));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    fn entry(name: &str, action: Action, outcome: Outcome) -> (ObjectChange, Outcome) {
        (ObjectChange::sample(name, action), outcome)
    }

    fn fates(report: &Report) -> Vec<(Fate, String)> {
        lines(report)
            .into_iter()
            .map(|l| (l.fate, l.text))
            .collect()
    }

    #[test]
    fn what_was_done_is_done_and_everything_else_is_not() {
        let report = Report {
            entries: vec![
                entry("a", Action::Create, Outcome::Applied),
                entry("b", Action::Update, Outcome::AlreadyDone),
                entry("c", Action::Unchanged, Outcome::Unchanged),
                entry(
                    "d",
                    Action::Update,
                    Outcome::Failed {
                        message: "forbidden".into(),
                    },
                ),
                entry("e", Action::Delete, Outcome::NotAttempted),
            ],
            stopped_in_preflight: false,
            interrupted: None,
        };
        assert_eq!(
            fates(&report),
            [
                (Fate::Done, "ingress.networking.k8s.io/a created".into()),
                (
                    Fate::Done,
                    "ingress.networking.k8s.io/b already as planned (someone else made the same change)".into()
                ),
                (
                    Fate::NotDone,
                    "ingress.networking.k8s.io/d NOT updated: forbidden".into()
                ),
                (
                    Fate::NotDone,
                    "ingress.networking.k8s.io/e NOT deleted: not attempted".into()
                ),
                (
                    Fate::NotDone,
                    "The application is partly updated: 2 changes were not applied (listed above).".into()
                ),
            ]
        );
        assert!(!report.went_as_planned());
    }

    #[test]
    fn a_run_that_went_as_planned_has_no_closing_line() {
        let report = Report {
            entries: vec![entry("a", Action::Create, Outcome::Applied)],
            stopped_in_preflight: false,
            interrupted: None,
        };
        assert_eq!(lines(&report).len(), 1);
        assert!(report.went_as_planned());
    }
}
