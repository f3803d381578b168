//! The values of the route flags, parsed and validated before any request: `--auth-url`,
//! `--gateway [NAMESPACE/]NAME`, `--auth-service [NAMESPACE/]NAME:PORT`, `--host`,
//! `--ingress-class`, `--tls-secret`. Each parser returns the value or one sentence saying what
//! is wrong; the caller names the flag.
//!
//! `--auth-url` ends up in an nginx configuration (ingress-nginx copies the `auth-url`
//! annotation into a `proxy_pass`), so its grammar is narrow on purpose — CVE-2025-24514 was an
//! `auth-url` that carried nginx directives:
//!
//! ```text
//! auth-url = ("http" / "https") "://" host [":" port] [path]
//! host     = a DNS name (lowercase letters, digits, "-", ".") or an IPv4 address
//! port     = 1-65535
//! path     = "/" segments of [A-Za-z0-9._~-], no empty, "." or ".." segment
//! ```
//!
//! No user information, query or fragment (the tool adds the query that carries the scopes),
//! no `$` (nginx variables), no spaces, quotes, `;`, `{`, `}` or `%`: every character lies
//! inside ingress-nginx's own `auth-url` validator, so the controller accepts what is written.

use std::fmt;

use serde_json::{Value, json};

use crate::names;
use crate::route_style::{AuthProvider, RouteStyle};

/// The route flags as given on the command line, validated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouteFlags {
    /// `--routes`: `None` reads the style from what is live.
    pub style: Option<RouteStyle>,
    /// `--auth-provider` (`gateway` only): `None` reads it from what is live.
    pub auth_provider: Option<AuthProvider>,
    pub auth_url: Option<AuthUrl>,
    pub gateway: Option<ObjectRef>,
    pub auth_service: Option<ServiceRef>,
    pub ingress_class: Option<String>,
    /// `--host`, in the order given, duplicates removed.
    pub hosts: Vec<String>,
    pub tls_secret: Option<String>,
}

impl RouteFlags {
    /// The flags given that only apply to styles other than `style`, as `(flag, the style it
    /// belongs to)`.
    pub fn foreign_to(&self, style: RouteStyle) -> Vec<(&'static str, &'static str)> {
        let ingress = matches!(style, RouteStyle::NginxSnippet | RouteStyle::NginxAuth);
        let mut out = Vec::new();
        if self.auth_url.is_some() && style != RouteStyle::NginxAuth {
            out.push(("--auth-url", "nginx-auth"));
        }
        if self.gateway.is_some() && style != RouteStyle::Gateway {
            out.push(("--gateway", "gateway"));
        }
        if self.auth_service.is_some() && style != RouteStyle::Gateway {
            out.push(("--auth-service", "gateway"));
        }
        if self.auth_provider.is_some() && style != RouteStyle::Gateway {
            out.push(("--auth-provider", "gateway"));
        }
        if self.ingress_class.is_some() && !ingress {
            out.push(("--ingress-class", "nginx-snippet or nginx-auth"));
        }
        if self.tls_secret.is_some() && !ingress {
            out.push(("--tls-secret", "nginx-snippet or nginx-auth"));
        }
        out
    }
}

/// The auth service's URL for the `nginx-auth` style (see the module docs for the grammar).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthUrl(String);

impl AuthUrl {
    /// Parses and validates `s`.
    pub fn parse(s: &str) -> Result<AuthUrl, String> {
        let rest = s
            .strip_prefix("http://")
            .or_else(|| s.strip_prefix("https://"))
            .ok_or("it must start with http:// or https://")?;
        // Anywhere, not only before the first `/`: a password may hold `/`, and a `@` is no
        // character of the path either.
        if rest.contains('@') {
            return Err("it must not carry user information (user@host)".into());
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        };
        if !(is_ipv4(host) || names::is_dns1123_subdomain(host)) {
            return Err(format!(
                "the host {host:?} is not a lowercase DNS name or an IPv4 address"
            ));
        }
        if let Some(p) = port
            && !p.parse::<u16>().is_ok_and(|n| n > 0)
        {
            return Err(format!("the port {p:?} is not a number from 1 to 65535"));
        }
        if path.contains(['?', '#']) {
            return Err(
                "it must not carry a query or a fragment: the scopes are added as the query ?scopes=…"
                    .into(),
            );
        }
        if !path.is_empty() {
            for segment in path[1..].split('/') {
                if segment == "." || segment == ".." {
                    return Err("its path must not have \".\" or \"..\" segments".into());
                }
                if segment.is_empty() && !path.ends_with('/') {
                    return Err("its path must not have empty segments (\"//\")".into());
                }
                if let Some(c) = segment.chars().find(|c| !is_path_char(*c)) {
                    return Err(format!(
                        "its path contains {c:?}; use only letters, digits, \"/\" and - . _ ~"
                    ));
                }
            }
            if path.contains("//") {
                return Err("its path must not have empty segments (\"//\")".into());
            }
        }
        Ok(AuthUrl(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The URL the auth request of a scope group goes to: this URL with the query
    /// `scopes=<scope token>`.
    pub fn with_scopes(&self, token: &str) -> String {
        format!("{}?scopes={token}", self.0)
    }

    /// The base URL of an `auth-url` annotation written by [`AuthUrl::with_scopes`]; `None`
    /// when the annotation is not one (someone edited it).
    pub fn of_annotation(value: &str) -> Option<AuthUrl> {
        let (base, query) = value.split_once('?')?;
        query.strip_prefix("scopes=")?;
        AuthUrl::parse(base).ok()
    }
}

impl fmt::Display for AuthUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-._~".contains(c)
}

fn is_ipv4(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() == 4
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.len() <= 3
                && p.bytes().all(|b| b.is_ascii_digit())
                && p.parse::<u8>().is_ok()
        })
}

/// `[NAMESPACE/]NAME` of a Gateway (`--gateway`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectRef {
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectRef {
    pub fn parse(s: &str) -> Result<ObjectRef, String> {
        let (namespace, name) = match s.split_once('/') {
            Some((ns, name)) => (Some(ns), name),
            None => (None, s),
        };
        if let Some(ns) = namespace
            && !names::is_dns1123_label(ns)
        {
            return Err(format!(
                "the namespace {ns:?} is not a valid namespace name (lowercase letters, digits and '-')"
            ));
        }
        if !names::is_dns1123_subdomain(name) {
            return Err(format!(
                "the name {name:?} is not a valid object name (lowercase letters, digits, '-' and '.')"
            ));
        }
        Ok(ObjectRef {
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
        })
    }

    /// The HTTPRoute `parentRefs` entry, with the defaults the server would add written out.
    pub fn parent_ref(&self) -> Value {
        let mut v = json!({
            "group": "gateway.networking.k8s.io",
            "kind": "Gateway",
            "name": self.name,
        });
        if let Some(ns) = &self.namespace {
            v["namespace"] = json!(ns);
        }
        v
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// `[NAMESPACE/]NAME:PORT` of the auth Service (`--auth-service`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceRef {
    pub namespace: Option<String>,
    pub name: String,
    pub port: u16,
}

impl ServiceRef {
    pub fn parse(s: &str) -> Result<ServiceRef, String> {
        let (target, port) = s
            .rsplit_once(':')
            .ok_or("it must name the port: [NAMESPACE/]NAME:PORT")?;
        let port = port
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("the port {port:?} is not a number from 1 to 65535"))?;
        let ObjectRef { namespace, name } = ObjectRef::parse(target)?;
        if !names::is_dns1035_label(&name) {
            return Err(format!(
                "the Service name {name:?} is not valid (at most 63 lowercase letters, digits and '-', starting with a letter)"
            ));
        }
        Ok(ServiceRef {
            namespace,
            name,
            port,
        })
    }

    /// The ExternalAuth `backendRef`, with the defaults the server would add written out.
    pub fn backend_ref(&self) -> Value {
        let mut v = json!({ "group": "", "kind": "Service", "name": self.name });
        if let Some(ns) = &self.namespace {
            v["namespace"] = json!(ns);
        }
        v["port"] = json!(self.port);
        v
    }

    /// The reference a `backendRef` written by [`ServiceRef::backend_ref`] names.
    pub fn of_backend_ref(v: &Value) -> Option<ServiceRef> {
        if !matches!(v["kind"].as_str(), None | Some("Service"))
            || !matches!(v["group"].as_str(), None | Some(""))
        {
            return None;
        }
        Some(ServiceRef {
            namespace: v["namespace"].as_str().map(str::to_owned),
            name: v["name"].as_str()?.to_owned(),
            port: u16::try_from(v["port"].as_u64()?).ok()?,
        })
    }
}

impl fmt::Display for ServiceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}:{}", self.name, self.port),
            None => write!(f, "{}:{}", self.name, self.port),
        }
    }
}

/// `--host`: a lowercase DNS name, optionally with a leading `*.` wildcard label (what both an
/// Ingress rule's `host` and an HTTPRoute's `hostnames` accept).
pub fn parse_host(s: &str) -> Result<String, String> {
    let name = s.strip_prefix("*.").unwrap_or(s);
    if names::is_dns1123_subdomain(name) && !is_ipv4(name) {
        Ok(s.to_owned())
    } else {
        Err(format!(
            "{s:?} is not a host name (lowercase letters, digits, '-' and '.', optionally starting with \"*.\"; no IP addresses)"
        ))
    }
}

/// `--ingress-class`, `--tls-secret`: an object name.
pub fn parse_object_name(s: &str) -> Result<String, String> {
    if names::is_dns1123_subdomain(s) {
        Ok(s.to_owned())
    } else {
        Err(format!(
            "{s:?} is not a valid object name (lowercase letters, digits, '-' and '.')"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_auth_url_is_a_plain_http_url_without_query() {
        for ok in [
            "http://auth.auth.svc.cluster.local/verify",
            "https://auth.example.com",
            "http://10.0.0.7:8080/oauth2/check-scopes_v1.2/",
            "http://auth:9000/",
        ] {
            assert_eq!(AuthUrl::parse(ok).map(|u| u.0), Ok(ok.to_owned()), "{ok}");
        }
        for (bad, why) in [
            ("auth.example.com/verify", "must start with http"),
            ("ftp://auth/x", "must start with http"),
            ("http://Auth.example.com/", "host"),
            ("http://user@auth/", "user information"),
            ("http://user:p/w@auth/", "user information"),
            ("http://auth:0/", "port"),
            ("http://auth:99999/", "port"),
            ("http://auth/verify?x=1", "query"),
            ("http://auth/verify#x", "query or a fragment"),
            ("http://auth/a/../b", "\"..\""),
            ("http://auth/a//b", "empty segments"),
            ("http://auth/$host", "contains '$'"),
            ("http://auth/a;proxy_pass", "contains ';'"),
            ("http://auth/a b", "contains ' '"),
            ("http://auth/a\nb", "contains '\\n'"),
            ("http://auth/%2e", "contains '%'"),
            ("http://[::1]/", "host"),
            ("http://auth/{x}", "contains '{'"),
        ] {
            let err = AuthUrl::parse(bad).unwrap_err();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
    }

    #[test]
    fn the_scopes_travel_as_a_query_and_the_base_is_read_back() {
        let u = AuthUrl::parse("http://auth.auth/verify").unwrap();
        let with = u.with_scopes("YWRtaW4gdXNlcg");
        assert_eq!(with, "http://auth.auth/verify?scopes=YWRtaW4gdXNlcg");
        assert_eq!(AuthUrl::of_annotation(&with), Some(u));
        assert_eq!(AuthUrl::of_annotation("http://auth.auth/verify"), None);
        assert_eq!(AuthUrl::of_annotation("http://$x/?scopes=a"), None);
    }

    #[test]
    fn gateway_and_auth_service_references() {
        assert_eq!(
            ObjectRef::parse("gateways/public").unwrap().parent_ref(),
            json!({"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "public", "namespace": "gateways"})
        );
        assert_eq!(
            ObjectRef::parse("public").unwrap().to_string(),
            "public".to_owned()
        );
        assert!(ObjectRef::parse("Gw/x").is_err());
        assert!(ObjectRef::parse("a/b/c").is_err());
        let s = ServiceRef::parse("auth/oauth:8080").unwrap();
        assert_eq!(
            s.backend_ref(),
            json!({"group": "", "kind": "Service", "name": "oauth", "namespace": "auth", "port": 8080})
        );
        assert_eq!(
            ServiceRef::of_backend_ref(&s.backend_ref()),
            Some(s.clone())
        );
        assert_eq!(s.to_string(), "auth/oauth:8080");
        for bad in [
            "oauth",
            "oauth:",
            "oauth:0",
            "oauth:70000",
            "2auth:80",
            "a/b/c:80",
        ] {
            assert!(ServiceRef::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hosts_are_dns_names_with_an_optional_wildcard() {
        assert!(parse_host("shop.example.com").is_ok());
        assert!(parse_host("*.example.com").is_ok());
        for bad in [
            "Shop.example.com",
            "10.0.0.1",
            "a..b",
            "*",
            "x.*.com",
            "a b",
        ] {
            assert!(parse_host(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn flags_that_belong_to_another_style_are_named() {
        let flags = RouteFlags {
            auth_url: Some(AuthUrl::parse("http://auth/").unwrap()),
            ingress_class: Some("nginx".into()),
            ..RouteFlags::default()
        };
        assert_eq!(
            flags.foreign_to(RouteStyle::Gateway),
            vec![
                ("--auth-url", "nginx-auth"),
                ("--ingress-class", "nginx-snippet or nginx-auth")
            ]
        );
        assert!(flags.foreign_to(RouteStyle::NginxAuth).is_empty());
    }
}
