//! The run, start to finish, over one cluster or several: plan (every cluster at once), show,
//! confirm, write (the dry run everywhere first), report, wait — and what a signal does at
//! each stage.
//!
//! A run over one cluster is a fleet of one: the same planning ([`planning`]) and the same
//! writing ([`writing`]). What differs is how it is told, behind one interface
//! ([`telling::Telling`]: [`telling::OneCluster`], [`telling::Fleet`]), chosen once.
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
use crate::fleet::ClusterState;
use crate::fleet_progress::FleetProgress;
use crate::plan_sources::Standing;
use crate::planning::{self, Member, Planned};
use crate::put_back;
use crate::settings::{FleetSettings, HistorySettings, SavePlan, Settings};
use crate::signals::Signals;
use crate::streams::{self, Streams};
use crate::telling::{self, Telling};
use crate::writing;
use appupdate_kube::kube_context;
use appupdate_model::report::Interruption;
use appupdate_model::text::Untrusted;
use appupdate_plan::history;
use appupdate_plan::plan_file::{self, Origin, PlanKey};

/// One run: what it was asked, how it is told, where it prints.
struct Run<'a, T: Telling> {
    settings: &'a Settings,
    /// A fleet's order, or one cluster's ([`FleetSettings::one`]).
    fleet: &'a FleetSettings,
    telling: &'a T,
    streams: &'a Streams,
}

/// Runs the update, undo or saved plan that `settings` describe, over one cluster or several;
/// says how it ended. Everything it prints goes through `streams`, except the reason it
/// failed: that is the caller's to print.
pub async fn run(settings: &Settings, streams: &Streams) -> Ending {
    // The one place that knows what the run covers: how it is told is chosen here.
    match &settings.fleet {
        Some(fleet) => run_told(settings, fleet, &telling::Fleet, streams).await,
        None => {
            run_told(
                settings,
                &FleetSettings::one(),
                &telling::OneCluster,
                streams,
            )
            .await
        }
    }
}

async fn run_told<T: Telling>(
    settings: &Settings,
    fleet: &FleetSettings,
    telling: &T,
    streams: &Streams,
) -> Ending {
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
        telling,
        streams,
    };
    let ending = run.run_planned(&mut signals, &mut planned).await;
    // The process ends now: the plans and the live objects are not freed (the system takes the
    // memory back at once, where freeing thousands of objects value by value costs about as
    // much CPU as building them did).
    std::mem::forget(planned);
    ending
}

impl<T: Telling> Run<'_, T> {
    /// Everything after planning: show, confirm, write, report, wait.
    async fn run_planned(&self, signals: &mut Signals, planned: &mut Planned) -> Ending {
        let Run {
            settings,
            telling,
            streams,
            ..
        } = *self;
        if let Some(ending) = telling.before_showing(streams, planned) {
            return ending;
        }
        if let Err(e) = telling.show(settings, streams, planned) {
            return Ending::Failed(e);
        }
        if let Some(ending) = self.refused(planned) {
            return ending;
        }
        tell_owners(planned, telling, settings.saved().map(|s| s.name.as_str()));
        let has_changes = planned.has_changes();
        let changes_pending = settings.detailed_exitcode() && has_changes;
        if let Some(save) = settings.save() {
            return match self.save_plans(save, planned) {
                Ok(()) => telling.stop(streams, planned, changes_pending),
                Err(e) => Ending::Failed(e),
            };
        }
        // Nothing to write and nothing to follow, or a dry run: the plan was the run.
        if settings.dry_run() || (!has_changes && !settings.wait() && settings.verify().is_none()) {
            return telling.stop(streams, planned, changes_pending);
        }
        // Nobody reads the diff under --yes: a removal it shows of what a route carried and its
        // style does not write is refused (a saved plan's diff was there to review).
        if settings.yes
            && settings.saved().is_none()
            && let Some(message) = unseen_removals(planned, telling)
        {
            return Ending::Failed(AppError::UnseenRemoval { message });
        }
        // Nobody reads the plan under --yes: a change to fields another tool owns is refused
        // before any write, unless --force-conflicts says to write anyway; in a fleet, each
        // cluster with owners is refused with its own, and nothing is written anywhere.
        if settings.yes && !settings.force_conflicts {
            let saved = settings.saved().map(|s| s.name.as_str());
            let mut any = false;
            for m in planned.members_mut() {
                if let Some(message) = owned(m, telling, saved) {
                    m.sourced.standing = Standing::Refused(Box::new(AppError::Owned { message }));
                    any = true;
                }
            }
            if any && let Some(ending) = self.refused(planned) {
                return ending;
            }
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
                if matches!(e, AppError::NotConfirmed(_)) {
                    telling.not_confirmed(streams, planned);
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
        let drifted = planned
            .members()
            .any(|m| matches!(m.sourced.standing, Standing::Drifted(_)));
        let refused = planned
            .members()
            .any(|m| matches!(m.sourced.standing, Standing::Refused(_)));
        if !drifted && !refused && !planned.any_failed() {
            return None;
        }
        self.telling.refused(self.streams, planned, drifted)
    }

    /// From the dry run to the last write, then the report: one cluster's (with its rollout and
    /// auth check afterwards), or the fleet's.
    async fn write(&self, signals: &mut Signals, planned: &mut Planned) -> Ending {
        let Run {
            settings,
            fleet,
            telling,
            streams,
        } = *self;
        // The writes do not need the live objects as read: planning is over.
        for m in planned.members_mut() {
            m.sourced.live = None;
        }
        let interrupt = InterruptFlag::default();
        let (progress, ticks) = telling.progress(settings, streams, planned);
        let ticker = ticks.then(|| progress.ticking());
        let stopped = |progress: &FleetProgress| {
            if let Some(ticker) = &ticker {
                ticker.abort();
            }
            progress.finish();
        };
        let follow = telling.follows_while_writing(settings);
        let members: Vec<&Member> = planned.members().collect();
        let mut states = {
            let applying = writing::apply_all(
                settings,
                fleet,
                &planned.order,
                &members,
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
                        progress.notice(telling.interrupt_notice());
                    }
                }
            }
        };
        // Where the rollouts are followed while writing (a fleet), a failed run is put back
        // here; a signal starts no writes, so it puts nothing back.
        if follow && settings.follow.undo_on_failure && interrupt.get().is_none() {
            let putting_back = put_back::put_back_fleet(
                settings,
                fleet,
                &planned.order,
                &members,
                &mut states,
                &progress,
            );
            tokio::select! {
                () = putting_back => {}
                signal = signals.recv() => {
                    stopped(&progress);
                    return Ending::Failed(AppError::Interrupted { signal, stage: Stage::Writing });
                }
            }
        }
        stopped(&progress);
        let states: Vec<Option<ClusterState>> = states.into_iter().map(Some).collect();
        telling
            .written(settings, streams, signals, planned, states, interrupt.get())
            .await
    }

    /// `--plan-out`: each cluster's plan and where it was computed, as one file (signed with
    /// the key when given), and a notice of where it went.
    fn save_plans(&self, save: &SavePlan, planned: &Planned) -> Result<(), AppError> {
        let created_at = k8s_openapi::jiff::Timestamp::now()
            .round(k8s_openapi::jiff::Unit::Second)
            .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now())
            .to_string();
        let origins: Vec<Origin> = planned
            .members()
            .map(|m| Origin {
                context: m.cluster.conn.context.clone(),
                server: m.cluster.conn.server.clone(),
                created_at: created_at.clone(),
            })
            .collect();
        let entries: Vec<plan_file::Saving<'_>> = planned
            .members()
            .zip(&origins)
            .map(|(m, origin)| {
                (
                    &m.sourced.plan,
                    origin,
                    &m.sourced.source,
                    &m.sourced.owners[..],
                )
            })
            .collect();
        let key = save.key.as_ref();
        let saved = plan_file::render_in_waves(&entries, &planned.order.waves, key)?;
        let path = &save.path;
        write_new(path, saved.text.as_bytes()).map_err(|source| AppError::PlanOut {
            file: path.display().to_string(),
            source,
        })?;
        let shown = Untrusted(path.display().to_string());
        let what = self.telling.saved_what(entries.len());
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

/// Each owner of each changed object, one line each on stderr after the plan:
/// `owner: deployment/web: Helm release shop/web holds .spec…image (apply-conflict): the next
/// `helm upgrade` of release shop/web will conflict on .spec…image`; applying a saved plan
/// (`saved`: its file), an owner it did not show is said to be new since.
fn tell_owners(planned: &Planned, telling: &impl Telling, saved: Option<&str>) {
    for m in planned.members() {
        let at = telling.located(&m.cluster.conn.context);
        for object in &m.sourced.owners {
            for owner in &object.owners {
                let since = match saved {
                    Some(file) if m.sourced.unseen_owner(&object.object, owner) => format!(
                        " (not in {}: an owner since the plan was written)",
                        Untrusted(file)
                    ),
                    _ => String::new(),
                };
                let holds = if owner.fields.is_empty() {
                    "owns the whole object".to_owned()
                } else {
                    format!(
                        "holds {}",
                        owner
                            .fields
                            .iter()
                            .map(|f| format!(".{f}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                };
                streams::notice(&format!(
                    "owner: {}{at}: {} {} ({}): {}{since}",
                    Untrusted(&object.object),
                    Untrusted(&owner.name()),
                    Untrusted(&holds),
                    owner.reason.code(),
                    Untrusted(&owner.consequence())
                ));
            }
        }
    }
}

/// What the refusal adds of `owner` of `object` when a saved plan (`saved`: its file) is
/// applied: that the plan did not show it (it became an owner after the plan was written), or
/// that it did.
fn since_the_plan(
    sourced: &crate::plan_sources::Sourced,
    object: &str,
    owner: &appupdate_model::owners::Owner,
    saved: Option<&str>,
) -> String {
    let Some(file) = saved else {
        return String::new();
    };
    if sourced.unseen_owner(object, owner) {
        format!(
            ", which {} did not show: it became an owner after the plan was written",
            Untrusted(file)
        )
    } else {
        format!(", as {} showed", Untrusted(file))
    }
}

/// The refusal of a cluster's change to fields other tools own, when there is one. Applying
/// a saved plan (`saved`: its file) refuses alike, whether the plan showed the owner or not
/// (its reviewer approved a plan that named the owner, not overriding it under `--yes`); each
/// owner the plan did not show is said to be new since.
fn owned(m: &Member, telling: &impl Telling, saved: Option<&str>) -> Option<String> {
    let at = telling.located(&m.cluster.conn.context);
    let owned: Vec<String> = m
        .sourced
        .owners
        .iter()
        .flat_map(|object| {
            let at = &at;
            object.owners.iter().map(move |owner| {
                format!(
                    "{}{at} is owned by {} ({}){}",
                    Untrusted(&object.object),
                    Untrusted(&owner.name()),
                    Untrusted(&owner.consequence()),
                    since_the_plan(&m.sourced, &object.object, owner, saved)
                )
            })
        })
        .collect();
    if owned.is_empty() {
        return None;
    }
    Some(format!(
        "not applied: {}; change it through its owner, or pass --force-conflicts to write anyway; nothing was written",
        owned.join("; ")
    ))
}

/// The routes a plan updates that carry what their style does not write (`RouteInfo::foreign`:
/// ingress-nginx annotations, HTTPRoute filters), which the update removes: the refusal of a
/// run under `--yes`, naming each route and what it loses; `None` when there are none.
fn unseen_removals(planned: &Planned, telling: &impl Telling) -> Option<String> {
    use appupdate_model::plan::Action;
    let routes: Vec<String> = planned
        .members()
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
                let at = telling.located(context);
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

impl<T: Telling> Run<'_, T> {
    /// The one question: what is applied where, on a line of its own, then whether to apply it;
    /// `Ok` only for a yes. A fleet's names its clusters and their order, with its totals; with
    /// `-o json|yaml` (the document comes at the end) the fleet's plan is shown with it, on
    /// stderr.
    async fn confirm(&self, planned: &Planned) -> Result<(), AppError> {
        if !self.settings.can_prompt {
            return Err(NotConfirmed::NoTerminal.into());
        }
        let what = self.telling.question(self.streams, planned)?;
        ask(what, self.settings).await
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
