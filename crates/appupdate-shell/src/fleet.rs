//! How a run over several clusters (a fleet) ended, as data: each cluster's end, the lines
//! of the report, and the `-o json|yaml` document (`kubectl-appupdate.fleet/v2`: each
//! cluster's plan, wave and outcome, and each wave's outcome). The order of the writes — a
//! canary, or waves with a failure budget — is [`FleetOrder`]; whether the next wave starts is
//! the budget's rule ([`FailureBudget`]). Pure: the run ([`crate::run`]) fills a [`FleetEnd`];
//! [`crate::streams`] writes its lines, [`crate::exit`] turns it into the exit code.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use console::Style;
use serde::Serialize;

use crate::error::AppError;
use crate::history_store::Recorded;
use crate::wait::{WaitError, Waited};
use appupdate_model::output::{self, PlanDocument, SummaryDoc};
use appupdate_model::plan::Action;
use appupdate_model::report::{self, Fate, Interruption, Line, Outcome, Report};
use appupdate_model::text::Untrusted;
use appupdate_plan::fleet_plan::{FailureBudget, FleetPlan, NAMED, some_names};

/// The schema of the fleet document.
pub const SCHEMA_VERSION: &str = "kubectl-appupdate.fleet/v2";

/// The order of a fleet's writes: the canaries first (`--canary`), or the clusters in waves
/// (`--wave`), each starting once the one before ended within `max_failed` failed clusters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FleetOrder {
    pub canary: Vec<String>,
    /// The contexts of each wave, in order; empty without waves.
    pub waves: Vec<Vec<String>>,
    pub max_failed: usize,
    /// `--stop-after-wave`: the waves after this many are not started.
    pub stop_after: Option<usize>,
}

impl FleetOrder {
    /// The wave of `context`, 1-based.
    pub fn wave_of(&self, context: &str) -> Option<usize> {
        self.waves
            .iter()
            .position(|w| w.iter().any(|c| c == context))
            .map(|i| i + 1)
    }

    /// The failure budget between waves (`--max-failed`); none without waves.
    pub fn budget(&self) -> FailureBudget {
        if self.waves.is_empty() {
            FailureBudget::NONE
        } else {
            FailureBudget::new(self.max_failed)
        }
    }
}

/// What regressed in a cluster during a bake, read from its Deployment as it is at the end of
/// it (`None`: it was deleted): `image` (container, image) when the run set one, no longer
/// there; replicas unavailable (the rollout ended with none); the `Available` condition false.
/// `None` when nothing regressed.
pub fn bake_regression(
    deployment: Option<&serde_json::Value>,
    image: Option<(&str, &str)>,
) -> Option<String> {
    let Some(d) = deployment else {
        return Some("the Deployment was deleted".into());
    };
    if let Some((container, image)) = image {
        let now = d["spec"]["template"]["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["name"] == container)
            .and_then(|c| c["image"].as_str());
        if now != Some(image) {
            return Some(format!(
                "container {} runs {} instead of {}",
                Untrusted(container),
                Untrusted(now.unwrap_or("nothing")),
                Untrusted(image)
            ));
        }
    }
    let unavailable = d["status"]["unavailableReplicas"].as_i64().unwrap_or(0);
    if unavailable > 0 {
        return Some(format!(
            "{unavailable} replica{} unavailable",
            if unavailable == 1 { " is" } else { "s are" }
        ));
    }
    let available = d["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Available");
    if let Some(c) = available
        && c["status"] == "False"
    {
        return Some(format!(
            "it is not available ({})",
            Untrusted(c["reason"].as_str().unwrap_or("no reason given"))
        ));
    }
    None
}

/// Runs `waves` waves in order: `run(w)` runs wave `w` to its end and gives how each of its
/// clusters ended. A wave starts only once the one before it ended within `budget` (clusters
/// not `as_planned`), and while `go_on()` (no signal); the waves that did not start are `None`.
pub async fn in_waves<T, Fut>(
    waves: usize,
    budget: FailureBudget,
    mut run: impl FnMut(usize) -> Fut,
    as_planned: impl Fn(&T) -> bool,
    go_on: impl Fn() -> bool,
) -> Vec<Option<Vec<T>>>
where
    Fut: std::future::Future<Output = Vec<T>>,
{
    let mut out: Vec<Option<Vec<T>>> = Vec::with_capacity(waves);
    let mut next = true;
    for w in 0..waves {
        if !next {
            out.push(None);
            continue;
        }
        let ends = run(w).await;
        next = budget.holds(&ends, |e| as_planned(*e)) && go_on();
        out.push(Some(ends));
    }
    out
}

/// Why a cluster was not started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotStarted {
    /// Another cluster's dry run refused: nothing is written anywhere.
    RefusedElsewhere,
    /// Another cluster's saved plan no longer holds (its re-check, before the plan is shown):
    /// nothing is written anywhere.
    PlanRefusedElsewhere,
    /// Under `--yes` without `--force-conflicts`, another cluster's change is to fields another
    /// tool owns: nothing is written anywhere.
    OwnedElsewhere,
    /// Another cluster failed, and `--stop-on-failure` is on.
    AfterFailure,
    /// A canary did not apply or did not roll out.
    Canary,
    /// An earlier wave had more failed clusters than `--max-failed` allows.
    EarlierWave,
    /// Its wave comes after `--stop-after-wave`: applying the same file again carries on.
    StoppedAfterWave,
    /// A fleet undo: the fleet run being undone never applied here.
    NeverApplied,
    /// A signal asked to start nothing new.
    Interrupted,
}

impl NotStarted {
    fn why(self) -> &'static str {
        match self {
            NotStarted::RefusedElsewhere => {
                "its dry run passed, but another cluster refused the change, so nothing was written anywhere"
            }
            NotStarted::PlanRefusedElsewhere => {
                "the saved plan no longer holds in another cluster, so nothing was written anywhere"
            }
            NotStarted::OwnedElsewhere => {
                "another cluster's change is to fields another tool owns (--yes without --force-conflicts), so nothing was written anywhere"
            }
            NotStarted::AfterFailure => "another cluster failed (--stop-on-failure)",
            NotStarted::Canary => "the canary did not apply and roll out",
            NotStarted::EarlierWave => {
                "an earlier wave had more failed clusters than --max-failed allows"
            }
            NotStarted::StoppedAfterWave => {
                "its wave comes after --stop-after-wave; apply the same file again to carry on"
            }
            NotStarted::NeverApplied => "left alone: the fleet run being undone never applied here",
            NotStarted::Interrupted => "interrupted before it started",
        }
    }

    fn code(self) -> &'static str {
        match self {
            NotStarted::RefusedElsewhere
            | NotStarted::PlanRefusedElsewhere
            | NotStarted::OwnedElsewhere => "refused-elsewhere",
            NotStarted::AfterFailure => "after-failure",
            NotStarted::Canary => "canary",
            NotStarted::EarlierWave => "earlier-wave",
            NotStarted::StoppedAfterWave => "stopped-after-wave",
            NotStarted::NeverApplied => "never-applied",
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
        rollout: Option<Result<Waited, WaitError>>,
    },
    /// Written, or writing stopped: the report says what happened to each object; `rollout`
    /// when it was followed.
    Applied {
        report: Report,
        recorded: Recorded,
        rollout: Option<Result<Waited, WaitError>>,
        /// `--undo-on-failure`: what putting this cluster back left as it is (`None`: not
        /// put back).
        put_back: Option<PutBackEnd>,
    },
    NotStarted(NotStarted),
    /// A saved plan this cluster's objects show was applied already (`revision`: the history's
    /// record of it, when there is one): resuming a run that stopped after a wave, nothing is
    /// written here again.
    AlreadyApplied {
        revision: Option<u64>,
    },
}

/// How a cluster where the saved plan was applied already is told: `already applied by this
/// plan`, with the history's revision of it when one names it.
pub fn already_applied(revision: Option<u64>) -> String {
    match revision {
        Some(revision) => format!("already applied by this plan (revision {revision})"),
        None => "already applied by this plan".to_owned(),
    }
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
        let rollout_failed = |r: &Option<Result<Waited, WaitError>>| matches!(r, Some(Err(_)));
        match self {
            ClusterState::Failed(_) => "failed",
            ClusterState::Skipped(_) => "skipped",
            ClusterState::Planned => "planned only",
            ClusterState::Refused(_) => "refused",
            ClusterState::NotStarted(_) => "not started",
            ClusterState::AlreadyApplied { .. } => "already applied",
            ClusterState::Unchanged { rollout } if rollout_failed(rollout) => {
                "already as planned whose rollout did not complete"
            }
            ClusterState::Unchanged { .. } => "already as planned",
            ClusterState::Applied {
                put_back: Some(back),
                ..
            } if back.left.is_empty() => "put back as it was",
            ClusterState::Applied {
                put_back: Some(_), ..
            } => "NOT put back completely",
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
        let rolled_out = |r: &Option<Result<Waited, WaitError>>| !matches!(r, Some(Err(_)));
        match self {
            ClusterState::Applied {
                report, rollout, ..
            } => objects_done(report) && rolled_out(rollout),
            ClusterState::Unchanged { rollout } => rolled_out(rollout),
            // Nothing of the run was there to change.
            ClusterState::AlreadyApplied { .. }
            | ClusterState::NotStarted(NotStarted::NeverApplied) => true,
            _ => false,
        }
    }
}

/// What putting a cluster back did (`--undo-on-failure`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutBackEnd {
    /// What is not as it was before the run, one line each (escaped); empty: all put back.
    pub left: Vec<String>,
    /// The put-back's own history record.
    pub revision: Option<u64>,
}

impl PutBackEnd {
    /// `; put back: as it was before the run` or `; NOT put back completely: …`.
    fn said(&self) -> String {
        if self.left.is_empty() {
            "; put back: as it was before the run".into()
        } else {
            format!("; NOT put back completely: {}", self.left.join("; "))
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
        let mut line = self.how();
        line.text = format!("{at}: {}", line.text);
        line
    }

    /// How the cluster ended, as its heading says it after where it is.
    fn how(&self) -> Line {
        let not_done = |style: Style, text: String| Line::new(Fate::NotDone, style, text);
        match &self.state {
            ClusterState::Failed(err) => not_done(
                Style::new().red(),
                format!("NOT updated: {}", Untrusted(err.to_string())),
            ),
            ClusterState::Skipped(err) => not_done(
                Style::new().yellow(),
                format!(
                    "skipped (--skip-unreachable): {}",
                    Untrusted(err.to_string())
                ),
            ),
            ClusterState::Planned => not_done(
                Style::new().yellow(),
                "planned, NOT updated: another cluster could not be planned".to_owned(),
            ),
            ClusterState::Refused(_) => not_done(
                Style::new().red(),
                "NOT updated: refused before any write".to_owned(),
            ),
            ClusterState::Unchanged { .. } => Line::new(
                Fate::Done,
                Style::new(),
                "already as planned, nothing to change".to_owned(),
            ),
            ClusterState::AlreadyApplied { revision } => Line::new(
                Fate::Done,
                Style::new(),
                format!("{}, not written again", already_applied(*revision)),
            ),
            ClusterState::NotStarted(why) => {
                not_done(Style::new().yellow(), format!("NOT started: {}", why.why()))
            }
            ClusterState::Applied {
                report,
                put_back: Some(back),
                ..
            } if objects_done(report) => not_done(
                if back.left.is_empty() {
                    Style::new().yellow().bold()
                } else {
                    Style::new().red().bold()
                },
                format!("updated{}", back.said()),
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
                        "updated".to_owned(),
                    )
                } else if report.interrupted.is_some() {
                    not_done(
                        Style::new().red().bold(),
                        format!(
                            "interrupted while writing{}",
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
                            "stopped by the approved-diff guard{}",
                            if report.any_written() {
                                ", partly updated"
                            } else {
                                ""
                            }
                        ),
                    )
                } else if report.any_written() {
                    not_done(Style::new().red().bold(), "partly updated".to_owned())
                } else {
                    not_done(
                        Style::new().red(),
                        "NOT updated: nothing was changed".to_owned(),
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

    /// How the rollout of `app`'s Deployment and its routes ended, when they were followed:
    /// a line per object, or the failure.
    pub fn rollout(&self, app: &str) -> Vec<Line> {
        let rollout = match &self.state {
            ClusterState::Applied { rollout, .. } | ClusterState::Unchanged { rollout } => {
                rollout.as_ref()
            }
            _ => None,
        };
        match rollout {
            None => Vec::new(),
            Some(Ok(waited)) => waited
                .lines(app)
                .into_iter()
                .map(|line| Line::new(Fate::Done, Style::new().green(), line))
                .collect(),
            // The reasons follow the message, a line each.
            Some(Err(e)) => e
                .to_string()
                .lines()
                .map(|line| {
                    Line::new(
                        Fate::NotDone,
                        Style::new().red(),
                        Untrusted(line).to_string(),
                    )
                })
                .collect(),
        }
    }
}

/// Clusters as the report tells them ([`FleetEnd::told`]).
pub enum Told<'a> {
    /// A cluster on its own.
    One(&'a ClusterEnd),
    /// More than [`NAMED`] clusters that ended the same way, told once.
    Many(Vec<&'a ClusterEnd>),
}

impl ClusterEnd {
    /// What its part of the report says, but where it is: equal for clusters that ended the
    /// same way; `None` for one told on its own whatever the others did (a canary, one whose
    /// guard tripped: its new diff is its own).
    fn ended_as(&self, app: &str, recorded: impl Fn(&Recorded) -> String) -> Option<String> {
        if self.canary {
            return None;
        }
        if let ClusterState::Applied { report, .. } | ClusterState::Refused(report) = &self.state
            && report
                .entries
                .iter()
                .any(|(_, o)| matches!(o, Outcome::Tripped { .. }))
        {
            return None;
        }
        let how = self.how();
        let mut said = format!("{:?} {}\n", how.fate, how.text);
        for line in self.objects().iter().chain(&self.rollout(app)) {
            said.push_str(&format!("{:?} {}\n", line.fate, line.text));
        }
        if let ClusterState::Applied { recorded: r, .. } = &self.state {
            said.push_str(&recorded(r));
        }
        Some(said)
    }
}

/// The heading of clusters told together: `2000 clusters (contexts c0000, …, c0005 and 1994
/// more; namespace shop): updated`.
pub fn group_heading(clusters: &[&ClusterEnd]) -> Line {
    let contexts: Vec<String> = clusters
        .iter()
        .map(|c| Untrusted(&c.context).to_string())
        .collect();
    let mut namespaces: Vec<String> = Vec::new();
    for ns in clusters.iter().filter_map(|c| c.namespace.as_deref()) {
        let ns = Untrusted(ns).to_string();
        if !namespaces.contains(&ns) {
            namespaces.push(ns);
        }
    }
    let namespaces = match namespaces.len() {
        0 => String::new(),
        1 => format!("; namespace {}", namespaces[0]),
        _ => format!("; namespaces {}", some_names(&namespaces)),
    };
    let mut line = clusters.first().map_or_else(
        || Line::new(Fate::Done, Style::new(), String::new()),
        |c| c.how(),
    );
    line.text = format!(
        "{} clusters (contexts {}{namespaces}): {}",
        clusters.len(),
        some_names(&contexts),
        line.text
    );
    line
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

    /// The clusters as the report tells them, in the order of the contexts: each on its own,
    /// except that more than [`NAMED`] clusters that ended the same way — the same words after
    /// where they are, the same lines under them (`recorded` says how a history record is
    /// told) — are told once, where the first of them is, with their count: a fleet of
    /// thousands that went as planned is a few lines, and the clusters that did not stand out.
    pub fn told(&self, recorded: impl Fn(&Recorded) -> String) -> Vec<Told<'_>> {
        let keys: Vec<Option<String>> = self
            .clusters
            .iter()
            .map(|c| c.ended_as(&self.app, &recorded))
            .collect();
        let mut count: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        for key in keys.iter().flatten() {
            *count.entry(key.as_str()).or_default() += 1;
        }
        let mut told = Vec::new();
        let mut grouped: std::collections::HashSet<&str> = std::collections::HashSet::new();
        for (c, key) in self.clusters.iter().zip(&keys) {
            match key.as_deref() {
                Some(key) if count.get(key).is_some_and(|&n| n > NAMED) => {
                    if grouped.insert(key) {
                        let same = self
                            .clusters
                            .iter()
                            .zip(&keys)
                            .filter(|(_, k)| k.as_deref() == Some(key))
                            .map(|(c, _)| c)
                            .collect();
                        told.push(Told::Many(same));
                    }
                }
                _ => told.push(Told::One(c)),
            }
        }
        told
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
            let all_back = self.clusters.iter().all(|c| match &c.state {
                ClusterState::Applied { put_back, .. } if c.written() => {
                    put_back.as_ref().is_some_and(|b| b.left.is_empty())
                }
                _ => true,
            });
            let how = if all_back {
                "The run failed and was put back (--undo-on-failure)"
            } else {
                "The fleet is partly updated"
            };
            format!(
                "{how}: {} (of {}, listed above).",
                ways.join(", "),
                clusters(n)
            )
        };
        Line::new(Fate::NotDone, Style::new().bold(), text)
    }
}

// ---- the `-o json|yaml` document ----

/// The `kubectl-appupdate.fleet/v2` document ([`document`]).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetDocument<'a> {
    schema: &'static str,
    app: String,
    has_changes: bool,
    summary: SummaryDoc,
    /// `--wave`: each wave's contexts and, once the run got that far, its outcome.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    waves: Vec<WaveDoc>,
    clusters: Vec<ClusterDoc<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WaveDoc {
    wave: usize,
    contexts: Vec<String>,
    /// `planned`; `applied` (every cluster as planned), `within-budget` (failed clusters, no
    /// more than `--max-failed`), `failed` (more: no later wave started), `not-started`.
    status: &'static str,
    failed: usize,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ClusterDoc<'a> {
    context: String,
    namespace: Option<String>,
    canary: bool,
    /// Its wave, 1-based (`--wave`).
    #[serde(skip_serializing_if = "Option::is_none")]
    wave: Option<usize>,
    /// Clusters with identical plans share a section.
    section: Option<usize>,
    plan: Option<PlanDocument<'a>>,
    outcome: OutcomeDoc,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OutcomeDoc {
    status: &'static str,
    /// Why a refused cluster was refused, as data (`AppError::refusal_reason`).
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    objects: Vec<ObjectOutcomeDoc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    revision: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rollout: Option<RolloutDoc>,
    /// `--undo-on-failure`: what putting this cluster back did.
    #[serde(skip_serializing_if = "Option::is_none")]
    put_back: Option<PutBackDoc>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PutBackDoc {
    /// Everything this run changed here is as it was before it.
    complete: bool,
    /// What is not, one line each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    left: Vec<String>,
    /// The put-back's own history record.
    #[serde(skip_serializing_if = "Option::is_none")]
    revision: Option<u64>,
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
    /// Why it did not complete, from its new pods and their events, as data.
    #[serde(skip_serializing_if = "Option::is_none")]
    reasons: Option<appupdate_model::rollout::Explanation>,
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

fn rollout_doc(rollout: &Option<Result<Waited, WaitError>>) -> Option<RolloutDoc> {
    rollout.as_ref().map(|r| match r {
        Ok(waited) => RolloutDoc {
            complete: true,
            message: waited.summary(),
            reasons: None,
        },
        Err(e) => RolloutDoc {
            complete: false,
            message: e.to_string(),
            reasons: e.explanation().cloned(),
        },
    })
}

fn outcome_doc(end: Option<&ClusterEnd>, planned: bool) -> OutcomeDoc {
    let empty = |status: &'static str, message: Option<String>| OutcomeDoc {
        status,
        reason: None,
        message,
        objects: Vec::new(),
        revision: None,
        rollout: None,
        put_back: None,
    };
    let Some(end) = end else {
        return empty(if planned { "planned" } else { "skipped" }, None);
    };
    match &end.state {
        ClusterState::Failed(e) => OutcomeDoc {
            reason: e.refusal_reason(),
            ..empty("failed", Some(e.to_string()))
        },
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
        ClusterState::AlreadyApplied { revision } => OutcomeDoc {
            revision: *revision,
            ..empty("already-applied", None)
        },
        ClusterState::Unchanged { rollout } => OutcomeDoc {
            rollout: rollout_doc(rollout),
            ..empty("unchanged", None)
        },
        ClusterState::Applied {
            report,
            recorded,
            rollout,
            put_back,
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
                reason: None,
                message,
                objects: object_outcomes(report),
                revision,
                rollout: rollout_doc(rollout),
                put_back: put_back.as_ref().map(|b| PutBackDoc {
                    complete: b.left.is_empty(),
                    left: b.left.clone(),
                    revision: b.revision,
                }),
            }
        }
    }
}

/// Each wave and how it ended.
fn wave_docs(order: &FleetOrder, end: Option<&FleetEnd>) -> Vec<WaveDoc> {
    order
        .waves
        .iter()
        .enumerate()
        .map(|(i, contexts)| {
            let states: Vec<&ClusterState> = end
                .into_iter()
                .flat_map(|e| e.clusters.iter())
                .filter(|c| contexts.contains(&c.context))
                .map(|c| &c.state)
                .collect();
            let failed = FailureBudget::failed(&states, |s| s.as_planned());
            let status = if end.is_none() || states.is_empty() {
                "planned"
            } else if states
                .iter()
                .all(|s| matches!(s, ClusterState::NotStarted(_) | ClusterState::Planned))
            {
                "not-started"
            } else if failed == 0 {
                "applied"
            } else if order.budget().holds(&states, |s| s.as_planned()) {
                "within-budget"
            } else {
                "failed"
            };
            WaveDoc {
                wave: i + 1,
                contexts: contexts.clone(),
                status,
                failed,
            }
        })
        .collect()
}

/// The fleet document: the combined plan and, when the run got that far, each cluster's
/// outcome (`end`; `None`: planned only); written by the documents' one writer
/// ([`output::write_document`]).
pub fn document<'a>(
    fleet: &FleetPlan<'a>,
    order: &FleetOrder,
    end: Option<&FleetEnd>,
) -> FleetDocument<'a> {
    let canaries = &order.canary;
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
    FleetDocument {
        schema: SCHEMA_VERSION,
        app: fleet.app.to_owned(),
        has_changes: fleet.has_changes(),
        summary: SummaryDoc {
            create: t.create,
            update: t.update,
            delete: t.delete,
            unchanged: t.unchanged,
        },
        waves: wave_docs(order, end),
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
                    wave: order.wave_of(&context),
                    plan: plan.map(|p| output::document(p).with_owners(fleet.owners_of(&context))),
                    outcome: outcome_doc(cluster_end, plan.is_some()),
                    context,
                }
            })
            .collect(),
    }
}

#[cfg(test)]
mod bake_tests {
    use super::bake_regression;
    use serde_json::json;

    fn deployment(image: &str, unavailable: i64) -> serde_json::Value {
        json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": image}]}}},
               "status": {"unavailableReplicas": unavailable,
                          "conditions": [{"type": "Available", "status": "True"}]}})
    }

    #[test]
    fn a_bake_sees_a_changed_image_unavailable_replicas_or_a_deleted_deployment() {
        let new = Some(("web", "r/web:2"));
        assert_eq!(bake_regression(Some(&deployment("r/web:2", 0)), new), None);
        assert_eq!(
            bake_regression(Some(&deployment("r/web:1", 0)), new).unwrap(),
            "container web runs r/web:1 instead of r/web:2"
        );
        assert_eq!(
            bake_regression(Some(&deployment("r/web:2", 2)), new).unwrap(),
            "2 replicas are unavailable"
        );
        assert_eq!(bake_regression(Some(&deployment("r/web:1", 0)), None), None);
        assert_eq!(
            bake_regression(None, new).unwrap(),
            "the Deployment was deleted"
        );
        let mut d = deployment("r/web:2", 0);
        d["status"]["conditions"][0] =
            json!({"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"});
        assert_eq!(
            bake_regression(Some(&d), new).unwrap(),
            "it is not available (MinimumReplicasUnavailable)"
        );
    }
}

#[cfg(test)]
mod told_tests {
    use super::*;

    fn end(states: Vec<(&str, bool, ClusterState)>) -> FleetEnd {
        FleetEnd {
            app: "web".into(),
            clusters: states
                .into_iter()
                .map(|(context, canary, state)| ClusterEnd {
                    context: context.into(),
                    canary,
                    namespace: Some("shop".into()),
                    state,
                })
                .collect(),
            interrupted: None,
            changes_pending: false,
        }
    }

    fn unchanged() -> ClusterState {
        ClusterState::Unchanged { rollout: None }
    }

    fn told(end: &FleetEnd) -> Vec<String> {
        end.told(|_| String::new())
            .iter()
            .map(|t| match t {
                Told::One(c) => c.heading().text,
                Told::Many(cs) => group_heading(cs).text,
            })
            .collect()
    }

    #[test]
    fn more_than_eight_clusters_that_ended_the_same_way_are_told_once_where_the_first_is() {
        let mut states: Vec<(String, bool, ClusterState)> = (0..12)
            .map(|i| (format!("c{i:02}"), false, unchanged()))
            .collect();
        states[3].2 = ClusterState::NotStarted(NotStarted::Interrupted);
        states[5].1 = true; // the canary is told on its own
        let mut fleet = end(states
            .iter()
            .map(|(c, k, _)| (c.as_str(), *k, unchanged()))
            .collect());
        for (c, (_, _, s)) in fleet.clusters.iter_mut().zip(states) {
            c.state = s;
        }
        assert_eq!(
            told(&fleet),
            [
                "10 clusters (contexts c00, c01, c02, c04, c06, c07 and 4 more; namespace shop): already as planned, nothing to change",
                "context c03 (namespace shop): NOT started: interrupted before it started",
                "context c05 (namespace shop, the canary): already as planned, nothing to change",
            ]
        );
        // Eight that ended the same way are each told, as any small fleet is.
        let eight = end((0..8).map(|_| ("a", false, unchanged())).collect());
        assert_eq!(told(&eight).len(), 8);
    }
}

#[cfg(test)]
mod wave_props {
    use super::in_waves;
    use proptest::prelude::*;
    use std::cell::RefCell;

    proptest! {
        /// For any outcomes, no cluster of wave N+1 starts before wave N ended within its
        /// budget: every wave that starts follows waves that all ran to their end, the last
        /// of them with at most `max_failed` failures; once a wave is over budget no later one
        /// starts.
        #[test]
        fn a_wave_starts_only_after_the_one_before_ended_within_its_budget(
            outcomes in prop::collection::vec(prop::collection::vec(any::<bool>(), 1..5), 1..6),
            max_failed in 0usize..3,
        ) {
            let log: RefCell<Vec<(char, usize)>> = RefCell::new(Vec::new());
            let ran = futures::executor::block_on(in_waves(
                outcomes.len(),
                appupdate_plan::fleet_plan::FailureBudget::new(max_failed),
                |w| {
                    log.borrow_mut().push(('s', w));
                    let ends = outcomes[w].clone();
                    let log = &log;
                    async move {
                        log.borrow_mut().push(('e', w));
                        ends
                    }
                },
                |ok: &bool| *ok,
                || true,
            ));
            let log = log.into_inner();
            let mut allowed = true;
            for (w, r) in ran.iter().enumerate() {
                prop_assert_eq!(r.is_some(), allowed, "wave {}", w);
                match r {
                    Some(ends) => {
                        let start = log.iter().position(|e| *e == ('s', w)).unwrap_or(usize::MAX);
                        for earlier in 0..w {
                            let end = log
                                .iter()
                                .position(|e| *e == ('e', earlier))
                                .unwrap_or(usize::MAX);
                            prop_assert!(end < start, "wave {} started before wave {} ended", w, earlier);
                        }
                        allowed = ends.iter().filter(|ok| !**ok).count() <= max_failed;
                    }
                    None => allowed = false,
                }
            }
        }
    }
}

/// Every document the plugin prints goes through one writer ([`output::write_document`]); for
/// any string in any of their string fields, both formats read back exactly and hold nothing a
/// terminal would obey or hide.
#[cfg(test)]
mod document_props {
    use std::sync::Arc;

    use proptest::prelude::*;
    use serde::Serialize;
    use serde_json::{Value, json};

    use super::*;
    use crate::history_store::Recorded;
    use crate::wait::{WaitError, Waited};
    use appupdate_model::intent::{AttachmentRecord, RoutesHeader};
    use appupdate_model::output::Format;
    use appupdate_model::plan::{FieldChange, ObjectChange, RouteInfo};
    use appupdate_model::plan::{RouteStyle, RoutesPlan};
    use appupdate_model::text;
    use appupdate_plan::fleet_plan::Member;
    use appupdate_plan::history::{self, History, ImageChange, Record, Source, Status};
    use appupdate_plan::updaters::{AutoscalerUpdate, AutoscalerUpdater, Plan, Planned, Updater};

    /// Any character, often one a terminal obeys or hides, or one YAML or JSON treats specially.
    fn a_char() -> impl Strategy<Value = char> {
        prop_oneof![
            3 => any::<char>(),
            2 => prop::sample::select(vec![
                '\u{202e}', '\u{202d}', '\u{2066}', '\u{2067}', '\u{2069}', '\u{200b}', '\u{200d}',
                '\u{200e}', '\u{feff}', '\u{1b}', '\u{7}', '\u{0}', '\u{7f}', '\u{9b}', '\u{85}',
                '\u{a0}', '\u{2028}', '\u{2029}', '\n', '\r', '\t', '"', '\'', '\\', ':', '#',
                '-', ' ', '{', '[', '&', '*', '!', '|', '>', '%', '@', '`', '\u{e0041}',
                '\u{10ffff}', '\u{fffd}', '\u{f0000}', '\u{d7ff}', '\u{e000}',
            ]),
        ]
    }

    /// Any string: of those characters, or one a YAML reader would take for something else.
    fn a_string() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => prop::collection::vec(a_char(), 0..12).prop_map(|cs| cs.into_iter().collect()),
            1 => prop::sample::select(vec![
                "", "null", "Null", "~", "true", "no", "yes", "off", "0", "-1", "1.5", "0x1F",
                "1e3", ".inf", ".nan", "- a", "a: b", "#c", " lead", "trail ", "---", "...",
                "&a", "*a", "!t", "|", ">", "@", "%YAML", "{a}", "[a]", "\"q\"", "'q'", "\n",
                "a\n", "\na", "a\n\n", " \n", "\u{202e}\n", "2026-01-01",
            ])
            .prop_map(str::to_owned),
        ]
    }

    /// Writes `doc` in both formats and checks each against the document's own value.
    fn round_trips(doc: &impl Serialize) -> Result<[Value; 2], TestCaseError> {
        let expected = serde_json::to_value(doc).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut read = [Value::Null, Value::Null];
        for (slot, format) in read.iter_mut().zip([Format::Json, Format::Yaml]) {
            let mut out = Vec::new();
            output::write_document(&mut out, format, doc)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            let written = String::from_utf8(out).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert!(
                !written.chars().any(|c| c != '\n' && text::is_escaped(c)),
                "{:?} holds a raw character: {}",
                format,
                written
            );
            let back: Value = match format {
                Format::Json => serde_json::from_str(&written).map_err(|e| e.to_string()),
                Format::Yaml => serde_saphyr::from_str(&written).map_err(|e| e.to_string()),
            }
            .map_err(|e| {
                TestCaseError::fail(format!("{format:?} does not parse: {e}\n{written}"))
            })?;
            prop_assert_eq!(&back, &expected, "{:?}:\n{}", format, written);
            *slot = back;
        }
        Ok(read)
    }

    /// A plan of one route object whose every string is one of `s`.
    fn plan_of(s: &[String]) -> Plan {
        let mut change = ObjectChange::sample(&s[3], Action::Update);
        change.namespace = s[1].clone();
        change.fields = vec![FieldChange::new(
            s[4].clone(),
            Some(json!(s[5])),
            Some(json!({ s[6].clone(): [s[7]] })),
        )];
        change.before =
            Some(json!({ "metadata": { "annotations": { s[8].clone(): s[9] } } }).into());
        change.after = Some(json!({ "metadata": { "name": s[3] } }).into());
        change.route = Some(RouteInfo {
            style: RouteStyle::Gateway,
            identifier: s[10].clone(),
            scopes: vec![s[11].clone()],
            paths: vec![s[4].clone()],
            paths_before: vec![s[5].clone()],
            foreign: vec![s[6].clone()],
        });
        // The updater is not looked at: any will do.
        let updater = AutoscalerUpdater {
            name: s[3].clone(),
            update: AutoscalerUpdate::default(),
        };
        let planned = Planned::new(Updater::Autoscaler(updater), Arc::new(change));
        let mut plan = Plan::new(s[0].clone(), s[1].clone(), s[2].clone(), vec![planned]);
        plan.routes = Some(RoutesPlan {
            style: RouteStyle::Gateway,
            live_styles: vec![],
            notes: vec![s[7].clone()],
            header: RoutesHeader {
                attachment: AttachmentRecord {
                    hosts: vec![s[8].clone()],
                    ..AttachmentRecord::default()
                },
                ..RoutesHeader::default()
            },
        });
        plan
    }

    /// A history ConfigMap with one record whose strings are `s` and one stray key.
    fn history_of(s: &[String]) -> History {
        let record = Record {
            revision: 1,
            time: "2026-01-01T00:00:00Z".into(),
            user: s[0].clone(),
            tool: s[1].clone(),
            status: Status::Applied,
            source: Source::Update,
            saved_plan: false,
            image: Some(ImageChange {
                container: "app".into(),
                before: None,
                after: None,
            }),
            bounds: None,
            routes: Vec::new(),
            endpoints: None,
            routes_truncated: false,
            plan_checksum: None,
            fleet_run: None,
            overridden: Vec::new(),
            signature: None,
        };
        let cm = json!({"binaryData": {
            "revision-1.json.gz": history::encode(&record),
            format!("revision-{}.json.gz", s[2]): "",
        }});
        History::from_config_map(Some(&cm), "web")
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn a_plan_document_reads_back_exactly(s in prop::collection::vec(a_string(), 12)) {
            let plan = plan_of(&s);
            let [json, yaml] = round_trips(&output::document(&plan))?;
            for back in [json, yaml] {
                prop_assert_eq!(&back["app"], &json!(s[0]));
                prop_assert_eq!(&back["objects"][0]["name"], &json!(s[3]));
            }
        }

        #[test]
        fn a_history_document_reads_back_exactly(
            s in prop::collection::vec(a_string(), 3),
            app in a_string(),
        ) {
            let stored = history_of(&s);
            let [json, _] = round_trips(&history::document(&app, &s[1], &stored))?;
            prop_assert_eq!(&json["app"], &json!(app));
            // A record is kept when its user and tool have no control character.
            if !s[0].chars().chain(s[1].chars()).any(char::is_control) {
                prop_assert_eq!(&json["records"][0]["user"], &json!(s[0]));
            }
        }

        #[test]
        fn a_fleet_document_reads_back_exactly(s in prop::collection::vec(a_string(), 16)) {
            let plan = plan_of(&s);
            let change = Arc::clone(&plan.objects[0].change);
            let skipped = s[12].clone();
            let other = format!("{}-2", s[13]);
            let waves = vec![vec![plan.context.clone(), other.clone()], vec![skipped.clone()]];
            let fleet = FleetPlan {
                app: &plan.app,
                members: vec![
                    Member::Planned(&plan),
                    Member::Skipped { context: &skipped, reason: &s[14] },
                ],
                waves: &waves,
                owners: Vec::new(),
            };
            let order = FleetOrder {
                canary: vec![],
                waves: waves.clone(),
                max_failed: 1,
                stop_after: None,
            };
            let end = FleetEnd {
                app: plan.app.clone(),
                clusters: vec![
                    ClusterEnd {
                        context: plan.context.clone(),
                        canary: false,
                        namespace: Some(s[1].clone()),
                        state: ClusterState::Applied {
                            report: Report {
                                entries: vec![(change, Outcome::Failed { message: s[15].clone() })],
                                stopped_in_preflight: false,
                                interrupted: None,
                            },
                            recorded: Recorded::Warning(s[14].clone()),
                            rollout: Some(Err(WaitError::Watch {
                                target: s[13].clone(),
                                message: s[15].clone(),
                            })),
                            put_back: None,
                        },
                    },
                    ClusterEnd {
                        context: other,
                        canary: false,
                        namespace: Some(s[13].clone()),
                        state: ClusterState::Unchanged {
                            rollout: Some(Ok(Waited { rollout: None, routes: vec![] })),
                        },
                    },
                ],
                interrupted: None,
                changes_pending: false,
            };
            round_trips(&document(&fleet, &order, None))?;
            let [json, yaml] = round_trips(&document(&fleet, &order, Some(&end)))?;
            for back in [json, yaml] {
                prop_assert_eq!(&back["app"], &json!(s[0]));
                prop_assert_eq!(&back["clusters"][0]["outcome"]["message"], &json!(s[14]));
            }
        }
    }
}
