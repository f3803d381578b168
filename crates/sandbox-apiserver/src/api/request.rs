//! What a request addresses: `RequestInfo` as k8s.io/apiserver resolves it (authorization and
//! routing read it), and the query and header values the handlers use.

use http::{HeaderMap, Method};

/// The request attributes authorization sees (k8s.io/apiserver RequestInfo).
#[derive(Debug, Clone, Default)]
pub struct RequestInfo {
    pub resource_request: bool,
    pub verb: String,
    pub group: String,
    pub version: String,
    pub namespace: String,
    pub resource: String,
    pub name: String,
    pub subresource: String,
    /// Path segments after the resource/name/subresource (unsupported deeper paths).
    pub extra: usize,
    /// `/api/v1/watch/…` legacy watch prefix.
    pub legacy_watch: bool,
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `RequestInfoFactory.NewRequestInfo`: what a path, method and query address.
pub fn request_info(method: &Method, path: &str, query: &[(String, String)]) -> RequestInfo {
    let mut info = RequestInfo {
        verb: method.as_str().to_lowercase(),
        ..Default::default()
    };
    let parts: Vec<String> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    let (group, rest) = match parts.first().map(String::as_str) {
        Some("api") if parts.len() >= 3 => (String::new(), &parts[1..]),
        Some("apis") if parts.len() >= 4 => (parts[1].clone(), &parts[2..]),
        _ => return info,
    };
    info.resource_request = true;
    info.group = group;
    info.version = rest[0].clone();
    let mut cur: Vec<String> = rest[1..].to_vec();
    if cur.first().map(String::as_str) == Some("watch") {
        info.legacy_watch = true;
        cur.remove(0);
    }
    if cur.first().map(String::as_str) == Some("namespaces") && cur.len() > 1 {
        info.namespace = cur[1].clone();
        if cur.len() > 2 && !matches!(cur[2].as_str(), "status" | "finalize") {
            cur = cur[2..].to_vec();
        }
    }
    info.resource = cur.first().cloned().unwrap_or_default();
    info.name = cur.get(1).cloned().unwrap_or_default();
    info.subresource = cur.get(2).cloned().unwrap_or_default();
    info.extra = cur.len().saturating_sub(3);
    let watch_param = query
        .iter()
        .any(|(k, v)| k == "watch" && !matches!(v.to_lowercase().as_str(), "false" | "0"));
    info.verb = match *method {
        Method::GET | Method::HEAD => {
            if info.legacy_watch || watch_param {
                "watch".into()
            } else if info.name.is_empty() {
                "list".into()
            } else {
                "get".into()
            }
        }
        Method::POST => "create".into(),
        Method::PUT => "update".into(),
        Method::PATCH => "patch".into(),
        Method::DELETE => {
            if info.name.is_empty() {
                "deletecollection".into()
            } else {
                "delete".into()
            }
        }
        ref m => m.as_str().to_lowercase(),
    };
    info
}

/// The first value of a query parameter.
pub fn query_get<'a>(q: &'a [(String, String)], key: &str) -> Option<&'a str> {
    q.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// A boolean query parameter (`true`/`1`).
pub fn parse_bool(v: Option<&str>) -> bool {
    matches!(v.map(str::to_lowercase).as_deref(), Some("true" | "1"))
}

/// The request's media type, without parameters, lower-cased.
pub fn media_type(h: &HeaderMap) -> String {
    h.get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|s| s.split(';').next().unwrap_or("").trim().to_lowercase())
        .unwrap_or_default()
}

/// Does the client ask for a `meta.k8s.io/v1` Table (kubectl get)?
pub fn wants_table(h: &HeaderMap) -> bool {
    h.get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| {
            a.split(',')
                .any(|part| part.contains("as=Table") && part.contains("g=meta.k8s.io"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_info_like_apiserver() {
        let q = vec![];
        let i = request_info(
            &Method::GET,
            "/apis/apps/v1/namespaces/shop/deployments/web",
            &q,
        );
        assert!(i.resource_request);
        assert_eq!(
            (
                i.verb.as_str(),
                i.group.as_str(),
                i.namespace.as_str(),
                i.resource.as_str(),
                i.name.as_str()
            ),
            ("get", "apps", "shop", "deployments", "web")
        );
        let i = request_info(&Method::GET, "/api/v1/namespaces/shop", &q);
        assert_eq!(
            (i.resource.as_str(), i.name.as_str(), i.namespace.as_str()),
            ("namespaces", "shop", "shop")
        );
        let i = request_info(&Method::GET, "/apis/apps/v1", &q);
        assert!(!i.resource_request);
        let i = request_info(&Method::GET, "/api/v1", &q);
        assert!(!i.resource_request);
        let w = vec![("watch".to_string(), "true".to_string())];
        assert_eq!(
            request_info(&Method::GET, "/api/v1/namespaces/x/services", &w).verb,
            "watch"
        );
        assert_eq!(
            request_info(&Method::DELETE, "/api/v1/namespaces/x/services", &q).verb,
            "deletecollection"
        );
    }
}
