//! Everything that can stop a run, as one error type with typed causes.
//!
//! Every variant renders as one line that says what went wrong, where (object, namespace,
//! context, file:line or flag) and what to do. Causes are kept as `#[source]` for code that
//! needs to know them (the exit code, tests), but only the top line is ever printed: the text
//! of kube's, rustls's or an exec plugin's own errors may quote credentials.
//! [`crate::exit`] maps each variant to its exit code.

use crate::cli::CliError;
use crate::confirm::NotConfirmed;
use crate::settings::SettingsError;
use crate::wait::WaitError;
use appupdate_kube::cluster::RequestError;
use appupdate_kube::describe::Target;
use appupdate_kube::kube_context::KubeconfigError;
use appupdate_model::plan::PlanError;
use appupdate_model::report::Interruption;
use appupdate_model::text::Untrusted;
use appupdate_plan::plan_file::{PlanFileError, SavedPlanError};

/// Where a run was when a signal ended it, which decides what can be said about the state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Connecting, reading, planning or asking: nothing was written.
    Planning,
    /// Writing, after a first signal asked to finish the requests in flight: a second one
    /// ends the run at once.
    Writing,
    /// Following (`--wait`) the routes written and, when `rollout`, the rollout of the
    /// Deployment `name` in `namespace`: the writes are done.
    Waiting {
        name: String,
        namespace: String,
        rollout: bool,
        /// Why the rollout was not done yet, from its pods, when they were looked at (escaped).
        reason: Option<String>,
        /// With `--undo-on-failure`: the command that undoes the run (a signal starts no
        /// writes, so nothing was put back).
        undo: Option<String>,
    },
    /// `--verify-url`: asking the address `url` whether auth is enforced; the writes are done.
    Verifying { url: String },
}

impl Stage {
    fn what_happened(&self) -> String {
        let mut said = self.said();
        if let Stage::Waiting {
            reason: Some(reason),
            ..
        } = self
        {
            said.push_str(&format!("; it was waiting on {reason}"));
        }
        match self {
            Stage::Waiting {
                undo: Some(undo), ..
            } => format!(
                "{said}; nothing was put back (a signal starts no writes): undo this run with {}",
                Untrusted(undo)
            ),
            _ => said,
        }
    }

    fn said(&self) -> String {
        match self {
            Stage::Planning => "interrupted: nothing was changed".into(),
            Stage::Writing => "interrupted again: exiting now; requests already sent may or may not have been applied — run again to see the state".into(),
            Stage::Waiting {
                name,
                namespace,
                rollout: false,
                ..
            } => format!(
                "stopped waiting: the changes were applied; the routes of {} are taken up by their controllers in their own time (kubectl get httproutes,ingresses -n {} -l app={} shows their status)",
                Untrusted(name),
                Untrusted(namespace),
                Untrusted(name)
            ),
            Stage::Waiting {
                name,
                namespace,
                rollout: true,
                ..
            } => format!(
                "stopped waiting: the changes were applied and the rollout goes on (kubectl rollout status deployment/{} -n {})",
                Untrusted(name),
                Untrusted(namespace)
            ),
            Stage::Verifying { url } => format!(
                "stopped checking auth at {}: the changes were applied, and whether the paths with scopes refuse requests without a token is not known",
                Untrusted(url)
            ),
        }
    }
}

/// Everything that can stop a run.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The command line was not taken.
    #[error(transparent)]
    Cli(#[from] CliError),
    /// A flag's value or the endpoints file cannot be used.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// The kubeconfig cannot be used.
    #[error(transparent)]
    Kubeconfig(#[from] KubeconfigError),
    /// The requested change does not fit the live state (min > live max, container choice…).
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// `--yes` with a plan that removes what routes it takes over carry and their style does not
    /// write: nobody saw the removal.
    #[error("{message}")]
    UnseenRemoval { message: String },
    /// `--yes` without `--force-conflicts`, and a change to fields another tool owns.
    #[error("{message}")]
    Owned { message: String },
    /// A read failed, before any write.
    #[error("{}", .source.describe(.verb, .target))]
    Request {
        /// The RBAC verb: `get` or `list`.
        verb: &'static str,
        target: Target,
        #[source]
        source: Box<RequestError>,
    },
    /// An object the change needs does not exist.
    #[error(
        "{} not found in namespace {:?} (context {:?}){why}; check the name and -n/--namespace",
        Untrusted(&.target.reference), Untrusted(&.target.namespace), Untrusted(&.target.context)
    )]
    NotFound {
        target: Target,
        /// Why it is needed, when that is not obvious (` (the Ingress backend port is read
        /// from it)`), else empty.
        why: &'static str,
    },
    /// The user said no, or could not be asked.
    #[error(transparent)]
    NotConfirmed(#[from] NotConfirmed),
    /// A signal ended the run.
    #[error("{}", .stage.what_happened())]
    Interrupted { signal: Interruption, stage: Stage },
    /// `--wait`: the changes were applied but the rollout did not complete, or a route was not
    /// taken up.
    #[error(transparent)]
    Rollout(Box<WaitError>),
    /// `--verify-url`: a path with scopes did not refuse a request without a token (the lines
    /// before say which); the message says what to do.
    #[error("{message}")]
    AuthNotEnforced { message: String },
    /// Writing the output failed (e.g. a closed pipe).
    #[error("cannot write output: {0}")]
    Output(#[from] std::io::Error),
    /// The async runtime could not be started.
    #[error("cannot start: {0}")]
    Runtime(#[source] std::io::Error),
    /// A saved plan is not for this cluster or namespace, or too old.
    #[error(transparent)]
    SavedPlan(#[from] SavedPlanError),
    /// The plan cannot be saved.
    #[error(transparent)]
    PlanFile(#[from] PlanFileError),
    /// `--plan-out FILE` cannot be written.
    #[error("cannot write the plan to {file}: {source}")]
    PlanOut {
        file: String,
        #[source]
        source: std::io::Error,
    },
    /// There is no record to undo.
    #[error("{message}")]
    Undo { message: String },
    /// A value the run would set back or write again was changed by someone else since: an
    /// undo over values changed since its record (`--force-undo`), a saved plan applied and
    /// then changed.
    #[error("{message}")]
    Drift { message: String },
    /// An undo of a record that cannot be undone: it fails validation or, with the history
    /// key, its signature; or it was recorded without what undoing it needs.
    #[error("{message}")]
    NotUndoable { message: String },
    /// The image check refused the image before anything was written: the registry says the
    /// tag does not exist, the image lacks a platform the pods need, or (`--image-check
    /// require`) the registry could not tell.
    #[error("{message}")]
    Image { message: String },
    /// A saved plan whose objects show it was applied already.
    #[error("{message}")]
    AppliedAlready { message: String },
    /// `--undo-on-failure`: the run failed after writing (`failure`, said before putting
    /// back), and what it changed was put back: completely (`left` empty, exit 10) or not
    /// (exit 11, `left` says what is where).
    #[error("{}", put_back_message(.left, .where_))]
    PutBack {
        failure: Box<AppError>,
        /// What is not as it was before the run, one line each, escaped.
        left: Vec<String>,
        /// `web in namespace "shop" (context "prod")`, escaped.
        where_: String,
    },
}

fn put_back_message(left: &[String], where_: &str) -> String {
    if left.is_empty() {
        format!(
            "the run failed after writing (above), and was put back: what it changed in {where_} is as it was before it (--undo-on-failure)"
        )
    } else {
        let mut message = format!(
            "the run failed after writing (above), and was NOT put back completely (--undo-on-failure): in {where_}"
        );
        for line in left {
            message.push_str("\n  - ");
            message.push_str(line);
        }
        message
    }
}

impl From<WaitError> for AppError {
    fn from(e: WaitError) -> AppError {
        AppError::Rollout(Box::new(e))
    }
}

impl AppError {
    /// Why the run refused, as data (`-o json`'s `reason`), for the refusals that share exit
    /// code 5 with the approved-diff guard: `drift`, `not-undoable`, `applied-already`; and
    /// for a change to fields another tool owns under `--yes` (exit 3): `owned`.
    pub fn refusal_reason(&self) -> Option<&'static str> {
        match self {
            AppError::Drift { .. } => Some("drift"),
            AppError::NotUndoable { .. } => Some("not-undoable"),
            AppError::AppliedAlready { .. } => Some("applied-already"),
            AppError::Owned { .. } => Some("owned"),
            _ => None,
        }
    }

    /// A closed stdout (`… | head`): nothing more can be said there, and nothing needs to be.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, AppError::Output(e) if e.kind() == std::io::ErrorKind::BrokenPipe)
    }
}
