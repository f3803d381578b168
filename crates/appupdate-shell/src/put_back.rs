//! `--undo-on-failure`: a run that failed after writing puts back what it changed.
//!
//! From the run's own before-state, not from the history: the run's report is turned into the
//! record it would keep ([`history::record`], so this works with `--history-max 0` too), and
//! that record is undone as `--undo` undoes one ([`plan_sources::undo_record`]): planned against
//! the objects as they are now, dry-run, written under the guard, and recorded as its own
//! revision when a history is kept. A value someone else moved since the run wrote it is not
//! overwritten ([`undo::without`]) but listed. Then the put-back's own rollout is followed. It
//! writes the image exactly as it was read before the run.

use crate::apply::InterruptFlag;
use crate::fleet::{ClusterState, FleetOrder};
use crate::fleet_progress::FleetProgress;
use crate::history_store::{self, Recorded};
use crate::plan_sources;
use crate::planning::Member;
use crate::settings::{FleetSettings, Settings};
use crate::wait::{self, Followed, WaitError, Waited};
use crate::writing;
use appupdate_model::report::Report;
use appupdate_model::text::Untrusted;
use appupdate_plan::history;
use appupdate_plan::undo;

/// What putting back did.
#[derive(Debug)]
pub(crate) struct PutBack {
    /// The report of the put-back's writes (`None`: nothing was written).
    pub report: Option<Report>,
    /// Its history record.
    pub recorded: Recorded,
    /// What is not as it was before the run, one line each (escaped): empty when everything
    /// is back.
    pub left: Vec<String>,
    /// The put-back's own rollout, when it was followed.
    pub rollout: Option<Result<Waited, WaitError>>,
}

/// Puts back what `member`'s run changed (`report`, recorded as `recorded`), then follows the
/// put-back's rollout, telling `progress`.
pub(crate) async fn put_back(
    settings: &Settings,
    member: &Member,
    report: &Report,
    recorded: &Recorded,
    progress: &mut dyn wait::Progress,
) -> PutBack {
    let mut done = PutBack {
        report: None,
        recorded: Recorded::Nothing,
        left: Vec::new(),
        rollout: None,
    };
    let Some(undoing) = plan(settings, member, report, recorded, &mut done.left).await else {
        return done;
    };
    let Some((report, recorded)) = write(settings, &undoing, &mut done).await else {
        return done;
    };
    let followed = Followed::after_writes(&report, false);
    done.report = Some(report);
    done.recorded = recorded;
    if !followed.is_empty() {
        let rollout = wait::follow_in(
            &member.cluster,
            &settings.app,
            &followed,
            settings.wait_timeout,
            wait::Stop::of(&settings.follow),
            progress,
        )
        .await;
        if let Err(e) = &rollout {
            done.left
                .push(format!("the put-back's own rollout did not complete: {e}"));
        }
        done.rollout = Some(rollout);
    }
    done
}

/// The put-back of `member`'s run as a cluster to write (`None`: nothing to put back, or it
/// cannot be planned — `left` then says why): the record the run would keep, undone against
/// the objects as they are now, less what moved since the run wrote it (listed in `left`).
async fn plan(
    settings: &Settings,
    member: &Member,
    report: &Report,
    recorded: &Recorded,
    left: &mut Vec<String>,
) -> Option<Member> {
    let cluster = &member.cluster;
    let app = settings.app.as_str();
    let info = member.sourced.run_info(String::new(), String::new());
    let mut record = history::record(report, &info)?;
    record.revision = match recorded {
        Recorded::Revision { revision, .. } => *revision,
        _ => 0,
    };
    let history_read = if settings.history_max > 0 {
        history_store::read(cluster, app).await.ok()
    } else {
        None
    };
    let mut planned = plan_sources::undo_record(cluster, app, &record, history_read.clone())
        .await
        .map_err(|e| left.push(format!("nothing was put back: {e}")))
        .ok()?;
    if !planned.drift.is_empty() {
        left.extend(planned.drift.iter().map(drift_line));
        let kept = undo::without(&record, &planned.drift);
        planned = plan_sources::undo_record(cluster, app, &kept, history_read)
            .await
            .map_err(|e| left.push(format!("nothing else was put back: {e}")))
            .ok()?;
    }
    planned.sourced.plan.has_changes().then(|| Member {
        index: 0,
        cluster: cluster.clone(),
        sourced: planned.sourced,
    })
}

/// The put-back's writes, as any run's: dry run, the guard, the writes, its history record.
async fn write(
    settings: &Settings,
    undoing: &Member,
    done: &mut PutBack,
) -> Option<(Report, Recorded)> {
    let states = writing::apply_all(
        settings,
        &FleetSettings::one(),
        &FleetOrder::default(),
        &[undoing],
        false,
        &InterruptFlag::default(),
        &FleetProgress::hidden(),
    )
    .await;
    match states.into_iter().next() {
        Some(ClusterState::Applied {
            report, recorded, ..
        }) => {
            if !report.went_as_planned() {
                done.left
                    .push("the put-back's writes did not all land (listed above)".into());
            }
            Some((report, recorded))
        }
        Some(ClusterState::Refused(report)) => {
            done.left.push(
                "the put-back was refused by the server's dry run: nothing of it was written"
                    .into(),
            );
            done.report = Some(report);
            None
        }
        Some(ClusterState::Failed(e)) => {
            done.left.push(format!("the put-back failed: {e}"));
            None
        }
        _ => None,
    }
}

/// `image of deployment.apps/web: now "x", this run wrote "y": left as it is`.
fn drift_line(d: &undo::Drift) -> String {
    let shown = |v: &Option<serde_json::Value>| match v {
        Some(serde_json::Value::String(s)) => format!("{:?}", Untrusted(s).to_string()),
        Some(v) => Untrusted(v.to_string()).to_string(),
        None => "(none)".into(),
    };
    format!(
        "{} of {}: now {}, this run wrote {}: changed since by someone else, left as it is",
        d.key,
        Untrusted(&d.reference),
        shown(&d.now),
        shown(&d.recorded)
    )
}

/// `--undo-on-failure` over several clusters, once their writes (and rollouts) are done: a
/// cluster whose rollout or routes failed after its writes is put back. When that failure
/// stopped the run — more failed clusters than `--max-failed` (waves), or any failure with
/// `--stop-on-failure` (`--canary`, `--contexts`) — every cluster this run changed is put back,
/// the last wave (or the clusters after the canary) first. Clusters not started stay as they
/// are. Each cluster's state says what its put-back did.
pub(crate) async fn put_back_fleet(
    settings: &Settings,
    fleet: &FleetSettings,
    order: &FleetOrder,
    members: &[&Member],
    states: &mut [ClusterState],
    progress: &std::sync::Arc<FleetProgress>,
) {
    let failed_after_writing = |s: &ClusterState| matches!(s, ClusterState::Applied { report, rollout: Some(Err(_)), .. } if report.any_written());
    let failed = states.iter().filter(|s| failed_after_writing(s)).count();
    if failed == 0 {
        return;
    }
    // The failure budget is a wave's: one wave over it stops the run.
    let stopped = if order.waves.is_empty() {
        fleet.stop_on_failure
    } else {
        order.waves.iter().any(|wave| {
            members
                .iter()
                .filter(|m| wave.contains(&m.cluster.conn.context))
                .filter(|m| states.get(m.index).is_some_and(failed_after_writing))
                .count()
                > order.max_failed
        })
    };
    // The last wave first; without waves, the clusters after the canary before the canary.
    let rank = |m: &Member| match order.wave_of(&m.cluster.conn.context) {
        Some(wave) => wave,
        None if order.canary.contains(&m.cluster.conn.context) => 0,
        None => 1,
    };
    let mut chosen: Vec<&Member> = members
        .iter()
        .copied()
        .filter(|m| match states.get(m.index) {
            Some(s @ ClusterState::Applied { report, .. }) if report.any_written() => {
                stopped || failed_after_writing(s)
            }
            _ => false,
        })
        .collect();
    chosen.sort_by_key(|m| std::cmp::Reverse(rank(m)));
    let mut groups: Vec<Vec<&Member>> = Vec::new();
    for m in chosen {
        match groups.last_mut() {
            Some(g) if g.first().is_some_and(|f| rank(f) == rank(m)) => g.push(m),
            _ => groups.push(vec![m]),
        }
    }
    for group in groups {
        let jobs = group.iter().map(|m| {
            let state = states.get(m.index);
            async move {
                let Some(ClusterState::Applied {
                    report, recorded, ..
                }) = state
                else {
                    return (m.index, None);
                };
                let _session = m.cluster.session().await;
                progress.busy(m.index, "putting back what this run changed");
                let mut line = crate::fleet_progress::RolloutLine {
                    progress: progress.clone(),
                    index: m.index,
                };
                let back = put_back(settings, m, report, recorded, &mut line).await;
                progress.set(
                    m.index,
                    if back.left.is_empty() {
                        "put back: as it was before the run"
                    } else {
                        "NOT put back completely"
                    },
                );
                let revision = match &back.recorded {
                    Recorded::Revision { revision, .. } => Some(*revision),
                    _ => None,
                };
                (
                    m.index,
                    Some(crate::fleet::PutBackEnd {
                        left: back.left,
                        revision,
                    }),
                )
            }
        });
        let at_once = group.first().map_or(1, |m| m.cluster.at_once());
        for (index, end) in crate::planning::buffered(at_once, jobs).await {
            if let (Some(end), Some(ClusterState::Applied { put_back, .. })) =
                (end, states.get_mut(index))
            {
                *put_back = Some(end);
            }
        }
    }
}
