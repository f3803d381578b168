//! Saved plans (`--plan-out FILE`, `kubectl appupdate apply FILE`): a plan as a file that is
//! reviewed in one place and applied, exactly as it is, in another.
//!
//! Pure: [`render`] turns plans into the file's text, [`parse`] turns the text back into plans
//! (or one clear error); reading and writing the file is the caller's.
//!
//! # The file
//!
//! ```json
//! {
//!   "schema": "kubectl-appupdate.plan-file/v1",
//!   "checksum": "sha256:…",
//!   "content": {
//!     "createdAt": "2026-12-01T07:00:00Z",
//!     "tool": "kubectl-appupdate 0.1.0",
//!     "clusters": [
//!       {
//!         "context": "prod", "server": "https://…", "namespace": "shop", "app": "web",
//!         "source": {"type": "update"},
//!         "plan": { …the `-o json` document… },
//!         "objects": [ {"updater": {"type": "…", "spec": {…}}, "change": {…}} ],
//!         "owners": [ {"object": "deployment.apps/web", "tool": "helm", "name": "shop/web",
//!                      "fields": [], "reason": "object-owned"} ]
//!       }
//!     ]
//!   }
//! }
//! ```
//!
//! `clusters` holds one plan per cluster (one today): a change run over several contexts saves
//! one file for all of them. Each plan carries where it was computed (context, server URL,
//! namespace), the `-o json` document for reviewers and pipelines, and for each object what
//! applying needs: the approved change — its guarded fields, the views the diff shows, and the
//! write with the `resourceVersion` and `uid` it was computed from — and the updater that
//! computed it, which re-plans the object against the object as it is when the file is applied
//! (the approved-diff guard, [`appupdate_model::plan::recheck`], then decides). `owners`
//! (left out when nobody) records who else owned fields the plan changes when it was made
//! ([`appupdate_model::owners`]), as the plan showed them: `apply FILE` finds the owners
//! again in the objects as they are then, and says which ones the plan did not show.
//!
//! `checksum` is SHA-256 over `content` in a canonical form (object keys sorted, no
//! whitespace), so re-indenting the file keeps it valid while any change of a value, a
//! truncation or an edit by hand is refused. It guards against accidents, not against someone
//! who means harm: anyone can compute it again.
//!
//! # What a file may ask for
//!
//! A plan file is input from whoever could write it, so [`parse`] reads each updater as one of
//! the closed set of updaters ([`Updater::from_saved`]: the ones an ordinary run makes, nothing
//! else) and fences every object to the file's application before any request
//! ([`Updater::check_saved`], whose [`crate::updaters::Refusal`] says why not): the
//! Deployment and the HorizontalPodAutoscaler are the ones named after the application; a
//! route is exactly what its route style generates for a scope group of the application (its
//! paths and scopes pass the endpoints file's guard), or the removal of a route by a valid
//! name — which the live object must show is one of the application's managed routes
//! ([`crate::routes`]' fence) before anything is written; a SecurityPolicy is the one the
//! `envoy-gateway` auth provider makes for a scoped group's HTTPRoute, named like it, and an
//! HTTPRoute of a scoped group without the ExternalAuth filter comes with its SecurityPolicy
//! in the same plan (so no edit can publish a scoped path unguarded); every name is a DNS-1123
//! name; every updater is paired with the kind of object it makes. A file that asks for
//! anything else is refused as edited, with nothing sent.
//!
//! # Signed files
//!
//! `--plan-out FILE --sign-key KEYFILE` adds `"signature": "hmac-sha256:…"` next to the
//! checksum: HMAC-SHA-256 over the same canonical content, keyed with the bytes of the key file
//! (one trailing line break dropped, at least [`MIN_KEY_BYTES`] bytes: `openssl rand -hex 32 >
//! KEYFILE` makes one). `apply FILE --verify-key KEYFILE` refuses a file that has no signature
//! or whose signature does not verify with that key, compared in constant time, before the
//! content is read any further. So a file changed by someone without the key is refused even
//! when they recomputed the checksum. The signature is only checked when a key is given:
//! without one, a signed file applies like an unsigned one. Keys are never printed; messages
//! name the key by its file ([`PlanKey::named`]).

use std::fmt;
use std::sync::Arc;

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Sha256;

use crate::history::{Source, tool};
use crate::updaters::{Plan, Planned, Updater};
use appupdate_model::names;
use appupdate_model::output;
use appupdate_model::owners::{ObjectOwners, Owner, Reason, Who};
use appupdate_model::plan::{Kind, ObjectChange};
use appupdate_model::text::{Untrusted, hex, without_credentials};

/// The file's schema; any other is refused.
pub const SCHEMA: &str = "kubectl-appupdate.plan-file/v1";

/// The fewest bytes a signing key may have (after its trailing line break is dropped).
pub const MIN_KEY_BYTES: usize = 16;

/// How a signature starts: the algorithm, then the MAC in lowercase hex.
const SIGNATURE_PREFIX: &str = "hmac-sha256:";

/// A key that signs (`--sign-key`) or verifies (`--verify-key`) plan files, or signs and
/// verifies history records (`--history-key`, [`crate::history::Seal`]). Its bytes are never
/// shown: `Debug` leaves them out and messages name the key by where it came from.
#[derive(Clone)]
pub struct PlanKey {
    bytes: Vec<u8>,
    named: String,
}

/// Why a key file's content is not a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error(
        "the key file is empty; a key needs at least {MIN_KEY_BYTES} bytes, e.g. from openssl rand -hex 32"
    )]
    Empty,
    #[error(
        "the key is shorter than {MIN_KEY_BYTES} bytes; a key needs at least {MIN_KEY_BYTES}, e.g. from openssl rand -hex 32"
    )]
    TooShort,
    #[error(
        "it is a PEM public key, which anyone may read: this key is a shared secret (e.g. from openssl rand -hex 32); a cosign public key that images must be signed with goes to --image-key"
    )]
    PublicKey,
}

impl PlanKey {
    /// The key in a key file's `content`: its bytes as they are, but for one trailing line
    /// break (`\n` or `\r\n`, as `echo` or an editor leave it). `named` says where it came
    /// from in messages (`--verify-key key.txt`), its values already escaped.
    pub fn new(mut content: Vec<u8>, named: String) -> Result<PlanKey, KeyError> {
        if content.last() == Some(&b'\n') {
            content.pop();
            if content.last() == Some(&b'\r') {
                content.pop();
            }
        }
        if appupdate_model::cosign::is_pem_public_key(&content) {
            return Err(KeyError::PublicKey);
        }
        match content.len() {
            0 => Err(KeyError::Empty),
            n if n < MIN_KEY_BYTES => Err(KeyError::TooShort),
            _ => Ok(PlanKey {
                bytes: content,
                named,
            }),
        }
    }

    /// Where the key came from, for messages: `--sign-key key.txt`.
    pub fn named(&self) -> &str {
        &self.named
    }

    /// The MAC of `canonical` content, ready to take more input or to verify.
    fn mac(&self, canonical: &[u8]) -> Option<Hmac<Sha256>> {
        // HMAC takes a key of any length: this cannot fail.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.bytes).ok()?;
        mac.update(canonical);
        Some(mac)
    }

    /// `hmac-sha256:<hex>` of `canonical` content.
    pub(crate) fn sign(&self, canonical: &[u8]) -> Option<String> {
        let tag = self.mac(canonical)?.finalize().into_bytes();
        Some(format!("{SIGNATURE_PREFIX}{}", hex(&tag)))
    }

    /// Whether `signature` is this key's over `canonical` content, compared in constant time.
    pub(crate) fn verifies(&self, canonical: &[u8], signature: &str) -> bool {
        let Some(tag) = signature.strip_prefix(SIGNATURE_PREFIX).and_then(from_hex) else {
            return false;
        };
        self.mac(canonical)
            .is_some_and(|mac| mac.verify_slice(&tag).is_ok())
    }
}

impl fmt::Debug for PlanKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlanKey")
            .field("named", &self.named)
            .finish_non_exhaustive()
    }
}

/// Where a plan was computed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    pub context: String,
    /// The API server URL (saved without user information: [`without_credentials`]).
    pub server: String,
    /// When, RFC 3339 (UTC).
    pub created_at: String,
}

/// One cluster's plan as read back from a file.
#[derive(Clone, Debug)]
pub struct ClusterPlan {
    pub context: String,
    pub server: String,
    pub source: Source,
    pub plan: Plan,
    /// Who else owned fields the plan changes when it was made, as the plan showed them
    /// ([`appupdate_model::owners`]): `apply FILE` finds the owners again in the objects as
    /// they are then, and says which of them the plan did not show.
    pub owners: Vec<ObjectOwners>,
}

/// One cluster's plan to save: the plan, where it was computed, what it came from, and who
/// else owned the fields it changes.
pub type Saving<'a> = (&'a Plan, &'a Origin, &'a Source, &'a [ObjectOwners]);

/// A plan file as read: when it was made, and one plan per cluster.
#[derive(Clone, Debug)]
pub struct PlanFile {
    pub created_at: String,
    pub tool: String,
    pub clusters: Vec<ClusterPlan>,
    /// The contexts in waves, in order, when the plan was made in waves (`--wave`).
    pub waves: Vec<Vec<String>>,
    /// `sha256:…` over the content: what the history record of the run that applies it keeps,
    /// so that the same file is not applied twice.
    pub checksum: String,
}

/// Why a plan cannot be saved or a file cannot be applied. Nothing was sent.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanFileError {
    #[error(
        "{file} is not a complete plan file ({what} at line {line}, column {column}); it may be truncated: make it again with --plan-out"
    )]
    NotJson {
        file: String,
        what: &'static str,
        line: usize,
        column: usize,
    },
    #[error(
        "{file} is a plan file of schema {found:?}; this kubectl-appupdate applies {SCHEMA:?} files only: make the plan again with this version"
    )]
    Schema { file: String, found: String },
    #[error(
        "{file} was changed after it was written (its checksum does not match its content): a saved plan is applied exactly as written or not at all; make it again with --plan-out"
    )]
    Checksum { file: String },
    #[error(
        "{} is not signed; {key} accepts only plans signed with that key: make it again with --plan-out FILE --sign-key KEYFILE",
        Untrusted(.file)
    )]
    NotSigned {
        file: String,
        /// [`PlanKey::named`].
        key: String,
    },
    #[error(
        "{}'s signature does not match {key}: it was changed after signing, or signed with another key",
        Untrusted(.file)
    )]
    Signature {
        file: String,
        /// [`PlanKey::named`].
        key: String,
    },
    #[error("{file} cannot be applied: {why}; make it again with --plan-out")]
    Invalid { file: String, why: String },
    #[error(
        "{file} was edited: {why}; a saved plan is applied only as kubectl-appupdate wrote it, so nothing was sent; make it again with --plan-out"
    )]
    Edited { file: String, why: String },
}

/// Why a saved plan is not applied here or now. Nothing was sent.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SavedPlanError {
    #[error("{0}")]
    OtherTarget(String),
    #[error(
        "{file} was made {age} ago ({created}), longer ago than --max-plan-age {max}; make a new plan"
    )]
    TooOld {
        file: String,
        age: String,
        created: String,
        max: String,
    },
    #[error("{file} has no valid creation time ({created:?}), so --max-plan-age cannot be checked")]
    NoTime { file: String, created: String },
    #[error(
        "the saved plan was edited: {reference} {path} would be written as {wanted}, but the plan shows {shown}; a saved plan is applied only as kubectl-appupdate wrote it, so nothing was sent; make it again with --plan-out"
    )]
    Edited {
        reference: String,
        path: String,
        wanted: String,
        shown: String,
    },
}

// ---- the file as serialised ----

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    schema: String,
    checksum: String,
    /// `hmac-sha256:<hex>` when the plan was saved with a key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    signature: Option<String>,
    content: Value,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ContentDoc<O> {
    created_at: String,
    tool: String,
    /// The contexts in waves (`--wave`), in order, when the plan was made so: `apply FILE`
    /// applies in the same waves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    waves: Vec<Vec<String>>,
    clusters: Vec<ClusterDoc<O>>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ClusterDoc<O> {
    context: String,
    server: String,
    namespace: String,
    app: String,
    source: Source,
    /// The `-o json` document (for people and pipelines; applying uses `objects`).
    plan: Value,
    /// The routes' style and attachment before and after, when the plan publishes endpoints:
    /// for the history record of the run that applies it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    routes: Option<appupdate_model::intent::RoutesHeader>,
    /// The image the plan writes and its digest when the plan was made, when the image check
    /// ran: `apply FILE` refuses an unpinned plan whose tag means another digest since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    image: Option<appupdate_model::plan::CheckedImage>,
    /// [`ObjectOut`] when written, [`ObjectIn`] when read.
    objects: Vec<O>,
    /// Who else owned fields the plan changes when it was made (inside the checksum, like
    /// everything the file holds); left out when nobody did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    owners: Vec<OwnerDoc>,
}

/// One owner of fields a saved plan changes in one object: its `-o json` form, less the
/// consequence (made again from the rest when shown).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OwnerDoc {
    object: String,
    tool: String,
    name: String,
    fields: Vec<String>,
    reason: String,
}

impl OwnerDoc {
    fn all(owners: &[ObjectOwners]) -> Vec<OwnerDoc> {
        owners
            .iter()
            .flat_map(|o| {
                o.owners.iter().map(|owner| {
                    let (tool, name) = owner.who.parts();
                    OwnerDoc {
                        object: o.object.clone(),
                        tool: tool.to_owned(),
                        name: name.to_owned(),
                        fields: owner.fields.clone(),
                        reason: owner.reason.code().to_owned(),
                    }
                })
            })
            .collect()
    }

    /// The owners as read, by object in the order first named; `Err`: why they read as edited.
    fn read(docs: Vec<OwnerDoc>) -> Result<Vec<ObjectOwners>, String> {
        let mut out: Vec<ObjectOwners> = Vec::new();
        for d in docs {
            let who = Who::from_parts(&d.tool, &d.name)
                .ok_or_else(|| format!("it names an owner of an unknown kind {:?}", d.tool))?;
            let reason = Reason::from_code(&d.reason)
                .ok_or_else(|| format!("it names an owner for an unknown reason {:?}", d.reason))?;
            let owner = Owner {
                who,
                fields: d.fields,
                reason,
            };
            match out.iter_mut().find(|o| o.object == d.object) {
                Some(o) => o.owners.push(owner),
                None => out.push(ObjectOwners {
                    object: d.object,
                    owners: vec![owner],
                }),
            }
        }
        Ok(out)
    }
}

/// An object as written: its updater and its approved change, as the plan holds them.
#[derive(Serialize)]
struct ObjectOut<'a> {
    updater: &'a Updater,
    change: &'a ObjectChange,
}

/// An object as read. Its updater is read on its own ([`Updater::from_saved`]), so that a
/// refusal names the object.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ObjectIn {
    updater: Value,
    change: ObjectChange,
}

/// `value` with every object's keys sorted, as compact JSON: what the checksum and the
/// signature are over.
pub(crate) fn canonical(value: &Value) -> Vec<u8> {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&m[k])))
                        .collect(),
                )
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    serde_json::to_vec(&sorted(value)).unwrap_or_default()
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    let digit = |b: u8| char::from(b).to_digit(16);
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    bytes
        .chunks_exact(2)
        .map(|pair| u8::try_from(digit(pair[0])? * 16 + digit(pair[1])?).ok())
        .collect()
}

/// `sha256:<hex>` of `canonical` content.
fn checksum_of(canonical: &[u8]) -> String {
    appupdate_model::cosign::sha256_digest(canonical)
}

#[cfg(test)]
fn checksum(content: &Value) -> String {
    checksum_of(&canonical(content))
}

/// The text of a plan file holding `plans` (one per cluster), each with where it was computed;
/// signed when `key` is given.
pub fn render(plans: &[Saving<'_>], key: Option<&PlanKey>) -> Result<String, PlanFileError> {
    render_in_waves(plans, &[], key).map(|saved| saved.text)
}

/// A plan file's text and its checksum (`sha256:…` over the content, as the file says it).
#[derive(Clone, Debug)]
pub struct Rendered {
    pub text: String,
    /// What `apply FILE --checksum` takes: not the SHA-256 of the file's bytes.
    pub checksum: String,
}

/// [`render`] of a plan made in waves (`--wave`): the contexts of each wave, in order; with
/// the file's checksum.
pub fn render_in_waves(
    plans: &[Saving<'_>],
    waves: &[Vec<String>],
    key: Option<&PlanKey>,
) -> Result<Rendered, PlanFileError> {
    let created_at = plans
        .first()
        .map(|(_, o, _, _)| o.created_at.clone())
        .unwrap_or_default();
    let mut clusters = Vec::with_capacity(plans.len());
    for (plan, origin, source, owners) in plans {
        let objects = plan
            .objects
            .iter()
            .map(|p| ObjectOut {
                updater: &p.updater,
                change: &p.change,
            })
            .collect();
        clusters.push(ClusterDoc {
            context: origin.context.clone(),
            server: without_credentials(&origin.server).into_owned(),
            namespace: plan.namespace.clone(),
            app: plan.app.clone(),
            source: (*source).clone(),
            plan: serde_json::to_value(output::document(plan).with_owners(owners))
                .unwrap_or(Value::Null),
            routes: plan.routes.as_ref().map(|r| r.header.clone()),
            image: plan.image_checked.clone(),
            objects,
            owners: OwnerDoc::all(owners),
        });
    }
    let content = serde_json::to_value(ContentDoc {
        created_at,
        tool: tool(),
        waves: waves.to_vec(),
        clusters,
    })
    .map_err(|e| PlanFileError::Invalid {
        file: "the plan".into(),
        why: e.to_string(),
    })?;
    let canonical = canonical(&content);
    let signature = match key {
        Some(key) => Some(key.sign(&canonical).ok_or_else(|| PlanFileError::Invalid {
            file: "the plan".into(),
            why: format!("it cannot be signed with {}", key.named()),
        })?),
        None => None,
    };
    let checksum = checksum_of(&canonical);
    let doc = FileDoc {
        schema: SCHEMA.to_owned(),
        checksum: checksum.clone(),
        signature,
        content,
    };
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    text.push('\n');
    Ok(Rendered { text, checksum })
}

/// Reads a plan file's text. `file` names it in messages. With `key`, the file must carry a
/// signature made with it, checked before the content is read.
pub fn parse(text: &str, file: &str, key: Option<&PlanKey>) -> Result<PlanFile, PlanFileError> {
    let doc: Value = serde_json::from_str(text).map_err(|e| PlanFileError::NotJson {
        file: file.to_owned(),
        what: match e.classify() {
            serde_json::error::Category::Eof => "it ends early",
            serde_json::error::Category::Syntax => "not JSON",
            _ => "not a plan file",
        },
        line: e.line(),
        column: e.column(),
    })?;
    let found = doc["schema"].as_str().unwrap_or_default();
    if found != SCHEMA {
        return Err(PlanFileError::Schema {
            file: file.to_owned(),
            found: if found.is_empty() {
                "none".into()
            } else {
                found.to_owned()
            },
        });
    }
    let invalid = |why: String| PlanFileError::Invalid {
        file: file.to_owned(),
        why,
    };
    let doc: FileDoc = serde_json::from_value(doc).map_err(|e| invalid(e.to_string()))?;
    let canonical = canonical(&doc.content);
    if doc.checksum != checksum_of(&canonical) {
        return Err(PlanFileError::Checksum {
            file: file.to_owned(),
        });
    }
    if let Some(key) = key {
        let Some(signature) = &doc.signature else {
            return Err(PlanFileError::NotSigned {
                file: file.to_owned(),
                key: key.named().to_owned(),
            });
        };
        if !key.verifies(&canonical, signature) {
            return Err(PlanFileError::Signature {
                file: file.to_owned(),
                key: key.named().to_owned(),
            });
        }
    }
    // As large as the file: freed before the plans are built from the content.
    drop(canonical);
    let content: ContentDoc<ObjectIn> =
        serde_json::from_value(doc.content).map_err(|e| invalid(e.to_string()))?;
    if content.clusters.is_empty() {
        return Err(invalid("it holds no plan".into()));
    }
    let edited = |why: String| PlanFileError::Edited {
        file: file.to_owned(),
        why,
    };
    check_waves(&content.waves).map_err(edited)?;
    let clusters = content
        .clusters
        .into_iter()
        .map(cluster_plan)
        .collect::<Result<Vec<_>, _>>()
        .map_err(edited)?;
    Ok(PlanFile {
        created_at: content.created_at,
        tool: content.tool,
        clusters,
        waves: content.waves,
        checksum: doc.checksum,
    })
}

/// The waves of a plan file: lists of distinct, non-empty context names, none in two waves.
fn check_waves(waves: &[Vec<String>]) -> Result<(), String> {
    let mut in_waves = std::collections::BTreeSet::new();
    for wave in waves {
        if wave.is_empty()
            || wave
                .iter()
                .any(|c| c.is_empty() || !in_waves.insert(c.clone()))
        {
            return Err("its waves are not lists of distinct, non-empty context names".into());
        }
    }
    Ok(())
}

/// One cluster's plan as the file holds it, checked: names, the namespace, the routes'
/// attachment, every object's updater read ([`Updater::from_saved`]) and fenced to the
/// application ([`Updater::check_saved`]). `Err`: why the file reads as edited.
fn cluster_plan(c: ClusterDoc<ObjectIn>) -> Result<ClusterPlan, String> {
    if !names::is_dns1123_subdomain(&c.app) || c.app.len() > 63 {
        return Err(format!(
            "its application name {:?} is not a valid name",
            c.app
        ));
    }
    if !names::is_dns1123_label(&c.namespace) {
        return Err(format!(
            "its namespace {:?} is not a valid namespace name",
            c.namespace
        ));
    }
    if let Some(h) = &c.routes {
        h.check().map_err(|why| format!("its routes: {why}"))?;
    }
    if let Source::Undo { revision: 0 } = c.source {
        return Err("it undoes revision 0".into());
    }
    let owners = OwnerDoc::read(c.owners)?;
    let mut objects = Vec::with_capacity(c.objects.len());
    let mut seen = std::collections::BTreeSet::new();
    // Scoped HTTPRoutes without the filter, and the policies planned, to match up.
    let mut unfiltered: Vec<String> = Vec::new();
    let mut policies: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    let mut read = Vec::with_capacity(c.objects.len());
    for o in c.objects {
        let reference = o.change.reference();
        if !names::is_dns1123_subdomain(&o.change.name) {
            return Err(format!(
                "it names an object {:?}, which is not a valid object name",
                o.change.name
            ));
        }
        if o.change.namespace != c.namespace {
            return Err(format!(
                "{reference} is in namespace {:?}, not the plan's {:?}",
                o.change.namespace, c.namespace
            ));
        }
        let saved = Updater::from_saved(o.updater).map_err(|why| format!("{reference}: {why}"))?;
        match &saved {
            Updater::HttpRoute(u) if !u.desired.scopes.is_empty() && !u.desired.has_filter() => {
                unfiltered.push(u.name.clone());
            }
            Updater::SecurityPolicy(u) => {
                policies.insert(u.name.clone());
            }
            _ => {}
        }
        if saved.kind() != o.change.kind {
            return Err(format!(
                "{reference} is planned by an updater of {} objects",
                saved.kind().kubectl_name()
            ));
        }
        read.push((o.change, saved));
    }
    // The live HTTPRoutes the plan updates, by name, with their scope group: a new policy may
    // take the name of one (a route created under another name keeps it).
    let updated_routes: std::collections::BTreeMap<&str, &str> = read
        .iter()
        .filter_map(|(change, saved)| match saved {
            Updater::HttpRoute(u) if change.live.is_some() => {
                Some((u.name.as_str(), u.desired.identifier.as_str()))
            }
            _ => None,
        })
        .collect();
    let creates: Vec<bool> = read
        .iter()
        .map(|(change, saved)| {
            let route_updated = match saved {
                Updater::SecurityPolicy(p) => {
                    updated_routes.get(p.name.as_str()) == Some(&p.desired.identifier.as_str())
                }
                _ => false,
            };
            change.live.is_none() && !route_updated
        })
        .collect();
    for ((change, saved), creates) in read.into_iter().zip(creates) {
        let reference = change.reference();
        saved
            .check_saved(&c.app, creates)
            .map_err(|why| format!("{reference}: {why}"))?;
        if saved.name() != change.name {
            return Err(format!(
                "{reference} was planned for an object named {:?}",
                saved.name()
            ));
        }
        if !seen.insert((change.kind, change.name.clone())) {
            return Err(format!("{reference} is planned twice"));
        }
        objects.push(Planned::new(saved, Arc::new(change)));
    }
    if let Some(name) = unfiltered.iter().find(|n| !policies.contains(*n)) {
        return Err(format!(
            "{}/{name} serves paths with scopes without the ExternalAuth filter and without a SecurityPolicy of its name in the plan",
            Kind::HttpRoute.kubectl_name()
        ));
    }
    let mut plan = Plan::new(c.app, c.namespace, c.context.clone(), objects);
    plan.image_checked = c.image;
    if let Some(header) = c.routes {
        plan.routes = Some(appupdate_model::plan::RoutesPlan {
            style: header
                .style
                .unwrap_or(appupdate_model::plan::RouteStyle::NginxSnippet),
            live_styles: Vec::new(),
            notes: Vec::new(),
            header,
        });
    }
    Ok(ClusterPlan {
        context: c.context,
        // A file saved by an earlier build may hold credentials in the URL: never shown, and
        // compared in the form a connection's URL has.
        server: without_credentials(&c.server).into_owned(),
        source: c.source,
        plan,
        owners,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::updaters::{
        AutoscalerUpdate, AutoscalerUpdater, ChangeCause, ContainerUpdate, DeploymentUpdater,
        Refusal,
    };
    use appupdate_model::plan::{Action, Base, FieldChange, Kind, PatchType, Write};
    use serde_json::json;

    #[test]
    fn every_saved_type_reads_back() {
        // A type that is none of the variants is refused by its name…
        let refusal = Updater::from_saved(json!({"type": "none", "spec": {}})).unwrap_err();
        assert_eq!(refusal, Refusal::UnknownType("none".into()));
        assert_eq!(
            refusal.to_string(),
            "it names the updater type \"none\", which kubectl-appupdate does not save"
        );
        // …and serde's answer to it lists the variants' names, each read as its own variant.
        let err = Updater::deserialize(json!({"type": "none", "spec": {}}))
            .unwrap_err()
            .to_string();
        let listed: Vec<&str> = err
            .split("expected one of ")
            .nth(1)
            .unwrap()
            .split(", ")
            .map(|v| v.trim_matches('`'))
            .collect();
        assert_eq!(listed.len(), 8, "{err}");
        for name in listed {
            let why = Updater::from_saved(json!({"type": name, "spec": {}})).unwrap_err();
            assert!(
                matches!(&why, Refusal::Unreadable(w) if w.contains("missing field")),
                "{name}: {why}"
            );
        }
        // Nothing beside the type and the spec.
        let extra =
            json!({"type": "autoscaler-bounds", "spec": {"name": "web", "update": {}}, "x": 1});
        assert!(matches!(
            Updater::from_saved(extra),
            Err(Refusal::Unreadable(_))
        ));
    }

    fn plan() -> Plan {
        let deploy = DeploymentUpdater {
            name: "web".into(),
            container: None,
            update: ContainerUpdate {
                image: Some("r/web:2".into()),
            },
            cause: Some(ChangeCause {
                revision: Some(3),
                undo_of: None,
            }),
        };
        let live = json!({"metadata": {"name": "web", "resourceVersion": "7", "uid": "u-1"},
            "spec": {"template": {"spec": {"containers": [{"name": "web", "image": "r/web:1"}]}}}});
        let change = deploy.plan("shop", Some(&live)).unwrap();
        let hpa = AutoscalerUpdater {
            name: "web".into(),
            update: AutoscalerUpdate {
                min_replicas: Some(3),
                max_replicas: None,
            },
        };
        let live_hpa = json!({"metadata": {"name": "web", "resourceVersion": "8", "uid": "u-2"},
            "spec": {"minReplicas": 2, "maxReplicas": 5}});
        let hpa_change = hpa.plan("shop", Some(&live_hpa)).unwrap();
        Plan::new(
            "web".into(),
            "shop".into(),
            "prod".into(),
            vec![
                Planned::new(Updater::Deployment(deploy), change.into()),
                Planned::new(Updater::Autoscaler(hpa), hpa_change.into()),
            ],
        )
    }

    fn origin() -> Origin {
        Origin {
            context: "prod".into(),
            server: "https://k8s.example:6443/".into(),
            created_at: "2026-12-01T07:00:00Z".into(),
        }
    }

    fn saved() -> String {
        render(&[(&plan(), &origin(), &Source::Update, &[])], None).unwrap()
    }

    #[test]
    fn a_saved_plan_reads_back_as_the_same_plan() {
        let file = parse(&saved(), "plan.json", None).unwrap();
        assert_eq!(file.created_at, "2026-12-01T07:00:00Z");
        assert_eq!(file.clusters.len(), 1);
        let c = &file.clusters[0];
        assert_eq!(
            (c.context.as_str(), c.server.as_str()),
            ("prod", "https://k8s.example:6443/")
        );
        assert_eq!(c.source, Source::Update);
        let original = plan();
        let read: Vec<&ObjectChange> = c.plan.changes().collect();
        let want: Vec<&ObjectChange> = original.changes().collect();
        assert_eq!(read, want);
        // The updaters come back too: they re-plan to the same change, with the change-cause
        // as it was planned when the plan was saved (its revision included).
        let live = json!({"metadata": {"name": "web", "resourceVersion": "7", "uid": "u-1"},
            "spec": {"template": {"spec": {"containers": [{"name": "web", "image": "r/web:1"}]}}}});
        let again = c.plan.objects[0].updater.plan("shop", Some(&live)).unwrap();
        assert_eq!(&again, want[0]);
        assert_eq!(
            again.write,
            Some(Write::Patch {
                base: Base::new("7", "u-1").unwrap(),
                patch_type: PatchType::Strategic,
                body: json!({
                    "metadata": {"annotations": {
                        "kubernetes.io/change-cause": "kubectl-appupdate: image r/web:1 → r/web:2 (revision 3)"
                    }},
                    "spec": {"template": {"spec": {"containers": [{"name": "web", "image": "r/web:2"}]}}}
                }).into(),
            })
        );
    }

    #[test]
    fn the_file_holds_the_json_document_for_reviewers() {
        let doc: Value = serde_json::from_str(&saved()).unwrap();
        let plan = &doc["content"]["clusters"][0]["plan"];
        assert_eq!(plan["schema"], output::SCHEMA_VERSION);
        assert_eq!(plan["summary"]["update"], 2);
    }

    #[test]
    fn reindenting_keeps_a_file_valid() {
        let doc: Value = serde_json::from_str(&saved()).unwrap();
        let compact = serde_json::to_string(&doc).unwrap();
        assert!(parse(&compact, "plan.json", None).is_ok());
    }

    #[test]
    fn an_edited_value_is_refused_by_the_checksum() {
        let text = saved().replace("r/web:2", "r/web:3");
        assert_eq!(
            parse(&text, "plan.json", None).unwrap_err().to_string(),
            "plan.json was changed after it was written (its checksum does not match its content): a saved plan is applied exactly as written or not at all; make it again with --plan-out"
        );
    }

    #[test]
    fn a_truncated_file_is_refused_in_one_line() {
        let text = saved();
        let cut = &text[..text.len() / 2];
        let err = parse(cut, "plan.json", None).unwrap_err().to_string();
        assert!(
            err.starts_with("plan.json is not a complete plan file (it ends early at line"),
            "{err}"
        );
        assert!(!err.contains('\n'));
        let err = parse("", "plan.json", None).unwrap_err().to_string();
        assert!(err.contains("it ends early"), "{err}");
    }

    #[test]
    fn another_schema_is_refused() {
        let text = saved().replace(SCHEMA, "kubectl-appupdate.plan-file/v2");
        assert_eq!(
            parse(&text, "p.json", None).unwrap_err().to_string(),
            "p.json is a plan file of schema \"kubectl-appupdate.plan-file/v2\"; this kubectl-appupdate applies \"kubectl-appupdate.plan-file/v1\" files only: make the plan again with this version"
        );
        // The -o json document is not a plan file.
        let err = parse(r#"{"schema": "kubectl-appupdate.plan/v1"}"#, "p.json", None).unwrap_err();
        assert!(matches!(err, PlanFileError::Schema { .. }));
    }

    #[test]
    fn an_empty_base_does_not_load() {
        // A file whose checksum matches but whose write is unconditional.
        let doc: Value = serde_json::from_str(&saved()).unwrap();
        let mut content = doc["content"].clone();
        content["clusters"][0]["objects"][0]["change"]["write"]["base"]["resourceVersion"] =
            json!("");
        let forged = json!({"schema": SCHEMA, "checksum": checksum(&content), "content": content});
        let err = parse(&forged.to_string(), "p.json", None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("resourceVersion and uid must not be empty"),
            "{err}"
        );
    }

    #[test]
    fn the_owners_a_plan_saw_read_back_and_are_in_its_checksum() {
        use appupdate_model::owners::{ObjectOwners, Owner, Reason, Who};
        let owners = vec![ObjectOwners {
            object: "deployment.apps/web".into(),
            owners: vec![
                Owner {
                    who: Who::Helm {
                        release: "shop/web".into(),
                    },
                    fields: vec![],
                    reason: Reason::ObjectOwned,
                },
                Owner {
                    who: Who::Manager {
                        manager: "ci".into(),
                    },
                    fields: vec!["spec.maxReplicas".into()],
                    reason: Reason::ApplyConflict,
                },
            ],
        }];
        let text = render(&[(&plan(), &origin(), &Source::Update, &owners)], None).unwrap();
        let read = parse(&text, "p.json", None).unwrap();
        assert_eq!(read.clusters[0].owners, owners);
        // The reviewers' document names them as -o json does.
        let doc: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            doc["content"]["clusters"][0]["plan"]["owners"][1]["consequence"],
            json!("the next apply by field manager ci will conflict on .spec.maxReplicas")
        );
        // Taking one out is an edit the checksum sees.
        let mut edited = doc.clone();
        edited["content"]["clusters"][0]["owners"] = json!([]);
        assert!(matches!(
            parse(&edited.to_string(), "p.json", None),
            Err(PlanFileError::Checksum { .. })
        ));
        // An owner of no kind this tool names is refused as edited, resealed or not.
        let mut content = doc["content"].clone();
        content["clusters"][0]["owners"][0]["tool"] = json!("chef");
        let forged = json!({"schema": SCHEMA, "checksum": checksum(&content), "content": content});
        let err = parse(&forged.to_string(), "p.json", None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("an owner of an unknown kind \"chef\""),
            "{err}"
        );
        // Nobody else: the file has no owners at all, as files of earlier builds.
        let none: Value = serde_json::from_str(&saved()).unwrap();
        assert!(none["content"]["clusters"][0].get("owners").is_none());
    }

    #[test]
    fn an_updater_of_another_shape_is_refused_as_edited() {
        let doc: Value = serde_json::from_str(&saved()).unwrap();
        let mut content = doc["content"].clone();
        content["clusters"][0]["objects"][0]["updater"] = json!({"spec": {}});
        let forged = json!({"schema": SCHEMA, "checksum": checksum(&content), "content": content});
        assert_eq!(
            parse(&forged.to_string(), "p.json", None)
                .unwrap_err()
                .to_string(),
            "p.json was edited: deployment.apps/web: missing field `type`; a saved plan is applied only as kubectl-appupdate wrote it, so nothing was sent; make it again with --plan-out"
        );
    }

    fn key(bytes: &str, named: &str) -> PlanKey {
        PlanKey::new(bytes.as_bytes().to_vec(), named.into()).unwrap()
    }

    fn signed(key: &PlanKey) -> String {
        render(&[(&plan(), &origin(), &Source::Update, &[])], Some(key)).unwrap()
    }

    /// `text` with `edit` applied to its content and the checksum made again, as someone
    /// without the key could.
    fn edited(text: &str, edit: impl FnOnce(&mut Value)) -> String {
        let mut doc: Value = serde_json::from_str(text).unwrap();
        edit(&mut doc["content"]);
        doc["checksum"] = json!(checksum(&doc["content"]));
        serde_json::to_string_pretty(&doc).unwrap()
    }

    const KEY: &str = "0123456789abcdef0123456789abcdef";

    /// A first exposure with the envoy-gateway auth provider: a public and a scoped HTTPRoute,
    /// and the scoped one's SecurityPolicy.
    fn envoy_gateway_plan() -> Plan {
        use crate::routes::refs::{ObjectRef, RouteFlags, ServiceRef};
        use crate::routes::{Listing, LiveRoutes, plan_routes};
        use appupdate_model::plan::{AuthProvider, RouteStyle};
        let file = appupdate_model::endpoints_file::parse(
            "endpoints:\n  - path: /a\n  - path: /u\n    scopes: [user]\n",
            "e.yaml",
        )
        .unwrap();
        let flags = RouteFlags {
            style: Some(RouteStyle::Gateway),
            auth_provider: Some(AuthProvider::EnvoyGateway),
            gateway: Some(ObjectRef::parse("gateways/public").unwrap()),
            auth_service: Some(ServiceRef::parse("auth/oauth:8080").unwrap()),
            ..RouteFlags::default()
        };
        let svc = json!({"spec": {"ports": [{"port": 80}]}});
        let none = Listing::default();
        let live = LiveRoutes {
            service: &svc,
            ingresses: &[],
            httproutes: &none,
            security_policies: &none,
            ingress_classes: None,
            gateway_support: None,
        };
        let planned = plan_routes("web", &file, &flags, &live).unwrap();
        let objects = planned
            .updaters
            .into_iter()
            .map(|(updater, _)| {
                let change = updater.plan("shop", None).unwrap();
                Planned::new(updater, change.into())
            })
            .collect();
        Plan::new("web".into(), "shop".into(), "prod".into(), objects).with_routes(planned.summary)
    }

    /// The move of a scoped HTTPRoute made under the name `legacy` (its identifier label is its
    /// group's) from the ExternalAuth filter to a SecurityPolicy: the route is updated and its
    /// policy created, both under the live route's name.
    fn legacy_route_plan() -> Plan {
        use crate::routes::refs::{ObjectRef, RouteFlags, ServiceRef};
        use crate::routes::{
            Attachment, BackendPort, Listing, LiveRoutes, RouteContext, create_bodies, plan_routes,
        };
        use appupdate_model::plan::{AuthProvider, RouteStyle};
        let file = appupdate_model::endpoints_file::parse(
            "endpoints:\n  - path: /u\n    scopes: [user]\n",
            "e.yaml",
        )
        .unwrap();
        let ctx = RouteContext {
            attachment: Attachment {
                parent_refs: Some(json!([ObjectRef::parse("gateways/public")
                    .unwrap()
                    .parent_ref()])),
                auth_service: Some(ServiceRef::parse("auth/oauth:8080").unwrap()),
                auth_provider: Some(AuthProvider::Filter),
                ..Attachment::default()
            },
            ..RouteContext::new("web", BackendPort::Number(80))
        };
        let mut route = create_bodies(RouteStyle::Gateway, &ctx, &file, "shop")
            .unwrap()
            .remove(0);
        route["metadata"]["name"] = json!("legacy");
        route["metadata"]["resourceVersion"] = json!("7");
        route["metadata"]["uid"] = json!("u-7");
        let flags = RouteFlags {
            style: Some(RouteStyle::Gateway),
            auth_provider: Some(AuthProvider::EnvoyGateway),
            ..RouteFlags::default()
        };
        let svc = json!({"spec": {"ports": [{"port": 80}]}});
        let routes = Listing::Items(vec![route]);
        let none = Listing::default();
        let live = LiveRoutes {
            service: &svc,
            ingresses: &[],
            httproutes: &routes,
            security_policies: &none,
            ingress_classes: None,
            gateway_support: None,
        };
        let planned = plan_routes("web", &file, &flags, &live).unwrap();
        let objects = planned
            .updaters
            .into_iter()
            .map(|(updater, at)| {
                let change = updater
                    .plan("shop", at.and_then(|at| live.get(at)))
                    .unwrap();
                Planned::new(updater, change.into())
            })
            .collect();
        Plan::new("web".into(), "shop".into(), "prod".into(), objects).with_routes(planned.summary)
    }

    #[test]
    fn a_route_or_policy_is_created_only_under_the_name_its_style_gives_it() {
        let plan = legacy_route_plan();
        let names: Vec<(Kind, &str, bool)> = plan
            .changes()
            .map(|c| (c.kind, c.name.as_str(), c.live.is_some()))
            .collect();
        assert_eq!(
            names,
            [
                (Kind::SecurityPolicy, "legacy", false),
                (Kind::HttpRoute, "legacy", true)
            ]
        );
        let text = render(&[(&plan, &origin(), &Source::Update, &[])], None).unwrap();
        // As planned: the route is updated under its live name, and its new policy takes it.
        assert!(parse(&text, "plan.json", None).is_ok());
        // Said to create the route: a name its style never gives a new one.
        let created = edited(&text, |c| {
            let objects = c["clusters"][0]["objects"].as_array_mut().unwrap();
            objects.retain(|o| o["updater"]["type"] != "securitypolicy");
            for o in objects {
                o["change"]["live"] = Value::Null;
            }
        });
        assert_eq!(
            parse(&created, "plan.json", None).unwrap_err().to_string(),
            "plan.json was edited: httproute.gateway.networking.k8s.io/legacy: it creates the HTTPRoute \"legacy\", a name no route style gives a new one (its scope group's is \"web-04f8996da763b7a9\"); a saved plan is applied only as kubectl-appupdate wrote it, so nothing was sent; make it again with --plan-out"
        );
        // A policy under that name without the route's update in the plan.
        let alone = edited(&text, |c| {
            let objects = c["clusters"][0]["objects"].as_array_mut().unwrap();
            objects.retain(|o| o["updater"]["type"] != "httproute");
        });
        let err = parse(&alone, "plan.json", None).unwrap_err().to_string();
        assert!(
            err.contains("securitypolicy.gateway.envoyproxy.io/legacy: it creates the SecurityPolicy \"legacy\", a name no route style gives a new one"),
            "{err}"
        );
    }

    #[test]
    fn a_scoped_httproute_without_its_filter_needs_its_policy_in_the_plan() {
        let plan = envoy_gateway_plan();
        let text = render(&[(&plan, &origin(), &Source::Update, &[])], None).unwrap();
        let read = parse(&text, "plan.json", None).unwrap();
        let kinds: Vec<Kind> = read.clusters[0].plan.changes().map(|c| c.kind).collect();
        assert_eq!(
            kinds,
            [Kind::SecurityPolicy, Kind::HttpRoute, Kind::HttpRoute]
        );
        let without_policy = edited(&text, |c| {
            let objects = c["clusters"][0]["objects"].as_array_mut().unwrap();
            objects.retain(|o| o["updater"]["type"] != "securitypolicy");
        });
        let err = parse(&without_policy, "plan.json", None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "plan.json was edited: httproute.gateway.networking.k8s.io/web-04f8996da763b7a9 serves paths with scopes without the ExternalAuth filter and without a SecurityPolicy of its name in the plan; a saved plan is applied only as kubectl-appupdate wrote it, so nothing was sent; make it again with --plan-out"
        );
        // A policy that targets another route is refused on its own.
        let retargeted = edited(&text, |c| {
            for o in c["clusters"][0]["objects"].as_array_mut().unwrap() {
                if o["updater"]["type"] == "securitypolicy" {
                    o["updater"]["spec"]["desired"]["route"] = json!("web-e3b0c44298fc1c14");
                }
            }
        });
        let err = parse(&retargeted, "plan.json", None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("targets the HTTPRoute"), "{err}");
    }

    #[test]
    fn a_signed_plan_verifies_with_its_key_and_reads_back() {
        let k = key(KEY, "--verify-key key");
        let text = signed(&k);
        let doc: Value = serde_json::from_str(&text).unwrap();
        let signature = doc["signature"].as_str().unwrap();
        assert!(signature.starts_with("hmac-sha256:"), "{signature}");
        assert_eq!(signature.len(), "hmac-sha256:".len() + 64);
        // Next to the checksum, before the content.
        let keys: Vec<&String> = doc.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["schema", "checksum", "signature", "content"]);
        let file = parse(&text, "plan.json", Some(&k)).unwrap();
        assert_eq!(file.clusters[0].plan.objects.len(), 2);
        // Without a key the signature is not looked at: the file applies as an unsigned one.
        assert!(parse(&text, "plan.json", None).is_ok());
        // Nothing of the key is in the file.
        assert!(!text.contains(KEY));
    }

    #[test]
    fn a_signed_file_stays_valid_when_reindented() {
        let k = key(KEY, "--verify-key key");
        let doc: Value = serde_json::from_str(&signed(&k)).unwrap();
        let compact = serde_json::to_string(&doc).unwrap();
        assert!(parse(&compact, "plan.json", Some(&k)).is_ok());
    }

    #[test]
    fn a_content_change_with_a_new_checksum_fails_the_signature() {
        let k = key(KEY, "--verify-key key.txt");
        let text = edited(&signed(&k), |content| {
            let s = content.to_string().replacen("r/web:2", "r/web:3", 1);
            *content = serde_json::from_str(&s).unwrap();
        });
        // The checksum alone is satisfied.
        assert!(parse(&text, "plan.json", None).is_ok());
        assert_eq!(
            parse(&text, "plan.json", Some(&k)).unwrap_err().to_string(),
            "plan.json's signature does not match --verify-key key.txt: it was changed after signing, or signed with another key"
        );
        // One byte is enough: the creation time, a second later.
        let text = edited(&signed(&k), |content| {
            content["createdAt"] = json!("2026-12-01T07:00:01Z");
        });
        assert!(matches!(
            parse(&text, "plan.json", Some(&k)),
            Err(PlanFileError::Signature { .. })
        ));
    }

    #[test]
    fn another_key_or_a_malformed_signature_fails() {
        let text = signed(&key(KEY, "--sign-key a"));
        let other = key("fedcba9876543210fedcba9876543210", "--verify-key b");
        assert!(matches!(
            parse(&text, "plan.json", Some(&other)),
            Err(PlanFileError::Signature { .. })
        ));
        let k = key(KEY, "--verify-key a");
        let mut doc: Value = serde_json::from_str(&text).unwrap();
        let good = doc["signature"].as_str().unwrap().to_owned();
        for bad in [
            good.replacen("hmac-sha256:", "hmac-sha512:", 1),
            good[..good.len() - 2].to_owned(),
            format!("{good}00"),
            good.replacen("hmac-sha256:", "hmac-sha256:zz", 1)[..good.len()].to_owned(),
            String::new(),
        ] {
            doc["signature"] = json!(bad);
            let err = parse(&doc.to_string(), "plan.json", Some(&k));
            assert!(matches!(err, Err(PlanFileError::Signature { .. })), "{bad}");
        }
    }

    #[test]
    fn an_unsigned_file_is_refused_when_a_key_is_given() {
        let k = key(KEY, "APPUPDATE_PLAN_KEY_FILE=key.txt");
        assert_eq!(
            parse(&saved(), "plan.json", Some(&k))
                .unwrap_err()
                .to_string(),
            "plan.json is not signed; APPUPDATE_PLAN_KEY_FILE=key.txt accepts only plans signed with that key: make it again with --plan-out FILE --sign-key KEYFILE"
        );
    }

    #[test]
    fn a_key_file_loses_one_line_break_and_must_hold_16_bytes() {
        let sign = |content: &str| {
            let k = PlanKey::new(content.as_bytes().to_vec(), "k".into()).unwrap();
            signed(&k)
        };
        // `openssl rand -hex 32 > key` and the same key typed without a line break sign alike.
        assert_eq!(sign(KEY), sign(&format!("{KEY}\n")));
        assert_eq!(sign(KEY), sign(&format!("{KEY}\r\n")));
        // Only one: a second line break is part of the key.
        assert_ne!(sign(KEY), sign(&format!("{KEY}\n\n")));
        let new = |content: &[u8]| PlanKey::new(content.to_vec(), "k".into()).map(|_| ());
        assert_eq!(new(b""), Err(KeyError::Empty));
        assert_eq!(new(b"\n"), Err(KeyError::Empty));
        assert_eq!(new(b"\r\n"), Err(KeyError::Empty));
        assert_eq!(new(b"0123456789abcde\n"), Err(KeyError::TooShort));
        assert_eq!(new(b"0123456789abcdef\n"), Ok(()));
        // Raw bytes, not text.
        assert_eq!(new(&[0xff; 16]), Ok(()));
        // A public key is no secret: a cosign.pub given where a shared key belongs.
        let public = b"-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEbSrBgZyltVC2pbNujV5/55mFHsUA\n-----END PUBLIC KEY-----\n";
        assert_eq!(new(public), Err(KeyError::PublicKey));
        assert_eq!(
            KeyError::TooShort.to_string(),
            "the key is shorter than 16 bytes; a key needs at least 16, e.g. from openssl rand -hex 32"
        );
        assert_eq!(
            KeyError::Empty.to_string(),
            "the key file is empty; a key needs at least 16 bytes, e.g. from openssl rand -hex 32"
        );
    }

    #[test]
    fn a_key_is_never_shown() {
        let k = key(KEY, "--sign-key key.txt");
        let debug = format!("{k:?}");
        assert!(!debug.contains(KEY), "{debug}");
        assert!(debug.contains("--sign-key key.txt"), "{debug}");
    }

    /// Plan files as kubectl-appupdate 0.1.0 wrote them against the sandbox (`--plan-out`),
    /// between them every updater type: an image, autoscaler bounds and Ingresses created,
    /// updated and deleted (`nginx-auth`); HTTPRoutes and SecurityPolicies created, updated,
    /// unchanged and deleted (`gateway` with `envoy-gateway`).
    const WRITTEN_BY_0_1_0: [(&str, &str); 2] = [
        (
            "plan-nginx-auth.json",
            include_str!("../tests/fixtures/plan-nginx-auth.json"),
        ),
        (
            "plan-gateway-envoy.json",
            include_str!("../tests/fixtures/plan-gateway-envoy.json"),
        ),
    ];

    /// `text` rendered again after it is read: what the fixture's file would be if this build
    /// had written it.
    fn written_again(text: &str, file: &str) -> Value {
        let read = parse(text, file, None).unwrap();
        let origins: Vec<Origin> = read
            .clusters
            .iter()
            .map(|c| Origin {
                context: c.context.clone(),
                server: c.server.clone(),
                created_at: read.created_at.clone(),
            })
            .collect();
        let entries: Vec<Saving<'_>> = read
            .clusters
            .iter()
            .zip(&origins)
            .map(|(c, o)| (&c.plan, o, &c.source, &c.owners[..]))
            .collect();
        let again = render_in_waves(&entries, &read.waves, None).unwrap();
        serde_json::from_str(&again.text).unwrap()
    }

    #[test]
    fn plan_files_of_earlier_builds_load_and_save_alike() {
        let mut types = std::collections::BTreeSet::new();
        for (file, text) in WRITTEN_BY_0_1_0 {
            let mut original: Value = serde_json::from_str(text).unwrap();
            let mut again = written_again(text, file);
            for o in original["content"]["clusters"][0]["objects"]
                .as_array()
                .unwrap()
            {
                types.insert(o["updater"]["type"].as_str().unwrap().to_owned());
            }
            // What a saved plan applies — every updater and every approved change — comes
            // back byte for byte.
            for doc in [&original, &again] {
                assert_eq!(doc["content"]["clusters"].as_array().unwrap().len(), 1);
            }
            assert_eq!(
                serde_json::to_string_pretty(&again["content"]["clusters"][0]["objects"]).unwrap(),
                serde_json::to_string_pretty(&original["content"]["clusters"][0]["objects"])
                    .unwrap(),
                "{file}"
            );
            // And so does the rest of the file, but for what a read plan does not keep: the
            // routes' live styles and notes in the reviewers' document (so its checksum), and
            // the version that wrote it.
            for doc in [&mut original, &mut again] {
                let routes = &mut doc["content"]["clusters"][0]["plan"]["routes"];
                for key in ["liveStyles", "migration", "notes"] {
                    routes.as_object_mut().unwrap().remove(key);
                }
                doc["content"]["tool"] = Value::Null;
                doc["checksum"] = Value::Null;
            }
            assert_eq!(
                serde_json::to_string_pretty(&again).unwrap(),
                serde_json::to_string_pretty(&original).unwrap(),
                "{file}"
            );
        }
        assert_eq!(
            types.into_iter().collect::<Vec<_>>(),
            [
                "autoscaler-bounds",
                "deployment-image",
                "httproute",
                "httproute-removal",
                "ingress",
                "ingress-removal",
                "securitypolicy",
                "securitypolicy-removal"
            ]
        );
    }

    #[test]
    fn field_changes_and_actions_survive() {
        let c = FieldChange::new("spec.maxReplicas", None, Some(json!(9)));
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(serde_json::from_value::<FieldChange>(v).unwrap(), c);
        assert_eq!(
            serde_json::to_value(Action::Delete).unwrap(),
            json!("delete")
        );
        assert_eq!(
            serde_json::to_value(Kind::Ingress).unwrap(),
            json!("Ingress")
        );
    }
}
