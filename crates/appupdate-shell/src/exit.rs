//! How a run ended, and the one function that turns that into the process's exit code.

use crate::error::AppError;
use crate::fleet::{ClusterState, FleetEnd};
use appupdate_model::report::{Interruption, Outcome, Report};

/// Exit codes, documented in `--help` and the README.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitCode {
    /// Success, or nothing to change.
    Ok = 0,
    /// Failed with nothing written (before any write, or the one write of a run that sends no
    /// dry run was refused): nothing was changed.
    Failed = 1,
    /// Changes pending (only with `--detailed-exitcode`).
    Changes = 2,
    /// Bad flags or input, or a cluster that lacks what the change needs (found before any
    /// write): nothing was changed.
    Usage = 3,
    /// Not confirmed: nothing was changed.
    NotConfirmed = 4,
    /// The approved-diff guard stopped the run.
    GuardTripped = 5,
    /// Failed after some writes: the state is mixed.
    Partial = 6,
    /// `--wait`: every change was applied, but the rollout did not complete (timed out, exceeded
    /// its progress deadline, or could not be followed). With `--canary`: a canary's rollout did
    /// not complete, and the clusters after it were not started.
    RolloutIncomplete = 7,
    /// A run over several clusters with `--skip-unreachable` left clusters out: the others
    /// were updated (or planned) as asked.
    Skipped = 8,
    /// `--verify-url`: a path with scopes answered a request without a token with something
    /// other than 401 or 403, or did not answer.
    AuthNotEnforced = 9,
    /// `--undo-on-failure`: the run failed after writing and then put its own changes back:
    /// the application is as it was before the run.
    PutBack = 10,
    /// `--undo-on-failure`: the run failed after writing and could not put all of its changes
    /// back (the message lists what is where).
    NotPutBack = 11,
    /// Interrupted by SIGINT (Ctrl-C).
    Interrupted = 130,
    /// Terminated by SIGTERM (Ctrl-Break, or the console closing, on Windows).
    Terminated = 143,
}

impl ExitCode {
    pub fn code(self) -> i32 {
        self as i32
    }
}

/// How a run ended: everything [`exit_code`] needs.
#[derive(Debug)]
pub enum Ending {
    /// Done as asked: help or version printed, completions, nothing to change, a dry run
    /// (without `--detailed-exitcode`), or — with `--wait` — applied and rolled out.
    Done,
    /// `--dry-run --detailed-exitcode` with changes pending.
    ChangesPending,
    /// The plan was applied, or applying it stopped: the report says what happened to each
    /// object.
    Applied(Report),
    /// Stopped by an error (before any write, or after every write for `--wait`).
    Failed(AppError),
    /// A run over several clusters: how each one ended.
    Fleet(FleetEnd),
}

/// The exit code of a run: the one place that decides it.
pub fn exit_code(ending: &Ending) -> ExitCode {
    match ending {
        Ending::Done => ExitCode::Ok,
        Ending::ChangesPending => ExitCode::Changes,
        Ending::Applied(report) => applied(report),
        Ending::Failed(err) => failed(err),
        Ending::Fleet(end) => fleet(end),
    }
}

/// How bad a code is, for a fleet whose clusters ended differently: a signal, then the guard
/// (5), a mixed state (6), auth not enforced (9), a failure with nothing changed (1), bad input
/// (3), an incomplete rollout (7), not confirmed (4), clusters skipped (8), changes pending
/// (2), success (0).
fn severity(code: ExitCode) -> u8 {
    match code {
        ExitCode::Ok => 0,
        ExitCode::Changes => 1,
        ExitCode::Skipped => 2,
        ExitCode::NotConfirmed => 3,
        ExitCode::RolloutIncomplete => 4,
        // Just above an incomplete rollout: it failed, and is back as it was.
        ExitCode::PutBack => 5,
        ExitCode::Usage => 6,
        ExitCode::Failed => 7,
        ExitCode::AuthNotEnforced => 8,
        // Not all put back ranks with a mixed state.
        ExitCode::Partial | ExitCode::NotPutBack => 9,
        ExitCode::GuardTripped => 10,
        ExitCode::Interrupted | ExitCode::Terminated => 11,
    }
}

/// The worst of the clusters' codes, each decided as for one cluster; a cluster not started
/// takes the code of what stopped it (a failure elsewhere, the canary, a signal). A failure
/// while another cluster was written leaves the fleet mixed: 6, not 1.
fn fleet(end: &FleetEnd) -> ExitCode {
    if let Some(signal) = end.interrupted {
        return signalled(signal);
    }
    let rollout = |r: &Option<Result<_, _>>| match r {
        Some(Err(_)) => ExitCode::RolloutIncomplete,
        _ => ExitCode::Ok,
    };
    let worst = end
        .clusters
        .iter()
        .map(|c| match &c.state {
            ClusterState::Failed(err) => failed(err),
            ClusterState::Skipped(_) => ExitCode::Skipped,
            ClusterState::Planned
            | ClusterState::NotStarted(_)
            | ClusterState::AlreadyApplied { .. } => ExitCode::Ok,
            ClusterState::Refused(report) => applied(report),
            ClusterState::Unchanged { rollout: r } => rollout(r),
            ClusterState::Applied {
                put_back: Some(back),
                ..
            } => {
                if back.left.is_empty() {
                    ExitCode::PutBack
                } else {
                    ExitCode::NotPutBack
                }
            }
            ClusterState::Applied {
                report, rollout: r, ..
            } => match applied(report) {
                ExitCode::Ok => rollout(r),
                code => code,
            },
        })
        .chain(end.changes_pending.then_some(ExitCode::Changes))
        .max_by_key(|c| severity(*c))
        .unwrap_or(ExitCode::Ok);
    if worst == ExitCode::Failed && end.any_written() {
        ExitCode::Partial
    } else {
        worst
    }
}

fn signalled(signal: Interruption) -> ExitCode {
    match signal {
        Interruption::Sigint => ExitCode::Interrupted,
        Interruption::Sigterm => ExitCode::Terminated,
    }
}

fn applied(report: &Report) -> ExitCode {
    if let Some(signal) = report.interrupted {
        return signalled(signal);
    }
    let outcomes = || report.entries.iter().map(|(_, o)| o);
    if outcomes().any(|o| matches!(o, Outcome::Tripped { .. })) {
        ExitCode::GuardTripped
    } else if outcomes().any(|o| matches!(o, Outcome::Failed { .. } | Outcome::Unknown { .. })) {
        if report.any_written() {
            ExitCode::Partial
        } else {
            ExitCode::Failed
        }
    } else if outcomes().any(|o| matches!(o, Outcome::Unsupported { .. })) {
        // Found by the dry run: what the run asks for cannot be done on this cluster.
        if report.any_written() {
            ExitCode::Partial
        } else {
            ExitCode::Usage
        }
    } else {
        ExitCode::Ok
    }
}

fn failed(err: &AppError) -> ExitCode {
    match err {
        AppError::Cli(e) if e.is_informational() => ExitCode::Ok,
        AppError::PlanFile(
            appupdate_plan::plan_file::PlanFileError::Edited { .. }
            | appupdate_plan::plan_file::PlanFileError::Checksum { .. },
        ) => ExitCode::Usage,
        AppError::Cli(_)
        | AppError::Settings(_)
        | AppError::Kubeconfig(_)
        | AppError::Plan(_)
        | AppError::UnseenRemoval { .. }
        | AppError::Image { .. }
        | AppError::Owned { .. }
        | AppError::SavedPlan(_) => ExitCode::Usage,
        AppError::Request { .. }
        | AppError::NotFound { .. }
        | AppError::Output(_)
        | AppError::Runtime(_)
        | AppError::PlanFile(_)
        | AppError::PlanOut { .. }
        | AppError::Undo { .. } => ExitCode::Failed,
        AppError::Drift { .. } | AppError::NotUndoable { .. } | AppError::AppliedAlready { .. } => {
            ExitCode::GuardTripped
        }
        AppError::NotConfirmed(_) => ExitCode::NotConfirmed,
        AppError::Interrupted { signal, .. } => signalled(*signal),
        AppError::Rollout(_) => ExitCode::RolloutIncomplete,
        AppError::AuthNotEnforced { .. } => ExitCode::AuthNotEnforced,
        AppError::PutBack { left, .. } if left.is_empty() => ExitCode::PutBack,
        AppError::PutBack { .. } => ExitCode::NotPutBack,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use appupdate_model::plan::{Action, ObjectChange};

    fn change(action: Action) -> ObjectChange {
        ObjectChange::sample("web-x", action)
    }

    fn report(outcomes: Vec<(Action, Outcome)>) -> Report {
        Report {
            entries: outcomes
                .into_iter()
                .map(|(a, o)| (change(a).into(), o))
                .collect(),
            stopped_in_preflight: false,
            interrupted: None,
        }
    }

    fn failed_write() -> Outcome {
        Outcome::Failed {
            message: "no".into(),
        }
    }

    #[test]
    fn a_report_decides_between_done_failed_partial_and_tripped() {
        let done = report(vec![(Action::Update, Outcome::Applied)]);
        assert_eq!(exit_code(&Ending::Applied(done)), ExitCode::Ok);
        let nothing_written = report(vec![(Action::Update, failed_write())]);
        assert_eq!(
            exit_code(&Ending::Applied(nothing_written)),
            ExitCode::Failed
        );
        let partial = report(vec![
            (Action::Update, Outcome::Applied),
            (Action::Delete, failed_write()),
        ]);
        assert_eq!(exit_code(&Ending::Applied(partial)), ExitCode::Partial);
        let tripped = report(vec![
            (Action::Update, Outcome::Applied),
            (
                Action::Update,
                Outcome::Tripped {
                    reason: "moved".into(),
                    fresh: None,
                },
            ),
        ]);
        assert_eq!(exit_code(&Ending::Applied(tripped)), ExitCode::GuardTripped);
    }

    #[test]
    fn a_dry_run_that_finds_a_missing_feature_is_bad_input_unless_something_else_failed() {
        let unsupported = || Outcome::Unsupported {
            message: "no ExternalAuth filter".into(),
        };
        let refused = report(vec![
            (Action::Create, unsupported()),
            (Action::Create, Outcome::NotAttempted),
        ]);
        assert_eq!(exit_code(&Ending::Applied(refused)), ExitCode::Usage);
        // Another object the cluster refused for another reason: a failure, as before.
        let also_failed = report(vec![
            (Action::Create, unsupported()),
            (Action::Update, failed_write()),
        ]);
        assert_eq!(exit_code(&Ending::Applied(also_failed)), ExitCode::Failed);
        let written = report(vec![
            (Action::Update, Outcome::Applied),
            (Action::Create, unsupported()),
        ]);
        assert_eq!(exit_code(&Ending::Applied(written)), ExitCode::Partial);
    }

    fn cluster(state: ClusterState) -> crate::fleet::ClusterEnd {
        crate::fleet::ClusterEnd {
            context: "c".into(),
            canary: false,
            namespace: None,
            state,
        }
    }

    fn fleet_code(states: Vec<ClusterState>) -> ExitCode {
        exit_code(&Ending::Fleet(FleetEnd {
            app: "web".into(),
            clusters: states.into_iter().map(cluster).collect(),
            interrupted: None,
            changes_pending: false,
        }))
    }

    fn applied_state(outcomes: Vec<(Action, Outcome)>) -> ClusterState {
        ClusterState::Applied {
            report: report(outcomes),
            recorded: crate::history_store::Recorded::Nothing,
            rollout: None,
            put_back: None,
        }
    }

    fn stuck() -> ClusterState {
        ClusterState::Applied {
            report: report(vec![(Action::Update, Outcome::Applied)]),
            recorded: crate::history_store::Recorded::Nothing,
            rollout: Some(Err(crate::wait::WaitError::Timeout {
                target: "deployment.apps/web".into(),
                kubectl_ref: "deployment/web".into(),
                namespace: "shop".into(),
                after: std::time::Duration::from_secs(1),
                last: "1 of 2".into(),
                why: Box::default(),
            })),
            put_back: None,
        }
    }

    #[test]
    fn a_fleet_exits_with_its_worst_cluster_and_a_mixed_fleet_with_6() {
        use crate::fleet::NotStarted;
        let done = || applied_state(vec![(Action::Update, Outcome::Applied)]);
        let failed_unwritten = || applied_state(vec![(Action::Update, failed_write())]);
        assert_eq!(fleet_code(vec![done(), done()]), ExitCode::Ok);
        // One cluster failed with nothing written in it, another was written: mixed.
        assert_eq!(
            fleet_code(vec![
                done(),
                failed_unwritten(),
                ClusterState::NotStarted(NotStarted::AfterFailure)
            ]),
            ExitCode::Partial
        );
        // Nothing written anywhere.
        assert_eq!(
            fleet_code(vec![
                ClusterState::Refused(report(vec![(Action::Update, failed_write())])),
                ClusterState::NotStarted(NotStarted::RefusedElsewhere)
            ]),
            ExitCode::Failed
        );
        // The guard outranks the mixed state, as for one cluster.
        let tripped = applied_state(vec![(
            Action::Update,
            Outcome::Tripped {
                reason: "moved".into(),
                fresh: None,
            },
        )]);
        assert_eq!(
            fleet_code(vec![done(), tripped, failed_unwritten()]),
            ExitCode::GuardTripped
        );
        // A stuck canary: the rest not started, 7.
        assert_eq!(
            fleet_code(vec![stuck(), ClusterState::NotStarted(NotStarted::Canary)]),
            ExitCode::RolloutIncomplete
        );
        // Skipped clusters say so, unless something worse happened.
        let unreachable = || {
            ClusterState::Skipped(AppError::Undo {
                message: "x".into(),
            })
        };
        assert_eq!(fleet_code(vec![done(), unreachable()]), ExitCode::Skipped);
        assert_eq!(
            fleet_code(vec![stuck(), unreachable()]),
            ExitCode::RolloutIncomplete
        );
        // A signal decides over everything.
        let mut end = FleetEnd {
            app: "web".into(),
            clusters: vec![cluster(failed_unwritten())],
            interrupted: Some(Interruption::Sigterm),
            changes_pending: false,
        };
        assert_eq!(exit_code(&Ending::Fleet(end)), ExitCode::Terminated);
        end = FleetEnd {
            app: "web".into(),
            clusters: vec![cluster(ClusterState::Planned)],
            interrupted: None,
            changes_pending: true,
        };
        assert_eq!(exit_code(&Ending::Fleet(end)), ExitCode::Changes);
    }

    #[test]
    fn auth_not_enforced_is_9_and_ranks_below_a_mixed_state_in_a_fleet() {
        let err = AppError::AuthNotEnforced {
            message: "open".into(),
        };
        assert_eq!(exit_code(&Ending::Failed(err)), ExitCode::AuthNotEnforced);
        assert_eq!(ExitCode::AuthNotEnforced.code(), 9);
        assert!(severity(ExitCode::AuthNotEnforced) > severity(ExitCode::Failed));
        assert!(severity(ExitCode::AuthNotEnforced) < severity(ExitCode::Partial));
    }

    #[test]
    fn a_signal_decides_over_everything_else() {
        let mut r = report(vec![(Action::Update, failed_write())]);
        r.interrupted = Some(Interruption::Sigterm);
        assert_eq!(exit_code(&Ending::Applied(r)), ExitCode::Terminated);
        let err = AppError::Interrupted {
            signal: Interruption::Sigint,
            stage: crate::error::Stage::Planning,
        };
        assert_eq!(exit_code(&Ending::Failed(err)), ExitCode::Interrupted);
    }
}
