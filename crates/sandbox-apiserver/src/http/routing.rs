//! Routing: which handler serves an authorized request. Non-resource paths go to discovery,
//! OpenAPI and health; a stored kind's paths to the resource handlers once the subresource and
//! the scope fit; resources the real server advertises but the sandbox does not store to the
//! generic handler; the rest is 404 (JSON inside a served group, plain text elsewhere) or 405.

use bytes::Bytes;
use http::{HeaderMap, Method};

use crate::api::request::{RequestInfo, query_get};
use crate::api::{
    Ctx, Hooks, Reply, discovery, generic_resource, nonresource, not_found_text, resource,
    status_reply,
};
use crate::model::status;

#[allow(clippy::too_many_arguments)]
pub fn route(
    ctx: &Ctx<'_>,
    hooks: &mut dyn Hooks,
    method: &Method,
    path: &str,
    query: &[(String, String)],
    headers: &HeaderMap,
    body: &Bytes,
    info: &RequestInfo,
) -> Reply {
    if !info.resource_request {
        return nonresource::non_resource(ctx, method, path, query, headers);
    }
    let pretty = ctx.pretty;
    // go-restful registers no HEAD route for resources.
    if *method == Method::HEAD {
        return status_reply(&status::generic(405, ""), pretty);
    }
    let Some(k) = ctx
        .registry
        .lookup(&info.group, &info.version, &info.resource)
    else {
        if let Some(g) = discovery::generic_resource(&info.group, &info.version, &info.resource) {
            // A cluster-scoped resource has no route under a namespace.
            if !g.namespaced && !info.namespace.is_empty() && info.namespace != info.name {
                return status_reply(&status::generic(404, ""), pretty);
            }
            let timeout = query_get(query, "timeoutSeconds")
                .and_then(|t| t.parse().ok())
                .unwrap_or(1800);
            return generic_resource(ctx, timeout, g, method, info, headers);
        }
        // A CRD's group hands what it does not serve to the mux: a plain-text 404.
        let custom_group = ctx
            .registry
            .custom_resources()
            .any(|(k, _)| k.api().group == info.group);
        if !custom_group
            && (info.group.is_empty() || discovery::group_served(ctx.registry, &info.group))
        {
            return status_reply(&status::generic(404, ""), pretty);
        }
        return not_found_text();
    };
    let sub_served = info.subresource.is_empty()
        || k.subresources()
            .iter()
            .any(|s| s.path() == info.subresource);
    if info.extra > 0 || !sub_served {
        return status_reply(&status::generic(404, ""), pretty);
    }
    let namespaced = k.api().namespaced;
    // A namespaced kind addressed without a namespace (or the reverse) has no route.
    if namespaced
        && info.namespace.is_empty()
        && !(info.name.is_empty() && (info.verb == "list" || info.verb == "watch"))
    {
        return status_reply(
            &status::generic(if info.name.is_empty() { 405 } else { 404 }, ""),
            pretty,
        );
    }
    // RequestInfo puts a namespace's own name in `namespace`; anything else is no route.
    if !namespaced && !info.namespace.is_empty() && info.namespace != info.name {
        return status_reply(&status::generic(404, ""), pretty);
    }
    // A kind served for `create` only has no object path.
    if k.verbs() == ["create"] && !info.name.is_empty() {
        return status_reply(&status::generic(404, ""), pretty);
    }
    // A collection takes no PUT or PATCH; a kind takes only its verbs.
    if (info.name.is_empty() && matches!(info.verb.as_str(), "update" | "patch"))
        || !k.verbs().contains(&info.verb.as_str())
    {
        return status_reply(&status::generic(405, ""), pretty);
    }
    resource::handle(ctx, hooks, k, path, query, headers, body, info)
}
