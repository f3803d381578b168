//! The updaters: [`Updater`], the closed set of the eight kinds of object planner a plan holds,
//! and here the Deployment's (container image) and the HorizontalPodAutoscaler's (bounds).
//!
//! An updater computes one object's change — the fields it modifies, with their values before
//! and after, the views shown and the write — from the latest live object. It is pure, and
//! called once while planning and again after every conflict (`applied::replan`), so a retry
//! re-applies only the requested values to whatever else changed meanwhile. [`Updater`] is
//! also what a saved plan holds of each object (`{"type": …, "spec": …}`, serde's adjacently
//! tagged form of the enum; the `type` names are those of the variants' `rename`s), read back
//! with [`Updater::from_saved`] and fenced to the plan's application with
//! [`Updater::check_saved`] (a [`Refusal`] says why not). The route updaters live in `routes`,
//! one module per route style.
//!
//! The Deployment's and the HPA's each take an update configuration whose leaves are optional — `None` means "not requested"
//! — and computes, from the live object, the guarded fields, the focused views and a patch that
//! carries only the changed leaves (the Deployment's `spec.replicas` is never sent: the HPA owns
//! it). The route updaters live in `routes`.
//!
//! An image change also sets the Deployment's annotation `kubernetes.io/change-cause`
//! ([`ChangeCause`]), in the same patch: the deployment controller copies it to the new
//! ReplicaSet, so `kubectl rollout history` says what each revision changed. It is in the views
//! (the diff shows it) but not among the guarded fields: someone else annotating the Deployment
//! between the read and the write is not a reason to stop.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use appupdate_model::names;
use appupdate_model::plan::{
    Base, Field, FieldChange, Kind, ObjectChange, PatchType, PlanError, RouteStyle, Write,
};
use appupdate_model::text::{self, Untrusted};

use crate::routes::envoy_gateway::{SecurityPolicyRemoval, SecurityPolicyUpdater};
use crate::routes::gateway::{HttpRouteRemoval, HttpRouteUpdater};
use crate::routes::ingress::{IngressRemoval, IngressUpdater};

/// Everything this run would do, its objects planned by [`Updater`]s.
pub type Plan = appupdate_model::plan::Plan<Updater>;
/// One object of a [`Plan`].
pub type Planned = appupdate_model::plan::Planned<Updater>;

/// The updaters, one per kind of object planner: what a plan keeps of each object to plan it
/// again, and what a saved plan holds of it (`{"type": "<rename>", "spec": {…}}`). A saved
/// plan may name these and nothing else.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", content = "spec", deny_unknown_fields)]
pub enum Updater {
    #[serde(rename = "deployment-image")]
    Deployment(DeploymentUpdater),
    #[serde(rename = "autoscaler-bounds")]
    Autoscaler(AutoscalerUpdater),
    #[serde(rename = "ingress")]
    Ingress(IngressUpdater),
    #[serde(rename = "ingress-removal")]
    IngressRemoval(IngressRemoval),
    #[serde(rename = "httproute")]
    HttpRoute(HttpRouteUpdater),
    #[serde(rename = "httproute-removal")]
    HttpRouteRemoval(HttpRouteRemoval),
    #[serde(rename = "securitypolicy")]
    SecurityPolicy(SecurityPolicyUpdater),
    #[serde(rename = "securitypolicy-removal")]
    SecurityPolicyRemoval(SecurityPolicyRemoval),
}

impl Updater {
    /// The name of the object it plans.
    pub fn name(&self) -> &str {
        match self {
            Updater::Deployment(u) => &u.name,
            Updater::Autoscaler(u) => &u.name,
            Updater::Ingress(u) => &u.name,
            Updater::IngressRemoval(u) => &u.name,
            Updater::HttpRoute(u) => &u.name,
            Updater::HttpRouteRemoval(u) => &u.name,
            Updater::SecurityPolicy(u) => &u.name,
            Updater::SecurityPolicyRemoval(u) => &u.name,
        }
    }

    /// The kind of object it plans.
    pub fn kind(&self) -> Kind {
        match self {
            Updater::Deployment(_) => Kind::Deployment,
            Updater::Autoscaler(_) => Kind::HorizontalPodAutoscaler,
            Updater::Ingress(_) | Updater::IngressRemoval(_) => Kind::Ingress,
            Updater::HttpRoute(_) | Updater::HttpRouteRemoval(_) => Kind::HttpRoute,
            Updater::SecurityPolicy(_) | Updater::SecurityPolicyRemoval(_) => Kind::SecurityPolicy,
        }
    }

    /// The change against `live` (`None`: the object does not exist).
    pub fn plan(&self, namespace: &str, live: Option<&Value>) -> Result<ObjectChange, PlanError> {
        match self {
            Updater::Deployment(u) => u.plan(namespace, live),
            Updater::Autoscaler(u) => u.plan(namespace, live),
            Updater::Ingress(u) => u.plan(namespace, live),
            Updater::IngressRemoval(u) => u.plan(namespace, live),
            Updater::HttpRoute(u) => u.plan(namespace, live),
            Updater::HttpRouteRemoval(u) => u.plan(namespace, live),
            Updater::SecurityPolicy(u) => u.plan(namespace, live),
            Updater::SecurityPolicyRemoval(u) => u.plan(namespace, live),
        }
    }

    /// [`Updater::plan`] against a live object the caller has no further use for: the same
    /// change, and `live` is freed as soon as it is planned (the planner gives each live route
    /// up to its updater this way) — but what the views of a live Ingress read of it, which
    /// its change holds instead of a copy of its before-view.
    pub fn plan_owned(
        &self,
        namespace: &str,
        live: Option<Value>,
    ) -> Result<ObjectChange, PlanError> {
        match self {
            // The change holds what its views read of the live Ingress.
            Updater::Ingress(u) => u.plan_given(namespace, live.map(std::borrow::Cow::Owned)),
            _ => self.plan(namespace, live.as_ref()),
        }
    }

    /// The updater a saved plan holds (`{"type": …, "spec": …}`); refused when its type is
    /// none of the variants' or its spec is not that type's.
    pub fn from_saved(saved: Value) -> Result<Updater, Refusal> {
        let named = saved.get("type").and_then(Value::as_str).map(str::to_owned);
        Updater::deserialize(saved).map_err(|e| {
            let why = e.to_string();
            match named {
                // serde's word for a tag that names no variant.
                Some(named) if why.starts_with("unknown variant") => Refusal::UnknownType(named),
                _ => Refusal::Unreadable(why),
            }
        })
    }

    /// Refuses an updater (a saved plan's) that is not one of `app`'s own, as an ordinary run
    /// would make it (see `plan_file`'s module docs). `creates`: its approved change makes a
    /// new object (no live one was seen), which a route, or a policy whose route the plan does
    /// not update, makes only under the name its style generates.
    pub fn check_saved(&self, app: &str, creates: bool) -> Result<(), Refusal> {
        let own_name = |name: &str| {
            if name == app {
                Ok(())
            } else {
                Err(Refusal::NotTheApplications {
                    name: name.to_owned(),
                    app: app.to_owned(),
                })
            }
        };
        match self {
            Updater::Deployment(u) => {
                own_name(&u.name)?;
                if let Some(c) = &u.container
                    && !names::is_dns1123_label(c)
                {
                    return Err(Refusal::ContainerName(c.clone()));
                }
                if let Some(image) = &u.update.image {
                    validate_image_reference(image).map_err(|why| Refusal::Image {
                        image: image.clone(),
                        why,
                    })?;
                }
                Ok(())
            }
            Updater::Autoscaler(u) => {
                own_name(&u.name)?;
                match [u.update.min_replicas, u.update.max_replicas]
                    .into_iter()
                    .flatten()
                    .find(|b| *b < 1)
                {
                    Some(b) => Err(Refusal::BoundBelowOne(b)),
                    None => Ok(()),
                }
            }
            Updater::Ingress(u) => u.check_saved(app, creates),
            Updater::IngressRemoval(u) => u.check_saved(app),
            Updater::HttpRoute(u) => u.check_saved(app, creates),
            Updater::HttpRouteRemoval(u) => u.check_saved(app),
            Updater::SecurityPolicy(u) => u.check_saved(app, creates),
            Updater::SecurityPolicyRemoval(u) => u.check_saved(app),
        }
    }
}

/// Why a saved plan's updater is refused: it is not one an ordinary run makes for the plan's
/// application. Each reads as the end of "the plan was edited: `<object>`: …".
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("it names the updater type {0:?}, which kubectl-appupdate does not save")]
    UnknownType(String),
    /// serde's words for a spec that is not its type's (a field missing, of another type, or
    /// unknown).
    #[error("{0}")]
    Unreadable(String),
    #[error("it changes the object {name:?}, not the application's own {app:?}")]
    NotTheApplications { name: String, app: String },
    #[error("{0:?} is not a valid container name")]
    ContainerName(String),
    #[error("its image {image:?} is not valid: {why}")]
    Image { image: String, why: String },
    #[error("its bound {0} is below 1")]
    BoundBelowOne(i32),
    #[error("it is planned for the application {owner:?}, not {app:?}")]
    OtherApplication { owner: String, app: String },
    #[error("{0:?} is not a valid object name")]
    ObjectName(String),
    #[error(
        "it creates the {kind} {name:?}, a name no route style gives a new one (its scope group's is {generated:?})"
    )]
    NameNotGenerated {
        kind: Kind,
        name: String,
        generated: String,
    },
    #[error("it is not the {kind} the {style} style makes for its scope group")]
    NotAsItsStyleMakes { kind: Kind, style: RouteStyle },
    #[error("the route style {0} does not make Ingresses")]
    NoIngressStyle(RouteStyle),
    #[error("its scopes are not a sorted set")]
    ScopesNotASet,
    #[error("its identifier {0:?} is not the one of its scopes")]
    Identifier(String),
    #[error("its paths are not a sorted, non-empty set")]
    PathsNotASet,
    #[error("its backend has no valid port")]
    NoPort,
    #[error("its scope group has {0} paths, more than an HTTPRoute holds")]
    TooManyPaths(usize),
    #[error("it targets the HTTPRoute {0:?}, not the one of its name")]
    TargetsAnotherRoute(String),
    #[error("it guards the public group, which has no policy")]
    PublicPolicy,
    #[error("its auth Service is not valid: {0}")]
    AuthService(String),
    /// A value that fails the check its flag or file gets, in that check's words (a host, a
    /// TLS entry, a parentRef, the endpoints file's guard).
    #[error("{0}")]
    Value(String),
}

impl From<String> for Refusal {
    fn from(why: String) -> Refusal {
        Refusal::Value(why)
    }
}

impl From<&str> for Refusal {
    fn from(why: &str) -> Refusal {
        Refusal::Value(why.to_owned())
    }
}

/// Requested changes to the application container; `None` leaves a value as it is.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContainerUpdate {
    pub image: Option<String>,
}

/// Requested changes to the autoscaler; `None` leaves a bound as it is.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AutoscalerUpdate {
    pub min_replicas: Option<i32>,
    pub max_replicas: Option<i32>,
}

/// Sets the image of one container of the Deployment `name`, and with it the annotation
/// [`CHANGE_CAUSE`].
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeploymentUpdater {
    pub name: String,
    /// `--container`; required when the pod template has several containers.
    pub container: Option<String>,
    pub update: ContainerUpdate,
    /// What the change-cause annotation written with an image change says about the run;
    /// `None`: no annotation (a plan saved by an earlier version showed none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<ChangeCause>,
}

/// The Deployment annotation `kubectl rollout history` shows for each revision.
pub const CHANGE_CAUSE: &str = "kubernetes.io/change-cause";
/// The most characters the annotation's value has; longer values lose the middle of their
/// images.
pub const CHANGE_CAUSE_MAX: usize = 1024;

/// What a run is, as the change-cause annotation names it:
/// `kubectl-appupdate: image r/web:1 → r/web:2 (revision 4)`, or for an undo
/// `kubectl-appupdate: undo of revision 4: image r/web:2 → r/web:1 (revision 5)`.
///
/// The revision is the one the run's history record is planned to get when the plan is made
/// (the next one after the records read with the Deployment). It is planned, not promised: a
/// run that records between this run's read and its write takes it, and this run's record
/// lands later, while the annotation keeps the planned number (the plan that was shown is what
/// is written; re-planning for a number would write what nobody approved). A saved plan keeps
/// the revision it was made with. `kubectl appupdate history` has the record's number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChangeCause {
    /// The planned history revision; `None`: the run records no history (`--history-max 0`)
    /// or the history could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
    /// The revision an undo reverts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undo_of: Option<u64>,
}

impl ChangeCause {
    /// The annotation's value for the image change `before` (`None`: no image) → `after`: at
    /// most [`CHANGE_CAUSE_MAX`] characters, each image shortened in its middle (`…`) when
    /// both do not fit, and anything [`text::escape`] escapes written as its escape (images are
    /// validated when given, but the live one is whatever the server holds).
    pub fn text(&self, before: Option<&str>, after: &str) -> String {
        let mut head = String::from("kubectl-appupdate: ");
        if let Some(undone) = self.undo_of {
            head.push_str(&format!("undo of revision {undone}: "));
        }
        head.push_str("image ");
        let tail = self
            .revision
            .map(|r| format!(" (revision {r})"))
            .unwrap_or_default();
        const ARROW: &str = " → ";
        let before = text::escape(before.unwrap_or("(none)"));
        let after = text::escape(after);
        let fixed = head.chars().count() + ARROW.chars().count() + tail.chars().count();
        let room = CHANGE_CAUSE_MAX.saturating_sub(fixed);
        let (b, a) = (before.chars().count(), after.chars().count());
        // The shorter image keeps all it can; the other gets the rest.
        let (b_max, a_max) = if b + a <= room {
            (b, a)
        } else if b <= room / 2 {
            (b, room - b)
        } else if a <= room - room / 2 {
            (room - a, a)
        } else {
            (room / 2, room - room / 2)
        };
        let whole = format!(
            "{head}{}{ARROW}{}{tail}",
            shortened(&before, b_max),
            shortened(&after, a_max)
        );
        shortened(&whole, CHANGE_CAUSE_MAX)
    }
}

/// `s` in at most `max` characters: its middle replaced by `…` when it is longer.
fn shortened(s: &str, max: usize) -> String {
    let count = s.chars().count();
    if count <= max {
        return s.to_owned();
    }
    let Some(kept) = max.checked_sub(1) else {
        return String::new();
    };
    let front = kept / 2;
    let back = kept - front;
    let mut out: String = s.chars().take(front).collect();
    out.push('…');
    out.extend(s.chars().skip(count - back));
    out
}

/// Sets `spec.minReplicas` / `spec.maxReplicas` of the HPA `name`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AutoscalerUpdater {
    pub name: String,
    pub update: AutoscalerUpdate,
}

fn meta_view(kind: Kind, namespace: &str, name: &str) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert("apiVersion".into(), json!(kind.api_version()));
    m.insert("kind".into(), json!(kind.to_string()));
    m.insert(
        "metadata".into(),
        json!({ "name": name, "namespace": namespace }),
    );
    m
}

fn missing(kind: Kind, name: &str, namespace: &str) -> PlanError {
    PlanError::Missing {
        reference: format!("{}/{}", kind.kubectl_name(), name),
        namespace: namespace.to_owned(),
    }
}

impl DeploymentUpdater {
    fn reference(&self) -> String {
        format!("{}/{}", Kind::Deployment.kubectl_name(), self.name)
    }

    /// Picks the container to update: `--container` if given, else the only one.
    fn container_index(&self, containers: &[Value]) -> Result<usize, PlanError> {
        let reference = self.reference();
        let names: Vec<&str> = containers
            .iter()
            .map(|c| c["name"].as_str().unwrap_or(""))
            .collect();
        let available = names.join(", ");
        match (&self.container, containers.len()) {
            (_, 0) => Err(PlanError::NoContainers { reference }),
            (Some(wanted), _) => {
                names
                    .iter()
                    .position(|n| n == wanted)
                    .ok_or(PlanError::NoSuchContainer {
                        reference,
                        container: wanted.clone(),
                        available,
                    })
            }
            (None, 1) => Ok(0),
            (None, count) => Err(PlanError::ContainerRequired {
                reference,
                count,
                available,
            }),
        }
    }
}

impl DeploymentUpdater {
    /// The change against `live` (`None`: the Deployment does not exist).
    pub fn plan(&self, namespace: &str, live: Option<&Value>) -> Result<ObjectChange, PlanError> {
        let live = live.ok_or_else(|| missing(Kind::Deployment, &self.name, namespace))?;
        let empty = Vec::new();
        let containers = live["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap_or(&empty);
        let index = self.container_index(containers)?;
        let container = &containers[index];
        let cname = container["name"].as_str().unwrap_or_default().to_owned();
        let current = container.get("image").cloned();

        let mut fields = Vec::new();
        let mut after_image = current.clone();
        // The annotation written with the image: `None` when the image stays.
        let mut cause = None;
        if let Some(image) = &self.update.image {
            let wanted = json!(image);
            if current.as_ref() != Some(&wanted) {
                fields.push(FieldChange::of(
                    Field::Image { container: &cname },
                    current.clone(),
                    Some(wanted.clone()),
                ));
                after_image = Some(wanted);
                cause = self
                    .cause
                    .map(|c| c.text(current.as_ref().and_then(Value::as_str), image));
            }
        }
        // Shown only when it is written: the live annotation before, the new one after.
        let live_cause = live["metadata"]["annotations"]
            .get(CHANGE_CAUSE)
            .filter(|_| cause.is_some())
            .cloned();

        let view = |image: Option<&Value>, annotation: Option<Value>| {
            let mut c = serde_json::Map::new();
            c.insert("name".into(), json!(cname));
            if let Some(image) = image {
                c.insert("image".into(), image.clone());
            }
            let mut m = meta_view(Kind::Deployment, namespace, &self.name);
            if let (Some(annotation), Some(Value::Object(meta))) =
                (annotation, m.get_mut("metadata"))
            {
                meta.insert("annotations".into(), json!({ CHANGE_CAUSE: annotation }));
            }
            m.insert(
                "spec".into(),
                json!({ "template": { "spec": { "containers": [Value::Object(c)] } } }),
            );
            Value::Object(m)
        };

        let write = if fields.is_empty() {
            None
        } else {
            let mut body = serde_json::Map::new();
            if let Some(cause) = &cause {
                body.insert(
                    "metadata".into(),
                    json!({ "annotations": { CHANGE_CAUSE: cause } }),
                );
            }
            body.insert(
                "spec".into(),
                json!({ "template": { "spec": { "containers": [
                    { "name": cname, "image": after_image }
                ] } } }),
            );
            Some(Write::Patch {
                base: Base::required(live, &self.reference())?,
                patch_type: PatchType::Strategic,
                body: Value::Object(body).into(),
            })
        };
        Ok(ObjectChange {
            kind: Kind::Deployment,
            namespace: namespace.to_owned(),
            name: self.name.clone(),
            live: Base::of(live),
            fields,
            before: Some(Arc::new(view(current.as_ref(), live_cause)).into()),
            after: Some(Arc::new(view(after_image.as_ref(), cause.map(Value::String))).into()),
            write,
            route: None,
        })
    }
}

/// A bound as the live HPA holds it; `None` when the field is absent. (The server defaults
/// `spec.minReplicas` to 1, so where bounds are compared an absent minimum counts as 1; the
/// views show it as absent.)
fn live_bound(live: &Value, field: &str) -> Option<i64> {
    live["spec"][field].as_i64()
}

impl AutoscalerUpdater {
    /// The change against `live` (`None`: the HPA does not exist).
    pub fn plan(&self, namespace: &str, live: Option<&Value>) -> Result<ObjectChange, PlanError> {
        let kind = Kind::HorizontalPodAutoscaler;
        let live = live.ok_or_else(|| missing(kind, &self.name, namespace))?;
        let live_min = live_bound(live, "minReplicas").unwrap_or(1);
        let live_max = live_bound(live, "maxReplicas");
        let min = self.update.min_replicas.map(i64::from).unwrap_or(live_min);
        let max = self.update.max_replicas.map(i64::from).or(live_max);
        if let Some(max) = max
            && min > max
        {
            let (min32, max32) = (
                i32::try_from(min).unwrap_or(i32::MAX),
                i32::try_from(max).unwrap_or(i32::MAX),
            );
            return Err(if self.update.min_replicas.is_some() {
                PlanError::MinAboveMax {
                    min: min32,
                    max: max32,
                    max_from_live: self.update.max_replicas.is_none(),
                }
            } else {
                PlanError::MaxBelowMin {
                    min: min32,
                    max: max32,
                    min_from_live: true,
                }
            });
        }

        let mut fields = Vec::new();
        let mut patch = serde_json::Map::new();
        let mut check =
            |typed: Field<'_>, field: &str, current: Option<i64>, wanted: Option<i32>| {
                if let Some(w) = wanted
                    && current != Some(i64::from(w))
                {
                    fields.push(FieldChange::of(
                        typed,
                        current.map(|c| json!(c)),
                        Some(json!(w)),
                    ));
                    patch.insert(field.to_owned(), json!(w));
                }
            };
        check(
            Field::MinReplicas,
            "minReplicas",
            live_bound(live, "minReplicas"),
            self.update.min_replicas,
        );
        check(
            Field::MaxReplicas,
            "maxReplicas",
            live_max,
            self.update.max_replicas,
        );

        let view = |min: Option<i64>, max: Option<i64>| {
            let mut spec = serde_json::Map::new();
            if let Some(min) = min {
                spec.insert("minReplicas".into(), json!(min));
            }
            if let Some(max) = max {
                spec.insert("maxReplicas".into(), json!(max));
            }
            let mut m = meta_view(kind, namespace, &self.name);
            m.insert("spec".into(), Value::Object(spec));
            Value::Object(m)
        };
        let before = view(live_bound(live, "minReplicas"), live_max);
        let after = view(
            self.update
                .min_replicas
                .map(i64::from)
                .or(live_bound(live, "minReplicas")),
            max,
        );
        let write = if fields.is_empty() {
            None
        } else {
            Some(Write::Patch {
                base: Base::required(live, &format!("{}/{}", kind.kubectl_name(), self.name))?,
                patch_type: PatchType::Merge,
                body: json!({ "spec": Value::Object(patch) }).into(),
            })
        };
        Ok(ObjectChange {
            kind,
            namespace: namespace.to_owned(),
            name: self.name.clone(),
            live: Base::of(live),
            fields,
            before: Some(Arc::new(before).into()),
            after: Some(Arc::new(after).into()),
            write,
            route: None,
        })
    }
}

/// Checks an image reference against the distribution reference grammar
/// (`[domain[:port]/]path[:tag][@digest]`), the way container runtimes parse it.
/// Returns what is wrong, in words.
pub fn validate_image_reference(image: &str) -> Result<(), String> {
    if image.is_empty() {
        return Err("the image reference is empty".into());
    }
    if image.len() > 4096 {
        return Err("the image reference is too long".into());
    }
    if let Some(c) = image.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "the image reference contains {}",
            if c.is_whitespace() {
                "whitespace"
            } else {
                "a control character"
            }
        ));
    }
    let (rest, digest) = match image.split_once('@') {
        Some((r, d)) => (r, Some(d)),
        None => (image, None),
    };
    if let Some(d) = digest {
        validate_digest(d)?;
    }
    // A tag is after the last ':' that follows the last '/'.
    let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match rest[last_slash..].rfind(':') {
        Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
        None => (rest, None),
    };
    if let Some(tag) = tag {
        validate_tag(tag)?;
    }
    validate_name(name)
}

fn validate_digest(d: &str) -> Result<(), String> {
    let (alg, hex) = d
        .split_once(':')
        .ok_or_else(|| format!("digest {d:?} must look like sha256:<hex>", d = Untrusted(d)))?;
    let alg_ok = !alg.is_empty()
        && alg.split(['+', '.', '_', '-']).all(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        });
    let hex_ok = hex.len() >= 32 && hex.chars().all(|c| c.is_ascii_hexdigit());
    if alg_ok && hex_ok && (alg != "sha256" || hex.len() == 64) {
        Ok(())
    } else {
        Err(format!(
            "digest {d:?} is not valid (expected sha256:<64 hex digits>)",
            d = Untrusted(d)
        ))
    }
}

fn validate_tag(tag: &str) -> Result<(), String> {
    let mut chars = tag.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if first_ok && rest_ok && tag.len() <= 128 {
        Ok(())
    } else {
        Err(format!(
            "tag {tag:?} is not valid: up to 128 letters, digits, '_', '.' or '-', not starting with '.' or '-'",
            tag = Untrusted(tag)
        ))
    }
}

fn validate_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the repository name is empty".into());
    }
    if name.len() > 255 {
        return Err("the repository name is longer than 255 characters".into());
    }
    let mut components: Vec<&str> = name.split('/').collect();
    // The first component is a registry domain when it has a '.' or ':' or is "localhost".
    let first = components[0];
    if components.len() > 1 && (first.contains('.') || first.contains(':') || first == "localhost")
    {
        validate_domain(first)?;
        components.remove(0);
    }
    for comp in components {
        validate_path_component(comp)?;
    }
    Ok(())
}

fn validate_domain(domain: &str) -> Result<(), String> {
    let (host, port) = match domain.rsplit_once(':') {
        Some((h, p)) if !h.starts_with('[') || h.ends_with(']') => (h, Some(p)),
        _ => (domain, None),
    };
    if let Some(port) = port
        && (port.is_empty() || !port.chars().all(|c| c.is_ascii_digit()))
    {
        return Err(format!(
            "registry port {port:?} is not a number",
            port = Untrusted(port)
        ));
    }
    let host_ok = if host.starts_with('[') && host.ends_with(']') {
        host[1..host.len() - 1]
            .chars()
            .all(|c| c.is_ascii_hexdigit() || c == ':')
    } else {
        !host.is_empty()
            && host.split('.').all(|label| {
                !label.is_empty()
                    && !label.starts_with('-')
                    && !label.ends_with('-')
                    && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            })
    };
    if host_ok {
        Ok(())
    } else {
        Err(format!(
            "registry {domain:?} is not a valid host name",
            domain = Untrusted(domain)
        ))
    }
}

fn validate_path_component(comp: &str) -> Result<(), String> {
    if comp.is_empty() {
        return Err("the repository name has an empty path component".into());
    }
    if comp.chars().any(|c| c.is_ascii_uppercase()) {
        return Err(format!(
            "repository name component {comp:?} must be lowercase",
            comp = Untrusted(comp)
        ));
    }
    // alpha-numeric (separator alpha-numeric)*, separator = '.' | '_' | '__' | '-'+
    let bytes = comp.as_bytes();
    let is_alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let mut i = 0;
    let mut expect_alnum = true;
    while i < bytes.len() {
        if is_alnum(bytes[i]) {
            i += 1;
            expect_alnum = false;
            continue;
        }
        if expect_alnum {
            break;
        }
        let start = i;
        match bytes[i] {
            b'.' => i += 1,
            b'_' => {
                i += 1;
                if i < bytes.len() && bytes[i] == b'_' {
                    i += 1;
                }
            }
            b'-' => {
                while i < bytes.len() && bytes[i] == b'-' {
                    i += 1;
                }
            }
            _ => {
                return Err(format!(
                    "repository name component {comp:?} may only contain lowercase letters, digits and separators (. _ __ -)",
                    comp = Untrusted(comp)
                ));
            }
        }
        if i == start {
            break;
        }
        expect_alnum = true;
    }
    if expect_alnum || i != bytes.len() {
        return Err(format!(
            "repository name component {comp:?} must start and end with a lowercase letter or digit",
            comp = Untrusted(comp)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use appupdate_model::plan::Action;
    use pretty_assertions::assert_eq;

    fn deployment(containers: Value) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "7", "uid": "u-1"},
            "spec": {"replicas": 3, "template": {"spec": {"containers": containers}}}
        })
    }

    fn hpa(min: i64, max: i64) -> Value {
        json!({
            "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "8", "uid": "u-2"},
            "spec": {"minReplicas": min, "maxReplicas": max}
        })
    }

    fn image_updater(image: &str, container: Option<&str>) -> DeploymentUpdater {
        DeploymentUpdater {
            name: "web".into(),
            container: container.map(str::to_owned),
            update: ContainerUpdate {
                image: Some(image.into()),
            },
            cause: Some(ChangeCause {
                revision: Some(4),
                undo_of: None,
            }),
        }
    }

    fn annotation(view: Option<&appupdate_model::plan::View>) -> Option<Value> {
        view.and_then(|v| v.get()["metadata"].get("annotations").cloned())
    }

    #[test]
    fn image_change_patches_only_the_container_image_by_name() {
        let live = deployment(
            json!([{"name": "web", "image": "r/web:1", "ports": [{"containerPort": 80}]}]),
        );
        let c = image_updater("r/web:2", None)
            .plan("shop", Some(&live))
            .unwrap();
        assert_eq!(c.action(), Action::Update);
        assert_eq!(
            c.fields,
            vec![FieldChange::new(
                "spec.template.spec.containers[name=web].image",
                Some(json!("r/web:1")),
                Some(json!("r/web:2"))
            )]
        );
        assert_eq!(
            c.write,
            Some(Write::Patch {
                base: Base::new("7", "u-1").unwrap(),
                patch_type: PatchType::Strategic,
                body: json!({
                    "metadata": {"annotations": {
                        "kubernetes.io/change-cause": "kubectl-appupdate: image r/web:1 → r/web:2 (revision 4)"
                    }},
                    "spec": {"template": {"spec": {"containers": [{"name": "web", "image": "r/web:2"}]}}}
                }).into()
            })
        );
        assert_eq!(c.live.unwrap().resource_version(), "7");
    }

    #[test]
    fn an_image_change_sets_the_change_cause_shown_in_the_diff_and_not_guarded() {
        let mut live = deployment(json!([{"name": "web", "image": "r/web:1"}]));
        let c = image_updater("r/web:2", None)
            .plan("shop", Some(&live))
            .unwrap();
        // The guard looks at the image only.
        assert_eq!(c.fields.len(), 1);
        assert_eq!(annotation(c.before.as_ref()), None);
        assert_eq!(
            annotation(c.after.as_ref()),
            Some(json!({
                "kubernetes.io/change-cause": "kubectl-appupdate: image r/web:1 → r/web:2 (revision 4)"
            }))
        );
        // The live annotation is what the before-view shows; others are not the tool's.
        live["metadata"]["annotations"] = json!({
            "kubernetes.io/change-cause": "kubectl set image deployment/web web=r/web:1",
            "team": "shop"
        });
        let c = image_updater("r/web:2", None)
            .plan("shop", Some(&live))
            .unwrap();
        assert_eq!(
            annotation(c.before.as_ref()),
            Some(json!({
                "kubernetes.io/change-cause": "kubectl set image deployment/web web=r/web:1"
            }))
        );
        let Some(Write::Patch { body, .. }) = &c.write else {
            panic!("{:?}", c.write)
        };
        assert_eq!(
            body["metadata"],
            json!({"annotations": {
                "kubernetes.io/change-cause": "kubectl-appupdate: image r/web:1 → r/web:2 (revision 4)"
            }})
        );
        // Re-planned against the object with someone's annotation changed in between: the
        // same fields, so the guard lets it through, and the same annotation is written.
        let mut moved = live.clone();
        moved["metadata"]["annotations"]["kubernetes.io/change-cause"] = json!("by hand");
        moved["metadata"]["resourceVersion"] = json!("8");
        let fresh = image_updater("r/web:2", None)
            .plan("shop", Some(&moved))
            .unwrap();
        assert!(matches!(
            appupdate_model::plan::recheck(&c, fresh.clone()),
            appupdate_model::plan::Recheck::Proceed(_)
        ));
        assert_eq!(
            annotation(fresh.after.as_ref()),
            annotation(c.after.as_ref())
        );
    }

    #[test]
    fn no_change_cause_without_an_image_change_or_without_a_cause() {
        let mut live = deployment(json!([{"name": "web", "image": "r/web:1"}]));
        live["metadata"]["annotations"] = json!({"kubernetes.io/change-cause": "earlier"});
        let c = image_updater("r/web:1", None)
            .plan("shop", Some(&live))
            .unwrap();
        assert!(c.write.is_none());
        assert_eq!(annotation(c.before.as_ref()), None);
        assert_eq!(annotation(c.after.as_ref()), None);
        // A plan saved by an earlier version: no annotation, as its diff showed.
        let mut u = image_updater("r/web:2", None);
        u.cause = None;
        let c = u.plan("shop", Some(&live)).unwrap();
        let Some(Write::Patch { body, .. }) = &c.write else {
            panic!("{:?}", c.write)
        };
        assert_eq!(body.get("metadata"), None);
        assert_eq!(annotation(c.after.as_ref()), None);
        // Saved and loaded, the cause comes back; an earlier version's spec loads without.
        let saved = serde_json::to_value(image_updater("r/web:2", None)).unwrap();
        assert_eq!(saved["cause"], json!({"revision": 4}));
        let mut old = saved.clone();
        old.as_object_mut().unwrap().remove("cause");
        let loaded: DeploymentUpdater = serde_json::from_value(old).unwrap();
        assert_eq!(loaded.cause, None);
    }

    #[test]
    fn the_change_cause_names_an_undo_and_leaves_out_a_revision_not_recorded() {
        let undo = ChangeCause {
            revision: Some(5),
            undo_of: Some(4),
        };
        assert_eq!(
            undo.text(Some("r/web:2"), "r/web:1"),
            "kubectl-appupdate: undo of revision 4: image r/web:2 → r/web:1 (revision 5)"
        );
        let unrecorded = ChangeCause::default();
        assert_eq!(
            unrecorded.text(Some("r/web:1"), "r/web:2"),
            "kubectl-appupdate: image r/web:1 → r/web:2"
        );
        assert_eq!(
            unrecorded.text(None, "r/web:2"),
            "kubectl-appupdate: image (none) → r/web:2"
        );
    }

    #[test]
    fn a_long_change_cause_loses_the_middle_of_its_images_and_controls_are_escaped() {
        let cause = ChangeCause {
            revision: Some(12),
            undo_of: None,
        };
        let long_before = format!("r/{}:1", "a".repeat(4000));
        let long_after = format!("r/{}:2", "b".repeat(4000));
        let text = cause.text(Some(&long_before), &long_after);
        assert_eq!(text.chars().count(), CHANGE_CAUSE_MAX);
        assert!(text.starts_with("kubectl-appupdate: image r/aaa"), "{text}");
        assert!(text.ends_with("bbb:2 (revision 12)"), "{text}");
        assert!(text.contains("a:1 → r/b"), "{text}");
        assert_eq!(text.matches('…').count(), 2, "{text}");
        // A short image stays whole; the long one takes the rest.
        let text = cause.text(Some("r/web:1"), &long_after);
        assert_eq!(text.chars().count(), CHANGE_CAUSE_MAX);
        assert!(text.contains("image r/web:1 → r/bbb"), "{text}");
        assert_eq!(text.matches('…').count(), 1, "{text}");
        // Short enough: as it is.
        assert!(cause.text(Some("r/web:1"), "r/web:2").len() < 100);
        // The live image is whatever the server holds.
        let text = cause.text(Some("r/web:1\u{1b}]0;x\u{7}\n\u{202e}"), "r/web:2");
        assert_eq!(
            text,
            "kubectl-appupdate: image r/web:1\\e]0;x\\x07\\n\\u{202e} → r/web:2 (revision 12)"
        );
        assert!(!text.chars().any(appupdate_model::text::is_escaped));
    }

    #[test]
    fn a_live_object_without_a_resource_version_is_never_written() {
        let mut live = deployment(json!([{"name": "web", "image": "r/web:1"}]));
        live["metadata"]["resourceVersion"] = json!("");
        let err = image_updater("r/web:2", None)
            .plan("shop", Some(&live))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "deployment.apps/web came without metadata.resourceVersion or metadata.uid, so it cannot be written conditionally; it is left alone"
        );
        // Nothing to write, nothing to be conditional on: planning it is fine.
        let c = image_updater("r/web:1", None)
            .plan("shop", Some(&live))
            .unwrap();
        assert_eq!(c.action(), Action::Unchanged);
    }

    #[test]
    fn same_image_is_unchanged() {
        let live = deployment(json!([{"name": "web", "image": "r/web:1"}]));
        let c = image_updater("r/web:1", None)
            .plan("shop", Some(&live))
            .unwrap();
        assert_eq!(c.action(), Action::Unchanged);
        assert!(c.write.is_none() && c.fields.is_empty());
    }

    #[test]
    fn several_containers_need_a_choice() {
        let live =
            deployment(json!([{"name": "web", "image": "a"}, {"name": "proxy", "image": "b"}]));
        let err = image_updater("r/web:2", None)
            .plan("shop", Some(&live))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "deployment.apps/web has 2 containers (web, proxy); choose one with --container"
        );
        let c = image_updater("r/proxy:2", Some("proxy"))
            .plan("shop", Some(&live))
            .unwrap();
        assert_eq!(
            c.fields[0].path,
            "spec.template.spec.containers[name=proxy].image"
        );
        let err = image_updater("x", Some("nope"))
            .plan("shop", Some(&live))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "deployment.apps/web has no container named \"nope\"; its containers are web, proxy"
        );
    }

    #[test]
    fn bounds_change_sends_only_the_requested_bound() {
        let u = AutoscalerUpdater {
            name: "web".into(),
            update: AutoscalerUpdate {
                min_replicas: None,
                max_replicas: Some(8),
            },
        };
        let c = u.plan("shop", Some(&hpa(2, 5))).unwrap();
        assert_eq!(
            c.write,
            Some(Write::Patch {
                base: Base::new("8", "u-2").unwrap(),
                patch_type: PatchType::Merge,
                body: json!({"spec": {"maxReplicas": 8}}).into()
            })
        );
    }

    #[test]
    fn min_above_live_max_is_refused_with_the_live_value() {
        let u = AutoscalerUpdater {
            name: "web".into(),
            update: AutoscalerUpdate {
                min_replicas: Some(6),
                max_replicas: None,
            },
        };
        let err = u.plan("shop", Some(&hpa(2, 5))).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--min 6 is greater than the maximum 5 currently set on the HorizontalPodAutoscaler; raise --max or lower --min"
        );
        let u = AutoscalerUpdater {
            name: "web".into(),
            update: AutoscalerUpdate {
                min_replicas: None,
                max_replicas: Some(1),
            },
        };
        let err = u.plan("shop", Some(&hpa(2, 5))).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--max 1 is less than the minimum 2 currently set on the HorizontalPodAutoscaler; lower --min or raise --max"
        );
    }

    #[test]
    fn image_references() {
        for ok in [
            "nginx",
            "nginx:1.27",
            "registry.example.com/team/web:2.1",
            "localhost:5000/web",
            "localhost/web:dev",
            "ghcr.io/o/r@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "a/b__c/d--e.f:v1.0-rc_1",
            "[::1]:5000/web:1",
        ] {
            assert_eq!(validate_image_reference(ok), Ok(()), "{ok}");
        }
        for (bad, why) in [
            ("", "the image reference is empty"),
            (
                "Web:1",
                "repository name component \"Web\" must be lowercase",
            ),
            ("web:1 2", "the image reference contains whitespace"),
            (
                "web:-1",
                "tag \"-1\" is not valid: up to 128 letters, digits, '_', '.' or '-', not starting with '.' or '-'",
            ),
            (
                "web@sha256:abc",
                "digest \"sha256:abc\" is not valid (expected sha256:<64 hex digits>)",
            ),
            ("web/", "the repository name has an empty path component"),
            (
                "-web",
                "repository name component \"-web\" must start and end with a lowercase letter or digit",
            ),
            (
                "we$b",
                "repository name component \"we$b\" may only contain lowercase letters, digits and separators (. _ __ -)",
            ),
        ] {
            assert_eq!(validate_image_reference(bad), Err(why.to_owned()), "{bad}");
        }
    }
}
