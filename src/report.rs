//! What happened to each object after apply, as data, and its rendering (one line per object).
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::io::{self, Write};

use console::Style;
use serde::Serialize;
use serde_json::Value;

use crate::error::ExitCode;
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

/// Why the run ended early, if it did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
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
    /// Whether any object was (or may have been) written.
    pub fn any_written(&self) -> bool {
        self.entries.iter().any(|(c, o)| {
            c.action() != Action::Unchanged
                && matches!(o, Outcome::Applied | Outcome::Unknown { .. })
        })
    }

    pub fn exit_code(&self) -> ExitCode {
        let tripped = self
            .entries
            .iter()
            .any(|(_, o)| matches!(o, Outcome::Tripped { .. }));
        let failed = self
            .entries
            .iter()
            .any(|(_, o)| matches!(o, Outcome::Failed { .. } | Outcome::Unknown { .. }));
        match self.interrupted {
            Some(Interruption::Sigint) => return ExitCode::Interrupted,
            Some(Interruption::Sigterm) => return ExitCode::Terminated,
            None => {}
        }
        if tripped {
            ExitCode::GuardTripped
        } else if failed {
            if self.any_written() {
                ExitCode::Partial
            } else {
                ExitCode::Failed
            }
        } else {
            ExitCode::Ok
        }
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
    if let Some(info) = &change.ingress {
        let scopes = if info.scopes.is_empty() {
            "public".to_owned()
        } else {
            format!("scopes {}", info.scopes.join(" "))
        };
        let n = info.paths.len();
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

/// One line per object, then a closing line when something did not go as planned.
pub fn render_report(out: &mut impl Write, report: &Report, color: bool) -> io::Result<()> {
    let paint = |s: Style, text: String| {
        if color {
            s.force_styling(true).apply_to(text).to_string()
        } else {
            text
        }
    };
    let mut not_applied = 0;
    for (change, outcome) in &report.entries {
        let what = describe_fields(change);
        let what = if what.is_empty() {
            String::new()
        } else {
            format!(" ({what})")
        };
        let line = match outcome {
            Outcome::Unchanged => continue,
            Outcome::Applied => paint(
                Style::new().green(),
                format!(
                    "{} {}{what}",
                    change.reference(),
                    past_tense(change.action())
                ),
            ),
            Outcome::AlreadyDone => format!(
                "{} already as planned (someone else made the same change){what}",
                change.reference()
            ),
            Outcome::Tripped { reason, .. } => {
                not_applied += 1;
                paint(
                    Style::new().red().bold(),
                    format!(
                        "{} NOT {}: {reason}",
                        change.reference(),
                        past_tense(change.action())
                    ),
                )
            }
            Outcome::Failed { message } => {
                not_applied += 1;
                paint(
                    Style::new().red(),
                    format!(
                        "{} NOT {}: {message}",
                        change.reference(),
                        past_tense(change.action())
                    ),
                )
            }
            Outcome::Unknown { message } => {
                not_applied += 1;
                paint(
                    Style::new().red().bold(),
                    format!(
                        "{} MAYBE {}: {message}; it may or may not have been applied — run again to see the state",
                        change.reference(),
                        past_tense(change.action())
                    ),
                )
            }
            Outcome::NotAttempted => {
                not_applied += 1;
                paint(
                    Style::new().yellow(),
                    format!(
                        "{} NOT {}: not attempted{what}",
                        change.reference(),
                        past_tense(change.action())
                    ),
                )
            }
        };
        writeln!(out, "{line}")?;
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
        writeln!(out, "{}", paint(Style::new().bold(), msg))?;
    }
    Ok(())
}
