//! The plan: what this run would change, as data.
//!
//! Planning is pure. Each object the run may touch has an updater (`appupdate_plan::updaters`)
//! that names the fields it modifies and, given the live object (raw JSON, so no field is
//! lost), computes an [`ObjectChange`]: the action, the guarded field changes, the focused
//! before/after views that the user is shown, and the minimal write that realises it. The same
//! updater runs again on a conflict retry against the re-read object, and [`recheck`] decides
//! whether the fresh change is still the one the user approved (the approved-diff guard).

mod field;
mod guard;
mod kind;
mod order;
mod view;
mod write;

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use self::field::{Field, FieldChange, FieldValue};
pub use self::guard::{Recheck, recheck};
pub use self::kind::{Action, Kind};
pub use self::order::{WriteOrder, write_order};
pub use self::view::{MakeView, View};
pub use self::write::{Base, PatchType, Write};
pub use crate::route_style::{AuthProvider, RouteInfo, RouteStyle};
use crate::text::Untrusted;

use self::order::listing_rank;
use self::view::ViewRepr;

#[cfg(any(test, feature = "test-support"))]
impl ObjectChange {
    /// An Ingress `name` in namespace `shop` with [`Write::sample`] of `action` and nothing
    /// else, for tests of what looks only at the action and the name.
    pub fn sample(name: &str, action: Action) -> ObjectChange {
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
    /// `None` for a create. Shared: an unchanged object's after-view is its before-view.
    pub before: Option<View>,
    /// Focused view after the change; `None` for a delete.
    pub after: Option<View>,
    /// The request to send; `None` when unchanged.
    pub write: Option<Write>,
    /// Endpoint view of route changes (Ingresses, HTTPRoutes).
    pub route: Option<RouteInfo>,
}

impl ObjectChange {
    /// Both views, the before-view read once when the after-view is made from it.
    pub fn views(&self) -> (Option<Cow<'_, Value>>, Option<Cow<'_, Value>>) {
        let before = self.before.as_ref().map(View::get);
        let after = self.after.as_ref().map(|after| {
            match self.made_from_before(after, before.as_deref()) {
                Some((parts, value)) => Cow::Owned(parts.make_from(value)),
                None => after.get(),
            }
        });
        (before, after)
    }

    /// The after-view's maker and the before-view's value (`before`, already read) when the
    /// after-view is made from this change's before-view.
    fn made_from_before<'a>(
        &self,
        after: &'a View,
        before: Option<&'a Value>,
    ) -> Option<(&'a dyn MakeView, &'a Value)> {
        match (&after.0, &self.before, before) {
            (ViewRepr::Made(parts), Some(b), Some(value))
                if parts.base().is_some_and(|base| base.same(b)) =>
            {
                Some((parts.as_ref(), value))
            }
            _ => None,
        }
    }

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

/// A planned object: the updater that computed its change (kept for retries: it plans the
/// object again against the re-read object after every conflict) and the change the user
/// approves.
///
/// The updater is `U`, the closed set of updaters of `appupdate-plan`
/// (`appupdate_plan::updaters::Updater`, whose `Plan` and `Planned` name it): what a change is
/// does not depend on who computes it, so nothing here looks at `U`.
#[derive(Clone, Debug)]
pub struct Planned<U> {
    pub updater: U,
    /// Shared with the requests that send it and the report of what happened to it.
    pub change: Arc<ObjectChange>,
    /// The checksum of the saved plan this object is applied from (`apply FILE`): every write
    /// of it, retries included, also adds the checksum to the object's
    /// `kubectl-appupdate/applied-plans` annotation (`appupdate_plan::applied`). `None` for a
    /// run's own plan.
    pub mark: Option<String>,
}

impl<U> Planned<U> {
    /// `updater` with the change it computed, for a run's own plan (no mark).
    pub fn new(updater: U, change: Arc<ObjectChange>) -> Planned<U> {
        Planned {
            updater,
            change,
            mark: None,
        }
    }
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
    /// The style and attachment before and after, in the plugin's terms: what the history
    /// record of the run keeps of them.
    pub header: crate::intent::RoutesHeader,
}

impl RoutesPlan {
    /// The plan changes the style of live routes: new routes are created (or Ingresses
    /// rewritten in place) before the old ones are deleted.
    pub fn is_migration(&self) -> bool {
        self.live_styles.iter().any(|s| *s != self.style)
    }
}

/// Everything this run would do, in display order (the writes go in [`Plan::write_order`]).
#[derive(Clone, Debug)]
pub struct Plan<U> {
    pub app: String,
    pub namespace: String,
    pub context: String,
    pub objects: Vec<Planned<U>>,
    /// Present when the run publishes endpoints.
    pub routes: Option<RoutesPlan>,
    /// What the image check found (`image NAME → sha256:… (PLATFORMS)`) and which platform
    /// check ran, one line each, escaped; empty when the check is off.
    pub image_notes: Vec<String>,
    /// The image the plan writes and the digest its registry gave for it when the plan was
    /// made (a saved plan keeps it inside its checksum); `None` when it was not checked.
    pub image_checked: Option<CheckedImage>,
    /// What the image check made of each image the plan writes, as data (`images[]` of the
    /// `-o json` document); empty when the check did not run.
    pub images: Vec<ImageReport>,
}

/// What the image check made of one image, for one cluster: the registry's answer (the same
/// for every cluster of a run) and the platform check (the cluster's own).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImageReport {
    /// `--image` as given.
    pub reference: String,
    /// What the plan writes into the container: `reference`, `reference@digest` with
    /// `--pin-digest`, or the live spelling of the same image (an admission controller pinned it).
    pub written: String,
    /// The digest the tag names (an index's for a multi-platform image); `None` when the
    /// registry did not tell.
    pub digest: Option<String>,
    /// The platforms it is built for (`linux/arm64/v8`), attestations left out.
    pub platforms: Vec<String>,
    /// Which platform check ran.
    pub platform_check: PlatformCheck,
    /// The platforms it was checked against: those of the nodes the pods can land on, or of the
    /// live image.
    pub checked_against: Vec<String>,
    /// The live image, when the platforms were checked against it.
    pub live_image: Option<String>,
    /// The plan writes the digest (`--pin-digest`).
    pub pinned: bool,
    /// Why the image, or its platforms, were not checked (`--image-check auto` went on).
    pub not_checked: Option<String>,
}

/// Which platform check ran for an image (docs/images.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlatformCheck {
    /// Against the platforms of the nodes the pods can land on.
    Nodes,
    /// Against the live image's platforms (the nodes may not be listed, or carry no labels).
    LiveImage,
    /// None: the image or its platforms could not be checked (`notChecked` says why).
    #[default]
    None,
}

/// The image a plan writes, as the image check resolved it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CheckedImage {
    /// `--image` as given (`name:tag`).
    pub image: String,
    /// What the tag named: the index's digest for a multi-platform image.
    pub digest: String,
    /// The plan writes `image@digest` (`--pin-digest`): the tag moving later changes nothing.
    pub pinned: bool,
    /// `--image-key`: the fingerprint (`sha256:` of its DER) of the key whose cosign signature
    /// over `digest` was verified when the plan was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_by: Option<String>,
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

impl<U> Plan<U> {
    /// Builds a plan, ordering objects for display: the Deployment and HPA first, then the
    /// routes and their SecurityPolicies: creates, updates that add or change paths, updates
    /// that only take paths away, deletes, each by kind (a policy before its route, but a
    /// deleted one after it) and name; unchanged ones last. The order the writes are sent in is
    /// [`Plan::write_order`]'s: by round, concurrently within one.
    pub fn new(
        app: String,
        namespace: String,
        context: String,
        mut objects: Vec<Planned<U>>,
    ) -> Plan<U> {
        // The key borrows the name: a clone per comparison was thousands of allocations.
        fn key<U>(p: &Planned<U>) -> (bool, u8, u8, &str) {
            let c = &p.change;
            let route = c.kind.is_route_part();
            let rank = if route { listing_rank(c) } else { 0 };
            // A deleted guard after the deleted routes: it goes after its route.
            let order = match (c.kind.guards(), c.action()) {
                (Some(_), Action::Delete) => u8::MAX,
                _ => c.kind.order(),
            };
            (route, rank, order, c.name.as_str())
        }
        objects.sort_by(|a, b| key(a).cmp(&key(b)));
        Plan {
            app,
            namespace,
            context,
            objects,
            routes: None,
            image_notes: Vec::new(),
            image_checked: None,
            images: Vec::new(),
        }
    }

    /// The write order of this plan's changes, one round per object in `objects` order.
    pub fn write_order(&self) -> WriteOrder {
        write_order(self.changes())
    }

    /// The same plan, saying how it publishes the endpoints — and, when paths swap scope groups
    /// in a cycle ([`WriteOrder::unguarded`]), that one of them can be unserved for a moment.
    pub fn with_routes(mut self, mut routes: RoutesPlan) -> Plan<U> {
        let unguarded = self.write_order().unguarded;
        if !unguarded.is_empty() {
            routes.notes.push(format!(
                "The paths {} move between scope groups in a cycle (each of these groups gives another one a path): their routes are written in one round, and one of these paths can be unserved between those writes (move one, then the other, to avoid it).",
                unguarded
                    .iter()
                    .map(|p| Untrusted(p).to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        self.routes = Some(routes);
        self
    }

    pub fn changes(&self) -> impl Iterator<Item = &ObjectChange> {
        self.objects.iter().map(|p| &*p.change)
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

#[cfg(test)]
mod tests;
