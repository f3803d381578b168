//! How a run is told: over one cluster ([`OneCluster`]) or over a fleet ([`Fleet`]). The run
//! (`run`) plans, shows, asks, writes and reports the same way for both, through one
//! interface ([`Telling`]); what differs lives here:
//!
//! - one cluster: its plan, its question, its report and exit code as the plugin has always
//!   told them; a saved plan that no longer holds is refused before it is shown; after the
//!   writes, its rollout (`--wait`) and its auth check (`--verify-url`);
//! - a fleet: sections with identical plans folded, one question for every cluster with its
//!   order, a progress line per cluster while writing (each cluster's rollout followed as it
//!   goes), and the fleet's report (with `-o json|yaml`, one document with each cluster's plan
//!   and outcome).

use std::sync::Arc;

use crate::error::{AppError, Stage};
use crate::exit::Ending;
use crate::fleet::{ClusterEnd, ClusterState, FleetEnd, NotStarted};
use crate::fleet_progress::FleetProgress;
use crate::history_store;
use crate::plan_sources::Standing;
use crate::planning::{Member, Planned, Planning};
use crate::put_back;
use crate::settings::Settings;
use crate::signals::Signals;
use crate::streams::{self, Streams};
use crate::wait::{self, Followed, WaitTarget};
use appupdate_kube::cluster::Cluster;
use appupdate_kube::probe;
use appupdate_model::report::Interruption;
use appupdate_model::text::Untrusted;
use appupdate_model::verify::{self, Probe};
use appupdate_plan::fleet_plan;
use appupdate_plan::history;

/// What a run over one cluster and a run over a fleet tell differently. The run calls these
/// at the same points whatever it covers; it never asks which it is.
pub(crate) trait Telling: Sync {
    /// Before the plan is shown: what ends the run without it (one cluster: its planning
    /// failure, or the report of a saved plan that no longer holds).
    fn before_showing(&self, streams: &Streams, planned: &mut Planned) -> Option<Ending>;

    /// The plan, as a diff on stdout (`-o json|yaml`: a document; a fleet's comes at the end),
    /// and what it says before the question (a history that cannot take the record).
    fn show(
        &self,
        settings: &Settings,
        streams: &Streams,
        planned: &Planned,
    ) -> Result<(), AppError>;

    /// Once the plans were shown, something refused (`drifted`: a saved plan that no longer
    /// holds somewhere), or in a fleet a cluster could not be planned: how the run ends, with
    /// nothing written anywhere; `None` when nothing refused after all.
    fn refused(&self, streams: &Streams, planned: &mut Planned, drifted: bool) -> Option<Ending>;

    /// The end of a run that writes nothing (a dry run, `--plan-out`, nothing to change).
    fn stop(&self, streams: &Streams, planned: &mut Planned, changes_pending: bool) -> Ending;

    /// What the one question says is applied where (escaped); a fleet's plan is shown with it
    /// on stderr when stdout holds a document.
    fn question(&self, streams: &Streams, planned: &Planned) -> Result<String, AppError>;

    /// The question was not answered yes: what is said besides the reason.
    fn not_confirmed(&self, streams: &Streams, planned: &Planned);

    /// The progress while writing (one cluster's writes are told by its report, afterwards),
    /// and whether it ticks on its own.
    fn progress(
        &self,
        settings: &Settings,
        streams: &Streams,
        planned: &Planned,
    ) -> (Arc<FleetProgress>, bool);

    /// Whether each cluster's rollout is followed as the writes go (a fleet: the next wave
    /// waits on it), rather than once they are done.
    fn follows_while_writing(&self, settings: &Settings) -> bool;

    /// What the first signal while writing is answered with.
    fn interrupt_notice(&self) -> &'static str;

    /// After the writes: each cluster's state by index (`None`: not started); the report,
    /// and for one cluster its rollout and auth check.
    fn written(
        &self,
        settings: &Settings,
        streams: &Streams,
        signals: &mut Signals,
        planned: &mut Planned,
        states: Vec<Option<ClusterState>>,
        interrupted: Option<Interruption>,
    ) -> impl std::future::Future<Output = Ending>;

    /// What the notice of a saved plan says of how many clusters it holds.
    fn saved_what(&self, clusters: usize) -> String;

    /// Where a route of `context` is, in a message naming routes of every cluster.
    fn located(&self, context: &str) -> String;
}

/// A run over one cluster.
pub(crate) struct OneCluster;

/// A run over several clusters (or a saved plan of several).
pub(crate) struct Fleet;

impl Telling for OneCluster {
    fn before_showing(&self, streams: &Streams, planned: &mut Planned) -> Option<Ending> {
        if let Some(e) = planned.take_failure() {
            return Some(Ending::Failed(e));
        }
        // A saved plan that no longer holds is refused before it is shown.
        let refused = planned
            .members_mut()
            .find_map(|m| m.sourced.standing.take_drifted())?;
        let _ = streams.report(&refused);
        Some(Ending::Applied(refused))
    }

    fn show(
        &self,
        settings: &Settings,
        streams: &Streams,
        planned: &Planned,
    ) -> Result<(), AppError> {
        if let Some(m) = planned.members().next() {
            streams.plan(&m.sourced.plan, &m.sourced.owners)?;
            if let Some(w) = frozen_history(settings, m) {
                streams::notice(&w);
            }
        }
        Ok(())
    }

    fn refused(&self, _: &Streams, planned: &mut Planned, _: bool) -> Option<Ending> {
        let refusal = planned
            .members_mut()
            .find_map(|m| m.sourced.standing.take_refusal())?;
        Some(Ending::Failed(refusal))
    }

    fn stop(&self, _: &Streams, _: &mut Planned, changes_pending: bool) -> Ending {
        if changes_pending {
            Ending::ChangesPending
        } else {
            Ending::Done
        }
    }

    fn question(&self, _: &Streams, planned: &Planned) -> Result<String, AppError> {
        let Some(m) = planned.members().next() else {
            return Ok(String::new());
        };
        let plan = &m.sourced.plan;
        let summary = plan.summary();
        let owners = owner_names(m, "");
        let owned = if owners.is_empty() {
            String::new()
        } else {
            format!(
                " This overrides what {} own(s) (see the owner lines above).",
                owners.join(", ")
            )
        };
        Ok(format!(
            "Apply these changes to {} in namespace {} (context {}): {} to create, {} to update, {} to delete.{owned}",
            Untrusted(&plan.app),
            Untrusted(&plan.namespace),
            Untrusted(&plan.context),
            summary.create,
            summary.update,
            summary.delete
        ))
    }

    fn not_confirmed(&self, _: &Streams, _: &Planned) {}

    fn progress(&self, _: &Settings, _: &Streams, _: &Planned) -> (Arc<FleetProgress>, bool) {
        // One cluster's writes are told by its report, once they are done.
        (FleetProgress::hidden(), false)
    }

    fn follows_while_writing(&self, _: &Settings) -> bool {
        false
    }

    fn interrupt_notice(&self) -> &'static str {
        "\ninterrupt received: finishing the requests in flight, starting no new ones (interrupt again to exit at once)"
    }

    async fn written(
        &self,
        settings: &Settings,
        streams: &Streams,
        signals: &mut Signals,
        planned: &mut Planned,
        mut states: Vec<Option<ClusterState>>,
        interrupted: Option<Interruption>,
    ) -> Ending {
        match (planned.members().next(), states.pop()) {
            (Some(member), Some(Some(state))) => {
                OneCluster::afterwards(settings, streams, signals, member, state, interrupted).await
            }
            _ => Ending::Done,
        }
    }

    fn saved_what(&self, _: usize) -> String {
        String::new()
    }

    fn located(&self, _: &str) -> String {
        String::new()
    }
}

impl OneCluster {
    /// One cluster after its writes: the report, then its rollout and routes (`--wait`) and the
    /// requests of `--verify-url`.
    async fn afterwards(
        settings: &Settings,
        streams: &Streams,
        signals: &mut Signals,
        member: &Member,
        state: ClusterState,
        interrupted: Option<Interruption>,
    ) -> Ending {
        let cluster = &member.cluster;
        let image = settings.changes_image();
        let (followed, afterwards, report, recorded) = match state {
            ClusterState::Applied {
                report, recorded, ..
            } => {
                // The writes are done: a report that cannot be shown (say, stdout closed) does not
                // change what the exit code must say about them.
                let _ = streams.report(&report);
                let _ = streams.recorded(&recorded);
                if !report.went_as_planned() {
                    return Ending::Applied(report);
                }
                let afterwards = match &recorded {
                    history_store::Recorded::Revision { .. } => {
                        verify::Afterwards::Undo(verify::undo_command(
                            &settings.app,
                            cluster.namespace(),
                            &cluster.conn.context,
                        ))
                    }
                    _ => verify::Afterwards::NotRecorded,
                };
                (
                    Followed::after_writes(&report, image),
                    afterwards,
                    Some(report),
                    recorded,
                )
            }
            // Nothing to write: `--wait` follows the rollout and the routes (a re-run after a
            // timeout), `--verify-url` checks the routes.
            ClusterState::Unchanged { .. } => (
                Followed::without_writes(&member.sourced.plan, image),
                verify::Afterwards::NothingChanged,
                None,
                history_store::Recorded::Nothing,
            ),
            ClusterState::Refused(report) => {
                let _ = streams.report(&report);
                return Ending::Applied(report);
            }
            ClusterState::Failed(e) => return Ending::Failed(e),
            // A signal during the dry run: nothing was written.
            ClusterState::NotStarted(_) => {
                return match interrupted {
                    Some(signal) => Ending::Failed(AppError::Interrupted {
                        signal,
                        stage: Stage::Planning,
                    }),
                    None => Ending::Done,
                };
            }
            _ => return Ending::Done,
        };
        let probes = settings
            .verify()
            .map(|_| verify::probes(&member.sourced.plan));
        let rollout = if settings.wait() {
            follow_written(cluster, &followed, settings, signals, streams).await
        } else {
            Ok(())
        };
        if settings.wait() && report.as_ref().is_some_and(changed_autoscaler) {
            autoscaler_warnings(cluster, &settings.app).await;
        }
        let failure = match verified(rollout, probes, afterwards, settings, signals, streams).await
        {
            Ok(()) => return report.map_or(Ending::Done, Ending::Applied),
            Err(e @ AppError::Interrupted { .. }) => return Ending::Failed(e),
            Err(e) => e,
        };
        let Some(report) = report.filter(|_| settings.follow.undo_on_failure) else {
            return Ending::Failed(failure);
        };
        // The failure first, then what putting back does.
        streams::notice(&format!(
            "error: {failure}\nputting back what this run changed (--undo-on-failure)"
        ));
        let target = WaitTarget::of(cluster, &settings.app);
        let mut progress = rollout_progress(settings, streams, &target, &Followed::default());
        let putting_back =
            put_back::put_back(settings, member, &report, &recorded, progress.as_mut());
        let back = tokio::select! {
            back = putting_back => back,
            signal = signals.recv() => {
                return Ending::Failed(AppError::Interrupted { signal, stage: Stage::Writing });
            }
        };
        if let Some(undone) = &back.report {
            let _ = streams.report(undone);
            let _ = streams.recorded(&back.recorded);
        }
        Ending::Failed(AppError::PutBack {
            failure: Box::new(failure),
            left: back.left,
            where_: format!(
                "{} in namespace {:?} (context {:?})",
                Untrusted(&settings.app),
                Untrusted(cluster.namespace()),
                Untrusted(&cluster.conn.context)
            ),
        })
    }
}

impl Telling for Fleet {
    fn before_showing(&self, _: &Streams, _: &mut Planned) -> Option<Ending> {
        None
    }

    fn show(
        &self,
        settings: &Settings,
        streams: &Streams,
        planned: &Planned,
    ) -> Result<(), AppError> {
        if planned
            .clusters
            .iter()
            .any(|c| !matches!(c, Planning::Failed(_)))
        {
            streams.fleet_plan(&planned.fleet_plan())?;
        }
        for m in planned.members() {
            if let Some(w) = frozen_history(settings, m) {
                streams::notice(&format!("[{}] {w}", Untrusted(&m.cluster.conn.context)));
            }
        }
        Ok(())
    }

    fn refused(&self, streams: &Streams, planned: &mut Planned, drifted: bool) -> Option<Ending> {
        let owned = planned.members().any(|m| {
            matches!(&m.sourced.standing, Standing::Refused(e) if matches!(**e, AppError::Owned { .. }))
        });
        let end = end_of(
            planned,
            |m| {
                if let Some(refusal) = m.sourced.standing.take_refusal() {
                    ClusterState::Failed(refusal)
                } else if let Some(report) = m.sourced.standing.take_drifted() {
                    ClusterState::Refused(report)
                } else if let Standing::AlreadyApplied { revision } = m.sourced.standing {
                    ClusterState::AlreadyApplied { revision }
                } else if drifted {
                    ClusterState::NotStarted(NotStarted::PlanRefusedElsewhere)
                } else if owned {
                    ClusterState::NotStarted(NotStarted::OwnedElsewhere)
                } else {
                    ClusterState::Planned
                }
            },
            false,
            None,
        );
        Some(finish(streams, planned, end, true))
    }

    fn stop(&self, streams: &Streams, planned: &mut Planned, changes_pending: bool) -> Ending {
        let end = end_of(
            planned,
            |m| {
                if let Standing::AlreadyApplied { revision } = m.sourced.standing {
                    ClusterState::AlreadyApplied { revision }
                } else if m.sourced.plan.has_changes() {
                    ClusterState::Planned
                } else {
                    ClusterState::Unchanged { rollout: None }
                }
            },
            changes_pending,
            None,
        );
        // A saved plan applied already in some cluster: say so of each, as a run that writes
        // elsewhere does.
        let applied = end
            .clusters
            .iter()
            .any(|c| matches!(c.state, ClusterState::AlreadyApplied { .. }));
        finish(streams, planned, end, applied)
    }

    fn question(&self, streams: &Streams, planned: &Planned) -> Result<String, AppError> {
        let fleet = planned.fleet_plan();
        streams.fleet_review(&fleet)?;
        let t = fleet.total();
        let n = fleet.plans().count();
        let canaries: Vec<String> = fleet
            .plans()
            .filter(|p| planned.order.canary.contains(&p.context))
            .map(|p| Untrusted(&p.context).to_string())
            .collect();
        let order = if planned.order.waves.is_empty() {
            canary_order(&canaries, n)
        } else {
            wave_order(&planned.order.waves)
        };
        let owners: Vec<String> = planned
            .members()
            .flat_map(|m| owner_names(m, &self.located(&m.cluster.conn.context)))
            .collect();
        let owned = if owners.is_empty() {
            String::new()
        } else {
            format!(
                " This overrides what {} own(s) (see the owner lines above).",
                owners.join(", ")
            )
        };
        Ok(format!(
            "Apply these changes to {} on {} cluster{} ({}{}): {} to create, {} to update, {} to delete in total.{owned}",
            Untrusted(fleet.app),
            n,
            if n == 1 { "" } else { "s" },
            fleet_plan::some_names(
                &fleet
                    .plans()
                    .map(|p| Untrusted(&p.context).to_string())
                    .collect::<Vec<_>>()
            ),
            order,
            t.create,
            t.update,
            t.delete
        ))
    }

    fn not_confirmed(&self, streams: &Streams, planned: &Planned) {
        let _ = streams.fleet_document(&planned.fleet_plan(), &planned.order, None);
    }

    fn progress(
        &self,
        settings: &Settings,
        streams: &Streams,
        planned: &Planned,
    ) -> (Arc<FleetProgress>, bool) {
        let progress = FleetProgress::new(
            &planned.contexts,
            &planned.order,
            settings.stderr_is_terminal && settings.verbose == 0,
            streams.color(streams::Kind::Notice),
            settings.verbose > 0,
            streams.writer(streams::Kind::Notice),
        );
        (progress, true)
    }

    fn follows_while_writing(&self, settings: &Settings) -> bool {
        settings.wait()
    }

    fn interrupt_notice(&self) -> &'static str {
        "\ninterrupt received: finishing the requests in flight, starting no new cluster and no new request (interrupt again to exit at once)"
    }

    async fn written(
        &self,
        _: &Settings,
        streams: &Streams,
        _: &mut Signals,
        planned: &mut Planned,
        mut states: Vec<Option<ClusterState>>,
        interrupted: Option<Interruption>,
    ) -> Ending {
        let end = end_of(
            planned,
            |m| {
                states
                    .get_mut(m.index)
                    .and_then(Option::take)
                    .unwrap_or(ClusterState::NotStarted(NotStarted::Interrupted))
            },
            false,
            interrupted,
        );
        finish(streams, planned, end, true)
    }

    fn saved_what(&self, clusters: usize) -> String {
        match clusters {
            1 => " of 1 cluster".to_owned(),
            n => format!(" of {n} clusters"),
        }
    }

    fn located(&self, context: &str) -> String {
        format!(" in context {:?}", Untrusted(context))
    }
}

/// The owners whose fields a cluster's change overrides, each once, escaped and followed by
/// `at` (where the cluster is, in a fleet).
fn owner_names(m: &Member, at: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for owner in m.sourced.owners.iter().flat_map(|o| &o.owners) {
        let name = format!("{}{at}", Untrusted(&owner.name()));
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// What the fleet question says of the order: which clusters go first (already escaped), when
/// only some of the `n` planned clusters are canaries.
fn canary_order(canaries: &[String], n: usize) -> String {
    match canaries {
        [] => String::new(),
        all if all.len() == n => String::new(),
        [one] => format!("; {one} first, the rest after its rollout"),
        several => format!(
            "; {} first, the rest after their rollouts",
            several.join(", ")
        ),
    }
}

/// What the fleet question says of waves: `; in 3 waves: dev-1, then eu-1, eu-2, then us-1`
/// (escaped).
fn wave_order(waves: &[Vec<String>]) -> String {
    let each: Vec<String> = waves
        .iter()
        .map(|w| {
            fleet_plan::some_names(
                &w.iter()
                    .map(|c| Untrusted(c).to_string())
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    format!("; in {} waves: {}", waves.len(), each.join(", then "))
}

/// The end of a fleet's run: `state` for each planned cluster, the skipped and failed ones as
/// they are.
fn end_of(
    planned: &mut Planned,
    mut state: impl FnMut(&mut Member) -> ClusterState,
    changes_pending: bool,
    interrupted: Option<Interruption>,
) -> FleetEnd {
    // The clusters that were not planned end here; the planned ones stay for the views.
    let clusters = std::mem::take(&mut planned.clusters);
    let mut ends = Vec::with_capacity(clusters.len());
    for (c, context) in clusters.into_iter().zip(&planned.contexts) {
        let (namespace, state) = match c {
            Planning::Planned(mut m) => {
                let state = state(&mut m);
                let namespace = m.cluster.namespace().to_owned();
                planned.clusters.push(Planning::Planned(m));
                (Some(namespace), state)
            }
            Planning::Skipped { error, .. } => (None, ClusterState::Skipped(error)),
            Planning::Failed(error) => (None, ClusterState::Failed(error)),
        };
        ends.push(ClusterEnd {
            canary: planned.order.canary.contains(context),
            context: context.clone(),
            namespace,
            state,
        });
    }
    FleetEnd {
        app: planned.app.clone(),
        clusters: ends,
        interrupted,
        changes_pending,
    }
}

/// Says how a fleet's run ended (the report, when `report`; the document with `-o
/// json|yaml`) and returns the ending.
fn finish(streams: &Streams, planned: &Planned, end: FleetEnd, report: bool) -> Ending {
    if report {
        let _ = streams.fleet_report(&end);
    }
    let _ = streams.fleet_document(&planned.fleet_plan(), &planned.order, Some(&end));
    Ending::Fleet(end)
}

/// `--verify-url` (`probes`: its requests), after the writes and the rollout (`rollout`, with
/// `--wait`): the requests' lines, and a failure when a path with scopes did not refuse its
/// request (exit 9). The check goes on after an incomplete rollout — the routes are written
/// either way — and when it fails too, the rollout's failure is told first. A signal stops it.
async fn verified(
    rollout: Result<(), AppError>,
    probes: Option<Vec<Probe>>,
    afterwards: verify::Afterwards,
    settings: &Settings,
    signals: &mut Signals,
    streams: &Streams,
) -> Result<(), AppError> {
    let (Some(probes), Some(verify)) = (probes, settings.verify()) else {
        return rollout;
    };
    if let Err(e @ AppError::Interrupted { .. }) = rollout {
        return Err(e);
    }
    if probes.is_empty() {
        streams::notice(&verify::nothing_to_check(&verify.url));
        return rollout;
    }
    streams::notice(&verify::announce(&verify.url, &probes));
    let answers = tokio::select! {
        answers = probe::send_all(&probes, verify) => answers,
        signal = signals.recv() => {
            if let Err(e) = rollout {
                streams.ending(&Ending::Failed(e));
            }
            return Err(AppError::Interrupted {
                signal,
                stage: Stage::Verifying { url: verify.url.to_string() },
            });
        }
    };
    let lines: Vec<_> = probes
        .iter()
        .zip(&answers)
        .map(|(p, a)| verify::line(&verify.url, p, a))
        .collect();
    // As with the report: lines that cannot be shown do not change what the exit code says.
    let _ = streams.lines(&lines);
    let failed = answers.iter().filter(|a| !a.enforced()).count();
    if failed == 0 {
        return rollout;
    }
    if let Err(e) = rollout {
        streams.ending(&Ending::Failed(e));
    }
    Err(AppError::AuthNotEnforced {
        message: verify::failure(&verify.url, failed, answers.len(), &afterwards),
    })
}

/// `--wait`: follows the Deployment's rollout and the routes in `followed` on stderr (bars on a
/// terminal, plain lines otherwise) until all are done, one fails or `--timeout` (0: no bound)
/// runs out. The writes have landed by now, so every failure here is [`AppError::Rollout`] (its
/// own exit code), and a signal only stops the waiting. Nothing to follow: done at once.
async fn follow_written(
    cluster: &Cluster,
    followed: &Followed,
    settings: &Settings,
    signals: &mut Signals,
    streams: &Streams,
) -> Result<(), AppError> {
    let target = WaitTarget::of(cluster, &settings.app);
    if followed.is_empty() {
        return Ok(());
    }
    let mut progress = rollout_progress(settings, streams, &target, followed);
    let following = wait::follow_in(
        cluster,
        &settings.app,
        followed,
        settings.wait_timeout,
        wait::Stop::of(&settings.follow),
        progress.as_mut(),
    );
    let signal = tokio::select! {
        result = following => return result.map(|_| ()).map_err(AppError::from),
        signal = signals.recv() => signal,
    };
    Err(AppError::Interrupted {
        signal,
        stage: Stage::Waiting {
            name: target.name.clone(),
            namespace: target.namespace.clone(),
            rollout: followed.rollout,
            reason: progress.last_reason(),
            undo: settings.follow.undo_on_failure.then(|| {
                verify::undo_command(&settings.app, cluster.namespace(), &cluster.conn.context)
            }),
        },
    })
}

/// Whether `report` wrote the HorizontalPodAutoscaler.
fn changed_autoscaler(report: &appupdate_model::report::Report) -> bool {
    use appupdate_model::plan::{Action, Kind};
    use appupdate_model::report::Outcome;
    report.entries.iter().any(|(c, o)| {
        c.kind == Kind::HorizontalPodAutoscaler
            && c.action() != Action::Unchanged
            && matches!(o, Outcome::Applied | Outcome::AlreadyDone)
    })
}

/// After the bounds changed and the wait: an autoscaler that says it cannot scale is named
/// (a warning; the bounds were written). A read that fails says nothing.
async fn autoscaler_warnings(cluster: &Cluster, app: &str) {
    use appupdate_model::plan::Kind;
    let Ok(Some(hpa)) = cluster.get(Kind::HorizontalPodAutoscaler, app).await else {
        return;
    };
    for trouble in appupdate_model::rollout::autoscaler_trouble(&hpa) {
        streams::notice(&format!(
            "warning: horizontalpodautoscaler.autoscaling/{}: {trouble}",
            Untrusted(app)
        ));
    }
}

/// How `--wait` shows what it follows: bars on a terminal, plain lines otherwise (stderr).
fn rollout_progress(
    settings: &Settings,
    streams: &Streams,
    target: &WaitTarget,
    followed: &Followed,
) -> Box<dyn wait::Progress> {
    let color = streams.color(streams::Kind::Notice);
    if settings.stderr_is_terminal && !followed.is_empty() {
        Box::new(wait::Bar::new(
            &target.reference(),
            followed,
            color,
            streams.writer(streams::Kind::Notice),
        ))
    } else {
        Box::new(wait::Lines::new(
            streams.writer(streams::Kind::Notice),
            &target.reference(),
            color,
        ))
    }
}

/// The warning, said with the plan (before the question), that `m`'s change will not be
/// recorded: its history ConfigMap is immutable (`immutable: true`), so no record can be
/// added to it and `--undo` will not know the change.
fn frozen_history(settings: &Settings, m: &Member) -> Option<String> {
    let Some(Some(cm)) = &m.sourced.config_map else {
        return None;
    };
    if settings.history_max == 0 || cm["immutable"] != true || !m.sourced.plan.has_changes() {
        return None;
    }
    Some(format!(
        "warning: configmap/{} is immutable, so this change will not be recorded in the history and --undo will not know it; whoever may delete ConfigMaps can delete it to record again (the next run that records creates it anew)",
        Untrusted(&history::config_map_name(&m.sourced.plan.app))
    ))
}

#[cfg(test)]
mod tests {
    use super::{canary_order, wave_order};

    #[test]
    fn the_question_names_the_waves_in_order() {
        let w = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            wave_order(&[w(&["dev"]), w(&["eu-1", "eu-2"]), w(&["us-1"])]),
            "; in 3 waves: dev, then eu-1, eu-2, then us-1"
        );
    }

    #[test]
    fn the_question_names_the_canaries_that_go_first() {
        let names = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(canary_order(&[], 3), "");
        assert_eq!(canary_order(&names(&["eu-1", "eu-2"]), 2), "");
        assert_eq!(
            canary_order(&names(&["eu-1"]), 3),
            "; eu-1 first, the rest after its rollout"
        );
        assert_eq!(
            canary_order(&names(&["eu-1", "eu-2"]), 3),
            "; eu-1, eu-2 first, the rest after their rollouts"
        );
    }
}
