//! The owned parts of an object as plain JSON, whatever its kind: what a history record keeps
//! of a route object, and how an undo compares and restores them.
//!
//! A *part* is a JSON object that mirrors the object's structure down to the values the tool
//! owns: nested objects are followed key by key, and anything else — a string, a number, a
//! whole array — is one leaf. `null` in a part means "absent" (as in a JSON merge patch), so a
//! part is also the merge patch that sets those leaves. Arrays are leaves because that is how
//! the tool writes them (a merge patch replaces an array whole).
#![deny(clippy::print_stdout, clippy::print_stderr)]

use serde_json::{Map, Value};

/// A path of object keys from the object's root.
pub type Path = Vec<String>;

/// The leaves where `before` and `after` differ, as two parts of the same shape (`null` where
/// a side is absent). Both `None` when nothing differs.
pub fn diff(before: &Value, after: &Value) -> Option<(Value, Value)> {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            let mut bm = Map::new();
            let mut am = Map::new();
            let keys = b.keys().chain(a.keys().filter(|k| !b.contains_key(*k)));
            for k in keys {
                let bv = b.get(k).unwrap_or(&Value::Null);
                let av = a.get(k).unwrap_or(&Value::Null);
                if let Some((bp, ap)) = diff(bv, av) {
                    bm.insert(k.clone(), bp);
                    am.insert(k.clone(), ap);
                }
            }
            (!bm.is_empty()).then(|| (Value::Object(bm), Value::Object(am)))
        }
        (b, a) if b == a => None,
        // An object on one side only: its leaves against absence.
        (b, a) => Some((b.clone(), a.clone())),
    }
}

/// Every leaf of a part with its path, in key order. A part that is not an object is one leaf
/// at the root.
pub fn leaves(part: &Value) -> Vec<(Path, &Value)> {
    fn walk<'a>(v: &'a Value, path: &mut Path, out: &mut Vec<(Path, &'a Value)>) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                for (k, child) in m {
                    path.push(k.clone());
                    walk(child, path, out);
                    path.pop();
                }
            }
            other => out.push((path.clone(), other)),
        }
    }
    let mut out = Vec::new();
    walk(part, &mut Vec::new(), &mut out);
    out
}

/// The value at `path`, `None` when absent (or `null`).
pub fn get<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = obj;
    for k in path {
        cur = cur.as_object()?.get(k)?;
    }
    (!cur.is_null()).then_some(cur)
}

/// Sets `path` to `value` (`null`: removes it), creating objects on the way.
pub fn set(obj: &mut Value, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        *obj = value;
        return;
    };
    let mut cur = obj;
    for k in parents {
        if !cur.get(k).is_some_and(Value::is_object) {
            if !cur.is_object() {
                *cur = Value::Object(Map::new());
            }
            cur[k.as_str()] = Value::Object(Map::new());
        }
        cur = &mut cur[k.as_str()];
    }
    if !cur.is_object() {
        *cur = Value::Object(Map::new());
    }
    if let Value::Object(m) = cur {
        if value.is_null() {
            m.remove(last);
        } else {
            m.insert(last.clone(), value);
        }
    }
}

/// Whether `live` holds `expected`: every key of an expected object is in the live object and
/// holds its value (a `null` key is absent), arrays have the same length and hold their
/// elements in order, other values are equal. Keys the live object has beyond the expected
/// ones (defaults the server filled in, fields other writers own) do not count.
pub fn contains(live: Option<&Value>, expected: Option<&Value>) -> bool {
    match (live, expected) {
        (_, None) | (_, Some(Value::Null)) => live.is_none_or(Value::is_null),
        (None, Some(_)) => false,
        (Some(l), Some(e)) => match (l, e) {
            (Value::Object(lm), Value::Object(em)) => em
                .iter()
                .all(|(k, ev)| contains(lm.get(k).filter(|v| !v.is_null()), Some(ev))),
            (Value::Array(la), Value::Array(ea)) => {
                la.len() == ea.len() && la.iter().zip(ea).all(|(l, e)| contains(Some(l), Some(e)))
            }
            (l, e) => l == e,
        },
    }
}

/// `live` cut down to the keys of `shape` (followed into nested objects; arrays and other
/// values taken whole from `live`).
pub fn project(live: &Value, shape: &Value) -> Value {
    match (live, shape) {
        (Value::Object(lm), Value::Object(sm)) if !sm.is_empty() => Value::Object(
            sm.iter()
                .filter_map(|(k, sv)| Some((k.clone(), project(lm.get(k)?, sv))))
                .collect(),
        ),
        (l, _) => l.clone(),
    }
}

/// A path as people read it: keys joined by `.`, a key with a `.` or `/` in brackets
/// (`metadata.annotations[nginx.ingress.kubernetes.io/configuration-snippet]`).
pub fn display(path: &[String]) -> String {
    let mut s = String::new();
    for k in path {
        if k.contains(['.', '/', '[', ']']) || k.is_empty() {
            s.push('[');
            s.push_str(k);
            s.push(']');
        } else {
            if !s.is_empty() {
                s.push('.');
            }
            s.push_str(k);
        }
    }
    if s.is_empty() { ".".into() } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_diff_keeps_only_the_leaves_that_changed() {
        let before = json!({"metadata": {"name": "a", "annotations": {"x": "1", "y": "2"}},
                            "spec": {"rules": [1, 2], "tls": [3]}});
        let after = json!({"metadata": {"name": "a", "annotations": {"x": "9", "y": "2", "z": "3"}},
                           "spec": {"rules": [1], "tls": [3]}});
        let (b, a) = diff(&before, &after).unwrap();
        assert_eq!(
            b,
            json!({"metadata": {"annotations": {"x": "1", "z": null}}, "spec": {"rules": [1, 2]}})
        );
        assert_eq!(
            a,
            json!({"metadata": {"annotations": {"x": "9", "z": "3"}}, "spec": {"rules": [1]}})
        );
        assert_eq!(diff(&before, &before), None);
        let paths: Vec<String> = leaves(&b).iter().map(|(p, _)| display(p)).collect();
        assert_eq!(
            paths,
            [
                "metadata.annotations.x",
                "metadata.annotations.z",
                "spec.rules"
            ]
        );
    }

    #[test]
    fn containment_ignores_what_the_server_added() {
        let expected = json!({"spec": {"rules": [{"path": "/a"}]}, "metadata": {"gone": null}});
        let live =
            json!({"spec": {"rules": [{"path": "/a", "weight": 1}], "extra": 1}, "metadata": {}});
        assert!(contains(Some(&live), Some(&expected)));
        let moved = json!({"spec": {"rules": [{"path": "/b"}]}, "metadata": {}});
        assert!(!contains(Some(&moved), Some(&expected)));
        let longer = json!({"spec": {"rules": [{"path": "/a"}, {"path": "/b"}]}, "metadata": {}});
        assert!(!contains(Some(&longer), Some(&expected)));
        assert!(contains(None, Some(&Value::Null)));
        assert!(!contains(None, Some(&json!(1))));
    }

    #[test]
    fn set_and_get_follow_object_keys() {
        let mut obj = json!({"metadata": {"annotations": {"a": "1"}}});
        let p = |s: &[&str]| s.iter().map(|x| (*x).to_owned()).collect::<Path>();
        set(&mut obj, &p(&["metadata", "annotations", "b"]), json!("2"));
        set(&mut obj, &p(&["metadata", "annotations", "a"]), Value::Null);
        set(&mut obj, &p(&["spec", "rules"]), json!([]));
        assert_eq!(
            obj,
            json!({"metadata": {"annotations": {"b": "2"}}, "spec": {"rules": []}})
        );
        assert_eq!(
            get(&obj, &p(&["metadata", "annotations", "b"])),
            Some(&json!("2"))
        );
        assert_eq!(get(&obj, &p(&["metadata", "labels"])), None);
    }

    #[test]
    fn a_projection_has_the_shape_and_the_live_values() {
        let live = json!({"metadata": {"name": "a", "uid": "u", "labels": {"app": "web", "x": "y"}},
                          "spec": {"rules": [{"host": "h", "more": 1}]}});
        let shape =
            json!({"metadata": {"name": "a", "labels": {"app": "web"}}, "spec": {"rules": []}});
        assert_eq!(
            project(&live, &shape),
            json!({"metadata": {"name": "a", "labels": {"app": "web"}}, "spec": {"rules": [{"host": "h", "more": 1}]}})
        );
    }

    #[test]
    fn paths_read_like_the_plan_s() {
        let p: Path = [
            "metadata",
            "annotations",
            "nginx.ingress.kubernetes.io/configuration-snippet",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        assert_eq!(
            display(&p),
            "metadata.annotations[nginx.ingress.kubernetes.io/configuration-snippet]"
        );
        assert_eq!(display(&[]), ".");
    }
}
