//! Deployment (`apps/v1`): defaults (strategy, history, the pod template), generation on spec or
//! annotation changes, the `scale` subresource, `ValidateDeploymentSpec` (selector, template,
//! strategy, immutable selector), and the printer's columns.

use serde_json::{Value, json};

use super::pod_template::{default_pod_spec, validate_pod_spec};
use super::table::{age, age_column, column, i, name_column, selector_text, st};
use super::validate::{
    go_label_selector, go_string_map, label_selector_is_empty, obj, s, selector_matches,
    validate_annotations, validate_label_selector, validate_labels, validate_nonnegative,
};
use super::{Generation, Kind, Subresource, map_mut, map_mut_in, set_default};
use crate::model::ApiResource;
use crate::model::names::is_dns1123_label;
use crate::model::schema;
use crate::model::status::{FieldError, go_quote};

pub struct Deployment;

pub static DEPLOYMENT: Deployment = Deployment;

static API: ApiResource = ApiResource {
    group: "apps",
    version: "v1",
    api_version: "apps/v1",
    resource: "deployments",
    kind: "Deployment",
    list_kind: "DeploymentList",
    namespaced: true,
};

impl Kind for Deployment {
    fn api(&self) -> &'static ApiResource {
        &API
    }

    fn schema(&self) -> usize {
        schema::DEPLOYMENT
    }

    fn generation(&self) -> Generation {
        Generation::SpecOrAnnotations
    }

    fn subresources(&self) -> &'static [Subresource] {
        &[Subresource::Status, Subresource::Scale]
    }

    fn default(&self, obj: &mut Value) {
        default_deployment(obj);
    }

    fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        validate_deployment_spec(
            obj.get("spec").unwrap_or(&Value::Null),
            old.and_then(|o| o.get("spec")),
        )
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let msgs = is_dns1123_label(name);
        if msgs.is_empty() {
            return Vec::new();
        }
        vec![format!(
            "metadata.name: this is used in Pod names and hostnames, which can result in surprising behavior; a DNS label is recommended: [{}]",
            msgs.join(" ")
        )]
    }

    fn validate_status(&self, obj: &Value, old: &Value) -> Vec<FieldError> {
        validate_deployment_status(
            obj.get("status").unwrap_or(&Value::Null),
            old.get("status").unwrap_or(&Value::Null),
        )
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column(
                "Ready",
                "string",
                "",
                "Number of the pod with ready state",
                0,
            ),
            column(
                "Up-to-date",
                "string",
                "",
                "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
                0,
            ),
            column(
                "Available",
                "string",
                "",
                "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
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
                "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.",
                1,
            ),
        ]
    }

    fn table_cells(&self, obj: &Value, now: i64) -> Vec<Value> {
        let name = json!(st(obj, "/metadata/name"));
        let a = json!(age(obj, now));
        let containers: Vec<&Value> = obj
            .pointer("/spec/template/spec/containers")
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        let names: Vec<&str> = containers
            .iter()
            .map(|c| c.get("name").and_then(Value::as_str).unwrap_or(""))
            .collect();
        let images: Vec<&str> = containers
            .iter()
            .map(|c| c.get("image").and_then(Value::as_str).unwrap_or(""))
            .collect();
        vec![
            name,
            json!(format!(
                "{}/{}",
                i(obj, "/status/readyReplicas"),
                i(obj, "/spec/replicas")
            )),
            json!(i(obj, "/status/updatedReplicas")),
            json!(i(obj, "/status/availableReplicas")),
            a,
            json!(names.join(",")),
            json!(images.join(",")),
            json!(selector_text(
                obj.pointer("/spec/selector/matchLabels")
                    .and_then(Value::as_object)
            )),
        ]
    }
}

fn default_deployment(obj: &mut Value) {
    let Some(spec) = map_mut(obj, "spec") else {
        return;
    };
    set_default(spec, "replicas", json!(1));
    if let Some(strategy) = map_mut_in(spec, "strategy") {
        set_default(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate")
            && let Some(ru) = map_mut_in(strategy, "rollingUpdate")
        {
            set_default(ru, "maxUnavailable", json!("25%"));
            set_default(ru, "maxSurge", json!("25%"));
        }
    }
    set_default(spec, "revisionHistoryLimit", json!(10));
    set_default(spec, "progressDeadlineSeconds", json!(600));
    if let Some(template) = map_mut_in(spec, "template")
        && let Some(pod) = map_mut_in(template, "spec")
    {
        default_pod_spec(pod);
    }
}

/// `ValidateDeploymentStatus` and the collision count that may not go down.
fn validate_deployment_status(st: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let n = |v: &Value, f: &str| v.get(f).and_then(Value::as_i64).unwrap_or(0);
    for f in [
        "observedGeneration",
        "replicas",
        "updatedReplicas",
        "readyReplicas",
        "availableReplicas",
        "unavailableReplicas",
        "collisionCount",
    ] {
        validate_nonnegative(st.get(f), &format!("status.{f}"), &mut errs);
    }
    let msg = "cannot be greater than status.replicas";
    let replicas = n(st, "replicas");
    for f in ["updatedReplicas", "readyReplicas", "availableReplicas"] {
        if n(st, f) > replicas {
            errs.push(FieldError::invalid(
                format!("status.{f}"),
                &n(st, f).to_string(),
                msg,
            ));
        }
    }
    if n(st, "availableReplicas") > n(st, "readyReplicas") {
        errs.push(FieldError::invalid(
            "status.availableReplicas",
            &n(st, "availableReplicas").to_string(),
            "cannot be greater than readyReplicas",
        ));
    }
    if let Some(old_c) = old.get("collisionCount").and_then(Value::as_i64) {
        let new_c = st.get("collisionCount").and_then(Value::as_i64);
        if new_c.is_none_or(|c| c < old_c) {
            errs.push(FieldError::invalid(
                "status.collisionCount",
                &new_c.unwrap_or(0).to_string(),
                "cannot be decremented",
            ));
        }
    }
    errs
}

/// `%#v` of an `intstr.IntOrString` (its `String()` has a pointer receiver, so validation
/// messages print the struct).
fn go_intstr(v: &Value) -> String {
    match v {
        Value::String(s) => format!(
            "intstr.IntOrString{{Type:1, IntVal:0, StrVal:{}}}",
            go_quote(s)
        ),
        other => format!(
            "intstr.IntOrString{{Type:0, IntVal:{}, StrVal:\"\"}}",
            other.as_i64().unwrap_or(0)
        ),
    }
}

/// `getPercentValue`: the number of a `N%` string.
fn percent_value(v: &Value) -> Option<i64> {
    v.as_str()?.strip_suffix('%')?.parse().ok()
}

/// `getIntOrPercentValue`.
fn int_or_percent_value(v: &Value) -> i64 {
    match v {
        Value::String(s) => percent_value(v).unwrap_or_else(|| s.parse().unwrap_or(0)),
        other => other.as_i64().unwrap_or(0),
    }
}

/// `ValidatePositiveIntOrPercent`.
fn positive_int_or_percent(v: &Value, p: &str, errs: &mut Vec<FieldError>) {
    match v {
        Value::String(s) => {
            let valid = s
                .strip_suffix('%')
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
            if !valid {
                errs.push(FieldError::invalid(
                    p,
                    &go_intstr(v),
                    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
                ));
            }
        }
        other => validate_nonnegative(Some(other), p, errs),
    }
}

/// `%#v` of the internal `apps.DeploymentStrategy`.
fn go_strategy(strategy: &Value) -> String {
    let ru = if strategy.get("rollingUpdate").is_some_and(|r| !r.is_null()) {
        "(*apps.RollingUpdateDeployment)(0xc000a1e0c0)"
    } else {
        "(*apps.RollingUpdateDeployment)(nil)"
    };
    format!(
        "apps.DeploymentStrategy{{Type:{}, RollingUpdate:{ru}}}",
        go_quote(s(strategy, "type"))
    )
}

/// `ValidateDeploymentStrategy`.
fn validate_strategy(strategy: &Value, errs: &mut Vec<FieldError>) {
    match s(strategy, "type") {
        "Recreate" => {
            if strategy.get("rollingUpdate").is_some_and(|r| !r.is_null()) {
                errs.push(FieldError::forbidden(
                    "spec.strategy.rollingUpdate",
                    "may not be specified when strategy `type` is 'Recreate'",
                ));
            }
        }
        "RollingUpdate" => {
            let Some(ru) = strategy.get("rollingUpdate").filter(|r| !r.is_null()) else {
                errs.push(FieldError::required(
                    "spec.strategy.rollingUpdate",
                    "this should be defaulted and never be nil",
                ));
                return;
            };
            let zero = json!(0);
            let unavailable = ru
                .get("maxUnavailable")
                .filter(|v| !v.is_null())
                .unwrap_or(&zero);
            let surge = ru.get("maxSurge").filter(|v| !v.is_null()).unwrap_or(&zero);
            let p = "spec.strategy.rollingUpdate";
            positive_int_or_percent(unavailable, &format!("{p}.maxUnavailable"), errs);
            positive_int_or_percent(surge, &format!("{p}.maxSurge"), errs);
            if int_or_percent_value(unavailable) == 0 && int_or_percent_value(surge) == 0 {
                errs.push(FieldError::invalid(
                    format!("{p}.maxUnavailable"),
                    &go_intstr(unavailable),
                    "may not be 0 when `maxSurge` is 0",
                ));
            }
            if percent_value(unavailable).is_some_and(|n| n > 100) {
                errs.push(FieldError::invalid(
                    format!("{p}.maxUnavailable"),
                    &go_intstr(unavailable),
                    "must not be greater than 100%",
                ));
            }
        }
        _ => errs.push(FieldError::not_supported(
            "spec.strategy",
            &go_strategy(strategy),
            &["Recreate", "RollingUpdate"],
        )),
    }
}

/// `ValidatePodTemplateSpecForReplicaSet` of `spec.template` (Deployments and ReplicaSets):
/// the selector matches the template's labels, the template's metadata and pod spec.
pub(super) fn validate_template_for_replica_set(spec: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let sel = spec.get("selector").unwrap_or(&Value::Null);
    let template = spec.get("template").unwrap_or(&Value::Null);
    let tmeta = template.get("metadata").unwrap_or(&Value::Null);
    let tlabels = obj(tmeta, "labels");
    // LabelSelectorAsSelector: no selector selects nothing (so no labels match it), an empty
    // one everything.
    if sel.is_null() || (!label_selector_is_empty(sel) && !selector_matches(sel, tlabels)) {
        let shown = tlabels
            .map(go_string_map)
            .unwrap_or_else(|| "map[string]string(nil)".into());
        errs.push(FieldError::invalid(
            "spec.template.metadata.labels",
            &shown,
            "`selector` does not match template `labels`",
        ));
    }
    errs.extend(validate_labels(tlabels, "spec.template.metadata.labels"));
    errs.extend(validate_annotations(
        obj(tmeta, "annotations"),
        "spec.template.metadata.annotations",
    ));
    let pod = template.get("spec").unwrap_or(&Value::Null);
    errs.extend(validate_pod_spec(pod, "spec.template.spec", true));
    errs
}

/// `spec.selector`: required, valid, not empty.
pub(super) fn validate_workload_selector(spec: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let sel = spec.get("selector").unwrap_or(&Value::Null);
    if sel.is_null() {
        errs.push(FieldError::required("spec.selector", ""));
    } else {
        errs.extend(validate_label_selector(sel, "spec.selector"));
        if label_selector_is_empty(sel) {
            errs.push(FieldError::invalid(
                "spec.selector",
                &go_label_selector(sel),
                "empty selector is invalid for deployment",
            ));
        }
    }
    errs
}

/// The apps/v1 strategies' rule: `spec.selector` cannot change.
pub(super) fn validate_selector_immutable(spec: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let sel = spec.get("selector").unwrap_or(&Value::Null);
    match old.and_then(|o| o.get("selector")) {
        Some(old_sel) if old_sel != sel && !sel.is_null() => vec![FieldError::invalid(
            "spec.selector",
            &go_label_selector(sel),
            "field is immutable",
        )],
        _ => Vec::new(),
    }
}

fn validate_deployment_spec(spec: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate_nonnegative(spec.get("replicas"), "spec.replicas", &mut errs);
    errs.extend(validate_workload_selector(spec));
    errs.extend(validate_template_for_replica_set(spec));
    validate_strategy(spec.get("strategy").unwrap_or(&Value::Null), &mut errs);
    validate_nonnegative(
        spec.get("minReadySeconds"),
        "spec.minReadySeconds",
        &mut errs,
    );
    validate_nonnegative(
        spec.get("revisionHistoryLimit"),
        "spec.revisionHistoryLimit",
        &mut errs,
    );
    if let Some(pds) = spec.get("progressDeadlineSeconds").and_then(Value::as_i64) {
        validate_nonnegative(
            spec.get("progressDeadlineSeconds"),
            "spec.progressDeadlineSeconds",
            &mut errs,
        );
        let mrs = spec
            .get("minReadySeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if pds <= mrs {
            errs.push(FieldError::invalid(
                "spec.progressDeadlineSeconds",
                &pds.to_string(),
                "must be greater than minReadySeconds",
            ));
        }
    }
    errs.extend(validate_selector_immutable(spec, old));
    errs
}
