//! The resources the real server lists in discovery that the sandbox does not store: true to a
//! cluster without controllers (no pods, no ReplicaSets), without pretending to hold objects.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::json;

use super::discovery::GenericResource;
use super::request::{Output, RequestInfo, negotiate};
use super::{Ctx, Reply, json_reply, status_reply, stopped};
use crate::model::status::{self, StatusBody};

/// A resource the real server advertises that the sandbox does not store (pods, ReplicaSets…):
/// it lists empty, watches without events until the timeout, has no objects, takes no writes.
pub fn generic_resource(
    ctx: &Ctx<'_>,
    watch_timeout: u64,
    g: &GenericResource,
    method: &Method,
    info: &RequestInfo,
    headers: &HeaderMap,
) -> Reply {
    let pretty = ctx.pretty;
    let list_kind = format!("{}List", g.kind);
    let api_version = if g.group.is_empty() {
        g.version.clone()
    } else {
        format!("{}/{}", g.group, g.version)
    };
    let output = match negotiate(headers) {
        Ok(o) => o,
        Err(s) => return status_reply(&s, pretty),
    };
    match (method.as_str(), info.name.is_empty(), info.verb.as_str()) {
        ("GET", true, "list") => {
            let rv = ctx.store.read().rv;
            // The nodes the sandbox was started with (`SandboxOptions::node_platforms`).
            let items: &[serde_json::Value] = if g.group.is_empty() && g.resource == "nodes" {
                ctx.registry.nodes()
            } else {
                &[]
            };
            match output {
                Output::Table(version) => {
                    return json_reply(
                        200,
                        json!({"kind": "Table", "apiVersion": format!("meta.k8s.io/{version}"), "metadata": {"resourceVersion": rv.to_string()},
                            "columnDefinitions": [{"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0}],
                            "rows": []}),
                        pretty,
                    );
                }
                Output::Partial(_) => {
                    let package = crate::store::internal_package(&g.group);
                    return status_reply(
                        &crate::model::status::StatusBody::new(
                            406,
                            "NotAcceptable",
                            format!(
                                "you requested PartialObjectMetadata, but the requested object is a list (*{package}.{list_kind})"
                            ),
                            None,
                        ),
                        pretty,
                    );
                }
                Output::PartialList(version) => {
                    return json_reply(
                        200,
                        json!({"kind": "PartialObjectMetadataList", "apiVersion": format!("meta.k8s.io/{version}"), "metadata": {"resourceVersion": rv.to_string()},
                            "items": items.iter().map(|o| super::table::partial(o, version)).collect::<Vec<_>>()}),
                        pretty,
                    );
                }
                Output::Json | Output::Yaml => {}
            }
            json_reply(
                200,
                json!({"kind": list_kind, "apiVersion": api_version, "metadata": {"resourceVersion": rv.to_string()}, "items": items}),
                pretty,
            )
        }
        ("GET", true, "watch") => {
            // Nothing ever changes: keep the stream open, without events, until it times out.
            let shutdown = ctx.shutdown.clone();
            let timeout = Duration::from_secs(watch_timeout);
            let idle = futures_util::stream::unfold(true, move |first| {
                let mut shutdown = shutdown.clone();
                async move {
                    if first {
                        tokio::select! {
                            _ = tokio::time::sleep(timeout) => {}
                            _ = stopped(&mut shutdown) => {}
                        }
                    }
                    None::<(Result<Frame<Bytes>, std::io::Error>, bool)>
                }
            });
            Reply {
                status: 200,
                headers: vec![
                    ("Cache-Control".into(), "no-cache, private".into()),
                    ("Content-Type".into(), "application/json".into()),
                ],
                body: BodyExt::boxed(StreamBody::new(idle)),
                reason: None,
                cut: false,
                json: None,
            }
        }
        ("GET", false, _) => {
            let gr = status::group_resource(&g.group, &g.resource);
            status_reply(
                &StatusBody::new(
                    404,
                    "NotFound",
                    format!("{gr} \"{}\" not found", info.name),
                    Some(status::details(&info.name, &g.group, &g.resource)),
                ),
                pretty,
            )
        }
        _ => status_reply(&status::generic(405, ""), pretty),
    }
}
