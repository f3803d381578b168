//! Undo (`--undo`, `--to-revision N`): the inverse of a history record, as an ordinary plan.
//!
//! Pure. The image and the bounds go back through the same updaters that changed them
//! ([`DeploymentUpdater`], [`AutoscalerUpdater`]) with the record's `before` values; route
//! objects — of any kind, without knowing how they were built — through three generic
//! updaters over their owned parts ([`crate::owned_parts`]):
//!
//! * created by the record → [`RouteRemove`] deletes it;
//! * deleted by the record → [`RouteRecreate`] creates it again from the recorded object;
//! * updated by the record → [`RouteRestore`] sets the parts that changed back.
//!
//! A field that is no longer at the record's `after` value was changed by someone since: it
//! is listed in [`UndoPlan::drift`], and the caller refuses the plan unless the user named
//! exactly those fields with `--force-undo` (the drift keys: `image`, `min`, `max`, and a route
//! object's reference, e.g. `ingress.networking.k8s.io/web-public`). A field already back at
//! its `before` value is simply left out. Every write is conditional and guarded like any
//! other, and the undo is itself recorded, so undoing an undo redoes.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::history::{Record, RouteChange};
use crate::owned_parts::{self, Path};
use crate::plan::{
    Action, Base, FieldChange, Kind, ObjectChange, PatchType, Plan, PlanError, Planned,
    SavedUpdater, Updater, View, Write,
};
use crate::updaters::{
    AutoscalerUpdate, AutoscalerUpdater, ChangeCause, ContainerUpdate, DeploymentUpdater,
};

const SAVED_REMOVE: &str = "route-remove";
const SAVED_RECREATE: &str = "route-recreate";
const SAVED_RESTORE: &str = "route-restore";

/// The undo updaters a saved plan names (`None`: not one of them).
pub fn load_updater(kind: &str, spec: &Value) -> Option<Result<Arc<dyn Updater>, String>> {
    fn de<T: serde::de::DeserializeOwned + Updater + 'static>(
        spec: &Value,
    ) -> Result<Arc<dyn Updater>, String> {
        serde_json::from_value::<T>(spec.clone())
            .map(|u| Arc::new(u) as Arc<dyn Updater>)
            .map_err(|e| e.to_string())
    }
    Some(match kind {
        SAVED_REMOVE => de::<RouteRemove>(spec),
        SAVED_RECREATE => de::<RouteRecreate>(spec),
        SAVED_RESTORE => de::<RouteRestore>(spec),
        _ => return None,
    })
}

/// A field changed since the record: what it is now and what the record left it at.
#[derive(Clone, Debug, PartialEq)]
pub struct Drift {
    /// The name `--force-undo` takes: `image`, `min`, `max`, or the object's reference.
    pub key: String,
    pub reference: String,
    pub path: String,
    pub now: Option<Value>,
    pub recorded: Option<Value>,
}

/// The undo of one record.
#[derive(Clone, Debug)]
pub struct UndoPlan {
    pub plan: Plan,
    pub drift: Vec<Drift>,
}

/// The live objects a record touches.
#[derive(Clone, Debug, Default)]
pub struct UndoLive {
    pub deployment: Option<Value>,
    pub autoscaler: Option<Value>,
    /// By kind and name; `None`: it does not exist.
    pub routes: BTreeMap<(Kind, String), Option<Value>>,
}

/// Why a record cannot be undone.
fn cannot(revision: u64, why: String) -> PlanError {
    PlanError::Unexpected {
        reference: format!("revision {revision}"),
        message: why,
    }
}

/// The kind of a recorded route object, as this version knows it.
pub fn route_kind(r: &RouteChange) -> Option<Kind> {
    let kind: Kind = serde_json::from_value(Value::String(r.kind.clone())).ok()?;
    (kind.api_version() == r.api_version).then_some(kind)
}

/// The objects the undo of a record reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UndoNeeds {
    pub deployment: bool,
    pub autoscaler: bool,
    /// Route objects by kind and name.
    pub routes: Vec<(Kind, String)>,
}

/// The objects the undo of `record` reads. Errors for a record this version cannot undo.
pub fn needs(record: &Record) -> Result<UndoNeeds, PlanError> {
    if record.routes_truncated {
        return Err(cannot(
            record.revision,
            "it was recorded without the route objects' contents (it was too large), so it cannot be undone".into(),
        ));
    }
    let mut routes = Vec::new();
    for r in &record.routes {
        let kind = route_kind(r).ok_or_else(|| {
            cannot(
                record.revision,
                format!(
                    "it changed a {} {} ({}), which this version of kubectl-appupdate cannot restore",
                    r.api_version, r.kind, r.name
                ),
            )
        })?;
        routes.push((kind, r.name.clone()));
    }
    Ok(UndoNeeds {
        deployment: record.image.is_some(),
        autoscaler: record.bounds.is_some(),
        routes,
    })
}

/// Plans the inverse of `record` against `live`. `revision` is the history revision the
/// undo's own record is planned to get (`None`: it records none), named with the image in the
/// Deployment's change-cause annotation.
pub fn plan_undo(
    record: &Record,
    app: &str,
    namespace: &str,
    context: &str,
    live: &UndoLive,
    revision: Option<u64>,
) -> Result<UndoPlan, PlanError> {
    let mut objects = Vec::new();
    let mut drift = Vec::new();
    if let Some(image) = &record.image {
        let before = image.before.clone().ok_or_else(|| {
            cannot(
                record.revision,
                "it recorded no image before the change".into(),
            )
        })?;
        let u = DeploymentUpdater {
            name: app.to_owned(),
            container: Some(image.container.clone()),
            update: ContainerUpdate {
                image: Some(before),
            },
            cause: Some(ChangeCause {
                revision,
                undo_of: Some(record.revision),
            }),
        };
        let change = u.plan(namespace, live.deployment.as_ref())?;
        for f in &change.fields {
            let recorded = image.after.clone().map(Value::String);
            if f.before().as_deref() != recorded.as_ref() {
                drift.push(Drift {
                    key: "image".into(),
                    reference: change.reference(),
                    path: f.path.clone(),
                    now: f.before().map(Cow::into_owned),
                    recorded,
                });
            }
        }
        objects.push(Planned {
            updater: Arc::new(u),
            change: Arc::new(change),
        });
    }
    if let Some(bounds) = &record.bounds {
        let u = AutoscalerUpdater {
            name: app.to_owned(),
            update: AutoscalerUpdate {
                min_replicas: bounds.min.as_ref().and_then(|c| c.before).and_then(to_i32),
                max_replicas: bounds.max.as_ref().and_then(|c| c.before).and_then(to_i32),
            },
        };
        let change = u.plan(namespace, live.autoscaler.as_ref())?;
        for f in &change.fields {
            let (key, recorded) = match f.path.as_str() {
                "spec.minReplicas" => ("min", bounds.min.as_ref().and_then(|c| c.after)),
                _ => ("max", bounds.max.as_ref().and_then(|c| c.after)),
            };
            let recorded = recorded.map(Value::from);
            if f.before().as_deref() != recorded.as_ref() {
                drift.push(Drift {
                    key: key.into(),
                    reference: change.reference(),
                    path: f.path.clone(),
                    now: f.before().map(Cow::into_owned),
                    recorded,
                });
            }
        }
        objects.push(Planned {
            updater: Arc::new(u),
            change: Arc::new(change),
        });
    }
    for r in &record.routes {
        let Some(kind) = route_kind(r) else {
            return Err(needs(record)
                .err()
                .unwrap_or_else(|| cannot(record.revision, "unknown kind".into())));
        };
        let current = live.routes.get(&(kind, r.name.clone())).cloned().flatten();
        let (updater, expected): (Arc<dyn Updater>, Option<Value>) = match r.action {
            Action::Create => (
                Arc::new(RouteRemove {
                    kind,
                    name: r.name.clone(),
                    expected: r.after.clone().unwrap_or_else(|| json!({})),
                }),
                r.after.clone(),
            ),
            Action::Delete => (
                Arc::new(RouteRecreate {
                    kind,
                    name: r.name.clone(),
                    body: r.before.clone().unwrap_or_else(|| json!({})),
                }),
                None,
            ),
            Action::Update => (
                Arc::new(RouteRestore {
                    kind,
                    name: r.name.clone(),
                    before: r.before.clone().unwrap_or_else(|| json!({})),
                }),
                r.after.clone(),
            ),
            Action::Unchanged => continue,
        };
        let change = updater.plan(namespace, current.as_ref())?;
        if change.is_change() {
            let moved = match r.action {
                // It was created: it must still be as created.
                Action::Create => !owned_parts::contains(current.as_ref(), expected.as_ref()),
                // It was deleted: it must still be absent.
                Action::Delete => current.is_some(),
                // It was updated: every part to restore must still hold its recorded value.
                _ => change.fields.iter().any(|f| {
                    let path = parse_display_path(&f.path, &r.before);
                    let recorded = path
                        .as_ref()
                        .and_then(|p| expected.as_ref().and_then(|e| owned_parts::get(e, p)));
                    !owned_parts::contains(f.before().as_deref(), recorded)
                }),
            };
            if moved {
                drift.push(Drift {
                    key: change.reference(),
                    reference: change.reference(),
                    path: ".".into(),
                    now: change.before.as_ref().map(|v| v.get().into_owned()),
                    recorded: expected.clone().or_else(|| Some(json!(null))),
                });
            }
        }
        objects.push(Planned {
            updater,
            change: change.into(),
        });
    }
    Ok(UndoPlan {
        plan: Plan::new(
            app.to_owned(),
            namespace.to_owned(),
            context.to_owned(),
            objects,
        ),
        drift,
    })
}

fn to_i32(v: i64) -> Option<i32> {
    i32::try_from(v).ok()
}

/// The leaf path of `part` that displays as `shown`.
fn parse_display_path(shown: &str, part: &Option<Value>) -> Option<Path> {
    let part = part.as_ref()?;
    owned_parts::leaves(part)
        .into_iter()
        .map(|(p, _)| p)
        .find(|p| owned_parts::display(p) == shown)
}

/// Why an undo with drift is refused (`None`: it may go ahead): the drifted fields must be
/// exactly the ones named with `--force-undo`.
pub fn refusal(revision: u64, drift: &[Drift], forced: &BTreeSet<String>) -> Option<String> {
    let drifted: BTreeSet<String> = drift.iter().map(|d| d.key.clone()).collect();
    if drifted == *forced {
        return None;
    }
    let list = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(",");
    if drifted.is_empty() {
        return Some(format!(
            "--force-undo {} names fields that nobody changed since revision {revision}; drop --force-undo",
            list(forced)
        ));
    }
    let what: Vec<String> = drift
        .iter()
        .map(|d| {
            if d.path == "." {
                format!("{} changed since revision {revision}", d.reference)
            } else {
                format!(
                    "{} {} is now {} (revision {revision} left it at {})",
                    d.reference,
                    d.path,
                    short(&d.now),
                    short(&d.recorded)
                )
            }
        })
        .collect();
    Some(format!(
        "not undone: {}; to overwrite exactly these, add --force-undo {}",
        what.join("; "),
        list(&drifted)
    ))
}

fn short(v: &Option<Value>) -> String {
    match v {
        None | Some(Value::Null) => "absent".into(),
        Some(Value::String(s)) => format!("{s:?}"),
        Some(Value::Object(_) | Value::Array(_)) => "different".into(),
        Some(other) => other.to_string(),
    }
}

// ---- the generic route updaters ----

fn reference(kind: Kind, name: &str) -> String {
    format!("{}/{}", kind.kubectl_name(), name)
}

/// The view of an object the diff shows: `apiVersion`, `kind`, name and namespace, and `part`.
fn view(kind: Kind, namespace: &str, name: &str, part: &Value) -> Value {
    let mut v = match part {
        Value::Object(m) => Value::Object(m.clone()),
        _ => Value::Object(Map::new()),
    };
    v["apiVersion"] = json!(kind.api_version());
    v["kind"] = json!(kind.to_string());
    if !v["metadata"].is_object() {
        v["metadata"] = json!({});
    }
    v["metadata"]["name"] = json!(name);
    v["metadata"]["namespace"] = json!(namespace);
    // apiVersion and kind first, as kubectl shows objects.
    let Value::Object(mut m) = v else {
        return Value::Null;
    };
    let mut ordered = Map::new();
    for k in ["apiVersion", "kind", "metadata"] {
        if let Some(x) = m.remove(k) {
            ordered.insert(k.into(), x);
        }
    }
    ordered.extend(m);
    Value::Object(ordered)
}

fn unchanged(kind: Kind, namespace: &str, name: &str, live: Option<&Value>) -> ObjectChange {
    ObjectChange {
        kind,
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        live: live.and_then(Base::of),
        fields: Vec::new(),
        before: None,
        after: None,
        write: None,
        route: None,
    }
}

/// Deletes a route object a record created.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteRemove {
    pub kind: Kind,
    pub name: String,
    /// The object as created (its owned parts): what the diff shows of it.
    pub expected: Value,
}

impl Updater for RouteRemove {
    fn name(&self) -> &str {
        &self.name
    }

    fn save(&self) -> Option<SavedUpdater> {
        SavedUpdater::new(SAVED_REMOVE, self)
    }

    fn plan(&self, namespace: &str, live: Option<&Value>) -> Result<ObjectChange, PlanError> {
        let Some(live) = live else {
            return Ok(unchanged(self.kind, namespace, &self.name, None));
        };
        let shown = View::from(view(
            self.kind,
            namespace,
            &self.name,
            &owned_parts::project(live, &self.expected),
        ));
        Ok(ObjectChange {
            kind: self.kind,
            namespace: namespace.to_owned(),
            name: self.name.clone(),
            live: Base::of(live),
            fields: vec![FieldChange::whole(Some(&shown), None)],
            before: Some(shown),
            after: None,
            write: Some(Write::Delete {
                base: Base::required(live, &reference(self.kind, &self.name))?,
            }),
            route: None,
        })
    }
}

/// Creates again a route object a record deleted (or, if one of that name exists, sets the
/// recorded parts on it).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteRecreate {
    pub kind: Kind,
    pub name: String,
    /// The object as it was deleted: a complete object to create.
    pub body: Value,
}

/// The parts of a recorded object that are set on a live one: everything but the identity.
fn settable(body: &Value) -> Value {
    let mut part = body.clone();
    if let Value::Object(m) = &mut part {
        m.remove("apiVersion");
        m.remove("kind");
        if let Some(Value::Object(meta)) = m.get_mut("metadata") {
            meta.remove("name");
            meta.remove("namespace");
        }
    }
    part
}

impl Updater for RouteRecreate {
    fn name(&self) -> &str {
        &self.name
    }

    fn save(&self) -> Option<SavedUpdater> {
        SavedUpdater::new(SAVED_RECREATE, self)
    }

    fn plan(&self, namespace: &str, live: Option<&Value>) -> Result<ObjectChange, PlanError> {
        let part = settable(&self.body);
        match live {
            None => {
                let body = Arc::new(view(self.kind, namespace, &self.name, &part));
                let after = View::from(Arc::clone(&body));
                Ok(ObjectChange {
                    kind: self.kind,
                    namespace: namespace.to_owned(),
                    name: self.name.clone(),
                    live: None,
                    fields: vec![FieldChange::whole(None, Some(&after))],
                    before: None,
                    after: Some(after),
                    write: Some(Write::Create { body }),
                    route: None,
                })
            }
            Some(live) => restore(self.kind, namespace, &self.name, live, &part),
        }
    }
}

/// Sets back the parts of a route object a record updated.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteRestore {
    pub kind: Kind,
    pub name: String,
    /// The parts that changed, as they were before (`null`: absent).
    pub before: Value,
}

impl Updater for RouteRestore {
    fn name(&self) -> &str {
        &self.name
    }

    fn save(&self) -> Option<SavedUpdater> {
        SavedUpdater::new(SAVED_RESTORE, self)
    }

    fn plan(&self, namespace: &str, live: Option<&Value>) -> Result<ObjectChange, PlanError> {
        let Some(live) = live else {
            return Err(PlanError::Unexpected {
                reference: reference(self.kind, &self.name),
                message: "was deleted since the change being undone; there is nothing to restore"
                    .into(),
            });
        };
        restore(self.kind, namespace, &self.name, live, &self.before)
    }
}

/// The change that sets every leaf of `part` on `live` (a JSON merge patch, conditional on
/// `live`'s resourceVersion); leaves `live` already holds drop out.
fn restore(
    kind: Kind,
    namespace: &str,
    name: &str,
    live: &Value,
    part: &Value,
) -> Result<ObjectChange, PlanError> {
    let mut fields = Vec::new();
    let mut patch = json!({});
    let before_view = owned_parts::project(live, part);
    let mut after_view = before_view.clone();
    for (path, wanted) in owned_parts::leaves(part) {
        let current = owned_parts::get(live, &path);
        let wanted = (!wanted.is_null()).then_some(wanted);
        if owned_parts::contains(current, wanted) {
            continue;
        }
        fields.push(FieldChange::new(
            owned_parts::display(&path),
            current.cloned(),
            wanted.cloned(),
        ));
        let value = wanted.cloned().unwrap_or(Value::Null);
        owned_parts::set(&mut patch, &path, value.clone());
        if value.is_null() {
            // A merge patch removes a key with null; the view simply lacks it.
            owned_parts::set(&mut after_view, &path, Value::Null);
        } else {
            owned_parts::set(&mut after_view, &path, value);
        }
        // `set` drops a null leaf; the patch must carry it.
        if wanted.is_none() {
            set_null(&mut patch, &path);
        }
    }
    let write = if fields.is_empty() {
        None
    } else {
        Some(Write::Patch {
            base: Base::required(live, &reference(kind, name))?,
            patch_type: PatchType::Merge,
            body: patch.into(),
        })
    };
    Ok(ObjectChange {
        kind,
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        live: Base::of(live),
        fields,
        before: Some(Arc::new(view(kind, namespace, name, &before_view)).into()),
        after: Some(Arc::new(view(kind, namespace, name, &after_view)).into()),
        write,
        route: None,
    })
}

/// Puts an explicit `null` at `path` (a merge patch's "remove").
fn set_null(obj: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = obj;
    for k in parents {
        if !cur.get(k).is_some_and(Value::is_object) {
            cur[k.as_str()] = json!({});
        }
        cur = &mut cur[k.as_str()];
    }
    cur[last.as_str()] = Value::Null;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Source;
    use crate::history::{BoundsChange, Change, ImageChange, Status};
    use crate::plan::recheck;

    fn record() -> Record {
        Record {
            revision: 4,
            time: "2026-12-01T07:00:00Z".into(),
            user: "admin".into(),
            tool: "kubectl-appupdate 0.1.0".into(),
            status: Status::Applied,
            source: Source::Update,
            saved_plan: false,
            image: Some(ImageChange {
                container: "app".into(),
                before: Some("r/web:1".into()),
                after: Some("r/web:2".into()),
            }),
            bounds: Some(BoundsChange {
                min: None,
                max: Some(Change {
                    before: Some(5),
                    after: Some(9),
                }),
            }),
            routes: vec![
                RouteChange {
                    api_version: "networking.k8s.io/v1".into(),
                    kind: "Ingress".into(),
                    name: "web-new".into(),
                    action: Action::Create,
                    before: None,
                    after: Some(ingress("web-new", "/web/new")),
                },
                RouteChange {
                    api_version: "networking.k8s.io/v1".into(),
                    kind: "Ingress".into(),
                    name: "web-old".into(),
                    action: Action::Delete,
                    before: Some(ingress("web-old", "/web/old")),
                    after: None,
                },
                RouteChange {
                    api_version: "networking.k8s.io/v1".into(),
                    kind: "Ingress".into(),
                    name: "web-public".into(),
                    action: Action::Update,
                    before: Some(
                        json!({"spec": {"rules": [{"http": {"paths": [{"path": "/web/a"}]}}]},
                                        "metadata": {"annotations": {"x": null}}}),
                    ),
                    after: Some(
                        json!({"spec": {"rules": [{"http": {"paths": [{"path": "/web/b"}]}}]},
                                       "metadata": {"annotations": {"x": "1"}}}),
                    ),
                },
            ],
            routes_truncated: false,
        }
    }

    fn ingress(name: &str, path: &str) -> Value {
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
               "metadata": {"name": name, "namespace": "shop", "labels": {"app": "web", "identifier": name}},
               "spec": {"rules": [{"http": {"paths": [{"path": path}]}}]}})
    }

    fn live_object(mut v: Value, rv: &str) -> Value {
        v["metadata"]["resourceVersion"] = json!(rv);
        v["metadata"]["uid"] = json!(format!("uid-{rv}"));
        v
    }

    /// The state right after the record: image 2, max 9, web-new there, web-old gone,
    /// web-public at its after values.
    fn live_after() -> UndoLive {
        let mut routes = BTreeMap::new();
        routes.insert(
            (Kind::Ingress, "web-new".to_owned()),
            Some(live_object(ingress("web-new", "/web/new"), "11")),
        );
        routes.insert((Kind::Ingress, "web-old".to_owned()), None);
        let mut public = live_object(ingress("web-public", "/web/b"), "12");
        public["metadata"]["annotations"] = json!({"x": "1", "other": "kept"});
        routes.insert((Kind::Ingress, "web-public".to_owned()), Some(public));
        UndoLive {
            deployment: Some(live_object(
                json!({"metadata": {"name": "web"}, "spec": {"template": {"spec": {"containers": [
                    {"name": "app", "image": "r/web:2"}, {"name": "proxy", "image": "envoy"}]}}}}),
                "9",
            )),
            autoscaler: Some(live_object(
                json!({"metadata": {"name": "web"}, "spec": {"minReplicas": 2, "maxReplicas": 9}}),
                "10",
            )),
            routes,
        }
    }

    fn action_of(u: &UndoPlan, name: &str, kind: Kind) -> Action {
        u.plan
            .changes()
            .find(|c| c.name == name && c.kind == kind)
            .unwrap()
            .action()
    }

    #[test]
    fn the_undo_names_itself_in_the_change_cause() {
        let change_cause = |revision: Option<u64>| {
            let u = plan_undo(&record(), "web", "shop", "ctx", &live_after(), revision).unwrap();
            let deploy = u
                .plan
                .changes()
                .find(|c| c.kind == Kind::Deployment)
                .cloned()
                .unwrap();
            deploy.after.unwrap().get()["metadata"]["annotations"]["kubernetes.io/change-cause"]
                .clone()
        };
        assert_eq!(
            change_cause(Some(5)),
            json!("kubectl-appupdate: undo of revision 4: image r/web:2 → r/web:1 (revision 5)")
        );
        assert_eq!(
            change_cause(None),
            json!("kubectl-appupdate: undo of revision 4: image r/web:2 → r/web:1")
        );
    }

    #[test]
    fn the_inverse_restores_image_bounds_and_the_route_set() {
        let u = plan_undo(&record(), "web", "shop", "ctx", &live_after(), None).unwrap();
        assert!(u.drift.is_empty(), "{:?}", u.drift);
        let deploy = u
            .plan
            .changes()
            .find(|c| c.kind == Kind::Deployment)
            .unwrap();
        assert_eq!(deploy.fields[0].after().as_deref(), Some(&json!("r/web:1")));
        let hpa = u
            .plan
            .changes()
            .find(|c| c.kind == Kind::HorizontalPodAutoscaler)
            .unwrap();
        assert_eq!(
            hpa.fields,
            vec![FieldChange::new(
                "spec.maxReplicas",
                Some(json!(9)),
                Some(json!(5))
            )]
        );
        assert_eq!(action_of(&u, "web-new", Kind::Ingress), Action::Delete);
        assert_eq!(action_of(&u, "web-old", Kind::Ingress), Action::Create);
        let public = u.plan.changes().find(|c| c.name == "web-public").unwrap();
        let Some(Write::Patch { body, .. }) = &public.write else {
            panic!("a patch")
        };
        assert_eq!(
            &**body,
            &json!({"spec": {"rules": [{"http": {"paths": [{"path": "/web/a"}]}}]},
                    "metadata": {"annotations": {"x": null}}})
        );
        let old = u.plan.changes().find(|c| c.name == "web-old").unwrap();
        let Some(Write::Create { body }) = &old.write else {
            panic!("a create")
        };
        assert_eq!(&**body, &ingress("web-old", "/web/old"));
    }

    #[test]
    fn a_field_changed_since_is_drift_and_needs_exactly_its_force() {
        let mut live = live_after();
        live.autoscaler.as_mut().unwrap()["spec"]["maxReplicas"] = json!(12);
        let u = plan_undo(&record(), "web", "shop", "ctx", &live, None).unwrap();
        assert_eq!(u.drift.len(), 1);
        assert_eq!(u.drift[0].key, "max");
        let none = BTreeSet::new();
        assert_eq!(
            refusal(4, &u.drift, &none).unwrap(),
            "not undone: horizontalpodautoscaler.autoscaling/web spec.maxReplicas is now 12 (revision 4 left it at 9); to overwrite exactly these, add --force-undo max"
        );
        let max: BTreeSet<String> = ["max".to_owned()].into();
        assert_eq!(refusal(4, &u.drift, &max), None);
        let more: BTreeSet<String> = ["max".to_owned(), "image".to_owned()].into();
        assert!(refusal(4, &u.drift, &more).is_some());
        assert!(refusal(4, &[], &max).unwrap().contains("drop --force-undo"));
    }

    #[test]
    fn a_route_changed_since_is_drift_by_its_reference() {
        let mut live = live_after();
        let key = (Kind::Ingress, "web-new".to_owned());
        let obj = live.routes.get_mut(&key).unwrap().as_mut().unwrap();
        obj["spec"]["rules"][0]["http"]["paths"][0]["path"] = json!("/web/moved");
        live.routes.insert(
            (Kind::Ingress, "web-old".to_owned()),
            Some(live_object(ingress("web-old", "/web/other"), "20")),
        );
        let u = plan_undo(&record(), "web", "shop", "ctx", &live, None).unwrap();
        let keys: BTreeSet<String> = u.drift.iter().map(|d| d.key.clone()).collect();
        assert_eq!(
            keys,
            [
                "ingress.networking.k8s.io/web-new".to_owned(),
                "ingress.networking.k8s.io/web-old".to_owned()
            ]
            .into()
        );
    }

    #[test]
    fn what_is_already_back_drops_out() {
        let mut live = live_after();
        live.deployment.as_mut().unwrap()["spec"]["template"]["spec"]["containers"][0]["image"] =
            json!("r/web:1");
        live.routes
            .insert((Kind::Ingress, "web-new".to_owned()), None);
        let u = plan_undo(&record(), "web", "shop", "ctx", &live, None).unwrap();
        assert!(u.drift.is_empty());
        let deploy = u
            .plan
            .changes()
            .find(|c| c.kind == Kind::Deployment)
            .unwrap();
        assert_eq!(deploy.action(), Action::Unchanged);
        assert_eq!(action_of(&u, "web-new", Kind::Ingress), Action::Unchanged);
    }

    #[test]
    fn the_undo_updaters_replan_under_the_guard_and_save() {
        let u = plan_undo(&record(), "web", "shop", "ctx", &live_after(), None).unwrap();
        let live = live_after();
        for p in &u.plan.objects {
            let current = match p.change.kind {
                Kind::Deployment => live.deployment.clone(),
                Kind::HorizontalPodAutoscaler => live.autoscaler.clone(),
                k => live.routes[&(k, p.change.name.clone())].clone(),
            };
            let fresh = p.updater.plan("shop", current.as_ref()).unwrap();
            assert!(matches!(
                recheck(&p.change, fresh),
                crate::plan::Recheck::Proceed(_)
            ));
            let saved = p.updater.save().unwrap();
            let loaded = match load_updater(&saved.kind, &saved.spec) {
                Some(u) => u.unwrap(),
                // The image and the bounds go back through the ordinary updaters.
                None => continue,
            };
            assert_eq!(loaded.plan("shop", current.as_ref()).unwrap(), *p.change);
        }
    }

    #[test]
    fn undoing_the_undo_redoes() {
        use crate::history::RunInfo;
        use crate::report::{Outcome, Report};
        let u = plan_undo(&record(), "web", "shop", "ctx", &live_after(), None).unwrap();
        let report = Report {
            entries: u
                .plan
                .changes()
                .map(|c| (c.clone().into(), Outcome::Applied))
                .collect(),
            stopped_in_preflight: false,
            interrupted: None,
        };
        let info = RunInfo {
            time: "t".into(),
            user: "u".into(),
            source: Source::Undo { revision: 4 },
            saved_plan: false,
        };
        let mut undo_record = crate::history::record(&report, &info).unwrap();
        undo_record.revision = 5;
        assert_eq!(
            undo_record.image.as_ref().unwrap().after.as_deref(),
            Some("r/web:1")
        );
        // The state after the undo.
        let mut live = live_after();
        live.deployment.as_mut().unwrap()["spec"]["template"]["spec"]["containers"][0]["image"] =
            json!("r/web:1");
        live.autoscaler.as_mut().unwrap()["spec"]["maxReplicas"] = json!(5);
        live.routes
            .insert((Kind::Ingress, "web-new".to_owned()), None);
        live.routes.insert(
            (Kind::Ingress, "web-old".to_owned()),
            Some(live_object(ingress("web-old", "/web/old"), "30")),
        );
        let public = live
            .routes
            .get_mut(&(Kind::Ingress, "web-public".to_owned()))
            .unwrap()
            .as_mut()
            .unwrap();
        public["spec"]["rules"][0]["http"]["paths"][0]["path"] = json!("/web/a");
        public["metadata"]["annotations"] = json!({"other": "kept"});
        let redo = plan_undo(&undo_record, "web", "shop", "ctx", &live, None).unwrap();
        assert!(redo.drift.is_empty(), "{:?}", redo.drift);
        let deploy = redo
            .plan
            .changes()
            .find(|c| c.kind == Kind::Deployment)
            .unwrap();
        assert_eq!(deploy.fields[0].after().as_deref(), Some(&json!("r/web:2")));
        assert_eq!(action_of(&redo, "web-new", Kind::Ingress), Action::Create);
        assert_eq!(action_of(&redo, "web-old", Kind::Ingress), Action::Delete);
        let public = redo
            .plan
            .changes()
            .find(|c| c.name == "web-public")
            .unwrap();
        let Some(Write::Patch { body, .. }) = &public.write else {
            panic!("a patch")
        };
        assert_eq!(body["metadata"]["annotations"]["x"], "1");
    }
}
