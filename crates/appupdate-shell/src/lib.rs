//! kubectl-appupdate changes a running application — container image, autoscaler bounds and
//! the routes built from an endpoints file — safely.
//!
//! This crate is the shell around the pure crates: [`appupdate_model`] (kinds, changes, views,
//! names, the endpoints file), [`appupdate_plan`] (route styles, planning, plan files, history
//! records, undo) and [`appupdate_render`] (the diff); none of them does I/O. The pipeline: command-line flags and the environment
//! become [`settings::Settings`]; the kubeconfig gives a client ([`appupdate_kube::kube_context`]); the live
//! objects are read in one concurrent round ([`live_state`]); the core's planners turn the
//! requested updates and the live state into a plan, which is rendered and confirmed
//! ([`confirm`]); then [`apply`] validates every change with a server-side dry run and writes
//! each one conditionally, retrying conflicts under the approved-diff guard; with `--wait`,
//! [`wait`] then follows the Deployment's rollout and the routes written. [`run`] strings these
//! together, for one cluster or several — a single cluster is a fleet of one, planned by
//! [`planning`] and written by [`writing`], told as one cluster or as a fleet ([`telling`]; [`fleet`]: how
//! each cluster ended) — and decides what a signal ([`signals`]) does at each stage. One place decides
//! each of the run's outward choices: [`streams`] which stream every line goes to, [`exit`] the
//! exit code of every way a run can end ([`error`] holds the failures). [`completion`] answers
//! kubectl's plugin completion (`kubectl_complete-appupdate`) from the same flag definitions.
pub(crate) mod apply;
pub mod cli;
pub(crate) mod completion;
pub(crate) mod confirm;
pub(crate) mod error;
pub(crate) mod exit;
pub(crate) mod fleet;
pub(crate) mod fleet_progress;
pub(crate) mod history_store;
pub(crate) mod image_check;
pub(crate) mod live_state;
pub mod open_files;
pub(crate) mod plan_sources;
pub(crate) mod planning;
pub(crate) mod put_back;
pub(crate) mod run;
pub mod settings;
pub(crate) mod signals;
pub(crate) mod streams;
pub(crate) mod telling;
pub(crate) mod terminal;
pub(crate) mod wait;
pub(crate) mod writing;

use std::ffi::OsString;

use clap::CommandFactory;

use crate::cli::{Cli, Command, OutputFormat};
use crate::error::AppError;
use crate::exit::{Ending, exit_code};
use crate::settings::{Environment, RealFiles, Settings, decide_color};
use crate::streams::{Kind, Streams};

/// The whole program: parses `args`, runs, says how the run ended, returns the exit code.
pub fn main_with_args<I: IntoIterator<Item = OsString>>(args: I) -> i32 {
    let args: Vec<OsString> = args.into_iter().collect();
    let env = Environment::capture();
    // kubectl's plugin completion, through the kubectl_complete-appupdate helper.
    if args.get(1).is_some_and(|a| a == completion::ENTRY) {
        completion::main(args[2..].to_vec(), &env, &mut std::io::stdout().lock());
        return exit_code(&Ending::Done).code();
    }
    let (ending, streams) = run_to_end(args, &env);
    streams.ending(&ending);
    exit_code(&ending).code()
}

/// Everything up to the end of the run, and the streams its ending is told on.
fn run_to_end(args: Vec<OsString>, env: &Environment) -> (Ending, Streams) {
    let streams_before_flags = |color| {
        Streams::new(
            OutputFormat::Diff,
            decide_color(color, env, env.stdout_is_terminal),
            decide_color(color, env, env.stderr_is_terminal),
        )
    };
    let cli = match Cli::try_parse_args(args) {
        Ok(cli) => cli,
        Err(e) => {
            let streams = streams_before_flags(cli::ColorChoice::Auto);
            return (Ending::Failed(e.into()), streams);
        }
    };
    let streams = streams_before_flags(cli.update.run.color);
    let settings = match cli.command {
        Some(Command::Completion { shell }) => {
            return (completion_script(shell, &streams), streams);
        }
        Some(Command::History(args)) => {
            let streams = streams_before_flags(args.color);
            return match settings::HistorySettings::resolve(
                args,
                cli.update.cluster,
                env,
                &RealFiles,
            ) {
                Ok(s) => {
                    let streams =
                        Streams::new(OutputFormat::Diff, s.color, streams.color(Kind::Error));
                    let ending = with_runtime(|rt| rt.block_on(run::history(&s, &streams)));
                    (ending, streams)
                }
                Err(e) => (Ending::Failed(e.into()), streams),
            };
        }
        Some(Command::Apply(args)) => {
            let streams = streams_before_flags(args.run.color);
            match Settings::resolve_apply(*args, cli.update.cluster, env, &RealFiles) {
                Ok(s) => s,
                Err(e) => return (Ending::Failed(e.into()), streams),
            }
        }
        None => match Settings::resolve(cli.update, env, &RealFiles) {
            Ok(s) => s,
            Err(e) => return (Ending::Failed(e.into()), streams),
        },
    };
    let streams = Streams::new(settings.output, settings.color, settings.color_stderr);
    let ending = with_runtime(|rt| rt.block_on(async { run::run(&settings, &streams).await }));
    (ending, streams)
}

/// Runs `f` on a current-thread runtime.
fn with_runtime(f: impl FnOnce(&tokio::runtime::Runtime) -> Ending) -> Ending {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return Ending::Failed(AppError::Runtime(e)),
    };
    let ending = f(&runtime);
    // A prompt that a signal interrupted is still blocked reading the terminal, on a thread
    // of its own: the process ends without waiting for it.
    runtime.shutdown_background();
    ending
}

/// `completion bash|zsh|…`: the script on stdout.
fn completion_script(shell: clap_complete::Shell, streams: &Streams) -> Ending {
    // Into a buffer first: clap_complete panics on a failed write (`… | head`).
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "kubectl-appupdate", &mut script);
    match streams.write(Kind::Plan, &script) {
        Ok(()) => Ending::Done,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ending::Done,
        Err(e) => Ending::Failed(AppError::Output(e)),
    }
}
