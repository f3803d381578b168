//! Where a plan comes from when it does not come from the flags: a saved plan (`apply FILE`)
//! or the inverse of a history record (`--undo`, `--to-revision N`). Either way the result is
//! an ordinary [`Plan`] that the rest of the run shows, confirms, dry-runs and applies under
//! the approved-diff guard.
//!
//! A saved plan is applied only to the API server and namespace it was made for, unless
//! `--context` names the context it was made with; not when it is older than
//! `--max-plan-age`; and — checked before the plan is shown, so that what is shown is what is
//! written — only when every object it changes still holds, in every field the plan changes, the value the plan showed
//! ([`recheck_saved`]: the guard, for the whole plan at once). Changes elsewhere in the
//! objects do not stop it.

use std::sync::Arc;

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::apply::guard_reason;
use crate::error::AppError;
use crate::history_store;
use crate::live_state;
use crate::settings::{SavedInput, UndoRequest};
use appupdate_kube::cluster::{Cluster, RequestError};
use appupdate_kube::describe::Target;
use appupdate_kube::kube_context::Connection;
use appupdate_model::plan::{Kind, ObjectChange, Recheck, recheck};
use appupdate_model::report::{Outcome, Report};
use appupdate_plan::applied;
use appupdate_plan::history::Source;
use appupdate_plan::history::{self, History, PickError, Signed};
use appupdate_plan::live::{LiveState, Needs};
use appupdate_plan::plan_file::PlanKey;
use appupdate_plan::plan_file::{ClusterPlan, SavedPlanError};
use appupdate_plan::planner::{self, UpdateRequest};
use appupdate_plan::undo;
use appupdate_plan::updaters::Plan;

/// A plan ready to show, and what the run needs to record it.
#[derive(Debug)]
pub struct Sourced {
    pub plan: Plan,
    pub source: Source,
    /// The history ConfigMap as read while planning (an undo, an image change), so that
    /// recording does not read it again; `None`: not read yet.
    pub config_map: Option<Option<Value>>,
    /// What the plan may do: be written, or why not.
    pub standing: Standing,
    /// The live objects the plan was made from, when this run read them (less the routes
    /// planning moved into the plan): held with the plan, so that a run that ends once the plan
    /// is shown does not free them one by one either.
    pub live: Option<LiveState>,
    /// The checksum of the saved plan this is (`apply FILE`; `None`: not a saved plan), for the
    /// history record.
    pub plan_checksum: Option<String>,
    /// The revision of the history whose record names this saved plan's checksum (a log
    /// entry, not a lock: anyone who may write the ConfigMap can add or remove one).
    pub recorded_by: Option<u64>,
    /// The run over several clusters this cluster's change is part of (for its record).
    pub fleet_run: Option<String>,
    /// Who else owns fields the plan changes, from the live objects as read
    /// ([`appupdate_model::owners`]); a saved plan's, from its objects as re-read when it is
    /// applied ([`recheck_saved`]).
    pub owners: Vec<appupdate_model::owners::ObjectOwners>,
    /// A saved plan's: the owners it recorded when it was made (what its reviewer saw).
    pub owners_in_plan: Option<Vec<appupdate_model::owners::ObjectOwners>>,
    /// Who the server says the user is, for the history record: asked with the reads by a run
    /// that may record a change, so that recording costs no round before the writes; `None`:
    /// not asked yet.
    pub user: Option<String>,
}

impl Sourced {
    /// Whether the saved plan being applied did not show `owner` of `object` (it became an
    /// owner after the plan was written); never for a plan made by this run.
    pub fn unseen_owner(&self, object: &str, owner: &appupdate_model::owners::Owner) -> bool {
        self.owners_in_plan.as_ref().is_some_and(|saw| {
            !saw.iter()
                .any(|o| o.object == object && o.owners.iter().any(|s| s.who == owner.who))
        })
    }

    /// What the run's history record says about the run besides its report: when, who, and
    /// where the plan came from.
    pub fn run_info(&self, time: String, user: String) -> history::RunInfo {
        history::RunInfo {
            time,
            user,
            source: self.source.clone(),
            saved_plan: self.plan_checksum.is_some(),
            routes: self.plan.routes.as_ref().map(|r| r.header.clone()),
            plan_checksum: self.plan_checksum.clone(),
            fleet_run: self.fleet_run.clone(),
            owners: self.owners.clone(),
        }
    }
}

/// Where a cluster's plan stands once planned: to be written, or why it is not.
#[derive(Debug)]
pub enum Standing {
    /// Written as the run goes (maybe nothing: the plan may have no changes).
    Ready,
    /// A saved plan of a fleet that this cluster's objects show was applied already (with the
    /// revision of the history that records it, when one does): a resumed run writes nothing
    /// here again.
    AlreadyApplied { revision: Option<u64> },
    /// A fleet undo of a run that never applied here: nothing to undo, left alone.
    LeftAlone,
    /// The plan must not be applied, and why: an undo over values changed since its record, a
    /// saved plan applied already and changed since. The plan is shown; nothing is written
    /// anywhere.
    Refused(Box<AppError>),
    /// A saved plan that no longer holds here: the report of its re-check (nothing written
    /// anywhere).
    Drifted(Report),
}

impl Standing {
    /// The refusal, taken (the standing becomes `Ready`).
    pub fn take_refusal(&mut self) -> Option<AppError> {
        match std::mem::replace(self, Standing::Ready) {
            Standing::Refused(refusal) => Some(*refusal),
            other => {
                *self = other;
                None
            }
        }
    }

    /// The report of a saved plan that no longer holds, taken (the standing becomes `Ready`).
    pub fn take_drifted(&mut self) -> Option<Report> {
        match std::mem::replace(self, Standing::Ready) {
            Standing::Drifted(report) => Some(report),
            other => {
                *self = other;
                None
            }
        }
    }
}

fn human(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..120 => format!("{s}s"),
        120..7200 => format!("{}m", s / 60),
        7200..172_800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// `--max-plan-age`: refuses a plan made longer ago than that.
pub fn check_age(saved: &SavedInput, now: Timestamp) -> Result<(), SavedPlanError> {
    if let Some(max) = saved.max_age {
        let created: Timestamp =
            saved
                .file
                .created_at
                .parse()
                .map_err(|_| SavedPlanError::NoTime {
                    file: saved.name.clone(),
                    created: saved.file.created_at.clone(),
                })?;
        let age = Duration::try_from(now.duration_since(created)).unwrap_or(Duration::ZERO);
        if age > max {
            return Err(SavedPlanError::TooOld {
                file: saved.name.clone(),
                age: human(age),
                created: saved.file.created_at.clone(),
                max: human(max),
            });
        }
    }
    Ok(())
}

/// The plan of `saved` for the cluster and namespace `conn` points at: the one made through
/// the same context against the same API server, else any made against that server, else the
/// one made with context `context_flag` (in the same namespace).
pub fn choose_target(
    saved: &SavedInput,
    conn: &Connection,
    context_flag: Option<&str>,
) -> Result<ClusterPlan, SavedPlanError> {
    let same_namespace = |c: &&ClusterPlan| c.plan.namespace == conn.namespace;
    let same_server = |c: &&ClusterPlan| same_namespace(c) && c.server == conn.server;
    let found = saved
        .file
        .clusters
        .iter()
        .filter(same_server)
        .find(|c| c.context == conn.context)
        .or_else(|| saved.file.clusters.iter().find(same_server))
        .or_else(|| {
            saved
                .file
                .clusters
                .iter()
                .filter(same_namespace)
                .find(|c| context_flag == Some(c.context.as_str()))
        });
    if let Some(c) = found {
        return Ok(c.clone());
    }
    let first = &saved.file.clusters[0];
    let file = &saved.name;
    let (plan_ns, ns) = (&first.plan.namespace, &conn.namespace);
    Err(SavedPlanError::OtherTarget(
        if first.server != conn.server {
            format!(
                "{file} was made against the API server {} (context {:?}, namespace {plan_ns:?}), but context {:?} points at {}; to apply it there anyway, name its context: --context {}{}",
                first.server,
                first.context,
                conn.context,
                conn.server,
                first.context,
                if plan_ns == ns {
                    String::new()
                } else {
                    format!(" -n {plan_ns}")
                }
            )
        } else {
            format!(
                "{file} was made for namespace {plan_ns:?}, not {ns:?} (context {:?}); pass -n {plan_ns}",
                conn.context
            )
        },
    ))
}

fn read_failure(
    cluster: &Cluster,
    e: RequestError,
    verb: &'static str,
    reference: String,
) -> AppError {
    AppError::Request {
        verb,
        target: Target {
            reference,
            namespace: cluster.namespace().to_owned(),
            context: cluster.conn.context.clone(),
            as_user: cluster.conn.as_user.clone(),
        },
        source: Box::new(e),
    }
}

/// Where a saved plan stands once its objects are read back ([`recheck_saved`]).
#[derive(Debug)]
pub enum Rechecked {
    /// It holds: write what is left (maybe nothing), with who else owns the fields it
    /// writes, found in the objects as re-read.
    Holds(Vec<appupdate_model::owners::ObjectOwners>),
    /// A field it changes is no longer at the value it showed: the report of the refusal, in
    /// which nothing was written.
    Refused(Report),
    /// Its objects carry its checksum and every value it changes holds: applied already.
    Applied,
    /// `reference` carries its checksum, but a value it changes is elsewhere now (undone, or
    /// changed by hand, since it was applied).
    AppliedThenChanged { reference: String },
}

/// Re-reads every object `plan` changes and re-plans it with its updater, rebasing the plan
/// on the objects as they are now (objects someone already brought to the planned values
/// drop out), and tells from those objects whether the plan of `checksum` was applied already
/// ([`applied::state`]: its checksum on them, and its values in place). Who else owns the
/// fields it still writes is found in the same objects ([`appupdate_model::owners`]): no
/// request of its own.
pub async fn recheck_saved(
    cluster: &Cluster,
    plan: &mut Plan,
    checksum: &str,
) -> Result<Rechecked, AppError> {
    let reads = join_all(
        plan.objects
            .iter()
            .enumerate()
            .filter(|(_, p)| p.change.is_change())
            .map(|(i, p)| async move { (i, cluster.get(p.change.kind, &p.change.name).await) }),
    )
    .await;
    let mut outcomes: BTreeMap<usize, Outcome> = BTreeMap::new();
    let mut read_back = Vec::with_capacity(reads.len());
    let mut owners = Vec::new();
    let mut tripped = false;
    // The tag an unpinned plan wrote, and the digest it recorded for it.
    let recorded = plan.image_checked.clone().filter(|i| !i.pinned);
    for (i, live) in reads {
        let p = &mut plan.objects[i];
        let live = live.map_err(|e| read_failure(cluster, e, "get", p.change.reference()))?;
        let mut holds = false;
        // An admission controller that pins tags (Kyverno's mutateDigest) rewrote `name:tag`
        // into `name:tag@D`, D the digest the plan recorded: the plan's value, not drift.
        let as_written = match (&recorded, &live, p.change.kind) {
            (Some(r), Some(l), Kind::Deployment) => {
                appupdate_model::image::as_written(l, &r.image, &r.digest)
            }
            _ => None,
        };
        match applied::replan(p, as_written.as_ref().or(live.as_ref())) {
            Err(e) => {
                tripped = true;
                outcomes.insert(
                    i,
                    Outcome::Tripped {
                        reason: format!(
                            "it changed since the plan was made: {e}; nothing was written"
                        ),
                        fresh: None,
                    },
                );
            }
            Ok(fresh) => match recheck(&p.change, fresh.clone()) {
                Recheck::Proceed(f) => p.change = Arc::new(f),
                Recheck::AlreadyDone => {
                    holds = true;
                    p.change = Arc::new(fresh);
                }
                Recheck::Tripped(f) => {
                    if let Some(e) = edited(&p.change, &f) {
                        return Err(AppError::SavedPlan(e));
                    }
                    tripped = true;
                    outcomes.insert(
                        i,
                        Outcome::Tripped {
                            reason: guard_reason(&p.change, &f),
                            fresh: Some(Box::new(f)),
                        },
                    );
                }
            },
        }
        read_back.push(applied::ReadBack {
            reference: p.change.reference(),
            carries: live.as_ref().is_some_and(|l| applied::carries(l, checksum)),
            holds,
        });
        if let Some(live) = &live
            && p.change.write.is_some()
        {
            let changed: Vec<String> = p.change.fields.iter().map(|f| f.path.clone()).collect();
            let found = appupdate_model::owners::owners(live, &changed);
            if !found.is_empty() {
                owners.push(appupdate_model::owners::ObjectOwners {
                    object: p.change.reference(),
                    owners: found,
                });
            }
        }
    }
    match applied::state(&read_back) {
        applied::State::Applied => return Ok(Rechecked::Applied),
        applied::State::AppliedThenChanged { reference } => {
            return Ok(Rechecked::AppliedThenChanged { reference });
        }
        applied::State::Pending => {}
    }
    if !tripped {
        return Ok(Rechecked::Holds(owners));
    }
    let entries = plan
        .objects
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let outcome = outcomes.remove(&i).unwrap_or(if p.change.is_change() {
                Outcome::NotAttempted
            } else {
                Outcome::Unchanged
            });
            (p.change.clone(), outcome)
        })
        .collect();
    Ok(Rechecked::Refused(Report {
        entries,
        stopped_in_preflight: true,
        interrupted: None,
    }))
}

/// Whether the saved change `shown` disagrees with what its own updater writes (`fresh`,
/// planned from the same starting value): the file's views or its updater were edited.
fn edited(shown: &ObjectChange, fresh: &ObjectChange) -> Option<SavedPlanError> {
    let short = |v: Option<std::borrow::Cow<'_, Value>>| match v {
        None => "absent".to_owned(),
        Some(v) => appupdate_model::text::Untrusted(&v.to_string()).to_string(),
    };
    fresh.fields.iter().find_map(|f| {
        let s = shown.fields.iter().find(|s| s.path == f.path)?;
        (s.before() == f.before() && s.after() != f.after()).then(|| SavedPlanError::Edited {
            reference: shown.reference(),
            path: appupdate_model::text::Untrusted(&f.path).to_string(),
            wanted: short(f.after()),
            shown: short(s.after()),
        })
    })
}

/// The newest revision of `history` that says it applied the saved plan of `checksum`.
pub fn applied_by(history: &History, checksum: &str) -> Option<u64> {
    // The newest: a record is a log entry anyone who may write the ConfigMap can add, and the
    // newest is the application the objects show (or one added after it).
    history.entries.iter().rev().find_map(|e| match e {
        history::Entry::Record(r) if r.plan_checksum.as_deref() == Some(checksum) => {
            Some(r.revision)
        }
        _ => None,
    })
}

/// The undo of the newest record (or `request.revision`): reads the history, then plans the
/// record's earlier intent against the live objects as an ordinary run would
/// ([`undo::request`]). `recording`: the run records its own change (its planned revision
/// goes into the change-cause annotation). With the history key (`key`), a record that does
/// not verify with it is refused before anything else is read.
pub async fn undo(
    cluster: &Cluster,
    app: &str,
    request: &UndoRequest,
    recording: bool,
    key: Option<&PlanKey>,
) -> Result<Sourced, AppError> {
    let name = history::config_map_name(app);
    let cm = cluster
        .get_config_map(&name)
        .await
        .map_err(|e| read_failure(cluster, e, "get", format!("configmap/{name}")))?;
    let stored = History::from_config_map(cm.as_ref(), app);
    let whose = format!(
        "{app} in namespace {:?} (context {:?})",
        cluster.namespace(),
        cluster.conn.context
    );
    if let Some(id) = &request.fleet_run
        && request.revision.is_none()
    {
        let Some(record) = stored.of_fleet_run(id) else {
            return Ok(Sourced {
                plan: Plan::new(
                    app.to_owned(),
                    cluster.namespace().to_owned(),
                    cluster.conn.context.clone(),
                    Vec::new(),
                ),
                source: Source::Update,
                config_map: Some(cm),
                standing: Standing::LeftAlone,
                live: None,
                plan_checksum: None,
                recorded_by: None,
                fleet_run: None,
                owners: Vec::new(),
                owners_in_plan: None,
                user: None,
            });
        };
        let revision = record.revision;
        let one = UndoRequest {
            revision: Some(revision),
            fleet_run: None,
            force: request.force.clone(),
        };
        return Box::pin(undo(cluster, app, &one, recording, key)).await;
    }
    let record = stored.pick(request.revision).map_err(|e| match e {
        PickError::Missing(why) => AppError::Undo {
            message: format!(
                "cannot undo {whose}: {why}; see kubectl appupdate history {app}"
            ),
        },
        PickError::Unverifiable(why) => AppError::NotUndoable {
            message: format!(
                "not undone: {why}; nothing was written. Someone who may write configmap/{name} changed it: see kubectl appupdate history {app}, and undo with --to-revision an earlier verifiable revision or run with the values you want"
            ),
        },
    })?;
    if let Some(seal) = history_store::seal(cluster, app, key) {
        let why = match seal.check(record) {
            Signed::Verified => None,
            Signed::Unsigned => Some(format!(
                "is not signed, and {} undoes only records signed with that key",
                seal.key.named()
            )),
            Signed::Invalid => Some(format!(
                "does not verify with {}: it was changed after it was signed, signed with another key, or copied from another revision, application, namespace or cluster",
                seal.key.named()
            )),
        };
        if let Some(why) = why {
            return Err(AppError::NotUndoable {
                message: format!(
                    "not undone: revision {} of {whose} {why}; nothing was written. Someone who may write configmap/{name} may have put it there: see kubectl appupdate history {app} --history-key KEYFILE",
                    record.revision
                ),
            });
        }
    }
    let recording = recording.then(|| cm.clone());
    let mut undone = undo_record(cluster, app, record, recording).await?;
    undone.sourced.config_map = Some(cm);
    let mut drift = std::mem::take(&mut undone.drift);
    let mut refusal = undo::refusal(record.revision, &drift, &request.force);
    if refusal.is_some() && drift.iter().any(undo::Drift::is_attachment) {
        changed_by(cluster, &undone.holders, &mut drift).await;
        refusal = undo::refusal(record.revision, &drift, &request.force);
    }
    if let Some(message) = refusal {
        undone.sourced.standing = Standing::Refused(Box::new(AppError::Drift { message }));
    }
    Ok(undone.sourced)
}

/// An undo's plan, and what changed since the record it undoes.
pub struct UndoPlanned {
    pub sourced: Sourced,
    /// The values changed since the record ([`undo::drift`]): the caller decides.
    pub drift: Vec<undo::Drift>,
    /// Where the live attachment of the routes is held (to say who changed it).
    pub holders: Vec<undo::Holder>,
}

/// The undo of `record` (read from the history, or a run's own, held in memory) planned
/// against the live objects as an ordinary run would ([`undo::request`]), with what changed
/// since it. `history`: the history as read, when the undo records its own change (its
/// planned revision goes into the change-cause annotation).
pub async fn undo_record(
    cluster: &Cluster,
    app: &str,
    record: &history::Record,
    history: Option<Option<Value>>,
) -> Result<UndoPlanned, AppError> {
    let whose = format!(
        "{app} in namespace {:?} (context {:?})",
        cluster.namespace(),
        cluster.conn.context
    );
    let intent = undo::request(record).map_err(|why| AppError::NotUndoable {
        message: format!(
            "not undone: revision {} of {whose} cannot be undone: {why}; nothing was written",
            record.revision
        ),
    })?;
    let req = UpdateRequest {
        app,
        namespace: cluster.namespace(),
        context: &cluster.conn.context,
        container: intent.container.as_deref(),
        container_update: &intent.container_update,
        autoscaler_update: &intent.autoscaler_update,
        endpoints: intent.endpoints.as_ref(),
        routes: &intent.routes,
        undo_of: Some(record.revision),
    };
    let mut live = read_live(cluster, &req, req.needs()).await?;
    // The history as read: the undo's own record is planned to be its next revision.
    live.history = history;
    // Where the live attachment is read from, before planning takes the live routes.
    let holders = match record.endpoints {
        Some(_) => undo::holders(app, &live),
        None => Vec::new(),
    };
    let plan = planner::build_plan(&req, &mut live)?;
    let drift = undo::drift(record, &plan);
    Ok(UndoPlanned {
        sourced: Sourced {
            standing: Standing::Ready,
            plan,
            source: Source::Undo {
                revision: record.revision,
            },
            config_map: None,
            live: Some(live),
            plan_checksum: None,
            recorded_by: None,
            fleet_run: None,
            owners: Vec::new(),
            owners_in_plan: None,
            user: None,
        },
        drift,
        holders,
    })
}

/// Says, for each part of the routes' attachment changed since the record, who last set it:
/// the object holding it is read again (listed objects are read without their managedFields)
/// and its managedFields asked ([`undo::last_changed`]). Each object is read once, all at the
/// same time, however many of its parts changed. A read that fails says nothing.
async fn changed_by(cluster: &Cluster, holders: &[undo::Holder], drift: &mut [undo::Drift]) {
    let holder = |d: &undo::Drift| holders.iter().find(|h| h.key == d.key);
    let mut objects: Vec<(Kind, &str)> = drift
        .iter()
        .filter(|d| d.is_attachment())
        .filter_map(holder)
        .map(|h| (h.kind, h.name.as_str()))
        .collect();
    objects.sort();
    objects.dedup();
    let read = join_all(
        objects
            .iter()
            .map(|(kind, name)| async move { cluster.get(*kind, name).await.ok().flatten() }),
    )
    .await;
    for d in drift.iter_mut().filter(|d| d.is_attachment()) {
        let Some(h) = holder(d) else {
            continue;
        };
        let at = objects.iter().position(|o| *o == (h.kind, h.name.as_str()));
        if let Some(object) = at.and_then(|i| read[i].as_ref()) {
            d.changed_by = undo::last_changed(object, h.fields);
        }
    }
}

/// The live objects `req` is planned against: the first read round, then what it leaves to read
/// (the IngressClasses of a first exposure, the Gateways and GatewayClasses of scoped
/// HTTPRoutes).
pub(crate) async fn read_live(
    cluster: &Cluster,
    req: &UpdateRequest<'_>,
    needs: Needs,
) -> Result<LiveState, AppError> {
    let mut live = live_state::read(cluster, req.app, needs).await?;
    if req.needs_ingress_classes(&live) {
        live.ingress_classes = Some(live_state::read_ingress_classes(cluster).await?);
    }
    if let Some(gateways) = req.gateway_check(&live) {
        let read = live.gateway_support.take();
        live.gateway_support =
            Some(live_state::read_gateway_support(cluster, &gateways, read).await?);
    }
    Ok(live)
}
