//! The `nginx-snippet` style: the original format, byte for byte. Ingresses with
//! `pathType: Prefix` paths `/<app><path>` and one annotation,
//! `nginx.ingress.kubernetes.io/configuration-snippet`, which is exactly (public group):
//!
//! ```text
//! rewrite ^/web/(.*)$ /$1 break;
//! ```
//!
//! and for a scoped group (scopes sorted, separated by one space):
//!
//! ```text
//! set $scopes "admin user";
//! auth_request /external-auth;
//! auth_request_set $user_id $upstream_http_user_id;
//! auth_request_set $user_scopes $upstream_http_user_scopes;
//! proxy_set_header User-Id $user_id;
//! proxy_set_header User-Scopes $user_scopes;
//! rewrite ^/web/(.*)$ /$1 break;
//! ```
//!
//! each line ending in `\n`. Dots in the application name are escaped in the regex (`my\.app`).
//! ingress-nginx ≥ 1.9 disables snippet annotations unless the controller allows them, and
//! ≥ 1.12 refuses `configuration-snippet` at the default annotation risk level: on such a
//! cluster choose `nginx-auth` or `gateway`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::ingress::Flavor;
use super::{RouteContext, ScopeGroup, normalize_scopes};
use appupdate_model::plan::{PlanError, RouteStyle};

/// The annotation this style owns.
pub const SNIPPET_ANNOTATION: &str = "nginx.ingress.kubernetes.io/configuration-snippet";
/// Where nginx sends the token for scoped groups.
pub const AUTH_LOCATION: &str = "/external-auth";

const SCOPES_PREFIX: &str = "set $scopes \"";

/// The `configuration-snippet` annotation for a group (`scopes` sorted and de-duplicated here).
pub fn configuration_snippet(app: &str, scopes: &[String]) -> String {
    let mut s = String::new();
    let scopes = normalize_scopes(scopes);
    if !scopes.is_empty() {
        s.push_str(&format!("{SCOPES_PREFIX}{}\";\n", scopes.join(" ")));
        s.push_str(&format!("auth_request {AUTH_LOCATION};\n"));
        s.push_str("auth_request_set $user_id $upstream_http_user_id;\n");
        s.push_str("auth_request_set $user_scopes $upstream_http_user_scopes;\n");
        s.push_str("proxy_set_header User-Id $user_id;\n");
        s.push_str("proxy_set_header User-Scopes $user_scopes;\n");
    }
    let app_re = app.replace('.', "\\.");
    s.push_str(&format!("rewrite ^/{app_re}/(.*)$ /$1 break;\n"));
    s
}

/// The scopes a snippet written by [`configuration_snippet`] requires: the words of its
/// `set $scopes "…";` line, or empty when there is none (public).
pub fn snippet_scopes(snippet: &str) -> Vec<String> {
    snippet
        .lines()
        .find_map(|l| l.trim().strip_prefix(SCOPES_PREFIX)?.strip_suffix("\";"))
        .map(|words| words.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The `nginx-snippet` flavour of Ingress.
#[derive(Debug)]
pub struct NginxSnippet;

impl Flavor for NginxSnippet {
    fn style(&self) -> RouteStyle {
        RouteStyle::NginxSnippet
    }

    fn owned_annotations(&self) -> &'static [&'static str] {
        &[SNIPPET_ANNOTATION]
    }

    fn recognizes(&self, live: &Value) -> bool {
        live["metadata"]["annotations"]
            .get(SNIPPET_ANNOTATION)
            .is_some()
    }

    fn check(&self, _ctx: &RouteContext, _groups: &[ScopeGroup]) -> Result<(), PlanError> {
        Ok(())
    }

    fn annotations(&self, ctx: &RouteContext, group: &ScopeGroup) -> BTreeMap<String, String> {
        BTreeMap::from([(
            SNIPPET_ANNOTATION.to_owned(),
            configuration_snippet(&ctx.app, &group.scopes),
        )])
    }

    fn http_path(&self, app: &str, path: &str) -> (String, &'static str) {
        (["/", app, path].concat(), "Prefix")
    }

    fn endpoint_of(&self, app: &str, path: &str) -> Option<String> {
        let rest = path.strip_prefix('/')?.strip_prefix(app)?;
        rest.starts_with('/').then(|| rest.to_owned())
    }

    fn live_scopes(&self, live: &Value) -> Vec<String> {
        live["metadata"]["annotations"][SNIPPET_ANNOTATION]
            .as_str()
            .map(snippet_scopes)
            .unwrap_or_default()
    }
}
