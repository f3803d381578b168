//! The change history of an application: one record per run that wrote something, kept in the
//! cluster next to the application, in the ConfigMap `<app>-appupdate-history` (labelled
//! `app=<app>`).
//!
//! Pure: building a record from a run's [`Report`], the ConfigMap's content and the write
//! that adds a record ([`add`]), reading the records back ([`History::from_config_map`]) and
//! their listing ([`render_table`], [`document`]). Sending is `history_store`'s.
//!
//! # A record
//!
//! When, who, the tool's version, how the run came about (flags, a saved plan, an undo of
//! revision N), whether everything it planned was applied or only part, and what changed:
//! the image (container, before, after), the autoscaler bounds (before, after), the routes
//! before and after in the plugin's own terms ([`appupdate_model::intent`]: style, attachment, each scope
//! group's scopes and paths), the list of route objects created, updated or deleted (kind,
//! name, action: for `history` to show), and — for a run that applied a saved plan — the plan
//! file's checksum. Never an object body: an undo plans the earlier intent through the same
//! planner as an ordinary run ([`crate::undo`]).
//!
//! # Trust
//!
//! Anyone who may write ConfigMaps in the namespace may write a record, so a record is input,
//! not authority. [`History::from_config_map`] validates every record as it reads it
//! ([`validate`]: schema, kinds, names, the image, bounds, every path and scope through the
//! endpoints file's guard, sizes) with decompression bounded ([`MAX_EXPANDED`] per record,
//! [`MAX_READ`] in all); one that fails is listed as unverifiable, with why, and is never
//! undone. Records written by earlier versions held route object bodies: those are neither
//! shown nor replayed, and such a record's routes cannot be undone.
//!
//! Validation says a record is one this tool could have written, not that it did. With the
//! history key (`--history-key`), every record written is signed ([`Seal`]): HMAC-SHA-256 with
//! the key, over the record bound to the application, namespace and API server of its history,
//! its revision and its fleet run, in the record's `signature` field (records without one,
//! earlier versions' included, still read). A reader with the key tells the tool's own records
//! from the rest ([`Signed`]); an undo takes only those that verify. Without the key nothing is
//! signed or checked. A signature cannot say that the history is complete: whoever may write
//! the ConfigMap can still delete records, or put back one that was pruned.
//!
//! # The ConfigMap
//!
//! Each record is one `binaryData` key, `revision-<N>.json.gz`: the record as JSON, gzip'd
//! (route objects repeat the same structure, so hundreds of them compress to a few tens of
//! KiB). Revisions count up from 1 to [`MAX_REVISION`]. A key is a record's only in the form
//! this tool writes — `N` in decimal digits, no leading zero, at most [`MAX_REVISION`] — so
//! each revision has exactly one key; any other key that starts with `revision-` or ends with
//! `.json.gz` (`revision-02.json.gz`, `revision-18446744073709551615.json.gz`) is a [`Stray`]:
//! listed as unverifiable, never counted for the next revision, never pruned, never undone.
//! Revisions are computed with checked arithmetic: a history that holds [`MAX_REVISION`] is not
//! added to ([`Full`]; the run warns that it was not recorded) rather than wrapping. A new record is added with one conditional write — a JSON
//! merge patch carrying the ConfigMap's `resourceVersion`, which adds the new key and removes
//! the pruned ones, or a create when there is no ConfigMap yet — so two runs that record at the
//! same time never lose each other's record: the second one's write conflicts, re-reads and
//! adds its record as the next revision.
//!
//! Kept: the newest `--history-max` records (default 10), and never more than
//! [`BUDGET`] bytes of records in all — a quarter of the 1 MiB that a ConfigMap may hold, so
//! the object stays far from the limit whatever the applications' sizes. The newest record is
//! always kept; one that alone would take more than [`RECORD_BUDGET`] is kept without the
//! route objects' parts (it lists them, and cannot restore them: `--undo` says so).

use std::collections::BTreeMap;
use std::io::{Read, Write as _};

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use appupdate_model::intent::{self, RouteSet, RoutesChange, RoutesHeader};
use appupdate_model::names;
use appupdate_model::plan::{Action, Base, Field, Kind, ObjectChange, PatchType, Write};
use appupdate_model::report::{Outcome, Report};

use crate::plan_file::PlanKey;

/// This program, as it names itself in plan files and history records.
pub fn tool() -> String {
    format!("kubectl-appupdate {}", env!("CARGO_PKG_VERSION"))
}

/// How a change came about: from flags, or as an undo; saved plans carry it into the record
/// of the run that applies them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum Source {
    /// From `--image`, `--min`, `--max`, `--endpoints`.
    Update,
    /// The inverse of the history record `revision` (`--undo`, `--to-revision`).
    Undo { revision: u64 },
}

/// The schema of a record and of `history -o json|yaml`.
pub const SCHEMA: &str = "kubectl-appupdate.history/v1";
/// Records kept by default (`--history-max`).
pub const DEFAULT_MAX: u32 = 10;
/// The most bytes of records (base64 text, as stored) the ConfigMap holds.
pub const BUDGET: usize = 256 * 1024;
/// The most bytes one record may take with its route objects' parts.
pub const RECORD_BUDGET: usize = 128 * 1024;
/// The most bytes a stored record may expand to when read.
pub const MAX_EXPANDED: u64 = 4 * 1024 * 1024;
/// The most bytes all the records read may expand to: the newest are read first, and older
/// ones past this are listed as not read.
pub const MAX_READ: u64 = 32 * 1024 * 1024;
/// The highest revision a record has: `revision-<N>.json.gz` keys above it are not records
/// ([`classify`]), and a history that holds it records nothing more ([`Full`]). At one run a
/// second, it lasts thirty years.
pub const MAX_REVISION: u64 = 1_000_000_000;
const KEY_PREFIX: &str = "revision-";
const KEY_SUFFIX: &str = ".json.gz";

/// The ConfigMap's name.
pub fn config_map_name(app: &str) -> String {
    format!("{app}-appupdate-history")
}

fn key(revision: u64) -> String {
    format!("{KEY_PREFIX}{revision}{KEY_SUFFIX}")
}

/// What a `binaryData` key of the history ConfigMap is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum KeyKind {
    /// A record's key, in the one form [`key`] writes: the revision.
    Record(u64),
    /// Looks like a record's key but is not in that form: why.
    Stray(String),
    /// Not a record's key at all.
    Other,
}

/// Reads a `binaryData` key. A record's key round-trips: `revision-<N>.json.gz` with `N` in
/// decimal digits only, without leading zeros, from 1 to [`MAX_REVISION`] — exactly what
/// [`key`] writes for `N`. Any other key that starts with `revision-` or ends with `.json.gz`
/// (in any case) is a stray: listed, never counted, never undone.
fn classify(key: &str) -> KeyKind {
    let lower = key.to_ascii_lowercase();
    let looks = lower.starts_with(KEY_PREFIX) || lower.ends_with(KEY_SUFFIX);
    if !looks {
        return KeyKind::Other;
    }
    let Some(number) = key
        .strip_prefix(KEY_PREFIX)
        .and_then(|k| k.strip_suffix(KEY_SUFFIX))
    else {
        return KeyKind::Stray(format!("it is not named {KEY_PREFIX}<N>{KEY_SUFFIX}"));
    };
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return KeyKind::Stray("its revision is not a decimal number".into());
    }
    if number.bytes().all(|b| b == b'0') {
        return KeyKind::Stray("its revision is 0, and revisions count from 1".into());
    }
    if number.starts_with('0') {
        return KeyKind::Stray("its revision has a leading zero".into());
    }
    match number.parse::<u64>() {
        Ok(n) if n <= MAX_REVISION => KeyKind::Record(n),
        _ => KeyKind::Stray(format!(
            "its revision is above {MAX_REVISION}, the highest a record has"
        )),
    }
}

fn revision_of(key: &str) -> Option<u64> {
    match classify(key) {
        KeyKind::Record(n) => Some(n),
        _ => None,
    }
}

/// Whether the run applied everything it planned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Applied,
    Partial,
}

/// A value before and after (`None`: absent).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Change<T> {
    pub before: Option<T>,
    pub after: Option<T>,
}

/// The image of one container.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageChange {
    pub container: String,
    pub before: Option<String>,
    pub after: Option<String>,
}

/// The autoscaler bounds that changed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoundsChange {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<Change<i64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<Change<i64>>,
}

/// One route object created, updated or deleted. Records of earlier versions also held the
/// object's parts (`before`, `after`); they are read, to tell such a record apart, and never
/// used.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteChange {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub action: Action,
    #[serde(default, skip_serializing)]
    pub before: Option<Value>,
    #[serde(default, skip_serializing)]
    pub after: Option<Value>,
}

impl RouteChange {
    /// The kind of the recorded route object, as this version knows it.
    pub fn known_kind(&self) -> Option<Kind> {
        let kind: Kind = serde_json::from_value(Value::String(self.kind.clone())).ok()?;
        (kind.api_version() == self.api_version).then_some(kind)
    }
}

/// One recorded run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Record {
    pub revision: u64,
    /// RFC 3339, UTC.
    pub time: String,
    /// The user the server authenticated (else the kubeconfig's user).
    pub user: String,
    pub tool: String,
    pub status: Status,
    pub source: Source,
    /// Applied from a saved plan (`kubectl appupdate apply FILE`).
    #[serde(default)]
    pub saved_plan: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageChange>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounds: Option<BoundsChange>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<RouteChange>,
    /// The routes before and after the run, in the plugin's terms: what an undo plans from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoints: Option<RoutesChange>,
    /// The routes were left out to keep the record small: its routes cannot be undone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub routes_truncated: bool,
    /// The checksum of the saved plan the run applied (`apply FILE`): a file is applied once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_checksum: Option<String>,
    /// The run over several clusters this record is one cluster's part of: what a fleet undo
    /// picks the records by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet_run: Option<String>,
    /// Who else owned fields the run wrote ([`appupdate_model::owners`]): the owners it
    /// overrode, with `--force-conflicts` or a yes to the question that named them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overridden: Vec<Overridden>,
    /// `hmac-sha256:<hex>` with the history key (`--history-key`), over the rest of the record
    /// bound to where it is kept ([`Seal`]); `None`: written without a key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// An owner whose fields a run wrote over, as its record keeps it (the `-o json` plan's
/// owner, less the consequence).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Overridden {
    /// The object, as the plan names it (`deployment.apps/web`).
    pub object: String,
    /// `helm`, `argocd`, `flux-kustomization`, `flux-helmrelease`, `kapp` or `field-manager`.
    pub tool: String,
    /// The release, application, Kustomization, HelmRelease, kapp app or field manager.
    pub name: String,
    /// The changed fields it held; empty when it owned the whole object.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
    /// `apply-conflict`, `update-takes-back` or `object-owned`.
    pub reason: String,
}

impl Overridden {
    /// The owner as the plan named it (`Helm release shop/web`); `None` for a tool this build
    /// does not know.
    fn who(&self) -> Option<appupdate_model::owners::Who> {
        appupdate_model::owners::Who::from_parts(&self.tool, &self.name)
    }
}

/// What a run knows about itself besides its report.
#[derive(Clone, Debug)]
pub struct RunInfo {
    pub time: String,
    pub user: String,
    pub source: Source,
    pub saved_plan: bool,
    /// The plan's routes header, when it publishes endpoints.
    pub routes: Option<RoutesHeader>,
    /// The checksum of the saved plan being applied.
    pub plan_checksum: Option<String>,
    /// The run over several clusters this run is part of.
    pub fleet_run: Option<String>,
    /// Who else owns fields the plan changes: those of the objects the run writes are the
    /// owners it overrides.
    pub owners: Vec<appupdate_model::owners::ObjectOwners>,
}

/// What a record's signature is over besides the record: this name, so that no other
/// signature made with the same key (a plan file's, over other content) reads as a record's.
const SIGNED: &str = "kubectl-appupdate.history-record/v1";

/// The history key (`--history-key`) and where the history it signs is kept. A record's
/// signature is over its content bound to the application, the namespace and the API server of
/// its history, its revision and its fleet run: the same record copied to another revision,
/// application, namespace or cluster does not verify.
#[derive(Clone, Copy, Debug)]
pub struct Seal<'a> {
    pub key: &'a PlanKey,
    pub app: &'a str,
    pub namespace: &'a str,
    /// The API server URL, as the kubeconfig names it.
    pub server: &'a str,
}

/// Whether a record verifies with the history key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signed {
    /// Signed with the key, for this history and revision, and unchanged since.
    Verified,
    /// Not signed: written without a key, or by someone else.
    Unsigned,
    /// Signed, but not with this key over this content here: changed after signing, signed
    /// with another key, or copied from another revision, application, namespace or cluster.
    Invalid,
}

impl Signed {
    /// How `history` names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Signed::Verified => "verified",
            Signed::Unsigned => "unsigned",
            Signed::Invalid => "invalid",
        }
    }
}

impl Seal<'_> {
    /// What the signature of `record` is over: the record without its signature, bound to
    /// where it is kept.
    fn content(&self, record: &Record) -> Vec<u8> {
        let mut unsigned = serde_json::to_value(record).unwrap_or(Value::Null);
        if let Some(fields) = unsigned.as_object_mut() {
            fields.remove("signature");
        }
        crate::plan_file::canonical(&json!({
            "schema": SIGNED,
            "app": self.app,
            "namespace": self.namespace,
            "server": self.server,
            "revision": record.revision,
            "fleetRun": record.fleet_run,
            "record": unsigned,
        }))
    }

    /// Signs `record` as it will be stored (its revision set).
    pub fn sign(&self, record: &mut Record) {
        record.signature = None;
        record.signature = self.key.sign(&self.content(record));
    }

    /// Whether `record` (as read, its revision the one of its key) verifies.
    pub fn check(&self, record: &Record) -> Signed {
        match &record.signature {
            None => Signed::Unsigned,
            Some(signature) if self.key.verifies(&self.content(record), signature) => {
                Signed::Verified
            }
            Some(_) => Signed::Invalid,
        }
    }
}

fn as_string(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str).map(str::to_owned)
}

/// The most overridden owners a record may list (and fields per owner); a plan changes a few
/// objects, each with a few owners.
const MAX_OVERRIDDEN: usize = 256;

/// The record of a run, or `None` when it wrote nothing. `revision` is set when it is added.
pub fn record(report: &Report, info: &RunInfo) -> Option<Record> {
    let mut image = None;
    let mut bounds = BoundsChange::default();
    let mut routes = Vec::new();
    let mut not_done = false;
    let mut written: Vec<String> = Vec::new();
    let mut before_groups = intent::Groups::new();
    let mut after_groups = intent::Groups::new();
    for (change, outcome) in &report.entries {
        let done = matches!(
            outcome,
            Outcome::Applied | Outcome::Unknown { .. } | Outcome::AlreadyDone
        );
        if let Some(info) = &change.route {
            intent::add_paths(&mut before_groups, &info.scopes, &info.paths_before);
            let served = if done {
                &info.paths
            } else {
                &info.paths_before
            };
            intent::add_paths(&mut after_groups, &info.scopes, served);
        }
        match outcome {
            Outcome::Applied | Outcome::Unknown { .. } => {}
            Outcome::Unchanged | Outcome::AlreadyDone => continue,
            _ => {
                not_done = true;
                continue;
            }
        }
        if !change.is_change() {
            continue;
        }
        written.push(change.reference());
        match change.kind {
            Kind::Deployment => {
                for f in &change.fields {
                    if let Some(Field::Image { container }) = f.field() {
                        image = Some(ImageChange {
                            container: container.to_owned(),
                            before: as_string(f.before().as_deref()),
                            after: as_string(f.after().as_deref()),
                        });
                    }
                }
            }
            Kind::HorizontalPodAutoscaler => {
                for f in &change.fields {
                    let c = Change {
                        before: f.before().and_then(|v| v.as_i64()),
                        after: f.after().and_then(|v| v.as_i64()),
                    };
                    match f.field() {
                        Some(Field::MinReplicas) => bounds.min = Some(c),
                        Some(Field::MaxReplicas) => bounds.max = Some(c),
                        _ => {}
                    }
                }
            }
            _ => routes.push(route_change(change)),
        }
    }
    let bounds = (bounds.min.is_some() || bounds.max.is_some()).then_some(bounds);
    if image.is_none() && bounds.is_none() && routes.is_empty() {
        return None;
    }
    let endpoints = match (&info.routes, routes.is_empty()) {
        (Some(h), false) => Some(RoutesChange {
            before: RouteSet::new(h.style_before, h.attachment_before.clone(), before_groups),
            after: RouteSet::new(h.style, h.attachment.clone(), after_groups),
        }),
        _ => None,
    };
    let partial = not_done || report.interrupted.is_some();
    let overridden = info
        .owners
        .iter()
        .filter(|o| written.contains(&o.object))
        .flat_map(|o| {
            o.owners.iter().map(|owner| {
                let (tool, name) = owner.who.parts();
                Overridden {
                    object: o.object.clone(),
                    tool: tool.to_owned(),
                    name: name.to_owned(),
                    fields: owner.fields.clone(),
                    reason: owner.reason.code().to_owned(),
                }
            })
        })
        .collect();
    Some(Record {
        revision: 0,
        time: info.time.clone(),
        user: info.user.clone(),
        tool: tool(),
        status: if partial {
            Status::Partial
        } else {
            Status::Applied
        },
        source: info.source.clone(),
        saved_plan: info.saved_plan,
        image,
        bounds,
        routes,
        endpoints,
        routes_truncated: false,
        plan_checksum: info.plan_checksum.clone(),
        fleet_run: info.fleet_run.clone(),
        overridden,
        signature: None,
    })
}

fn route_change(change: &ObjectChange) -> RouteChange {
    RouteChange {
        api_version: change.kind.api_version().to_owned(),
        kind: change.kind.to_string(),
        name: change.name.clone(),
        action: change.action(),
        before: None,
        after: None,
    }
}

impl Record {
    /// What changed, in one line: `image web:1 → web:2, min 2 → 3; routes: 1 created`.
    pub fn description(&self) -> String {
        let mut parts = Vec::new();
        if let Some(i) = &self.image {
            parts.push(format!(
                "image {} → {}",
                i.before.as_deref().unwrap_or("(none)"),
                i.after.as_deref().unwrap_or("(none)")
            ));
        }
        let n = |v: Option<i64>| v.map_or("(none)".to_owned(), |v| v.to_string());
        if let Some(b) = &self.bounds {
            if let Some(c) = &b.min {
                parts.push(format!("min {} → {}", n(c.before), n(c.after)));
            }
            if let Some(c) = &b.max {
                parts.push(format!("max {} → {}", n(c.before), n(c.after)));
            }
        }
        let mut text = parts.join(", ");
        if !self.routes.is_empty() {
            let count = |a: Action| self.routes.iter().filter(|r| r.action == a).count();
            let counts: Vec<String> = [
                (Action::Create, "created"),
                (Action::Update, "updated"),
                (Action::Delete, "deleted"),
            ]
            .into_iter()
            .filter(|(a, _)| count(*a) > 0)
            .map(|(a, word)| format!("{} {word}", count(a)))
            .collect();
            if !text.is_empty() {
                text.push_str("; ");
            }
            text.push_str(&format!("routes: {}", counts.join(", ")));
        }
        if !self.overridden.is_empty() {
            let mut named: Vec<String> = Vec::new();
            for o in &self.overridden {
                let who = o
                    .who()
                    .map_or_else(|| format!("{} {}", o.tool, o.name), |w| w.to_string());
                let one = format!("{who} ({})", o.object);
                if !named.contains(&one) {
                    named.push(one);
                }
            }
            text.push_str(&format!("; overrode {}", named.join(", ")));
        }
        match self.source {
            Source::Undo { revision } => format!("undo of revision {revision}: {text}"),
            Source::Update => text,
        }
    }
}

/// One stored record as read: the record, or why it cannot be trusted ([`validate`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Entry {
    Record(Box<Record>),
    Unverifiable { revision: u64, why: String },
}

impl Entry {
    pub fn revision(&self) -> u64 {
        match self {
            Entry::Record(r) => r.revision,
            Entry::Unverifiable { revision, .. } => *revision,
        }
    }
}

/// Why a record picked for an undo cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PickError {
    /// There is no such record.
    Missing(String),
    /// It is stored but fails validation: never undone.
    Unverifiable(String),
}

/// A `binaryData` key that looks like a record's but is not in the one form this tool writes
/// (`revision-02.json.gz`, `revision-18446744073709551615.json.gz`): listed by `history`,
/// never counted for the next revision, never undone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stray {
    pub key: String,
    pub why: String,
}

/// The history holds [`MAX_REVISION`]: no record can be numbered after it, so none is added.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "configmap/{config_map} holds revision {MAX_REVISION}, the highest a record has, so no record can follow it; save its records (kubectl appupdate history {app} -o json) and delete the ConfigMap to number them from 1 again"
)]
pub struct Full {
    pub config_map: String,
    pub app: String,
}

/// The records stored for an application, oldest first, and the ConfigMap's identity.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct History {
    pub entries: Vec<Entry>,
    /// Keys that look like records' but are not ([`Stray`]), by key.
    pub strays: Vec<Stray>,
    /// `None`: there is no ConfigMap yet.
    pub base: Option<Base>,
    /// Stored size of each record (base64 bytes), by revision.
    sizes: BTreeMap<u64, usize>,
    /// Whether each record verifies with the history key, by revision, once checked
    /// ([`History::check_signatures`]); `None`: not checked (no key).
    pub signatures: Option<BTreeMap<u64, Signed>>,
}

/// A record as stored: gzip'd JSON, base64.
pub fn encode(record: &Record) -> String {
    let json = serde_json::to_vec(record).unwrap_or_default();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    // Writing to a Vec cannot fail.
    let _ = gz.write_all(&json);
    let bytes = gz.finish().unwrap_or_default();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A stored text as a record, expanding at most `budget` bytes (counted down by what it
/// expanded to), not yet validated.
fn decode_within(text: &str, budget: &mut u64) -> Result<Record, String> {
    if text.len() > 2 * RECORD_BUDGET {
        return Err(format!(
            "it is stored in {} bytes, more than a record takes",
            text.len()
        ));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|_| "not base64".to_owned())?;
    let limit = MAX_EXPANDED.min(*budget);
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(bytes.as_slice())
        .take(limit + 1)
        .read_to_end(&mut json)
        .map_err(|_| "not gzip".to_owned())?;
    *budget = budget.saturating_sub(json.len() as u64);
    if json.len() as u64 > limit {
        return Err(if limit < MAX_EXPANDED {
            format!(
                "not read: the records read before it expand to more than {} MiB in all",
                MAX_READ >> 20
            )
        } else {
            format!("it expands to more than {} MiB", MAX_EXPANDED >> 20)
        });
    }
    let value: Value = serde_json::from_slice(&json).map_err(|_| "not JSON".to_owned())?;
    serde_json::from_value(value).map_err(|e| format!("not a record of {SCHEMA} ({e})"))
}

#[cfg(test)]
fn decode(text: &str) -> Result<Record, String> {
    decode_within(text, &mut MAX_READ.clone())
}

/// Why `record` (stored as revision `revision` in the history of `app`) cannot be trusted, if
/// it cannot: every value must be one this tool could have written (see the module docs).
pub fn validate(record: &Record, app: &str) -> Result<(), String> {
    let printable = |what: &str, v: &str, max: usize| {
        if v.chars().count() > max || v.chars().any(char::is_control) {
            Err(format!(
                "its {what} is longer than {max} characters or has control characters"
            ))
        } else {
            Ok(())
        }
    };
    printable("time", &record.time, 64)?;
    if record.time.parse::<jiff::Timestamp>().is_err() {
        return Err(format!(
            "its time {:?} is not an RFC 3339 time",
            record.time
        ));
    }
    printable("user", &record.user, 512)?;
    printable("tool", &record.tool, 128)?;
    if let Source::Undo { revision } = record.source
        && (revision == 0 || revision >= record.revision)
    {
        return Err(format!(
            "it says it undid revision {revision}, which is not an earlier revision"
        ));
    }
    if let Some(i) = &record.image {
        if !names::is_dns1123_label(&i.container) {
            return Err(format!(
                "its container name {:?} is not a valid container name",
                i.container
            ));
        }
        for image in [&i.before, &i.after].into_iter().flatten() {
            crate::updaters::validate_image_reference(image).map_err(|why| {
                format!("its image {image:?} is not a valid image reference: {why}")
            })?;
        }
    }
    if let Some(b) = &record.bounds {
        for c in [&b.min, &b.max].into_iter().flatten() {
            for v in [c.before, c.after].into_iter().flatten() {
                if !(1..=i64::from(i32::MAX)).contains(&v) {
                    return Err(format!("its autoscaler bound {v} is out of range"));
                }
            }
        }
    }
    if record.routes.len() > intent::MAX_PATHS {
        return Err(format!("it lists {} route objects", record.routes.len()));
    }
    if record.overridden.len() > MAX_OVERRIDDEN {
        return Err(format!(
            "it lists {} overridden owners",
            record.overridden.len()
        ));
    }
    for o in &record.overridden {
        printable("overridden object", &o.object, 512)?;
        printable("overridden owner", &o.name, 512)?;
        if o.who().is_none()
            || appupdate_model::owners::Reason::from_code(&o.reason).is_none()
            || o.fields.len() > MAX_OVERRIDDEN
        {
            return Err(format!(
                "it lists an overridden owner of an unknown kind {:?} or reason {:?}",
                o.tool, o.reason
            ));
        }
        for f in &o.fields {
            printable("overridden field", f, 1024)?;
        }
    }
    for r in &record.routes {
        let kind = r
            .known_kind()
            .filter(|k| k.is_route_part())
            .ok_or_else(|| {
                format!(
                    "it lists an object of kind {} ({}), which is not a route kind (Ingress, HTTPRoute, SecurityPolicy)",
                    r.kind, r.api_version
                )
            })?;
        if !names::is_dns1123_subdomain(&r.name) {
            return Err(format!(
                "it lists a {kind} named {:?}, which is not a valid object name",
                r.name
            ));
        }
        if r.action == Action::Unchanged {
            return Err(format!("it lists {kind} {} as unchanged", r.name));
        }
    }
    if let Some(e) = &record.endpoints {
        let source = |when: &str| format!("revision {} (routes {when})", record.revision);
        e.before
            .check(&source("before"))
            .map_err(|why| format!("its routes before the change are not valid: {why}"))?;
        e.after
            .check(&source("after"))
            .map_err(|why| format!("its routes after the change are not valid: {why}"))?;
    }
    if let Some(c) = &record.plan_checksum
        && !is_checksum(c)
    {
        return Err("its plan checksum is not a sha256:<64 hex digits> checksum".into());
    }
    if let Some(id) = &record.fleet_run
        && !is_fleet_run(id)
    {
        return Err("its fleet run is not an identifier (a-z, 0-9, -; at most 64)".into());
    }
    if let Some(s) = &record.signature
        && !is_signature(s)
    {
        return Err("its signature is not an hmac-sha256:<64 hex digits> signature".into());
    }
    let _ = app;
    Ok(())
}

/// A fleet run's identifier: 1 to 64 of `a-z`, `0-9`, `-`.
pub fn is_fleet_run(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// `hmac-sha256:` and 64 lowercase hex digits.
fn is_signature(s: &str) -> bool {
    s.strip_prefix("hmac-sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// `sha256:` and 64 lowercase hex digits.
pub fn is_checksum(c: &str) -> bool {
    c.strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// The records a ConfigMap's `binaryData` holds: each key that names a revision, with its
/// stored text (other keys are not records).
fn stored_texts(cm: &Value) -> impl Iterator<Item = (u64, &str)> {
    cm["binaryData"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((revision_of(k)?, v.as_str().unwrap_or_default())))
}

impl History {
    /// Reads the ConfigMap of `app`'s history (`None`: there is none), newest record first
    /// within [`MAX_READ`]. Keys that are not records are ignored; records that cannot be read
    /// or fail [`validate`] are listed as unverifiable.
    pub fn from_config_map(cm: Option<&Value>, app: &str) -> History {
        let mut history = History::sizes_of(cm);
        if let Some(cm) = cm {
            let mut texts: Vec<(u64, &str)> = stored_texts(cm).collect();
            texts.sort_by_key(|(revision, _)| std::cmp::Reverse(*revision));
            let mut budget = MAX_READ;
            history.entries = texts
                .into_iter()
                .map(|(revision, text)| {
                    let read = decode_within(text, &mut budget).and_then(|mut r| {
                        r.revision = revision;
                        validate(&r, app)?;
                        Ok(r)
                    });
                    match read {
                        Ok(r) => Entry::Record(Box::new(r)),
                        Err(why) => Entry::Unverifiable { revision, why },
                    }
                })
                .collect();
            history.entries.sort_by_key(Entry::revision);
            history.strays = cm["binaryData"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(key, _)| match classify(key) {
                    KeyKind::Stray(why) => Some(Stray {
                        key: key.clone(),
                        why,
                    }),
                    _ => None,
                })
                .collect();
            history.strays.sort_by(|a, b| a.key.cmp(&b.key));
        }
        history
    }

    /// Nothing stored: no record, and no key that looks like one.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.strays.is_empty()
    }

    /// Checks each record's signature with the history key ([`History::signatures`]).
    pub fn check_signatures(&mut self, seal: &Seal<'_>) {
        self.signatures = Some(
            self.entries
                .iter()
                .filter_map(|e| match e {
                    Entry::Record(r) => Some((r.revision, seal.check(r))),
                    Entry::Unverifiable { .. } => None,
                })
                .collect(),
        );
    }

    /// What adding a record needs of the ConfigMap (`None`: there is none): each stored
    /// record's revision and size and the ConfigMap's identity, without decoding any record
    /// (`entries` stays empty). Every run that writes reads it, and decoding every record kept
    /// to add one would cost more than the record.
    pub fn sizes_of(cm: Option<&Value>) -> History {
        let Some(cm) = cm else {
            return History::default();
        };
        History {
            base: Base::of(cm),
            sizes: stored_texts(cm)
                .map(|(revision, text)| (revision, text.len()))
                .collect(),
            ..History::default()
        }
    }

    /// The newest record of the fleet run `id`; `None` when that run left none here.
    pub fn of_fleet_run(&self, id: &str) -> Option<&Record> {
        self.entries.iter().rev().find_map(|e| match e {
            Entry::Record(r) if r.fleet_run.as_deref() == Some(id) => Some(&**r),
            _ => None,
        })
    }

    /// The newest fleet run recorded here, and when its newest record was made.
    pub fn newest_fleet_run(&self) -> Option<(&str, &str)> {
        self.entries.iter().rev().find_map(|e| match e {
            Entry::Record(r) => r.fleet_run.as_deref().map(|id| (id, r.time.as_str())),
            _ => None,
        })
    }

    /// The record of `revision`, else the newest; `Err` says why there is none.
    pub fn pick(&self, revision: Option<u64>) -> Result<&Record, PickError> {
        let entry = match revision {
            Some(n) => self.entries.iter().find(|e| e.revision() == n),
            None => self.entries.last(),
        };
        match entry {
            Some(Entry::Record(r)) => Ok(r),
            Some(Entry::Unverifiable { revision, why }) => Err(PickError::Unverifiable(format!(
                "revision {revision} is not verifiable ({why}), so it is not undone"
            ))),
            None => Err(PickError::Missing(match revision {
                Some(n) => {
                    let kept: Vec<String> = self
                        .entries
                        .iter()
                        .map(|e| e.revision().to_string())
                        .collect();
                    if kept.is_empty() {
                        format!("there is no revision {n}: no changes are recorded")
                    } else {
                        format!("there is no revision {n} (kept: {})", kept.join(", "))
                    }
                }
                None => "no changes are recorded".to_owned(),
            })),
        }
    }

    /// The revision the next record added gets; `None` when the newest stored is
    /// [`MAX_REVISION`] ([`Full`]).
    pub fn next_revision(&self) -> Option<u64> {
        match self.sizes.keys().next_back() {
            None => Some(1),
            Some(newest) => newest.checked_add(1).filter(|r| *r <= MAX_REVISION),
        }
    }
}

/// `record` as stored (signed with `seal`, when given), without its routes (the intent and
/// the list of objects) if they would take more than [`RECORD_BUDGET`].
fn stored_text(mut record: Record, seal: Option<&Seal<'_>>) -> String {
    let encode = |record: &mut Record| {
        if let Some(seal) = seal {
            seal.sign(record);
        }
        encode(record)
    };
    let text = encode(&mut record);
    if text.len() <= RECORD_BUDGET {
        return text;
    }
    record.endpoints = None;
    record.routes_truncated = true;
    let text = encode(&mut record);
    if text.len() <= RECORD_BUDGET {
        return text;
    }
    record.routes.clear();
    encode(&mut record)
}

/// The records `before` held that `after` does not: what adding a record to `before` pruned.
pub fn pruned(before: Option<&Value>, after: &Value) -> Vec<(u64, String)> {
    let kept: BTreeMap<u64, &str> = stored_texts(after).collect();
    before
        .map(|cm| {
            stored_texts(cm)
                .filter(|(revision, _)| !kept.contains_key(revision))
                .map(|(revision, text)| (revision, text.to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// The request that puts `record` (signed with `seal`, when given) in place of the stored
/// revision `revision` of `history` (`None`: removes it, putting back the records its addition
/// pruned, `restore`), or `None` when that revision is no longer stored. A run writes its
/// record together with its last writes, saying what they will have done; this corrects it
/// when they did less.
pub fn replace(
    history: &History,
    revision: u64,
    record: Option<Record>,
    restore: &[(u64, String)],
    seal: Option<&Seal<'_>>,
) -> Option<Write> {
    let base = history.base.clone()?;
    if !history.sizes.contains_key(&revision) {
        return None;
    }
    let mut data = serde_json::Map::new();
    match record {
        Some(mut record) => {
            record.revision = revision;
            data.insert(key(revision), Value::String(stored_text(record, seal)));
        }
        None => {
            data.insert(key(revision), Value::Null);
            for (r, text) in restore {
                data.insert(key(*r), Value::String(text.clone()));
            }
        }
    }
    Some(Write::Patch {
        base,
        patch_type: PatchType::Merge,
        body: json!({ "binaryData": data }).into(),
    })
}

/// The request that adds `record` to `history` as its next revision (signed with `seal`,
/// when given), keeping at most `max` records within [`BUDGET`]; and the revision it gets.
/// `Err` when the history holds [`MAX_REVISION`]: nothing is added.
pub fn add(
    history: &History,
    app: &str,
    mut record: Record,
    max: u32,
    seal: Option<&Seal<'_>>,
) -> Result<(Write, u64), Full> {
    let revision = history.next_revision().ok_or_else(|| Full {
        config_map: config_map_name(app),
        app: app.to_owned(),
    })?;
    record.revision = revision;
    let text = stored_text(record, seal);
    // Newest first: keep while within the count and the budget.
    let mut total = text.len();
    let mut keep = 1u32;
    let mut drop = Vec::new();
    for (rev, size) in history.sizes.iter().rev() {
        match total.checked_add(*size) {
            Some(more) if keep < max.max(1) && more <= BUDGET => {
                keep += 1;
                total = more;
            }
            _ => drop.push(*rev),
        }
    }
    let write = match &history.base {
        None => Write::Create {
            body: json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": config_map_name(app),
                    "labels": {"app": app, "app.kubernetes.io/managed-by": "kubectl-appupdate"},
                },
                "binaryData": {key(revision): text},
            })
            .into(),
        },
        Some(base) => {
            let mut data = serde_json::Map::new();
            for rev in drop {
                data.insert(key(rev), Value::Null);
            }
            data.insert(key(revision), Value::String(text));
            Write::Patch {
                base: base.clone(),
                patch_type: PatchType::Merge,
                body: json!({"binaryData": data}).into(),
            }
        }
    };
    Ok((write, revision))
}

/// Why a stray key is listed, in one sentence.
fn stray_why(stray: &Stray) -> String {
    format!(
        "{} is not a record key ({}; a record is {KEY_PREFIX}<N>{KEY_SUFFIX}, N from 1 to {MAX_REVISION} without leading zeros), so it is never counted or undone",
        stray.key, stray.why
    )
}

/// `history -o json|yaml`: the records, oldest first; with the history key checked, whether
/// each verifies (`signatureCheck`); keys that look like records' but are not
/// (`unverifiableKeys`).
pub fn document(app: &str, namespace: &str, history: &History) -> Value {
    let records: Vec<Value> = history
        .entries
        .iter()
        .map(|e| match e {
            Entry::Record(r) => {
                let mut v = serde_json::to_value(r).unwrap_or(Value::Null);
                if let Some(signed) = history.signed(r.revision) {
                    v["signatureCheck"] = json!(signed.as_str());
                }
                v
            }
            Entry::Unverifiable { revision, why } => {
                json!({"revision": revision, "unverifiable": why})
            }
        })
        .collect();
    let mut doc = json!({"schema": SCHEMA, "app": app, "namespace": namespace, "records": records});
    if !history.strays.is_empty() {
        doc["unverifiableKeys"] = history
            .strays
            .iter()
            .map(|s| json!({"key": s.key, "unverifiable": stray_why(s)}))
            .collect();
    }
    doc
}

impl History {
    /// Whether the record of `revision` verifies, when the signatures were checked.
    pub fn signed(&self, revision: u64) -> Option<Signed> {
        self.signatures.as_ref()?.get(&revision).copied()
    }
}

/// The listing for people, like `helm history`: one line per record, oldest first, then one
/// per stray key (revision `-`); with the history key checked, a `SIGNATURE` column
/// (`verified`, `unsigned`, `invalid`). `escape` makes each value printable.
pub fn render_table(history: &History, escape: &dyn Fn(&str) -> String) -> String {
    let signatures = history.signatures.is_some();
    let row = |revision: String, time: String, user: String, status: &str, signed: &str, text| {
        let mut row = vec![revision, time, user, status.to_owned()];
        if signatures {
            row.push(signed.to_owned());
        }
        row.push(text);
        row
    };
    let mut rows = vec![row(
        "REVISION".into(),
        "UPDATED".into(),
        "USER".into(),
        "STATUS",
        "SIGNATURE",
        "DESCRIPTION".into(),
    )];
    for e in &history.entries {
        rows.push(match e {
            Entry::Record(r) => row(
                r.revision.to_string(),
                escape(&r.time),
                escape(&r.user),
                match r.status {
                    Status::Applied => "applied",
                    Status::Partial => "partial",
                },
                history.signed(r.revision).map_or("", Signed::as_str),
                escape(&r.description()),
            ),
            Entry::Unverifiable { revision, why } => row(
                revision.to_string(),
                String::new(),
                String::new(),
                "unverifiable",
                "",
                escape(why),
            ),
        });
    }
    for stray in &history.strays {
        rows.push(row(
            "-".into(),
            String::new(),
            String::new(),
            "unverifiable",
            "",
            escape(&stray_why(stray)),
        ));
    }
    let padded = rows[0].len() - 1;
    let widths: Vec<usize> = (0..padded)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            match widths.get(i) {
                Some(w) => out.push_str(&format!("{cell:<w$}  ")),
                None => out.push_str(cell),
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use appupdate_model::plan::FieldChange;
    use appupdate_model::plan::View;
    use appupdate_model::plan::{RouteInfo, RouteStyle};

    fn info() -> RunInfo {
        RunInfo {
            time: "2026-12-01T07:00:00Z".into(),
            user: "admin".into(),
            source: Source::Update,
            saved_plan: false,
            routes: Some(appupdate_model::intent::RoutesHeader {
                style_before: Some(RouteStyle::NginxAuth),
                style: Some(RouteStyle::NginxAuth),
                ..Default::default()
            }),
            plan_checksum: None,
            fleet_run: None,
            owners: Vec::new(),
        }
    }

    fn change(kind: Kind, name: &str, action: Action) -> ObjectChange {
        let mut c = ObjectChange::sample(name, action);
        c.kind = kind;
        c
    }

    fn ingress_view(name: &str, paths: &[&str]) -> Value {
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
               "metadata": {"name": name, "namespace": "shop", "labels": {"app": "web", "identifier": "x"}},
               "spec": {"rules": [{"http": {"paths": paths.iter().map(|p| json!({"path": p})).collect::<Vec<_>>()}}]}})
    }

    fn sample_report() -> Report {
        let mut image = change(Kind::Deployment, "web", Action::Update);
        image.fields = vec![FieldChange::new(
            "spec.template.spec.containers[name=app].image",
            Some(json!("r/web:1")),
            Some(json!("r/web:2")),
        )];
        let mut hpa = change(Kind::HorizontalPodAutoscaler, "web", Action::Update);
        hpa.fields = vec![FieldChange::new(
            "spec.maxReplicas",
            Some(json!(5)),
            Some(json!(9)),
        )];
        let info = |scopes: &[&str], before: &[&str], after: &[&str]| RouteInfo {
            style: RouteStyle::NginxAuth,
            identifier: "x".into(),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            paths: after.iter().map(|s| s.to_string()).collect(),
            paths_before: before.iter().map(|s| s.to_string()).collect(),
            foreign: Vec::new(),
        };
        let mut created = change(Kind::Ingress, "web-a", Action::Create);
        created.after = Some(View::from(ingress_view("web-a", &["/web/a"])));
        created.route = Some(info(&["admin"], &[], &["/a"]));
        let mut updated = change(Kind::Ingress, "web-b", Action::Update);
        updated.before = Some(View::from(ingress_view("web-b", &["/web/b"])));
        updated.after = Some(View::from(ingress_view("web-b", &["/web/b", "/web/c"])));
        updated.route = Some(info(&[], &["/b"], &["/b", "/c"]));
        let mut deleted = change(Kind::Ingress, "web-c", Action::Delete);
        deleted.before = Some(View::from(ingress_view("web-c", &["/web/old"])));
        deleted.route = Some(info(&["user"], &["/old"], &[]));
        Report {
            entries: vec![
                (image.into(), Outcome::Applied),
                (hpa.into(), Outcome::Applied),
                (created.into(), Outcome::Applied),
                (updated.into(), Outcome::Applied),
                (deleted.into(), Outcome::Applied),
            ],
            stopped_in_preflight: false,
            interrupted: None,
        }
    }

    #[test]
    fn a_record_keeps_image_bounds_and_the_routes_as_what_they_served() {
        let r = record(&sample_report(), &info()).unwrap();
        assert_eq!(
            r.image,
            Some(ImageChange {
                container: "app".into(),
                before: Some("r/web:1".into()),
                after: Some("r/web:2".into())
            })
        );
        assert_eq!(
            r.bounds.as_ref().unwrap().max,
            Some(Change {
                before: Some(5),
                after: Some(9)
            })
        );
        assert_eq!(r.bounds.as_ref().unwrap().min, None);
        assert_eq!(r.status, Status::Applied);
        let by_name = |n: &str| r.routes.iter().find(|x| x.name == n).unwrap();
        assert_eq!(by_name("web-a").action, Action::Create);
        assert_eq!(by_name("web-c").action, Action::Delete);
        // No object body is kept: the routes are kept as what they served.
        assert!(
            r.routes
                .iter()
                .all(|x| x.before.is_none() && x.after.is_none())
        );
        let text = serde_json::to_string(&r).unwrap();
        assert!(!text.contains("\"before\":{\"apiVersion"), "{text}");
        let e = r.endpoints.as_ref().unwrap();
        let groups = |set: &RouteSet| {
            set.groups
                .iter()
                .map(|g| (g.scopes.join(" "), g.paths.join(" ")))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            groups(&e.before),
            [("".into(), "/b".into()), ("user".into(), "/old".into())]
        );
        assert_eq!(
            groups(&e.after),
            [("".into(), "/b /c".into()), ("admin".into(), "/a".into())]
        );
        assert_eq!(e.before.style, Some(RouteStyle::NginxAuth));
        assert_eq!(
            r.description(),
            "image r/web:1 → r/web:2, max 5 → 9; routes: 1 created, 1 updated, 1 deleted"
        );
    }

    #[test]
    fn a_record_names_the_owners_of_the_objects_it_wrote() {
        use appupdate_model::owners::{ObjectOwners, Owner, Reason, Who};
        let owned = |object: &str, who: Who, fields: Vec<String>, reason| ObjectOwners {
            object: object.into(),
            owners: vec![Owner {
                who,
                fields,
                reason,
            }],
        };
        let mut report = sample_report();
        // The autoscaler was not written: its owner was not overridden.
        report.entries[1].1 = Outcome::NotAttempted;
        let with_owners = RunInfo {
            owners: vec![
                owned(
                    "deployment.apps/web",
                    Who::Helm {
                        release: "shop/web".into(),
                    },
                    vec![],
                    Reason::ObjectOwned,
                ),
                owned(
                    "horizontalpodautoscaler.autoscaling/web",
                    Who::Manager {
                        manager: "ci".into(),
                    },
                    vec!["spec.maxReplicas".into()],
                    Reason::ApplyConflict,
                ),
                owned(
                    "ingress.networking.k8s.io/web-b",
                    Who::Manager {
                        manager: "ci".into(),
                    },
                    vec!["spec.rules[0].http.paths".into()],
                    Reason::ApplyConflict,
                ),
            ],
            ..info()
        };
        let mut r = record(&report, &with_owners).unwrap();
        assert_eq!(
            r.overridden,
            [
                Overridden {
                    object: "deployment.apps/web".into(),
                    tool: "helm".into(),
                    name: "shop/web".into(),
                    fields: vec![],
                    reason: "object-owned".into(),
                },
                Overridden {
                    object: "ingress.networking.k8s.io/web-b".into(),
                    tool: "field-manager".into(),
                    name: "ci".into(),
                    fields: vec!["spec.rules[0].http.paths".into()],
                    reason: "apply-conflict".into(),
                },
            ]
        );
        assert!(r.description().ends_with(
            "; overrode Helm release shop/web (deployment.apps/web), field manager ci (ingress.networking.k8s.io/web-b)"
        ), "{}", r.description());
        // Read back as stored, and checked as any record is.
        r.revision = 1;
        let cm = stored(std::slice::from_ref(&r));
        let h = History::from_config_map(Some(&cm), "web");
        assert_eq!(h.pick(None).unwrap().overridden, r.overridden);
        let mut forged = r.clone();
        forged.overridden[0].tool = "chef".into();
        assert!(
            validate(&forged, "web")
                .unwrap_err()
                .contains("unknown kind \"chef\"")
        );
        // Nobody overridden: the record says nothing of owners.
        let plain = record(&sample_report(), &info()).unwrap();
        assert!(plain.overridden.is_empty());
        let json = serde_json::to_value(&plain).unwrap();
        assert!(json.get("overridden").is_none(), "{json}");
    }

    #[test]
    fn a_run_that_wrote_nothing_has_no_record_and_a_failed_object_makes_it_partial() {
        let mut report = sample_report();
        for (_, o) in &mut report.entries {
            *o = Outcome::NotAttempted;
        }
        assert_eq!(record(&report, &info()), None);
        let mut report = sample_report();
        report.entries[4].1 = Outcome::Failed {
            message: "no".into(),
        };
        let r = record(&report, &info()).unwrap();
        assert_eq!(r.status, Status::Partial);
        assert_eq!(r.routes.len(), 2);
    }

    fn stored(records: &[Record]) -> Value {
        let mut data = serde_json::Map::new();
        for r in records {
            data.insert(key(r.revision), json!(encode(r)));
        }
        json!({"metadata": {"name": "web-appupdate-history", "resourceVersion": "5", "uid": "u"},
               "binaryData": data})
    }

    fn numbered(n: u64) -> Record {
        let mut r = record(&sample_report(), &info()).unwrap();
        r.revision = n;
        r
    }

    #[test]
    fn records_read_back_oldest_first_and_the_next_revision_counts_up() {
        let cm = stored(&[numbered(3), numbered(1), numbered(2)]);
        let h = History::from_config_map(Some(&cm), "web");
        let revs: Vec<u64> = h.entries.iter().map(Entry::revision).collect();
        assert_eq!(revs, [1, 2, 3]);
        assert_eq!(h.pick(None).unwrap().revision, 3);
        assert_eq!(h.pick(Some(2)).unwrap().revision, 2);
        assert_eq!(
            h.pick(Some(9)).unwrap_err(),
            PickError::Missing("there is no revision 9 (kept: 1, 2, 3)".into())
        );
        let (write, revision) = add(&h, "web", numbered(0), 10, None).unwrap();
        assert_eq!(revision, 4);
        let Write::Patch { base, body, .. } = write else {
            panic!("a patch")
        };
        assert_eq!(base.resource_version(), "5");
        assert!(body["binaryData"]["revision-4.json.gz"].is_string());
    }

    #[test]
    fn the_first_record_creates_the_config_map() {
        let (write, revision) = add(&History::default(), "web", numbered(0), 10, None).unwrap();
        assert_eq!(revision, 1);
        let Write::Create { body } = write else {
            panic!("a create")
        };
        assert_eq!(body["metadata"]["name"], "web-appupdate-history");
        assert_eq!(body["metadata"]["labels"]["app"], "web");
    }

    #[test]
    fn the_oldest_records_beyond_the_limit_are_removed() {
        let cm = stored(&(1..=5).map(numbered).collect::<Vec<_>>());
        let h = History::from_config_map(Some(&cm), "web");
        let (write, _) = add(&h, "web", numbered(0), 3, None).unwrap();
        let Write::Patch { body, .. } = write else {
            panic!("a patch")
        };
        let data = body["binaryData"].as_object().unwrap();
        assert_eq!(data["revision-1.json.gz"], Value::Null);
        assert_eq!(data["revision-2.json.gz"], Value::Null);
        assert_eq!(data["revision-3.json.gz"], Value::Null);
        assert!(data.get("revision-4.json.gz").is_none());
        assert!(data["revision-6.json.gz"].is_string());
    }

    #[test]
    fn taking_a_record_back_restores_what_its_addition_pruned() {
        let before = stored(&(1..=3).map(numbered).collect::<Vec<_>>());
        let (write, revision) = add(
            &History::sizes_of(Some(&before)),
            "web",
            numbered(0),
            3,
            None,
        )
        .unwrap();
        assert_eq!(revision, 4);
        // The ConfigMap as the merge patch left it.
        let Write::Patch { body, .. } = write else {
            panic!("a patch")
        };
        let mut after = before.clone();
        for (k, v) in body["binaryData"].as_object().unwrap() {
            match v {
                Value::Null => after["binaryData"].as_object_mut().unwrap().remove(k),
                v => after["binaryData"]
                    .as_object_mut()
                    .unwrap()
                    .insert(k.clone(), v.clone()),
            };
        }
        let pruned = pruned(Some(&before), &after);
        assert_eq!(pruned.len(), 1);
        assert_eq!(pruned[0].0, 1);
        assert_eq!(pruned[0].1, before["binaryData"]["revision-1.json.gz"]);

        let h = History::sizes_of(Some(&after));
        let Some(Write::Patch { body, .. }) = replace(&h, 4, None, &pruned, None) else {
            panic!("a patch")
        };
        assert_eq!(
            body["binaryData"],
            json!({"revision-4.json.gz": null, "revision-1.json.gz": before["binaryData"]["revision-1.json.gz"]})
        );
        // Corrected instead of taken back: the record in place, nothing restored.
        let Some(Write::Patch { body, .. }) = replace(&h, 4, Some(numbered(0)), &pruned, None)
        else {
            panic!("a patch")
        };
        let data = body["binaryData"].as_object().unwrap();
        assert_eq!(data.len(), 1);
        let text = data["revision-4.json.gz"].as_str().unwrap();
        assert_eq!(decode(text).unwrap().revision, 4);
        // A revision no longer stored, or no ConfigMap: nothing to write.
        assert!(replace(&h, 9, None, &[], None).is_none());
        assert!(replace(&History::default(), 4, None, &[], None).is_none());
    }

    #[test]
    fn an_unreadable_record_is_listed_as_unverifiable() {
        let mut cm = stored(&[numbered(1)]);
        cm["binaryData"]["revision-2.json.gz"] = json!("bm90IGd6aXA=");
        cm["binaryData"]["other-key"] = json!("x");
        let h = History::from_config_map(Some(&cm), "web");
        assert_eq!(h.entries.len(), 2);
        assert_eq!(
            h.pick(None).unwrap_err(),
            PickError::Unverifiable(
                "revision 2 is not verifiable (not gzip), so it is not undone".into()
            )
        );
        let table = render_table(&h, &|s| s.to_owned());
        assert!(
            table.lines().nth(2).unwrap().contains("unverifiable"),
            "{table}"
        );
    }

    #[test]
    fn adding_needs_only_the_sizes_and_asks_for_the_same_write() {
        let mut cm = stored(&(1..=5).map(numbered).collect::<Vec<_>>());
        cm["binaryData"]["revision-7.json.gz"] = json!("bm90IGd6aXA=");
        cm["binaryData"]["other-key"] = json!("x");
        for max in [1, 3, 10] {
            let full = add(
                &History::from_config_map(Some(&cm), "web"),
                "web",
                numbered(0),
                max,
                None,
            )
            .unwrap();
            let light = History::sizes_of(Some(&cm));
            assert!(light.entries.is_empty());
            assert_eq!(add(&light, "web", numbered(0), max, None).unwrap(), full);
        }
        assert_eq!(History::sizes_of(None), History::default());
    }

    #[test]
    fn the_listing_reads_like_helm_history() {
        let cm = stored(&[numbered(1)]);
        let table = render_table(&History::from_config_map(Some(&cm), "web"), &|s| {
            s.to_owned()
        });
        let mut lines = table.lines();
        assert_eq!(
            lines.next().unwrap().split_whitespace().collect::<Vec<_>>(),
            ["REVISION", "UPDATED", "USER", "STATUS", "DESCRIPTION"]
        );
        assert!(
            lines
                .next()
                .unwrap()
                .starts_with("1         2026-12-01T07:00:00Z  admin  applied  image")
        );
    }

    fn sample_record() -> Record {
        numbered(2)
    }

    #[test]
    fn a_record_key_round_trips_and_anything_like_one_is_a_stray() {
        for n in [1, 2, 9, 10, 99, 1_234_567, MAX_REVISION] {
            assert_eq!(classify(&key(n)), KeyKind::Record(n), "{n}");
        }
        let stray = |k: &str| match classify(k) {
            KeyKind::Stray(why) => why,
            other => panic!("{k}: {other:?}"),
        };
        assert!(stray("revision-02.json.gz").contains("leading zero"));
        assert!(stray("revision-0.json.gz").contains("count from 1"));
        assert!(stray("revision-000.json.gz").contains("count from 1"));
        assert!(stray("revision-18446744073709551615.json.gz").contains("above 1000000000"));
        assert!(stray("revision-99999999999999999999999.json.gz").contains("above"));
        assert!(stray("revision-1000000001.json.gz").contains("above"));
        assert!(stray("revision-+5.json.gz").contains("not a decimal number"));
        assert!(stray("revision- 5.json.gz").contains("not a decimal number"));
        assert!(stray("revision-.json.gz").contains("not a decimal number"));
        assert!(stray("revision-５.json.gz").contains("not a decimal number"));
        assert!(stray("Revision-5.json.gz").contains("not named revision-<N>.json.gz"));
        assert!(stray("revision-5.json").contains("not named"));
        assert!(stray("x.JSON.GZ").contains("not named"));
        assert_eq!(classify("other-key"), KeyKind::Other);
        assert_eq!(classify("notes"), KeyKind::Other);
    }

    #[test]
    fn planted_keys_are_listed_but_never_counted_nor_picked() {
        let mut cm = stored(&[numbered(1), numbered(2)]);
        // A different record under a key that reads as 2, and one that reads as u64::MAX.
        let mut other = numbered(2);
        other.image.as_mut().unwrap().before = Some("evil.example.com/x:1".into());
        cm["binaryData"]["revision-02.json.gz"] = json!(encode(&other));
        cm["binaryData"]["revision-18446744073709551615.json.gz"] = json!(encode(&numbered(7)));
        let h = History::from_config_map(Some(&cm), "web");
        let revs: Vec<u64> = h.entries.iter().map(Entry::revision).collect();
        assert_eq!(revs, [1, 2]);
        assert_eq!(History::sizes_of(Some(&cm)).next_revision(), Some(3));
        let (_, revision) =
            add(&History::sizes_of(Some(&cm)), "web", numbered(0), 10, None).unwrap();
        assert_eq!(revision, 3);
        // --undo and --to-revision 2 pick the one record revision 2 is.
        assert_eq!(h.pick(None).unwrap(), h.pick(Some(2)).unwrap());
        assert_eq!(
            h.pick(None)
                .unwrap()
                .image
                .as_ref()
                .unwrap()
                .before
                .as_deref(),
            Some("r/web:1")
        );
        let keys: Vec<&str> = h.strays.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "revision-02.json.gz",
                "revision-18446744073709551615.json.gz"
            ]
        );
        let table = render_table(&h, &|s| s.to_owned());
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 5, "{table}");
        assert!(
            lines[3].starts_with("-  ")
                && lines[3].contains("unverifiable")
                && lines[3].contains(
                    "revision-02.json.gz is not a record key (its revision has a leading zero;"
                ),
            "{table}"
        );
        assert!(lines[4].contains("revision-18446744073709551615.json.gz is not a record key (its revision is above 1000000000"), "{table}");
        let doc = document("web", "shop", &h);
        assert_eq!(doc["records"].as_array().unwrap().len(), 2);
        assert_eq!(doc["unverifiableKeys"][0]["key"], "revision-02.json.gz");
        assert!(!h.is_empty());
        // Pruning never touches them: they are not records.
        let (write, _) = add(&History::sizes_of(Some(&cm)), "web", numbered(0), 1, None).unwrap();
        let Write::Patch { body, .. } = write else {
            panic!("a patch")
        };
        let data = body["binaryData"].as_object().unwrap();
        assert_eq!(
            data.keys().collect::<Vec<_>>(),
            [
                "revision-2.json.gz",
                "revision-1.json.gz",
                "revision-3.json.gz"
            ]
        );
    }

    #[test]
    fn a_history_at_the_highest_revision_refuses_to_add_rather_than_wrap() {
        let mut cm = stored(&[numbered(1)]);
        cm["binaryData"][key(MAX_REVISION)] = json!(encode(&numbered(MAX_REVISION)));
        let h = History::sizes_of(Some(&cm));
        assert_eq!(h.next_revision(), None);
        let err = add(&h, "web", numbered(0), 10, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "configmap/web-appupdate-history holds revision 1000000000, the highest a record has, so no record can follow it; save its records (kubectl appupdate history web -o json) and delete the ConfigMap to number them from 1 again"
        );
        // One below, the last revision is given out.
        let mut cm = stored(&[numbered(1)]);
        cm["binaryData"][key(MAX_REVISION - 1)] = json!(encode(&numbered(MAX_REVISION - 1)));
        assert_eq!(
            History::sizes_of(Some(&cm)).next_revision(),
            Some(MAX_REVISION)
        );
    }

    fn plan_key(text: &str) -> PlanKey {
        PlanKey::new(text.as_bytes().to_vec(), "--history-key k".into()).unwrap()
    }

    fn seal<'a>(key: &'a PlanKey) -> Seal<'a> {
        Seal {
            key,
            app: "web",
            namespace: "shop",
            server: "https://10.0.0.1:6443",
        }
    }

    #[test]
    fn a_signed_record_verifies_only_with_its_key_where_it_was_signed() {
        let key = plan_key("0123456789abcdef0123456789abcdef");
        let mut r = sample_record();
        assert_eq!(seal(&key).check(&r), Signed::Unsigned);
        seal(&key).sign(&mut r);
        let signature = r.signature.clone().unwrap();
        assert!(is_signature(&signature), "{signature}");
        assert_eq!(seal(&key).check(&r), Signed::Verified);
        // The same content under another application, namespace, server or revision.
        let elsewhere = [
            Seal {
                app: "shop-api",
                ..seal(&key)
            },
            Seal {
                namespace: "other",
                ..seal(&key)
            },
            Seal {
                server: "https://10.0.0.2:6443",
                ..seal(&key)
            },
        ];
        for s in elsewhere {
            assert_eq!(s.check(&r), Signed::Invalid, "{s:?}");
        }
        let mut moved = r.clone();
        moved.revision = 3;
        assert_eq!(seal(&key).check(&moved), Signed::Invalid);
        let mut other_run = r.clone();
        other_run.fleet_run = Some("run-abc".into());
        assert_eq!(seal(&key).check(&other_run), Signed::Invalid);
        // Any value changed: here the image an undo would deploy.
        let mut edited = r.clone();
        edited.image.as_mut().unwrap().before = Some("evil.example.com/x:1".into());
        assert_eq!(seal(&key).check(&edited), Signed::Invalid);
        // Signed with another key.
        let other = plan_key("fedcba9876543210fedcba9876543210");
        assert_eq!(seal(&other).check(&r), Signed::Invalid);
        let mut theirs = sample_record();
        seal(&other).sign(&mut theirs);
        assert_eq!(seal(&key).check(&theirs), Signed::Invalid);
    }

    #[test]
    fn a_record_written_with_the_key_reads_back_verified() {
        let key = plan_key("0123456789abcdef0123456789abcdef");
        let cm = stored(&[numbered(1)]);
        let (write, revision) = add(
            &History::sizes_of(Some(&cm)),
            "web",
            numbered(0),
            10,
            Some(&seal(&key)),
        )
        .unwrap();
        let Write::Patch { body, .. } = write else {
            panic!("a patch")
        };
        let mut after = cm.clone();
        after["binaryData"]["revision-2.json.gz"] =
            body["binaryData"]["revision-2.json.gz"].clone();
        let mut h = History::from_config_map(Some(&after), "web");
        h.check_signatures(&seal(&key));
        assert_eq!(h.signed(1), Some(Signed::Unsigned));
        assert_eq!(h.signed(revision), Some(Signed::Verified));
        // A corrected record is signed too.
        let Some(Write::Patch { body, .. }) = replace(
            &History::sizes_of(Some(&after)),
            2,
            Some(numbered(0)),
            &[],
            Some(&seal(&key)),
        ) else {
            panic!("a patch")
        };
        let corrected = decode(body["binaryData"]["revision-2.json.gz"].as_str().unwrap()).unwrap();
        assert_eq!(seal(&key).check(&corrected), Signed::Verified);
        // A signed record copied under another revision's key does not verify there.
        let mut copied = after.clone();
        copied["binaryData"]["revision-5.json.gz"] =
            after["binaryData"]["revision-2.json.gz"].clone();
        let mut h = History::from_config_map(Some(&copied), "web");
        h.check_signatures(&seal(&key));
        assert_eq!(h.signed(5), Some(Signed::Invalid));
        // The listing says so, in a column of its own.
        let table = render_table(&h, &|s| s.to_owned());
        let mut lines = table.lines();
        assert_eq!(
            lines.next().unwrap().split_whitespace().collect::<Vec<_>>(),
            [
                "REVISION",
                "UPDATED",
                "USER",
                "STATUS",
                "SIGNATURE",
                "DESCRIPTION"
            ]
        );
        let cells = |l: &str| {
            l.split_whitespace()
                .take(5)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(cells(lines.next().unwrap())[4], "unsigned");
        assert_eq!(cells(lines.next().unwrap())[4], "verified");
        assert_eq!(cells(lines.next().unwrap())[4], "invalid");
        let doc = document("web", "shop", &h);
        assert_eq!(doc["records"][1]["signatureCheck"], "verified");
        assert_eq!(doc["records"][2]["signatureCheck"], "invalid");
    }

    #[test]
    fn a_record_with_a_signature_that_is_not_one_is_unverifiable() {
        let mut r = numbered(1);
        r.signature = Some("hmac-sha256:xyz".into());
        assert!(validate(&r, "web").unwrap_err().contains("signature"));
        r.signature = Some(format!("hmac-sha256:{}", "a".repeat(64)));
        assert_eq!(validate(&r, "web"), Ok(()));
    }
}
