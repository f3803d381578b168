//! ReplicaSet (`apps/v1`): what the deployment controller creates, one per pod template.
//! Defaults (one replica, the pod template's), generation on spec changes, the `status` and
//! `scale` subresources, `ValidateReplicaSetSpec` (selector, template, immutable selector) and
//! `ValidateReplicaSetStatus`, and the printer's columns. Field selectors: only
//! `metadata.name` and `metadata.namespace` (apps/v1 registers no conversion of its own).

use serde_json::{Value, json};

use super::deployment::{
    validate_selector_immutable, validate_template_for_replica_set, validate_workload_selector,
};
use super::pod_template::default_pod_spec;
use super::table::{age, age_column, column, i, name_column, st};
use super::validate::validate_nonnegative;
use super::{Generation, Kind, Subresource, map_mut, map_mut_in, set_default};
use crate::model::ApiResource;
use crate::model::names::is_dns1123_label;
use crate::model::schema;
use crate::model::status::FieldError;

pub struct ReplicaSet;

pub static REPLICA_SET: ReplicaSet = ReplicaSet;

static API: ApiResource = ApiResource {
    group: "apps",
    version: "v1",
    api_version: "apps/v1",
    resource: "replicasets",
    kind: "ReplicaSet",
    list_kind: "ReplicaSetList",
    namespaced: true,
};

impl Kind for ReplicaSet {
    fn api(&self) -> &'static ApiResource {
        &API
    }

    fn schema(&self) -> usize {
        schema::REPLICA_SET
    }

    fn generation(&self) -> Generation {
        Generation::Spec
    }

    fn subresources(&self) -> &'static [Subresource] {
        &[Subresource::Status, Subresource::Scale]
    }

    fn default(&self, obj: &mut Value) {
        let Some(spec) = map_mut(obj, "spec") else {
            return;
        };
        set_default(spec, "replicas", json!(1));
        if let Some(template) = map_mut_in(spec, "template")
            && let Some(pod) = map_mut_in(template, "spec")
        {
            default_pod_spec(pod);
        }
    }

    fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let spec = obj.get("spec").unwrap_or(&Value::Null);
        let mut errs = Vec::new();
        validate_nonnegative(spec.get("replicas"), "spec.replicas", &mut errs);
        validate_nonnegative(
            spec.get("minReadySeconds"),
            "spec.minReadySeconds",
            &mut errs,
        );
        errs.extend(validate_workload_selector(spec));
        errs.extend(validate_template_for_replica_set(spec));
        if spec
            .pointer("/template/spec/activeDeadlineSeconds")
            .is_some_and(|v| !v.is_null())
        {
            errs.push(FieldError::forbidden(
                "spec.template.spec.activeDeadlineSeconds",
                "activeDeadlineSeconds in ReplicaSet is not Supported",
            ));
        }
        errs.extend(validate_selector_immutable(
            spec,
            old.and_then(|o| o.get("spec")),
        ));
        errs
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        let msgs = is_dns1123_label(st(obj, "/metadata/name"));
        if msgs.is_empty() {
            return Vec::new();
        }
        vec![format!(
            "metadata.name: this is used in Pod names and hostnames, which can result in surprising behavior; a DNS label is recommended: [{}]",
            msgs.join(" ")
        )]
    }

    fn validate_status(&self, obj: &Value, _old: &Value) -> Vec<FieldError> {
        validate_replica_set_status(obj.get("status").unwrap_or(&Value::Null))
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column(
                "Desired",
                "integer",
                "",
                "Replicas is the number of desired pods. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset",
                0,
            ),
            column(
                "Current",
                "integer",
                "",
                "Replicas is the most recently observed number of non-terminating pods. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset",
                0,
            ),
            column(
                "Ready",
                "integer",
                "",
                "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition.",
                0,
            ),
            age_column(),
            column(
                "Containers",
                "string",
                "",
                "Names of each container in the template.",
                1,
            ),
            column(
                "Images",
                "string",
                "",
                "Images referenced by each container in the template.",
                1,
            ),
            column(
                "Selector",
                "string",
                "",
                "Selector is a label query over pods that should match the replica count. If the selector is empty, it is defaulted to the labels present on the pod template. Label keys and values that must match in order to be controlled by this replica set. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
                1,
            ),
        ]
    }

    fn table_cells(&self, obj: &Value, now: i64) -> Vec<Value> {
        let (names, images) = container_cells(obj.pointer("/spec/template/spec/containers"));
        vec![
            json!(st(obj, "/metadata/name")),
            json!(i(obj, "/spec/replicas")),
            json!(i(obj, "/status/replicas")),
            json!(i(obj, "/status/readyReplicas")),
            json!(age(obj, now)),
            json!(names),
            json!(images),
            json!(format_label_selector(obj.pointer("/spec/selector"))),
        ]
    }
}

/// `layoutContainerCells`: the containers' names and images, comma-separated.
pub(super) fn container_cells(containers: Option<&Value>) -> (String, String) {
    let cs = containers
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let names: Vec<&str> = cs
        .iter()
        .map(|c| c.get("name").and_then(Value::as_str).unwrap_or(""))
        .collect();
    let images: Vec<&str> = cs
        .iter()
        .map(|c| c.get("image").and_then(Value::as_str).unwrap_or(""))
        .collect();
    (names.join(","), images.join(","))
}

/// `metav1.FormatLabelSelector`: `<none>` for no selector or an empty one, else the selector's
/// text (requirements sorted by key).
pub(super) fn format_label_selector(sel: Option<&Value>) -> String {
    let Some(sel) = sel.filter(|s| !s.is_null()) else {
        return "<none>".into();
    };
    let mut terms: Vec<(String, String)> = Vec::new();
    if let Some(ml) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in ml {
            terms.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or(""))));
        }
    }
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        let mut values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        values.sort_unstable();
        let text = match e.get("operator").and_then(Value::as_str).unwrap_or("") {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            _ => format!("!{key}"),
        };
        terms.push((key.to_string(), text));
    }
    if terms.is_empty() {
        return "<none>".into();
    }
    terms.sort();
    terms
        .into_iter()
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join(",")
}

/// `ValidateReplicaSetStatus`.
fn validate_replica_set_status(st: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for f in [
        "replicas",
        "fullyLabeledReplicas",
        "readyReplicas",
        "availableReplicas",
        "observedGeneration",
        "terminatingReplicas",
    ] {
        validate_nonnegative(st.get(f), &format!("status.{f}"), &mut errs);
    }
    let n = |f: &str| st.get(f).and_then(Value::as_i64).unwrap_or(0);
    let msg = "cannot be greater than status.replicas";
    for f in ["fullyLabeledReplicas", "readyReplicas", "availableReplicas"] {
        if n(f) > n("replicas") {
            errs.push(FieldError::invalid(
                format!("status.{f}"),
                &n(f).to_string(),
                msg,
            ));
        }
    }
    if n("availableReplicas") > n("readyReplicas") {
        errs.push(FieldError::invalid(
            "status.availableReplicas",
            &n("availableReplicas").to_string(),
            "cannot be greater than readyReplicas",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selector_is_printed_as_kubectl_prints_it() {
        assert_eq!(format_label_selector(None), "<none>");
        assert_eq!(
            format_label_selector(Some(
                &json!({"matchLabels": {"pod-template-hash": "7c5d", "app": "web"}})
            )),
            "app=web,pod-template-hash=7c5d"
        );
        assert_eq!(
            format_label_selector(Some(
                &json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}]})
            )),
            "tier in (a,b)"
        );
    }

    #[test]
    fn status_counts_cannot_exceed_the_replicas() {
        let errs = validate_replica_set_status(
            &json!({"replicas": 1, "readyReplicas": 2, "availableReplicas": 3}),
        );
        let texts: Vec<String> = errs.iter().map(FieldError::text).collect();
        assert_eq!(
            texts,
            [
                "status.readyReplicas: Invalid value: 2: cannot be greater than status.replicas",
                "status.availableReplicas: Invalid value: 3: cannot be greater than status.replicas",
                "status.availableReplicas: Invalid value: 3: cannot be greater than readyReplicas",
            ]
        );
    }
}
