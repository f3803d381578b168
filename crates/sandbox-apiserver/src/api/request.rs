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
    /// A list or watch whose field selector requires `metadata.name=X`: X (RBAC sees it as the
    /// name, and its 403 names the object); routing still treats the request as a collection's.
    pub selector_name: String,
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
        // `?watch=` only makes a collection's GET a watch; `/watch/…` paths always are.
        Method::GET | Method::HEAD => {
            if info.legacy_watch || (watch_param && info.name.is_empty()) {
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
    if info.name.is_empty()
        && matches!(info.verb.as_str(), "list" | "watch")
        && let Some(fs) = query_get(query, "fieldSelector")
        && let Ok(sel) = crate::model::selector::FieldSelector::parse(fs)
        && let Some(t) = sel
            .terms
            .iter()
            .find(|t| t.field == "metadata.name" && !t.negate)
        && !matches!(t.value.as_str(), "." | "..")
        && !t.value.contains(['/', '%'])
    {
        info.selector_name = t.value.clone();
    }
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

/// What a response is written as (`Accept`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Json,
    Yaml,
    /// A `meta.k8s.io` Table of this version (`v1`, `v1beta1`).
    Table(&'static str),
    /// `PartialObjectMetadata` of this version (an object, or each watch event's).
    Partial(&'static str),
    /// `PartialObjectMetadataList` of this version (a list).
    PartialList(&'static str),
}

/// The real server's output negotiation: the first acceptable clause of `Accept` by `q`,
/// JSON without one; 406 when none is acceptable. Tables and partial metadata are offered for
/// every verb; whether the answer can be one (an object or a list) is checked once it is
/// there ([`not_acceptable`]). (Protobuf is not emulated: such clauses are passed over.)
pub fn negotiate(h: &HeaderMap) -> Result<Output, crate::model::status::StatusBody> {
    negotiate_encoding(h).map(|(o, yaml)| {
        if yaml && o == Output::Json {
            Output::Yaml
        } else {
            o
        }
    })
}

/// [`negotiate`], with whether the answer is to be written as YAML (`application/yaml`, also
/// for a Table or partial metadata).
pub fn negotiate_encoding(
    h: &HeaderMap,
) -> Result<(Output, bool), crate::model::status::StatusBody> {
    let accept: Vec<&str> = h
        .get_all(http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let accept = accept.join(",");
    if accept.trim().is_empty() {
        return Ok((Output::Json, false));
    }
    /// One `Accept` clause: q, media type, other parameters.
    type Clause = (f64, String, Vec<(String, String)>);
    let mut clauses: Vec<Clause> = Vec::new();
    for clause in accept.split(',') {
        let mut parts = clause.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_lowercase();
        if media.is_empty() {
            continue;
        }
        let mut q = 1.0;
        let mut params = Vec::new();
        for p in parts {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            if k.trim() == "q" {
                q = v.trim().parse().unwrap_or(1.0);
            } else {
                params.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        if q > 0.0 {
            clauses.push((q, media, params));
        }
    }
    clauses.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(std::cmp::Ordering::Equal));
    for (_, media, params) in &clauses {
        let param = |k: &str| {
            params
                .iter()
                .find(|(pk, _)| pk == k)
                .map(|(_, v)| v.as_str())
        };
        let version = match param("v") {
            Some("v1") => "v1",
            Some("v1beta1") => "v1beta1",
            _ => "",
        };
        let meta_group = param("g") == Some("meta.k8s.io") && !version.is_empty();
        let yaml = media == "application/yaml";
        let json_like =
            yaml || matches!(media.as_str(), "application/json" | "*/*" | "application/*");
        if !json_like {
            continue;
        }
        match param("as") {
            None => return Ok((Output::Json, yaml)),
            Some("Table") if meta_group => return Ok((Output::Table(version), yaml)),
            Some("PartialObjectMetadata") if meta_group => {
                return Ok((Output::Partial(version), yaml));
            }
            Some("PartialObjectMetadataList") if meta_group => {
                return Ok((Output::PartialList(version), yaml));
            }
            _ => {}
        }
    }
    Err(crate::model::status::StatusBody::new(
        406,
        "NotAcceptable",
        "406: Not Acceptable\n\nAvailable representations: application/json, application/yaml, application/vnd.kubernetes.protobuf",
        Some(serde_json::json!({})),
    ))
}

/// The 406 of a partial-metadata answer that does not fit what was served: an object asked as
/// a `PartialObjectMetadataList` or a list as a `PartialObjectMetadata`. `%T` of the internal
/// object: `*core.ConfigMap`, `*apps.DeploymentList`, `*unstructured.Unstructured`…
pub fn not_acceptable(k: &dyn crate::kinds::Kind, list: bool) -> crate::model::status::StatusBody {
    let a = k.api();
    let go_type = match (k.encoding(), list) {
        (crate::kinds::Encoding::Unstructured, false) => "*unstructured.Unstructured".to_string(),
        (crate::kinds::Encoding::Unstructured, true) => {
            "*unstructured.UnstructuredList".to_string()
        }
        (_, false) => format!("*{}.{}", crate::store::internal_package(a.group), a.kind),
        (_, true) => format!(
            "*{}.{}",
            crate::store::internal_package(a.group),
            a.list_kind
        ),
    };
    let message = if list {
        format!(
            "you requested PartialObjectMetadata, but the requested object is a list ({go_type})"
        )
    } else {
        format!(
            "you requested PartialObjectMetadataList, but the requested object is not a list ({go_type})"
        )
    };
    crate::model::status::StatusBody::new(406, "NotAcceptable", message, None)
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
