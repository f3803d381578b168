//! The run, start to finish: connect, read, plan, show, confirm, apply, report.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::apply::{self, ApplyOptions, InterruptFlag};
use crate::cli::OutputFormat;
use crate::cluster::Cluster;
use crate::confirm::{self, Answer};
use crate::diff_render::{self, RenderOptions};
use crate::error::{AppError, ExitCode};
use crate::kube_context;
use crate::live_state;
use crate::output;
use crate::planner::{self, UpdateRequest};
use crate::report::{self, Interruption, Outcome};
use crate::settings::Settings;
use crate::wait::{self, WaitTarget};

/// Where the run is, for the signal handler: before writes a signal ends the run at once
/// (nothing changed); while writing, the run stops starting new requests and reports; while
/// following a rollout (the writes are done), it only stops waiting.
#[derive(Clone, Default)]
struct Stage(Arc<AtomicU8>);

impl Stage {
    const PLANNING: u8 = 0;
    const WRITING: u8 = 1;
    const WAITING: u8 = 2;

    fn set(&self, stage: u8) {
        self.0.store(stage, Ordering::SeqCst);
    }

    fn get(&self) -> u8 {
        self.0.load(Ordering::SeqCst)
    }
}

fn install_signal_handlers(flag: InterruptFlag, stage: Stage) -> Arc<tokio::sync::Notify> {
    let notify = Arc::new(tokio::sync::Notify::new());
    let n = notify.clone();
    tokio::spawn(async move {
        #[cfg(unix)]
        use tokio::signal::unix::{SignalKind, signal};
        #[cfg(unix)]
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return;
        };
        // Windows: Ctrl-C stands for SIGINT and Ctrl-Break for SIGTERM.
        #[cfg(windows)]
        let (Ok(mut int), Ok(mut term)) = (
            tokio::signal::windows::ctrl_c(),
            tokio::signal::windows::ctrl_break(),
        ) else {
            return;
        };
        let mut count = 0;
        loop {
            let which = tokio::select! {
                _ = int.recv() => Interruption::Sigint,
                _ = term.recv() => Interruption::Sigterm,
            };
            count += 1;
            flag.raise(which);
            let code = match which {
                Interruption::Sigint => ExitCode::Interrupted,
                Interruption::Sigterm => ExitCode::Terminated,
            };
            if stage.get() == Stage::PLANNING {
                let _ = console::Term::stderr().show_cursor();
                crate::restore_terminal();
                #[allow(clippy::print_stderr)]
                {
                    eprintln!("\ninterrupted: nothing was changed");
                }
                std::process::exit(code.code());
            }
            if count >= 2 {
                #[allow(clippy::print_stderr)]
                {
                    eprintln!(
                        "\ninterrupted again: exiting now; requests already sent may or may not have been applied — run again to see the state"
                    );
                }
                std::process::exit(code.code());
            }
            if stage.get() == Stage::WRITING {
                #[allow(clippy::print_stderr)]
                {
                    eprintln!(
                        "\ninterrupt received: finishing the requests in flight, starting no new ones (interrupt again to exit at once)"
                    );
                }
            }
            n.notify_one();
        }
    });
    notify
}

/// Runs the update described by `settings`; returns the exit code, or an error to print.
pub async fn run(settings: Settings) -> Result<ExitCode, AppError> {
    let interrupt = InterruptFlag::default();
    let stage = Stage::default();
    let notify = install_signal_handlers(interrupt.clone(), stage.clone());

    let conn = kube_context::connect(&settings.cluster).await?;
    if settings.verbose > 0
        && let Some(proxy) = &conn.proxy
    {
        #[allow(clippy::print_stderr)]
        {
            eprintln!("  via proxy {proxy}");
        }
    }
    let cluster = Cluster::new(conn, settings.verbose > 0);

    let request = UpdateRequest {
        app: &settings.app,
        namespace: cluster.namespace(),
        context: &cluster.conn.context,
        container: settings.container.as_deref(),
        container_update: &settings.container_update,
        autoscaler_update: &settings.autoscaler_update,
        endpoints: settings.endpoints.as_ref().map(|e| &e.file),
    };
    let live = live_state::read(&cluster, &settings.app, request.needs()).await?;
    let plan = planner::build_plan(&request, &live).map_err(|e| AppError::Plan(e.to_string()))?;

    let mut stdout = std::io::stdout().lock();
    match settings.output {
        OutputFormat::Diff => {
            let opts = RenderOptions {
                color: settings.color,
                ..RenderOptions::default()
            };
            diff_render::render_plan(&mut stdout, &plan, &opts)?;
        }
        OutputFormat::Json => output::write_json(&mut stdout, &plan)?,
        OutputFormat::Yaml => output::write_yaml(&mut stdout, &plan)?,
    }
    stdout.flush()?;
    drop(stdout);

    if !plan.has_changes() {
        // `--wait` re-run after a timeout: nothing to write, but the rollout may still be going.
        if settings.wait && !settings.dry_run {
            stage.set(Stage::WAITING);
            follow_rollout(&cluster, &settings, &notify, &interrupt).await?;
        }
        return Ok(ExitCode::Ok);
    }
    if settings.dry_run {
        return Ok(if settings.detailed_exitcode {
            ExitCode::Changes
        } else {
            ExitCode::Ok
        });
    }
    if !settings.yes {
        if !settings.can_prompt {
            return Err(AppError::NotConfirmed(
                "not applied: there is no terminal to ask for confirmation; pass --yes to apply without asking (nothing was changed)".into(),
            ));
        }
        let summary = plan.summary();
        let question = format!(
            "Apply these changes to {} in namespace {} (context {})? {} to create, {} to update, {} to delete",
            plan.app, plan.namespace, plan.context, summary.create, summary.update, summary.delete
        );
        let color = settings.color_stderr;
        let answer = tokio::task::spawn_blocking(move || confirm::ask(&question, color))
            .await
            .map_err(|e| AppError::NotConfirmed(format!("the confirmation prompt failed: {e}")))?
            .map_err(|e| AppError::NotConfirmed(format!("cannot ask for confirmation: {e}")))?;
        match answer {
            Answer::Yes => {}
            Answer::No => {
                return Err(AppError::NotConfirmed(
                    "not applied: the changes were not confirmed (nothing was changed)".into(),
                ));
            }
            Answer::Interrupted => {
                return Err(AppError::Interrupted(
                    "interrupted: nothing was changed".into(),
                    ExitCode::Interrupted,
                ));
            }
        }
    }

    stage.set(Stage::WRITING);
    let opts = ApplyOptions {
        tries: settings.retries,
        ..ApplyOptions::default()
    };
    let report = apply::apply(&cluster, &plan, opts, &interrupt).await;

    // With -o json|yaml, stdout carries exactly one document (the plan); the report goes to
    // stderr with the other notices.
    let mut stdout: Box<dyn Write> = match settings.output {
        OutputFormat::Diff => Box::new(std::io::stdout().lock()),
        OutputFormat::Json | OutputFormat::Yaml => Box::new(std::io::stderr().lock()),
    };
    let color = match settings.output {
        OutputFormat::Diff => settings.color,
        OutputFormat::Json | OutputFormat::Yaml => settings.color_stderr,
    };
    for (_, outcome) in &report.entries {
        if let Outcome::Tripped {
            fresh: Some(fresh), ..
        } = outcome
        {
            writeln!(
                stdout,
                "The live object changed after the plan was shown. This is what would change now (not applied):"
            )?;
            let opts = RenderOptions {
                color,
                ..RenderOptions::default()
            };
            diff_render::render_change(&mut stdout, fresh, &opts)?;
        }
    }
    report::render_report(&mut stdout, &report, color)?;
    stdout.flush()?;
    drop(stdout);
    let code = report.exit_code();
    if code == ExitCode::Ok && settings.wait {
        stage.set(Stage::WAITING);
        follow_rollout(&cluster, &settings, &notify, &interrupt).await?;
    }
    Ok(code)
}

/// `--wait`: follows the Deployment's rollout on stderr (a bar on a terminal, plain lines
/// otherwise) until it completes, fails or `--timeout` (0: no bound) runs out. The writes have
/// landed by now, so every failure here is [`AppError::Rollout`] (its own exit code), and an
/// interrupt only stops the waiting.
async fn follow_rollout(
    cluster: &Cluster,
    settings: &Settings,
    notify: &tokio::sync::Notify,
    interrupt: &InterruptFlag,
) -> Result<(), AppError> {
    let target = WaitTarget {
        namespace: cluster.namespace().to_owned(),
        name: settings.app.clone(),
        context: cluster.conn.context.clone(),
    };
    let timeout = Some(settings.wait_timeout).filter(|t| !t.is_zero());
    let mut progress: Box<dyn wait::Progress> = if settings.stderr_is_terminal {
        Box::new(wait::Bar::new(&target.reference(), settings.color_stderr))
    } else {
        Box::new(wait::Lines::new(
            std::io::stderr(),
            &target.reference(),
            settings.color_stderr,
        ))
    };
    let followed = wait::follow(
        cluster.conn.client.clone(),
        &target,
        timeout,
        cluster.conn.request_timeout,
        progress.as_mut(),
    );
    tokio::select! {
        result = followed => result.map(|_| ()).map_err(|e| AppError::Rollout(e.to_string())),
        () = notify.notified() => {
            let code = match interrupt.get() {
                Some(Interruption::Sigterm) => ExitCode::Terminated,
                _ => ExitCode::Interrupted,
            };
            Err(AppError::Interrupted(
                format!(
                    "stopped waiting: the changes were applied and the rollout goes on (kubectl rollout status deployment/{} -n {})",
                    target.name, target.namespace
                ),
                code,
            ))
        }
    }
}
