//! How a run ended, and the one function that turns that into the process's exit code.

use crate::error::AppError;
use crate::report::{Interruption, Outcome, Report};

/// Exit codes, documented in `--help` and the README.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitCode {
    /// Success, or nothing to change.
    Ok = 0,
    /// Failed before any write: nothing was changed.
    Failed = 1,
    /// Changes pending (only with `--detailed-exitcode`).
    Changes = 2,
    /// Bad flags or input: nothing was changed.
    Usage = 3,
    /// Not confirmed: nothing was changed.
    NotConfirmed = 4,
    /// The approved-diff guard stopped the run.
    GuardTripped = 5,
    /// Failed after some writes: the state is mixed.
    Partial = 6,
    /// `--wait`: every change was applied, but the rollout did not complete (timed out, exceeded
    /// its progress deadline, or could not be followed).
    RolloutIncomplete = 7,
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
}

/// The exit code of a run: the one place that decides it.
pub fn exit_code(ending: &Ending) -> ExitCode {
    match ending {
        Ending::Done => ExitCode::Ok,
        Ending::ChangesPending => ExitCode::Changes,
        Ending::Applied(report) => applied(report),
        Ending::Failed(err) => failed(err),
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
    } else {
        ExitCode::Ok
    }
}

fn failed(err: &AppError) -> ExitCode {
    match err {
        AppError::Cli(e) if e.is_informational() => ExitCode::Ok,
        AppError::Cli(_)
        | AppError::Settings(_)
        | AppError::Kubeconfig(_)
        | AppError::Plan(_)
        | AppError::SavedPlan(_) => ExitCode::Usage,
        AppError::Request { .. }
        | AppError::NotFound { .. }
        | AppError::Output(_)
        | AppError::Runtime(_)
        | AppError::PlanFile(_)
        | AppError::PlanOut { .. }
        | AppError::Undo { .. } => ExitCode::Failed,
        AppError::UndoRefused { .. } => ExitCode::GuardTripped,
        AppError::NotConfirmed(_) => ExitCode::NotConfirmed,
        AppError::Interrupted { signal, .. } => signalled(*signal),
        AppError::Rollout(_) => ExitCode::RolloutIncomplete,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Action, ObjectChange};

    fn change(action: Action) -> ObjectChange {
        ObjectChange::sample("web-x", action)
    }

    fn report(outcomes: Vec<(Action, Outcome)>) -> Report {
        Report {
            entries: outcomes.into_iter().map(|(a, o)| (change(a), o)).collect(),
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
