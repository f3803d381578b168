//! WATCH streams: the initial events (from the history after a resourceVersion, or the current
//! objects), then every change the selectors let through, until the timeout or shutdown.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc, watch};

use super::list::{ListOptions, parse_rv};
use super::request::{Output, RequestInfo, query_get};
use super::table::{Include, partial, table_for};
use super::{Ctx, Reply, status_reply, stopped};
use crate::kinds::{self, Kind};
use crate::model::gojson;
use crate::model::schema;
use crate::model::selector::FieldTerm;
use crate::model::status::{self, StatusBody};
use crate::store::{Event, Selectors, Store};

fn event_line(event_type: &str, obj: Value) -> Bytes {
    let mut m = serde_json::Map::new();
    m.insert("type".into(), json!(event_type));
    m.insert("object".into(), obj);
    Bytes::from(gojson::encode(&Value::Object(m), false))
}

/// WATCH: from a resourceVersion (or the current objects as ADDED), selector transitions,
/// `timeoutSeconds`, bookmarks; events as one JSON line each (Tables or partial metadata
/// when asked for). A resourceVersion the history no longer reaches is one ERROR event (410).
pub fn watch(
    ctx: &Ctx<'_>,
    k: &'static dyn Kind,
    info: &RequestInfo,
    query: &[(String, String)],
    output: Output,
) -> Reply {
    let opts = match WatchOptions::parse(k, info, query, output) {
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
        json: None,
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
    output: Output,
    include: Include,
}

impl WatchOptions {
    fn parse(
        k: &dyn Kind,
        info: &RequestInfo,
        query: &[(String, String)],
        output: Output,
    ) -> Result<WatchOptions, StatusBody> {
        let opts = ListOptions::parse(k, query, true)?;
        let mut sel = opts.sel;
        // A watch of one object (`/watch/…/<name>`) selects it by name.
        if !info.name.is_empty() {
            match sel.field.terms.iter().find(|t| t.field == "metadata.name") {
                Some(t) if t.negate || t.value != info.name => {
                    return Err(status::bad_request(
                        "fieldSelector metadata.name doesn't match requested name",
                    ));
                }
                Some(_) => {}
                None => sel.field.terms.push(FieldTerm {
                    field: "metadata.name".into(),
                    value: info.name.clone(),
                    negate: false,
                }),
            }
        }
        let start_rv = match parse_rv(&opts.resource_version) {
            Ok(0) => None,
            Ok(rv) => Some(rv),
            Err(m) => return Err(StatusBody::new(500, "", m, None)),
        };
        let include = match output {
            Output::Table(_) => Include::parse(query_get(query, "includeObject"))?,
            _ => Include::Metadata,
        };
        // Without timeoutSeconds the real server picks 30 to 60 minutes.
        let timeout = opts
            .timeout_seconds
            .filter(|t| *t > 0)
            .map(|t| Duration::from_secs(t as u64))
            .unwrap_or_else(|| {
                Duration::from_secs(1800 + (uuid::Uuid::new_v4().as_bytes()[0] as u64 % 60) * 30)
            });
        Ok(WatchOptions {
            sel,
            start_rv,
            timeout,
            bookmarks: opts.bookmarks,
            ns: (!info.namespace.is_empty() && k.api().namespaced).then(|| info.namespace.clone()),
            output,
            include,
        })
    }
}

/// Where a watch starts: its first events, the subscription for the rest, the revision now.
struct Start {
    initial: Vec<(String, Value)>,
    rx: broadcast::Receiver<Arc<Event>>,
    rv: u64,
    /// The requested revision is older than the history: one ERROR event, then the end.
    expired: Option<Value>,
}

/// Subscribe and take the first events under one lock, so none is missed or sent twice.
fn start(store: &Store, k: &'static dyn Kind, opts: &WatchOptions) -> Result<Start, StatusBody> {
    let st = store.read();
    let rx = st.events.subscribe();
    let ns = opts.ns.as_deref();
    let mut expired = None;
    let initial = match opts.start_rv {
        None => st
            .select(k, ns, &opts.sel)
            .into_iter()
            .map(|o| ("ADDED".to_string(), o.clone()))
            .collect(),
        Some(from) => {
            let oldest = st.watch_start();
            if from < oldest {
                expired = Some(
                    StatusBody::new(
                        410,
                        "Expired",
                        format!("too old resource version: {from} ({oldest})"),
                        None,
                    )
                    .to_json(),
                );
                Vec::new()
            } else {
                st.history
                    .iter()
                    .filter(|e| e.rv > from)
                    .filter_map(|ev| filter_event(ev, k, ns, &opts.sel))
                    .collect()
            }
        }
    };
    Ok(Start {
        initial,
        rx,
        rv: st.rv,
        expired,
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
        expired,
    } = start;
    if let Some(status) = expired {
        let _ = tx.send(Ok(Frame::data(event_line("ERROR", status)))).await;
        return;
    }
    // A Table's column definitions come with the first event only. The events carry the
    // objects as stored or as their writer's version wrote them; `k` converts them.
    let mut headers_sent = false;
    let mut render = |t: String, o: Value| -> Option<Bytes> {
        Some(match opts.output {
            // An event is not a list: the encoder fails and the stream ends.
            Output::PartialList(_) => return None,
            Output::Table(version) => {
                let mut table = table_for(
                    k,
                    std::slice::from_ref(&o),
                    None,
                    None,
                    version,
                    opts.include,
                );
                if headers_sent {
                    table["columnDefinitions"] = Value::Null;
                }
                headers_sent = true;
                event_line(&t, table)
            }
            Output::Partial(version) => event_line(&t, partial(&o, version)),
            Output::Json | Output::Yaml => event_line(&t, kinds::to_wire(k, &o)),
        })
    };
    for (t, o) in initial {
        let Some(line) = render(t, o) else { return };
        if tx.send(Ok(Frame::data(line))).await.is_err() {
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
                if tx.send(Ok(Frame::data(event_line("BOOKMARK", kinds::to_wire(k, &empty))))).await.is_err() { return; }
            }
            ev = rx.recv() => match ev {
                Ok(ev) => {
                    last_rv = last_rv.max(ev.rv);
                    if let Some((t, o)) = filter_event(&ev, k, opts.ns.as_deref(), &opts.sel) {
                        let Some(line) = render(t, o) else { return };
                        if tx.send(Ok(Frame::data(line))).await.is_err() { return; }
                    }
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
    // The object as its writer's version wrote it: the caller converts it.
    let object = || ev.object.clone();
    match (ev.event_type, ev.old.as_ref()) {
        ("MODIFIED", Some(old)) => {
            let before = sel.matches(k, old);
            match (before, now) {
                (true, true) => Some(("MODIFIED".into(), object())),
                (false, true) => Some(("ADDED".into(), object())),
                // Leaving the selection: DELETED with the previous state at this revision.
                (true, false) => {
                    let mut gone = old.clone();
                    if let Some(m) = gone.get_mut("metadata").and_then(Value::as_object_mut) {
                        m.insert("resourceVersion".into(), json!(ev.rv.to_string()));
                    }
                    Some(("DELETED".into(), gone))
                }
                (false, false) => None,
            }
        }
        (t, _) => now.then(|| (t.to_string(), object())),
    }
}
