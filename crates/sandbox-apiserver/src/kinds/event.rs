//! Event (`v1`, the `events` resource): what kubelets, schedulers and controllers report about
//! an object. No spec, no status, no generation; the legacy validation the v1 API applies
//! (`legacyValidateEvent`); the field selectors the v1 Event conversion accepts (the involved
//! object's kind, name, namespace, uid, apiVersion, resourceVersion and fieldPath, `reason`,
//! `type`, `source` — the source component, else the reporting controller —,
//! `reportingComponent`); the `kubectl get events` columns.

use serde_json::{Value, json};

use super::table::{column, human_duration, name_column, st};
use super::validate::bad_value;
use super::{Kind, Subresource};
use crate::model::ApiResource;
use crate::model::names::is_qualified_name;
use crate::model::schema;
use crate::model::status::{FieldError, go_quote};
use crate::model::time;

pub struct Event;

pub static EVENT: Event = Event;

static API: ApiResource = ApiResource {
    group: "",
    version: "v1",
    api_version: "v1",
    resource: "events",
    kind: "Event",
    list_kind: "EventList",
    namespaced: true,
};

const FIELD_LABELS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

impl Kind for Event {
    fn api(&self) -> &'static ApiResource {
        &API
    }

    fn schema(&self) -> usize {
        schema::EVENT
    }

    fn subresources(&self) -> &'static [Subresource] {
        &[]
    }

    fn validate(&self, obj: &Value, _old: Option<&Value>) -> Vec<FieldError> {
        legacy_validate_event(obj)
    }

    fn field_labels(&self) -> &'static [&'static str] {
        FIELD_LABELS
    }

    fn field_value(&self, obj: &Value, label: &str) -> Option<String> {
        Some(match label {
            "source" => match st(obj, "/source/component") {
                "" => st(obj, "/reportingComponent").to_string(),
                c => c.to_string(),
            },
            other => {
                let ptr = format!("/{}", other.replace('.', "/"));
                st(obj, &ptr).to_string()
            }
        })
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            column(
                "Last Seen",
                "string",
                "",
                "The time at which the most recent occurrence of this event was recorded.",
                0,
            ),
            column(
                "Type",
                "string",
                "",
                "Type of this event (Normal, Warning), new types could be added in the future",
                0,
            ),
            column(
                "Reason",
                "string",
                "",
                "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
                0,
            ),
            column(
                "Object",
                "string",
                "",
                "The object that this event is about.",
                0,
            ),
            column(
                "Subobject",
                "string",
                "",
                "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: \"spec.containers{name}\" (where \"name\" refers to the name of the container that triggered the event) or if no container name is specified \"spec.containers[2]\" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.",
                1,
            ),
            column(
                "Source",
                "string",
                "",
                "The component reporting this event. Should be a short machine understandable string.",
                1,
            ),
            column(
                "Message",
                "string",
                "",
                "A human-readable description of the status of this operation.",
                0,
            ),
            column(
                "First Seen",
                "string",
                "",
                "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
                1,
            ),
            column(
                "Count",
                "string",
                "",
                "The number of times this event has occurred.",
                1,
            ),
            {
                let mut c = name_column();
                c["priority"] = json!(1);
                c
            },
        ]
    }

    fn table_cells(&self, obj: &Value, now: i64) -> Vec<Value> {
        let since = |ptr: &str| {
            obj.pointer(ptr)
                .and_then(Value::as_str)
                .and_then(time::parse_rfc3339)
                .map(|t| human_duration(now - t))
        };
        let first = since("/firstTimestamp")
            .or_else(|| since("/eventTime"))
            .unwrap_or_else(|| "<unknown>".into());
        let mut last = since("/lastTimestamp").unwrap_or_else(|| first.clone());
        let mut count = obj.get("count").and_then(Value::as_i64).unwrap_or(0);
        if obj.get("series").is_some_and(|s| !s.is_null()) {
            last = since("/series/lastObservedTime").unwrap_or_else(|| "<unknown>".into());
            count = obj
                .pointer("/series/count")
                .and_then(Value::as_i64)
                .unwrap_or(0);
        } else if count == 0 {
            count = 1;
        }
        let kind = st(obj, "/involvedObject/kind").to_lowercase();
        let name = st(obj, "/involvedObject/name");
        let target = if name.is_empty() {
            kind
        } else {
            format!("{kind}/{name}")
        };
        let first_non_empty = |a: &str, b: &str| {
            if a.is_empty() {
                b.to_string()
            } else {
                a.to_string()
            }
        };
        let component =
            first_non_empty(st(obj, "/source/component"), st(obj, "/reportingComponent"));
        let instance = first_non_empty(st(obj, "/source/host"), st(obj, "/reportingInstance"));
        let source = if instance.is_empty() {
            component
        } else {
            format!("{component}, {instance}")
        };
        vec![
            json!(last),
            json!(st(obj, "/type")),
            json!(st(obj, "/reason")),
            json!(target),
            json!(st(obj, "/involvedObject/fieldPath")),
            json!(source),
            json!(st(obj, "/message").trim()),
            json!(first),
            json!(count),
            json!(st(obj, "/metadata/name")),
        ]
    }
}

/// `legacyValidateEvent` for a request through the v1 API: an event without `eventTime` names
/// its own namespace as the involved object's; one with it says who reports what.
fn legacy_validate_event(ev: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let ns = st(ev, "/metadata/namespace");
    let involved_ns = st(ev, "/involvedObject/namespace");
    let mismatch = || {
        FieldError::invalid(
            "involvedObject.namespace",
            &go_quote(involved_ns),
            "does not match event.namespace",
        )
    };
    let event_time = ev.get("eventTime").is_some_and(|t| !t.is_null());
    if !event_time {
        if involved_ns.is_empty() {
            if !ns.is_empty() && ns != "default" {
                errs.push(mismatch());
            }
        } else if ns != involved_ns {
            errs.push(mismatch());
        }
    } else {
        if involved_ns.is_empty() && ns != "default" && ns != "kube-system" {
            errs.push(mismatch());
        }
        let controller = st(ev, "/reportingComponent");
        if controller.is_empty() {
            errs.push(FieldError::required("reportingComponent", ""));
        }
        for m in is_qualified_name(controller) {
            errs.push(FieldError::invalid(
                "reportingComponent",
                &bad_value(&json!(controller)),
                &m,
            ));
        }
        let instance = st(ev, "/reportingInstance");
        if instance.is_empty() {
            errs.push(FieldError::required("reportingInstance", ""));
        }
        if instance.len() > 128 {
            errs.push(FieldError::invalid(
                "reportingInstance",
                "\"\"",
                "can have at most 128 characters",
            ));
        }
        let action = st(ev, "/action");
        if action.is_empty() {
            errs.push(FieldError::required("action", ""));
        }
        if action.len() > 128 {
            errs.push(FieldError::invalid(
                "action",
                "\"\"",
                "can have at most 128 characters",
            ));
        }
        let reason = st(ev, "/reason");
        if reason.is_empty() {
            errs.push(FieldError::required("reason", ""));
        }
        if reason.len() > 128 {
            errs.push(FieldError::invalid(
                "reason",
                "\"\"",
                "can have at most 128 characters",
            ));
        }
        if st(ev, "/message").len() > 1024 {
            errs.push(FieldError::invalid(
                "message",
                "\"\"",
                "can have at most 1024 characters",
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_old_style_event_names_its_own_namespace() {
        let ok =
            json!({"metadata": {"namespace": "shop"}, "involvedObject": {"namespace": "shop"}});
        assert!(legacy_validate_event(&ok).is_empty());
        let other =
            json!({"metadata": {"namespace": "shop"}, "involvedObject": {"namespace": "web"}});
        assert_eq!(
            legacy_validate_event(&other)[0].text(),
            "involvedObject.namespace: Invalid value: \"web\": does not match event.namespace"
        );
    }

    #[test]
    fn the_source_selector_falls_back_to_the_reporting_controller() {
        let ev = json!({"source": {}, "reportingComponent": "default-scheduler"});
        assert_eq!(
            EVENT.field_value(&ev, "source").as_deref(),
            Some("default-scheduler")
        );
        let ev = json!({"source": {"component": "kubelet"}, "reportingComponent": "kubelet"});
        assert_eq!(EVENT.field_value(&ev, "source").as_deref(), Some("kubelet"));
    }
}
