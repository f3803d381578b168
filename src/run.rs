//! The run, start to finish: connect, read, plan, show, confirm, apply, report, wait — and
//! what a signal does at each stage.
//!
//! Until the first write, a signal ends the run at once: nothing was changed. While writing,
//! the first signal stops new requests from starting (the ones in flight finish and are
//! reported) and a second one ends the run at once. While following the rollout and the routes
//! (`--wait`), a signal only stops the waiting: the writes are done.

use crate::apply::{self, ApplyOptions, InterruptFlag};
use std::sync::Arc;

use crate::confirm::{self, Answer, NotConfirmed};
use crate::error::{AppError, Stage};
use crate::exit::Ending;
use crate::history_store;
use crate::plan_sources::{self, Sourced};
use crate::settings::{HistorySettings, Mode, Settings};
use crate::signals::Signals;
use crate::streams::{self, Streams};
use crate::verify::{self, Probe};
use crate::verify_send;
use crate::wait::{self, Followed, WaitTarget};
use appupdate_kube::cluster::{Cluster, RequestLog};
use appupdate_kube::kube_context;
use appupdate_kube::kube_context::Connection;
use appupdate_model::plan::Plan;
use appupdate_model::report::{Interruption, Report};
use appupdate_model::text::Untrusted;
use appupdate_plan::history;
use appupdate_plan::history::Source;
use appupdate_plan::plan_file::{self, ClusterPlan, Origin, PlanKey};
use appupdate_plan::planner::{self, UpdateRequest};

/// What follows the plan being shown.
enum Next {
    /// Nothing: nothing to change, or a dry run.
    Stop(Ending),
    /// Nothing to write, but `--wait` follows the rollout and the routes (a re-run after a
    /// timeout), or `--verify-url` checks these requests.
    Wait(Cluster, Followed, Option<Vec<Probe>>),
    /// Write the confirmed plan.
    Apply(Cluster, Box<Sourced>),
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
        Ok(Next::Wait(cluster, followed, probes)) => {
            let rollout = if settings.wait {
                follow_written(&cluster, &followed, settings, &mut signals, streams).await
            } else {
                Ok(())
            };
            let afterwards = verify::Afterwards::NothingChanged;
            match verified(rollout, probes, afterwards, settings, &mut signals, streams).await {
                Ok(()) => Ending::Done,
                Err(e) => Ending::Failed(e),
            }
        }
        Ok(Next::Apply(cluster, sourced)) => {
            let probes = settings
                .verify
                .as_ref()
                .map(|_| verify::probes(&sourced.plan));
            let (report, recorded) = match write(&cluster, *sourced, settings, &mut signals).await {
                Ok(done) => done,
                Err(e) => return Ending::Failed(e),
            };
            // The writes are done: a report that cannot be shown (say, stdout closed) does not
            // change what the exit code must say about them.
            let _ = streams.report(&report);
            let _ = streams.recorded(&recorded);
            if !report.went_as_planned() {
                return Ending::Applied(report);
            }
            let rollout = if settings.wait {
                let image = settings.changes_image();
                let followed = Followed::after_writes(&report, image);
                follow_written(&cluster, &followed, settings, &mut signals, streams).await
            } else {
                Ok(())
            };
            let afterwards = match &recorded {
                history_store::Recorded::Revision { .. } => verify::Afterwards::Undo(
                    verify::undo_command(&settings.app, cluster.namespace(), &cluster.conn.context),
                ),
                _ => verify::Afterwards::NotRecorded,
            };
            match verified(rollout, probes, afterwards, settings, &mut signals, streams).await {
                Ok(()) => Ending::Applied(report),
                Err(e) => Ending::Failed(e),
            }
        }
    }
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
    let (Some(probes), Some(verify)) = (probes, &settings.verify) else {
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
        answers = verify_send::send_all(&probes, verify) => answers,
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

/// Connects, reads, plans, shows the plan and asks for confirmation. Writes nothing.
async fn plan(settings: &Settings, streams: &Streams) -> Result<Next, AppError> {
    let conn = kube_context::connect(&settings.cluster, streams::warning).await?;
    // -v: the proxy and every request, as notices.
    let cluster = connected(conn, settings.verbose, None);

    let saved = match settings.saved() {
        Some(saved) => Some(plan_sources::saved_target(
            saved,
            &cluster.conn,
            settings.cluster.context.as_deref(),
            k8s_openapi::jiff::Timestamp::now(),
        )?),
        None => None,
    };
    // Every way out of here but the writes ends the process: the plan and the live objects are
    // not freed on those (the system takes the memory back at once, where freeing thousands of
    // objects value by value costs about as much CPU as building them did).
    let mut sourced = source(settings, &cluster, saved).await?;
    if sourced.saved_plan {
        // What is shown is what is written: every object re-read and re-planned by its updater
        // under the guard, before the plan is shown.
        match plan_sources::recheck_saved(&cluster, sourced.plan).await? {
            Ok(rebased) => sourced.plan = rebased,
            Err(refused) => {
                let _ = streams.report(&refused);
                return Ok(Next::Stop(Ending::Applied(refused)));
            }
        }
    }
    let sourced = std::mem::ManuallyDrop::new(sourced);
    let plan = &sourced.plan;
    streams.plan(plan)?;
    if let Some(message) = &sourced.refusal {
        return Err(AppError::UndoRefused {
            message: message.clone(),
        });
    }
    if let Some(save) = settings.save() {
        save_plans(&save.path, &[(&sourced, &cluster)], &[], save.key.as_ref())?;
        let shown = appupdate_model::text::Untrusted(save.path.display().to_string());
        streams::notice(&format!(
            "Saved the plan to {shown}{}; apply it with: kubectl appupdate apply {shown}",
            signed_with(save.key.as_ref())
        ));
        return Ok(Next::Stop(
            if settings.detailed_exitcode && plan.has_changes() {
                Ending::ChangesPending
            } else {
                Ending::Done
            },
        ));
    }

    if !plan.has_changes() {
        let probes = settings.verify.as_ref().map(|_| verify::probes(plan));
        return Ok(
            if (settings.wait || probes.is_some()) && !settings.dry_run {
                let image = settings.changes_image();
                Next::Wait(cluster, Followed::without_writes(plan, image), probes)
            } else {
                Next::Stop(Ending::Done)
            },
        );
    }
    if settings.dry_run {
        return Ok(Next::Stop(if settings.detailed_exitcode {
            Ending::ChangesPending
        } else {
            Ending::Done
        }));
    }
    if !settings.yes {
        confirmed(plan, settings).await?;
    }
    let mut sourced = std::mem::ManuallyDrop::into_inner(sourced);
    // The writes do not need the live objects as read: planning is over.
    sourced.live = None;
    Ok(Next::Apply(cluster, Box::new(sourced)))
}

/// The plan for `cluster`: `saved`'s (the plan file's entry for this cluster), the undo's,
/// or the flags' against the live objects.
pub(crate) async fn source(
    settings: &Settings,
    cluster: &Cluster,
    saved: Option<ClusterPlan>,
) -> Result<Sourced, AppError> {
    if let Some(target) = saved {
        let checksum = settings
            .saved()
            .map(|s| s.file.checksum.clone())
            .unwrap_or_default();
        let app = target.plan.app.clone();
        let cm = history_store::read(cluster, &app).await?;
        let stored = history::History::from_config_map(cm.as_ref(), &app);
        let applied = plan_sources::applied_by(&stored, &checksum);
        let mut plan = target.plan;
        match (applied, &settings.fleet) {
            // A run over several clusters that stopped after a wave, or failed in one: this
            // cluster is done, the run carries on with the others.
            (Some(_), Some(_)) => plan.objects.clear(),
            (Some(revision), None) => {
                let name = settings
                    .saved()
                    .map(|s| s.name.as_str())
                    .unwrap_or("the plan");
                return Err(AppError::UndoRefused {
                    message: format!(
                        "{} was applied already: revision {revision} of {} in namespace {} (context {}) applied it; a saved plan is applied once, so nothing was sent; make a new plan with --plan-out",
                        Untrusted(name),
                        Untrusted(&app),
                        Untrusted(cluster.namespace()),
                        Untrusted(&cluster.conn.context)
                    ),
                });
            }
            (None, _) => {}
        }
        return Ok(Sourced {
            plan,
            source: target.source,
            saved_plan: true,
            config_map: Some(cm),
            refusal: None,
            live: None,
            plan_checksum: Some(checksum),
            already_applied: applied,
            fleet_run: None,
            left_alone: false,
        });
    }
    let changes = match &settings.mode {
        Mode::Update { changes, .. } => changes,
        Mode::Undo { request, .. } => {
            return plan_sources::undo(cluster, &settings.app, request, settings.history_max > 0)
                .await;
        }
        Mode::Apply(saved) => {
            // Every cluster of a saved plan has its entry; a context it has none for was
            // refused when the targets were matched.
            return Err(AppError::UndoRefused {
                message: format!("{} holds no plan for this cluster", Untrusted(&saved.name)),
            });
        }
    };
    let request = UpdateRequest {
        app: &settings.app,
        namespace: cluster.namespace(),
        context: &cluster.conn.context,
        container: changes.container.as_deref(),
        container_update: &changes.container_update,
        autoscaler_update: &changes.autoscaler_update,
        endpoints: changes.endpoints.as_ref().map(|e| &e.file),
        routes: &changes.routes,
        undo_of: None,
    };
    let mut needs = request.needs();
    // An image change names the revision its record is planned to get.
    needs.history = needs.deployment && settings.history_max > 0;
    let mut live = plan_sources::read_live(cluster, &request, needs).await?;
    let plan = planner::build_plan(&request, &mut live)?;
    Ok(Sourced {
        plan,
        source: Source::Update,
        saved_plan: false,
        // Recording adds to the history as read here (and reads it only if it was not).
        config_map: live.history.take(),
        refusal: None,
        live: Some(live),
        plan_checksum: None,
        already_applied: None,
        fleet_run: None,
        left_alone: false,
    })
}

/// The cluster of `conn`; with `-v`, the proxy and every request as notices, each line behind
/// `prefix` when given (a fleet names the context).
pub(crate) fn connected(conn: Connection, verbose: u8, prefix: Option<String>) -> Cluster {
    let log: Option<RequestLog> = (verbose > 0).then(|| -> RequestLog {
        match prefix {
            Some(prefix) => Arc::new(move |line: &str| streams::notice(&format!("{prefix}{line}"))),
            None => Arc::new(streams::notice),
        }
    });
    if let (Some(log), Some(proxy)) = (&log, &conn.proxy) {
        log(&format!("  via proxy {}", Untrusted(proxy)));
    }
    Cluster::new(conn, log)
}

/// `--plan-out` of a run over one cluster or several: each cluster's plan and where it was
/// computed, as one file, signed with `key` when given.
pub(crate) fn save_plans(
    path: &std::path::Path,
    plans: &[(&Sourced, &Cluster)],
    waves: &[Vec<String>],
    key: Option<&PlanKey>,
) -> Result<(), AppError> {
    let created_at = k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now())
        .to_string();
    let origins: Vec<Origin> = plans
        .iter()
        .map(|(_, cluster)| Origin {
            context: cluster.conn.context.clone(),
            server: cluster.conn.server.clone(),
            created_at: created_at.clone(),
        })
        .collect();
    let entries: Vec<(&Plan, &Origin, &Source)> = plans
        .iter()
        .zip(&origins)
        .map(|((sourced, _), origin)| (&sourced.plan, origin, &sourced.source))
        .collect();
    let text = plan_file::render_in_waves(&entries, waves, key)?;
    std::fs::write(path, text).map_err(|source| AppError::PlanOut {
        file: path.display().to_string(),
        source,
    })
}

/// What the notice of a saved plan says about its signature: `, signed with --sign-key KEYFILE`
/// (the key's file, never the key), or nothing.
pub(crate) fn signed_with(key: Option<&PlanKey>) -> String {
    key.map(|k| format!(", signed with {}", k.named()))
        .unwrap_or_default()
}

/// Asks on the terminal; `Ok` only for a yes.
async fn confirmed(plan: &Plan, settings: &Settings) -> Result<(), AppError> {
    if !settings.can_prompt {
        return Err(NotConfirmed::NoTerminal.into());
    }
    let summary = plan.summary();
    // The names in it are escaped here.
    let what = format!(
        "Apply these changes to {} in namespace {} (context {}): {} to create, {} to update, {} to delete.",
        Untrusted(&plan.app),
        Untrusted(&plan.namespace),
        Untrusted(&plan.context),
        summary.create,
        summary.update,
        summary.delete
    );
    ask(what, settings).await
}

/// Says `what` (escaped) on a line of its own, then asks on the terminal whether to apply it,
/// in a question that fits the terminal's width (dialoguer draws a question that wraps once
/// per line it takes); `Ok` only for a yes.
pub(crate) async fn ask(what: String, settings: &Settings) -> Result<(), AppError> {
    if !settings.can_prompt {
        return Err(NotConfirmed::NoTerminal.into());
    }
    streams::notice(&what);
    let color = settings.color_stderr;
    let answer = tokio::task::spawn_blocking(move || confirm::ask_to_apply(color))
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

/// Applies the plan — the server-side dry run, then the writes in rounds — and records what
/// was written in the history. The server is asked who we are during the dry run, and the
/// history is read then too unless planning read it.
async fn write(
    cluster: &Cluster,
    sourced: Sourced,
    settings: &Settings,
    signals: &mut Signals,
) -> Result<(Report, history_store::Recorded), AppError> {
    let interrupt = InterruptFlag::default();
    let opts = ApplyOptions {
        tries: settings.retries,
        ..ApplyOptions::default()
    };
    let recording = settings.history_max > 0;
    let plan = &sourced.plan;
    let applying = async {
        let prepare = async {
            if !recording {
                return None;
            }
            Some(match &sourced.config_map {
                Some(cm) => history_store::Prepared {
                    config_map: Ok(cm.clone()),
                    user: history_store::who(cluster).await,
                },
                None => history_store::prepare(cluster, &plan.app).await,
            })
        };
        let (preflight, prepared) =
            tokio::join!(apply::preflight(cluster, plan, opts, &interrupt), prepare);
        match preflight {
            Ok(ready) => {
                write_and_record(cluster, &sourced, ready, prepared, settings, &interrupt).await
            }
            // Nothing was written: nothing to record.
            Err(refused) => (refused, history_store::Recorded::Nothing),
        }
    };
    tokio::pin!(applying);
    loop {
        tokio::select! {
            done = &mut applying => return Ok(done),
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

/// Writes what the dry run passed ([`apply::write`]) and adds the run's record to the history
/// (`prepared`: what the dry-run round read for it; `None`: no history). The record goes out
/// with the last round of writes, saying what they will have done — the writes before that
/// round have all landed by then — so it costs no round of its own; in the rare run where
/// that round does less (a write fails, or finds its change already made), one more write
/// corrects it. When the last round never starts (an earlier round failed), the record of
/// what was done is added afterwards.
pub(crate) async fn write_and_record(
    cluster: &Cluster,
    sourced: &Sourced,
    ready: apply::Preflighted,
    prepared: Option<history_store::Prepared>,
    settings: &Settings,
    interrupt: &InterruptFlag,
) -> (Report, history_store::Recorded) {
    use history_store::Recorded;
    let opts = ApplyOptions {
        tries: settings.retries,
        ..ApplyOptions::default()
    };
    let plan = &sourced.plan;
    let app = plan.app.as_str();
    let Some(prepared) = prepared else {
        let report = apply::write(cluster, plan, ready, opts, interrupt).await;
        return (report, Recorded::Nothing);
    };
    let info = history::RunInfo {
        time: k8s_openapi::jiff::Timestamp::now()
            .round(k8s_openapi::jiff::Unit::Second)
            .map(|t| t.to_string())
            .unwrap_or_default(),
        user: prepared.user,
        source: sourced.source.clone(),
        saved_plan: sourced.saved_plan,
        routes: plan.routes.as_ref().map(|r| r.header.clone()),
        plan_checksum: sourced.plan_checksum.clone(),
        fleet_run: sourced.fleet_run.clone(),
    };
    let config_map_read = &prepared.config_map;
    let with_last_round = |expected: &Report| {
        let record = history::record(expected, &info);
        async move {
            let added = add_record(cluster, app, config_map_read, record.clone(), settings).await;
            (record, added)
        }
    };
    let (report, sent) =
        apply::write_with(cluster, plan, ready, opts, interrupt, with_last_round).await;
    let recorded = match sent {
        None => match history::record(&report, &info) {
            // The interrupt promised no new request.
            Some(_) if report.interrupted.is_some() => Recorded::Warning(format!(
                "warning: interrupted before the history was written: the changes made are not recorded in configmap/{}, so --undo does not know them",
                history::config_map_name(app)
            )),
            record => {
                add_record(cluster, app, config_map_read, record, settings)
                    .await
                    .0
            }
        },
        Some((sent, (recorded, written))) => {
            // What the writes did, whether or not a signal came while they landed.
            let done = Report {
                interrupted: None,
                ..report.clone()
            };
            let done = history::record(&done, &info);
            match (recorded, written) {
                (
                    Recorded::Revision {
                        revision,
                        config_map,
                    },
                    Some(written),
                ) if done != sent => {
                    if report.interrupted.is_some() {
                        // The interrupt promised no new request.
                        Recorded::Warning(format!(
                            "warning: interrupted before the history was corrected: revision {revision} in configmap/{config_map} lists changes that were not all made; check `kubectl appupdate history {app}` before undoing it"
                        ))
                    } else {
                        let made = done.is_some();
                        match history_store::correct(
                            cluster,
                            app,
                            revision,
                            done,
                            written,
                            settings.retries,
                        )
                        .await
                        {
                            Ok(()) if made => Recorded::Revision {
                                revision,
                                config_map,
                            },
                            Ok(()) => Recorded::Nothing,
                            Err((e, verb)) => Recorded::Warning(history_store::correction_warning(
                                cluster, app, revision, &e, verb,
                            )),
                        }
                    }
                }
                (recorded, _) => recorded,
            }
        }
    };
    (report, recorded)
}

/// Adds `record` (`None`: the run wrote nothing to record) to the history as read earlier in
/// the run; with the ConfigMap as the write left it.
async fn add_record(
    cluster: &Cluster,
    app: &str,
    config_map: &Result<Option<serde_json::Value>, appupdate_kube::cluster::RequestError>,
    record: Option<history::Record>,
    settings: &Settings,
) -> (history_store::Recorded, Option<history_store::Added>) {
    use history_store::Recorded;
    let Some(record) = record else {
        return (Recorded::Nothing, None);
    };
    let config_map = match config_map {
        Ok(cm) => cm.clone(),
        Err(e) => {
            return (
                Recorded::Warning(history_store::warning(cluster, app, e, "get")),
                None,
            );
        }
    };
    match history_store::add(
        cluster,
        app,
        config_map,
        &record,
        settings.history_max,
        settings.retries,
    )
    .await
    {
        Ok((revision, written)) => (
            Recorded::Revision {
                revision,
                config_map: history::config_map_name(app),
            },
            Some(written),
        ),
        Err((e, verb)) => (
            Recorded::Warning(history_store::warning(cluster, app, &e, verb)),
            None,
        ),
    }
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
    let target = WaitTarget {
        namespace: cluster.namespace().to_owned(),
        name: settings.app.clone(),
        context: cluster.conn.context.clone(),
        as_user: cluster.conn.as_user.clone(),
    };
    let timeout = Some(settings.wait_timeout).filter(|t| !t.is_zero());
    let color = streams.color(streams::Kind::Notice);
    if followed.is_empty() {
        return Ok(());
    }
    let mut progress: Box<dyn wait::Progress> = if settings.stderr_is_terminal {
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
    };
    let following = wait::follow(
        cluster.conn.client.clone(),
        &target,
        followed,
        timeout,
        cluster.conn.request_timeout,
        progress.as_mut(),
    );
    tokio::select! {
        result = following => result.map(|_| ()).map_err(AppError::Rollout),
        signal = signals.recv() => Err(AppError::Interrupted {
            signal,
            stage: Stage::Waiting {
                name: target.name.clone(),
                namespace: target.namespace.clone(),
                rollout: followed.rollout,
            },
        }),
    }
}

/// `kubectl appupdate history NAME`: the recorded changes, oldest first.
pub async fn history(settings: &HistorySettings, streams: &Streams) -> Ending {
    match list_history(settings, streams).await {
        Ok(()) => Ending::Done,
        Err(e) => Ending::Failed(e),
    }
}

async fn list_history(settings: &HistorySettings, streams: &Streams) -> Result<(), AppError> {
    let conn = kube_context::connect(&settings.cluster, streams::warning).await?;
    let cluster = connected(conn, settings.verbose, None);
    let name = history::config_map_name(&settings.app);
    let cm = cluster
        .get_config_map(&name)
        .await
        .map_err(|source| AppError::Request {
            verb: "get",
            target: appupdate_kube::describe::Target {
                reference: format!("configmap/{name}"),
                namespace: cluster.namespace().to_owned(),
                context: cluster.conn.context.clone(),
                as_user: cluster.conn.as_user.clone(),
            },
            source: Box::new(source),
        })?;
    let stored = history::History::from_config_map(cm.as_ref(), &settings.app);
    if stored.entries.is_empty() && settings.output == crate::cli::HistoryFormat::Table {
        streams::notice(&format!(
            "No recorded changes for {} in namespace {} (context {}).",
            settings.app,
            appupdate_model::text::Untrusted(cluster.namespace()),
            appupdate_model::text::Untrusted(&cluster.conn.context)
        ));
        return Ok(());
    }
    streams.history(settings.output, &settings.app, cluster.namespace(), &stored)?;
    Ok(())
}
