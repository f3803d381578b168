//! HorizontalPodAutoscaler as `autoscaling/v1` serves it: the stored (`autoscaling/v2`)
//! objects converted on the way out, as `Convert_autoscaling_HorizontalPodAutoscaler_To_v1_…`
//! does — the first CPU utilization metric becomes `targetCPUUtilizationPercentage`, the other
//! metrics, the current metrics, the behavior and the conditions travel in the
//! `autoscaling.alpha.kubernetes.io/*` annotations. Reads only: writes through this version
//! are refused (405), not half-converted.

use serde_json::{Map, Value, json};

use super::hpa::HORIZONTAL_POD_AUTOSCALER;
use super::{Kind, Subresource};
use crate::model::ApiResource;
use crate::model::gojson;
use crate::model::schema;

pub struct HorizontalPodAutoscalerV1;

pub static HORIZONTAL_POD_AUTOSCALER_V1: HorizontalPodAutoscalerV1 = HorizontalPodAutoscalerV1;

static API: ApiResource = ApiResource {
    group: "autoscaling",
    version: "v1",
    api_version: "autoscaling/v1",
    resource: "horizontalpodautoscalers",
    kind: "HorizontalPodAutoscaler",
    list_kind: "HorizontalPodAutoscalerList",
    namespaced: true,
};

const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
const CURRENT_METRICS: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
const BEHAVIOR: &str = "autoscaling.alpha.kubernetes.io/behavior";
const CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";

impl Kind for HorizontalPodAutoscalerV1 {
    fn api(&self) -> &'static ApiResource {
        &API
    }

    fn schema(&self) -> usize {
        schema::HORIZONTAL_POD_AUTOSCALER
    }

    fn subresources(&self) -> &'static [Subresource] {
        &[Subresource::Status]
    }

    fn verbs(&self) -> &'static [&'static str] {
        &["get", "list", "watch"]
    }

    fn convert_out(&self, obj: &Value) -> Option<Value> {
        if obj.get("apiVersion").and_then(Value::as_str) == Some(API.api_version) {
            return None;
        }
        Some(to_v1(obj))
    }

    // The printer works on the stored object, whatever the version asked for.
    fn table_columns(&self) -> Vec<Value> {
        HORIZONTAL_POD_AUTOSCALER.table_columns()
    }

    fn table_cells(&self, obj: &Value, now: i64) -> Vec<Value> {
        HORIZONTAL_POD_AUTOSCALER.table_cells(obj, now)
    }
}

/// `json.Marshal` of a value: compact, HTML characters escaped.
fn marshal(v: &Value) -> String {
    let mut s = String::from_utf8(gojson::encode(v, false)).unwrap_or_default();
    s.pop();
    s
}

/// Insert `key` when `v` is present and not null (`omitempty` of a pointer).
fn put_opt(m: &mut Map<String, Value>, key: &str, v: Option<&Value>) {
    if let Some(v) = v.filter(|v| !v.is_null()) {
        m.insert(key.into(), v.clone());
    }
}

/// A `resource.Quantity` value field: its zero is `"0"`.
fn quantity(v: Option<&Value>) -> Value {
    v.filter(|v| !v.is_null()).cloned().unwrap_or(json!("0"))
}

fn cross_ref(r: Option<&Value>) -> Value {
    let mut m = Map::new();
    m.insert(
        "kind".into(),
        r.and_then(|r| r.get("kind")).cloned().unwrap_or(json!("")),
    );
    m.insert(
        "name".into(),
        r.and_then(|r| r.get("name")).cloned().unwrap_or(json!("")),
    );
    if let Some(av) = r
        .and_then(|r| r.get("apiVersion"))
        .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
    {
        m.insert("apiVersion".into(), av.clone());
    }
    Value::Object(m)
}

/// Which side of a metric: the spec's target or the status's current value.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Target,
    Current,
}

/// A v2 `MetricSpec` (`Side::Target`) or `MetricStatus` (`Side::Current`) as `autoscaling/v1`
/// writes it: the values flattened into `target…`/`current…` fields, a `resource.Quantity`
/// value field `"0"` when absent, a pointer one left out.
fn metric_v1(m: &Value, side: Side) -> Value {
    let (src, prefix) = match side {
        Side::Target => ("target", "target"),
        Side::Current => ("current", "current"),
    };
    let val = |s: &Value, f: &str| s.pointer(&format!("/{src}/{f}")).cloned();
    let named = |f: &str| format!("{prefix}{f}");
    let mut out = Map::new();
    out.insert("type".into(), m.get("type").cloned().unwrap_or(json!("")));
    let source = |f: &str| m.get(f).filter(|v| !v.is_null());
    let metric_name = |s: &Value| s.pointer("/metric/name").cloned().unwrap_or(json!(""));
    if let Some(o) = source("object") {
        let mut s = Map::new();
        s.insert("target".into(), cross_ref(o.get("describedObject")));
        s.insert("metricName".into(), metric_name(o));
        s.insert(named("Value"), quantity(val(o, "value").as_ref()));
        put_opt(&mut s, "selector", o.pointer("/metric/selector"));
        put_opt(&mut s, "averageValue", val(o, "averageValue").as_ref());
        out.insert("object".into(), Value::Object(s));
    }
    if let Some(p) = source("pods") {
        let mut s = Map::new();
        s.insert("metricName".into(), metric_name(p));
        s.insert(
            named("AverageValue"),
            quantity(val(p, "averageValue").as_ref()),
        );
        put_opt(&mut s, "selector", p.pointer("/metric/selector"));
        out.insert("pods".into(), Value::Object(s));
    }
    for (field, container) in [("resource", false), ("containerResource", true)] {
        if let Some(r) = source(field) {
            let mut s = Map::new();
            s.insert("name".into(), r.get("name").cloned().unwrap_or(json!("")));
            put_opt(
                &mut s,
                &named("AverageUtilization"),
                val(r, "averageUtilization").as_ref(),
            );
            match side {
                Side::Target => put_opt(
                    &mut s,
                    "targetAverageValue",
                    val(r, "averageValue").as_ref(),
                ),
                Side::Current => {
                    s.insert(
                        "currentAverageValue".into(),
                        quantity(val(r, "averageValue").as_ref()),
                    );
                }
            }
            if container {
                s.insert(
                    "container".into(),
                    r.get("container").cloned().unwrap_or(json!("")),
                );
            }
            out.insert(field.into(), Value::Object(s));
        }
    }
    if let Some(e) = source("external") {
        let mut s = Map::new();
        s.insert("metricName".into(), metric_name(e));
        put_opt(&mut s, "metricSelector", e.pointer("/metric/selector"));
        match side {
            Side::Target => put_opt(&mut s, "targetValue", val(e, "value").as_ref()),
            Side::Current => {
                s.insert("currentValue".into(), quantity(val(e, "value").as_ref()));
            }
        }
        put_opt(
            &mut s,
            &named("AverageValue"),
            val(e, "averageValue").as_ref(),
        );
        out.insert("external".into(), Value::Object(s));
    }
    Value::Object(out)
}

/// The internal `HorizontalPodAutoscalerBehavior` as `json.Marshal` writes it: no JSON tags,
/// so Go's field names, nil pointers and slices as `null`.
fn behavior_internal(b: &Value) -> Value {
    let rules = |r: Option<&Value>| match r.filter(|v| !v.is_null()) {
        None => Value::Null,
        Some(r) => {
            let policies = match r.get("policies").and_then(Value::as_array) {
                None => Value::Null,
                Some(ps) => Value::Array(
                    ps.iter()
                        .map(|p| {
                            json!({
                                "Type": p.get("type").cloned().unwrap_or(json!("")),
                                "Value": p.get("value").cloned().unwrap_or(json!(0)),
                                "PeriodSeconds": p.get("periodSeconds").cloned().unwrap_or(json!(0)),
                            })
                        })
                        .collect(),
                ),
            };
            json!({
                "StabilizationWindowSeconds": r.get("stabilizationWindowSeconds").cloned().unwrap_or(Value::Null),
                "SelectPolicy": r.get("selectPolicy").cloned().unwrap_or(Value::Null),
                "Policies": policies,
            })
        }
    };
    json!({"ScaleUp": rules(b.get("scaleUp")), "ScaleDown": rules(b.get("scaleDown"))})
}

fn condition(c: &Value) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), c.get("type").cloned().unwrap_or(json!("")));
    m.insert(
        "status".into(),
        c.get("status").cloned().unwrap_or(json!("")),
    );
    m.insert(
        "lastTransitionTime".into(),
        c.get("lastTransitionTime").cloned().unwrap_or(Value::Null),
    );
    for f in ["reason", "message"] {
        if let Some(v) = c
            .get(f)
            .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
        {
            m.insert(f.into(), v.clone());
        }
    }
    Value::Object(m)
}

fn is_cpu_utilization(m: &Value) -> bool {
    m.get("type").and_then(Value::as_str) == Some("Resource")
        && m.pointer("/resource/name").and_then(Value::as_str) == Some("cpu")
        && m.pointer("/resource/target/averageUtilization")
            .is_some_and(|v| !v.is_null())
}

/// A stored HorizontalPodAutoscaler (`autoscaling/v2` shape) as `autoscaling/v1` writes it.
pub fn to_v1(obj: &Value) -> Value {
    let empty = Vec::new();
    let spec = obj.get("spec").cloned().unwrap_or(json!({}));
    let status = obj.get("status").cloned().unwrap_or(json!({}));
    let metrics = spec
        .get("metrics")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let current = status
        .get("currentMetrics")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let conditions = status
        .get("conditions")
        .and_then(Value::as_array)
        .unwrap_or(&empty);

    let mut meta = obj.get("metadata").cloned().unwrap_or(json!({}));
    let mut annotations: Option<Map<String, Value>> =
        meta.get("annotations").and_then(Value::as_object).cloned();
    if let Some(a) = annotations.as_mut() {
        for key in [METRICS, BEHAVIOR, CURRENT_METRICS, CONDITIONS] {
            a.remove(key);
        }
    }
    let mut set = |key: &str, v: String| {
        annotations
            .get_or_insert_with(Map::new)
            .insert(key.into(), Value::String(v));
    };
    let other: Vec<Value> = metrics
        .iter()
        .filter(|m| !is_cpu_utilization(m))
        .map(|m| metric_v1(m, Side::Target))
        .collect();
    if !other.is_empty() {
        set(METRICS, marshal(&Value::Array(other)));
    }
    if !current.is_empty() {
        let cur: Vec<Value> = current
            .iter()
            .map(|m| metric_v1(m, Side::Current))
            .collect();
        set(CURRENT_METRICS, marshal(&Value::Array(cur)));
    }
    if let Some(b) = spec.get("behavior").filter(|b| !b.is_null()) {
        set(BEHAVIOR, marshal(&behavior_internal(b)));
    }
    if !conditions.is_empty() {
        let conds: Vec<Value> = conditions.iter().map(condition).collect();
        set(CONDITIONS, marshal(&Value::Array(conds)));
    }
    if let Some(m) = meta.as_object_mut() {
        match annotations {
            Some(a) if !a.is_empty() => {
                // A Go map is written with its keys sorted; ObjectMeta in its field order.
                let mut sorted: Vec<(String, Value)> = a.into_iter().collect();
                sorted.sort_by(|x, y| x.0.cmp(&y.0));
                let had = m.contains_key("annotations");
                m.insert(
                    "annotations".into(),
                    Value::Object(sorted.into_iter().collect()),
                );
                if !had {
                    meta = schema::normalize(schema::OBJECT_META, &meta);
                }
            }
            _ => {
                m.remove("annotations");
            }
        }
    }

    let mut s = Map::new();
    s.insert(
        "scaleTargetRef".into(),
        cross_ref(spec.get("scaleTargetRef")),
    );
    put_opt(&mut s, "minReplicas", spec.get("minReplicas"));
    s.insert(
        "maxReplicas".into(),
        spec.get("maxReplicas").cloned().unwrap_or(json!(0)),
    );
    if let Some(u) = metrics
        .iter()
        .find(|m| is_cpu_utilization(m))
        .and_then(|m| m.pointer("/resource/target/averageUtilization"))
    {
        s.insert("targetCPUUtilizationPercentage".into(), u.clone());
    }

    let mut st = Map::new();
    put_opt(
        &mut st,
        "observedGeneration",
        status.get("observedGeneration"),
    );
    put_opt(&mut st, "lastScaleTime", status.get("lastScaleTime"));
    st.insert(
        "currentReplicas".into(),
        status.get("currentReplicas").cloned().unwrap_or(json!(0)),
    );
    st.insert(
        "desiredReplicas".into(),
        status.get("desiredReplicas").cloned().unwrap_or(json!(0)),
    );
    // The last CPU resource status with a utilization wins, as the conversion loops.
    if let Some(u) = current
        .iter()
        .rev()
        .filter(|m| {
            m.get("type").and_then(Value::as_str) == Some("Resource")
                && m.pointer("/resource/name").and_then(Value::as_str) == Some("cpu")
        })
        .filter_map(|m| m.pointer("/resource/current/averageUtilization"))
        .find(|v| !v.is_null())
    {
        st.insert("currentCPUUtilizationPercentage".into(), u.clone());
    }

    let mut out = Map::new();
    if let Some(o) = obj.as_object() {
        for (k, v) in o {
            if k == "kind" || k == "apiVersion" {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out.insert("metadata".into(), meta);
    out.insert("spec".into(), Value::Object(s));
    out.insert("status".into(), Value::Object(st));
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_target_becomes_the_v1_percentage_and_other_metrics_an_annotation() {
        let v2 = json!({
            "metadata": {"name": "web", "namespace": "n", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
                "minReplicas": 1, "maxReplicas": 5,
                "metrics": [
                    {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}},
                    {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}
                ]},
            "status": {"desiredReplicas": 2}
        });
        let v1 = to_v1(&v2);
        assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 70);
        assert_eq!(
            v1["metadata"]["annotations"][METRICS],
            r#"[{"type":"Pods","pods":{"metricName":"qps","targetAverageValue":"10"}}]"#
        );
        assert_eq!(
            v1["status"],
            json!({"currentReplicas": 0, "desiredReplicas": 2})
        );
        let keys: Vec<&String> = v1["metadata"]
            .as_object()
            .map(|m| m.keys().collect())
            .unwrap_or_default();
        assert_eq!(
            keys,
            ["name", "namespace", "creationTimestamp", "annotations"]
        );
    }

    #[test]
    fn a_behavior_travels_with_the_internal_field_names() {
        let v2 = json!({"metadata": {"name": "w"}, "spec": {"maxReplicas": 1, "behavior": {
            "scaleDown": {"stabilizationWindowSeconds": 300, "selectPolicy": "Max",
                "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}}}});
        assert_eq!(
            to_v1(&v2)["metadata"]["annotations"][BEHAVIOR],
            r#"{"ScaleUp":null,"ScaleDown":{"StabilizationWindowSeconds":300,"SelectPolicy":"Max","Policies":[{"Type":"Percent","Value":100,"PeriodSeconds":15}]}}"#
        );
    }
}
