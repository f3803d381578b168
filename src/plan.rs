//! The plan: what this run would change, as data.
//!
//! Planning is pure. Each object the run may touch has an [`Updater`] that names the fields it
//! modifies and, given the live object (raw JSON, so no field is lost), computes an
//! [`ObjectChange`]: the action, the guarded field changes, the focused before/after views that
//! the user is shown, and the minimal write that realises it. The same updater runs again on a
//! conflict retry against the re-read object, and [`recheck`] decides whether the fresh change is
//! still the one the user approved (the approved-diff guard).
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::text::Untrusted;

/// The kinds of object this tool writes (the Service is only read).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Kind {
    Deployment,
    HorizontalPodAutoscaler,
    Ingress,
}

impl Kind {
    /// `apiVersion` of the version this tool speaks.
    pub fn api_version(self) -> &'static str {
        match self {
            Kind::Deployment => "apps/v1",
            Kind::HorizontalPodAutoscaler => "autoscaling/v2",
            Kind::Ingress => "networking.k8s.io/v1",
        }
    }

    /// API group ("" for core; none of ours is core).
    pub fn group(self) -> &'static str {
        match self {
            Kind::Deployment => "apps",
            Kind::HorizontalPodAutoscaler => "autoscaling",
            Kind::Ingress => "networking.k8s.io",
        }
    }

    /// Version within the group.
    pub fn version(self) -> &'static str {
        match self {
            Kind::Deployment | Kind::Ingress => "v1",
            Kind::HorizontalPodAutoscaler => "v2",
        }
    }

    /// Lower-case plural resource name, as in URLs and RBAC messages.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Deployment => "deployments",
            Kind::HorizontalPodAutoscaler => "horizontalpodautoscalers",
            Kind::Ingress => "ingresses",
        }
    }

    /// `resource.group`, the way kubectl names objects (`deployment.apps/web`).
    pub fn kubectl_name(self) -> &'static str {
        match self {
            Kind::Deployment => "deployment.apps",
            Kind::HorizontalPodAutoscaler => "horizontalpodautoscaler.autoscaling",
            Kind::Ingress => "ingress.networking.k8s.io",
        }
    }

    /// Order of writes: Deployment, HPA, then Ingresses (whose creates, updates and deletes
    /// are further ordered by [`Action::phase`]).
    pub fn order(self) -> u8 {
        match self {
            Kind::Deployment => 0,
            Kind::HorizontalPodAutoscaler => 1,
            Kind::Ingress => 2,
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Deployment => "Deployment",
            Kind::HorizontalPodAutoscaler => "HorizontalPodAutoscaler",
            Kind::Ingress => "Ingress",
        })
    }
}

/// What happens to one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Unchanged,
    Create,
    Update,
    Delete,
}

impl Action {
    /// Write rounds: creates (and the Deployment/HPA updates, which do not depend on routes)
    /// first, then Ingress updates, then deletes — new routes exist before old ones go.
    pub fn phase(self, kind: Kind) -> Option<u8> {
        match (self, kind) {
            (Action::Unchanged, _) => None,
            (Action::Update, Kind::Deployment | Kind::HorizontalPodAutoscaler) => Some(0),
            (Action::Create, _) => Some(0),
            (Action::Update, Kind::Ingress) => Some(1),
            (Action::Delete, _) => Some(2),
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Unchanged => "unchanged",
            Action::Create => "create",
            Action::Update => "update",
            Action::Delete => "delete",
        })
    }
}

/// One leaf value (or owned sub-tree) that the run changes. `None` means absent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FieldChange {
    /// A readable path, e.g. `spec.template.spec.containers[name=web].image`.
    pub path: String,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

impl FieldChange {
    pub fn new(path: impl Into<String>, before: Option<Value>, after: Option<Value>) -> Self {
        FieldChange {
            path: path.into(),
            before,
            after,
        }
    }
}

/// Identity of a live object: the `metadata.resourceVersion` and `metadata.uid` that every
/// write to it is conditional on. Both are non-empty by construction — a patch carrying an
/// empty `resourceVersion` is applied unconditionally by the server, so there is no way to
/// make one (a saved plan with an empty one does not load either).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "BaseFields", rename_all = "camelCase", deny_unknown_fields)]
pub struct Base {
    resource_version: String,
    uid: String,
}

/// [`Base`] as read from a saved plan, before the check that neither is empty.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct BaseFields {
    resource_version: String,
    uid: String,
}

impl TryFrom<BaseFields> for Base {
    type Error = &'static str;

    fn try_from(f: BaseFields) -> Result<Base, Self::Error> {
        Base::new(f.resource_version, f.uid).ok_or("resourceVersion and uid must not be empty")
    }
}

impl Base {
    /// `None` when either is empty.
    pub fn new(resource_version: impl Into<String>, uid: impl Into<String>) -> Option<Base> {
        let (resource_version, uid) = (resource_version.into(), uid.into());
        (!resource_version.is_empty() && !uid.is_empty()).then_some(Base {
            resource_version,
            uid,
        })
    }

    /// Reads `metadata.resourceVersion` and `metadata.uid` of a live object; `None` when the
    /// object lacks either (a server always sets both).
    pub fn of(live: &Value) -> Option<Base> {
        let meta = &live["metadata"];
        Base::new(
            meta["resourceVersion"].as_str().unwrap_or_default(),
            meta["uid"].as_str().unwrap_or_default(),
        )
    }

    /// [`Base::of`] for an object this run is about to write.
    pub fn required(live: &Value, reference: &str) -> Result<Base, PlanError> {
        Base::of(live).ok_or_else(|| PlanError::NoPrecondition {
            reference: reference.to_owned(),
        })
    }

    pub fn resource_version(&self) -> &str {
        &self.resource_version
    }

    pub fn uid(&self) -> &str {
        &self.uid
    }
}

/// How a patch body is interpreted by the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PatchType {
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/strategic-merge-patch+json` (lists such as containers merged by key).
    Strategic,
}

/// The minimal request that realises a change. A write to a live object carries that
/// object's [`Base`], so it is conditional by construction: the apply step cannot send one
/// without its precondition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "request",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
pub enum Write {
    /// A complete new object. It needs no precondition: a create fails when the name is
    /// taken (AlreadyExists).
    Create { body: Value },
    /// Only the changed fields, sent with `metadata.resourceVersion` set to `base`'s.
    Patch {
        base: Base,
        patch_type: PatchType,
        body: Value,
    },
    /// A delete with `base`'s uid and resourceVersion as preconditions.
    Delete { base: Base },
}

impl Write {
    /// The action this request performs.
    pub fn action(&self) -> Action {
        match self {
            Write::Create { .. } => Action::Create,
            Write::Patch { .. } => Action::Update,
            Write::Delete { .. } => Action::Delete,
        }
    }

    /// The live object this request is conditional on (`None` for a create).
    pub fn base(&self) -> Option<&Base> {
        match self {
            Write::Create { .. } => None,
            Write::Patch { base, .. } | Write::Delete { base } => Some(base),
        }
    }
}

#[cfg(test)]
impl Write {
    /// A request of `action` with an empty body against a live object with resourceVersion `1`
    /// and uid `u1`, for tests of what looks only at the action.
    pub(crate) fn sample(action: Action) -> Option<Write> {
        let base = || Base::new("1", "u1").unwrap_or_else(|| unreachable!());
        match action {
            Action::Unchanged => None,
            Action::Create => Some(Write::Create { body: Value::Null }),
            Action::Update => Some(Write::Patch {
                base: base(),
                patch_type: PatchType::Merge,
                body: Value::Null,
            }),
            Action::Delete => Some(Write::Delete { base: base() }),
        }
    }
}

#[cfg(test)]
impl ObjectChange {
    /// An Ingress `name` in namespace `shop` with [`Write::sample`] of `action` and nothing
    /// else, for tests of what looks only at the action and the name.
    pub(crate) fn sample(name: &str, action: Action) -> ObjectChange {
        ObjectChange {
            kind: Kind::Ingress,
            namespace: "shop".into(),
            name: name.into(),
            live: None,
            fields: Vec::new(),
            before: None,
            after: None,
            write: Write::sample(action),
            ingress: None,
        }
    }
}

/// What an Ingress change means in endpoint terms, for people and for `-o json`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IngressInfo {
    /// The identifier label value of the scope group.
    pub identifier: String,
    /// Sorted, de-duplicated scopes (empty for the public group).
    pub scopes: Vec<String>,
    /// Endpoint paths as written in the endpoints file (before the `/<app>` prefix) after the
    /// change; for a delete, the paths being removed.
    pub paths: Vec<String>,
}

/// The computed change for one object. What happens to it ([`ObjectChange::action`]) is
/// decided by its [`Write`]: no write, no change.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ObjectChange {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
    /// The identity of the live object the change was computed from, as shown to users
    /// (`-o json`); `None` when it does not exist. A write's precondition is its own
    /// [`Write::base`].
    pub live: Option<Base>,
    /// The guarded values: what the user is shown changing. Empty when unchanged.
    pub fields: Vec<FieldChange>,
    /// Focused view of the live object (only what the tool owns or shows for context);
    /// `None` for a create.
    pub before: Option<Value>,
    /// Focused view after the change; `None` for a delete.
    pub after: Option<Value>,
    /// The request to send; `None` when unchanged.
    pub write: Option<Write>,
    /// Endpoint view of Ingress changes.
    pub ingress: Option<IngressInfo>,
}

impl ObjectChange {
    /// `deployment.apps/web`, the way kubectl prints object references.
    pub fn reference(&self) -> String {
        format!("{}/{}", self.kind.kubectl_name(), self.name)
    }

    /// What happens to the object: its write's action, or unchanged.
    pub fn action(&self) -> Action {
        self.write.as_ref().map_or(Action::Unchanged, Write::action)
    }

    pub fn is_change(&self) -> bool {
        self.write.is_some()
    }
}

/// Why a requested change cannot be planned against the live state. Nothing has been written
/// when one of these is returned.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error(
        "{} has no container named {:?}; its containers are {}",
        Untrusted(.reference), Untrusted(.container), Untrusted(.available)
    )]
    NoSuchContainer {
        reference: String,
        container: String,
        available: String,
    },
    #[error(
        "{} has {count} containers ({}); choose one with --container",
        Untrusted(.reference), Untrusted(.available)
    )]
    ContainerRequired {
        reference: String,
        count: usize,
        available: String,
    },
    #[error("{} has no containers", Untrusted(.reference))]
    NoContainers { reference: String },
    #[error(
        "--min {min} is greater than the maximum {max}{source}; raise --max or lower --min",
        source = if *.max_from_live { " currently set on the HorizontalPodAutoscaler" } else { "" }
    )]
    MinAboveMax {
        min: i32,
        max: i32,
        max_from_live: bool,
    },
    #[error(
        "--max {max} is less than the minimum {min}{source}; lower --min or raise --max",
        source = if *.min_from_live { " currently set on the HorizontalPodAutoscaler" } else { "" }
    )]
    MaxBelowMin {
        min: i32,
        max: i32,
        min_from_live: bool,
    },
    #[error("{} not found in namespace {}", Untrusted(.reference), Untrusted(.namespace))]
    Missing {
        reference: String,
        namespace: String,
    },
    #[error("{}: {}", Untrusted(.reference), Untrusted(.message))]
    Unexpected { reference: String, message: String },
    #[error(
        "{} came without metadata.resourceVersion or metadata.uid, so it cannot be written conditionally; it is left alone",
        Untrusted(.reference)
    )]
    NoPrecondition { reference: String },
}

/// One object's planner: computes the object's change — the fields it modifies, with their
/// values before and after, and the write — from the latest live object. Pure; called once
/// while planning and again after every conflict, so a retry re-applies only the requested
/// values to whatever else changed meanwhile.
pub trait Updater: Send + Sync + fmt::Debug {
    /// The name of the object it plans.
    fn name(&self) -> &str;
    /// The change against `live` (`None`: the object does not exist).
    fn plan(&self, namespace: &str, live: Option<&Value>) -> Result<ObjectChange, PlanError>;
    /// The updater as data, for a saved plan (`--plan-out`), which loads it back with
    /// `plan_file::load_updater`; `None`: this updater cannot be saved.
    fn save(&self) -> Option<SavedUpdater> {
        None
    }
}

/// An updater as data: its type name and its fields, as written in a saved plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedUpdater {
    #[serde(rename = "type")]
    pub kind: String,
    pub spec: Value,
}

impl SavedUpdater {
    /// `spec` serialised; `None` only if it cannot be (it always can for plain data).
    pub fn new(kind: &str, spec: &impl Serialize) -> Option<SavedUpdater> {
        Some(SavedUpdater {
            kind: kind.to_owned(),
            spec: serde_json::to_value(spec).ok()?,
        })
    }
}

/// A planned object: its updater (kept for retries) and the change the user approves.
#[derive(Clone, Debug)]
pub struct Planned {
    pub updater: Arc<dyn Updater>,
    pub change: ObjectChange,
}

/// Everything this run would do, in write order.
#[derive(Clone, Debug)]
pub struct Plan {
    pub app: String,
    pub namespace: String,
    pub context: String,
    pub objects: Vec<Planned>,
}

/// Counts in the terraform style.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub create: usize,
    pub update: usize,
    pub delete: usize,
    pub unchanged: usize,
}

impl Summary {
    pub fn has_changes(&self) -> bool {
        self.create + self.update + self.delete > 0
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.has_changes() {
            write!(
                f,
                "Plan: {} to create, {} to update, {} to delete.",
                self.create, self.update, self.delete
            )
        } else {
            f.write_str("No changes.")
        }
    }
}

impl Plan {
    /// Builds a plan, ordering objects for display and writing: by kind, then creates,
    /// updates, deletes, then name.
    pub fn new(app: String, namespace: String, context: String, mut objects: Vec<Planned>) -> Plan {
        objects.sort_by(|a, b| {
            let key = |p: &Planned| {
                (
                    p.change.kind.order(),
                    p.change.action().phase(p.change.kind).unwrap_or(u8::MAX),
                    p.change.name.clone(),
                )
            };
            key(a).cmp(&key(b))
        });
        Plan {
            app,
            namespace,
            context,
            objects,
        }
    }

    pub fn changes(&self) -> impl Iterator<Item = &ObjectChange> {
        self.objects.iter().map(|p| &p.change)
    }

    pub fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for c in self.changes() {
            match c.action() {
                Action::Create => s.create += 1,
                Action::Update => s.update += 1,
                Action::Delete => s.delete += 1,
                Action::Unchanged => s.unchanged += 1,
            }
        }
        s
    }

    pub fn has_changes(&self) -> bool {
        self.summary().has_changes()
    }
}

/// Outcome of re-planning an object after a conflict or a failed precondition.
#[derive(Clone, Debug, PartialEq)]
pub enum Recheck {
    /// The fresh change writes exactly (a subset of) what was approved: send it.
    Proceed(ObjectChange),
    /// Someone else already made the approved change; nothing left to write.
    AlreadyDone,
    /// A field this run changes no longer holds the value the user was shown.
    Tripped(ObjectChange),
}

/// The approved-diff guard. `fresh` is the updater's change against the re-read object.
///
/// Proceeds only when every field the fresh change would write was approved with the same
/// before and after values, and the action is the same (and, for deletes, the object is the
/// same incarnation). Fields that already hold the approved value simply drop out of `fresh`.
pub fn recheck(approved: &ObjectChange, fresh: ObjectChange) -> Recheck {
    if fresh.action() == Action::Unchanged {
        return Recheck::AlreadyDone;
    }
    if fresh.action() != approved.action() {
        return Recheck::Tripped(fresh);
    }
    if let (
        Some(Write::Delete {
            base: approved_base,
        }),
        Some(Write::Delete { base }),
    ) = (&approved.write, &fresh.write)
    {
        let same_object = approved_base.uid() == base.uid();
        if !same_object || approved.fields != fresh.fields {
            return Recheck::Tripped(fresh);
        }
        return Recheck::Proceed(fresh);
    }
    let all_approved = fresh.fields.iter().all(|f| approved.fields.contains(f));
    if all_approved {
        Recheck::Proceed(fresh)
    } else {
        Recheck::Tripped(fresh)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn change(action: Action, fields: Vec<FieldChange>) -> ObjectChange {
        ObjectChange {
            kind: Kind::HorizontalPodAutoscaler,
            namespace: "shop".into(),
            name: "web".into(),
            live: Base::new("1", "u1"),
            fields,
            before: None,
            after: None,
            write: Write::sample(action),
            ingress: None,
        }
    }

    fn min(before: i64, after: i64) -> FieldChange {
        FieldChange::new("spec.minReplicas", Some(json!(before)), Some(json!(after)))
    }

    fn max(before: i64, after: i64) -> FieldChange {
        FieldChange::new("spec.maxReplicas", Some(json!(before)), Some(json!(after)))
    }

    #[test]
    fn guard_proceeds_when_the_fresh_change_is_the_approved_one() {
        let approved = change(Action::Update, vec![min(2, 3), max(5, 8)]);
        let fresh = change(Action::Update, vec![min(2, 3), max(5, 8)]);
        assert!(matches!(recheck(&approved, fresh), Recheck::Proceed(_)));
    }

    #[test]
    fn guard_proceeds_with_the_rest_when_someone_made_part_of_the_change() {
        let approved = change(Action::Update, vec![min(2, 3), max(5, 8)]);
        let fresh = change(Action::Update, vec![max(5, 8)]);
        assert_eq!(recheck(&approved, fresh.clone()), Recheck::Proceed(fresh));
    }

    #[test]
    fn guard_trips_when_a_changed_field_moved_under_us() {
        let approved = change(Action::Update, vec![min(2, 3)]);
        let fresh = change(Action::Update, vec![min(4, 3)]);
        assert!(matches!(recheck(&approved, fresh), Recheck::Tripped(_)));
    }

    #[test]
    fn guard_reports_already_done_when_nothing_is_left() {
        let approved = change(Action::Update, vec![min(2, 3)]);
        let fresh = change(Action::Unchanged, vec![]);
        assert_eq!(recheck(&approved, fresh), Recheck::AlreadyDone);
    }

    #[test]
    fn guard_trips_when_an_updated_object_disappeared() {
        let approved = change(Action::Update, vec![min(2, 3)]);
        let fresh = change(Action::Create, vec![min(2, 3)]);
        assert!(matches!(recheck(&approved, fresh), Recheck::Tripped(_)));
    }

    #[test]
    fn guard_trips_when_a_deleted_object_was_recreated() {
        let approved = change(Action::Delete, vec![]);
        let mut fresh = change(Action::Delete, vec![]);
        fresh.write = Some(Write::Delete {
            base: Base::new("9", "u2").unwrap(),
        });
        assert!(matches!(recheck(&approved, fresh), Recheck::Tripped(_)));
    }

    #[test]
    fn a_base_needs_both_a_resource_version_and_a_uid() {
        assert_eq!(Base::new("", "u1"), None);
        assert_eq!(Base::new("1", ""), None);
        assert_eq!(Base::of(&json!({"metadata": {"uid": "u1"}})), None);
        let base = Base::of(&json!({"metadata": {"uid": "u1", "resourceVersion": "7"}})).unwrap();
        assert_eq!((base.resource_version(), base.uid()), ("7", "u1"));
    }

    #[test]
    fn summary_reads_like_terraform() {
        let s = Summary {
            create: 1,
            update: 2,
            delete: 1,
            unchanged: 3,
        };
        assert_eq!(
            s.to_string(),
            "Plan: 1 to create, 2 to update, 1 to delete."
        );
        assert_eq!(Summary::default().to_string(), "No changes.");
    }
}
