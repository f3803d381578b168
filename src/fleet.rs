//! How a run over several clusters (a fleet) ended, as data: each cluster's end, the lines
//! of the report, and the `-o json|yaml` document (`kubectl-appupdate.fleet/v1`: each
//! cluster's plan and outcome). Pure: the run ([`crate::fleet_run`]) fills a [`FleetEnd`];
//! [`crate::streams`] writes its lines, [`crate::exit`] turns it into the exit code.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use console::Style;
use serde::Serialize;

use crate::error::AppError;
use crate::fleet_plan::FleetPlan;
use crate::history_store::Recorded;
use crate::output::{self, PlanDocument, SummaryDoc};
use crate::plan::Action;
use crate::report::{self, Fate, Interruption, Line, Outcome, Report};
use crate::text::Untrusted;
use crate::wait::{RolloutState, WaitError};

/// The schema of the fleet document.
pub const SCHEMA_VERSION: &str = "kubectl-appupdate.fleet/v1";

/// Why a cluster was not started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotStarted {
    /// Another cluster's dry run (or a saved plan's re-check) refused: nothing is written
    /// anywhere.
    RefusedElsewhere,
    /// Another cluster failed, and `--stop-on-failure` is on.
    AfterFailure,
    /// A canary did not apply or did not roll out.
    Canary,
    /// A signal asked to start nothing new.
    Interrupted,
}

impl NotStarted {
    fn why(self) -> &'static str {
        match self {
            NotStarted::RefusedElsewhere => {
                "its dry run passed, but another cluster refused the change, so nothing was written anywhere"
            }
            NotStarted::AfterFailure => "another cluster failed (--stop-on-failure)",
            NotStarted::Canary => "the canary did not apply and roll out",
            NotStarted::Interrupted => "interrupted before it started",
        }
    }

    fn code(self) -> &'static str {
        match self {
            NotStarted::RefusedElsewhere => "refused-elsewhere",
            NotStarted::AfterFailure => "after-failure",
            NotStarted::Canary => "canary",
            NotStarted::Interrupted => "interrupted",
        }
    }
}

/// What became of one cluster.
#[derive(Debug)]
pub enum ClusterState {
    /// It could not be planned (unreachable, forbidden, the application not found, a change
    /// that does not fit it): nothing was written anywhere.
    Failed(AppError),
    /// Unreachable, forbidden or not found, and left out (`--skip-unreachable`).
    Skipped(AppError),
    /// Planned; the run stopped before writing (a dry run, a saved plan, or another cluster
    /// that could not be planned).
    Planned,
    /// Its dry run or its saved plan's re-check refused: nothing was written anywhere.
    Refused(Report),
    /// Nothing to change here; `rollout` when it was followed.
    Unchanged {
        rollout: Option<Result<RolloutState, WaitError>>,
    },
    /// Written, or writing stopped: the report says what happened to each object; `rollout`
    /// when it was followed.
    Applied {
        report: Report,
        recorded: Recorded,
        rollout: Option<Result<RolloutState, WaitError>>,
    },
    NotStarted(NotStarted),
}

/// Every object of `report` was written or already as planned (a signal that came after the
/// last write does not change that).
fn objects_done(report: &Report) -> bool {
    report.entries.iter().all(|(_, o)| {
        matches!(
            o,
            Outcome::Applied | Outcome::AlreadyDone | Outcome::Unchanged
        )
    })
}

impl ClusterState {
    /// How it ended, in a few words, for the closing line.
    fn in_short(&self) -> &'static str {
        let rollout_failed =
            |r: &Option<Result<RolloutState, WaitError>>| matches!(r, Some(Err(_)));
        match self {
            ClusterState::Failed(_) => "failed",
            ClusterState::Skipped(_) => "skipped",
            ClusterState::Planned => "planned only",
            ClusterState::Refused(_) => "refused",
            ClusterState::NotStarted(_) => "not started",
            ClusterState::Unchanged { rollout } if rollout_failed(rollout) => {
                "already as planned whose rollout did not complete"
            }
            ClusterState::Unchanged { .. } => "already as planned",
            ClusterState::Applied {
                report, rollout, ..
            } => {
                let tripped = report
                    .entries
                    .iter()
                    .any(|(_, o)| matches!(o, Outcome::Tripped { .. }));
                if objects_done(report) && rollout_failed(rollout) {
                    "updated whose rollout did not complete"
                } else if objects_done(report) {
                    "updated"
                } else if report.interrupted.is_some() {
                    "interrupted"
                } else if tripped {
                    "stopped by the guard"
                } else if report.any_written() {
                    "partly updated"
                } else {
                    "failed"
                }
            }
        }
    }

    /// Updated (and rolled out when followed), or nothing to change (and rolled out when
    /// followed).
    pub fn as_planned(&self) -> bool {
        let rolled_out = |r: &Option<Result<RolloutState, WaitError>>| !matches!(r, Some(Err(_)));
        match self {
            ClusterState::Applied {
                report, rollout, ..
            } => objects_done(report) && rolled_out(rollout),
            ClusterState::Unchanged { rollout } => rolled_out(rollout),
            _ => false,
        }
    }
}

/// One cluster and its end.
#[derive(Debug)]
pub struct ClusterEnd {
    pub context: String,
    /// Applied first (`--canary`).
    pub canary: bool,
    /// `None` when it could not be connected to.
    pub namespace: Option<String>,
    pub state: ClusterState,
}

impl ClusterEnd {
    /// Whether anything was (or may have been) written in this cluster.
    pub fn written(&self) -> bool {
        matches!(&self.state, ClusterState::Applied { report, .. } if report.any_written())
    }

    /// Whether this cluster ended as planned: updated (and rolled out when followed), or
    /// nothing to change.
    pub fn as_planned(&self) -> bool {
        self.state.as_planned()
    }

    /// The first line of the cluster's part of the report.
    pub fn heading(&self) -> Line {
        let c = Untrusted(&self.context);
        let canary = if self.canary { ", the canary" } else { "" };
        let at = match &self.namespace {
            Some(ns) => format!("context {c} (namespace {}{canary})", Untrusted(ns)),
            None if self.canary => format!("context {c} (the canary)"),
            None => format!("context {c}"),
        };
        let not_done = |style: Style, text: String| Line::new(Fate::NotDone, style, text);
        match &self.state {
            ClusterState::Failed(err) => not_done(
                Style::new().red(),
                format!("{at}: NOT updated: {}", Untrusted(err.to_string())),
            ),
            ClusterState::Skipped(err) => not_done(
                Style::new().yellow(),
                format!(
                    "{at}: skipped (--skip-unreachable): {}",
                    Untrusted(err.to_string())
                ),
            ),
            ClusterState::Planned => not_done(
                Style::new().yellow(),
                format!("{at}: planned, NOT updated: another cluster could not be planned"),
            ),
            ClusterState::Refused(_) => not_done(
                Style::new().red(),
                format!("{at}: NOT updated: refused before any write"),
            ),
            ClusterState::Unchanged { .. } => Line::new(
                Fate::Done,
                Style::new(),
                format!("{at}: already as planned, nothing to change"),
            ),
            ClusterState::NotStarted(why) => not_done(
                Style::new().yellow(),
                format!("{at}: NOT started: {}", why.why()),
            ),
            ClusterState::Applied { report, .. } => {
                let tripped = report
                    .entries
                    .iter()
                    .any(|(_, o)| matches!(o, Outcome::Tripped { .. }));
                if objects_done(report) {
                    Line::new(
                        Fate::Done,
                        Style::new().green().bold(),
                        format!("{at}: updated"),
                    )
                } else if report.interrupted.is_some() {
                    not_done(
                        Style::new().red().bold(),
                        format!(
                            "{at}: interrupted while writing{}",
                            if report.any_written() {
                                ", partly updated"
                            } else {
                                ""
                            }
                        ),
                    )
                } else if tripped {
                    not_done(
                        Style::new().red().bold(),
                        format!(
                            "{at}: stopped by the approved-diff guard{}",
                            if report.any_written() {
                                ", partly updated"
                            } else {
                                ""
                            }
                        ),
                    )
                } else if report.any_written() {
                    not_done(Style::new().red().bold(), format!("{at}: partly updated"))
                } else {
                    not_done(
                        Style::new().red(),
                        format!("{at}: NOT updated: nothing was changed"),
                    )
                }
            }
        }
    }

    /// What happened to each object (under the heading).
    pub fn objects(&self) -> Vec<Line> {
        match &self.state {
            ClusterState::Applied { report, .. } | ClusterState::Refused(report) => {
                report::object_lines(report)
            }
            _ => Vec::new(),
        }
    }

    /// How the rollout of `app`'s Deployment ended, when it was followed.
    pub fn rollout(&self, app: &str) -> Option<Line> {
        let rollout = match &self.state {
            ClusterState::Applied { rollout, .. } | ClusterState::Unchanged { rollout } => {
                rollout.as_ref()
            }
            _ => None,
        };
        match rollout? {
            Ok(state) => Some(Line::new(
                Fate::Done,
                Style::new().green(),
                format!("deployment.apps/{} {state}", Untrusted(app)),
            )),
            Err(e) => Some(Line::new(
                Fate::NotDone,
                Style::new().red(),
                Untrusted(e.to_string()).to_string(),
            )),
        }
    }
}

/// How a run over several clusters ended, cluster by cluster (in the order of the contexts).
#[derive(Debug)]
pub struct FleetEnd {
    pub app: String,
    pub clusters: Vec<ClusterEnd>,
    /// The first signal, if one stopped the run while it was writing or following rollouts.
    pub interrupted: Option<Interruption>,
    /// `--dry-run --detailed-exitcode` with changes pending.
    pub changes_pending: bool,
}

impl FleetEnd {
    pub fn any_written(&self) -> bool {
        self.clusters.iter().any(ClusterEnd::written)
    }

    /// The last line of the report.
    pub fn closing(&self) -> Line {
        let n = self.clusters.len();
        let count = |f: &dyn Fn(&ClusterEnd) -> bool| self.clusters.iter().filter(|c| f(c)).count();
        let updated = count(&|c| c.as_planned() && c.written());
        let unchanged = count(&|c| c.as_planned() && !c.written());
        let skipped = count(&|c| matches!(c.state, ClusterState::Skipped(_)));
        let clusters = |k: usize| format!("{k} cluster{}", if k == 1 { "" } else { "s" });
        if updated + unchanged == n {
            let mut text = format!("Fleet: {} of {} updated", updated, clusters(n));
            if unchanged > 0 {
                text.push_str(&format!(", {unchanged} already as planned"));
            }
            text.push('.');
            return Line::new(Fate::Done, Style::new().green().bold(), text);
        }
        if !self.any_written() {
            return Line::new(
                Fate::NotDone,
                Style::new().bold(),
                format!("Nothing was changed in any of the {}.", clusters(n)),
            );
        }
        let text = if updated + unchanged + skipped == n {
            format!(
                "The fleet is updated except {} skipped (--skip-unreachable): {} of {} updated.",
                clusters(skipped),
                updated,
                clusters(n)
            )
        } else {
            // How many ended each way, in the order the ways first appear.
            let mut ways: Vec<(&'static str, usize)> = Vec::new();
            for c in &self.clusters {
                let way = c.state.in_short();
                match ways.iter_mut().find(|(w, _)| *w == way) {
                    Some((_, k)) => *k += 1,
                    None => ways.push((way, 1)),
                }
            }
            let ways: Vec<String> = ways.iter().map(|(w, k)| format!("{k} {w}")).collect();
            format!(
                "The fleet is partly updated: {} (of {}, listed above).",
                ways.join(", "),
                clusters(n)
            )
        };
        Line::new(Fate::NotDone, Style::new().bold(), text)
    }
}

// ---- the `-o json|yaml` document ----

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FleetDocument<'a> {
    schema: &'static str,
    app: String,
    has_changes: bool,
    summary: SummaryDoc,
    clusters: Vec<ClusterDoc<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ClusterDoc<'a> {
    context: String,
    namespace: Option<String>,
    canary: bool,
    /// Clusters with identical plans share a section.
    section: Option<usize>,
    plan: Option<PlanDocument<'a>>,
    outcome: OutcomeDoc,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OutcomeDoc {
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    objects: Vec<ObjectOutcomeDoc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    revision: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rollout: Option<RolloutDoc>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ObjectOutcomeDoc {
    reference: String,
    action: Action,
    outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RolloutDoc {
    complete: bool,
    message: String,
}

fn object_outcomes(report: &Report) -> Vec<ObjectOutcomeDoc> {
    report
        .entries
        .iter()
        .filter(|(_, o)| !matches!(o, Outcome::Unchanged))
        .map(|(change, outcome)| {
            let (outcome, message) = match outcome {
                Outcome::Applied => ("applied", None),
                Outcome::AlreadyDone => ("already-done", None),
                Outcome::Tripped { reason, .. } => ("tripped", Some(reason.clone())),
                // The fleet document's `failed`: the object was refused before any write.
                Outcome::Failed { message } | Outcome::Unsupported { message } => {
                    ("failed", Some(message.clone()))
                }
                Outcome::Unknown { message } => ("unknown", Some(message.clone())),
                Outcome::NotAttempted => ("not-attempted", None),
                Outcome::Unchanged => ("unchanged", None),
            };
            ObjectOutcomeDoc {
                reference: change.reference(),
                action: change.action(),
                outcome,
                message,
            }
        })
        .collect()
}

fn rollout_doc(rollout: &Option<Result<RolloutState, WaitError>>) -> Option<RolloutDoc> {
    rollout.as_ref().map(|r| match r {
        Ok(state) => RolloutDoc {
            complete: true,
            message: state.to_string(),
        },
        Err(e) => RolloutDoc {
            complete: false,
            message: e.to_string(),
        },
    })
}

fn outcome_doc(end: Option<&ClusterEnd>, planned: bool) -> OutcomeDoc {
    let empty = |status: &'static str, message: Option<String>| OutcomeDoc {
        status,
        message,
        objects: Vec::new(),
        revision: None,
        rollout: None,
    };
    let Some(end) = end else {
        return empty(if planned { "planned" } else { "skipped" }, None);
    };
    match &end.state {
        ClusterState::Failed(e) => empty("failed", Some(e.to_string())),
        ClusterState::Skipped(e) => empty("skipped", Some(e.to_string())),
        ClusterState::Planned => empty("planned", None),
        ClusterState::NotStarted(why) => OutcomeDoc {
            status: "not-started",
            message: Some(format!("{}: {}", why.code(), why.why())),
            ..empty("not-started", None)
        },
        ClusterState::Refused(report) => OutcomeDoc {
            objects: object_outcomes(report),
            ..empty("refused", None)
        },
        ClusterState::Unchanged { rollout } => OutcomeDoc {
            rollout: rollout_doc(rollout),
            ..empty("unchanged", None)
        },
        ClusterState::Applied {
            report,
            recorded,
            rollout,
        } => {
            let tripped = report
                .entries
                .iter()
                .any(|(_, o)| matches!(o, Outcome::Tripped { .. }));
            let status = if objects_done(report) {
                "applied"
            } else if report.interrupted.is_some() {
                "interrupted"
            } else if tripped {
                "tripped"
            } else if report.any_written() {
                "partial"
            } else {
                "failed"
            };
            let (revision, message) = match recorded {
                Recorded::Revision { revision, .. } => (Some(*revision), None),
                Recorded::Warning(w) => (None, Some(w.clone())),
                Recorded::Nothing => (None, None),
            };
            OutcomeDoc {
                status,
                message,
                objects: object_outcomes(report),
                revision,
                rollout: rollout_doc(rollout),
            }
        }
    }
}

/// The fleet document: the combined plan and, when the run got that far, each cluster's
/// outcome (`end`; `None`: planned only). As JSON or YAML, with the plan document's escapes.
pub fn write_document(
    out: &mut impl std::io::Write,
    fleet: &FleetPlan,
    canaries: &[String],
    end: Option<&FleetEnd>,
    yaml: bool,
) -> std::io::Result<()> {
    let sections = fleet.section_of();
    let t = fleet.total();
    let contexts: Vec<String> = match end {
        Some(e) => e.clusters.iter().map(|c| c.context.clone()).collect(),
        None => fleet
            .members
            .iter()
            .map(|m| m.context().to_owned())
            .collect(),
    };
    let doc = FleetDocument {
        schema: SCHEMA_VERSION,
        app: fleet.app.to_owned(),
        has_changes: fleet.has_changes(),
        summary: SummaryDoc {
            create: t.create,
            update: t.update,
            delete: t.delete,
            unchanged: t.unchanged,
        },
        clusters: contexts
            .into_iter()
            .map(|context| {
                let cluster_end =
                    end.and_then(|e| e.clusters.iter().find(|c| c.context == context));
                let plan = fleet.plans().find(|p| p.context == context);
                ClusterDoc {
                    namespace: plan
                        .map(|p| p.namespace.clone())
                        .or_else(|| cluster_end.and_then(|c| c.namespace.clone())),
                    section: sections
                        .iter()
                        .find(|(c, _)| *c == context)
                        .map(|(_, s)| *s),
                    canary: cluster_end.is_some_and(|c| c.canary) || canaries.contains(&context),
                    plan: plan.map(output::document),
                    outcome: outcome_doc(cluster_end, plan.is_some()),
                    context,
                }
            })
            .collect(),
    };
    if yaml {
        output::write_yaml_of(out, &doc)
    } else {
        output::write_json_of(out, &doc)
    }
}
