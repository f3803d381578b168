//! Writing, for one cluster or several: from the server-side dry run to the last write and
//! its history record. Every cluster is one step — its writes, its record and, when asked,
//! its rollout — and the steps run in groups: everyone at once, the canaries and then the
//! rest, or the waves, each group starting once the one before it ended within its failure
//! budget. A run over one cluster is one group of one, its rollout followed afterwards.
//!
//! Before the first write anywhere: the dry run on every cluster, all at once; any refusal
//! stops the run with nothing written anywhere. A run that writes one object in one cluster
//! skips it: that write is its own check ([`writes_one_object`]). Then the writes, with the
//! conditional writes, retries and guard of [`apply`]; with `--stop-on-failure` (a fleet's
//! default) no new cluster starts once one failed, and after a signal no new cluster and no new
//! request starts.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;

use crate::apply::{self, ApplyOptions, InterruptFlag, Preflighted};
use crate::fleet::{self, ClusterState, FleetOrder, NotStarted};
use crate::fleet_progress::{FleetProgress, RolloutLine};
use crate::history_store::{self, Prepared};
use crate::plan_sources::{Sourced, Standing};
use crate::planning::Member;
use crate::settings::{FleetSettings, Settings};
use crate::wait::{self, Followed, WaitError, Waited};
use appupdate_kube::cluster::Cluster;
use appupdate_model::plan::Field;
use appupdate_model::report::Report;
use appupdate_model::text::Untrusted;
use appupdate_plan::history;

/// What the dry run left to do in one cluster.
struct Ready {
    preflighted: Preflighted,
    /// The history as read, and who we are (`None`: `--history-max 0`).
    prepared: Option<Prepared>,
}

/// Clusters written together: everyone, the canaries or the rest, or a wave.
struct Group<'a> {
    members: Vec<&'a Member>,
    /// Follow each cluster's rollout in its step (a canary's always: the rest waits on it).
    follow: bool,
}

/// How the groups follow each other, for what a cluster not started is told.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    /// One group.
    All,
    /// The canaries, then the rest once every canary applied and rolled out.
    Canary,
    /// `--wave`s, each once the one before ended within `--max-failed`.
    Waves,
}

/// Everything from the dry run to the last write: the state of each cluster, by index
/// (clusters not reached are not started). `follow`: each cluster's rollout is followed in
/// its step (a fleet's `--wait`).
pub(crate) async fn apply_all(
    settings: &Settings,
    fleet: &FleetSettings,
    order: &FleetOrder,
    members: &[&Member],
    follow: bool,
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
    let mut ready = match dry_run_all(settings, members, interrupt, progress, &mut states).await {
        Some(ready) => ready,
        None => return done(states),
    };

    let writing = Writing {
        settings,
        fleet,
        stopped: AtomicBool::new(false),
        interrupt,
        progress,
    };
    let (kind, groups) = groups(order, members, follow);
    for (w, group) in groups.iter().enumerate().skip(1) {
        let waiting = match kind {
            Order::Waves => format!("waiting for wave {w}"),
            _ => "waiting for the canary".to_owned(),
        };
        for m in &group.members {
            progress.set(m.index, &waiting);
        }
    }
    let mut jobs: Vec<Option<Vec<Job>>> = groups
        .iter()
        .map(|g| {
            let jobs = g.members.iter().map(|&m| {
                let r = ready.get_mut(m.index).and_then(Option::take);
                (m, r)
            });
            Some(jobs.collect())
        })
        .collect();
    let budget = order.budget();
    let running = order
        .stop_after
        .map_or(groups.len(), |n| n.min(groups.len()));
    let writing = &writing;
    let groups = &groups;
    let ran = fleet::in_waves(
        running,
        budget,
        |w| {
            let jobs = jobs[w].take().unwrap_or_default();
            let group = &groups[w];
            let bake = fleet
                .bake
                .filter(|_| kind == Order::Waves && w + 1 < groups.len());
            async move {
                let mut ends = writing.group(jobs, group.follow).await;
                let within = budget.holds(&ends, |(_, s)| s.as_planned());
                if let (Some(bake), true) = (bake, within) {
                    bake_wave(&group.members, &mut ends, bake, interrupt, progress).await;
                }
                ends
            }
        },
        |(_, state): &(usize, ClusterState)| state.as_planned(),
        || interrupt.get().is_none(),
    )
    .await;
    not_started(
        kind,
        groups,
        &ran,
        interrupt.get().is_some(),
        progress,
        &mut states,
    );
    for (i, state) in ran.into_iter().flatten().flatten() {
        states[i] = Some(state);
    }
    done(states)
}

/// Says why the clusters of the groups that did not run were not started: `--stop-after-wave`
/// (the groups past `ran`), a wave over its failure budget or a canary that failed, or a
/// signal.
fn not_started(
    kind: Order,
    groups: &[Group],
    ran: &[Option<Vec<(usize, ClusterState)>>],
    interrupted: bool,
    progress: &FleetProgress,
    states: &mut [Option<ClusterState>],
) {
    for group in &groups[ran.len()..] {
        for m in &group.members {
            progress.set(
                m.index,
                "NOT started: stopped after the wave before, as asked",
            );
            states[m.index] = Some(ClusterState::NotStarted(NotStarted::StoppedAfterWave));
        }
    }
    // The wave whose failures stopped the rest: the one before the first that did not run.
    let Some(after) = ran.iter().position(Option::is_none) else {
        return;
    };
    let (line, why) = match kind {
        _ if interrupted => (
            "NOT started: interrupted".to_owned(),
            NotStarted::Interrupted,
        ),
        Order::Waves => (
            format!("NOT started: wave {after} had more failed clusters than --max-failed allows"),
            NotStarted::EarlierWave,
        ),
        _ => (
            "NOT started: the canary did not apply and roll out".to_owned(),
            NotStarted::Canary,
        ),
    };
    for group in &groups[after..ran.len()] {
        for m in &group.members {
            progress.set(m.index, &line);
            states[m.index] = Some(ClusterState::NotStarted(why));
        }
    }
}

/// The groups of clusters in the order they are written.
fn groups<'a>(order: &FleetOrder, members: &[&'a Member], follow: bool) -> (Order, Vec<Group<'a>>) {
    if !order.waves.is_empty() {
        let waves = order
            .waves
            .iter()
            .map(|wave| Group {
                members: members
                    .iter()
                    .copied()
                    .filter(|m| wave.contains(&m.cluster.conn.context))
                    .collect(),
                follow,
            })
            .collect();
        return (Order::Waves, waves);
    }
    let (canaries, rest): (Vec<&Member>, Vec<&Member>) = members
        .iter()
        .copied()
        .partition(|m| order.canary.contains(&m.cluster.conn.context));
    if canaries.is_empty() {
        return (
            Order::All,
            vec![Group {
                members: rest,
                follow,
            }],
        );
    }
    (
        Order::Canary,
        vec![
            Group {
                members: canaries,
                follow: true,
            },
            Group {
                members: rest,
                follow,
            },
        ],
    )
}

/// The dry run everywhere (the history read and who we are ride along, unless the reads
/// brought them): what each cluster has left to write, by index; `None` when one refused or a
/// signal came (`states` then says how each cluster ended). A run that writes one object sends
/// no dry run ([`writes_one_object`]).
async fn dry_run_all(
    settings: &Settings,
    members: &[&Member],
    interrupt: &InterruptFlag,
    progress: &Arc<FleetProgress>,
    states: &mut [Option<ClusterState>],
) -> Option<Vec<Option<Ready>>> {
    let opts = ApplyOptions {
        tries: settings.retries,
        ..ApplyOptions::default()
    };
    let recording = settings.history_max > 0;
    let unchecked = writes_one_object(members);
    let at_once = members.first().map_or(1, |m| m.cluster.at_once());
    let mut order = members.to_vec();
    crate::planning::connected_first(&mut order, |m| m);
    let preflights = crate::planning::buffered(
        at_once,
        order.iter().map(|m| async move {
            if !m.sourced.plan.has_changes() {
                progress.set(m.index, "nothing to change");
                return None;
            }
            let _session = m.cluster.session().await;
            if !unchecked {
                progress.busy(m.index, "dry run");
            }
            let prepare = async {
                if !recording {
                    return None;
                }
                Some(match (&m.sourced.config_map, &m.sourced.user) {
                    (Some(cm), Some(user)) => Prepared {
                        config_map: Ok(cm.clone()),
                        user: user.clone(),
                    },
                    (Some(cm), None) => Prepared {
                        config_map: Ok(cm.clone()),
                        user: history_store::who(&m.cluster).await,
                    },
                    (None, _) => history_store::prepare(&m.cluster, &m.sourced.plan.app).await,
                })
            };
            let preflight = async {
                if unchecked {
                    return Ok(apply::unchecked(&m.sourced.plan));
                }
                apply::preflight(&m.cluster, &m.sourced.plan, opts, interrupt).await
            };
            let (preflight, prepared) = tokio::join!(preflight, prepare);
            Some(preflight.map(|preflighted| Ready {
                preflighted,
                prepared,
            }))
        }),
    )
    .await;
    let mut ready: Vec<Option<Ready>> = (0..states.len()).map(|_| None).collect();
    let mut refused = false;
    for (m, preflight) in order.iter().zip(preflights) {
        match preflight {
            None => {}
            Some(Ok(r)) => {
                if !unchecked {
                    progress.set(m.index, "dry run passed");
                }
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
    if !refused && interrupt.get().is_none() {
        return Some(ready);
    }
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
    None
}

/// Whether the run writes exactly one object, in one cluster, that its write alone can check:
/// then it sends no dry run, and its write is that check. The dry run is there so that nothing
/// is written until the server has accepted every change; with one change, the write is
/// accepted or refused as its dry run would be, and a refused write leaves nothing written
/// (exit 1, as a refused dry run). The history record that rides with the write is this
/// tool's own: when the write does not land, the record is corrected or taken back with the
/// records it pruned ([`write_and_record`]); whether the history can take it (immutable, at
/// its highest revision) is known from the read, and said with the plan. The dry run stays
/// where it protects something: several objects (none is written until all are accepted),
/// several clusters (nothing written anywhere until every one accepted), and an HTTPRoute that
/// only the dry run shows the cluster cannot guard ([`apply::needs_dry_run`]).
fn writes_one_object(members: &[&Member]) -> bool {
    let [m] = members else {
        return false;
    };
    let mut changes = m.sourced.plan.changes().filter(|c| c.is_change());
    matches!(
        (changes.next(), changes.next()),
        (Some(change), None) if !apply::needs_dry_run(change)
    )
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
                &format!("baking: {} left", wait::format_duration(left)),
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
        let _session = m.cluster.session().await;
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
            let followed = Followed::after_writes(report, false);
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
        let failed = Err(WaitError::Failed {
            target: format!("deployment.apps/{app}"),
            kubectl_ref: format!("deployment/{app}"),
            namespace: m.cluster.namespace().to_owned(),
            state: format!("it regressed during the bake: {what}"),
            why: Box::default(),
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
fn planned_image(plan: &appupdate_plan::updaters::Plan) -> Option<(String, String)> {
    plan.changes()
        .filter(|c| c.kind == appupdate_model::plan::Kind::Deployment)
        .flat_map(|c| c.fields.iter())
        .find_map(|f| {
            let Some(Field::Image { container }) = f.field() else {
                return None;
            };
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
        mut jobs: Vec<(&Member, Option<Ready>)>,
        follow: bool,
    ) -> Vec<(usize, ClusterState)> {
        // `--parallel` is at most the connections' bound (a larger one was refused).
        let bound = jobs.first().map_or(1, |(m, _)| m.cluster.at_once());
        let at_once = self.fleet.parallel.unwrap_or(jobs.len()).min(bound).max(1);
        // Started in the order of the contexts with `--parallel`; else, beyond the bound, the
        // clusters the dry run left connected first.
        if self.fleet.parallel.is_none() && at_once < jobs.len() {
            crate::planning::connected_first(&mut jobs, |(m, _)| m);
        }
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
        if let Standing::LeftAlone = m.sourced.standing {
            progress.set(
                m.index,
                "left alone: the fleet run being undone never applied here",
            );
            return ClusterState::NotStarted(NotStarted::NeverApplied);
        }
        if let Standing::AlreadyApplied { revision } = m.sourced.standing {
            progress.set(m.index, &fleet::already_applied(revision));
            return ClusterState::AlreadyApplied { revision };
        }
        // With more clusters than connections, this waits for a connection: whether the
        // cluster may start is decided once it has one.
        let _session = match (&ready, follow) {
            (None, false) => None,
            _ => Some(m.cluster.session().await),
        };
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
                let (report, recorded) = write_and_record(
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
                    put_back: None,
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
            result = wait::follow_in(
                &m.cluster,
                &m.sourced.plan.app,
                followed,
                self.settings.wait_timeout,
                wait::Stop::of(&self.settings.follow),
                &mut line,
            ) => {
                match &result {
                    // The first line: the reasons follow in the report.
                    Err(e) if e.is_rollout() => progress.set(
                        m.index,
                        &format!(
                            "rollout NOT complete: {}",
                            Untrusted(e.to_string().lines().next().unwrap_or_default())
                        ),
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

/// Writes what the dry run passed ([`apply::write`]) and adds the run's record to the history
/// (`prepared`: what the dry-run round read for it; `None`: no history). The record goes out
/// with the last round of writes, saying what they will have done — the writes before that
/// round have all landed by then — so it costs no round of its own; in the rare run where
/// that round does less (a write fails, or finds its change already made), one more write
/// corrects it. When the last round never starts (an earlier round failed), the record of
/// what was done is added afterwards.
async fn write_and_record(
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
    let info = sourced.run_info(
        k8s_openapi::jiff::Timestamp::now()
            .round(k8s_openapi::jiff::Unit::Second)
            .map(|t| t.to_string())
            .unwrap_or_default(),
        prepared.user,
    );
    let config_map_read = &prepared.config_map;
    let info_ref = &info;
    let with_last_round = |expected: &Report, settled: apply::Settled| {
        let record = history::record(expected, info_ref);
        // Once the round is done and the run has nothing to record (its one write did not
        // land), a record that met a conflict is not tried again: one write fewer to take back,
        // and one fewer in the way of the runs recording at the same moment.
        let needless = move || {
            settled
                .borrow()
                .as_ref()
                .is_some_and(|done| history::record(done, info_ref).is_none())
        };
        async move {
            let added = add_record(
                cluster,
                app,
                config_map_read,
                record.clone(),
                settings,
                needless,
            )
            .await;
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
                add_record(cluster, app, config_map_read, record, settings, || false)
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
                            settings.history_key.as_ref(),
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
                // The record could not be added, and there is nothing to record: no write of
                // the run landed (the one write of a run that sends no dry run was refused).
                (Recorded::Warning(_), _) if done.is_none() => Recorded::Nothing,
                (recorded, _) => recorded,
            }
        }
    };
    (report, recorded)
}

/// Adds `record` (`None`: the run wrote nothing to record) to the history as read earlier in
/// the run; with the ConfigMap as the write left it. After a conflict it is tried again unless
/// `needless` says by then that the run has nothing to record.
async fn add_record(
    cluster: &Cluster,
    app: &str,
    config_map: &Result<Option<serde_json::Value>, appupdate_kube::cluster::RequestError>,
    record: Option<history::Record>,
    settings: &Settings,
    needless: impl Fn() -> bool,
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
        settings.history_key.as_ref(),
        settings.retries,
        needless,
    )
    .await
    {
        Ok(Err(history_store::NotAdded::Full(full))) => {
            (Recorded::Warning(history_store::full_warning(&full)), None)
        }
        Ok(Err(history_store::NotAdded::Needless)) => (Recorded::Nothing, None),
        Ok(Ok((revision, written))) => (
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
