//! Paths that are not resources: `/version`, `/healthz`, `/livez`, `/readyz`, discovery and
//! OpenAPI.

use bytes::Bytes;
use http::{HeaderMap, Method};
use serde_json::json;

use super::{
    Ctx, Reply, discovery, full, json_reply, not_found_text, openapi, status_reply, text_reply,
};
use crate::model::gojson;
use crate::model::status;

/// GET of a path that is not a resource: `/version`, health, discovery (also in the
/// aggregated form, with Etag/304), OpenAPI.
pub fn non_resource(ctx: &Ctx<'_>, method: &Method, path: &str, headers: &HeaderMap) -> Reply {
    let pretty = ctx.pretty;
    if method != Method::GET && method != Method::HEAD {
        if discovery_path(path) {
            return status_reply(&status::generic(405, ""), pretty);
        }
        return not_found_text();
    }
    let accept = headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let aggregated = accept
        .split(',')
        .any(|p| p.contains("as=APIGroupDiscoveryList"));
    let trimmed = path.trim_end_matches('/');
    let parts: Vec<&str> = trimmed.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["version"] => json_reply(200, &discovery::version(), pretty),
        ["healthz"] | ["livez"] | ["readyz"] => text_reply(200, "ok"),
        ["api"] | ["apis"] if aggregated => {
            let (doc, etag) = if parts[0] == "api" {
                (
                    discovery::aggregated_api(),
                    discovery::AGGREGATED_API_ETAG.to_string(),
                )
            } else {
                discovery::aggregated_apis(ctx.registry)
            };
            if headers
                .get(http::header::IF_NONE_MATCH)
                .and_then(|v| v.to_str().ok())
                == Some(etag.as_str())
            {
                return Reply {
                    status: 304,
                    headers: vec![
                        ("Etag".into(), etag),
                        ("Vary".into(), "Accept".into()),
                        ("Cache-Control".into(), "public".into()),
                    ],
                    body: full(Bytes::new()),
                    reason: None,
                    cut: false,
                };
            }
            Reply {
                status: 200,
                headers: vec![
                    ("Cache-Control".into(), "public".into()),
                    (
                        "Content-Type".into(),
                        discovery::AGGREGATED_CONTENT_TYPE.into(),
                    ),
                    ("Etag".into(), etag),
                    ("Vary".into(), "Accept".into()),
                ],
                body: full(gojson::encode(&doc, pretty)),
                reason: None,
                cut: false,
            }
        }
        ["api"] => json_reply(200, &discovery::api(&ctx.addr.to_string()), pretty),
        ["apis"] => json_reply(200, &discovery::apis(ctx.registry), pretty),
        ["api", v] => match discovery::resource_list(ctx.registry, "", v) {
            Some(d) => json_reply(200, &d, pretty),
            None => status_reply(&status::generic(404, ""), pretty),
        },
        ["apis", g] => match discovery::api_group(ctx.registry, g) {
            Some(d) => json_reply(200, &d, pretty),
            None => not_found_text(),
        },
        ["apis", g, v] => match discovery::resource_list(ctx.registry, g, v) {
            Some(d) => json_reply(200, &d, pretty),
            None if discovery::group_served(ctx.registry, g) => {
                status_reply(&status::generic(404, ""), pretty)
            }
            None => not_found_text(),
        },
        ["openapi", "v2"] => {
            if accept.contains("protobuf") {
                Reply {
                    status: 200,
                    headers: vec![
                        (
                            "Content-Type".into(),
                            "application/com.github.proto-openapi.spec.v2.v1.0+protobuf".into(),
                        ),
                        ("Cache-Control".into(), "no-cache, private".into()),
                    ],
                    body: full(openapi::v2_protobuf()),
                    reason: None,
                    cut: false,
                }
            } else {
                json_reply(
                    200,
                    &json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.28.0"}, "paths": {}}),
                    pretty,
                )
            }
        }
        ["openapi", "v3"] => json_reply(200, &openapi::v3_root(ctx.registry), pretty),
        ["openapi", "v3", rest @ ..] => match openapi::v3_doc(ctx.registry, &rest.join("/")) {
            Some(d) => json_reply(200, &d, pretty),
            None => not_found_text(),
        },
        _ => not_found_text(),
    }
}

/// A discovery path (a write to it is 405, not 404).
fn discovery_path(path: &str) -> bool {
    path == "/api"
        || path == "/apis"
        || path.starts_with("/api/")
        || path.starts_with("/apis/")
        || path == "/version"
}
