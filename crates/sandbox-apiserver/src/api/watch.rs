//! WATCH streams: the initial events (from the history after a resourceVersion, or the current
//! objects), then every change the selectors let through, until the timeout or shutdown.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use super::request::{RequestInfo, parse_bool, query_get};
use super::table::table_for;
use super::{Ctx, Reply, status_reply, stopped};
use crate::kinds::{self, Kind};
use crate::model::gojson;
use crate::model::schema;
use crate::model::status::{self, StatusBody};
use crate::store::{Event, Selectors};

fn event_line(event_type: &str, obj: Value) -> Bytes {
    let mut m = serde_json::Map::new();
    m.insert("type".into(), json!(event_type));
    m.insert("object".into(), obj);
    Bytes::from(gojson::encode(&Value::Object(m), false))
}

/// WATCH: from a resourceVersion (or the current objects as ADDED), selector transitions,
/// `timeoutSeconds`, bookmarks; events as one JSON line each (Tables when asked for).
pub fn watch(
    ctx: &Ctx<'_>,
    k: &'static dyn Kind,
    info: &RequestInfo,
    query: &[(String, String)],
    table: bool,
) -> Reply {
    let pretty = ctx.pretty;
    let sel = match Selectors::parse(
        k,
        query_get(query, "labelSelector"),
        query_get(query, "fieldSelector"),
    ) {
        Ok(s) => s,
        Err(e) => return status_reply(&e, pretty),
    };
    if query_get(query, "sendInitialEvents").is_some() {
        return status_reply(
            &status::invalid_kind(
                "meta.k8s.io",
                "ListOptions",
                "",
                &[status::FieldError::forbidden(
                    "sendInitialEvents",
                    "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
                )],
            ),
            pretty,
        );
    }
    let rv_param = query_get(query, "resourceVersion").unwrap_or("");
    let start_rv: Option<u64> = match rv_param {
        "" | "0" => None,
        other => match other.parse::<u64>() {
            Ok(v) => Some(v),
            Err(_) => {
                return status_reply(
                    &status::invalid_kind(
                        "meta.k8s.io",
                        "ListOptions",
                        "",
                        &[status::FieldError::invalid(
                            "resourceVersion",
                            &status::go_quote(other),
                            "must be an integer",
                        )],
                    ),
                    pretty,
                );
            }
        },
    };
    let timeout = query_get(query, "timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or_else(|| {
            Duration::from_secs(1800 + (uuid::Uuid::new_v4().as_bytes()[0] as u64 % 60) * 30)
        });
    let bookmarks = parse_bool(query_get(query, "allowWatchBookmarks"));
    let ns = (!info.namespace.is_empty() && k.api().namespaced).then(|| info.namespace.clone());

    let (initial, rx, current_rv) = {
        let st = ctx.store.lock();
        let rx = st.events.subscribe();
        let mut initial: Vec<(String, Value)> = Vec::new();
        match start_rv {
            None => {
                for o in st.select(k, ns.as_deref(), &sel) {
                    initial.push(("ADDED".into(), kinds::to_wire(k, o)));
                }
            }
            Some(from) => {
                let oldest = st.history.first().map(|e| e.rv);
                if let Some(oldest) = oldest
                    && from + 1 < oldest
                    && from < st.rv
                {
                    drop(st);
                    return status_reply(
                        &StatusBody::new(
                            410,
                            "Expired",
                            format!("too old resource version: {from} ({})", oldest - 1),
                            Some(json!({})),
                        ),
                        pretty,
                    );
                }
                for ev in st.history.iter().filter(|e| e.rv > from) {
                    if let Some(line) = filter_event(ev, k, ns.as_deref(), &sel) {
                        initial.push(line);
                    }
                }
            }
        }
        (initial, rx, st.rv)
    };

    let (tx, out_rx) = mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(64);
    let mut shutdown = ctx.shutdown.clone();
    let kind_for_bookmark = k;
    tokio::spawn(async move {
        let mut rx = rx;
        let mut last_rv = current_rv;
        let render = |t: String, o: Value| -> Bytes {
            if table {
                let full = o.clone();
                event_line(
                    &t,
                    table_for(kind_for_bookmark, std::slice::from_ref(&full), None, None),
                )
            } else {
                event_line(&t, o)
            }
        };
        for (t, o) in initial {
            if tx.send(Ok(Frame::data(render(t, o)))).await.is_err() {
                return;
            }
        }
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval(Duration::from_secs(60));
        tick.tick().await;
        loop {
            tokio::select! {
                _ = &mut deadline => break,
                _ = stopped(&mut shutdown) => break,
                _ = tick.tick(), if bookmarks => {
                    // An empty object of the kind carrying only the revision, as the real server sends.
                    let mut empty = schema::zero_struct(schema::type_def(kind_for_bookmark.schema()));
                    empty["metadata"] = json!({"resourceVersion": last_rv.to_string(), "creationTimestamp": null});
                    let bm = kinds::to_wire(kind_for_bookmark, &empty);
                    if tx.send(Ok(Frame::data(event_line("BOOKMARK", bm)))).await.is_err() { return; }
                }
                ev = rx.recv() => match ev {
                    Ok(ev) => {
                        last_rv = last_rv.max(ev.rv);
                        if let Some((t, o)) = filter_event(&ev, kind_for_bookmark, ns.as_deref(), &sel)
                            && tx.send(Ok(Frame::data(render(t, o)))).await.is_err() { return; }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => break,
                    Err(broadcast::error::RecvError::Closed) => break,
                },
                _ = tx.closed() => return,
            }
        }
    });
    let stream = futures_util::stream::unfold(out_rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Reply {
        status: 200,
        headers: vec![
            ("Cache-Control".into(), "no-cache, private".into()),
            ("Content-Type".into(), "application/json".into()),
        ],
        body: BodyExt::boxed(StreamBody::new(stream)),
        reason: None,
        cut: false,
    }
}

/// The event a watcher of `k` in `ns` with `sel` sees for `ev`, if any.
fn filter_event(
    ev: &Event,
    k: &'static dyn Kind,
    ns: Option<&str>,
    sel: &Selectors,
) -> Option<(String, Value)> {
    if !kinds::same(ev.kind, k) {
        return None;
    }
    if let Some(ns) = ns
        && ev.namespace != ns
    {
        return None;
    }
    let now = sel.matches(k, &ev.object);
    match (ev.event_type, ev.old.as_ref()) {
        ("MODIFIED", Some(old)) => {
            let before = sel.matches(k, old);
            match (before, now) {
                (true, true) => Some(("MODIFIED".into(), ev.object.clone())),
                (false, true) => Some(("ADDED".into(), ev.object.clone())),
                (true, false) => Some(("DELETED".into(), ev.object.clone())),
                (false, false) => None,
            }
        }
        (t, _) => now.then(|| (t.to_string(), ev.object.clone())),
    }
}
