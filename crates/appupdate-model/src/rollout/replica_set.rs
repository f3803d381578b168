//! Where a Deployment's new pods are, as requests would ask for them: its selector as a label
//! selector string ([`label_selector`]), its new ReplicaSet among those listed
//! ([`new_replica_set`]), the selector of that ReplicaSet's pods ([`pod_selector`]) and the
//! field selector of one pod's events ([`event_field_selector`]). Pure; the cluster client
//! (`appupdate-kube`'s `Cluster::rollout_evidence`) sends the requests.

use std::borrow::Cow;
use std::fmt::Write as _;

use serde_json::Value;

use crate::text::Untrusted;

/// The annotation the deployment controller keeps in step on a Deployment and its new
/// ReplicaSet.
pub const REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";

/// The label that tells a Deployment's ReplicaSets (and their pods) apart.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// A selector that cannot be written as a label selector string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("the Deployment has no spec.selector")]
    Missing,
    #[error("the Deployment's selector selects everything")]
    Empty,
    #[error("the selector's {} is not a string", Untrusted(.0))]
    NotAString(String),
    #[error("the selector's operator {:?} is none of In, NotIn, Exists, DoesNotExist", Untrusted(.0))]
    UnknownOperator(String),
    #[error("the selector's {op} requirement on {:?} has no values", Untrusted(.key))]
    NoValues { key: String, op: String },
}

/// `selector` (a `metav1.LabelSelector`) as the label selector string a LIST takes, as
/// `metav1.LabelSelectorAsSelector` writes it: `matchLabels` as `key=value`, `matchExpressions`
/// as `key in (a,b)`, `key notin (a,b)`, `key`, `!key`; requirements ordered by key, values
/// sorted. A missing or empty selector is an error rather than everything.
pub fn label_selector(selector: Option<&Value>) -> Result<String, SelectorError> {
    let selector = selector
        .filter(|s| !s.is_null())
        .ok_or(SelectorError::Missing)?;
    let mut requirements: Vec<(String, String)> = Vec::new();
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        for (key, value) in labels {
            let value = value
                .as_str()
                .ok_or_else(|| SelectorError::NotAString(format!("matchLabels.{key}")))?;
            requirements.push((key.clone(), format!("{key}={value}")));
        }
    }
    let expressions = selector.get("matchExpressions").and_then(Value::as_array);
    for (i, e) in expressions.into_iter().flatten().enumerate() {
        let field = |name: &str| -> Result<String, SelectorError> {
            e.get(name)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| SelectorError::NotAString(format!("matchExpressions[{i}].{name}")))
        };
        let key = field("key")?;
        let op = field("operator")?;
        let mut values = e
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|v| {
                v.as_str().map(str::to_owned).ok_or_else(|| {
                    SelectorError::NotAString(format!("matchExpressions[{i}].values"))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        values.sort();
        let written = match op.as_str() {
            "In" | "NotIn" if values.is_empty() => {
                return Err(SelectorError::NoValues { key, op });
            }
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.clone(),
            "DoesNotExist" => format!("!{key}"),
            _ => return Err(SelectorError::UnknownOperator(op)),
        };
        requirements.push((key, written));
    }
    if requirements.is_empty() {
        return Err(SelectorError::Empty);
    }
    requirements.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(requirements
        .into_iter()
        .map(|(_, r)| r)
        .collect::<Vec<_>>()
        .join(","))
}

fn text<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// Whether one of `obj`'s ownerReferences has `uid`.
pub fn owned_by(obj: &Value, uid: &str) -> bool {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter()
                .any(|r| r.get("uid").and_then(Value::as_str) == Some(uid))
        })
}

/// The pod template with its `pod-template-hash` label taken out.
fn template_without_hash(obj: &Value) -> Option<Value> {
    let mut template = obj.pointer("/spec/template")?.clone();
    if let Some(labels) = template
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.remove(POD_TEMPLATE_HASH);
    }
    Some(template)
}

/// The images of a pod template's containers and init containers, in order.
fn images(obj: &Value) -> Vec<&str> {
    ["initContainers", "containers"]
        .iter()
        .filter_map(|k| obj.pointer(&format!("/spec/template/spec/{k}")))
        .filter_map(Value::as_array)
        .flatten()
        .map(|c| c.get("image").and_then(Value::as_str).unwrap_or_default())
        .collect()
}

/// `creationTimestamp` then name: the order ReplicaSets are compared in.
fn created(rs: &Value) -> (&str, &str) {
    (
        text(rs, "/metadata/creationTimestamp").unwrap_or_default(),
        text(rs, "/metadata/name").unwrap_or_default(),
    )
}

/// The `deployment`'s new ReplicaSet among `replica_sets` (those its selector lists): of those
/// it controls (an ownerReference with its uid; all of them when it has no uid), the one whose
/// `deployment.kubernetes.io/revision` is the Deployment's — trusted once the controller has
/// observed the Deployment's generation —, else the oldest whose pod template is the
/// Deployment's but for the `pod-template-hash` label (kubectl's `FindNewReplicaSet`), else the
/// newest whose containers' images are the Deployment's.
pub fn new_replica_set<'a>(deployment: &Value, replica_sets: &'a [Value]) -> Option<&'a Value> {
    let uid = text(deployment, "/metadata/uid").filter(|u| !u.is_empty());
    let mut owned: Vec<&Value> = replica_sets
        .iter()
        .filter(|rs| uid.is_none_or(|uid| owned_by(rs, uid)))
        .collect();
    owned.sort_by(|a, b| created(a).cmp(&created(b)));
    let generation = deployment
        .pointer("/metadata/generation")
        .and_then(Value::as_i64);
    let observed = deployment
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64);
    let current = matches!((generation, observed), (Some(g), Some(o)) if o >= g);
    if current
        && let Some(revision) = annotation(deployment, REVISION_ANNOTATION)
        && let Some(rs) = owned
            .iter()
            .find(|rs| annotation(rs, REVISION_ANNOTATION) == Some(revision))
    {
        return Some(rs);
    }
    if let Some(template) = template_without_hash(deployment)
        && let Some(rs) = owned
            .iter()
            .find(|rs| template_without_hash(rs).as_ref() == Some(&template))
    {
        return Some(rs);
    }
    let wanted = images(deployment);
    if wanted.is_empty() {
        return None;
    }
    owned.into_iter().rev().find(|rs| images(rs) == wanted)
}

/// The label selector of `replica_set`'s pods: the `deployment`'s selector and the
/// ReplicaSet's `pod-template-hash`; the ReplicaSet's own selector when it has no usable hash.
pub fn pod_selector(deployment: &Value, replica_set: &Value) -> Result<String, SelectorError> {
    let hash = replica_set
        .pointer("/metadata/labels")
        .and_then(|l| l.get(POD_TEMPLATE_HASH))
        .and_then(Value::as_str)
        .filter(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_alphanumeric()));
    match hash {
        Some(hash) => {
            let mut selector = label_selector(deployment.pointer("/spec/selector"))?;
            let _ = write!(selector, ",{POD_TEMPLATE_HASH}={hash}");
            Ok(selector)
        }
        None => label_selector(replica_set.pointer("/spec/selector")),
    }
}

/// `value` escaped for a field selector, as `fields.EscapeValue` does: `\` → `\\`, `,` → `\,`,
/// `=` → `\=`.
pub fn escape_field_value(value: &str) -> Cow<'_, str> {
    if !value.contains(['\\', ',', '=']) {
        return Cow::Borrowed(value);
    }
    let mut out = String::with_capacity(value.len() + 4);
    for c in value.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    Cow::Owned(out)
}

/// The field selector of the events about the pod `pod`:
/// `involvedObject.kind=Pod,involvedObject.name=<pod>` (both are among the event fields the API
/// server selects on: `pkg/registry/core/event/strategy.go`, `ToSelectableFields`).
pub fn event_field_selector(pod: &str) -> String {
    format!(
        "involvedObject.kind=Pod,involvedObject.name={}",
        escape_field_value(pod)
    )
}

#[cfg(test)]
mod tests;
