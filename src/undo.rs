//! Undo (`--undo`, `--to-revision N`): the earlier intent of a history record, planned as an
//! ordinary run.
//!
//! Pure. A record says what its run meant in the plugin's own terms: the image of a container,
//! the autoscaler bounds, and the routes before and after ([`crate::intent`]). The undo asks
//! the planner for the earlier values — the image before, the bounds before, the routes before
//! as an endpoints file and the route flags that set their style and attachment
//! ([`request`]) — through the same planner, updaters and route styles as a run from flags.
//! So an undo can only produce what an ordinary run can: the application's Deployment and
//! HorizontalPodAutoscaler (named after it) and the managed routes a route style generates
//! (`<app>-<identifier>`, labelled `app` and `identifier`). Nothing else in a record is used;
//! a record is validated when it is read ([`crate::history::validate`]).
//!
//! A value that is no longer at the record's `after` value was changed by someone since: it
//! is listed by [`drift`], and the caller refuses the plan unless the user named exactly
//! those with `--force-undo` (the drift keys: `image`, `min`, `max`, `routes`). A value already
//! back at its `before` value simply drops out of the plan. Every write is conditional and
//! guarded like any other, and the undo is itself recorded, so undoing an undo redoes.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::borrow::Cow;
use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::endpoints_file::EndpointsFile;
use crate::history::{Record, RouteChange};
use crate::intent::{self, flags_to_restore};
use crate::plan::{Kind, Plan};
use crate::routes::refs::RouteFlags;
use crate::updaters::{AutoscalerUpdate, ContainerUpdate};

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

/// The kind of a recorded route object, as this version knows it.
pub fn route_kind(r: &RouteChange) -> Option<Kind> {
    let kind: Kind = serde_json::from_value(Value::String(r.kind.clone())).ok()?;
    (kind.api_version() == r.api_version).then_some(kind)
}

/// What the undo of a record asks the planner for: the values before its run.
#[derive(Clone, Debug, Default)]
pub struct Intent {
    pub container: Option<String>,
    pub container_update: ContainerUpdate,
    pub autoscaler_update: AutoscalerUpdate,
    /// The routes before, as an endpoints file (`None`: the run did not change routes).
    pub endpoints: Option<EndpointsFile>,
    /// The route style and the attachment parts the run changed.
    pub routes: RouteFlags,
}

/// What the undo of `record` asks the planner for; `Err` says why it cannot be undone.
pub fn request(record: &Record) -> Result<Intent, String> {
    if record.routes_truncated {
        return Err(
            "it was recorded without its routes (they were too large), so it cannot be undone"
                .into(),
        );
    }
    let mut intent = Intent::default();
    if let Some(image) = &record.image {
        let before = image
            .before
            .clone()
            .ok_or("it recorded no image before the change")?;
        intent.container = Some(image.container.clone());
        intent.container_update.image = Some(before);
    }
    if let Some(bounds) = &record.bounds {
        let before = |c: &Option<crate::history::Change<i64>>| {
            c.as_ref()
                .and_then(|c| c.before)
                .and_then(|v| i32::try_from(v).ok())
        };
        intent.autoscaler_update = AutoscalerUpdate {
            min_replicas: before(&bounds.min),
            max_replicas: before(&bounds.max),
        };
    }
    match &record.endpoints {
        Some(change) => {
            let source = format!("revision {} (routes before)", record.revision);
            intent.endpoints = Some(change.before.endpoints_file(&source)?);
            intent.routes = flags_to_restore(&change.before, &change.after)?;
        }
        None if !record.routes.is_empty() => {
            return Err(
                "it was recorded by an earlier version of kubectl-appupdate, which kept route objects instead of the endpoints they served, so its routes cannot be undone; publish the earlier endpoints with --endpoints instead"
                    .into(),
            );
        }
        None => {}
    }
    Ok(intent)
}

/// The container named in the Deployment updater's field path.
fn container_of(path: &str) -> Option<&str> {
    path.strip_prefix("spec.template.spec.containers[name=")?
        .strip_suffix("].image")
}

/// What changed since `record` among the values `plan` (the undo's, made against the live
/// objects) sets back: each value whose live value is not the one the record left.
pub fn drift(record: &Record, plan: &Plan) -> Vec<Drift> {
    let mut out = Vec::new();
    for change in plan.changes() {
        for f in &change.fields {
            let (key, recorded) = match change.kind {
                Kind::Deployment if container_of(&f.path).is_some() => (
                    "image",
                    record
                        .image
                        .as_ref()
                        .and_then(|i| i.after.clone())
                        .map(Value::String),
                ),
                Kind::HorizontalPodAutoscaler => {
                    let bounds = record.bounds.as_ref();
                    match f.path.as_str() {
                        "spec.minReplicas" => (
                            "min",
                            bounds.and_then(|b| b.min.as_ref()?.after).map(Value::from),
                        ),
                        "spec.maxReplicas" => (
                            "max",
                            bounds.and_then(|b| b.max.as_ref()?.after).map(Value::from),
                        ),
                        _ => continue,
                    }
                }
                _ => continue,
            };
            if f.before().as_deref() != recorded.as_ref() {
                out.push(Drift {
                    key: key.into(),
                    reference: change.reference(),
                    path: f.path.clone(),
                    now: f.before().map(Cow::into_owned),
                    recorded,
                });
            }
        }
    }
    if let Some(change) = &record.endpoints {
        let live = intent::groups_of(
            plan.changes()
                .filter_map(|c| c.route.as_ref())
                .map(|info| (info, false)),
        );
        let left = change.after.groups();
        let live_styles = plan
            .routes
            .as_ref()
            .map(|r| r.live_styles.clone())
            .unwrap_or_default();
        let style_moved = !left.is_empty()
            && change.after.style.is_some()
            && live_styles != change.after.style.into_iter().collect::<Vec<_>>();
        if live != left || style_moved {
            out.push(Drift {
                key: "routes".into(),
                reference: format!("the routes of {}", plan.app),
                path: ".".into(),
                now: Some(json!(groups_json(&live))),
                recorded: Some(json!(groups_json(&left))),
            });
        }
    }
    out
}

fn groups_json(groups: &intent::Groups) -> Value {
    groups
        .iter()
        .map(|(scopes, paths)| json!({"scopes": scopes, "paths": paths}))
        .collect()
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
