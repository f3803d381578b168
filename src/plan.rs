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

/// The kinds of object this tool writes (the Service and IngressClasses are only read).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Kind {
    Deployment,
    HorizontalPodAutoscaler,
    Ingress,
    /// Gateway API `HTTPRoute` (`gateway.networking.k8s.io/v1`).
    #[serde(rename = "HTTPRoute")]
    HttpRoute,
}

impl Kind {
    /// `apiVersion` of the version this tool speaks.
    pub fn api_version(self) -> &'static str {
        match self {
            Kind::Deployment => "apps/v1",
            Kind::HorizontalPodAutoscaler => "autoscaling/v2",
            Kind::Ingress => "networking.k8s.io/v1",
            Kind::HttpRoute => "gateway.networking.k8s.io/v1",
        }
    }

    /// API group ("" for core; none of ours is core).
    pub fn group(self) -> &'static str {
        match self {
            Kind::Deployment => "apps",
            Kind::HorizontalPodAutoscaler => "autoscaling",
            Kind::Ingress => "networking.k8s.io",
            Kind::HttpRoute => "gateway.networking.k8s.io",
        }
    }

    /// Version within the group.
    pub fn version(self) -> &'static str {
        match self {
            Kind::Deployment | Kind::Ingress | Kind::HttpRoute => "v1",
            Kind::HorizontalPodAutoscaler => "v2",
        }
    }

    /// Lower-case plural resource name, as in URLs and RBAC messages.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Deployment => "deployments",
            Kind::HorizontalPodAutoscaler => "horizontalpodautoscalers",
            Kind::Ingress => "ingresses",
            Kind::HttpRoute => "httproutes",
        }
    }

    /// `resource.group`, the way kubectl names objects (`deployment.apps/web`).
    pub fn kubectl_name(self) -> &'static str {
        match self {
            Kind::Deployment => "deployment.apps",
            Kind::HorizontalPodAutoscaler => "horizontalpodautoscaler.autoscaling",
            Kind::Ingress => "ingress.networking.k8s.io",
            Kind::HttpRoute => "httproute.gateway.networking.k8s.io",
        }
    }

    /// `resource.group` in the plural, as in RBAC messages and lists
    /// (`httproutes.gateway.networking.k8s.io`).
    pub fn resource_name(self) -> String {
        format!("{}.{}", self.plural(), self.group())
    }

    /// Order within a write round ([`write_round`]): Deployment, HPA, Ingresses, HTTPRoutes.
    pub fn order(self) -> u8 {
        match self {
            Kind::Deployment => 0,
            Kind::HorizontalPodAutoscaler => 1,
            Kind::Ingress => 2,
            Kind::HttpRoute => 3,
        }
    }

    /// The kind's name in the plural, for sentences ("Ingresses", "HTTPRoutes").
    pub fn plural_title(self) -> &'static str {
        match self {
            Kind::Deployment => "Deployments",
            Kind::HorizontalPodAutoscaler => "HorizontalPodAutoscalers",
            Kind::Ingress => "Ingresses",
            Kind::HttpRoute => "HTTPRoutes",
        }
    }

    /// Whether objects of this kind publish the application's endpoints.
    pub fn is_route(self) -> bool {
        matches!(self, Kind::Ingress | Kind::HttpRoute)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Deployment => "Deployment",
            Kind::HorizontalPodAutoscaler => "HorizontalPodAutoscaler",
            Kind::Ingress => "Ingress",
            Kind::HttpRoute => "HTTPRoute",
        })
    }
}

/// How the endpoints are published: the route style (`--routes`). What each style generates
/// lives in `routes`; this is only its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum RouteStyle {
    /// Ingresses with ingress-nginx's `configuration-snippet` (the original format).
    #[serde(rename = "nginx-snippet")]
    NginxSnippet,
    /// Ingresses for ingress-nginx with `auth-url` and `rewrite-target`, no snippet.
    #[serde(rename = "nginx-auth")]
    NginxAuth,
    /// Gateway API HTTPRoutes.
    #[serde(rename = "gateway")]
    Gateway,
}

impl RouteStyle {
    /// Every style, in the order they are listed in help and messages.
    pub const ALL: [RouteStyle; 3] = [
        RouteStyle::NginxSnippet,
        RouteStyle::NginxAuth,
        RouteStyle::Gateway,
    ];

    /// The name used on the command line and in `-o json`.
    pub fn as_str(self) -> &'static str {
        match self {
            RouteStyle::NginxSnippet => "nginx-snippet",
            RouteStyle::NginxAuth => "nginx-auth",
            RouteStyle::Gateway => "gateway",
        }
    }
}

impl fmt::Display for RouteStyle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
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

/// How many write rounds there are ([`write_round`]).
pub const WRITE_ROUNDS: u8 = 4;

/// The write order, the one place it is decided: the round (0 first) in which `change` is
/// written, `None` when there is nothing to write. Rounds run one after the other; the writes
/// of one round run concurrently.
///
/// 0. creates, and the Deployment and HPA updates (which do not depend on routes);
/// 1. route updates that add or change what a route serves;
/// 2. route updates that only take paths away (a path moving to another group is added there
///    in round 0 or 1 before it leaves here);
/// 3. deletes.
///
/// So new routes exist before old ones go: for a change of route style (new routes created,
/// old ones deleted) and for a path moving between scope groups, in every style.
pub fn write_round(change: &ObjectChange) -> Option<u8> {
    match change.action() {
        Action::Unchanged => None,
        Action::Create => Some(0),
        Action::Update if !change.kind.is_route() => Some(0),
        Action::Update => Some(match &change.route {
            Some(r) if r.only_removes_paths() => 2,
            _ => 1,
        }),
        Action::Delete => Some(3),
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
            route: None,
        }
    }
}

/// What a route change (an Ingress or an HTTPRoute) means in endpoint terms, for people and
/// for `-o json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteInfo {
    /// The style of the route after the change (for a delete, the style it has).
    pub style: RouteStyle,
    /// The identifier label value of the scope group.
    pub identifier: String,
    /// Sorted, de-duplicated scopes (empty for the public group).
    pub scopes: Vec<String>,
    /// Endpoint paths (as in the endpoints file, without the `/<app>` prefix) served after the
    /// change, sorted; empty for a delete.
    pub paths: Vec<String>,
    /// Endpoint paths served before the change, sorted; empty for a create.
    pub paths_before: Vec<String>,
}

impl RouteInfo {
    /// The change only takes paths away: what it serves after is a strict subset of before.
    pub fn only_removes_paths(&self) -> bool {
        self.paths.len() < self.paths_before.len()
            && self
                .paths
                .iter()
                .all(|p| self.paths_before.binary_search(p).is_ok())
    }
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
    /// Endpoint view of route changes (Ingresses, HTTPRoutes).
    pub route: Option<RouteInfo>,
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

/// How the endpoints are published by this plan, when it publishes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoutesPlan {
    /// The style of the routes after the run.
    pub style: RouteStyle,
    /// The styles of the managed routes that are live now (empty on a first exposure); a
    /// style other than `style` among them makes the plan a migration.
    pub live_styles: Vec<RouteStyle>,
    /// What the plan decided on the user's behalf, and why (which IngressClass new Ingresses
    /// get, where the style came from), one sentence each.
    pub notes: Vec<String>,
}

impl RoutesPlan {
    /// The plan changes the style of live routes: new routes are created (or Ingresses
    /// rewritten in place) before the old ones are deleted.
    pub fn is_migration(&self) -> bool {
        self.live_styles.iter().any(|s| *s != self.style)
    }
}

/// Everything this run would do, in write order.
#[derive(Clone, Debug)]
pub struct Plan {
    pub app: String,
    pub namespace: String,
    pub context: String,
    pub objects: Vec<Planned>,
    /// Present when the run publishes endpoints.
    pub routes: Option<RoutesPlan>,
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
    /// Builds a plan, ordering objects for display and writing: the Deployment and HPA first,
    /// then the routes by [`write_round`] (unchanged ones last), kind and name.
    pub fn new(app: String, namespace: String, context: String, mut objects: Vec<Planned>) -> Plan {
        objects.sort_by(|a, b| {
            let key = |p: &Planned| {
                let c = &p.change;
                let round = if c.kind.is_route() {
                    write_round(c).unwrap_or(u8::MAX)
                } else {
                    0
                };
                (c.kind.is_route(), round, c.kind.order(), c.name.clone())
            };
            key(a).cmp(&key(b))
        });
        Plan {
            app,
            namespace,
            context,
            objects,
            routes: None,
        }
    }

    /// The same plan, saying how it publishes the endpoints.
    pub fn with_routes(mut self, routes: RoutesPlan) -> Plan {
        self.routes = Some(routes);
        self
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
            route: None,
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
    fn routes_that_gain_paths_are_written_before_routes_that_only_lose_them() {
        let route = |action: Action, paths: &[&str], before: &[&str]| {
            let mut c = ObjectChange::sample("web-x", action);
            c.route = Some(RouteInfo {
                style: RouteStyle::Gateway,
                identifier: "x".into(),
                scopes: Vec::new(),
                paths: paths.iter().map(|p| (*p).to_owned()).collect(),
                paths_before: before.iter().map(|p| (*p).to_owned()).collect(),
            });
            write_round(&c)
        };
        assert_eq!(route(Action::Create, &["/a"], &[]), Some(0));
        assert_eq!(route(Action::Update, &["/a", "/b"], &["/a"]), Some(1));
        assert_eq!(route(Action::Update, &["/a"], &["/a"]), Some(1));
        assert_eq!(route(Action::Update, &["/b"], &["/a"]), Some(1));
        assert_eq!(route(Action::Update, &["/a"], &["/a", "/b"]), Some(2));
        assert_eq!(route(Action::Update, &[], &["/a"]), Some(2));
        assert_eq!(route(Action::Delete, &[], &["/a"]), Some(3));
        assert_eq!(route(Action::Unchanged, &["/a"], &["/a"]), None);
        let mut hpa = change(Action::Update, vec![min(2, 3)]);
        assert_eq!(write_round(&hpa), Some(0));
        hpa.write = None;
        assert_eq!(write_round(&hpa), None);
        assert_eq!(WRITE_ROUNDS, 4);
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
