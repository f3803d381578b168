//! The `nginx-auth` style: Ingresses for ingress-nginx without any snippet, with only
//! annotations its default `annotations-risk-level` (High, since v1.12) accepts:
//!
//! | annotation | value | risk |
//! | --- | --- | --- |
//! | `nginx.ingress.kubernetes.io/use-regex` | `"true"` | Low |
//! | `nginx.ingress.kubernetes.io/rewrite-target` | `/$1` | Medium |
//! | `nginx.ingress.kubernetes.io/auth-url` (scoped groups) | `<--auth-url>?scopes=<scope token>` | High |
//! | `nginx.ingress.kubernetes.io/auth-response-headers` (scoped groups) | `User-Id,User-Scopes` | Medium |
//!
//! Prefix stripping needs a capture group, so each path is a regular expression with
//! `pathType: ImplementationSpecific` (ingress-nginx's `strict-validate-path-type`, on by
//! default, refuses regex characters in `Prefix` paths). For the endpoint `/protected/admin`
//! of the app `web`:
//!
//! ```text
//! path: /web/(protected/admin(?:/.*)?)$      rewrite-target: /$1
//! ```
//!
//! which matches `/web/protected/admin` and everything below it (not `/web/protected/adminx`)
//! and sends `/protected/admin…` to the backend. The endpoint `/` is `/web(?:/|$)(.*)$`. A
//! trailing `/` of an endpoint path is dropped (it matches the same requests), and `.` is
//! written `[.]` so that it matches only a dot — the only character of the endpoints file's path
//! alphabet that means something in a regular expression. ingress-nginx matches regex locations
//! case-insensitively (`~*`), for every path of the host once one Ingress there uses a regex.
//!
//! A scoped group's auth request goes to the `--auth-url` (inherited from the live managed
//! Ingresses when not given) with the query `scopes=<scope token>` (see
//! [`super::scope_token`]); the auth service answers 2xx with `User-Id` and `User-Scopes`, which
//! ingress-nginx passes to the backend, or 401/403.

use std::collections::BTreeMap;

use serde_json::Value;

use super::ingress::Flavor;
use super::refs::AuthUrl;
use super::{
    AUTH_RESPONSE_HEADERS, RouteContext, ScopeGroup, path_core, scope_token, scopes_of_token,
};
use appupdate_model::plan::{PlanError, RouteStyle};

pub const USE_REGEX: &str = "nginx.ingress.kubernetes.io/use-regex";
pub const REWRITE_TARGET: &str = "nginx.ingress.kubernetes.io/rewrite-target";
pub const AUTH_URL: &str = "nginx.ingress.kubernetes.io/auth-url";
pub const AUTH_RESPONSE_HEADERS_ANNOTATION: &str =
    "nginx.ingress.kubernetes.io/auth-response-headers";

/// The rewrite target: the one capture group of every path.
pub const TARGET: &str = "/$1";

/// The regular expression path of an endpoint path (see the module docs).
pub fn regex_path(app: &str, path: &str) -> String {
    let app = app.replace('.', "[.]");
    match path_core(path) {
        "/" => format!("/{app}(?:/|$)(.*)$"),
        core => {
            let rest = core.trim_start_matches('/').replace('.', "[.]");
            format!("/{app}/({rest}(?:/.*)?)$")
        }
    }
}

/// The endpoint path a [`regex_path`] serves.
pub fn endpoint_of_regex(app: &str, path: &str) -> Option<String> {
    let app = app.replace('.', "[.]");
    if path == format!("/{app}(?:/|$)(.*)$") {
        return Some("/".to_owned());
    }
    let rest = path
        .strip_prefix(&format!("/{app}/("))?
        .strip_suffix("(?:/.*)?)$")?;
    Some(format!("/{}", rest.replace("[.]", ".")))
}

/// The base `--auth-url` of a live nginx-auth Ingress.
pub fn auth_url_of(live: &Value) -> Option<AuthUrl> {
    AuthUrl::of_annotation(live["metadata"]["annotations"][AUTH_URL].as_str()?)
}

/// The `nginx-auth` flavour of Ingress.
#[derive(Debug)]
pub struct NginxAuth;

impl Flavor for NginxAuth {
    fn style(&self) -> RouteStyle {
        RouteStyle::NginxAuth
    }

    fn owned_annotations(&self) -> &'static [&'static str] {
        &[
            USE_REGEX,
            REWRITE_TARGET,
            AUTH_URL,
            AUTH_RESPONSE_HEADERS_ANNOTATION,
        ]
    }

    fn recognizes(&self, live: &Value) -> bool {
        let a = &live["metadata"]["annotations"];
        a.get(REWRITE_TARGET).is_some() && a.get(super::nginx_snippet::SNIPPET_ANNOTATION).is_none()
    }

    fn check(&self, ctx: &RouteContext, groups: &[ScopeGroup]) -> Result<(), PlanError> {
        if ctx.attachment.auth_url.is_none()
            && let Some(g) = groups.iter().find(|g| !g.is_public())
        {
            return Err(PlanError::Unexpected {
                reference: format!("routes of {}", ctx.app),
                message: format!(
                    "the paths with scopes ({}: {}) need an auth service, and no managed nginx-auth Ingress has one to take; give its URL with --auth-url URL",
                    g.scopes.join(" "),
                    g.paths.join(", ")
                ),
            });
        }
        Ok(())
    }

    fn annotations(&self, ctx: &RouteContext, group: &ScopeGroup) -> BTreeMap<String, String> {
        let mut a = BTreeMap::from([
            (USE_REGEX.to_owned(), "true".to_owned()),
            (REWRITE_TARGET.to_owned(), TARGET.to_owned()),
        ]);
        if let (false, Some(url)) = (group.is_public(), &ctx.attachment.auth_url) {
            a.insert(
                AUTH_URL.to_owned(),
                url.with_scopes(&scope_token(&group.scopes)),
            );
            a.insert(
                AUTH_RESPONSE_HEADERS_ANNOTATION.to_owned(),
                AUTH_RESPONSE_HEADERS.join(","),
            );
        }
        a
    }

    fn http_path(&self, app: &str, path: &str) -> (String, &'static str) {
        (regex_path(app, path), "ImplementationSpecific")
    }

    fn endpoint_of(&self, app: &str, path: &str) -> Option<String> {
        endpoint_of_regex(app, path)
    }

    fn live_scopes(&self, live: &Value) -> Vec<String> {
        live["metadata"]["annotations"][AUTH_URL]
            .as_str()
            .and_then(|u| u.split_once("?scopes="))
            .and_then(|(_, token)| scopes_of_token(token))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_endpoint_is_an_anchored_regex_with_one_capture() {
        assert_eq!(
            regex_path("web", "/protected/admin"),
            "/web/(protected/admin(?:/.*)?)$"
        );
        assert_eq!(regex_path("web", "/a/"), "/web/(a(?:/.*)?)$");
        assert_eq!(
            regex_path("web", "/v1.2/x.json"),
            "/web/(v1[.]2/x[.]json(?:/.*)?)$"
        );
        assert_eq!(regex_path("web", "/"), "/web(?:/|$)(.*)$");
        for p in [
            "/protected/admin",
            "/v1.2/x.json",
            "/",
            "/a-b_c~d:e@f!g,h=i&j",
        ] {
            assert_eq!(
                endpoint_of_regex("web", &regex_path("web", p)).as_deref(),
                Some(p)
            );
        }
        assert_eq!(endpoint_of_regex("web", "/web/a"), None);
    }
}
