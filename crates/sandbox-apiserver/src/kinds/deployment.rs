//! Deployment (`apps/v1`): defaults (strategy, history, the pod template), generation on spec or
//! annotation changes, the `scale` subresource, `ValidateDeploymentSpec` (selector, template,
//! strategy, immutable selector), and the printer's columns.

use serde_json::{Value, json};

use super::pod::{default_pod_spec, validate_pod_spec};
use super::table::{age, age_column, column, i, name_column, selector_text, st};
use super::validate::{
    bad_value, go_label_selector, go_string_map, label_selector_is_empty, obj, s, selector_matches,
    validate_annotations, validate_label_selector, validate_labels, validate_nonnegative,
};
use super::{Generation, Kind, Subresource, map_mut, map_mut_in, set_default};
use crate::model::ApiResource;
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
                "integer",
                "",
                "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
                0,
            ),
            column(
                "Available",
                "integer",
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

fn int_or_percent(v: &Value) -> Option<(i64, bool)> {
    match v {
        Value::Number(n) => n.as_i64().map(|i| (i, false)),
        Value::String(s) => s
            .strip_suffix('%')
            .and_then(|p| p.parse().ok())
            .map(|i| (i, true)),
        _ => None,
    }
}

fn validate_deployment_spec(spec: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate_nonnegative(spec.get("replicas"), "spec.replicas", &mut errs);
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
    let template = spec.get("template").unwrap_or(&Value::Null);
    let tmeta = template.get("metadata").unwrap_or(&Value::Null);
    let tlabels = obj(tmeta, "labels");
    if !sel.is_null() && !label_selector_is_empty(sel) && !selector_matches(sel, tlabels) {
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
    // strategy
    let strategy = spec.get("strategy").unwrap_or(&Value::Null);
    match s(strategy, "type") {
        "Recreate" => {
            if strategy.get("rollingUpdate").is_some() {
                errs.push(FieldError::forbidden(
                    "spec.strategy.rollingUpdate",
                    "may not be specified when strategy `type` is 'Recreate'",
                ));
            }
        }
        "RollingUpdate" => {
            let ru = strategy.get("rollingUpdate").unwrap_or(&Value::Null);
            let mut zero_unavailable = false;
            let mut zero_surge = false;
            for (field, flag) in [
                ("maxUnavailable", &mut zero_unavailable),
                ("maxSurge", &mut zero_surge),
            ] {
                let p = format!("spec.strategy.rollingUpdate.{field}");
                if let Some(v) = ru.get(field) {
                    match int_or_percent(v) {
                        Some((n, pct)) => {
                            if n < 0 {
                                errs.push(FieldError::invalid(&p, &bad_value(v), "must be greater than or equal to 0"));
                            }
                            if pct && n > 100 && field == "maxUnavailable" {
                                errs.push(FieldError::invalid(&p, &bad_value(v), "must not be greater than 100%"));
                            }
                            *flag = n == 0;
                        }
                        None => errs.push(FieldError::invalid(&p, &bad_value(v), "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")),
                    }
                }
            }
            if zero_unavailable && zero_surge {
                let v = ru.get("maxUnavailable").map(bad_value).unwrap_or_default();
                errs.push(FieldError::invalid(
                    "spec.strategy.rollingUpdate.maxUnavailable",
                    &v,
                    "may not be 0 when `maxSurge` is 0",
                ));
            }
        }
        "" => errs.push(FieldError::required("spec.strategy.type", "")),
        other => errs.push(FieldError::not_supported(
            "spec.strategy.type",
            &go_quote(other),
            &["Recreate", "RollingUpdate"],
        )),
    }
    validate_nonnegative(
        spec.get("revisionHistoryLimit"),
        "spec.revisionHistoryLimit",
        &mut errs,
    );
    validate_nonnegative(
        spec.get("minReadySeconds"),
        "spec.minReadySeconds",
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
    if let Some(old) = old
        && let Some(old_sel) = old.get("selector")
        && old_sel != sel
        && !sel.is_null()
    {
        errs.push(FieldError::invalid(
            "spec.selector",
            &go_label_selector(sel),
            "field is immutable",
        ));
    }
    errs
}
