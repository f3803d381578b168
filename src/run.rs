//! The run, start to finish: connect, read, plan, show, confirm, apply, report, wait — and
//! what a signal does at each stage.
//!
//! Until the first write, a signal ends the run at once: nothing was changed. While writing,
//! the first signal stops new requests from starting (the ones in flight finish and are
//! reported) and a second one ends the run at once. While following a rollout, a signal only
//! stops the waiting: the writes are done.

use crate::apply::{self, ApplyOptions, InterruptFlag};
use crate::cluster::Cluster;
use crate::confirm::{self, Answer, NotConfirmed};
use crate::error::{AppError, Stage};
use crate::exit::Ending;
use crate::kube_context;
use crate::live_state;
use crate::plan::Plan;
use crate::planner::{self, UpdateRequest};
use crate::report::{Interruption, Report};
use crate::settings::Settings;
use crate::signals::Signals;
use crate::streams::{self, Streams};
use crate::wait::{self, WaitTarget};

/// What follows the plan being shown.
enum Next {
    /// Nothing: nothing to change, or a dry run.
    Stop(Ending),
    /// Nothing to write, but `--wait` follows the rollout (a re-run after a timeout).
    Wait(Cluster),
    /// Write the confirmed plan.
    Apply(Cluster, Plan),
}

/// Runs the update described by `settings`; says how it ended. Everything it prints goes
/// through `streams`, except the reason it failed: that is the caller's to print.
pub async fn run(settings: &Settings, streams: &Streams) -> Ending {
    let mut signals = Signals::listen();
    let next = tokio::select! {
        next = plan(settings, streams) => next,
        signal = signals.recv() => {
            // The prompt may be showing: it leaves the terminal raw and the cursor hidden.
            if settings.stderr_is_terminal {
                crate::terminal::restore();
                let _ = console::Term::stderr().show_cursor();
            }
            Err(AppError::Interrupted { signal, stage: Stage::Planning })
        }
    };
    match next {
        Err(e) => Ending::Failed(e),
        Ok(Next::Stop(ending)) => ending,
        Ok(Next::Wait(cluster)) => {
            match follow_rollout(&cluster, settings, &mut signals, streams).await {
                Ok(()) => Ending::Done,
                Err(e) => Ending::Failed(e),
            }
        }
        Ok(Next::Apply(cluster, plan)) => {
            let report = match write(&cluster, &plan, settings, &mut signals).await {
                Ok(report) => report,
                Err(e) => return Ending::Failed(e),
            };
            // The writes are done: a report that cannot be shown (say, stdout closed) does not
            // change what the exit code must say about them.
            let _ = streams.report(&report);
            if settings.wait
                && report.went_as_planned()
                && let Err(e) = follow_rollout(&cluster, settings, &mut signals, streams).await
            {
                return Ending::Failed(e);
            }
            Ending::Applied(report)
        }
    }
}

/// Connects, reads, plans, shows the plan and asks for confirmation. Writes nothing.
async fn plan(settings: &Settings, streams: &Streams) -> Result<Next, AppError> {
    let conn = kube_context::connect(&settings.cluster).await?;
    // -v: the proxy and every request, as notices.
    let log = (settings.verbose > 0).then_some(streams::notice as fn(&str));
    if let (Some(log), Some(proxy)) = (log, &conn.proxy) {
        log(&format!("  via proxy {proxy}"));
    }
    let cluster = Cluster::new(conn, log);

    let request = UpdateRequest {
        app: &settings.app,
        namespace: cluster.namespace(),
        context: &cluster.conn.context,
        container: settings.container.as_deref(),
        container_update: &settings.container_update,
        autoscaler_update: &settings.autoscaler_update,
        endpoints: settings.endpoints.as_ref().map(|e| &e.file),
        routes: &settings.routes,
    };
    let mut live = live_state::read(&cluster, &settings.app, request.needs()).await?;
    if request.needs_ingress_classes(&live) {
        live.ingress_classes = Some(live_state::read_ingress_classes(&cluster).await?);
    }
    let plan = planner::build_plan(&request, &live)?;
    streams.plan(&plan)?;

    if !plan.has_changes() {
        return Ok(if settings.wait && !settings.dry_run {
            Next::Wait(cluster)
        } else {
            Next::Stop(Ending::Done)
        });
    }
    if settings.dry_run {
        return Ok(Next::Stop(if settings.detailed_exitcode {
            Ending::ChangesPending
        } else {
            Ending::Done
        }));
    }
    if !settings.yes {
        confirmed(&plan, settings).await?;
    }
    Ok(Next::Apply(cluster, plan))
}

/// Asks on the terminal; `Ok` only for a yes.
async fn confirmed(plan: &Plan, settings: &Settings) -> Result<(), AppError> {
    if !settings.can_prompt {
        return Err(NotConfirmed::NoTerminal.into());
    }
    let summary = plan.summary();
    let question = format!(
        "Apply these changes to {} in namespace {} (context {})? {} to create, {} to update, {} to delete",
        plan.app, plan.namespace, plan.context, summary.create, summary.update, summary.delete
    );
    let color = settings.color_stderr;
    let answer = tokio::task::spawn_blocking(move || confirm::ask(&question, color))
        .await
        .map_err(NotConfirmed::PromptTask)?
        .map_err(NotConfirmed::Prompt)?;
    match answer {
        Answer::Yes => Ok(()),
        Answer::No => Err(NotConfirmed::Declined.into()),
        // Ctrl-C typed at the prompt (the terminal is raw: it is a key, not a signal).
        Answer::Interrupted => Err(AppError::Interrupted {
            signal: Interruption::Sigint,
            stage: Stage::Planning,
        }),
    }
}

/// Applies the plan: the server-side dry run, then the writes in rounds.
async fn write(
    cluster: &Cluster,
    plan: &Plan,
    settings: &Settings,
    signals: &mut Signals,
) -> Result<Report, AppError> {
    let interrupt = InterruptFlag::default();
    let opts = ApplyOptions {
        tries: settings.retries,
        ..ApplyOptions::default()
    };
    let applying = apply::apply(cluster, plan, opts, &interrupt);
    tokio::pin!(applying);
    loop {
        tokio::select! {
            report = &mut applying => return Ok(report),
            signal = signals.recv() => {
                if interrupt.raise(signal) {
                    streams::notice(
                        "\ninterrupt received: finishing the requests in flight, starting no new ones (interrupt again to exit at once)",
                    );
                } else {
                    return Err(AppError::Interrupted { signal, stage: Stage::Writing });
                }
            }
        }
    }
}

/// `--wait`: follows the Deployment's rollout on stderr (a bar on a terminal, plain lines
/// otherwise) until it completes, fails or `--timeout` (0: no bound) runs out. The writes have
/// landed by now, so every failure here is [`AppError::Rollout`] (its own exit code), and a
/// signal only stops the waiting.
async fn follow_rollout(
    cluster: &Cluster,
    settings: &Settings,
    signals: &mut Signals,
    streams: &Streams,
) -> Result<(), AppError> {
    let target = WaitTarget {
        namespace: cluster.namespace().to_owned(),
        name: settings.app.clone(),
        context: cluster.conn.context.clone(),
    };
    let timeout = Some(settings.wait_timeout).filter(|t| !t.is_zero());
    let color = streams.color(streams::Kind::Notice);
    let mut progress: Box<dyn wait::Progress> = if settings.stderr_is_terminal {
        Box::new(wait::Bar::new(&target.reference(), color))
    } else {
        Box::new(wait::Lines::new(
            streams.writer(streams::Kind::Notice),
            &target.reference(),
            color,
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
        result = followed => result.map(|_| ()).map_err(AppError::Rollout),
        signal = signals.recv() => Err(AppError::Interrupted {
            signal,
            stage: Stage::Waiting { name: target.name.clone(), namespace: target.namespace.clone() },
        }),
    }
}
