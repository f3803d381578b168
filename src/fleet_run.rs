//! A run over several clusters (a fleet), start to finish.
//!
//! 1. The kubeconfig is read once; every context is resolved as a run over one cluster
//!    resolves its context (its cluster, user and namespace; `-n` applies to all). Each
//!    cluster gets its own connection, and all are read and planned at the same time, with the
//!    requests of a run over one cluster.
//! 2. One combined plan: a section per distinct plan (identical plans folded, naming their
//!    clusters), a summary per section and in total. A cluster that cannot be reached, refuses
//!    access or lacks the application stops the run before any write, naming it — or, with
//!    `--skip-unreachable`, is left out and listed.
//! 3. One question for the whole fleet (or `--yes`).
//! 4. Before the first write anywhere: a saved plan's re-check and the server-side dry run on
//!    every cluster, all at once; any refusal stops the run with nothing written anywhere.
//! 5. The writes, cluster by cluster, with the conditional writes, retries and guard of a run
//!    over one cluster: the canaries first (their rollout followed as `--wait` does; the rest
//!    starts only if they rolled out), then the others, all at once or `--parallel` at a
//!    time; with `--stop-on-failure` (the default) no new cluster starts once one failed.
//! 6. The report: every cluster's outcome, then the closing line; with `-o json|yaml`, one
//!    document with each cluster's plan and outcome.
//!
//! Signals: until the dry run, a signal ends the run at once (nothing was changed). From
//! then on, the first one starts no new cluster and no new request, lets the requests in
//! flight finish and stops following rollouts; the report says what was done. A second one
//! exits at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use futures::future::join_all;
use k8s_openapi::jiff::Timestamp;

use crate::apply::{self, ApplyOptions, InterruptFlag, Preflighted};
use crate::error::{AppError, Stage};
use crate::exit::Ending;
use crate::fleet::{self, ClusterEnd, ClusterState, FleetEnd, FleetOrder, NotStarted};
use crate::fleet_progress::{FleetProgress, RolloutLine};
use crate::history_store::{self, Prepared};
use crate::plan_sources::{self, Sourced};
use crate::run;
use crate::settings::{FleetSettings, Mode, Settings, SettingsError, WaveSpec};
use crate::signals::Signals;
use crate::streams::{self, Streams};
use crate::wait::{self, Followed, WaitError, WaitTarget, Waited};
use appupdate_kube::cluster::Cluster;
use appupdate_kube::kube_context::Loaded;
use appupdate_model::text::Untrusted;
use appupdate_plan::fleet_plan::{FleetPlan, Member as PlanMember};

/// A cluster that was planned.
struct Member {
    /// Its place in the order of the contexts.
    index: usize,
    cluster: Cluster,
    sourced: Sourced,
}

/// Every context of the run, as far as planning got.
struct Planned {
    app: String,
    /// `--canary` or `--wave`.
    order: FleetOrder,
    contexts: Vec<String>,
    members: Vec<Member>,
    /// Left out (`--skip-unreachable`), by index: the reason, and the error.
    skipped: Vec<(usize, String, AppError)>,
    /// Could not be planned, by index.
    failed: Vec<(usize, AppError)>,
}

/// Runs the change over every context of the fleet; says how it ended.
pub async fn run(settings: &Settings, fleet: &FleetSettings, streams: &Streams) -> Ending {
    let mut signals = Signals::listen();
    let planned = tokio::select! {
        planned = plan_all(settings, fleet) => planned,
        signal = signals.recv() => Err(AppError::Interrupted { signal, stage: Stage::Planning }),
    };
    let mut planned = match planned {
        Ok(p) => p,
        Err(e) => return Ending::Failed(e),
    };
    // An undo that would overwrite fields changed since its record is refused, after its plan
    // was shown.
    let mut refusals = Vec::new();
    for m in &mut planned.members {
        if let Some(message) = m.sourced.refusal.take() {
            refusals.push((m.index, AppError::UndoRefused { message }));
        }
    }
    let shown = show(settings, streams, &planned);
    if let Err(e) = shown {
        return Ending::Failed(e);
    }
    if !refusals.is_empty() || !planned.failed.is_empty() {
        planned.failed.extend(refusals);
        let end = end_of(&mut planned, |_| ClusterState::Planned, false, None);
        return finish(streams, settings, &planned, end, true);
    }
    let has_changes = planned.members.iter().any(|m| m.sourced.plan.has_changes());
    let changes_pending = settings.detailed_exitcode && has_changes;
    if let Some(save) = settings.save() {
        let plans: Vec<(&Sourced, &Cluster)> = planned
            .members
            .iter()
            .map(|m| (&m.sourced, &m.cluster))
            .collect();
        if let Err(e) = run::save_plans(&save.path, &plans, &planned.order.waves, save.key.as_ref())
        {
            return Ending::Failed(e);
        }
        let shown = Untrusted(save.path.display().to_string());
        streams::notice(&format!(
            "Saved the plan of {} cluster{} to {shown}{}; apply it with: kubectl appupdate apply {shown}",
            plans.len(),
            if plans.len() == 1 { "" } else { "s" },
            run::signed_with(save.key.as_ref())
        ));
        let end = end_of(
            &mut planned,
            |_| ClusterState::Planned,
            changes_pending,
            None,
        );
        return finish(streams, settings, &planned, end, false);
    }
    if settings.dry_run || (!has_changes && !settings.wait) {
        let end = end_of(
            &mut planned,
            |m| {
                if m.sourced.plan.has_changes() {
                    ClusterState::Planned
                } else {
                    ClusterState::Unchanged { rollout: None }
                }
            },
            changes_pending,
            None,
        );
        return finish(streams, settings, &planned, end, false);
    }
    if has_changes && !settings.yes {
        let asked = tokio::select! {
            asked = confirm(settings, streams, &planned) => asked,
            signal = signals.recv() => {
                if settings.stderr_is_terminal {
                    crate::terminal::restore();
                    let _ = console::Term::stderr().show_cursor();
                }
                Err(AppError::Interrupted { signal, stage: Stage::Planning })
            }
        };
        if let Err(e) = asked {
            if matches!(e, AppError::NotConfirmed(_)) {
                let _ = streams.fleet_document(&fleet_plan(&planned), &planned.order, None);
            }
            return Ending::Failed(e);
        }
    }

    let interrupt = InterruptFlag::default();
    let progress = FleetProgress::new(
        &planned.contexts,
        &planned.order,
        settings.stderr_is_terminal && settings.verbose == 0,
        streams.color(streams::Kind::Notice),
        streams.writer(streams::Kind::Notice),
    );
    let ticker = progress.ticking();
    let states = {
        let applying = apply_all(
            settings,
            fleet,
            &planned.order,
            &mut planned.members,
            &interrupt,
            &progress,
        );
        tokio::pin!(applying);
        loop {
            tokio::select! {
                states = &mut applying => break states,
                signal = signals.recv() => {
                    if interrupt.raise(signal) {
                        progress.notice(
                            "\ninterrupt received: finishing the requests in flight, starting no new cluster and no new request (interrupt again to exit at once)",
                        );
                    } else {
                        ticker.abort();
                        progress.finish();
                        return Ending::Failed(AppError::Interrupted { signal, stage: Stage::Writing });
                    }
                }
            }
        }
    };
    ticker.abort();
    progress.finish();
    let mut states: Vec<Option<ClusterState>> = states.into_iter().map(Some).collect();
    let end = end_of(
        &mut planned,
        |m| {
            states
                .get_mut(m.index)
                .and_then(Option::take)
                .unwrap_or(ClusterState::NotStarted(NotStarted::Interrupted))
        },
        false,
        interrupt.get(),
    );
    finish(streams, settings, &planned, end, true)
}

/// The contexts, each connected, read and planned, all at once.
async fn plan_all(settings: &Settings, fleet: &FleetSettings) -> Result<Planned, AppError> {
    let loaded = Loaded::load(&settings.cluster)?;
    let sel = &settings.cluster;
    let named: Vec<String> = if sel.contexts.is_empty()
        && sel.context_selector.is_none()
        && let Some(saved) = settings.saved()
    {
        saved
            .file
            .clusters
            .iter()
            .map(|c| c.context.clone())
            .collect()
    } else {
        sel.contexts.clone()
    };
    let (contexts, waves) = if fleet.waves.is_empty() {
        (
            loaded.fleet_contexts(&named, sel.context_selector.as_ref())?,
            Vec::new(),
        )
    } else {
        let mut waves = resolve_waves(&loaded, &fleet.waves)?;
        if settings.undo().is_some() {
            // An undo goes back in the reverse order: the last wave first.
            waves.reverse();
        }
        (waves.concat(), waves)
    };
    if let Some(canary) = fleet.canary.iter().find(|c| !contexts.contains(c)) {
        return Err(SettingsError::Invalid(format!(
            "--canary {:?} is not one of the contexts of this run ({}); name it with --context or --contexts too",
            Untrusted(canary),
            contexts
                .iter()
                .map(|c| Untrusted(c).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .into());
    }
    let now = Timestamp::now();
    if let Some(saved) = settings.saved() {
        plan_sources::check_age(saved, now)?;
    }
    // A fleet undo undoes one fleet run everywhere: the one named, else the newest recorded.
    let mut resolved;
    let settings = match settings.undo() {
        Some(undo) if undo.fleet_run.is_none() && undo.revision.is_none() => {
            match newest_fleet_run(&loaded, settings, &contexts).await {
                Some(id) => {
                    resolved = settings.clone();
                    if let Mode::Undo { request, .. } = &mut resolved.mode {
                        request.fleet_run = Some(id);
                    }
                    &resolved
                }
                None => settings,
            }
        }
        _ => settings,
    };
    let run_id = fleet_run_id(settings);
    let results = join_all(
        contexts
            .iter()
            .map(|context| plan_one(&loaded, settings, context)),
    )
    .await;
    let results: Vec<Result<(Cluster, Sourced), AppError>> = results
        .into_iter()
        .map(|r| {
            r.map(|(cluster, mut sourced)| {
                sourced.fleet_run = Some(run_id.clone());
                (cluster, sourced)
            })
        })
        .collect();
    let mut planned = Planned {
        app: settings.app.clone(),
        order: FleetOrder {
            canary: fleet.canary.clone(),
            waves,
            max_failed: fleet.max_failed,
            stop_after: fleet.stop_after_wave,
        },
        contexts: contexts.clone(),
        members: Vec::new(),
        skipped: Vec::new(),
        failed: Vec::new(),
    };
    for (index, result) in results.into_iter().enumerate() {
        match result {
            Ok((cluster, sourced)) => planned.members.push(Member {
                index,
                cluster,
                sourced,
            }),
            Err(e) if fleet.skip_unreachable && skippable(&e) => {
                planned.skipped.push((index, e.to_string(), e));
            }
            Err(e) => planned.failed.push((index, e)),
        }
    }
    one_context_per_cluster(&planned)?;
    Ok(planned)
}

/// The identifier of this run over several clusters, kept in each cluster's record: a saved
/// plan's is made from its checksum (a resumed run is the same run), another run's from the
/// time and the process.
fn fleet_run_id(settings: &Settings) -> String {
    use sha2::Digest as _;
    if let Some(saved) = settings.saved() {
        let hex = saved.file.checksum.trim_start_matches("sha256:");
        return format!("plan-{}", &hex[..hex.len().min(12)]);
    }
    let seed = format!(
        "{:?} {} {}",
        std::time::SystemTime::now(),
        std::process::id(),
        settings.app
    );
    let hex: String = sha2::Sha256::digest(seed.as_bytes())
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("run-{hex}")
}

/// The newest fleet run recorded in any of `contexts`' histories (by its newest record's
/// time); `None` when none of them records one. One read per cluster, before planning.
async fn newest_fleet_run(
    loaded: &Loaded,
    settings: &Settings,
    contexts: &[String],
) -> Option<String> {
    let reads = join_all(contexts.iter().map(|context| async move {
        let conn = loaded
            .connect(&settings.cluster, Some(context), streams::warning)
            .await
            .ok()?;
        let cluster = run::connected(conn, 0, None);
        let cm = history_store::read(&cluster, &settings.app).await.ok()?;
        let history = appupdate_plan::history::History::from_config_map(cm.as_ref(), &settings.app);
        history
            .newest_fleet_run()
            .map(|(id, time)| (time.to_owned(), id.to_owned()))
    }))
    .await;
    reads.into_iter().flatten().max().map(|(_, id)| id)
}

/// The contexts of each `--wave`, in order: names checked against the kubeconfig, `re:`
/// selectors matched; a context in two waves is refused.
fn resolve_waves(loaded: &Loaded, specs: &[WaveSpec]) -> Result<Vec<Vec<String>>, AppError> {
    let mut waves: Vec<Vec<String>> = Vec::with_capacity(specs.len());
    for spec in specs {
        let wave = match spec {
            WaveSpec::Named(names) => loaded.fleet_contexts(names, None)?,
            WaveSpec::Matching(selector) => loaded.fleet_contexts(&[], Some(selector))?,
        };
        for c in &wave {
            if let Some(earlier) = waves.iter().position(|w| w.contains(c)) {
                return Err(SettingsError::Invalid(format!(
                    "context {:?} is in wave {} and in wave {}: each cluster is written once; keep it in one --wave",
                    Untrusted(c),
                    earlier + 1,
                    waves.len() + 1
                ))
                .into());
            }
        }
        waves.push(wave);
    }
    Ok(waves)
}

/// Unreachable, forbidden, or the application not found: what `--skip-unreachable` leaves
/// out. A kubeconfig that cannot be used or a change that does not fit the cluster is never
/// skipped.
fn skippable(e: &AppError) -> bool {
    matches!(e, AppError::Request { .. } | AppError::NotFound { .. })
}

/// Connects to `context`, reads and plans.
async fn plan_one(
    loaded: &Loaded,
    settings: &Settings,
    context: &str,
) -> Result<(Cluster, Sourced), AppError> {
    let conn = loaded
        .connect(&settings.cluster, Some(context), streams::warning)
        .await?;
    let cluster = run::connected(
        conn,
        settings.verbose,
        Some(format!("[{}] ", Untrusted(context))),
    );
    let saved = match settings.saved() {
        Some(saved) => Some(
            saved
                .file
                .clusters
                .iter()
                .find(|c| {
                    c.context == cluster.conn.context
                        && c.server == cluster.conn.server
                        && c.plan.namespace == cluster.conn.namespace
                })
                .cloned()
                .map_or_else(
                    || plan_sources::choose_target(saved, &cluster.conn, Some(context)),
                    Ok,
                )?,
        ),
        None => None,
    };
    let mut sourced = run::source(settings, &cluster, saved).await?;
    // A fleet holds every member's plan at once; the live objects are not needed past planning.
    sourced.live = None;
    // A saved plan is shown under the context it is applied through.
    sourced.plan.context = cluster.conn.context.clone();
    Ok((cluster, sourced))
}

/// Two contexts that point at the same API server and namespace would write the same objects
/// twice (and a plan file's plan for them would be applied twice): refused, naming both.
fn one_context_per_cluster(planned: &Planned) -> Result<(), AppError> {
    for (k, m) in planned.members.iter().enumerate() {
        if let Some(other) = planned.members[..k].iter().find(|o| {
            o.cluster.conn.server == m.cluster.conn.server
                && o.cluster.namespace() == m.cluster.namespace()
        }) {
            return Err(SettingsError::Invalid(format!(
                "contexts {:?} and {:?} both point at the API server {} and namespace {:?}: the application would be updated twice; name one of them",
                Untrusted(&planned.contexts[other.index]),
                Untrusted(&planned.contexts[m.index]),
                Untrusted(&m.cluster.conn.server),
                Untrusted(m.cluster.namespace())
            ))
            .into());
        }
    }
    Ok(())
}

fn fleet_plan(planned: &Planned) -> FleetPlan<'_> {
    let mut members: Vec<(usize, PlanMember<'_>)> = planned
        .members
        .iter()
        .map(|m| (m.index, PlanMember::Planned(&m.sourced.plan)))
        .collect();
    members.extend(planned.skipped.iter().map(|(i, reason, _)| {
        (
            *i,
            PlanMember::Skipped {
                context: planned.contexts[*i].as_str(),
                reason: reason.as_str(),
            },
        )
    }));
    members.sort_by_key(|(i, _)| *i);
    FleetPlan {
        app: &planned.app,
        members: members.into_iter().map(|(_, m)| m).collect(),
        waves: &planned.order.waves,
    }
}

/// The combined plan, as a diff on stdout (`-o json|yaml`: the document comes at the end).
fn show(settings: &Settings, streams: &Streams, planned: &Planned) -> Result<(), AppError> {
    let _ = settings;
    if planned.members.is_empty() && planned.skipped.is_empty() {
        return Ok(());
    }
    streams.fleet_plan(&fleet_plan(planned))?;
    Ok(())
}

/// One question for the whole fleet. With `-o json|yaml` (the document comes at the end) the
/// plan is shown with the question, on stderr.
/// What the fleet question says of the order: which clusters go first (already escaped), when
/// only some of the `n` planned clusters are canaries.
fn canary_order(canaries: &[String], n: usize) -> String {
    match canaries {
        [] => String::new(),
        all if all.len() == n => String::new(),
        [one] => format!("; {one} first, the rest after its rollout"),
        several => format!(
            "; {} first, the rest after their rollouts",
            several.join(", ")
        ),
    }
}

/// What the fleet question says of waves: `; in 3 waves: dev-1, then eu-1, eu-2, then us-1`
/// (escaped).
fn wave_order(waves: &[Vec<String>]) -> String {
    let each: Vec<String> = waves
        .iter()
        .map(|w| {
            w.iter()
                .map(|c| Untrusted(c).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect();
    format!("; in {} waves: {}", waves.len(), each.join(", then "))
}

async fn confirm(
    settings: &Settings,
    streams: &Streams,
    planned: &Planned,
) -> Result<(), AppError> {
    if !settings.can_prompt {
        return Err(crate::confirm::NotConfirmed::NoTerminal.into());
    }
    let fleet = fleet_plan(planned);
    streams.fleet_review(&fleet)?;
    let t = fleet.total();
    let n = fleet.plans().count();
    let canaries: Vec<String> = fleet
        .plans()
        .filter(|p| {
            settings
                .fleet
                .as_ref()
                .is_some_and(|f| f.canary.contains(&p.context))
        })
        .map(|p| Untrusted(&p.context).to_string())
        .collect();
    let order = if planned.order.waves.is_empty() {
        canary_order(&canaries, n)
    } else {
        wave_order(&planned.order.waves)
    };
    let question = format!(
        "Apply these changes to {} on {} cluster{} ({}{}): {} to create, {} to update, {} to delete in total.",
        Untrusted(fleet.app),
        n,
        if n == 1 { "" } else { "s" },
        fleet
            .plans()
            .map(|p| Untrusted(&p.context).to_string())
            .collect::<Vec<_>>()
            .join(", "),
        order,
        t.create,
        t.update,
        t.delete
    );
    run::ask(question, settings).await
}

/// The end of the run: `state` for each planned cluster, the skipped and failed ones as they
/// are.
fn end_of(
    planned: &mut Planned,
    mut state: impl FnMut(&Member) -> ClusterState,
    changes_pending: bool,
    interrupted: Option<appupdate_model::report::Interruption>,
) -> FleetEnd {
    let mut ends: Vec<(usize, ClusterEnd)> = Vec::new();
    for m in &planned.members {
        ends.push((
            m.index,
            ClusterEnd {
                canary: planned.order.canary.contains(&planned.contexts[m.index]),
                context: planned.contexts[m.index].clone(),
                namespace: Some(m.cluster.namespace().to_owned()),
                state: state(m),
            },
        ));
    }
    for (i, _, e) in planned.skipped.drain(..) {
        ends.push((
            i,
            ClusterEnd {
                canary: planned.order.canary.contains(&planned.contexts[i]),
                context: planned.contexts[i].clone(),
                namespace: None,
                state: ClusterState::Skipped(e),
            },
        ));
    }
    for (i, e) in planned.failed.drain(..) {
        ends.push((
            i,
            ClusterEnd {
                canary: planned.order.canary.contains(&planned.contexts[i]),
                context: planned.contexts[i].clone(),
                namespace: None,
                state: ClusterState::Failed(e),
            },
        ));
    }
    ends.sort_by_key(|(i, _)| *i);
    FleetEnd {
        app: planned.app.clone(),
        clusters: ends.into_iter().map(|(_, e)| e).collect(),
        interrupted,
        changes_pending,
    }
}

/// Says how the run ended (the report, when `report`; the document with `-o json|yaml`) and
/// returns the ending.
fn finish(
    streams: &Streams,
    settings: &Settings,
    planned: &Planned,
    end: FleetEnd,
    report: bool,
) -> Ending {
    let _ = settings;
    if report {
        let _ = streams.fleet_report(&end);
    }
    let _ = streams.fleet_document(&fleet_plan(planned), &planned.order, Some(&end));
    Ending::Fleet(end)
}

/// What the dry run left to do in one cluster.
struct Ready {
    preflighted: Preflighted,
    /// The history as read, and who we are (`None`: `--history-max 0`).
    prepared: Option<Prepared>,
}

/// Everything from the re-check of saved plans to the last write: the state of each cluster,
/// by index (clusters not reached are not started).
async fn apply_all(
    settings: &Settings,
    fleet: &FleetSettings,
    order: &FleetOrder,
    members: &mut [Member],
    interrupt: &InterruptFlag,
    progress: &Arc<FleetProgress>,
) -> Vec<ClusterState> {
    let n = members.iter().map(|m| m.index + 1).max().unwrap_or(0);
    let mut states: Vec<Option<ClusterState>> = (0..n).map(|_| None).collect();
    let done = |states: Vec<Option<ClusterState>>| -> Vec<ClusterState> {
        states
            .into_iter()
            .map(|s| s.unwrap_or(ClusterState::NotStarted(NotStarted::Interrupted)))
            .collect()
    };
    let opts = ApplyOptions {
        tries: settings.retries,
        ..ApplyOptions::default()
    };

    // 1. Saved plans: every object read again under the guard, everywhere, before any write.
    if members.iter().any(|m| m.sourced.saved_plan) {
        for m in members.iter() {
            progress.busy(m.index, "checking the saved plan against the live objects");
        }
        let rechecked = join_all(
            members
                .iter()
                .map(|m| plan_sources::recheck_saved(&m.cluster, m.sourced.plan.clone())),
        )
        .await;
        let mut refused = false;
        for (m, result) in members.iter_mut().zip(rechecked) {
            match result {
                Ok(Ok(rebased)) => m.sourced.plan = rebased,
                Ok(Err(report)) => {
                    refused = true;
                    progress.set(m.index, "NOT updated: the saved plan no longer holds");
                    states[m.index] = Some(ClusterState::Refused(report));
                }
                Err(e) => {
                    refused = true;
                    progress.set(m.index, "NOT updated: cannot read it again");
                    states[m.index] = Some(ClusterState::Failed(e));
                }
            }
        }
        if refused {
            for m in members.iter() {
                if states[m.index].is_none() {
                    states[m.index] = Some(ClusterState::NotStarted(NotStarted::RefusedElsewhere));
                    progress.set(m.index, "NOT started: another cluster refused");
                }
            }
            return done(states);
        }
    }
    let members: &[Member] = members;

    // 2. The dry run everywhere (the history read and who we are ride along).
    let recording = settings.history_max > 0;
    let preflights = join_all(members.iter().map(|m| async move {
        if !m.sourced.plan.has_changes() {
            progress.set(m.index, "nothing to change");
            return None;
        }
        progress.busy(m.index, "dry run");
        let prepare = async {
            if !recording {
                return None;
            }
            Some(match &m.sourced.config_map {
                Some(cm) => Prepared {
                    config_map: Ok(cm.clone()),
                    user: history_store::who(&m.cluster).await,
                },
                None => history_store::prepare(&m.cluster, &m.sourced.plan.app).await,
            })
        };
        let (preflight, prepared) = tokio::join!(
            apply::preflight(&m.cluster, &m.sourced.plan, opts, interrupt),
            prepare
        );
        Some(preflight.map(|preflighted| Ready {
            preflighted,
            prepared,
        }))
    }))
    .await;
    let mut ready: Vec<Option<Ready>> = (0..n).map(|_| None).collect();
    let mut refused = false;
    for (m, preflight) in members.iter().zip(preflights) {
        match preflight {
            None => {}
            Some(Ok(r)) => {
                progress.set(m.index, "dry run passed");
                ready[m.index] = Some(r);
            }
            // Stopped by a signal: not started, below.
            Some(Err(report)) if !report.stopped_in_preflight => {}
            Some(Err(report)) => {
                refused = true;
                progress.set(m.index, "NOT updated: refused by the dry run");
                states[m.index] = Some(ClusterState::Refused(report));
            }
        }
    }
    if refused || interrupt.get().is_some() {
        let why = if refused {
            NotStarted::RefusedElsewhere
        } else {
            NotStarted::Interrupted
        };
        for m in members {
            if states[m.index].is_none() {
                states[m.index] = Some(if m.sourced.plan.has_changes() {
                    progress.set(m.index, "NOT started");
                    ClusterState::NotStarted(why)
                } else {
                    ClusterState::Unchanged { rollout: None }
                });
            }
        }
        return done(states);
    }

    // 3. The writes: the canaries, then the rest.
    let writing = Writing {
        settings,
        fleet,
        stopped: AtomicBool::new(false),
        interrupt,
        progress,
    };
    let mut take = |m: &Member| ready.get_mut(m.index).and_then(Option::take);
    if !order.waves.is_empty() {
        // 3a. In waves: each starts once the one before ended within the failure budget.
        let waves: Vec<Vec<&Member>> = order
            .waves
            .iter()
            .map(|wave| {
                members
                    .iter()
                    .filter(|m| wave.contains(&m.cluster.conn.context))
                    .collect()
            })
            .collect();
        for (w, wave) in waves.iter().enumerate().skip(1) {
            for m in wave {
                progress.set(m.index, &format!("waiting for wave {w}"));
            }
        }
        let mut jobs: Vec<Option<Vec<Job>>> = waves
            .iter()
            .map(|wave| Some(wave.iter().map(|m| (*m, take(m))).collect()))
            .collect();
        let writing = &writing;
        let running = order.stop_after.map_or(waves.len(), |n| n.min(waves.len()));
        let ran = fleet::in_waves(
            running,
            order.max_failed,
            |w| {
                let jobs = jobs[w].take().unwrap_or_default();
                let members = &waves[w];
                let last = w + 1 == waves.len();
                async move {
                    let mut ends = writing.group(jobs, settings.wait).await;
                    let within =
                        ends.iter().filter(|(_, s)| !s.as_planned()).count() <= order.max_failed;
                    if let (Some(bake), false, true) = (fleet.bake, last, within) {
                        bake_wave(members, &mut ends, bake, interrupt, progress).await;
                    }
                    ends
                }
            },
            |(_, state): &(usize, ClusterState)| state.as_planned(),
            || interrupt.get().is_none(),
        )
        .await;
        for wave in &waves[running..] {
            for m in wave {
                progress.set(
                    m.index,
                    "NOT started: stopped after the wave before, as asked",
                );
                states[m.index] = Some(ClusterState::NotStarted(NotStarted::StoppedAfterWave));
            }
        }
        let mut over_budget = None;
        for (w, (wave, ran)) in waves.iter().zip(ran).enumerate() {
            match ran {
                Some(ends) => {
                    for (i, state) in ends {
                        states[i] = Some(state);
                    }
                }
                None => {
                    let after = *over_budget.get_or_insert(w);
                    for m in wave {
                        progress.set(
                            m.index,
                            &format!(
                                "NOT started: wave {after} had more failed clusters than --max-failed allows"
                            ),
                        );
                        states[m.index] =
                            Some(ClusterState::NotStarted(if interrupt.get().is_some() {
                                NotStarted::Interrupted
                            } else {
                                NotStarted::EarlierWave
                            }));
                    }
                }
            }
        }
        return done(states);
    }
    let (canaries, rest): (Vec<&Member>, Vec<&Member>) = members
        .iter()
        .partition(|m| fleet.canary.contains(&m.cluster.conn.context));
    if !canaries.is_empty() {
        for m in &rest {
            progress.set(m.index, "waiting for the canary");
        }
    }
    let canary_jobs: Vec<(&Member, Option<Ready>)> =
        canaries.iter().map(|m| (*m, take(m))).collect();
    let rest_jobs: Vec<(&Member, Option<Ready>)> = rest.iter().map(|m| (*m, take(m))).collect();
    let mut canaries_ok = true;
    for (i, state) in writing.group(canary_jobs, true).await {
        canaries_ok &= state.as_planned();
        states[i] = Some(state);
    }
    if canaries_ok {
        for (i, state) in writing.group(rest_jobs, settings.wait).await {
            states[i] = Some(state);
        }
    } else {
        for (m, _) in rest_jobs {
            progress.set(
                m.index,
                "NOT started: the canary did not apply and roll out",
            );
            states[m.index] = Some(ClusterState::NotStarted(NotStarted::Canary));
        }
    }
    done(states)
}

/// `--bake`: waits `bake` (a signal ends it early), then reads each cluster of the wave that
/// ended as planned again; a regression ([`fleet::bake_regression`]) makes its rollout failed,
/// which stops the run as a failed cluster does.
async fn bake_wave(
    members: &[&Member],
    ends: &mut [(usize, ClusterState)],
    bake: std::time::Duration,
    interrupt: &InterruptFlag,
    progress: &Arc<FleetProgress>,
) {
    let started = tokio::time::Instant::now();
    while started.elapsed() < bake && interrupt.get().is_none() {
        let left = bake.saturating_sub(started.elapsed());
        for m in members {
            progress.set(
                m.index,
                &format!("baking: {} left", crate::wait::format_duration(left)),
            );
        }
        tokio::time::sleep(left.min(std::time::Duration::from_secs(1))).await;
    }
    if interrupt.get().is_some() {
        return;
    }
    for (i, state) in ends.iter_mut() {
        let Some(m) = members.iter().find(|m| m.index == *i) else {
            continue;
        };
        if !state.as_planned() {
            continue;
        }
        let app = &m.sourced.plan.app;
        let image = planned_image(&m.sourced.plan);
        let read = m
            .cluster
            .get(appupdate_model::plan::Kind::Deployment, app)
            .await;
        let mut regression = match &read {
            Ok(d) => fleet::bake_regression(
                d.as_ref(),
                image.as_ref().map(|(c, i)| (c.as_str(), i.as_str())),
            ),
            Err(e) => Some(format!("it could not be read again: {e}")),
        };
        // The routes the run wrote must still be taken by their controllers.
        if regression.is_none()
            && let ClusterState::Applied { report, .. } = &*state
        {
            let followed = crate::wait::Followed::after_writes(report, false);
            for route in &followed.routes {
                let now = m.cluster.get(route.kind, &route.name).await;
                let lost = match &now {
                    Ok(Some(obj)) => {
                        match appupdate_model::route_status::route_state(route.kind, obj) {
                            Some(appupdate_model::route_status::RouteState::Ready(_)) | None => {
                                None
                            }
                            Some(other) => {
                                Some(format!("{} is no longer taken: {other}", route.reference()))
                            }
                        }
                    }
                    Ok(None) => Some(format!("{} was deleted", route.reference())),
                    Err(e) => Some(format!(
                        "{} could not be read again: {e}",
                        route.reference()
                    )),
                };
                if lost.is_some() {
                    regression = lost;
                    break;
                }
            }
        }
        let Some(what) = regression else {
            progress.set(m.index, "baked: still as rolled out");
            continue;
        };
        progress.set(m.index, &format!("regressed during the bake: {what}"));
        let failed = Err(crate::wait::WaitError::Failed {
            target: format!("deployment.apps/{app}"),
            kubectl_ref: format!("deployment/{app}"),
            namespace: m.cluster.namespace().to_owned(),
            state: format!("it regressed during the bake: {what}"),
        });
        match state {
            ClusterState::Applied { rollout, .. } | ClusterState::Unchanged { rollout } => {
                *rollout = Some(failed);
            }
            _ => {}
        }
    }
}

/// The container and image the plan sets, if it sets one.
fn planned_image(plan: &appupdate_model::plan::Plan) -> Option<(String, String)> {
    plan.changes()
        .filter(|c| c.kind == appupdate_model::plan::Kind::Deployment)
        .flat_map(|c| c.fields.iter())
        .find_map(|f| {
            let container = f
                .path
                .strip_prefix("spec.template.spec.containers[name=")?
                .strip_suffix("].image")?;
            Some((container.to_owned(), f.after()?.as_str()?.to_owned()))
        })
}

/// One cluster to write, with what its dry run prepared.
type Job<'a> = (&'a Member, Option<Ready>);

/// The writing stage of a fleet: what every cluster's writes share.
struct Writing<'a> {
    settings: &'a Settings,
    fleet: &'a FleetSettings,
    /// A cluster failed and `--stop-on-failure` is on: start no new one.
    stopped: AtomicBool,
    interrupt: &'a InterruptFlag,
    progress: &'a Arc<FleetProgress>,
}

impl Writing<'_> {
    /// Runs `jobs`, `--parallel` at a time (by default all at once), starting them in order;
    /// their states by index.
    async fn group(
        &self,
        jobs: Vec<(&Member, Option<Ready>)>,
        follow: bool,
    ) -> Vec<(usize, ClusterState)> {
        let at_once = self.fleet.parallel.unwrap_or(jobs.len()).max(1);
        futures::stream::iter(jobs)
            .map(|(m, r)| async move { (m.index, self.one(m, r, follow).await) })
            .buffer_unordered(at_once)
            .collect()
            .await
    }

    /// One cluster: its writes, its history record and, when `follow`, its rollout. Not
    /// started after a signal, or after a failure elsewhere with `--stop-on-failure`.
    async fn one(&self, m: &Member, ready: Option<Ready>, follow: bool) -> ClusterState {
        let (settings, progress) = (self.settings, self.progress);
        if m.sourced.left_alone {
            progress.set(
                m.index,
                "left alone: the fleet run being undone never applied here",
            );
            return ClusterState::NotStarted(NotStarted::NeverApplied);
        }
        if let Some(revision) = m.sourced.already_applied {
            progress.set(
                m.index,
                &format!("already applied by this plan (revision {revision})"),
            );
            return ClusterState::AlreadyApplied { revision };
        }
        if self.interrupt.get().is_some() {
            progress.set(m.index, "NOT started: interrupted");
            return ClusterState::NotStarted(NotStarted::Interrupted);
        }
        if self.stopped.load(Ordering::SeqCst) {
            progress.set(m.index, "NOT started: another cluster failed");
            return ClusterState::NotStarted(NotStarted::AfterFailure);
        }
        let state = match ready {
            None => {
                let rollout = if follow {
                    let followed = Followed::without_writes(&m.sourced.plan, self.image());
                    self.rollout(m, &followed).await
                } else {
                    None
                };
                ClusterState::Unchanged { rollout }
            }
            Some(Ready {
                preflighted,
                prepared,
            }) => {
                let writes = preflighted.writes();
                progress.set(
                    m.index,
                    &format!(
                        "writing {writes} change{}",
                        if writes == 1 { "" } else { "s" }
                    ),
                );
                let (report, recorded) = run::write_and_record(
                    &m.cluster,
                    &m.sourced,
                    preflighted,
                    prepared,
                    settings,
                    self.interrupt,
                )
                .await;
                progress.set(
                    m.index,
                    if report.went_as_planned() {
                        "updated"
                    } else if report.any_written() {
                        "partly updated"
                    } else {
                        "NOT updated"
                    },
                );
                let rollout = if follow && report.went_as_planned() {
                    let followed = Followed::after_writes(&report, self.image());
                    self.rollout(m, &followed).await
                } else {
                    None
                };
                ClusterState::Applied {
                    report,
                    recorded,
                    rollout,
                }
            }
        };
        if !state.as_planned() && self.fleet.stop_on_failure {
            self.stopped.store(true, Ordering::SeqCst);
        }
        state
    }

    /// The run was given an image: its rollout is followed even where nothing was written.
    fn image(&self) -> bool {
        self.settings.changes_image()
    }

    /// Follows the cluster's rollout and routes (`followed`) as `--wait` does, on its progress
    /// line; `None` when there is nothing to follow or a signal stopped the waiting.
    async fn rollout(&self, m: &Member, followed: &Followed) -> Option<Result<Waited, WaitError>> {
        if followed.is_empty() {
            return None;
        }
        let progress = self.progress;
        let target = WaitTarget {
            namespace: m.cluster.namespace().to_owned(),
            name: m.sourced.plan.app.clone(),
            context: m.cluster.conn.context.clone(),
            as_user: m.cluster.conn.as_user.clone(),
        };
        let timeout = Some(self.settings.wait_timeout).filter(|t| !t.is_zero());
        let mut line = RolloutLine {
            progress: progress.clone(),
            index: m.index,
        };
        progress.busy(
            m.index,
            if followed.rollout {
                "following the rollout"
            } else {
                "following the routes"
            },
        );
        tokio::select! {
            result = wait::follow(
                m.cluster.conn.client.clone(),
                &target,
                followed,
                timeout,
                m.cluster.conn.request_timeout,
                &mut line,
            ) => {
                match &result {
                    Err(e) if e.is_rollout() => progress.set(
                        m.index,
                        &format!("rollout NOT complete: {}", Untrusted(e.to_string())),
                    ),
                    Err(e) => progress.set(
                        m.index,
                        &format!("routes NOT taken up: {}", Untrusted(e.to_string())),
                    ),
                    Ok(waited) if !waited.routes.is_empty() => {
                        progress.set(m.index, &waited.summary());
                    }
                    Ok(_) => {}
                }
                Some(result)
            }
            _ = self.interrupt.raised() => {
                progress.set(m.index, "stopped following the rollout");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{canary_order, wave_order};

    #[test]
    fn the_question_names_the_waves_in_order() {
        let w = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            wave_order(&[w(&["dev"]), w(&["eu-1", "eu-2"]), w(&["us-1"])]),
            "; in 3 waves: dev, then eu-1, eu-2, then us-1"
        );
    }

    #[test]
    fn the_question_names_the_canaries_that_go_first() {
        let names = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(canary_order(&[], 3), "");
        assert_eq!(canary_order(&names(&["eu-1", "eu-2"]), 2), "");
        assert_eq!(
            canary_order(&names(&["eu-1"]), 3),
            "; eu-1 first, the rest after its rollout"
        );
        assert_eq!(
            canary_order(&names(&["eu-1", "eu-2"]), 3),
            "; eu-1, eu-2 first, the rest after their rollouts"
        );
    }
}
