//! Reading and adding history records in the cluster (the ConfigMap `<app>-appupdate-history`),
//! and asking the server who we are. The content is [`appupdate_plan::history`]'s.
//!
//! Requests: a run that may record a change reads the ConfigMap and asks who it is (one
//! SelfSubjectReview) with its reads, while planning — two more requests, no more rounds (when
//! that read of the ConfigMap failed, it is read again with the dry run) — and, when it writes
//! something, adds its record with one conditional write sent together with its last round of
//! writes (the record says what they will have done, so it needs no round of its own; a run
//! that writes one object sends no dry run, and its record goes with that one write). A conflict (another run recorded first) costs one read and one write more; so does a
//! record that said more than the writes did ([`correct`]).

use serde_json::Value;

use crate::apply::ApplyOptions;
use appupdate_kube::cluster::{Cluster, RequestError};
use appupdate_kube::describe::Target;
use appupdate_model::plan::Write;
use appupdate_plan::history::{self, Full, History, Record, Seal};
use appupdate_plan::plan_file::PlanKey;

/// What became of a run's history record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// Nothing written, or `--history-max 0`.
    Nothing,
    /// Added as `revision` to the ConfigMap `config_map`.
    Revision { revision: u64, config_map: String },
    /// Not added: the warning to show.
    Warning(String),
}

/// What an applying run learns besides its writes: the stored history as it was read (or why
/// it could not be), and who the server says the user is.
#[derive(Debug)]
pub struct Prepared {
    pub config_map: Result<Option<Value>, RequestError>,
    pub user: String,
}

/// The user a record names: the server's answer, else the kubeconfig's user (`--as`, `--user`
/// or the context's), else `unknown`.
pub async fn who(cluster: &Cluster) -> String {
    match cluster.who_am_i().await {
        Ok(Some(user)) => user,
        _ => cluster
            .conn
            .user
            .clone()
            .unwrap_or_else(|| "unknown".to_owned()),
    }
}

/// What signs and verifies the records of `app`'s history in `cluster` with the history key
/// (`None`: no key, nothing signed or checked).
pub fn seal<'a>(cluster: &'a Cluster, app: &'a str, key: Option<&'a PlanKey>) -> Option<Seal<'a>> {
    key.map(|key| Seal {
        key,
        app,
        namespace: cluster.namespace(),
        server: &cluster.conn.server,
    })
}

/// Reads the history ConfigMap (`None`: there is none).
pub async fn read(cluster: &Cluster, app: &str) -> Result<Option<Value>, crate::error::AppError> {
    let name = history::config_map_name(app);
    cluster
        .get_config_map(&name)
        .await
        .map_err(|e| crate::error::AppError::Request {
            verb: "get",
            target: target(cluster, app),
            source: Box::new(e),
        })
}

/// Reads the history ConfigMap and asks who we are, concurrently.
pub async fn prepare(cluster: &Cluster, app: &str) -> Prepared {
    let name = history::config_map_name(app);
    let (config_map, user) = tokio::join!(cluster.get_config_map(&name), who(cluster));
    Prepared { config_map, user }
}

/// Why a record was not added, as a warning: the changes stand, the history misses them.
pub fn warning(cluster: &Cluster, app: &str, err: &RequestError, verb: &str) -> String {
    format!(
        "warning: the changes were made but not recorded in the history, so --undo does not know them: {}",
        err.describe(verb, &target(cluster, app))
    )
}

/// Why a record was not added to a history at its highest revision, as a warning.
pub fn full_warning(full: &Full) -> String {
    format!(
        "warning: the changes were made but not recorded in the history, so --undo does not know them: {full}"
    )
}

fn target(cluster: &Cluster, app: &str) -> Target {
    Target {
        reference: format!("configmap/{}", history::config_map_name(app)),
        namespace: cluster.namespace().to_owned(),
        context: cluster.conn.context.clone(),
        as_user: cluster.conn.as_user.clone(),
    }
}

/// The ConfigMap a record was added to (`None`: there was none) and as the write left it.
#[derive(Debug)]
pub struct Added {
    pub over: Option<Value>,
    pub written: Value,
}

/// Why a record that lists more than the run did could not be corrected, as a warning.
pub fn correction_warning(
    cluster: &Cluster,
    app: &str,
    revision: u64,
    err: &RequestError,
    verb: &str,
) -> String {
    format!(
        "warning: revision {revision} of the history lists changes that were not all made, and correcting it failed; check `kubectl appupdate history {app}` before undoing it: {}",
        err.describe(verb, &target(cluster, app))
    )
}

/// Why a record was not added, with nothing failed.
#[derive(Debug)]
pub enum NotAdded {
    /// The history holds the highest revision.
    Full(Full),
    /// After a conflict, the run turned out to have nothing to record.
    Needless,
}

/// Adds `record` as the next revision (signed with `key`, when given), keeping `max` records.
/// `config_map` is the ConfigMap as read earlier in the run (`None`: there was none); a
/// conflict (another run recorded first) re-reads it and tries again, at most three times
/// `tries` in all ([`write_fresh`]), backing off, unless `needless` says by then that the record
/// is not needed. Returns the
/// revision, and the ConfigMap before and after the write; `Ok(Err)`: nothing written.
#[allow(clippy::too_many_arguments)]
pub async fn add(
    cluster: &Cluster,
    app: &str,
    config_map: Option<Value>,
    record: &Record,
    max: u32,
    key: Option<&PlanKey>,
    tries: u32,
    needless: impl Fn() -> bool,
) -> Result<Result<(u64, Added), NotAdded>, (RequestError, &'static str)> {
    let seal = seal(cluster, app, key);
    let add = |stored: &History, attempt: u32| {
        if attempt > 1 && needless() {
            return Err(NotAdded::Needless);
        }
        history::add(stored, app, record.clone(), max, seal.as_ref()).map_err(NotAdded::Full)
    };
    write_fresh(cluster, app, config_map, tries, add).await
}

/// Puts `record` in place of the stored revision `revision` (`None`: removes it; signed with
/// `key`, when given), with one
/// conditional write. `added` is the ConfigMap before and after the record's own write: a
/// record removed before any other run recorded gives back the records its addition pruned,
/// and the next run takes its revision number, so the history reads as if it had never been
/// written. A conflict (another run recorded since) re-reads the ConfigMap and tries again, at
/// most three times `tries` in all ([`write_fresh`]), and then only removes it: the other run counted it when it
/// pruned. A revision no longer stored (later runs pruned it) needs nothing.
pub async fn correct(
    cluster: &Cluster,
    app: &str,
    revision: u64,
    record: Option<Record>,
    key: Option<&PlanKey>,
    added: Added,
    tries: u32,
) -> Result<(), (RequestError, &'static str)> {
    let seal = seal(cluster, app, key);
    let restore = history::pruned(added.over.as_ref(), &added.written);
    let replace = |stored: &History, attempt: u32| {
        let restore = if attempt == 1 { &restore[..] } else { &[] };
        history::replace(stored, revision, record.clone(), restore, seal.as_ref())
            .map(|write| (write, ()))
            .ok_or(())
    };
    // `Err(())`: the revision is no longer stored.
    let _ = write_fresh(cluster, app, Some(added.written), tries, replace).await?;
    Ok(())
}

/// How long to wait before attempt `attempt + 1` at the history ConfigMap: the writes' delay
/// ([`crate::apply::backoff`]: from 10 ms, doubling, at most one second), spread over half to
/// one and a half times it. The ConfigMap is contended only by runs of this tool recording at
/// the same moment — each run that writes records, and one whose write did not land takes its
/// record back — and runs that met the same conflict would otherwise retry together again.
fn backoff(attempt: u32) -> std::time::Duration {
    let delay = crate::apply::backoff(&ApplyOptions::default(), attempt);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    delay.mul_f64(0.5 + f64::from(nanos % 1000) / 1000.0)
}

/// Writes the history ConfigMap with the request `make` asks for against it as it stands
/// (`config_map`: as last read or written; `None`: there is none), given the attempt's number
/// from 1; `make` answering `Err` stops with nothing written. A conflict (another run wrote it
/// since), or a ConfigMap created or deleted since, re-reads it and tries again, at most three
/// times `tries` (`--retries`) in all, backing off ([`backoff`]). Returns `make`'s answer, with
/// the ConfigMap before and after the write.
///
/// Three times: only runs of this tool write the ConfigMap, each for a moment, and when many
/// change the application at once every one of them records — a run that writes one object
/// sends its record with that write, and takes it back when the write does not land — so a
/// run whose change landed keeps trying to record it a while longer than an object's write
/// would.
async fn write_fresh<T, Stop>(
    cluster: &Cluster,
    app: &str,
    mut config_map: Option<Value>,
    tries: u32,
    mut make: impl FnMut(&History, u32) -> Result<(Write, T), Stop>,
) -> Result<Result<(T, Added), Stop>, (RequestError, &'static str)> {
    let name = history::config_map_name(app);
    let tries = tries.max(1).saturating_mul(3);
    let mut attempt = 1;
    loop {
        let stored = History::sizes_of(config_map.as_ref());
        let (write, answer) = match make(&stored, attempt) {
            Ok(made) => made,
            Err(stop) => return Ok(Err(stop)),
        };
        let verb = match write {
            Write::Create { .. } => "create",
            _ => "patch",
        };
        match cluster.write_config_map(&name, &write).await {
            Ok(written) => {
                let added = Added {
                    over: config_map,
                    written,
                };
                return Ok(Ok((answer, added)));
            }
            Err(e)
                if attempt < tries
                    && (e.is_conflict() || e.is_already_exists() || e.is_not_found()) =>
            {
                tokio::time::sleep(backoff(attempt)).await;
                attempt += 1;
                config_map = cluster
                    .get_config_map(&name)
                    .await
                    .map_err(|e| (e, "get"))?;
            }
            Err(e) => return Err((e, verb)),
        }
    }
}
