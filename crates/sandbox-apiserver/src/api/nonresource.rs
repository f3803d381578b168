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
pub fn non_resource(
    ctx: &Ctx<'_>,
    method: &Method,
    path: &str,
    query: &[(String, String)],
    headers: &HeaderMap,
) -> Reply {
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
        ["version"] => json_reply(200, discovery::version(), pretty),
        [check @ ("healthz" | "livez" | "readyz")] => health(check, query),
        [check @ ("healthz" | "livez" | "readyz"), rest @ ..] => {
            let name = rest.join("/");
            if health_checks(check).contains(&name.as_str()) {
                Reply {
                    status: 200,
                    headers: vec![
                        ("Cache-Control".into(), "no-cache, private".into()),
                        ("Content-Type".into(), "text/plain; charset=utf-8".into()),
                    ],
                    body: full(Bytes::from_static(b"ok")),
                    reason: None,
                    cut: false,
                    json: None,
                }
            } else {
                not_found_text()
            }
        }
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
                    json: None,
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
                json: None,
            }
        }
        ["api"] => json_reply(200, discovery::api(&ctx.addr.to_string()), pretty),
        ["apis"] => json_reply(200, discovery::apis(ctx.registry), pretty),
        ["api", v] => match discovery::resource_list(ctx.registry, "", v) {
            Some(d) => json_reply(200, d, pretty),
            None => status_reply(&status::generic(404, ""), pretty),
        },
        ["apis", g] => match discovery::api_group(ctx.registry, g) {
            Some(d) => json_reply(200, d, pretty),
            None => not_found_text(),
        },
        ["apis", g, v] => match discovery::resource_list(ctx.registry, g, v) {
            Some(d) => json_reply(200, d, pretty),
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
                    json: None,
                }
            } else {
                json_reply(
                    200,
                    json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.28.0"}, "paths": {}}),
                    pretty,
                )
            }
        }
        // The real index goes out as text/plain (net/http sniffs it).
        ["openapi", "v3"] => Reply {
            status: 200,
            headers: vec![
                ("Cache-Control".into(), "no-cache, private".into()),
                ("Content-Type".into(), "text/plain; charset=utf-8".into()),
            ],
            body: full(gojson::encode(&openapi::v3_root(ctx.registry), pretty)),
            reason: None,
            cut: false,
            json: None,
        },
        ["openapi", "v3", rest @ ..] => match openapi::v3_doc(ctx.registry, &rest.join("/")) {
            Some(d) => json_reply(200, d, pretty),
            None => not_found_text(),
        },
        _ => not_found_text(),
    }
}

/// The checks the real server's `/livez`, `/readyz` and `/healthz` run, in its order.
fn health_checks(endpoint: &str) -> Vec<&'static str> {
    const HOOKS: &[&str] = &[
        "poststarthook/start-kube-apiserver-admission-initializer",
        "poststarthook/generic-apiserver-start-informers",
        "poststarthook/priority-and-fairness-config-consumer",
        "poststarthook/priority-and-fairness-filter",
        "poststarthook/storage-object-count-tracker-hook",
        "poststarthook/start-apiextensions-informers",
        "poststarthook/start-apiextensions-controllers",
        "poststarthook/crd-informer-synced",
        "poststarthook/start-service-ip-repair-controllers",
        "poststarthook/rbac/bootstrap-roles",
        "poststarthook/scheduling/bootstrap-system-priority-classes",
        "poststarthook/priority-and-fairness-config-producer",
        "poststarthook/start-system-namespaces-controller",
        "poststarthook/bootstrap-controller",
        "poststarthook/start-cluster-authentication-info-controller",
        "poststarthook/start-kube-apiserver-identity-lease-controller",
        "poststarthook/start-deprecated-kube-apiserver-identity-lease-garbage-collector",
        "poststarthook/start-kube-apiserver-identity-lease-garbage-collector",
        "poststarthook/start-legacy-token-tracking-controller",
        "poststarthook/start-kube-aggregator-informers",
        "poststarthook/apiservice-registration-controller",
        "poststarthook/apiservice-status-available-controller",
        "poststarthook/kube-apiserver-autoregistration",
        "autoregister-completion",
        "poststarthook/apiservice-openapi-controller",
        "poststarthook/apiservice-openapiv3-controller",
        "poststarthook/apiservice-discovery-controller",
    ];
    let mut checks = vec!["ping", "log", "etcd"];
    if endpoint == "readyz" {
        checks.extend(["etcd-readiness", "informer-sync"]);
    }
    checks.extend(HOOKS);
    if endpoint == "readyz" {
        checks.push("shutdown");
    }
    checks
}

/// `/livez`, `/readyz`, `/healthz`: `ok`, or with `verbose` (any value) every check, the
/// `exclude`d ones marked.
fn health(endpoint: &str, query: &[(String, String)]) -> Reply {
    if !query.iter().any(|(k, _)| k == "verbose") {
        return text_reply(200, "ok");
    }
    let excluded: Vec<&str> = query
        .iter()
        .filter(|(k, _)| k == "exclude")
        .map(|(_, v)| v.as_str())
        .collect();
    let mut out = String::new();
    for c in health_checks(endpoint) {
        if excluded.contains(&c) {
            out.push_str(&format!("[+]{c} excluded: ok\n"));
        } else {
            out.push_str(&format!("[+]{c} ok\n"));
        }
    }
    out.push_str(&format!("{endpoint} check passed\n"));
    text_reply(200, &out)
}

/// A discovery path (a write to it is 405, not 404).
fn discovery_path(path: &str) -> bool {
    path == "/api"
        || path == "/apis"
        || path.starts_with("/api/")
        || path.starts_with("/apis/")
        || path == "/version"
}
