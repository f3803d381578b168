//! WATCH streams: the initial events (from the history after a resourceVersion, or the current
//! objects), then every change the selectors let through, until the timeout or shutdown.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc, watch};

use super::request::{RequestInfo, parse_bool, query_get};
use super::table::table_for;
use super::{Ctx, Reply, status_reply, stopped};
use crate::kinds::{self, Kind};
use crate::model::gojson;
use crate::model::schema;
use crate::model::status::{self, StatusBody};
use crate::store::{Event, Selectors, Store};

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
    let opts = match WatchOptions::parse(k, info, query, table) {
        Ok(o) => o,
        Err(e) => return status_reply(&e, ctx.pretty),
    };
    let start = match start(ctx.store, k, &opts) {
        Ok(s) => s,
        Err(e) => return status_reply(&e, ctx.pretty),
    };
    let (tx, out_rx) = mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(64);
    tokio::spawn(stream_events(tx, start, k, opts, ctx.shutdown.clone()));
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

/// What a watch asked for.
struct WatchOptions {
    sel: Selectors,
    /// `resourceVersion`: events after it; `None` (absent or 0): the current objects first.
    start_rv: Option<u64>,
    timeout: Duration,
    bookmarks: bool,
    /// The namespace watched (`None`: all, or a cluster-scoped kind).
    ns: Option<String>,
    table: bool,
}

impl WatchOptions {
    fn parse(
        k: &dyn Kind,
        info: &RequestInfo,
        query: &[(String, String)],
        table: bool,
    ) -> Result<WatchOptions, StatusBody> {
        let sel = Selectors::parse(
            k,
            query_get(query, "labelSelector"),
            query_get(query, "fieldSelector"),
        )?;
        if query_get(query, "sendInitialEvents").is_some() {
            return Err(status::invalid_kind(
                "meta.k8s.io",
                "ListOptions",
                "",
                &[status::FieldError::forbidden(
                    "sendInitialEvents",
                    "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
                )],
            ));
        }
        let start_rv = match query_get(query, "resourceVersion").unwrap_or("") {
            "" | "0" => None,
            other => Some(other.parse::<u64>().map_err(|_| {
                status::invalid_kind(
                    "meta.k8s.io",
                    "ListOptions",
                    "",
                    &[status::FieldError::invalid(
                        "resourceVersion",
                        &status::go_quote(other),
                        "must be an integer",
                    )],
                )
            })?),
        };
        // Without timeoutSeconds the real server picks 30 to 60 minutes.
        let timeout = query_get(query, "timeoutSeconds")
            .and_then(|t| t.parse::<u64>().ok())
            .map(Duration::from_secs)
            .unwrap_or_else(|| {
                Duration::from_secs(1800 + (uuid::Uuid::new_v4().as_bytes()[0] as u64 % 60) * 30)
            });
        Ok(WatchOptions {
            sel,
            start_rv,
            timeout,
            bookmarks: parse_bool(query_get(query, "allowWatchBookmarks")),
            ns: (!info.namespace.is_empty() && k.api().namespaced).then(|| info.namespace.clone()),
            table,
        })
    }
}

/// Where a watch starts: its first events, the subscription for the rest, the revision now.
struct Start {
    initial: Vec<(String, Value)>,
    rx: broadcast::Receiver<Arc<Event>>,
    rv: u64,
}

/// Subscribe and take the first events under one lock, so none is missed or sent twice; 410
/// when the history no longer reaches back to the requested revision.
fn start(store: &Store, k: &'static dyn Kind, opts: &WatchOptions) -> Result<Start, StatusBody> {
    let st = store.lock();
    let rx = st.events.subscribe();
    let ns = opts.ns.as_deref();
    let initial = match opts.start_rv {
        None => st
            .select(k, ns, &opts.sel)
            .into_iter()
            .map(|o| ("ADDED".to_string(), kinds::to_wire(k, o)))
            .collect(),
        Some(from) => {
            if let Some(oldest) = st.history.first().map(|e| e.rv)
                && from + 1 < oldest
                && from < st.rv
            {
                return Err(StatusBody::new(
                    410,
                    "Expired",
                    format!("too old resource version: {from} ({})", oldest - 1),
                    Some(json!({})),
                ));
            }
            st.history
                .iter()
                .filter(|e| e.rv > from)
                .filter_map(|ev| filter_event(ev, k, ns, &opts.sel))
                .collect()
        }
    };
    Ok(Start {
        initial,
        rx,
        rv: st.rv,
    })
}

/// Send the first events, then every event the watcher sees, bookmarks every minute when
/// allowed, until the timeout, shutdown or the client going away.
async fn stream_events(
    tx: mpsc::Sender<Result<Frame<Bytes>, std::io::Error>>,
    start: Start,
    k: &'static dyn Kind,
    opts: WatchOptions,
    mut shutdown: watch::Receiver<bool>,
) {
    let Start {
        initial,
        mut rx,
        rv: mut last_rv,
    } = start;
    let render = |t: String, o: Value| -> Bytes {
        if opts.table {
            event_line(&t, table_for(k, std::slice::from_ref(&o), None, None))
        } else {
            event_line(&t, o)
        }
    };
    for (t, o) in initial {
        if tx.send(Ok(Frame::data(render(t, o)))).await.is_err() {
            return;
        }
    }
    let deadline = tokio::time::sleep(opts.timeout);
    tokio::pin!(deadline);
    let mut tick = tokio::time::interval(Duration::from_secs(60));
    tick.tick().await;
    loop {
        tokio::select! {
            _ = &mut deadline => break,
            _ = stopped(&mut shutdown) => break,
            _ = tick.tick(), if opts.bookmarks => {
                // An empty object of the kind carrying only the revision, as the real server sends.
                let mut empty = schema::zero_struct(schema::type_def(k.schema()));
                empty["metadata"] = json!({"resourceVersion": last_rv.to_string(), "creationTimestamp": null});
                let bm = kinds::to_wire(k, &empty);
                if tx.send(Ok(Frame::data(event_line("BOOKMARK", bm)))).await.is_err() { return; }
            }
            ev = rx.recv() => match ev {
                Ok(ev) => {
                    last_rv = last_rv.max(ev.rv);
                    if let Some((t, o)) = filter_event(&ev, k, opts.ns.as_deref(), &opts.sel)
                        && tx.send(Ok(Frame::data(render(t, o)))).await.is_err() { return; }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => break,
                Err(broadcast::error::RecvError::Closed) => break,
            },
            _ = tx.closed() => return,
        }
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
    // Another version of the same resource: the object as this version serves it.
    let object = || {
        if ev.kind.api() == k.api() {
            ev.object.clone()
        } else {
            kinds::to_wire(k, &ev.object)
        }
    };
    match (ev.event_type, ev.old.as_ref()) {
        ("MODIFIED", Some(old)) => {
            let before = sel.matches(k, old);
            match (before, now) {
                (true, true) => Some(("MODIFIED".into(), object())),
                (false, true) => Some(("ADDED".into(), object())),
                (true, false) => Some(("DELETED".into(), object())),
                (false, false) => None,
            }
        }
        (t, _) => now.then(|| (t.to_string(), object())),
    }
}
