//! kubectl-appupdate changes a running application — container image, autoscaler bounds and
//! the Ingresses built from an endpoints file — safely.
//!
//! The pipeline: command-line flags and the environment become [`settings::Settings`]; the
//! kubeconfig gives a client ([`kube_context`]); the live objects are read in one concurrent
//! round ([`live_state`]); pure planners ([`planner`], [`updaters`], [`ingress_planner`]) turn
//! the requested updates and the live state into a [`plan::Plan`]; the plan is rendered
//! ([`diff_render`], [`output`]) and confirmed ([`confirm`]); then [`apply`] validates every change
//! with a server-side dry run and writes each one conditionally, retrying conflicts under the
//! approved-diff guard, and [`report`] says what happened to each object; with `--wait`,
//! [`wait`] then follows the Deployment's rollout. [`completion`] answers kubectl's plugin
//! completion (`kubectl_complete-appupdate`) from the same flag definitions.
pub mod apply;
pub mod cli;
pub mod cluster;
pub mod completion;
pub mod confirm;
pub mod diff_render;
pub mod endpoints_file;
pub mod error;
pub mod ingress_planner;
pub mod kube_context;
pub mod live_state;
pub mod output;
pub mod plan;
pub mod planner;
pub mod proxy;
pub mod proxy_connector;
pub mod report;
pub mod run;
pub mod settings;
pub mod terminal;
pub mod updaters;
pub mod wait;

use std::ffi::OsString;

use clap::CommandFactory;
use clap::error::ErrorKind;

use crate::cli::{Cli, Command};
use crate::error::{AppError, ExitCode};
use crate::settings::{Environment, RealFiles, Settings};

/// Puts the terminal back the way it was if a prompt was interrupted.
pub(crate) fn restore_terminal() {
    terminal::restore();
}

fn print_error(err: &AppError, color: bool) {
    let prefix = if color {
        console::style("error:")
            .red()
            .bold()
            .force_styling(true)
            .to_string()
    } else {
        "error:".to_owned()
    };
    #[allow(clippy::print_stderr)]
    {
        eprintln!("{prefix} {err}");
    }
}

/// The whole program: parses `args`, runs, prints errors, returns the exit code.
pub fn main_with_args<I: IntoIterator<Item = OsString>>(args: I) -> i32 {
    let args: Vec<OsString> = args.into_iter().collect();
    // kubectl's plugin completion, through the kubectl_complete-appupdate helper.
    if args.get(1).is_some_and(|a| a == completion::ENTRY) {
        let env = Environment::capture();
        return completion::main(args[2..].to_vec(), &env, &mut std::io::stdout().lock());
    }
    let cli = match Cli::try_parse_args(args) {
        Ok(cli) => cli,
        Err(e) => {
            let code = match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => ExitCode::Ok,
                _ => ExitCode::Usage,
            };
            let _ = e.print();
            return code.code();
        }
    };
    if let Some(Command::Completion { shell }) = cli.command {
        // Into a buffer first: clap_complete panics on a failed write (`… | head`).
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut Cli::command(), "kubectl-appupdate", &mut script);
        let mut stdout = std::io::stdout().lock();
        return match std::io::Write::write_all(&mut stdout, &script)
            .and_then(|()| std::io::Write::flush(&mut stdout))
        {
            Ok(()) => ExitCode::Ok.code(),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::Ok.code(),
            Err(e) => {
                print_error(&AppError::Output(e), false);
                ExitCode::Failed.code()
            }
        };
    }

    let env = Environment::capture();
    let settings = match Settings::resolve(cli.update, &env, &RealFiles) {
        Ok(s) => s,
        Err(e) => {
            print_error(
                &e,
                settings::decide_color(cli::ColorChoice::Auto, &env, env.stderr_is_terminal),
            );
            return e.exit_code().code();
        }
    };
    let color_stderr = settings.color_stderr;
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            print_error(
                &AppError::Cluster(format!("cannot start: {e}")),
                color_stderr,
            );
            return ExitCode::Failed.code();
        }
    };
    match runtime.block_on(run::run(settings)) {
        Ok(code) => code.code(),
        Err(AppError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            ExitCode::Failed.code()
        }
        Err(e) => {
            print_error(&e, color_stderr);
            e.exit_code().code()
        }
    }
}
