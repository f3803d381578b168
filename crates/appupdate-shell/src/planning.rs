//! Planning, for one cluster or several: the contexts of the run, each connected, read and
//! planned at the same time, with the same requests whatever their number.
//!
//! A run over one cluster is a fleet of one: the context its flags or the kubeconfig choose.
//! A fleet reads the kubeconfig once and resolves every context as a run over one cluster
//! resolves its own (its cluster, user and namespace; `-n` applies to all), in the order of
//! `--context`/`--contexts`/`--context-selector`, of its waves, or of its plan file. A saved
//! plan is re-checked against the live objects here, before it is shown: what is shown is
//! what is written.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;

use crate::error::AppError;
use crate::fleet::FleetOrder;
use crate::history_store;
use crate::image_check::{self, SharedCheck};
use crate::plan_sources::{self, Rechecked, Sourced, Standing};
use crate::settings::{
    Changes, FleetSettings, Mode, Settings, SettingsError, UndoRequest, WaveSpec,
};
use crate::streams;
use appupdate_kube::cluster::{Cluster, RequestLog};
use appupdate_kube::connections::ConnectionLimit;
use appupdate_kube::kube_context::{Connection, Loaded};
use appupdate_model::plan::CheckedImage;
use appupdate_model::text::Untrusted;
use appupdate_plan::fleet_plan::{FleetPlan, Member as PlanMember};
use appupdate_plan::history::{self, Source};
use appupdate_plan::plan_file::ClusterPlan;
use appupdate_plan::planner::{self, UpdateRequest};
use appupdate_plan::updaters::ContainerUpdate;

/// A cluster that was planned.
pub(crate) struct Member {
    /// Its place in the order of the contexts.
    pub index: usize,
    pub cluster: Cluster,
    pub sourced: Sourced,
}

/// Every context of the run, as far as planning got.
pub(crate) struct Planned {
    pub app: String,
    /// `--canary` or `--wave`.
    pub order: FleetOrder,
    /// The contexts by index (a run over one cluster: the one it connected to).
    pub contexts: Vec<String>,
    /// What planning made of each context, in the order of `contexts`.
    pub clusters: Vec<Planning>,
}

/// What planning made of one context of the run.
pub(crate) enum Planning {
    /// Planned: its plan, and whether it may be written ([`Standing`]).
    Planned(Box<Member>),
    /// Left out (`--skip-unreachable`): its context, why, and the error.
    Skipped {
        context: String,
        reason: String,
        error: AppError,
    },
    /// Could not be planned.
    Failed(AppError),
}

impl Planned {
    /// The clusters that were planned, in order.
    pub fn members(&self) -> impl Iterator<Item = &Member> {
        self.clusters.iter().filter_map(|c| match c {
            Planning::Planned(m) => Some(&**m),
            _ => None,
        })
    }

    /// The clusters that were planned, in order, to change.
    pub fn members_mut(&mut self) -> impl Iterator<Item = &mut Member> {
        self.clusters.iter_mut().filter_map(|c| match c {
            Planning::Planned(m) => Some(&mut **m),
            _ => None,
        })
    }

    /// Whether a context could not be planned.
    pub fn any_failed(&self) -> bool {
        self.clusters
            .iter()
            .any(|c| matches!(c, Planning::Failed(_)))
    }

    /// The first context that could not be planned: its error, taken out of the run.
    pub fn take_failure(&mut self) -> Option<AppError> {
        let at = self
            .clusters
            .iter()
            .position(|c| matches!(c, Planning::Failed(_)))?;
        match self.clusters.remove(at) {
            Planning::Failed(e) => Some(e),
            _ => None,
        }
    }

    /// Whether any planned cluster has something to change.
    pub fn has_changes(&self) -> bool {
        self.members().any(|m| m.sourced.plan.has_changes())
    }

    /// The plans as the fleet's views show them: by context, the skipped ones with theirs.
    pub fn fleet_plan(&self) -> FleetPlan<'_> {
        let members = self
            .clusters
            .iter()
            .filter_map(|c| match c {
                Planning::Planned(m) => Some(PlanMember::Planned(&m.sourced.plan)),
                Planning::Skipped {
                    context, reason, ..
                } => Some(PlanMember::Skipped {
                    context: context.as_str(),
                    reason: reason.as_str(),
                }),
                Planning::Failed(_) => None,
            })
            .collect();
        FleetPlan {
            app: &self.app,
            members,
            waves: &self.order.waves,
            owners: self
                .members()
                .filter(|m| !m.sourced.owners.is_empty())
                .map(|m| (m.sourced.plan.context.as_str(), &m.sourced.owners[..]))
                .collect(),
        }
    }
}

/// Who else owns the fields the plan changes, from the live objects as read for the plan (no
/// request of its own): the Deployment's and the autoscaler's managedFields, labels and
/// annotations, and the marks kept of each listed route and policy
/// ([`appupdate_model::owners::Marks`]; their listing drops their managedFields, and planning
/// frees them).
fn owners_of(sourced: &Sourced) -> Vec<appupdate_model::owners::ObjectOwners> {
    use appupdate_model::owners::{self, ObjectOwners};
    use appupdate_model::plan::Kind;
    let Some(live) = &sourced.live else {
        return Vec::new();
    };
    sourced
        .plan
        .changes()
        .filter(|c| c.write.is_some() && !c.fields.is_empty() && c.live.is_some())
        .filter_map(|c| {
            let changed: Vec<String> = c.fields.iter().map(|f| f.path.clone()).collect();
            let owners = match c.kind {
                Kind::Deployment | Kind::HorizontalPodAutoscaler => {
                    let object = match c.kind {
                        Kind::Deployment => live.deployment.as_ref(),
                        _ => live.autoscaler.as_ref(),
                    }?;
                    if object["metadata"]["name"].as_str() != Some(c.name.as_str()) {
                        return None;
                    }
                    owners::owners(object, &changed)
                }
                Kind::Ingress | Kind::HttpRoute | Kind::SecurityPolicy => live
                    .marks
                    .iter()
                    .find(|m| m.kind == c.kind && m.name == c.name)?
                    .marks
                    .owners(&changed),
            };
            (!owners.is_empty()).then(|| ObjectOwners {
                object: c.reference(),
                owners,
            })
        })
        .collect()
}

/// The contexts of the run, each connected, read and planned, all at once.
pub(crate) async fn plan_all(
    settings: &Settings,
    fleet: &FleetSettings,
) -> Result<Planned, AppError> {
    let mut loaded = Loaded::load(&settings.cluster)?;
    let several = settings.fleet.is_some();
    let (names, waves) = if several {
        fleet_contexts(&loaded, settings, fleet)?
    } else {
        (Vec::new(), Vec::new())
    };
    // How many clusters each stage works on at a time.
    let mut at_once = 1;
    if several {
        let limit = connection_limit(fleet, names.len())?;
        at_once = limit.most();
        loaded.limit_connections(limit);
    }
    // kubectl's credential plugin policy, for every context before any client is built: a
    // plugin it does not allow is never started, and a fleet with one is refused whole.
    let checked: Vec<Option<&str>> = if several {
        names.iter().map(|c| Some(c.as_str())).collect()
    } else {
        vec![None]
    };
    loaded.check_credential_plugins(&settings.cluster, &checked)?;
    if let Some(saved) = settings.saved() {
        plan_sources::check_age(saved, Timestamp::now())?;
    }
    // A fleet undo undoes one fleet run everywhere: the one named, else the newest recorded.
    let mut resolved;
    let settings = match settings.undo() {
        Some(undo) if several && undo.fleet_run.is_none() && undo.revision.is_none() => {
            match newest_fleet_run(&loaded, settings, &names, at_once).await {
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
    let run_id = several.then(|| fleet_run_id(settings));
    // One cluster: the context the flags or the kubeconfig choose.
    let targets: Vec<Option<&str>> = if several {
        names.iter().map(|c| Some(c.as_str())).collect()
    } else {
        vec![None]
    };
    // The image is checked once for the run, while every cluster is connected and read.
    let check = image_check::start(settings);
    let results = buffered(
        at_once,
        targets
            .iter()
            .map(|context| plan_one(&loaded, settings, *context, &check)),
    )
    .await;
    if image_check::image_of(settings).is_some() {
        image_check::warn_once(settings, &check.clone().await);
    }
    let clusters: Vec<Planning> = results
        .into_iter()
        .enumerate()
        .map(|(index, result)| match result {
            Ok(mut member) => {
                member.index = index;
                member.sourced.fleet_run.clone_from(&run_id);
                Planning::Planned(Box::new(member))
            }
            Err(error) if fleet.skip_unreachable && skippable(&error) => Planning::Skipped {
                context: names.get(index).cloned().unwrap_or_default(),
                reason: error.to_string(),
                error,
            },
            Err(error) => Planning::Failed(error),
        })
        .collect();
    let mut planned = Planned {
        app: settings.app.clone(),
        order: FleetOrder {
            canary: fleet.canary.clone(),
            waves,
            max_failed: fleet.max_failed,
            stop_after: settings.stop_after_wave(),
        },
        contexts: names,
        clusters,
    };
    if !several {
        let context = planned.members().next().map(|m| &m.cluster.conn.context);
        planned.contexts = vec![context.cloned().unwrap_or_default()];
    }
    one_context_per_cluster(&planned)?;
    Ok(planned)
}

/// `futures`, `at_once` at a time (at least one), started in order; their outputs in order.
/// A stage over thousands of clusters holds the state of only as many as have a connection.
pub(crate) async fn buffered<F: std::future::Future>(
    at_once: usize,
    futures: impl IntoIterator<Item = F>,
) -> Vec<F::Output> {
    use futures::StreamExt as _;
    futures::stream::iter(futures)
        .buffered(at_once.max(1))
        .collect()
        .await
}

/// Orders `items` so that those whose cluster ([`Member`]) is still connected come first, each
/// part in its order: a fleet larger than its connection bound starts each stage with the
/// clusters whose connections the stage before left open, so that they need no handshake
/// ([`appupdate_kube::connections`]). Within the bound no connection is left open between
/// stages (each cluster keeps its own), and the order is kept.
pub(crate) fn connected_first<T>(items: &mut [T], member: impl Fn(&T) -> &Member) {
    items.sort_by_key(|item| !member(item).cluster.conn.sessions.connected());
}

/// How many of a fleet's `clusters` may have a connection open at once: what the open-files
/// limit leaves, or `--max-connections`; a fleet that fits keeps each connection for the whole
/// run, a larger one is connected to in batches at each stage ([`crate::open_files`]).
fn connection_limit(fleet: &FleetSettings, clusters: usize) -> Result<ConnectionLimit, AppError> {
    let soft = crate::open_files::current().and_then(|l| l.soft);
    let bound = crate::open_files::connection_bound(soft, fleet.max_connections, fleet.parallel)
        .map_err(SettingsError::Invalid)?;
    Ok(ConnectionLimit::for_clusters(bound, clusters))
}

/// A fleet's contexts, in order, and its waves: the names given (or the plan file's), the
/// selector's matches, or every `--wave`'s; each `--canary` must be one of them.
fn fleet_contexts(
    loaded: &Loaded,
    settings: &Settings,
    fleet: &FleetSettings,
) -> Result<(Vec<String>, Vec<Vec<String>>), AppError> {
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
        let mut waves = resolve_waves(loaded, &fleet.waves)?;
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
    Ok((contexts, waves))
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
    at_once: usize,
) -> Option<String> {
    let reads = buffered(
        at_once,
        contexts.iter().map(|context| async move {
            let conn = loaded
                .connect(&settings.cluster, Some(context), streams::warning)
                .await
                .ok()?;
            let cluster = connected(conn, 0, None);
            let _session = cluster.session().await;
            let cm = history_store::read(&cluster, &settings.app).await.ok()?;
            let history = history::History::from_config_map(cm.as_ref(), &settings.app);
            history
                .newest_fleet_run()
                .map(|(id, time)| (time.to_owned(), id.to_owned()))
        }),
    )
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

/// The saved plan's file as messages name it.
fn saved_name(settings: &Settings) -> &str {
    settings
        .saved()
        .map(|s| s.name.as_str())
        .unwrap_or("the plan")
}

/// What the history says of a saved plan applied here, for a message.
fn recorded_as(revision: Option<u64>) -> String {
    revision.map_or_else(String::new, |r| {
        format!(" (the history records it as revision {r})")
    })
}

/// Connects to `context` (`None`: the one the flags or the kubeconfig choose), reads and
/// plans; a saved plan is re-checked against the live objects.
async fn plan_one(
    loaded: &Loaded,
    settings: &Settings,
    context: Option<&str>,
    check: &SharedCheck,
) -> Result<Member, AppError> {
    let conn = loaded
        .connect(&settings.cluster, context, streams::warning)
        .await?;
    // In a fleet, -v names the context on each line.
    let prefix = context.map(|c| format!("[{}] ", Untrusted(c)));
    let cluster = connected(conn, settings.verbose, prefix);
    // Its connection is open from the first read to the end of its planning (and stays open
    // when every cluster of the run fits within the limit).
    let _session = cluster.session().await;
    let target = match &settings.mode {
        Mode::Update { changes, .. } => Target::Change(changes),
        Mode::Undo { request, .. } => Target::Undo(request),
        Mode::Apply { saved, .. } => {
            let named = context.or(settings.cluster.context.as_deref());
            Target::Saved {
                checksum: &saved.file.checksum,
                plan: Box::new(plan_sources::choose_target(saved, &cluster.conn, named)?),
            }
        }
    };
    let saved_image = match &target {
        Target::Saved { plan, .. } => plan.plan.image_checked.clone(),
        _ => None,
    };
    let (sourced, checked) = tokio::join!(source(settings, &cluster, target, check), async {
        match &saved_image {
            Some(_) => check.clone().await,
            None => None,
        }
    });
    let mut sourced = sourced?;
    if let (Some(recorded), Some(checked)) = (&saved_image, checked) {
        image_check::saved_still_holds(settings, recorded, &checked)?;
    }
    sourced.owners = owners_of(&sourced);
    if settings.fleet.is_some() {
        // A fleet holds every member's plan at once; the live objects are not needed past
        // planning, nor the history as read where nothing is to be recorded. (One cluster
        // keeps them: a run that ends once the plan is shown does not free them one by one.)
        sourced.live = None;
        if !sourced.plan.has_changes() {
            sourced.config_map = None;
        }
    }
    if let Some(checksum) = sourced.plan_checksum.clone() {
        // A saved plan is shown under the context it is applied through, and as it is now:
        // every object re-read and re-planned by its updater under the guard.
        sourced.plan.context = cluster.conn.context.clone();
        match plan_sources::recheck_saved(&cluster, &mut sourced.plan, &checksum).await? {
            Rechecked::Holds(owners) => sourced.owners = owners,
            Rechecked::Refused(report) => sourced.standing = Standing::Drifted(report),
            Rechecked::Applied if settings.fleet.is_some() => {
                // A run over several clusters that stopped after a wave, or failed in one:
                // this cluster is done, the run carries on with the others.
                sourced.plan.objects.clear();
                sourced.standing = Standing::AlreadyApplied {
                    revision: sourced.recorded_by,
                };
            }
            Rechecked::Applied => {
                return Err(AppError::AppliedAlready {
                    message: format!(
                        "{} was applied already: the objects of {} in namespace {} (context {}) carry its checksum and hold every value it changes{}; a saved plan is applied once, so nothing was sent; make a new plan with --plan-out",
                        Untrusted(saved_name(settings)),
                        Untrusted(&sourced.plan.app),
                        Untrusted(cluster.namespace()),
                        Untrusted(&cluster.conn.context),
                        recorded_as(sourced.recorded_by),
                    ),
                });
            }
            Rechecked::AppliedThenChanged { reference } => {
                let message = format!(
                    "{} was applied already, then changed: {} in namespace {} (context {}) carries its checksum, but a value it changes is no longer the planned one: undone or edited since{}; a saved plan is applied once, so nothing was sent; make a new plan with --plan-out",
                    Untrusted(saved_name(settings)),
                    Untrusted(&reference),
                    Untrusted(cluster.namespace()),
                    Untrusted(&cluster.conn.context),
                    recorded_as(sourced.recorded_by),
                );
                let refusal = AppError::Drift { message };
                if settings.fleet.is_none() {
                    return Err(refusal);
                }
                sourced.standing = Standing::Refused(Box::new(refusal));
            }
        }
    }
    Ok(Member {
        index: 0,
        cluster,
        sourced,
    })
}

/// What a cluster's plan is made from: the run's mode, with a saved plan's entry for this
/// cluster already chosen (a context the file holds no plan for was refused when the entries
/// were matched), so sourcing has no case that cannot happen.
enum Target<'a> {
    /// The changes the flags ask for.
    Change(&'a Changes),
    /// The inverse of a history record.
    Undo(&'a UndoRequest),
    /// A saved plan's entry for this cluster, and the file's checksum.
    Saved {
        checksum: &'a str,
        plan: Box<ClusterPlan>,
    },
}

/// The plan for `cluster`: the saved plan's entry for it, the undo's, or the flags' against
/// the live objects.
async fn source(
    settings: &Settings,
    cluster: &Cluster,
    target: Target<'_>,
    check: &SharedCheck,
) -> Result<Sourced, AppError> {
    let changes = match target {
        Target::Change(changes) => changes,
        Target::Undo(request) => {
            let (sourced, user) = tokio::join!(
                plan_sources::undo(
                    cluster,
                    &settings.app,
                    request,
                    settings.history_max > 0,
                    settings.history_key.as_ref(),
                ),
                who_for_record(settings, cluster)
            );
            return sourced.map(|sourced| Sourced { user, ..sourced });
        }
        Target::Saved {
            checksum,
            plan: target,
        } => {
            let checksum = checksum.to_owned();
            let app = target.plan.app.clone();
            let (cm, user) = tokio::join!(
                history_store::read(cluster, &app),
                who_for_record(settings, cluster)
            );
            let cm = cm?;
            // The history is the log, not the lock: whether the plan was applied here is told
            // by its objects ([`plan_sources::recheck_saved`]); the record only names the
            // revision.
            let stored = history::History::from_config_map(cm.as_ref(), &app);
            let recorded_by = plan_sources::applied_by(&stored, &checksum);
            let ClusterPlan {
                plan,
                source,
                owners,
                ..
            } = *target;
            let mut plan = plan;
            for p in &mut plan.objects {
                p.mark = Some(checksum.clone());
            }
            return Ok(Sourced {
                plan,
                source,
                config_map: Some(cm),
                standing: Standing::Ready,
                live: None,
                plan_checksum: Some(checksum),
                recorded_by,
                fleet_run: None,
                owners: Vec::new(),
                owners_in_plan: Some(owners),
                user,
            });
        }
    };
    let written: ContainerUpdate;
    let mut request = UpdateRequest {
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
    // Read with the objects, in the same round: an image change names the revision its record
    // is planned to get, and a history that cannot take the record is said with the plan.
    needs.history = settings.history_max > 0;
    // The image check (started once for the run) and the nodes' platforms, beside the reads.
    let image = image_check::image_of(settings);
    let nodes = async {
        match image {
            Some(_) => Some(image_check::node_list(cluster).await),
            None => None,
        }
    };
    let (live, checked, nodes, user) = tokio::join!(
        plan_sources::read_live(cluster, &request, needs),
        check.clone(),
        nodes,
        who_for_record(settings, cluster)
    );
    let mut live = live?;
    let mut image_notes = Vec::new();
    let mut image_checked = None;
    let mut images = Vec::new();
    if let (Some(image), Some(checked), Some(nodes)) = (image, checked, nodes) {
        let judged = image_check::judge(
            settings,
            cluster,
            image,
            &checked,
            nodes,
            live.deployment.as_ref(),
            changes.container.as_deref(),
        )
        .await?;
        image_notes = judged.notes;
        images.push(judged.report);
        image_checked = judged.digest.map(|digest| CheckedImage {
            image: image.to_owned(),
            digest,
            pinned: settings.image_check.pin_digest,
            signed_by: judged.signed_by,
        });
        if let Some(image) = judged.write {
            written = ContainerUpdate { image: Some(image) };
            request.container_update = &written;
        }
    }
    let mut plan = planner::build_plan(&request, &mut live)?;
    plan.image_notes = image_notes;
    plan.image_checked = image_checked;
    plan.images = images;
    Ok(Sourced {
        plan,
        source: Source::Update,
        // Recording adds to the history as read here (and reads it only if it was not).
        config_map: live.history.take(),
        standing: Standing::Ready,
        live: Some(live),
        plan_checksum: None,
        recorded_by: None,
        fleet_run: None,
        owners: Vec::new(),
        owners_in_plan: None,
        user,
    })
}

/// Who the server says the user is, asked beside the reads when the run may record a change
/// (it may write, and keeps a history): the record then needs no request before the writes,
/// and rides with the one write of a run that sends no dry run ([`crate::writing`]).
async fn who_for_record(settings: &Settings, cluster: &Cluster) -> Option<String> {
    if settings.history_max == 0 || settings.dry_run() || settings.save().is_some() {
        return None;
    }
    Some(history_store::who(cluster).await)
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

/// Two contexts that point at the same API server and namespace would write the same objects
/// twice (and a plan file's plan for them would be applied twice): refused, naming both.
fn one_context_per_cluster(planned: &Planned) -> Result<(), AppError> {
    // By (server, namespace), the first member with them: a fleet of thousands is looked up,
    // not compared pair by pair.
    let mut first: std::collections::HashMap<(&str, &str), &Member> =
        std::collections::HashMap::new();
    for m in planned.members() {
        let other = *first
            .entry((m.cluster.conn.server.as_str(), m.cluster.namespace()))
            .or_insert(m);
        if !std::ptr::eq(other, m) {
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
