//! HorizontalPodAutoscaler (`autoscaling/v2`): defaults (the CPU metric, scaling behaviour
//! policies), `ValidateHorizontalPodAutoscalerSpec`, and the printer's columns.

use serde_json::{Value, json};

use super::table::{age, age_column, column, i, name_column, st};
use super::validate::{arr, s};
use super::{Kind, map_mut, set_default};
use crate::model::ApiResource;
use crate::model::schema;
use crate::model::status::{FieldError, go_quote};

pub struct HorizontalPodAutoscaler;

pub static HORIZONTAL_POD_AUTOSCALER: HorizontalPodAutoscaler = HorizontalPodAutoscaler;

static API: ApiResource = ApiResource {
    group: "autoscaling",
    version: "v2",
    api_version: "autoscaling/v2",
    resource: "horizontalpodautoscalers",
    kind: "HorizontalPodAutoscaler",
    list_kind: "HorizontalPodAutoscalerList",
    namespaced: true,
};

impl Kind for HorizontalPodAutoscaler {
    fn api(&self) -> &'static ApiResource {
        &API
    }

    fn schema(&self) -> usize {
        schema::HORIZONTAL_POD_AUTOSCALER
    }

    fn other_versions(&self) -> &'static [&'static str] {
        &["autoscaling/v1"]
    }

    fn default(&self, obj: &mut Value) {
        default_hpa(obj);
    }

    fn validate(&self, obj: &Value, _old: Option<&Value>) -> Vec<FieldError> {
        validate_hpa_spec(obj.get("spec").unwrap_or(&Value::Null))
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column(
                "Reference",
                "string",
                "",
                "reference to the target object",
                0,
            ),
            column("Targets", "string", "", "the current and target metrics", 0),
            column(
                "MinPods",
                "string",
                "",
                "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.",
                0,
            ),
            column(
                "MaxPods",
                "integer",
                "",
                "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up.",
                0,
            ),
            column(
                "Replicas",
                "integer",
                "",
                "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler.",
                0,
            ),
            age_column(),
        ]
    }

    fn table_cells(&self, obj: &Value, now: i64) -> Vec<Value> {
        let name = json!(st(obj, "/metadata/name"));
        let a = json!(age(obj, now));
        let reference = format!(
            "{}/{}",
            st(obj, "/spec/scaleTargetRef/kind"),
            st(obj, "/spec/scaleTargetRef/name")
        );
        let targets: Vec<String> = obj
            .pointer("/spec/metrics")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|m| {
                        let res = m.get("resource").or_else(|| m.get("containerResource"));
                        match res
                            .and_then(|r| r.pointer("/target/averageUtilization"))
                            .and_then(Value::as_i64)
                        {
                            Some(u) => format!("<unknown>/{u}%"),
                            None => "<unknown>/<unknown>".to_string(),
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        vec![
            name,
            json!(reference),
            json!(if targets.is_empty() {
                "<none>".to_string()
            } else {
                targets.join(", ")
            }),
            json!(
                obj.pointer("/spec/minReplicas")
                    .and_then(Value::as_i64)
                    .map(|m| m.to_string())
                    .unwrap_or_else(|| "<unset>".into())
            ),
            json!(i(obj, "/spec/maxReplicas")),
            json!(i(obj, "/status/currentReplicas")),
            a,
        ]
    }
}

fn default_hpa(obj: &mut Value) {
    let Some(spec) = map_mut(obj, "spec") else {
        return;
    };
    set_default(spec, "minReplicas", json!(1));
    if spec
        .get("metrics")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        spec.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]),
        );
    }
    if let Some(Value::Object(b)) = spec.get_mut("behavior") {
        let up = b.entry("scaleUp").or_insert_with(|| json!({}));
        if let Some(up) = up.as_object_mut() {
            set_default(up, "stabilizationWindowSeconds", json!(0));
            set_default(up, "selectPolicy", json!("Max"));
            if up
                .get("policies")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
            {
                up.insert(
                    "policies".into(),
                    json!([{"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}]),
                );
            }
        }
        let down = b.entry("scaleDown").or_insert_with(|| json!({}));
        if let Some(down) = down.as_object_mut() {
            set_default(down, "stabilizationWindowSeconds", json!(300));
            set_default(down, "selectPolicy", json!("Max"));
            if down
                .get("policies")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
            {
                down.insert(
                    "policies".into(),
                    json!([{"type": "Percent", "value": 100, "periodSeconds": 15}]),
                );
            }
        }
    }
}

fn validate_hpa_spec(spec: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let min = spec.get("minReplicas").and_then(Value::as_i64);
    let max = spec.get("maxReplicas").and_then(Value::as_i64).unwrap_or(0);
    if let Some(min) = min
        && min < 1
    {
        errs.push(FieldError::invalid(
            "spec.minReplicas",
            &min.to_string(),
            "must be greater than or equal to 1",
        ));
    }
    if max < 1 {
        errs.push(FieldError::invalid(
            "spec.maxReplicas",
            &max.to_string(),
            "must be greater than 0",
        ));
    }
    if let Some(min) = min
        && max < min
    {
        errs.push(FieldError::invalid(
            "spec.maxReplicas",
            &max.to_string(),
            "must be greater than or equal to `minReplicas`",
        ));
    }
    let r = spec.get("scaleTargetRef").unwrap_or(&Value::Null);
    for field in ["kind", "name"] {
        let v = s(r, field);
        let p = format!("spec.scaleTargetRef.{field}");
        if v.is_empty() {
            errs.push(FieldError::required(p, ""));
        } else {
            for bad in ["/", "%"] {
                if v.contains(bad) {
                    errs.push(FieldError::invalid(
                        &p,
                        &go_quote(v),
                        &format!("may not contain '{bad}'"),
                    ));
                }
            }
            if v == "." || v == ".." {
                errs.push(FieldError::invalid(
                    &p,
                    &go_quote(v),
                    &format!("may not be '{v}'"),
                ));
            }
        }
    }
    let has_object_or_external = validate_metrics(spec, &mut errs);
    if min == Some(0) && !has_object_or_external {
        errs.push(FieldError::forbidden(
            "spec.metrics",
            "must specify at least one Object or External metric to support scaling to zero replicas",
        ));
    }
    if let Some(b) = spec.get("behavior") {
        validate_behavior(b, &mut errs);
    }
    errs
}

/// `spec.metrics`; true when one is an Object or External metric (which allows scaling to zero).
fn validate_metrics(spec: &Value, errs: &mut Vec<FieldError>) -> bool {
    let mut has_object_or_external = false;
    for (i, m) in arr(spec, "metrics").iter().enumerate() {
        let p = format!("spec.metrics[{i}]");
        let ty = s(m, "type");
        let source_field = match ty {
            "Object" => "object",
            "Pods" => "pods",
            "Resource" => "resource",
            "ContainerResource" => "containerResource",
            "External" => "external",
            "" => {
                errs.push(FieldError::required(
                    format!("{p}.type"),
                    "must specify a metric source type",
                ));
                continue;
            }
            other => {
                errs.push(FieldError::not_supported(
                    format!("{p}.type"),
                    &go_quote(other),
                    &[
                        "ContainerResource",
                        "External",
                        "Object",
                        "Pods",
                        "Resource",
                    ],
                ));
                continue;
            }
        };
        if ty == "Object" || ty == "External" {
            has_object_or_external = true;
        }
        let Some(src) = m.get(source_field) else {
            errs.push(FieldError::required(
                format!("{p}.{source_field}"),
                "must populate information for the given metric source",
            ));
            continue;
        };
        if ty == "Resource" || ty == "ContainerResource" {
            if s(src, "name").is_empty() {
                errs.push(FieldError::required(
                    format!("{p}.{source_field}.name"),
                    "must specify a resource name",
                ));
            }
            let t = src.get("target").unwrap_or(&Value::Null);
            let tp = format!("{p}.{source_field}.target");
            match s(t, "type") {
                "Utilization" | "Value" | "AverageValue" => {}
                "" => errs.push(FieldError::required(
                    format!("{tp}.type"),
                    "must specify a metric target type",
                )),
                other => errs.push(FieldError::not_supported(
                    format!("{tp}.type"),
                    &go_quote(other),
                    &["AverageValue", "Utilization", "Value"],
                )),
            }
            if let Some(u) = t.get("averageUtilization").and_then(Value::as_i64)
                && u < 1
            {
                errs.push(FieldError::invalid(
                    format!("{tp}.averageUtilization"),
                    &u.to_string(),
                    "must be greater than 0",
                ));
            }
            if t.get("averageUtilization").is_none()
                && t.get("averageValue").is_none()
                && t.get("value").is_none()
            {
                errs.push(FieldError::required(
                    tp.clone(),
                    "must set either a target raw value or a target utilization",
                ));
            }
        }
    }
    has_object_or_external
}

/// `spec.behavior`: stabilization windows and scaling policies.
fn validate_behavior(b: &Value, errs: &mut Vec<FieldError>) {
    for dir in ["scaleUp", "scaleDown"] {
        let Some(rules) = b.get(dir) else { continue };
        let p = format!("spec.behavior.{dir}");
        if let Some(w) = rules
            .get("stabilizationWindowSeconds")
            .and_then(Value::as_i64)
        {
            if w < 0 {
                errs.push(FieldError::invalid(
                    format!("{p}.stabilizationWindowSeconds"),
                    &w.to_string(),
                    "must be greater than or equal to zero",
                ));
            } else if w > 3600 {
                errs.push(FieldError::invalid(
                    format!("{p}.stabilizationWindowSeconds"),
                    &w.to_string(),
                    "must be less than or equal to 3600",
                ));
            }
        }
        for (i, pol) in arr(rules, "policies").iter().enumerate() {
            let pp = format!("{p}.policies[{i}]");
            let v = pol.get("value").and_then(Value::as_i64).unwrap_or(0);
            if v <= 0 {
                errs.push(FieldError::invalid(
                    format!("{pp}.value"),
                    &v.to_string(),
                    "must be greater than zero",
                ));
            }
            let ps = pol
                .get("periodSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if ps <= 0 {
                errs.push(FieldError::invalid(
                    format!("{pp}.periodSeconds"),
                    &ps.to_string(),
                    "must be greater than zero",
                ));
            } else if ps > 1800 {
                errs.push(FieldError::invalid(
                    format!("{pp}.periodSeconds"),
                    &ps.to_string(),
                    "must be less than or equal to 1800",
                ));
            }
        }
    }
}
