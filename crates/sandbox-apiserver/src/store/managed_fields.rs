//! `metadata.managedFields` for `Update` operations, following structured-merge-diff v4 and the
//! API server's field manager: the set of fields an update added or changed (compared with the
//! live object; with the zero object on create) is merged into the manager's entry, removed
//! fields leave every entry, `status` and system metadata are never tracked, and an entry's time
//! moves only when the update changed something.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::model::schema::{self, L, T};

/// A set of field paths (structured-merge-diff `fieldpath.Set`) as a tree; child keys are the
/// FieldsV1 path elements (`f:name`, `k:{"name":"web"}`, `v:"x"`).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Set {
    pub(super) member: bool,
    pub(super) children: BTreeMap<String, Set>,
}

impl Set {
    pub fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }

    pub(super) fn insert(&mut self, path: &[String]) {
        match path.split_first() {
            None => self.member = true,
            Some((first, rest)) => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    pub fn union(&self, other: &Set) -> Set {
        let mut out = self.clone();
        out.member |= other.member;
        for (k, v) in &other.children {
            let merged = match out.children.get(k) {
                Some(mine) => mine.union(v),
                None => v.clone(),
            };
            out.children.insert(k.clone(), merged);
        }
        out
    }

    /// Members of `self` that are not members of `other` (non-recursive).
    pub fn difference(&self, other: &Set) -> Set {
        let mut out = Set {
            member: self.member && !other.member,
            children: BTreeMap::new(),
        };
        for (k, v) in &self.children {
            let d = match other.children.get(k) {
                Some(o) => v.difference(o),
                None => v.clone(),
            };
            if !d.is_empty() {
                out.children.insert(k.clone(), d);
            }
        }
        out
    }

    pub fn intersection(&self, other: &Set) -> Set {
        let mut out = Set {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (k, v) in &self.children {
            if let Some(o) = other.children.get(k) {
                let i = v.intersection(o);
                if !i.is_empty() {
                    out.children.insert(k.clone(), i);
                }
            }
        }
        out
    }

    /// Remove every member of `other` together with everything below it.
    pub fn recursive_difference(&self, other: &Set) -> Set {
        if other.member {
            return Set::default();
        }
        let mut out = Set {
            member: self.member,
            children: BTreeMap::new(),
        };
        for (k, v) in &self.children {
            let d = match other.children.get(k) {
                Some(o) => v.recursive_difference(o),
                None => v.clone(),
            };
            if !d.is_empty() {
                out.children.insert(k.clone(), d);
            }
        }
        out
    }

    /// The FieldsV1 JSON, children in `PathElement` order as structured-merge-diff writes them:
    /// fields, then keys, then values, then indexes; keys and values compared as values
    /// (`k:{"port":80,…}` before `k:{"port":443,…}`).
    pub fn to_fields_v1(&self) -> Value {
        let mut m = Map::new();
        if self.member && !self.children.is_empty() {
            m.insert(".".into(), json!({}));
        }
        let mut children: Vec<(&String, &Set)> = self.children.iter().collect();
        children.sort_by(|a, b| element_cmp(a.0, b.0));
        for (k, v) in children {
            m.insert(k.clone(), v.to_fields_v1());
        }
        Value::Object(m)
    }

    pub fn from_fields_v1(v: &Value) -> Option<Set> {
        let obj = v.as_object()?;
        let mut s = Set::default();
        for (k, child) in obj {
            if k == "." {
                s.member = true;
                continue;
            }
            let mut c = Set::from_fields_v1(child)?;
            if c.children.is_empty() {
                c.member = true;
            }
            s.children.insert(k.clone(), c);
        }
        Some(s)
    }

    pub(super) fn path(elems: &[&str]) -> Set {
        let mut s = Set::default();
        let p: Vec<String> = elems.iter().map(|e| e.to_string()).collect();
        s.insert(&p);
        s
    }
}

/// `PathElement.Compare` of two FieldsV1 path elements.
pub(super) fn element_cmp(a: &str, b: &str) -> Ordering {
    let rank = |s: &str| match s.get(..2) {
        Some("f:") => 0,
        Some("k:") => 1,
        Some("v:") => 2,
        Some("i:") => 3,
        _ => 4,
    };
    let (ra, rb) = (rank(a), rank(b));
    if ra != rb {
        return ra.cmp(&rb);
    }
    let parse = |s: &str| serde_json::from_str::<Value>(s.get(2..).unwrap_or("")).ok();
    match (ra, parse(a), parse(b)) {
        (1 | 2, Some(x), Some(y)) => value_cmp(&x, &y),
        (3, Some(x), Some(y)) => value_cmp(&x, &y),
        _ => a.cmp(b),
    }
}

/// structured-merge-diff's `value.Compare`: floats, then ints, strings, booleans, lists, maps
/// (a key's field list compares name by name), null; within a type by value.
fn value_cmp(a: &Value, b: &Value) -> Ordering {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Number(n) if n.is_f64() => 0,
            Value::Number(_) => 1,
            Value::String(_) => 2,
            Value::Bool(_) => 3,
            Value::Array(_) => 4,
            Value::Object(_) => 5,
            Value::Null => 6,
        }
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if rank(a) == rank(b) => {
            if rank(a) == 0 {
                x.as_f64()
                    .partial_cmp(&y.as_f64())
                    .unwrap_or(Ordering::Equal)
            } else {
                x.as_i64().cmp(&y.as_i64())
            }
        }
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (i, j) in x.iter().zip(y) {
                let c = value_cmp(i, j);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            let mut xs: Vec<_> = x.iter().collect();
            let mut ys: Vec<_> = y.iter().collect();
            xs.sort_by(|p, q| p.0.cmp(q.0));
            ys.sort_by(|p, q| p.0.cmp(q.0));
            for (i, j) in xs.iter().zip(&ys) {
                let c = i.0.cmp(j.0).then_with(|| value_cmp(i.1, j.1));
                if c != Ordering::Equal {
                    return c;
                }
            }
            xs.len().cmp(&ys.len())
        }
        _ => rank(a).cmp(&rank(b)),
    }
}

#[derive(Default)]
pub(super) struct Comparison {
    pub(super) added: Set,
    pub(super) modified: Set,
    pub(super) removed: Set,
}

/// The `k:`/`v:` path element of a list item. A key field the item leaves out takes its
/// default where the schema has one (`protocol` of a port: `TCP`), as structured-merge-diff
/// reads an applied configuration's ports.
pub(super) fn item_element(strategy: &L, item: &Value) -> Option<String> {
    match strategy {
        L::Set => Some(format!("v:{}", serde_json::to_string(item).ok()?)),
        L::Map { keys, .. } => {
            let mut names: Vec<&&str> = keys.iter().collect();
            names.sort();
            let mut m = Map::new();
            for k in names {
                match item.get(*k) {
                    Some(v) if !v.is_null() => {
                        m.insert((*k).to_string(), v.clone());
                    }
                    _ if *k == "protocol" => {
                        m.insert((*k).to_string(), json!("TCP"));
                    }
                    _ => {}
                }
            }
            if m.is_empty() {
                return None;
            }
            Some(format!(
                "k:{}",
                serde_json::to_string(&Value::Object(m)).ok()?
            ))
        }
        L::Atomic => None,
    }
}

type FieldTypeFn<'a> = Box<dyn Fn(&str) -> Option<&'static T> + 'a>;

pub(super) fn compare(
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    ty: &T,
    path: &mut Vec<String>,
    out: &mut Comparison,
) {
    if lhs.is_none() && rhs.is_none() {
        return;
    }
    let leaf = |out: &mut Comparison, path: &Vec<String>| match (lhs, rhs) {
        (None, Some(_)) => out.added.insert(path),
        (Some(_), None) => out.removed.insert(path),
        (Some(a), Some(b)) if a != b => out.modified.insert(path),
        _ => {}
    };
    let mut in_leaf = false;
    match ty {
        T::Obj(_) | T::Map(..) => {
            let (atomic, field_ty): (bool, FieldTypeFn) = match ty {
                T::Obj(i) => {
                    let td = schema::type_def(*i);
                    (
                        td.atomic,
                        Box::new(move |k: &str| td.field(k).map(|f| &f.ty)),
                    )
                }
                T::Map(item, atomic) => (*atomic, Box::new(move |_k: &str| Some(*item))),
                _ => (true, Box::new(|_k: &str| None)),
            };
            let lm = lhs.and_then(Value::as_object);
            let rm = rhs.and_then(Value::as_object);
            let empty = |m: Option<&Map<String, Value>>| m.is_none_or(Map::is_empty);
            if atomic || (empty(lm) && empty(rm)) {
                leaf(out, path);
                in_leaf = true;
            } else {
                let mut keys: Vec<&String> = Vec::new();
                for m in [lm, rm].into_iter().flatten() {
                    for k in m.keys() {
                        if !keys.contains(&k) {
                            keys.push(k);
                        }
                    }
                }
                for k in keys {
                    let Some(fty) = field_ty(k) else { continue };
                    path.push(format!("f:{k}"));
                    compare(
                        lm.and_then(|m| m.get(k)),
                        rm.and_then(|m| m.get(k)),
                        fty,
                        path,
                        out,
                    );
                    path.pop();
                }
            }
        }
        T::List(item, strategy) => {
            let la = lhs.and_then(Value::as_array);
            let ra = rhs.and_then(Value::as_array);
            let empty = |a: Option<&Vec<Value>>| a.is_none_or(Vec::is_empty);
            if matches!(strategy, L::Atomic) || (empty(la) && empty(ra)) {
                leaf(out, path);
                in_leaf = true;
            } else {
                let mut elems: Vec<(String, Option<&Value>, Option<&Value>)> = Vec::new();
                for (side, arr) in [(0, la), (1, ra)] {
                    for it in arr.into_iter().flatten() {
                        let Some(pe) = item_element(strategy, it) else {
                            continue;
                        };
                        match elems.iter_mut().find(|(p, _, _)| *p == pe) {
                            Some(e) => {
                                if side == 0 {
                                    e.1.get_or_insert(it);
                                } else {
                                    e.2.get_or_insert(it);
                                }
                            }
                            None => elems.push((
                                pe,
                                (side == 0).then_some(it),
                                (side == 1).then_some(it),
                            )),
                        }
                    }
                }
                for (pe, l, r) in elems {
                    path.push(pe);
                    compare(l, r, item, path, out);
                    path.pop();
                }
            }
        }
        _ => {
            leaf(out, path);
            in_leaf = true;
        }
    }
    if !in_leaf {
        if lhs.is_none() {
            out.added.insert(path);
        } else if rhs.is_none() {
            out.removed.insert(path);
        }
    }
}

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub manager: String,
    pub operation: String,
    pub api_version: String,
    pub time: String,
    pub subresource: String,
    pub set: Set,
}

impl Entry {
    pub(super) fn same_identity(
        &self,
        manager: &str,
        operation: &str,
        api_version: &str,
        subresource: &str,
    ) -> bool {
        self.manager == manager
            && self.operation == operation
            && (operation == "Apply" || self.api_version == api_version)
            && self.subresource == subresource
    }

    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("manager".into(), json!(self.manager));
        m.insert("operation".into(), json!(self.operation));
        m.insert("apiVersion".into(), json!(self.api_version));
        // The scale subresource records its entry without a time.
        if !self.time.is_empty() {
            m.insert("time".into(), json!(self.time));
        }
        m.insert("fieldsType".into(), json!("FieldsV1"));
        m.insert("fieldsV1".into(), self.set.to_fields_v1());
        if !self.subresource.is_empty() {
            m.insert("subresource".into(), json!(self.subresource));
        }
        Value::Object(m)
    }
}

/// `isResetManagedFields`: an update that sets `managedFields` to one empty entry clears them.
/// (An empty list does too on the real server; the sandbox's decoding drops it first.)
fn is_reset(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::Array(a)) if a.len() == 1 && a[0].as_object().is_some_and(Map::is_empty))
}

/// Decode `metadata.managedFields`; `None` when absent, empty or malformed (the server then
/// keeps the live object's entries).
pub fn decode(obj: &Value) -> Option<Vec<Entry>> {
    let list = obj.get("metadata")?.get("managedFields")?.as_array()?;
    if list.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for e in list {
        if e.get("fieldsType").and_then(Value::as_str) != Some("FieldsV1") {
            return None;
        }
        let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        out.push(Entry {
            manager: s("manager"),
            operation: s("operation"),
            api_version: s("apiVersion"),
            time: s("time"),
            subresource: s("subresource"),
            set: Set::from_fields_v1(e.get("fieldsV1").unwrap_or(&json!({})))?,
        });
    }
    Some(out)
}

pub(super) fn strip_set() -> Set {
    let mut s = Set::default();
    for p in [
        &["f:apiVersion"][..],
        &["f:kind"],
        &["f:metadata"],
        &["f:metadata", "f:name"],
        &["f:metadata", "f:namespace"],
        &["f:metadata", "f:creationTimestamp"],
        &["f:metadata", "f:selfLink"],
        &["f:metadata", "f:uid"],
        &["f:metadata", "f:clusterName"],
        &["f:metadata", "f:generation"],
        &["f:metadata", "f:managedFields"],
        &["f:metadata", "f:resourceVersion"],
    ] {
        s = s.union(&Set::path(p));
    }
    s
}

pub(super) fn without_managed_fields(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    v
}

/// What one update does to the managed fields.
pub struct Update<'a> {
    pub root_type: usize,
    pub manager: &'a str,
    pub api_version: &'a str,
    /// `""` for the main resource, `"status"` for the status subresource.
    pub subresource: &'a str,
    pub now: &'a str,
}

/// Compute the new `managedFields` for `new` (canonical, replaced in place), given the live
/// object (`None` on create: compared with the zero object).
pub fn apply_update(u: &Update<'_>, live: Option<&Value>, new: &mut Value) {
    apply_update_keeping(u, live, new, false);
}

/// [`apply_update`] of a write to the `status` subresource of a kind whose status strategy
/// keeps the annotations the write carries (`apps/v1`: the deployment controller records its
/// revision annotation with its status), so that they are the writer's fields too.
pub fn apply_status_update_with_annotations(u: &Update<'_>, live: Option<&Value>, new: &mut Value) {
    apply_update_keeping(u, live, new, true);
}

fn apply_update_keeping(u: &Update<'_>, live: Option<&Value>, new: &mut Value, annotations: bool) {
    let zero = schema::zero_struct(schema::type_def(u.root_type));
    let live_clean = without_managed_fields(live.unwrap_or(&zero));
    // decodeLiveOrNew: the request's own managedFields, unless it resets them (`[{}]`) or
    // has none (then the live object's).
    let base = if is_reset(new.pointer("/metadata/managedFields")) {
        Vec::new()
    } else {
        decode(new)
            .or_else(|| live.and_then(decode))
            .unwrap_or_default()
    };
    // skipNonAppliedManager: an existing object without managedFields is not tracked.
    if base.is_empty() && live.is_some_and(|l| !crate::model::object::meta_str(l, "uid").is_empty())
    {
        if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
        return;
    }
    let new_clean = without_managed_fields(new);
    let mut cmp = Comparison::default();
    compare(
        Some(&live_clean),
        Some(&new_clean),
        &T::Obj(u.root_type),
        &mut Vec::new(),
        &mut cmp,
    );
    let changed = cmp.modified.union(&cmp.added);
    let mut entries: Vec<Entry> = base
        .into_iter()
        .map(|mut e| {
            e.set = e
                .set
                .difference(&e.set.intersection(&changed))
                .difference(&cmp.removed);
            e
        })
        .collect();
    let ignored = if u.subresource == "status" {
        // The status subresource only ever writes status.
        let mut all = Set::path(&["f:spec"]);
        if annotations {
            for f in [
                "f:name",
                "f:generateName",
                "f:namespace",
                "f:selfLink",
                "f:uid",
                "f:resourceVersion",
                "f:generation",
                "f:creationTimestamp",
                "f:deletionTimestamp",
                "f:deletionGracePeriodSeconds",
                "f:labels",
                "f:ownerReferences",
                "f:finalizers",
                "f:managedFields",
            ] {
                all = all.union(&Set::path(&["f:metadata", f]));
            }
        } else {
            all = all.union(&Set::path(&["f:metadata"]));
        }
        all
    } else {
        Set::path(&["f:status"])
    };
    let current = changed
        .difference(&cmp.removed)
        .recursive_difference(&ignored)
        .difference(&strip_set());
    if !current.is_empty() {
        match entries
            .iter_mut()
            .find(|e| e.same_identity(u.manager, "Update", u.api_version, u.subresource))
        {
            Some(e) => {
                e.set = e.set.union(&current);
                e.time = u.now.to_string();
                e.api_version = u.api_version.to_string();
            }
            None => entries.push(Entry {
                manager: u.manager.to_string(),
                operation: "Update".into(),
                api_version: u.api_version.to_string(),
                time: u.now.to_string(),
                subresource: u.subresource.to_string(),
                set: current,
            }),
        }
    }
    let strip = strip_set();
    for e in &mut entries {
        e.set = e.set.difference(&strip);
    }
    entries.retain(|e| !e.set.is_empty());
    set_entries(new, entries);
}

/// Write `entries` as `metadata.managedFields`, in the server's order: by operation (`Apply`
/// before `Update`), then time (to the second; an entry without a time first), manager, API
/// version and subresource. No entries: no `managedFields`.
pub fn set_entries(obj: &mut Value, mut entries: Vec<Entry>) {
    entries.sort_by(|a, b| {
        a.operation
            .cmp(&b.operation)
            .then_with(|| {
                let ta = crate::model::time::parse_rfc3339(&a.time).unwrap_or(0);
                let tb = crate::model::time::parse_rfc3339(&b.time).unwrap_or(0);
                ta.cmp(&tb)
            })
            .then_with(|| a.manager.cmp(&b.manager))
            .then_with(|| a.api_version.cmp(&b.api_version))
            .then_with(|| a.subresource.cmp(&b.subresource))
    });
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if entries.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert(
                "managedFields".into(),
                Value::Array(entries.iter().map(Entry::to_json).collect()),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::model::schema::canonicalize;

    fn fixture_deployment() -> Value {
        canonicalize(
            schema::DEPLOYMENT,
            &json!({"metadata":{"name":"web","namespace":"fixtures","labels":{"app":"web"}},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"nginx:1.25","ports":[{"containerPort":80,"protocol":"TCP"}],"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler"}},"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":"25%","maxSurge":"25%"}},"revisionHistoryLimit":10,"progressDeadlineSeconds":600}}),
        )
        .unwrap()
        .value
    }

    #[test]
    fn keys_are_ordered_as_values_not_as_text() {
        let mut s = Set {
            member: true,
            ..Set::default()
        };
        for e in [
            r#"k:{"port":443,"protocol":"TCP"}"#,
            r#"k:{"port":80,"protocol":"TCP"}"#,
            "f:b",
        ] {
            s.children.entry(e.to_string()).or_default().member = true;
        }
        let keys: Vec<String> = s
            .to_fields_v1()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert_eq!(
            keys,
            [
                ".",
                "f:b",
                r#"k:{"port":80,"protocol":"TCP"}"#,
                r#"k:{"port":443,"protocol":"TCP"}"#
            ]
        );
    }

    #[test]
    fn create_matches_recorded_fields_v1() {
        let mut d = fixture_deployment();
        let u = Update {
            root_type: schema::DEPLOYMENT,
            manager: "curl",
            api_version: "apps/v1",
            subresource: "",
            now: "2026-11-30T11:48:25Z",
        };
        apply_update(&u, None, &mut d);
        let want = json!({"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:progressDeadlineSeconds":{},"f:replicas":{},"f:revisionHistoryLimit":{},"f:selector":{},"f:strategy":{"f:rollingUpdate":{".":{},"f:maxSurge":{},"f:maxUnavailable":{}},"f:type":{}},"f:template":{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:ports":{".":{},"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:protocol":{}}},"f:resources":{},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}}});
        let mf = &d["metadata"]["managedFields"][0];
        assert_eq!(mf["fieldsV1"], want);
        assert_eq!(
            serde_json::to_string(&mf["fieldsV1"]).unwrap(),
            serde_json::to_string(&want).unwrap(),
            "key order"
        );
    }

    #[test]
    fn noop_update_keeps_time_and_label_update_adds_field() {
        let mut d = fixture_deployment();
        let u = Update {
            root_type: schema::DEPLOYMENT,
            manager: "curl",
            api_version: "apps/v1",
            subresource: "",
            now: "t1",
        };
        apply_update(&u, None, &mut d);
        let live = d.clone();
        let mut same = d.clone();
        let u2 = Update {
            now: "2026-12-01T00:00:00Z",
            ..u
        };
        apply_update(&u2, Some(&live), &mut same);
        assert_eq!(same, live);
        let mut labelled = live.clone();
        labelled["metadata"]["labels"]["team"] = json!("x");
        apply_update(&u2, Some(&live), &mut labelled);
        let mf = &labelled["metadata"]["managedFields"][0];
        assert_eq!(mf["time"], json!("2026-12-01T00:00:00Z"));
        assert!(
            mf["fieldsV1"]["f:metadata"]["f:labels"]
                .get("f:team")
                .is_some()
        );
    }

    #[test]
    fn another_manager_takes_over_changed_fields() {
        let mut d = fixture_deployment();
        let u = Update {
            root_type: schema::DEPLOYMENT,
            manager: "curl",
            api_version: "apps/v1",
            subresource: "",
            now: "2026-11-30T11:48:25Z",
        };
        apply_update(&u, None, &mut d);
        let live = d.clone();
        d["spec"]["replicas"] = json!(3);
        let u2 = Update {
            manager: "kubectl-appupdate",
            now: "2026-11-30T11:49:00Z",
            ..u
        };
        apply_update(&u2, Some(&live), &mut d);
        let mf = d["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(mf.len(), 2);
        assert!(mf[0]["fieldsV1"]["f:spec"].get("f:replicas").is_none());
        assert_eq!(mf[1]["manager"], json!("kubectl-appupdate"));
        assert_eq!(mf[1]["fieldsV1"], json!({"f:spec":{"f:replicas":{}}}));
    }
}
