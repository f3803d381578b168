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
//!    starts only if they rolled out), then the others, `--parallel` at a time; with
//!    `--stop-on-failure` (the default) no new cluster starts once one failed.
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
use crate::cluster::Cluster;
use crate::error::{AppError, Stage};
use crate::exit::Ending;
use crate::fleet::{ClusterEnd, ClusterState, FleetEnd, NotStarted};
use crate::fleet_plan::{FleetPlan, Member as PlanMember};
use crate::fleet_progress::{FleetProgress, RolloutLine};
use crate::history_store::{self, Prepared};
use crate::kube_context::Loaded;
use crate::plan_sources::{self, Sourced};
use crate::run;
use crate::settings::{FleetSettings, Settings, SettingsError};
use crate::signals::Signals;
use crate::streams::{self, Streams};
use crate::text::Untrusted;
use crate::wait::{self, Followed, WaitError, WaitTarget, Waited};

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
    /// `--canary`.
    canary: Vec<String>,
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
    if let Some(path) = &settings.plan_out {
        let plans: Vec<(&Sourced, &Cluster)> = planned
            .members
            .iter()
            .map(|m| (&m.sourced, &m.cluster))
            .collect();
        if let Err(e) = run::save_plans(path, &plans, settings.sign_key.as_ref()) {
            return Ending::Failed(e);
        }
        let shown = Untrusted(path.display().to_string());
        streams::notice(&format!(
            "Saved the plan of {} cluster{} to {shown}{}; apply it with: kubectl appupdate apply {shown}",
            plans.len(),
            if plans.len() == 1 { "" } else { "s" },
            run::signed_with(settings.sign_key.as_ref())
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
                let _ = streams.fleet_document(&fleet_plan(&planned), &fleet.canary, None);
            }
            return Ending::Failed(e);
        }
    }

    let interrupt = InterruptFlag::default();
    let progress = FleetProgress::new(
        &planned.contexts,
        &fleet.canary,
        settings.stderr_is_terminal && settings.verbose == 0,
        streams.color(streams::Kind::Notice),
        streams.writer(streams::Kind::Notice),
    );
    let ticker = progress.ticking();
    let states = {
        let applying = apply_all(settings, fleet, &mut planned.members, &interrupt, &progress);
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
        && let Some(saved) = &settings.saved
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
    let contexts = loaded.fleet_contexts(&named, sel.context_selector.as_ref())?;
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
    if let Some(saved) = &settings.saved {
        plan_sources::check_age(saved, now)?;
    }
    let results = join_all(
        contexts
            .iter()
            .map(|context| plan_one(&loaded, settings, context)),
    )
    .await;
    let mut planned = Planned {
        app: settings.app.clone(),
        canary: fleet.canary.clone(),
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
    let saved = match &settings.saved {
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
    let order = canary_order(&canaries, n);
    let question = format!(
        "Apply these changes to {} on {} cluster{} ({}{})? {} to create, {} to update, {} to delete in total",
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
    interrupted: Option<crate::report::Interruption>,
) -> FleetEnd {
    let mut ends: Vec<(usize, ClusterEnd)> = Vec::new();
    for m in &planned.members {
        ends.push((
            m.index,
            ClusterEnd {
                canary: planned.canary.contains(&planned.contexts[m.index]),
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
                canary: planned.canary.contains(&planned.contexts[i]),
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
                canary: planned.canary.contains(&planned.contexts[i]),
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
    let _ = streams.fleet_document(&fleet_plan(planned), &planned.canary, Some(&end));
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
    let (canaries, rest): (Vec<&Member>, Vec<&Member>) = members
        .iter()
        .partition(|m| fleet.canary.contains(&m.cluster.conn.context));
    if !canaries.is_empty() {
        for m in &rest {
            progress.set(m.index, "waiting for the canary");
        }
    }
    let mut take = |m: &Member| ready.get_mut(m.index).and_then(Option::take);
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
    /// Runs `jobs`, `--parallel` at a time, starting them in order; their states by index.
    async fn group(
        &self,
        jobs: Vec<(&Member, Option<Ready>)>,
        follow: bool,
    ) -> Vec<(usize, ClusterState)> {
        futures::stream::iter(jobs)
            .map(|(m, r)| async move { (m.index, self.one(m, r, follow).await) })
            .buffer_unordered(self.fleet.parallel.max(1))
            .collect()
            .await
    }

    /// One cluster: its writes, its history record and, when `follow`, its rollout. Not
    /// started after a signal, or after a failure elsewhere with `--stop-on-failure`.
    async fn one(&self, m: &Member, ready: Option<Ready>, follow: bool) -> ClusterState {
        let (settings, progress) = (self.settings, self.progress);
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
        self.settings.container_update.image.is_some()
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
    use super::canary_order;

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
