//! Server-side apply (`application/apply-patch+yaml`), as kube-apiserver's field manager runs
//! structured-merge-diff v4 (`merge.Updater.Apply`): the applied configuration is checked
//! against the type, merged into the live object (associative lists by their keys, atomic
//! lists and structs as a whole), the applier's field set replaces its previous one, what it
//! stopped applying and nobody else owns is removed, and every other manager whose field the
//! apply would change is a conflict — refused (409) unless `force`, then taken from it.
//!
//! The walkers follow `typed/{tofieldset,merge,remove,validate}.go` over the sandbox's Go type
//! tables ([`T`]); sets are [`Set`]s of FieldsV1 path elements, as in [`super::managed_fields`].

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::managed_fields::{
    self as mf, Entry, Set, compare, element_cmp, item_element, strip_set, without_managed_fields,
};
use crate::model::schema::{self, L, T};
use crate::model::status::{StatusBody, go_quote};

/// The manager the field manager gives an object's existing fields when it is applied to for
/// the first time without any managedFields.
const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// What one apply is.
pub struct Apply<'a> {
    pub root_type: usize,
    pub manager: &'a str,
    /// The version of the endpoint (`apps/v1`).
    pub api_version: &'a str,
    pub force: bool,
    pub now: &'a str,
}

/// The outcome of an apply that may be stored.
#[derive(Debug)]
pub struct Applied {
    /// The object without managedFields, not yet defaulted: the merged one, or the live one
    /// when the apply changes nothing in it.
    pub object: Value,
    /// The object changed (and must be defaulted again).
    pub changed: bool,
    pub entries: Vec<Entry>,
}

/// One field another manager owns that the apply would change.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflict {
    /// The field manager's identifier (`{"manager":"helm","operation":"Apply"}`): the order
    /// the message lists managers in.
    pub manager_id: String,
    /// The manager as the message names it (`"kubectl-set" using apps/v1`).
    pub manager: String,
    /// The field (`.spec.template.spec.containers[name="app"].image`).
    pub field: String,
}

/// The 409 of an apply that would change other managers' fields (`NewConflictError`).
pub fn conflict_status(conflicts: &[Conflict]) -> StatusBody {
    let message = if let [c] = conflicts {
        format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            c.manager, c.field
        )
    } else {
        let mut lines = Vec::new();
        let mut last: Option<&str> = None;
        for c in conflicts {
            if last != Some(c.manager_id.as_str()) {
                lines.push(format!("conflicts with {}:", c.manager));
                last = Some(&c.manager_id);
            }
            lines.push(format!("- {}", c.field));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|c| {
            json!({
                "reason": "FieldManagerConflict",
                "message": format!("conflict with {}", c.manager),
                "field": c.field,
            })
        })
        .collect();
    StatusBody::new(409, "Conflict", message, Some(json!({ "causes": causes })))
}

fn status_set() -> Set {
    Set::path(&["f:status"])
}

/// Apply `config` (without `apiVersion` and `kind`, checked against the type already) to
/// `live` (the stored object with its managedFields; `None`: the object does not exist and
/// is created from the zero object).
pub fn apply(
    a: &Apply<'_>,
    live: Option<&Value>,
    config: &Value,
) -> Result<Applied, Vec<Conflict>> {
    let root = T::Obj(a.root_type);
    let zero = schema::zero_struct(schema::type_def(a.root_type));
    let live_full = live.cloned().unwrap_or_else(|| zero.clone());
    let mut entries = mf::decode(&live_full).unwrap_or_default();
    let live_clean = without_managed_fields(&live_full);
    if entries.is_empty() {
        // skipNonAppliedManager: what is there already belongs to someone first.
        let mut tracked = live_clean.clone();
        mf::apply_update(
            &mf::Update {
                root_type: a.root_type,
                manager: BEFORE_FIRST_APPLY,
                api_version: a.api_version,
                subresource: "",
                now: a.now,
            },
            Some(&zero),
            &mut tracked,
        );
        entries = mf::decode(&tracked).unwrap_or_default();
    }
    let merged = merge(Some(&live_clean), Some(config), &root).unwrap_or_else(|| json!({}));
    let found = entries
        .iter()
        .position(|e| e.manager == a.manager && e.operation == "Apply" && e.subresource.is_empty());
    let last = found.map(|i| entries[i].set.clone());
    let set = to_field_set(config, &root).recursive_difference(&status_set());
    let applier = match found {
        Some(i) => {
            entries[i].set = set;
            entries[i].api_version = a.api_version.to_string();
            i
        }
        None => {
            entries.push(Entry {
                manager: a.manager.to_string(),
                operation: "Apply".into(),
                api_version: a.api_version.to_string(),
                time: String::new(),
                subresource: String::new(),
                set,
            });
            entries.len() - 1
        }
    };
    let merged = prune(merged, &entries, last.as_ref(), &root);
    // update(): who else owned what changes.
    let mut cmp = mf::Comparison::default();
    compare(
        Some(&live_clean),
        Some(&merged),
        &root,
        &mut Vec::new(),
        &mut cmp,
    );
    let ignored = status_set();
    let changed_fields = cmp
        .modified
        .recursive_difference(&ignored)
        .union(&cmp.added.recursive_difference(&ignored));
    let removed = cmp.removed.recursive_difference(&ignored);
    let mut conflicts: Vec<(usize, Set)> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if i == applier {
            continue;
        }
        let c = e.set.intersection(&changed_fields);
        if !c.is_empty() {
            conflicts.push((i, c));
        }
    }
    if !a.force && !conflicts.is_empty() {
        let mut out: Vec<Conflict> = conflicts
            .iter()
            .flat_map(|(i, set)| {
                let e = &entries[*i];
                let (id, shown) = (manager_id(e), manager_shown(e));
                paths(set).into_iter().map(move |field| Conflict {
                    manager_id: id.clone(),
                    manager: shown.clone(),
                    field,
                })
            })
            .collect();
        out.sort_by(|x, y| x.manager_id.cmp(&y.manager_id));
        return Err(out);
    }
    for (i, c) in &conflicts {
        entries[*i].set = entries[*i].set.difference(c);
    }
    if !removed.is_empty() {
        for (i, e) in entries.iter_mut().enumerate() {
            if i != applier {
                e.set = e.set.difference(&removed);
            }
        }
    }
    let changed = merged != live_clean;
    if changed {
        entries[applier].time = a.now.to_string();
    }
    entries[applier].set = entries[applier].set.difference(&strip_set());
    entries.retain(|e| !e.set.is_empty());
    Ok(Applied {
        object: if changed { merged } else { live_clean },
        changed,
        entries,
    })
}

/// `Updater.prune`: what the applier applied last time and applies no more is removed,
/// unless another manager owns it.
fn prune(merged: Value, entries: &[Entry], last: Option<&Set>, root: &T) -> Value {
    let Some(last) = last.filter(|s| !s.is_empty()) else {
        return merged;
    };
    let last = ensure_named_fields_are_members(last, root);
    let pruned = remove_items(&merged, &last, root);
    // addBackOwnedItems
    let managed = entries
        .iter()
        .fold(Set::default(), |acc, e| acc.union(&e.set));
    let merged_set = ensure_named_fields_are_members(&to_field_set(&merged, root), root);
    let pruned_set = ensure_named_fields_are_members(&to_field_set(&pruned, root), root);
    let managed = ensure_named_fields_are_members(&managed, root);
    let pruned = remove_items(
        &merged,
        &merged_set.difference(&pruned_set.union(&managed)),
        root,
    );
    // addBackDanglingItems
    let pruned_set = ensure_named_fields_are_members(&to_field_set(&pruned, root), root);
    remove_items(
        &merged,
        &merged_set.difference(&pruned_set).intersection(&last),
        root,
    )
}

/// The type of the value at `key` of a struct or map.
fn child_type<'t>(ty: &'t T, key: &str) -> Option<&'t T> {
    match ty {
        T::Obj(i) => schema::type_def(*i).field(key).map(|f| &f.ty),
        T::Map(item, _) => Some(*item),
        _ => None,
    }
}

fn is_struct_field(ty: &T, key: &str) -> bool {
    matches!(ty, T::Obj(i) if schema::type_def(*i).field(key).is_some())
}

fn atomic(ty: &T) -> bool {
    match ty {
        T::Obj(i) => schema::type_def(*i).atomic,
        T::Map(_, atomic) => *atomic,
        T::List(_, L::Atomic) => true,
        _ => false,
    }
}

fn extend(path: &[String], pe: String) -> Vec<String> {
    let mut p = path.to_vec();
    p.push(pe);
    p
}

/// `TypedValue.ToFieldSet`: the fields a value sets — leaves, list items, empty or null
/// struct fields, map entries.
pub fn to_field_set(v: &Value, ty: &T) -> Set {
    let mut set = Set::default();
    field_set_walk(v, ty, &[], &mut set);
    set
}

fn field_set_walk(v: &Value, ty: &T, path: &[String], set: &mut Set) {
    match ty {
        T::Obj(_) | T::Map(..) => {
            if atomic(ty) {
                set.insert(path);
                return;
            }
            let Value::Object(m) = v else { return };
            for (k, val) in m {
                let p = extend(path, format!("f:{k}"));
                if let Some(ct) = child_type(ty, k) {
                    field_set_walk(val, ct, &p, set);
                }
                let empty_map = val.as_object().is_some_and(Map::is_empty);
                if val.is_null() || empty_map || !is_struct_field(ty, k) {
                    set.insert(&p);
                }
            }
        }
        T::List(item, strategy) => {
            if matches!(strategy, L::Atomic) {
                set.insert(path);
                return;
            }
            let Value::Array(a) = v else { return };
            let pes: Vec<Option<String>> = a.iter().map(|x| item_element(strategy, x)).collect();
            let mut duplicates: Vec<&String> = Vec::new();
            for (i, pe) in pes.iter().enumerate() {
                if let Some(pe) = pe
                    && pes[..i].iter().any(|q| q.as_ref() == Some(pe))
                    && !duplicates.contains(&pe)
                {
                    set.insert(&extend(path, pe.clone()));
                    duplicates.push(pe);
                }
            }
            for (x, pe) in a.iter().zip(&pes) {
                let Some(pe) = pe else { continue };
                if duplicates.contains(&pe) {
                    continue;
                }
                let p = extend(path, pe.clone());
                field_set_walk(x, item, &p, set);
                set.insert(&p);
            }
        }
        _ => set.insert(path),
    }
}

/// `TypedValue.Merge`: `rhs` (the configuration) merged into `lhs` (the live object); `None`
/// where neither has anything.
pub fn merge(lhs: Option<&Value>, rhs: Option<&Value>, ty: &T) -> Option<Value> {
    let keep_rhs = || rhs.or(lhs).cloned();
    match ty {
        T::Obj(_) | T::Map(..) => {
            let lm = lhs.and_then(Value::as_object);
            let rm = rhs.and_then(Value::as_object);
            let empty = |m: Option<&Map<String, Value>>| m.is_none_or(Map::is_empty);
            if atomic(ty) || (empty(lm) && empty(rm)) {
                return keep_rhs();
            }
            let mut keys: Vec<&String> = Vec::new();
            for m in [lm, rm].into_iter().flatten() {
                for k in m.keys() {
                    if !keys.contains(&k) {
                        keys.push(k);
                    }
                }
            }
            let mut out = Map::new();
            for k in keys {
                let (l, r) = (lm.and_then(|m| m.get(k)), rm.and_then(|m| m.get(k)));
                let v = match child_type(ty, k) {
                    Some(ct) => merge(l, r, ct),
                    None => r.or(l).cloned(),
                };
                if let Some(v) = v {
                    out.insert(k.clone(), v);
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        T::List(item, strategy) => {
            let la = lhs.and_then(Value::as_array);
            let ra = rhs.and_then(Value::as_array);
            let empty = |a: Option<&Vec<Value>>| a.is_none_or(Vec::is_empty);
            if matches!(strategy, L::Atomic) || (empty(la) && empty(ra)) {
                return keep_rhs();
            }
            let out = merge_list_items(
                la.map_or(&[][..], Vec::as_slice),
                ra.map_or(&[][..], Vec::as_slice),
                item,
                strategy,
            );
            (!out.is_empty()).then_some(Value::Array(out))
        }
        _ => keep_rhs(),
    }
}

/// `mergingWalker.visitListItems`: the configuration's order for the items it has, the live
/// items it does not have kept where they were relative to the shared ones.
fn merge_list_items(lhs: &[Value], rhs: &[Value], item: &T, strategy: &L) -> Vec<Value> {
    let index = |list: &[Value]| -> Vec<(String, usize)> {
        list.iter()
            .enumerate()
            .filter_map(|(i, x)| item_element(strategy, x).map(|pe| (pe, i)))
            .collect()
    };
    let rhs_pes = index(rhs);
    let lhs_pes = index(lhs);
    // The item of a key; a key the live object repeats stands for a null item.
    let lookup = |pes: &[(String, usize)], list: &'_ [Value], pe: &str| -> Option<Value> {
        let mut found = pes.iter().filter(|(p, _)| p == pe);
        let first = found.next()?.1;
        Some(if found.next().is_some() {
            Value::Null
        } else {
            list[first].clone()
        })
    };
    let in_rhs = |pe: &str| rhs_pes.iter().any(|(p, _)| p == pe);
    let in_lhs = |pe: &str| lhs_pes.iter().any(|(p, _)| p == pe);
    let mut shared: std::collections::VecDeque<&String> = rhs_pes
        .iter()
        .filter(|(p, _)| in_lhs(p))
        .map(|(p, _)| p)
        .collect();
    let mut next_shared = shared.pop_front();
    let mut merged_rhs: Vec<&String> = Vec::new();
    let mut out = Vec::new();
    let merge_item = |pe: &str| -> Option<Value> {
        let l = lookup(&lhs_pes, lhs, pe);
        let r = lookup(&rhs_pes, rhs, pe);
        merge(l.as_ref(), r.as_ref(), item)
    };
    let (mut li, mut ri) = (0, 0);
    while li < lhs_pes.len() || ri < rhs_pes.len() {
        if li < lhs_pes.len() && ri < rhs_pes.len() {
            let pe = &lhs_pes[li].0;
            if *pe == rhs_pes[ri].0 {
                merged_rhs.push(pe);
                out.extend(merge_item(pe));
                li += 1;
                ri += 1;
                next_shared = shared.pop_front();
                continue;
            }
            if in_rhs(pe) && next_shared.is_some_and(|n| n != pe) {
                li += 1;
                continue;
            }
        }
        if li < lhs_pes.len() {
            let (pe, at) = &lhs_pes[li];
            if !in_rhs(pe) {
                out.extend(merge(Some(&lhs[*at]), None, item));
                li += 1;
                continue;
            } else if merged_rhs.contains(&pe) {
                li += 1;
            }
        }
        if ri < rhs_pes.len() {
            let pe = &rhs_pes[ri].0;
            merged_rhs.push(pe);
            out.extend(merge_item(pe));
            ri += 1;
            if next_shared == Some(pe) {
                next_shared = shared.pop_front();
            }
        }
    }
    out
}

/// `TypedValue.RemoveItems`: `v` without the members of `set` (a struct, map or list left
/// empty becomes null).
pub fn remove_items(v: &Value, set: &Set, ty: &T) -> Value {
    match ty {
        T::Obj(_) | T::Map(..) => {
            let Value::Object(m) = v else {
                return Value::Null;
            };
            if m.is_empty() {
                return Value::Null;
            }
            if atomic(ty) {
                return v.clone();
            }
            let mut out = Map::new();
            for (k, val) in m {
                let pe = format!("f:{k}");
                let child = set.children.get(&pe);
                if child.is_some_and(|c| c.member) {
                    continue;
                }
                let val = match (child, child_type(ty, k)) {
                    (Some(c), Some(ct)) if !c.children.is_empty() => {
                        remove_items(val, &below(c), ct)
                    }
                    _ => val.clone(),
                };
                out.insert(k.clone(), val);
            }
            if out.is_empty() {
                Value::Null
            } else {
                Value::Object(out)
            }
        }
        T::List(item, strategy) => {
            let Value::Array(a) = v else {
                return Value::Null;
            };
            if a.is_empty() {
                return Value::Null;
            }
            if matches!(strategy, L::Atomic) {
                return v.clone();
            }
            let mut out = Vec::new();
            for x in a {
                let Some(pe) = item_element(strategy, x) else {
                    out.push(x.clone());
                    continue;
                };
                let child = set.children.get(&pe);
                if child.is_some_and(|c| c.member) {
                    continue;
                }
                out.push(match child {
                    Some(c) if !c.children.is_empty() => remove_items(x, &below(c), item),
                    _ => x.clone(),
                });
            }
            if out.is_empty() {
                Value::Null
            } else {
                Value::Array(out)
            }
        }
        _ => v.clone(),
    }
}

/// `Set.WithPrefix`: what is below a child, without the child itself.
fn below(child: &Set) -> Set {
    Set {
        member: false,
        children: child.children.clone(),
    }
}

/// `Set.EnsureNamedFieldsAreMembers`: every struct field the set goes through is a member too.
pub fn ensure_named_fields_are_members(set: &Set, ty: &T) -> Set {
    let mut out = Set {
        member: set.member,
        children: BTreeMap::new(),
    };
    for (pe, child) in &set.children {
        let (child_ty, named) = match (ty, pe.strip_prefix("f:")) {
            (T::Obj(i), Some(name)) => match schema::type_def(*i).field(name) {
                Some(f) => (Some(&f.ty), true),
                None => (None, false),
            },
            (T::Map(item, _), Some(_)) => (Some(*item), false),
            (T::List(item, _), None) if pe.starts_with("k:") => (Some(*item), false),
            _ => (None, false),
        };
        let mut c = match child_ty {
            Some(t) => ensure_named_fields_are_members(child, t),
            None => child.clone(),
        };
        c.member |= named;
        out.children.insert(pe.clone(), c);
    }
    out
}

/// The members of a set in `Set.Iterate` order: at each level the members, then what is below
/// each child, in path element order.
fn paths(set: &Set) -> Vec<String> {
    fn walk(set: &Set, prefix: &str, out: &mut Vec<String>) {
        let mut children: Vec<(&String, &Set)> = set.children.iter().collect();
        children.sort_by(|a, b| element_cmp(a.0, b.0));
        for (pe, c) in &children {
            if c.member {
                out.push(format!("{prefix}{}", pe_string(pe)));
            }
        }
        for (pe, c) in &children {
            if !c.children.is_empty() {
                walk(c, &format!("{prefix}{}", pe_string(pe)), out);
            }
        }
    }
    let mut out = Vec::new();
    walk(set, "", &mut out);
    out
}

/// `PathElement.String`: `.name`, `[name="app"]`, `[=value]`, `[0]`.
fn pe_string(pe: &str) -> String {
    let body = pe.get(2..).unwrap_or("");
    match pe.get(..2) {
        Some("f:") => format!(".{body}"),
        Some("k:") => {
            let fields: Vec<String> = serde_json::from_str::<Map<String, Value>>(body)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", value_string(v)))
                        .collect()
                })
                .unwrap_or_default();
            format!("[{}]", fields.join(","))
        }
        Some("v:") => format!(
            "[={}]",
            serde_json::from_str::<Value>(body)
                .map_or_else(|_| body.to_string(), |v| value_string(&v))
        ),
        Some("i:") => format!("[{body}]"),
        _ => "{{invalid path element}}".into(),
    }
}

/// `value.ToString`.
fn value_string(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::String(s) => go_quote(s),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(value_string).collect::<Vec<_>>().join(",")
        ),
        Value::Object(m) => m
            .iter()
            .map(|(k, x)| format!("{k}={}", value_string(x)))
            .collect(),
    }
}

/// The field manager's identifier of an entry, a JSON `ManagedFieldsEntry` without time and
/// fields (and without the API version for appliers).
fn manager_id(e: &Entry) -> String {
    let mut m = Map::new();
    m.insert("manager".into(), json!(e.manager));
    m.insert("operation".into(), json!(e.operation));
    if e.operation != "Apply" {
        m.insert("apiVersion".into(), json!(e.api_version));
    }
    if !e.subresource.is_empty() {
        m.insert("subresource".into(), json!(e.subresource));
    }
    Value::Object(m).to_string()
}

/// `printManager`: `"helm"`, `"kubectl-set" using apps/v1`, `"x" with subresource "status"
/// using apps/v1` (identifiers carry no time).
fn manager_shown(e: &Entry) -> String {
    let mut s = go_quote(&e.manager);
    if !e.subresource.is_empty() {
        s = format!("{s} with subresource {}", go_quote(&e.subresource));
    }
    if e.operation == "Update" {
        s = format!("{s} using {}", e.api_version);
    }
    s
}

/// `typed.ValidationErrors` of an applied configuration checked against its type (the typed
/// conversion of the patch object): unknown fields, values of the wrong kind, list items
/// without their keys or given twice. `None` when it is valid.
pub fn validate(config: &Value, ty: &T) -> Option<String> {
    let mut errs = Vec::new();
    validate_walk(config, ty, "", &mut errs);
    match errs.len() {
        0 => None,
        1 => Some(errs.remove(0)),
        _ => Some(
            std::iter::once("errors:".to_string())
                .chain(errs.iter().map(|e| format!("  {e}")))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
    }
}

fn at(path: &str, msg: &str) -> String {
    if path.is_empty() {
        msg.to_string()
    } else {
        format!("{path}: {msg}")
    }
}

fn validate_walk(v: &Value, ty: &T, path: &str, errs: &mut Vec<String>) {
    if v.is_null() {
        return;
    }
    match ty {
        T::Obj(_) | T::Map(..) => {
            let Value::Object(m) = v else {
                errs.push(at(path, &format!("expected map, got &{{{}}}", go_v(v))));
                return;
            };
            for (k, x) in m {
                let p = format!("{path}.{k}");
                match child_type(ty, k) {
                    Some(ct) => validate_walk(x, ct, &p, errs),
                    None => {
                        // The walk stops at the first field the type does not have.
                        errs.push(at(&p, "field not declared in schema"));
                        return;
                    }
                }
            }
        }
        T::List(item, strategy) => {
            let Value::Array(a) = v else {
                errs.push(at(path, &format!("expected list, got &{{{}}}", go_v(v))));
                return;
            };
            let mut seen: Vec<String> = Vec::new();
            for (i, x) in a.iter().enumerate() {
                let pe = match strategy {
                    L::Atomic => format!("[{i}]"),
                    L::Set | L::Map { .. } => match associative_element(strategy, x) {
                        Ok(pe) => {
                            let shown = pe_string(&pe);
                            if seen.contains(&pe) {
                                errs.push(at(path, &format!("duplicate entries for key {shown}")));
                            }
                            seen.push(pe);
                            shown
                        }
                        Err(e) => {
                            errs.push(at(path, &format!("element {i}: {e}")));
                            return;
                        }
                    },
                };
                validate_walk(x, item, &format!("{path}{pe}"), errs);
            }
        }
        T::I32 | T::I64 | T::F64 => {
            if !v.is_number() {
                errs.push(at(
                    path,
                    &format!("expected numeric (int or float), got {}", go_type(v)),
                ));
            }
        }
        T::Str | T::Bytes | T::Time | T::MicroTime => {
            if !v.is_string() {
                errs.push(at(
                    path,
                    &format!(
                        "expected string, got &value.valueUnstructured{{Value:{}}}",
                        go_sharp_v(v)
                    ),
                ));
            }
        }
        T::Bool => {
            if !v.is_boolean() {
                errs.push(at(path, &format!("expected boolean, got &{{{}}}", go_v(v))));
            }
        }
        T::IntOrStr | T::Quantity => {
            if v.is_object() || v.is_array() {
                errs.push(at(
                    path,
                    &format!("expected any scalar, got &{{{}}}", go_v(v)),
                ));
            }
        }
        T::Any => {}
    }
}

/// The path element of an associative list's item, or why it has none.
fn associative_element(strategy: &L, x: &Value) -> Result<String, String> {
    match strategy {
        L::Map { keys, .. } => {
            if x.is_null() {
                return Err("associative list with keys may not have a null element".into());
            }
            if !x.is_object() {
                return Err("associative list with keys may not have non-map elements".into());
            }
            if let Some(k) = keys
                .iter()
                .find(|k| x.get(**k).is_none_or(Value::is_null) && **k != "protocol")
            {
                return Err(format!(
                    "associative list with keys has an element that omits key field {} (and doesn't have default value)",
                    go_quote(k)
                ));
            }
        }
        L::Set => {
            if x.is_object() {
                return Err(
                    "associative list without keys has an element that's a map type".into(),
                );
            }
            if x.is_array() {
                return Err("not supported: associative list with lists as elements".into());
            }
            if x.is_null() {
                return Err(
                    "associative list without keys has an element that's an explicit null".into(),
                );
            }
        }
        L::Atomic => {}
    }
    item_element(strategy, x).ok_or_else(|| "invalid indexing of non-associative list".into())
}

/// Go's `%T` of a decoded JSON value.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// Go's `%v` of a decoded JSON value.
fn go_v(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Array(a) => format!("[{}]", a.iter().map(go_v).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let items: Vec<String> = keys
                .iter()
                .map(|k| format!("{k}:{}", go_v(&m[*k])))
                .collect();
            format!("map[{}]", items.join(" "))
        }
    }
}

/// Go's `%#v` of a decoded JSON value.
fn go_sharp_v(v: &Value) -> String {
    match v {
        Value::Null => "interface {}(nil)".into(),
        Value::String(s) => go_quote(s),
        Value::Array(a) => format!(
            "[]interface {{}}{{{}}}",
            a.iter().map(go_sharp_v).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let items: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", go_quote(k), go_sharp_v(&m[*k])))
                .collect();
            format!("map[string]interface {{}}{{{}}}", items.join(", "))
        }
        other => go_v(other),
    }
}

/// Numbers as the field manager sees a YAML body (every number a float64): an integral value
/// is written as an integer.
pub fn integral_numbers(v: &mut Value) {
    match v {
        Value::Number(n) => {
            if let Some(f) = n.as_f64()
                && n.is_f64()
                && f.fract() == 0.0
                && f.abs() < 9.007_199_254_740_992e15
            {
                *v = json!(f as i64);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(integral_numbers),
        Value::Object(m) => m.values_mut().for_each(integral_numbers),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::model::schema::canonicalize;

    fn deployment(containers: Value) -> Value {
        json!({"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": containers}}}})
    }

    fn names(v: &Value) -> Vec<&str> {
        v.pointer("/spec/template/spec/containers")
            .and_then(Value::as_array)
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect()
    }

    const ROOT: T = T::Obj(schema::DEPLOYMENT);

    #[test]
    fn a_port_without_protocol_is_keyed_with_the_default() {
        let config =
            deployment(json!([{"name": "app", "image": "x", "ports": [{"containerPort": 8080}]}]));
        let set = to_field_set(&config, &ROOT).to_fields_v1();
        assert_eq!(
            set.pointer("/f:spec/f:template/f:spec/f:containers/k:{\"name\":\"app\"}/f:ports"),
            Some(
                &json!({"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}})
            )
        );
        assert_eq!(
            set.pointer("/f:spec/f:selector"),
            Some(&json!({})),
            "an atomic struct is one field"
        );
    }

    #[test]
    fn list_items_merge_by_key_in_the_configurations_order() {
        let c = |n: &str| json!({"name": n, "image": n});
        let live = canonicalize(
            schema::DEPLOYMENT,
            &deployment(json!([c("a"), c("b"), c("c")])),
        )
        .unwrap()
        .value;
        let config = deployment(json!([c("c"), {"name": "a", "image": "a2"}]));
        let merged = merge(Some(&live), Some(&config), &ROOT).unwrap();
        // b, which the configuration does not list, stays before the shared items it preceded.
        assert_eq!(names(&merged), ["b", "c", "a"]);
        assert_eq!(
            merged["spec"]["template"]["spec"]["containers"][2]["image"],
            "a2"
        );
    }

    #[test]
    fn paths_print_as_structured_merge_diff_prints_them() {
        assert_eq!(pe_string("f:spec"), ".spec");
        assert_eq!(pe_string("k:{\"name\":\"app\"}"), "[name=\"app\"]");
        assert_eq!(
            pe_string("k:{\"port\":443,\"protocol\":\"TCP\"}"),
            "[port=443,protocol=\"TCP\"]"
        );
        assert_eq!(pe_string("v:\"example.com/x\""), "[=\"example.com/x\"]");
        assert_eq!(pe_string("i:3"), "[3]");
    }

    #[test]
    fn conflicts_are_grouped_by_manager_in_the_message() {
        let c = |id: &str, m: &str, f: &str| Conflict {
            manager_id: id.into(),
            manager: m.into(),
            field: f.into(),
        };
        let s = conflict_status(&[
            c("a", "\"helm\"", ".spec.replicas"),
            c("a", "\"helm\"", ".spec.paused"),
            c("b", "\"kubectl-set\" using apps/v1", ".spec.paused"),
        ]);
        assert_eq!(s.code, 409);
        assert_eq!(
            s.message,
            "Apply failed with 3 conflicts: conflicts with \"helm\":\n- .spec.replicas\n- .spec.paused\nconflicts with \"kubectl-set\" using apps/v1:\n- .spec.paused"
        );
        assert_eq!(
            s.details.unwrap()["causes"][2]["message"],
            "conflict with \"kubectl-set\" using apps/v1"
        );
    }

    #[test]
    fn an_unknown_field_stops_the_check_of_its_map() {
        let config = json!({"metadata": {"name": "web"}, "spec": {"bogus": 1, "other": 2}});
        assert_eq!(
            validate(&config, &ROOT).as_deref(),
            Some(".spec.bogus: field not declared in schema")
        );
        let config = deployment(json!([{"image": "x"}]));
        assert_eq!(
            validate(&config, &ROOT).as_deref(),
            Some(
                ".spec.template.spec.containers: element 0: associative list with keys has an element that omits key field \"name\" (and doesn't have default value)"
            )
        );
    }

    #[test]
    fn what_the_applier_no_longer_applies_goes_unless_another_manager_owns_it() {
        let a = |manager: &str, live: Option<&Value>, config: Value| {
            apply(
                &Apply {
                    root_type: schema::DEPLOYMENT,
                    manager,
                    api_version: "apps/v1",
                    force: false,
                    now: "2026-12-07T00:00:00Z",
                },
                live,
                &config,
            )
            .unwrap()
        };
        let with = |entries: Vec<Entry>, obj: Value| {
            let mut obj = canonicalize(schema::DEPLOYMENT, &obj).unwrap().value;
            mf::set_entries(&mut obj, entries);
            obj
        };
        let first = a(
            "helm",
            None,
            json!({"metadata": {"name": "web", "labels": {"a": "1", "b": "2"}}}),
        );
        let live = with(first.entries, first.object);
        let shared = a(
            "argocd-controller",
            Some(&live),
            json!({"metadata": {"name": "web", "labels": {"b": "2"}}}),
        );
        assert!(!shared.changed, "the same value: only ownership changes");
        let live = with(shared.entries, shared.object);
        let second = a("helm", Some(&live), json!({"metadata": {"name": "web"}}));
        assert_eq!(
            second.object["metadata"]["labels"],
            json!({"b": "2"}),
            "a is gone, b is argocd-controller's too"
        );
        let managers: Vec<&str> = second.entries.iter().map(|e| e.manager.as_str()).collect();
        assert_eq!(
            managers,
            ["argocd-controller"],
            "helm owns nothing any more"
        );
    }
}
