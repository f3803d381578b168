//! `kubectl get` tables: the helpers every kind's columns use (Name and Age columns, ages as
//! `duration.HumanDuration` prints them).

use serde_json::{Map, Value, json};

use crate::model::time;

/// One column definition.
pub(super) fn column(
    name: &str,
    ty: &str,
    format: &str,
    description: &str,
    priority: i64,
) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": description, "priority": priority})
}

/// An object's age, `<unknown>` without a creationTimestamp.
pub(super) fn age(obj: &Value, now: i64) -> String {
    let Some(t) = obj
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(time::parse_rfc3339)
    else {
        return "<unknown>".into();
    };
    human_duration(now - t)
}

/// `duration.HumanDuration`.
pub fn human_duration(secs: i64) -> String {
    let s = secs.max(0);
    if s < 60 * 2 {
        return format!("{s}s");
    }
    let m = s / 60;
    if m < 10 {
        let rs = s % 60;
        return if rs == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{rs}s")
        };
    }
    if m < 60 * 3 {
        return format!("{m}m");
    }
    let h = s / 3600;
    if h < 8 {
        let rm = m % 60;
        return if rm == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{rm}m")
        };
    }
    if h < 48 {
        return format!("{h}h");
    }
    if h < 24 * 8 {
        let d = h / 24;
        let rh = h % 24;
        return if rh == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{rh}h")
        };
    }
    if h < 24 * 365 * 2 {
        return format!("{}d", h / 24);
    }
    if h < 24 * 365 * 8 {
        let y = h / 24 / 365;
        let dy = (h / 24) % 365;
        return if dy == 0 {
            format!("{y}y")
        } else {
            format!("{y}y{dy}d")
        };
    }
    format!("{}y", h / 24 / 365)
}

/// An integer at a JSON pointer, 0 when absent.
pub(super) fn i(obj: &Value, ptr: &str) -> i64 {
    obj.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

/// A string at a JSON pointer, `""` when absent.
pub(super) fn st<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

/// A `map[string]string` selector as `a=b,c=d`, `<none>` when empty.
pub(super) fn selector_text(sel: Option<&Map<String, Value>>) -> String {
    match sel {
        None => "<none>".into(),
        Some(m) if m.is_empty() => "<none>".into(),
        Some(m) => {
            let mut items: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect();
            items.sort();
            items.join(",")
        }
    }
}

/// The Name column every kind's table starts with.
pub(super) fn name_column() -> Value {
    column(
        "Name",
        "string",
        "name",
        "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
        0,
    )
}

/// The Age column (its place differs per kind).
pub(super) fn age_column() -> Value {
    column(
        "Age",
        "string",
        "",
        "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
        0,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(125), "2m5s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(3 * 3600 + 60), "3h1m");
        assert_eq!(human_duration(30 * 3600), "30h");
    }
}
