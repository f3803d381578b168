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
    let cluster = &member.cluster;
    let app = settings.app.as_str();
    let mut done = PutBack {
        report: None,
        recorded: Recorded::Nothing,
        left: Vec::new(),
        rollout: None,
    };
    let plan = &member.sourced.plan;
    let info = history::RunInfo {
        time: String::new(),
        user: String::new(),
        source: member.sourced.source.clone(),
        saved_plan: member.sourced.plan_checksum.is_some(),
        routes: plan.routes.as_ref().map(|r| r.header.clone()),
        plan_checksum: member.sourced.plan_checksum.clone(),
        fleet_run: member.sourced.fleet_run.clone(),
    };
    let Some(mut record) = history::record(report, &info) else {
        return done;
    };
    record.revision = match recorded {
        Recorded::Revision { revision, .. } => *revision,
        _ => 0,
    };
    let history_read = if settings.history_max > 0 {
        history_store::read(cluster, app).await.ok()
    } else {
        None
    };
    let planned = match plan_sources::undo_record(cluster, app, &record, history_read.clone()).await
    {
        Ok(p) => p,
        Err(e) => {
            done.left.push(format!("nothing was put back: {e}"));
            return done;
        }
    };
    let planned = if planned.drift.is_empty() {
        planned
    } else {
        for d in &planned.drift {
            done.left.push(drift_line(d));
        }
        let kept = undo::without(&record, &planned.drift);
        match plan_sources::undo_record(cluster, app, &kept, history_read).await {
            Ok(p) => p,
            Err(e) => {
                done.left.push(format!("nothing else was put back: {e}"));
                return done;
            }
        }
    };
    if !planned.sourced.plan.has_changes() {
        return done;
    }
    let undoing = Member {
        index: 0,
        cluster: cluster.clone(),
        sourced: planned.sourced,
    };
    let states = writing::apply_all(
        settings,
        &FleetSettings::one(),
        &FleetOrder::default(),
        &[&undoing],
        false,
        &InterruptFlag::default(),
        &FleetProgress::hidden(),
    )
    .await;
    let (report, recorded) = match states.into_iter().next() {
        Some(ClusterState::Applied {
            report, recorded, ..
        }) => (report, recorded),
        Some(ClusterState::Refused(report)) => {
            done.left.push(
                "the put-back was refused by the server's dry run: nothing of it was written"
                    .into(),
            );
            done.report = Some(report);
            return done;
        }
        Some(ClusterState::Failed(e)) => {
            done.left.push(format!("the put-back failed: {e}"));
            return done;
        }
        _ => return done,
    };
    if !report.went_as_planned() {
        done.left
            .push("the put-back's writes did not all land (listed above)".into());
    }
    let followed = Followed::after_writes(&report, false);
    done.report = Some(report);
    done.recorded = recorded;
    if !followed.is_empty() {
        let rollout = wait::follow_in(
            cluster,
            app,
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
