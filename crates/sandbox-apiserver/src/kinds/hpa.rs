//! HorizontalPodAutoscaler (`autoscaling/v2`): defaults (the CPU metric, scaling behaviour
//! policies), `ValidateHorizontalPodAutoscalerSpec`, and the printer's columns.

use serde_json::{Value, json};

use super::table::{age, age_column, column, i, name_column, st};
use super::validate::{arr, s};
use super::{Kind, map_mut, set_default};
use crate::model::ApiResource;
use crate::model::names::{is_dns1123_label, is_qualified_name, is_valid_path_segment_name};
use crate::model::quantity;
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

    fn validate_status(&self, obj: &Value, _old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        for f in ["currentReplicas", "desiredReplicas"] {
            if let Some(n) = obj.pointer(&format!("/status/{f}")).and_then(Value::as_i64)
                && n < 0
            {
                errs.push(FieldError::invalid(
                    format!("status.{f}"),
                    &n.to_string(),
                    "must be greater than or equal to 0",
                ));
            }
        }
        errs
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column(
                "Reference",
                "string",
                "",
                "scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics should be collected, as well as to actually change the replica count.",
                0,
            ),
            column(
                "Targets",
                "string",
                "",
                "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).  The desired replica count is calculated multiplying the ratio between the target value and the current value by the current number of pods.  Ergo, metrics used must decrease as the pod count is increased, and vice-versa.  See the individual metric source types for more information about how each type of metric must respond.",
                0,
            ),
            column(
                "MinPods",
                "string",
                "",
                "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.  It defaults to 1 pod.  minReplicas is allowed to be 0 if the alpha feature gate HPAScaleToZero is enabled and at least one Object or External metric is configured.  Scaling is active as long as at least one metric value is available.",
                0,
            ),
            column(
                "MaxPods",
                "string",
                "",
                "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up. It cannot be less that minReplicas.",
                0,
            ),
            column(
                "Replicas",
                "string",
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
        vec![
            name,
            json!(reference),
            json!(format_metrics(obj)),
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

/// The printer's TARGETS (`formatHPAMetrics`): `current/target` of each metric, the current
/// value from the status entry at the same index; two shown, then `+ N more...`.
fn format_metrics(obj: &Value) -> String {
    let empty = Vec::new();
    let specs = obj
        .pointer("/spec/metrics")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    if specs.is_empty() {
        return "<none>".into();
    }
    let statuses = obj
        .pointer("/status/currentMetrics")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    // A quantity as `Quantity.String()` prints it (a nil one as `<nil>`).
    let q = |v: Option<&Value>| match v.and_then(Value::as_str) {
        Some(s) => s.to_string(),
        None => "<nil>".to_string(),
    };
    let list: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let source = |f: &str| spec.get(f).filter(|v| !v.is_null());
            let status = |f: &str| {
                statuses
                    .get(i)
                    .and_then(|s| s.get(f))
                    .filter(|v| !v.is_null())
            };
            let avg_or_value = |f: &str| {
                let src = source(f);
                let target_avg = src.and_then(|s| s.pointer("/target/averageValue"));
                match target_avg.filter(|v| !v.is_null()) {
                    Some(t) => {
                        let current = status(f)
                            .and_then(|s| s.pointer("/current/averageValue"))
                            .filter(|v| !v.is_null())
                            .map_or("<unknown>".to_string(), |c| q(Some(c)));
                        format!("{current}/{} (avg)", q(Some(t)))
                    }
                    None => {
                        let current = status(f)
                            .map_or("<unknown>".to_string(), |s| q(s.pointer("/current/value")));
                        format!(
                            "{current}/{}",
                            q(src.and_then(|s| s.pointer("/target/value")))
                        )
                    }
                }
            };
            let resource = |f: &str| {
                let src = source(f);
                match src
                    .and_then(|s| s.pointer("/target/averageValue"))
                    .filter(|v| !v.is_null())
                {
                    Some(t) => {
                        let current = status(f).map_or("<unknown>".to_string(), |s| {
                            q(s.pointer("/current/averageValue"))
                        });
                        format!("{current}/{}", q(Some(t)))
                    }
                    None => {
                        let current = status(f)
                            .and_then(|s| s.pointer("/current/averageUtilization"))
                            .and_then(Value::as_i64)
                            .map_or("<unknown>".to_string(), |u| format!("{u}%"));
                        let target = src
                            .and_then(|s| s.pointer("/target/averageUtilization"))
                            .and_then(Value::as_i64)
                            .map_or("<auto>".to_string(), |u| format!("{u}%"));
                        format!("{current}/{target}")
                    }
                }
            };
            match spec.get("type").and_then(Value::as_str).unwrap_or("") {
                "External" => avg_or_value("external"),
                "Object" => avg_or_value("object"),
                "Pods" => {
                    let current = status("pods").map_or("<unknown>".to_string(), |s| {
                        q(s.pointer("/current/averageValue"))
                    });
                    format!(
                        "{current}/{}",
                        q(source("pods").and_then(|s| s.pointer("/target/averageValue")))
                    )
                }
                "Resource" => resource("resource"),
                "ContainerResource" => resource("containerResource"),
                _ => "<unknown type>".to_string(),
            }
        })
        .collect();
    if list.len() > 2 {
        format!("{} + {} more...", list[..2].join(", "), list.len() - 2)
    } else {
        list.join(", ")
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
    errs.extend(object_reference(
        spec.get("scaleTargetRef").unwrap_or(&Value::Null),
        "spec.scaleTargetRef",
    ));
    let has_object_or_external = validate_metrics(spec, &mut errs);
    if min == Some(0) && !has_object_or_external {
        errs.push(FieldError::forbidden(
            "spec.metrics",
            "must specify at least one Object or External metric to support scaling to zero replicas",
        ));
    }
    if let Some(b) = spec.get("behavior").filter(|b| !b.is_null()) {
        validate_behavior(b, &mut errs);
    }
    errs
}

/// `IsValidPathSegmentName` errors of a name or kind, or Required when empty (`detail`).
fn path_segment(v: &str, p: &str, detail: &str, errs: &mut Vec<FieldError>) {
    if v.is_empty() {
        errs.push(FieldError::required(p, detail));
    } else {
        for m in is_valid_path_segment_name(v) {
            errs.push(FieldError::invalid(p, &go_quote(v), &m));
        }
    }
}

/// `ValidateCrossVersionObjectReference`.
fn object_reference(r: &Value, p: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    path_segment(s(r, "kind"), &format!("{p}.kind"), "", &mut errs);
    path_segment(s(r, "name"), &format!("{p}.name"), "", &mut errs);
    errs
}

const METRIC_TYPES: &[&str] = &[
    "ContainerResource",
    "External",
    "Object",
    "Pods",
    "Resource",
];

/// `spec.metrics` (`validateMetrics`); true when one is an Object or External metric (which
/// allows scaling to zero).
fn validate_metrics(spec: &Value, errs: &mut Vec<FieldError>) -> bool {
    let mut has_object_or_external = false;
    for (i, m) in arr(spec, "metrics").iter().enumerate() {
        errs.extend(validate_metric_spec(m, &format!("spec.metrics[{i}]")));
        if matches!(s(m, "type"), "Object" | "External") {
            has_object_or_external = true;
        }
    }
    has_object_or_external
}

/// `validateMetricSpec`.
fn validate_metric_spec(m: &Value, p: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let ty = s(m, "type");
    if ty.is_empty() {
        errs.push(FieldError::required(
            format!("{p}.type"),
            "must specify a metric source type",
        ));
    }
    let unsupported =
        || FieldError::not_supported(format!("{p}.type"), &go_quote(ty), METRIC_TYPES);
    if !METRIC_TYPES.contains(&ty) {
        errs.push(unsupported());
    }
    let present: Vec<&str> = [
        "object",
        "external",
        "pods",
        "resource",
        "containerResource",
    ]
    .into_iter()
    .filter(|f| m.get(*f).is_some_and(|v| !v.is_null()))
    .collect();
    if let Some(first) = present.first() {
        let src = &m[*first];
        let sp = format!("{p}.{first}");
        errs.extend(match *first {
            "object" => object_source(src, &sp),
            "external" => external_source(src, &sp),
            "pods" => pods_source(src, &sp),
            "resource" => resource_source(src, &sp, false),
            _ => resource_source(src, &sp, true),
        });
    }
    let expected = match ty {
        "Object" => "object",
        "Pods" => "pods",
        "Resource" => "resource",
        "External" => "external",
        "ContainerResource" => "containerResource",
        _ => {
            errs.push(unsupported());
            ""
        }
    };
    if !expected.is_empty() && !present.contains(&expected) {
        errs.push(FieldError::required(
            format!("{p}.{expected}"),
            "must populate information for the given metric source",
        ));
    }
    if present.len() != 1 {
        // A Go set: the order of the others is a map's.
        let mut others: Vec<&str> = present.into_iter().filter(|t| *t != expected).collect();
        others.sort();
        for t in others {
            errs.push(FieldError::forbidden(
                format!("{p}.{t}"),
                "must populate the given metric source only",
            ));
        }
    }
    errs
}

/// `validateMetricTarget`.
fn metric_target(t: &Value, p: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let ty = s(t, "type");
    if ty.is_empty() {
        errs.push(FieldError::required(
            format!("{p}.type"),
            "must specify a metric target type",
        ));
    }
    if !matches!(ty, "Utilization" | "Value" | "AverageValue") {
        errs.push(FieldError::invalid(
            format!("{p}.type"),
            &go_quote(ty),
            "must be either Utilization, Value, or AverageValue",
        ));
    }
    for f in ["value", "averageValue"] {
        if let Some(q) = t.get(f).and_then(Value::as_str)
            && quantity::to_f64(q).is_none_or(|v| v <= 0.0)
        {
            errs.push(FieldError::invalid(
                format!("{p}.{f}"),
                q,
                "must be positive",
            ));
        }
    }
    if let Some(u) = t.get("averageUtilization").and_then(Value::as_i64)
        && u < 1
    {
        errs.push(FieldError::invalid(
            format!("{p}.averageUtilization"),
            &u.to_string(),
            "must be greater than 0",
        ));
    }
    errs
}

fn has(v: &Value, f: &str) -> bool {
    v.get(f).is_some_and(|x| !x.is_null())
}

/// `validateMetricIdentifier`.
fn metric_identifier(src: &Value, p: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let metric = src.get("metric").unwrap_or(&Value::Null);
    path_segment(
        s(metric, "name"),
        &format!("{p}.metric.name"),
        "must specify a metric name",
        &mut errs,
    );
    errs
}

fn object_source(src: &Value, p: &str) -> Vec<FieldError> {
    let mut errs = object_reference(
        src.get("describedObject").unwrap_or(&Value::Null),
        &format!("{p}.describedObject"),
    );
    errs.extend(metric_identifier(src, p));
    let t = src.get("target").unwrap_or(&Value::Null);
    errs.extend(metric_target(t, &format!("{p}.target")));
    if !has(t, "value") && !has(t, "averageValue") {
        errs.push(FieldError::required(
            format!("{p}.target.averageValue"),
            "must set either a target value or averageValue",
        ));
    }
    errs
}

fn external_source(src: &Value, p: &str) -> Vec<FieldError> {
    let mut errs = metric_identifier(src, p);
    let t = src.get("target").unwrap_or(&Value::Null);
    errs.extend(metric_target(t, &format!("{p}.target")));
    if !has(t, "value") && !has(t, "averageValue") {
        errs.push(FieldError::required(
            format!("{p}.target.averageValue"),
            "must set either a target value for metric or a per-pod target",
        ));
    }
    if has(t, "value") && has(t, "averageValue") {
        errs.push(FieldError::forbidden(
            format!("{p}.target.value"),
            "may not set both a target value for metric and a per-pod target",
        ));
    }
    errs
}

fn pods_source(src: &Value, p: &str) -> Vec<FieldError> {
    let mut errs = metric_identifier(src, p);
    let t = src.get("target").unwrap_or(&Value::Null);
    errs.extend(metric_target(t, &format!("{p}.target")));
    if !has(t, "averageValue") {
        errs.push(FieldError::required(
            format!("{p}.target.averageValue"),
            "must specify a positive target averageValue",
        ));
    }
    errs
}

/// `validateResourceSource` / `validateContainerResourceSource`.
fn resource_source(src: &Value, p: &str, container: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = s(src, "name");
    if name.is_empty() {
        errs.push(FieldError::required(
            format!("{p}.name"),
            "must specify a resource name",
        ));
    } else if container {
        for m in is_qualified_name(name) {
            errs.push(FieldError::invalid(
                format!("{p}.name"),
                &go_quote(name),
                &m,
            ));
        }
        if !name.contains('/')
            && !["cpu", "memory", "ephemeral-storage"].contains(&name)
            && !name.starts_with("hugepages-")
        {
            errs.push(FieldError::invalid(
                format!("{p}.name"),
                &go_quote(name),
                "must be a standard resource for containers",
            ));
        }
    }
    if container {
        let c = s(src, "container");
        if c.is_empty() {
            errs.push(FieldError::required(
                format!("{p}.container"),
                "must specify a container",
            ));
        } else {
            for m in is_dns1123_label(c) {
                errs.push(FieldError::invalid(
                    format!("{p}.container"),
                    &go_quote(c),
                    &m,
                ));
            }
        }
    }
    let t = src.get("target").unwrap_or(&Value::Null);
    errs.extend(metric_target(t, &format!("{p}.target")));
    if !has(t, "averageUtilization") && !has(t, "averageValue") {
        errs.push(FieldError::required(
            format!("{p}.target.averageUtilization"),
            "must set either a target raw value or a target utilization",
        ));
    }
    if has(t, "averageUtilization") && has(t, "averageValue") {
        errs.push(FieldError::forbidden(
            format!("{p}.target.averageValue"),
            "may not set both a target raw value and a target utilization",
        ));
    }
    errs
}

/// `spec.behavior` (`validateBehavior`): stabilization windows, select policies, policies.
fn validate_behavior(b: &Value, errs: &mut Vec<FieldError>) {
    for dir in ["scaleUp", "scaleDown"] {
        let Some(rules) = b.get(dir).filter(|r| !r.is_null()) else {
            continue;
        };
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
            }
            if w > 3600 {
                errs.push(FieldError::invalid(
                    format!("{p}.stabilizationWindowSeconds"),
                    &w.to_string(),
                    "must be less than or equal to 3600",
                ));
            }
        }
        if let Some(sp) = rules.get("selectPolicy").and_then(Value::as_str)
            && !["Disabled", "Max", "Min"].contains(&sp)
        {
            errs.push(FieldError::not_supported(
                format!("{p}.selectPolicy"),
                &go_quote(sp),
                &["Disabled", "Max", "Min"],
            ));
        }
        let policies = arr(rules, "policies");
        if policies.is_empty() {
            errs.push(FieldError::required(
                format!("{p}.policies"),
                "must specify at least one Policy",
            ));
        }
        for (i, pol) in policies.iter().enumerate() {
            let pp = format!("{p}.policies[{i}]");
            let ty = s(pol, "type");
            if ty != "Pods" && ty != "Percent" {
                errs.push(FieldError::not_supported(
                    format!("{pp}.type"),
                    &go_quote(ty),
                    &["Percent", "Pods"],
                ));
            }
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
            }
            if ps > 1800 {
                errs.push(FieldError::invalid(
                    format!("{pp}.periodSeconds"),
                    &ps.to_string(),
                    "must be less than or equal to 1800",
                ));
            }
        }
    }
}
