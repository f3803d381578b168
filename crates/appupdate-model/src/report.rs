//! What happened to each object after apply, as data, and its lines (one per object, then a
//! closing line when something did not go as planned). Each line says whether it reports
//! something done or not done; which stream that is, is decided by the plugin's `streams`. Every
//! value in a line is written as [`Untrusted`]: an image, a name or a server's message cannot
//! control the terminal.

use std::sync::Arc;

use console::Style;
use serde_json::Value;

use crate::plan::{Action, Field, ObjectChange};
use crate::text::Untrusted;

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
    /// The server-side dry run showed that the cluster lacks what the change needs (an HTTPRoute
    /// without the ExternalAuth filter): refused before any write, as bad input is. `message`
    /// is one line, with what to do instead.
    Unsupported { message: String },
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
    pub entries: Vec<(Arc<ObjectChange>, Outcome)>,
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

/// A value in a few characters, escaped: it comes from the cluster or the command line.
fn short(v: Option<&Value>) -> String {
    match v {
        None => "(none)".into(),
        Some(Value::String(s)) => Untrusted(s).to_string(),
        Some(other) => Untrusted(other.to_string()).to_string(),
    }
}

/// What a change does, in a few words: `image web:1 → web:2`, `minReplicas 2 → 3`.
pub fn describe_fields(change: &ObjectChange) -> String {
    if let (Some(route), Action::Create) = (change.kind.guards(), change.action()) {
        return format!(
            "guards {}/{}",
            route.kubectl_name(),
            Untrusted(&change.name)
        );
    }
    if let Some(info) = &change.route {
        let scopes = if info.scopes.is_empty() {
            "public".to_owned()
        } else {
            format!("scopes {}", Untrusted(info.scopes.join(" ")))
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
        // A whole object (a route created or deleted again by an undo): the line says it.
        .filter(|f| f.field() != Some(Field::Whole))
        .map(|f| {
            // The last key: `maxReplicas`, or a bracketed one (`metadata.annotations[a.b/c]`).
            let leaf = match f.path.strip_suffix(']').and_then(|p| p.rsplit_once('[')) {
                Some((_, key)) if !key.contains('=') => key.to_owned(),
                _ => f
                    .path
                    .rsplit('.')
                    .next()
                    .unwrap_or(f.path.as_str())
                    .to_owned(),
            };
            let (before, after) = (f.before(), f.after());
            if [before.as_deref(), after.as_deref()]
                .iter()
                .any(|v| matches!(v, Some(Value::Object(_) | Value::Array(_))))
            {
                return format!("{} changed", Untrusted(leaf));
            }
            format!(
                "{} {} → {}",
                Untrusted(leaf),
                short(before.as_deref()),
                short(after.as_deref())
            )
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

/// One line of the report: its text, and the style it takes when colour is on. The text is
/// printable: every value in it (names, field values, messages) was escaped as the line was
/// built.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub fate: Fate,
    pub style: Style,
    pub text: String,
}

impl Line {
    pub fn new(fate: Fate, style: Style, text: String) -> Line {
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
    let mut lines = object_lines(report);
    lines.extend(closing_line(report));
    lines
}

/// The closing line of a report whose objects did not all go as planned: nothing changed, or
/// how many changes were not applied; `None` when everything went as planned.
pub fn closing_line(report: &Report) -> Option<Line> {
    let not_applied = object_lines(report)
        .iter()
        .filter(|l| l.fate == Fate::NotDone)
        .count();
    if not_applied == 0 {
        return None;
    }
    let msg = if report.stopped_in_preflight || !report.any_written() {
        "Nothing was changed.".to_owned()
    } else {
        format!(
            "The application is partly updated: {not_applied} change{} not applied (listed above).",
            if not_applied == 1 { " was" } else { "s were" }
        )
    };
    Some(Line::new(Fate::NotDone, Style::new().bold(), msg))
}

/// One line per object that was to change. What the cluster lacks ([`Outcome::Unsupported`])
/// is said once: a second object refused for the same reason points to the first line.
pub fn object_lines(report: &Report) -> Vec<Line> {
    let mut lines = Vec::new();
    let mut unsupported: Vec<&str> = Vec::new();
    for (change, outcome) in &report.entries {
        let what = describe_fields(change);
        let what = if what.is_empty() {
            String::new()
        } else {
            format!(" ({what})")
        };
        let reference = Untrusted(change.reference());
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
                format!("{reference} NOT {done}: {}", Untrusted(reason)),
            ),
            Outcome::Unsupported { message } if unsupported.contains(&message.as_str()) => {
                Line::new(
                    Fate::NotDone,
                    Style::new().red(),
                    format!("{reference} NOT {done}: the same (above)"),
                )
            }
            Outcome::Failed { message } | Outcome::Unsupported { message } => {
                if matches!(outcome, Outcome::Unsupported { .. }) {
                    unsupported.push(message);
                }
                Line::new(
                    Fate::NotDone,
                    Style::new().red(),
                    format!("{reference} NOT {done}: {}", Untrusted(message)),
                )
            }
            Outcome::Unknown { message } => Line::new(
                Fate::NotDone,
                Style::new().red().bold(),
                format!(
                    "{reference} MAYBE {done}: {}; it may or may not have been applied — run again to see the state",
                    Untrusted(message)
                ),
            ),
            Outcome::NotAttempted => Line::new(
                Fate::NotDone,
                Style::new().yellow(),
                format!("{reference} NOT {done}: not attempted{what}"),
            ),
        };
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    fn entry(name: &str, action: Action, outcome: Outcome) -> (Arc<ObjectChange>, Outcome) {
        (ObjectChange::sample(name, action).into(), outcome)
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
    fn values_and_messages_from_the_cluster_come_out_escaped() {
        let hostile = "nginx:1.25\u{1b}]0;pwned\u{7}\u{1b}[2J";
        let mut applied = ObjectChange::sample("web", Action::Update);
        applied.fields = vec![crate::plan::FieldChange::new(
            "spec.template.spec.containers[name=web].image",
            Some(Value::String(hostile.into())),
            Some(Value::String("nginx:1.26".into())),
        )];
        let report = Report {
            entries: vec![
                (applied.into(), Outcome::Applied),
                entry(
                    "b",
                    Action::Update,
                    Outcome::Failed {
                        message: "denied: \u{9b}2J\u{202e}".into(),
                    },
                ),
                entry(
                    "c",
                    Action::Update,
                    Outcome::Tripped {
                        reason: "image is now \u{1b}[31mx".into(),
                        fresh: None,
                    },
                ),
                entry(
                    "d",
                    Action::Update,
                    Outcome::Unknown {
                        message: "\u{200b}gone".into(),
                    },
                ),
            ],
            stopped_in_preflight: false,
            interrupted: None,
        };
        let texts: Vec<String> = lines(&report).into_iter().map(|l| l.text).collect();
        assert_eq!(
            texts[0],
            "ingress.networking.k8s.io/web updated (image nginx:1.25\\e]0;pwned\\x07\\e[2J → nginx:1.26)"
        );
        assert!(texts[1].ends_with("NOT updated: denied: \\u{9b}2J\\u{202e}"));
        assert!(texts[2].ends_with("NOT updated: image is now \\e[31mx"));
        assert!(texts[3].contains("MAYBE updated: \\u{200b}gone;"));
        for line in lines(&report) {
            for color in [false, true] {
                let shown = line.render(color);
                assert!(
                    matches!(
                        crate::text::for_terminal(&shown, color),
                        std::borrow::Cow::Borrowed(_)
                    ),
                    "{shown:?}"
                );
            }
        }
    }

    #[test]
    fn what_the_cluster_lacks_is_said_once() {
        let unsupported = |m: &str| Outcome::Unsupported {
            message: m.to_owned(),
        };
        let report = Report {
            entries: vec![
                entry(
                    "a",
                    Action::Create,
                    unsupported("no ExternalAuth filter; use X"),
                ),
                entry("b", Action::Create, Outcome::NotAttempted),
                entry(
                    "c",
                    Action::Update,
                    unsupported("no ExternalAuth filter; use X"),
                ),
                entry("d", Action::Update, unsupported("something else")),
            ],
            stopped_in_preflight: true,
            interrupted: None,
        };
        assert_eq!(
            fates(&report),
            [
                (
                    Fate::NotDone,
                    "ingress.networking.k8s.io/a NOT created: no ExternalAuth filter; use X".into()
                ),
                (
                    Fate::NotDone,
                    "ingress.networking.k8s.io/b NOT created: not attempted".into()
                ),
                (
                    Fate::NotDone,
                    "ingress.networking.k8s.io/c NOT updated: the same (above)".into()
                ),
                (
                    Fate::NotDone,
                    "ingress.networking.k8s.io/d NOT updated: something else".into()
                ),
                (Fate::NotDone, "Nothing was changed.".into()),
            ]
        );
        assert!(!report.went_as_planned());
        assert!(!report.any_written());
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
