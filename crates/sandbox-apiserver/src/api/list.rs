//! LIST and DELETE of a collection: selectors, all-namespace lists, `limit`/`continue` (etcd's
//! base64 token), items in key order, Tables.

use serde_json::{Value, json};

use super::request::{RequestInfo, query_get};
use super::table::table_for;
use crate::kinds::{self, Kind};
use crate::model::object::list_body;
use crate::model::status::{self, StatusBody};
use crate::store::{Outcome, Selectors, Store};

/// LIST: selectors, `limit`/`continue`, all namespaces when `info` names none, a Table when
/// asked for.
pub fn list(
    store: &Store,
    k: &'static dyn Kind,
    info: &RequestInfo,
    query: &[(String, String)],
    table: bool,
) -> Result<Outcome, StatusBody> {
    let sel = Selectors::parse(
        k,
        query_get(query, "labelSelector"),
        query_get(query, "fieldSelector"),
    )?;
    let limit: usize = query_get(query, "limit")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let start_after = match query_get(query, "continue").filter(|c| !c.is_empty()) {
        None => None,
        Some(token) => Some(decode_continue(token).ok_or_else(|| {
            status::bad_request("continue key is not valid: illegal base64 data")
        })?),
    };
    let st = store.lock();
    let ns = (!info.namespace.is_empty()).then_some(info.namespace.as_str());
    let all = st.select(k, ns, &sel);
    let mut items: Vec<&Value> = all
        .into_iter()
        .filter(|o| {
            start_after.as_ref().is_none_or(|after| {
                let key = format!(
                    "{}/{}",
                    o.pointer("/metadata/namespace")
                        .and_then(Value::as_str)
                        .unwrap_or(""),
                    o.pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                );
                key.as_str() > after.as_str()
            })
        })
        .collect();
    let mut cont = None;
    if limit > 0 && items.len() > limit {
        let remaining = items.len() - limit;
        items.truncate(limit);
        let last = items.last().map(|o| {
            format!(
                "{}/{}",
                o.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
                o.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            )
        });
        if let Some(last) = last {
            cont = Some((encode_continue(&last, st.rv), remaining));
        }
    }
    let body = if table {
        let full: Vec<Value> = items.iter().map(|o| kinds::to_wire(k, o)).collect();
        table_for(k, &full, Some(st.rv), cont.as_ref().map(|(t, _)| t.clone()))
    } else {
        kinds::list_to_wire(
            k,
            list_body(
                k.api(),
                items.into_iter().map(|o| kinds::list_item(k, o)).collect(),
                st.rv,
                cont,
            ),
        )
    };
    Ok(Outcome {
        code: 200,
        body,
        warnings: vec![],
    })
}

fn encode_continue(last_key: &str, rv: u64) -> String {
    use base64::Engine;
    let token = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{last_key}\u{0}")});
    base64::engine::general_purpose::URL_SAFE.encode(token.to_string())
}

fn decode_continue(token: &str) -> Option<String> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::URL_SAFE
        .decode(token)
        .ok()?;
    let v: Value = serde_json::from_slice(&bytes).ok()?;
    let start = v.get("start")?.as_str()?;
    Some(start.trim_end_matches('\u{0}').to_string())
}

/// DELETE of a collection: every selected object, deleted one by one.
pub fn delete_collection(
    store: &Store,
    k: &'static dyn Kind,
    info: &RequestInfo,
    query: &[(String, String)],
    dry_run: bool,
) -> Result<Outcome, StatusBody> {
    let sel = Selectors::parse(
        k,
        query_get(query, "labelSelector"),
        query_get(query, "fieldSelector"),
    )?;
    let mut st = store.lock();
    let ns = (!info.namespace.is_empty()).then_some(info.namespace.as_str());
    let names: Vec<(String, String)> = st
        .select(k, ns, &sel)
        .iter()
        .map(|o| {
            (
                o.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                o.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect();
    let mut items = Vec::new();
    for (ns, name) in names {
        if let Some(obj) = st.get_object(k, &ns, &name).cloned() {
            st.delete(k, &ns, &name, &json!({}), dry_run, false)?;
            items.push(kinds::list_item(k, &obj));
        }
    }
    Ok(Outcome {
        code: 200,
        body: kinds::list_to_wire(k, list_body(k.api(), items, st.rv, None)),
        warnings: vec![],
    })
}
