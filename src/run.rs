//! The run, start to finish, over one cluster or several: plan (every cluster at once), show,
//! confirm, write (the dry run everywhere first), report, wait — and what a signal does at
//! each stage.
//!
//! A run over one cluster is a fleet of one: the same planning ([`planning`]) and the same
//! writing ([`writing`]). What differs is how it is told ([`View`]): one cluster's plan,
//! question, report and exit code as the plugin has always told them, then its rollout
//! (`--wait`) and its auth check (`--verify-url`); or a fleet's sections with identical plans
//! folded, one question for every cluster, a progress line per cluster while writing, and the
//! fleet's report (with `-o json|yaml`, one document with each cluster's plan and outcome).
//! A cluster that cannot be planned ends a run over one cluster with its error; in a fleet it
//! stops the run before any write, naming it — or, with `--skip-unreachable`, is left out.
//!
//! Until the first write, a signal ends the run at once: nothing was changed. While writing,
//! the first signal stops new requests (and new clusters) from starting — the ones in flight
//! finish and are reported, and a fleet stops following rollouts — and a second one ends the
//! run at once. While following one cluster's rollout and routes (`--wait`), a signal only
//! stops the waiting: the writes are done.

use crate::apply::InterruptFlag;
use crate::confirm::{self, Answer, NotConfirmed};
use crate::error::{AppError, Stage};
use crate::exit::Ending;
use crate::fleet::{ClusterEnd, ClusterState, FleetEnd, NotStarted};
use crate::fleet_progress::FleetProgress;
use crate::history_store;
use crate::planning::{self, Member, Planned};
use crate::settings::{FleetSettings, HistorySettings, SavePlan, Settings};
use crate::signals::Signals;
use crate::streams::{self, Streams};
use crate::wait::{self, Followed, WaitTarget};
use crate::writing;
use appupdate_kube::cluster::Cluster;
use appupdate_kube::kube_context;
use appupdate_kube::probe;
use appupdate_model::plan::Plan;
use appupdate_model::report::Interruption;
use appupdate_model::text::Untrusted;
use appupdate_model::verify::{self, Probe};
use appupdate_plan::history;
use appupdate_plan::history::Source;
use appupdate_plan::plan_file::{self, Origin, PlanKey};

/// How the run is told: one cluster, or a fleet.
#[derive(Clone, Copy, PartialEq, Eq)]
enum View {
    One,
    Fleet,
}

/// One run: what it was asked, how it is told, where it prints.
#[derive(Clone, Copy)]
struct Run<'a> {
    settings: &'a Settings,
    /// A fleet's order, or one cluster's ([`FleetSettings::one`]).
    fleet: &'a FleetSettings,
    view: View,
    streams: &'a Streams,
}

/// Runs the update, undo or saved plan that `settings` describe, over one cluster or several;
/// says how it ended. Everything it prints goes through `streams`, except the reason it
/// failed: that is the caller's to print.
pub async fn run(settings: &Settings, streams: &Streams) -> Ending {
    let one = FleetSettings::one();
    let (fleet, view) = match &settings.fleet {
        Some(fleet) => (fleet, View::Fleet),
        None => (&one, View::One),
    };
    let mut signals = Signals::listen();
    let planned = tokio::select! {
        planned = planning::plan_all(settings, fleet) => planned,
        signal = signals.recv() => Err(AppError::Interrupted { signal, stage: Stage::Planning }),
    };
    let mut planned = match planned {
        Ok(p) => p,
        Err(e) => return Ending::Failed(e),
    };
    let run = Run {
        settings,
        fleet,
        view,
        streams,
    };
    let ending = run.run_planned(&mut signals, &mut planned).await;
    // The process ends now: the plans and the live objects are not freed (the system takes the
    // memory back at once, where freeing thousands of objects value by value costs about as
    // much CPU as building them did).
    std::mem::forget(planned);
    ending
}

impl Run<'_> {
    /// Everything after planning: show, confirm, write, report, wait.
    async fn run_planned(&self, signals: &mut Signals, planned: &mut Planned) -> Ending {
        let Run {
            settings,
            view,
            streams,
            ..
        } = *self;
        if view == View::One {
            if let Some((_, e)) = planned.failed.pop() {
                return Ending::Failed(e);
            }
            // A saved plan that no longer holds is refused before it is shown.
            if let Some(refused) = planned.members.iter_mut().find_map(|m| m.refused.take()) {
                let _ = streams.report(&refused);
                return Ending::Applied(refused);
            }
        }
        if let Err(e) = self.show(planned) {
            return Ending::Failed(e);
        }
        if let Some(ending) = self.refused(planned) {
            return ending;
        }
        let has_changes = planned.has_changes();
        let changes_pending = settings.detailed_exitcode && has_changes;
        if let Some(save) = settings.save() {
            return match self.save_plans(save, planned) {
                Ok(()) => self.stop(planned, changes_pending),
                Err(e) => Ending::Failed(e),
            };
        }
        // Nothing to write and nothing to follow, or a dry run: the plan was the run.
        if settings.dry_run || (!has_changes && !settings.wait && settings.verify.is_none()) {
            return self.stop(planned, changes_pending);
        }
        // Nobody reads the diff under --yes: a removal it shows of what a route carried and its
        // style does not write is refused (a saved plan's diff was there to review).
        if settings.yes
            && settings.saved().is_none()
            && let Some(message) = unseen_removals(planned, view)
        {
            return Ending::Failed(AppError::UnseenRemoval { message });
        }
        if has_changes && !settings.yes {
            let asked = tokio::select! {
                asked = self.confirm(planned) => asked,
                signal = signals.recv() => {
                    // The prompt may be showing: it leaves the terminal raw and the cursor hidden.
                    if settings.stderr_is_terminal {
                        crate::terminal::restore();
                        let _ = console::Term::stderr().show_cursor();
                    }
                    Err(AppError::Interrupted { signal, stage: Stage::Planning })
                }
            };
            if let Err(e) = asked {
                if view == View::Fleet && matches!(e, AppError::NotConfirmed(_)) {
                    let _ = streams.fleet_document(&planned.fleet_plan(), &planned.order, None);
                }
                return Ending::Failed(e);
            }
        }
        self.write(signals, planned).await
    }

    /// Once the plans were shown: an undo that would overwrite fields changed since its record,
    /// a saved plan that no longer holds, or (in a fleet) a cluster that could not be planned
    /// ends the run with nothing written anywhere.
    fn refused(&self, planned: &mut Planned) -> Option<Ending> {
        let Run { view, streams, .. } = *self;
        let refused = planned.members.iter().any(|m| m.refused.is_some());
        let undo_refused = planned.members.iter().any(|m| m.sourced.refusal.is_some());
        if !refused && !undo_refused && planned.failed.is_empty() {
            return None;
        }
        if view == View::One {
            let message = planned
                .members
                .iter_mut()
                .find_map(|m| m.sourced.refusal.take())?;
            return Some(Ending::Failed(AppError::UndoRefused { message }));
        }
        let end = end_of(
            planned,
            |m| {
                if let Some(message) = m.sourced.refusal.take() {
                    ClusterState::Failed(AppError::UndoRefused { message })
                } else if let Some(report) = m.refused.take() {
                    ClusterState::Refused(report)
                } else if refused {
                    ClusterState::NotStarted(NotStarted::PlanRefusedElsewhere)
                } else {
                    ClusterState::Planned
                }
            },
            false,
            None,
        );
        Some(finish(streams, planned, end, true))
    }

    /// From the dry run to the last write, then the report: one cluster's (with its rollout and
    /// auth check afterwards), or the fleet's.
    async fn write(&self, signals: &mut Signals, planned: &mut Planned) -> Ending {
        let Run {
            settings,
            fleet,
            view,
            streams,
        } = *self;
        // The writes do not need the live objects as read: planning is over.
        for m in &mut planned.members {
            m.sourced.live = None;
        }
        let interrupt = InterruptFlag::default();
        let progress = match view {
            // One cluster's writes are told by its report, once they are done.
            View::One => FleetProgress::hidden(),
            View::Fleet => FleetProgress::new(
                &planned.contexts,
                &planned.order,
                settings.stderr_is_terminal && settings.verbose == 0,
                streams.color(streams::Kind::Notice),
                streams.writer(streams::Kind::Notice),
            ),
        };
        let ticker = (view == View::Fleet).then(|| progress.ticking());
        let stopped = |progress: &FleetProgress| {
            if let Some(ticker) = &ticker {
                ticker.abort();
            }
            progress.finish();
        };
        // A fleet follows each cluster's rollout as it goes: the next wave waits on it.
        let follow = view == View::Fleet && settings.wait;
        let states = {
            let applying = writing::apply_all(
                settings,
                fleet,
                &planned.order,
                &planned.members,
                follow,
                &interrupt,
                &progress,
            );
            tokio::pin!(applying);
            loop {
                tokio::select! {
                    states = &mut applying => break states,
                    signal = signals.recv() => {
                        if !interrupt.raise(signal) {
                            stopped(&progress);
                            return Ending::Failed(AppError::Interrupted { signal, stage: Stage::Writing });
                        }
                        progress.notice(match view {
                            View::One => "\ninterrupt received: finishing the requests in flight, starting no new ones (interrupt again to exit at once)",
                            View::Fleet => "\ninterrupt received: finishing the requests in flight, starting no new cluster and no new request (interrupt again to exit at once)",
                        });
                    }
                }
            }
        };
        stopped(&progress);
        let mut states: Vec<Option<ClusterState>> = states.into_iter().map(Some).collect();
        if view == View::One
            && let (Some(member), Some(Some(state))) = (planned.members.first(), states.pop())
        {
            return self
                .afterwards(signals, member, state, interrupt.get())
                .await;
        }
        let end = end_of(
            planned,
            |m| {
                states
                    .get_mut(m.index)
                    .and_then(Option::take)
                    .unwrap_or(ClusterState::NotStarted(NotStarted::Interrupted))
            },
            false,
            interrupt.get(),
        );
        finish(streams, planned, end, true)
    }

    /// The plan, as a diff on stdout (`-o json|yaml`: a document; a fleet's comes at the end).
    fn show(&self, planned: &Planned) -> Result<(), AppError> {
        match self.view {
            View::One => {
                if let Some(m) = planned.members.first() {
                    self.streams.plan(&m.sourced.plan)?;
                    if let Some(w) = frozen_history(self.settings, m) {
                        streams::notice(&w);
                    }
                }
            }
            View::Fleet => {
                if !planned.members.is_empty() || !planned.skipped.is_empty() {
                    self.streams.fleet_plan(&planned.fleet_plan())?;
                }
                for m in &planned.members {
                    if let Some(w) = frozen_history(self.settings, m) {
                        streams::notice(&format!("[{}] {w}", Untrusted(&m.cluster.conn.context)));
                    }
                }
            }
        }
        Ok(())
    }

    /// The end of a run that writes nothing: one cluster's `--detailed-exitcode`, or the
    /// fleet's document with each cluster planned (or unchanged).
    fn stop(&self, planned: &mut Planned, changes_pending: bool) -> Ending {
        let streams = self.streams;
        match self.view {
            View::One if changes_pending => Ending::ChangesPending,
            View::One => Ending::Done,
            View::Fleet => {
                let end = end_of(
                    planned,
                    |m| {
                        if let Some(revision) = m.sourced.already_applied {
                            ClusterState::AlreadyApplied { revision }
                        } else if m.sourced.plan.has_changes() {
                            ClusterState::Planned
                        } else {
                            ClusterState::Unchanged { rollout: None }
                        }
                    },
                    changes_pending,
                    None,
                );
                finish(streams, planned, end, false)
            }
        }
    }

    /// One cluster after its writes: the report, then its rollout and routes (`--wait`) and the
    /// requests of `--verify-url`.
    async fn afterwards(
        &self,
        signals: &mut Signals,
        member: &Member,
        state: ClusterState,
        interrupted: Option<Interruption>,
    ) -> Ending {
        let Run {
            settings, streams, ..
        } = *self;
        let cluster = &member.cluster;
        let image = settings.changes_image();
        let (followed, afterwards, report) = match state {
            ClusterState::Applied {
                report, recorded, ..
            } => {
                // The writes are done: a report that cannot be shown (say, stdout closed) does not
                // change what the exit code must say about them.
                let _ = streams.report(&report);
                let _ = streams.recorded(&recorded);
                if !report.went_as_planned() {
                    return Ending::Applied(report);
                }
                let afterwards = match &recorded {
                    history_store::Recorded::Revision { .. } => {
                        verify::Afterwards::Undo(verify::undo_command(
                            &settings.app,
                            cluster.namespace(),
                            &cluster.conn.context,
                        ))
                    }
                    _ => verify::Afterwards::NotRecorded,
                };
                (
                    Followed::after_writes(&report, image),
                    afterwards,
                    Some(report),
                )
            }
            // Nothing to write: `--wait` follows the rollout and the routes (a re-run after a
            // timeout), `--verify-url` checks the routes.
            ClusterState::Unchanged { .. } => (
                Followed::without_writes(&member.sourced.plan, image),
                verify::Afterwards::NothingChanged,
                None,
            ),
            ClusterState::Refused(report) => {
                let _ = streams.report(&report);
                return Ending::Applied(report);
            }
            ClusterState::Failed(e) => return Ending::Failed(e),
            // A signal during the dry run: nothing was written.
            ClusterState::NotStarted(_) => {
                return match interrupted {
                    Some(signal) => Ending::Failed(AppError::Interrupted {
                        signal,
                        stage: Stage::Planning,
                    }),
                    None => Ending::Done,
                };
            }
            _ => return Ending::Done,
        };
        let probes = settings
            .verify
            .as_ref()
            .map(|_| verify::probes(&member.sourced.plan));
        let rollout = if settings.wait {
            follow_written(cluster, &followed, settings, signals, streams).await
        } else {
            Ok(())
        };
        match verified(rollout, probes, afterwards, settings, signals, streams).await {
            Ok(()) => report.map_or(Ending::Done, Ending::Applied),
            Err(e) => Ending::Failed(e),
        }
    }

    /// `--plan-out`: each cluster's plan and where it was computed, as one file (signed with
    /// the key when given), and a notice of where it went.
    fn save_plans(&self, save: &SavePlan, planned: &Planned) -> Result<(), AppError> {
        let created_at = k8s_openapi::jiff::Timestamp::now()
            .round(k8s_openapi::jiff::Unit::Second)
            .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now())
            .to_string();
        let origins: Vec<Origin> = planned
            .members
            .iter()
            .map(|m| Origin {
                context: m.cluster.conn.context.clone(),
                server: m.cluster.conn.server.clone(),
                created_at: created_at.clone(),
            })
            .collect();
        let entries: Vec<(&Plan, &Origin, &Source)> = planned
            .members
            .iter()
            .zip(&origins)
            .map(|(m, origin)| (&m.sourced.plan, origin, &m.sourced.source))
            .collect();
        let key = save.key.as_ref();
        let saved = plan_file::render_in_waves(&entries, &planned.order.waves, key)?;
        let path = &save.path;
        write_new(path, saved.text.as_bytes()).map_err(|source| AppError::PlanOut {
            file: path.display().to_string(),
            source,
        })?;
        let shown = Untrusted(path.display().to_string());
        let what = match (self.view, entries.len()) {
            (View::One, _) => String::new(),
            (View::Fleet, 1) => " of 1 cluster".to_owned(),
            (View::Fleet, n) => format!(" of {n} clusters"),
        };
        // The checksum binds `apply` to exactly this plan (`--checksum`).
        streams::notice(&format!(
            "Saved the plan{what} to {shown}{}; apply it with: kubectl appupdate apply {shown} --checksum {}",
            signed_with(key),
            saved.checksum
        ));
        Ok(())
    }
}

/// Writes `bytes` to `path` through a new file of a random name, created exclusively in the
/// same directory (so that nothing planted there is opened or followed), then renamed over
/// `path`: a symlink at `path` is replaced, not written through, and a reader never sees half a
/// plan. The new file gets the permissions a created file always gets (0666 less the umask).
fn write_new(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(".plan-out-").suffix(".tmp");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut file = builder.tempfile_in(dir)?;
    file.write_all(bytes)?;
    file.as_file().sync_all()?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// The routes a plan updates that carry what their style does not write (`RouteInfo::foreign`:
/// ingress-nginx annotations, HTTPRoute filters), which the update removes: the refusal of a
/// run under `--yes`, naming each route and what it loses; `None` when there are none.
fn unseen_removals(planned: &Planned, view: View) -> Option<String> {
    use appupdate_model::plan::Action;
    let routes: Vec<String> = planned
        .members
        .iter()
        .flat_map(|m| {
            let context = &m.cluster.conn.context;
            m.sourced.plan.changes().filter_map(move |c| {
                let info = c.route.as_ref()?;
                if c.action() != Action::Update || info.foreign.is_empty() {
                    return None;
                }
                let removed: Vec<String> = info
                    .foreign
                    .iter()
                    .map(|f| Untrusted(f).to_string())
                    .collect();
                let at = match view {
                    View::Fleet => format!(" in context {:?}", Untrusted(context)),
                    View::One => String::new(),
                };
                Some(format!(
                    "{}{at} ({})",
                    Untrusted(&c.reference()),
                    removed.join(", ")
                ))
            })
        })
        .collect();
    if routes.is_empty() {
        return None;
    }
    Some(format!(
        "not applied: routes this run updates carry what their style does not write, which the run removes, and with --yes nobody saw that in the diff: {}; run without --yes to review and confirm the removal, or remove it from the routes first; nothing was written",
        routes.join("; ")
    ))
}

/// What the notice of a saved plan says about its signature: `, signed with --sign-key KEYFILE`
/// (the key's file, never the key), or nothing.
fn signed_with(key: Option<&PlanKey>) -> String {
    key.map(|k| format!(", signed with {}", k.named()))
        .unwrap_or_default()
}

impl Run<'_> {
    /// The one question: what is applied where, on a line of its own, then whether to apply it;
    /// `Ok` only for a yes. A fleet's names its clusters and their order, with its totals; with
    /// `-o json|yaml` (the document comes at the end) the fleet's plan is shown with it, on
    /// stderr.
    async fn confirm(&self, planned: &Planned) -> Result<(), AppError> {
        let Run {
            settings,
            view,
            streams,
            ..
        } = *self;
        if !settings.can_prompt {
            return Err(NotConfirmed::NoTerminal.into());
        }
        let what = match (view, planned.members.first()) {
            (View::One, Some(m)) => {
                let plan = &m.sourced.plan;
                let summary = plan.summary();
                format!(
                    "Apply these changes to {} in namespace {} (context {}): {} to create, {} to update, {} to delete.",
                    Untrusted(&plan.app),
                    Untrusted(&plan.namespace),
                    Untrusted(&plan.context),
                    summary.create,
                    summary.update,
                    summary.delete
                )
            }
            _ => {
                let fleet = planned.fleet_plan();
                streams.fleet_review(&fleet)?;
                let t = fleet.total();
                let n = fleet.plans().count();
                let canaries: Vec<String> = fleet
                    .plans()
                    .filter(|p| planned.order.canary.contains(&p.context))
                    .map(|p| Untrusted(&p.context).to_string())
                    .collect();
                let order = if planned.order.waves.is_empty() {
                    canary_order(&canaries, n)
                } else {
                    wave_order(&planned.order.waves)
                };
                format!(
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
                )
            }
        };
        ask(what, settings).await
    }
}

/// Says `what` (escaped) on a line of its own, then asks on the terminal whether to apply it,
/// in a question that fits the terminal's width (dialoguer draws a question that wraps once
/// per line it takes); `Ok` only for a yes.
async fn ask(what: String, settings: &Settings) -> Result<(), AppError> {
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

/// The end of a fleet's run: `state` for each planned cluster, the skipped and failed ones as
/// they are.
fn end_of(
    planned: &mut Planned,
    mut state: impl FnMut(&mut Member) -> ClusterState,
    changes_pending: bool,
    interrupted: Option<Interruption>,
) -> FleetEnd {
    let canary = |i: usize| planned.order.canary.contains(&planned.contexts[i]);
    let mut ends: Vec<(usize, ClusterEnd)> = Vec::new();
    let end = |i: usize, namespace: Option<String>, state: ClusterState| ClusterEnd {
        canary: canary(i),
        context: planned.contexts[i].clone(),
        namespace,
        state,
    };
    for m in &mut planned.members {
        let namespace = Some(m.cluster.namespace().to_owned());
        ends.push((m.index, end(m.index, namespace, state(m))));
    }
    for (i, _, e) in planned.skipped.drain(..) {
        ends.push((i, end(i, None, ClusterState::Skipped(e))));
    }
    for (i, e) in planned.failed.drain(..) {
        ends.push((i, end(i, None, ClusterState::Failed(e))));
    }
    ends.sort_by_key(|(i, _)| *i);
    FleetEnd {
        app: planned.app.clone(),
        clusters: ends.into_iter().map(|(_, e)| e).collect(),
        interrupted,
        changes_pending,
    }
}

/// Says how a fleet's run ended (the report, when `report`; the document with `-o
/// json|yaml`) and returns the ending.
fn finish(streams: &Streams, planned: &Planned, end: FleetEnd, report: bool) -> Ending {
    if report {
        let _ = streams.fleet_report(&end);
    }
    let _ = streams.fleet_document(&planned.fleet_plan(), &planned.order, Some(&end));
    Ending::Fleet(end)
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
        answers = probe::send_all(&probes, verify) => answers,
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
    let target = WaitTarget::of(cluster, &settings.app);
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
    let following = wait::follow_in(
        cluster,
        &settings.app,
        followed,
        settings.wait_timeout,
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
    let cluster = planning::connected(conn, settings.verbose, None);
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
    let mut stored = history::History::from_config_map(cm.as_ref(), &settings.app);
    if let Some(seal) =
        crate::history_store::seal(&cluster, &settings.app, settings.history_key.as_ref())
    {
        stored.check_signatures(&seal);
    }
    if stored.is_empty() && settings.output == crate::cli::HistoryFormat::Table {
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

/// The warning, said with the plan (before the question), that `m`'s change will not be
/// recorded: its history ConfigMap is immutable (`immutable: true`), so no record can be
/// added to it and `--undo` will not know the change.
fn frozen_history(settings: &Settings, m: &Member) -> Option<String> {
    let Some(Some(cm)) = &m.sourced.config_map else {
        return None;
    };
    if settings.history_max == 0 || cm["immutable"] != true || !m.sourced.plan.has_changes() {
        return None;
    }
    Some(format!(
        "warning: configmap/{} is immutable, so this change will not be recorded in the history and --undo will not know it; whoever may delete ConfigMaps can delete it to record again (the next run that records creates it anew)",
        Untrusted(&history::config_map_name(&m.sourced.plan.app))
    ))
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
